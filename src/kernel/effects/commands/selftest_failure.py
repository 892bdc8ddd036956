"""The failure a `kernel self-test` check raises: explicit, so ``python -O`` keeps it.

A check never uses ``assert`` (``-O`` strips it, and a broken core would pass): it
tests its condition with ``if`` and raises `SelfTestFailure` with what it saw.
"""

from __future__ import annotations

__all__ = ["SelfTestFailure"]


class SelfTestFailure(AssertionError):
    """A self-test check saw something other than what it expects.

    Subclasses ``AssertionError`` so that checks written before it still count as
    failures; ``seen`` is what the check saw (printed after ``FAIL <name>:``).
    """

    def __init__(self, seen: object) -> None:
        super().__init__(str(seen))
        self.seen = seen
