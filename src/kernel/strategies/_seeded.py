"""Field values derived from one drawn seed, so a record costs hypothesis a few draws.

Hypothesis' cost grows with the number of draws (each is recorded, mutated and
replayed), so record strategies draw a seed (plus the few structural counts that
should shrink on their own) and derive every field from it with sha256. The seed
``0`` derives the minimal record (lowest ints, first choices, shortest texts), so
shrinking the seed still leads to a simple example.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from hypothesis import strategies as st

from kernel.identity import sha256_bytes

__all__ = ["SEEDS", "Stream"]

T = TypeVar("T")

SEEDS = st.integers(min_value=0, max_value=2**64 - 1)
"""The one draw a seeded record costs; hypothesis favours 0 and the boundaries."""

# Hostile but valid characters: astral, combining, control, line/paragraph separators,
# BOM, quotes, backslash, a slash (for path checks), the highest code point.
_ALPHABET = (
    "a",
    "Z",
    "0",
    " ",
    "\t",
    "\n",
    "\x00",
    "\x7f",
    "\xe9",
    "e\u0301",
    "\u2028",
    "\u2029",
    "\ufeff",
    "\U0001f600",
    "\U0010ffff",
    '"',
    "\\",
    "/",
    "\u4e2d",
    "\u00df",
)
_VISIBLE = tuple(c for c in _ALPHABET if c.strip())


class Stream:
    """Deterministic values from ``seed``: each call hashes the seed with a counter."""

    __slots__ = ("_count", "_minimal", "_seed")

    def __init__(self, seed: int) -> None:
        self._seed = seed.to_bytes(8, "big")
        self._count = 0
        self._minimal = seed == 0

    def _hex(self) -> str:
        self._count += 1
        return sha256_bytes(self._seed + self._count.to_bytes(4, "big"))

    def _next(self) -> bytes:
        return bytes.fromhex(self._hex())

    def integer(self, low: int, high: int) -> int:
        """An int in ``low..high`` inclusive; each bound one time in sixteen (edge cases).

        ``low`` for the minimal seed.
        """
        if self._minimal or high <= low:
            return low
        raw = self._next()
        if raw[0] < 32:
            return low if raw[0] < 16 else high
        return low + int.from_bytes(raw[1:9], "big") % (high - low + 1)

    def flag(self) -> bool:
        """A bool (False for the minimal seed)."""
        return self.integer(0, 1) == 1

    def pick(self, choices: Sequence[T]) -> T:
        """One of ``choices`` (the first for the minimal seed)."""
        return choices[self.integer(0, len(choices) - 1)]

    def maybe(self, make: Callable[[], T]) -> T | None:
        """None or ``make()`` (None for the minimal seed)."""
        return make() if self.flag() else None

    def digest(self) -> str:
        """A 64-char lowercase hex digest, distinct from every other one of this stream."""
        return self._hex()

    def text(self, max_size: int = 8, *, min_size: int = 0, nonblank: bool = False) -> str:
        """Unicode text from a hostile alphabet; ``nonblank`` starts it with a visible char."""
        size = self.integer(max(min_size, 1 if nonblank else 0), max_size)
        if size == 0:
            return ""
        if self._minimal:
            return "a"
        raw = self._next()
        pool = _VISIBLE if nonblank else _ALPHABET
        return pool[raw[0] % len(pool)] + "".join(
            _ALPHABET[b % len(_ALPHABET)] for b in raw[1:size]
        )

    def texts(
        self, max_count: int, *, min_count: int = 0, nonblank: bool = False
    ) -> tuple[str, ...]:
        """Up to ``max_count`` texts (not necessarily unique)."""
        count = self.integer(min_count, max_count)
        return tuple(self.text(nonblank=nonblank) for _ in range(count))

    def unique_texts(
        self, max_count: int, *, min_count: int = 0, nonblank: bool = True
    ) -> tuple[str, ...]:
        """Up to ``max_count`` distinct texts (a repeat gets its position appended)."""
        seen: dict[str, None] = {}
        for position in range(self.integer(min_count, max_count)):
            text = self.text(nonblank=nonblank)
            while text in seen:
                text = f"{text}{position}"
            seen[text] = None
        return tuple(seen)

    def digests(self, max_count: int, *, min_count: int = 0) -> tuple[str, ...]:
        """Up to ``max_count`` distinct digests."""
        return tuple(self.digest() for _ in range(self.integer(min_count, max_count)))
