"""What a verb tells the person at the terminal, apart from its outcome line.

Three kinds of output, so that every verb is quiet or chatty the same way:

- the outcome: one line per exit code (stdout, or stderr for exit 2), always printed;
- ``info``: what was written where (stdout), hidden by ``-q``;
- ``progress``: attempts started/finished, check results, reruns, replay (stderr),
  shown when stderr is a terminal or with ``-v``, never with ``-q``; so a pipe or a
  CI log stays quiet unless asked.

`set_verbosity` is called once by the CLI's ``main`` (``-v`` counts up, ``-q`` down).
"""

from __future__ import annotations

import sys
import threading

__all__ = ["info", "progress", "progress_enabled", "set_verbosity", "verbosity"]

_state = {"verbosity": 0}
_lock = threading.Lock()


def set_verbosity(level: int) -> None:
    """-1 and below: quiet; 0: default; 1 and above: verbose."""
    _state["verbosity"] = level


def verbosity() -> int:
    """The level `set_verbosity` set (0 unless a CLI set it)."""
    return _state["verbosity"]


def progress_enabled() -> bool:
    """True when progress lines are shown (see the module rules)."""
    level = _state["verbosity"]
    return level > 0 or (level == 0 and sys.stderr.isatty())


def progress(message: str) -> None:
    """One progress line on stderr, when enabled (whole lines, even from threads)."""
    if progress_enabled():
        with _lock:
            print(message, file=sys.stderr, flush=True)


def info(message: str) -> None:
    """One informational line on stdout, unless quiet."""
    if _state["verbosity"] >= 0:
        print(message)
