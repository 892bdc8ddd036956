"""Strategies for canonical JSON values and the shared primitives of `kernel.values`."""

from __future__ import annotations

from hypothesis import strategies as st

from kernel.identity import MAX_SAFE_INT
from kernel.values import BudgetCharge, Kind, SourceSpan

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


@st.composite
def source_spans(draw: st.DrawFn) -> SourceSpan:
    """A valid `SourceSpan` (``0 <= start <= end``)."""
    start = draw(st.integers(min_value=0, max_value=10_000))
    end = draw(st.integers(min_value=start, max_value=start + 500))
    return SourceSpan(
        text=draw(_TEXTS),
        start=start,
        end=end,
        sentence_index=draw(st.none() | st.integers(min_value=0, max_value=500)),
    )


_BUDGET_CHARGES = st.builds(
    BudgetCharge,
    candidates=st.integers(min_value=1, max_value=5),
    steps=st.integers(min_value=1, max_value=5),
)
_VERSION_PAIRS = st.dictionaries(
    st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=8),
    st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=8),
    max_size=4,
).map(lambda d: tuple(sorted(d.items())))


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
}


def of_kind(kind: Kind) -> st.SearchStrategy[object]:
    """Valid values of a field kind of `kernel.values` (``of_kind(kind_of(digest))``).

    Raises:
        KeyError: ``kind`` is not one of `kernel.values`' kinds.
    """
    return _OF_KIND[kind.name]
