"""Probe package: one module per row of the capability table (docs/guard.md)."""

TARGET = "guard-probe-target.txt"
"""What the runtime proofs open: a name in the working directory that does not exist
(and the audit hook of the proof blocks the open before it happens)."""
