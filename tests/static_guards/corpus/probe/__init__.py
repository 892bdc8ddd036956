"""Probe package: one module per row of the capability table (docs/guard.md)."""
