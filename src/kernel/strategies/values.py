"""Strategies for canonical JSON values and the shared primitives of `kernel.records.values`."""

from __future__ import annotations

import datetime

from hypothesis import strategies as st

from kernel.errors import ParameterValueError
from kernel.records.codec import short_repr
from kernel.records.identity import MAX_SAFE_INT
from kernel.records.values import BudgetCharge, Kind, SourceSpan
from kernel.strategies._seeded import SEEDS, Stream, seeded

__all__ = [
    "budget_charges",
    "digests",
    "json_values",
    "of_kind",
    "source_spans",
    "texts",
    "version_pairs",
]

# Valid Unicode text: every code point but the surrogate block (which UTF-8 cannot encode).
_TEXTS = st.text(st.characters(codec="utf-8"), max_size=24)
_DIGESTS = st.binary(min_size=32, max_size=32).map(bytes.hex)
_SAFE_INTS = st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)


def texts() -> st.SearchStrategy[str]:
    """Unicode strings including astral characters, control characters and U+2028/9."""
    return _TEXTS


def digests() -> st.SearchStrategy[str]:
    """64-char lowercase hex digests."""
    return _DIGESTS


def json_values(max_leaves: int = 30) -> st.SearchStrategy[object]:
    """Portable canonical-JSON values: dicts, lists, tuples, str, safe ints, bool, None."""
    scalars = st.none() | st.booleans() | _SAFE_INTS | _TEXTS
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=6)
            | st.lists(children, max_size=6).map(tuple)
            | st.dictionaries(_TEXTS, children, max_size=6)
        ),
        max_leaves=max_leaves,
    )


def source_spans() -> st.SearchStrategy[SourceSpan]:
    """A valid `SourceSpan` (``0 <= start <= end``)."""
    return _SOURCE_SPANS


def seeded_span(stream: Stream) -> SourceSpan:
    """A valid `SourceSpan` derived from ``stream`` (for seeded record strategies)."""
    start = stream.integer(0, 10_000)
    return SourceSpan(
        text=stream.text(24),
        start=start,
        end=stream.integer(start, start + 500),
        sentence_index=stream.maybe(lambda: stream.integer(0, 500)),
    )


def seeded_spans(stream: Stream, max_count: int = 3) -> tuple[SourceSpan, ...]:
    """Up to ``max_count`` spans derived from ``stream``."""
    return tuple(seeded_span(stream) for _ in range(stream.integer(0, max_count)))


def seeded_charge(stream: Stream) -> BudgetCharge:
    """A positive `BudgetCharge` derived from ``stream``."""
    return BudgetCharge(candidates=stream.integer(1, 5), steps=stream.integer(1, 5))


_SOURCE_SPANS = SEEDS.map(lambda seed: seeded_span(Stream(seed)))
_BUDGET_CHARGES = st.builds(
    BudgetCharge,
    candidates=st.integers(min_value=1, max_value=5),
    steps=st.integers(min_value=1, max_value=5),
)
_VERSION_PAIRS = seeded(
    lambda count, s: tuple(
        (name, s.text(min_size=1)) for name in sorted(s.unique_texts(count, min_count=count))
    ),
    0,
    4,
)


def budget_charges() -> st.SearchStrategy[BudgetCharge]:
    """Positive budget charges."""
    return _BUDGET_CHARGES


def version_pairs() -> st.SearchStrategy[tuple[tuple[str, str], ...]]:
    """Sorted, unique ``(name, version)`` pairs."""
    return _VERSION_PAIRS


_OF_KIND: dict[str, st.SearchStrategy[object]] = {
    "digest": _DIGESTS,
    "optional digest": st.none() | _DIGESTS,
    "text": _TEXTS,
    "non-blank text": _TEXTS.filter(lambda text: bool(text.strip())),
    "count": st.integers(min_value=0, max_value=MAX_SAFE_INT),
    "positive": st.integers(min_value=1, max_value=MAX_SAFE_INT),
    "safe int": _SAFE_INTS,
    "digests": st.lists(_DIGESTS, max_size=4).map(tuple),
    "version pairs": _VERSION_PAIRS,
    "timestamp": st.builds(
        lambda moment, fraction: moment.isoformat(timespec="seconds") + fraction + "Z",
        st.datetimes(
            min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31)
        ),
        st.sampled_from(["", ".5", ".123456789"]),
    ),
    "unique texts": st.lists(_TEXTS, max_size=4, unique=True).map(tuple),
}


def of_kind(kind: Kind) -> st.SearchStrategy[object]:
    """Valid values of a field kind of `kernel.records.values` (``of_kind(kind_of(digest))``).

    Raises:
        ParameterValueError: ``kind`` is not one of `kernel.records.values`' kinds (a
            ``ValueError``).
    """
    strategy = _OF_KIND.get(kind.name)
    if strategy is None:
        raise ParameterValueError(
            "of_kind", "kind", "one of kernel.records.values' kinds", short_repr(kind.name)
        )
    return strategy
