"""The ``kernel`` console script: an unchanged warm ``kernel guard`` answers first.

Rules this module enforces:

- before deciding, only `sys` is imported: ``kernel guard ...`` whose recorded run
  `kernel.guard.fastpath` can replay prints that output and exits with its code
  without loading argparse, the command table or the rest of the guard;
- ``kernel --version`` prints the version from `kernel` alone (argparse and its
  imports are most of a bare run's start-up);
- everything else (another verb, a guard run that cannot be replayed) is
  `kernel.effects.cli.main`, unchanged.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> int:
    """Run the ``kernel`` command (see `kernel.effects.cli.main`)."""
    words = sys.argv[1:]
    if words == ["--version"]:
        from kernel import __version__

        sys.stdout.write(f"kernel {__version__}\n")
        return 0
    if words[:1] == ["guard"]:
        from kernel.guard.fastpath import replay_cli

        replayed = replay_cli(words[1:])
        if replayed is not None:
            return replayed
    from kernel.effects.cli import main as run

    return run(words)
