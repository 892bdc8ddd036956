"""Field values derived from one drawn seed, so a record costs hypothesis one draw.

Hypothesis' cost grows with the number of draws (each is recorded, mutated and
replayed: a second draw alone halves the rate), so record strategies draw one int and
derive every field from it with sha256, a structural count included (`seeded`). The
draw ``0`` derives the minimal record (lowest count, lowest ints, first choices,
shortest texts), so shrinking the draw still leads to a simple example.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

from hypothesis import strategies as st

from kernel.records.identity import sha256_bytes

__all__ = ["SEEDS", "Stream", "derive", "seeded"]

T = TypeVar("T")

SEEDS = st.integers(min_value=0, max_value=2**64 - 1)
"""The one draw a seeded record costs; hypothesis favours 0 and the boundaries."""


def seeded(make: Callable[[int, Stream], T], low: int = 0, high: int = 0) -> st.SearchStrategy[T]:
    """Values ``make(count, stream)`` from one draw (`derive`): a count in ``low..high``
    and a stream."""
    return SEEDS.map(functools.partial(derive, make, low, high))


def derive(make: Callable[[int, Stream], T], low: int, high: int, drawn: int) -> T:
    """``make(count, stream)`` from one drawn int: the count in ``low..high`` is its
    remainder (hypothesis draws mostly below 2**64 whatever the bound, so high bits
    would leave it at ``low``) and the rest seeds the stream. ``drawn`` 0 gives ``low``
    and the minimal stream."""
    span = high - low + 1
    return make(low + drawn % span, Stream(drawn // span))


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


_CHAR_OF_BYTE = tuple(_ALPHABET[b % len(_ALPHABET)] for b in range(256))


class Stream:
    """Deterministic values from ``seed``.

    Each digest hashes the seed with a counter. Other values are taken from a pool of
    hashed bits (a big int, refilled with the next hash when it runs short): a small
    int or a text costs a ``divmod``, not a hash of its own, so a record of some forty
    values costs a handful of hashes.
    """

    __slots__ = ("_count", "_minimal", "_pool", "_seed")

    def __init__(self, seed: int) -> None:
        self._seed = seed.to_bytes(8, "big")
        self._count = 0
        self._minimal = seed == 0
        self._pool = 0

    def _hex(self) -> str:
        self._count += 1
        return sha256_bytes(self._seed + self._count.to_bytes(4, "big"))

    def _below(self, bound: int) -> int:
        """A number in ``0 .. bound - 1`` (``bound`` >= 1) taken from the pool."""
        pool = self._pool
        # 64 spare bits keep the remainder as good as uniform for any bound.
        while pool < bound << 64:
            pool = pool << 256 | int.from_bytes(bytes.fromhex(self._hex()), "big")
        self._pool, value = divmod(pool, bound)
        return value

    def integer(self, low: int, high: int) -> int:
        """An int in ``low..high`` inclusive; each bound one time in sixteen (edge cases).

        ``low`` for the minimal seed.
        """
        if self._minimal or high <= low:
            return low
        drawn = self._below((high - low + 1) << 4)
        edge = drawn & 15
        if edge < 2:
            return low if edge == 0 else high
        return low + (drawn >> 4)

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
        raw = self._below(1 << (8 * size)).to_bytes(size, "big")
        pool = _VISIBLE if nonblank else _ALPHABET
        return pool[raw[0] % len(pool)] + "".join(map(_CHAR_OF_BYTE.__getitem__, raw[1:]))

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
