"""The ``kernel`` console script: an unchanged warm ``kernel guard`` answers first.

Rules this module enforces:

- before deciding, only `sys` and `os` are imported: ``kernel guard ...`` whose recorded
  run `kernel.guard.fastpath` can replay prints that output and exits with its code
  without loading argparse, the command table or the rest of the guard;
- ``kernel --version`` prints the version from `kernel` alone (argparse and its
  imports are most of a bare run's start-up);
- the console script (`script`) leaves a run answered that way, and any full
  ``kernel guard`` run, at once, once its output is flushed: the interpreter's own
  shutdown would tidy up nothing such a run made (its caches are written and closed),
  and after a full run it frees the syntax trees' leftovers and the effect map of
  installed code object by object (tens of milliseconds on a large tree); for the
  same reason a full ``kernel guard`` run there has no cyclic collection (its objects
  live until the process ends; the scan pauses the collector anyway), but for the
  ``--add-suppressions`` codemod (libcst's trees hold reference cycles), and its
  heap keeps the memory each file's parse frees for the next (`_keep_freed_heap`);
- everything else (another verb, a guard run that cannot be replayed) is
  `kernel.effects.cli.main`, unchanged.
"""

from __future__ import annotations

import os
import sys

__all__ = ["main", "script"]


def _answered(words: list[str]) -> int | None:
    """The exit code of a run answered before the command table loads, or None."""
    if words == ["--version"]:
        from kernel import __version__

        sys.stdout.write(f"kernel {__version__}\n")
        return 0
    if words[:1] != ["guard"]:
        return None
    from kernel.guard.fastpath import replay_cli

    return replay_cli(words[1:])


def main() -> int:
    """Run the ``kernel`` command (see `kernel.effects.cli.main`)."""
    words = sys.argv[1:]
    answered = _answered(words)
    if answered is not None:
        return answered
    from kernel.effects.cli import main as run

    return run(words)


_HEAP_BLOCK = 16 << 20
"""Twice this is the heap glibc keeps free after `_keep_freed_heap` (at most 32 MB)."""


def _keep_freed_heap() -> None:
    """Keep what the heap frees for what is allocated next (glibc; elsewhere nothing).

    A check parses file after file, and each file's parse (its source, tokens and the
    blocks of its syntax tree) is freed before the next one's is allocated. glibc's
    malloc gives the top of its heap back to the system whenever more than its trim
    threshold (128 kB) lies free there, so the heap shrank and grew again file after
    file, each time through fresh pages, each page a fault: 15,000 to 30,000 of them
    over Django (20-40 ms of a cold run, as long-lived objects happened to land).
    Freeing a block larger than the mmap threshold raises that threshold to the block's
    size and the trim threshold to twice it (mallopt(3): the dynamic mmap threshold),
    and the process ends with the run. The block comes from ``calloc`` of fresh pages
    (zero already: none is written) and is freed at once."""
    bytes(_HEAP_BLOCK)


def script() -> int:
    """`main` as the ``kernel`` console script runs it: an early answer, and any
    ``kernel guard`` run, exits here."""
    words = sys.argv[1:]
    answered = _answered(words)
    if answered is None:
        if words[:1] == ["guard"]:
            # The process ends with this run (below): the cyclic collector would only
            # walk, again and again, the imports' and the check's objects, which live
            # until then and hold no garbage cycle worth a pass (8 ms of a cold Django run).
            import gc

            gc.disable()
            _keep_freed_heap()
        from kernel.effects.cli import main as run

        answered = run(words)
        if words[:1] != ["guard"]:
            return answered
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: the interpreter's shutdown reports it as it does
        return answered
    os._exit(answered)
