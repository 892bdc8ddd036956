"""`ExitStatus`: the one source of the `kernel` command's exit codes.

Every verb's handler returns one of these; `kernel.effects.cli.main` returns it as the
process status. A test holds the command modules to it (no bare integer status).
"""

from __future__ import annotations

import enum

__all__ = ["ExitStatus"]


class ExitStatus(enum.IntEnum):
    """What a `kernel` run ended with, as the process exit status."""

    OK = 0
    """Success: recorded, verified, replay match, consensus."""
    REFUSED = 1
    """A refusal, violations or a replay mismatch (the reason codes on one line)."""
    USAGE = 2
    """Unusable input or usage (one line naming the file and field; nothing written)."""
    NO_CONSENSUS = 3
    """``kernel corroborate``: no strict majority of the runs agreed byte for byte."""
    INTERRUPTED = 130
    """Stopped by Ctrl-C (128 + SIGINT, as a shell reports it)."""
