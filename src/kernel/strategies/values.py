"""Strategies for canonical JSON values and the shared primitives of `kernel.values`."""

from __future__ import annotations

from hypothesis import strategies as st

from kernel.identity import MAX_SAFE_INT
from kernel.values import BudgetCharge, SourceSpan

__all__ = [
    "budget_charges",
    "digests",
    "json_values",
    "source_spans",
    "texts",
    "version_pairs",
]

# Valid Unicode text: every code point but the surrogate block (which UTF-8 cannot encode).
texts = st.text(st.characters(codec="utf-8"), max_size=24)
"""Unicode strings including astral characters, control characters and U+2028/9."""

digests = st.binary(min_size=32, max_size=32).map(bytes.hex)
"""64-char lowercase hex digests."""

safe_ints = st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)


def json_values(max_leaves: int = 30) -> st.SearchStrategy[object]:
    """Portable canonical-JSON values: dicts, lists, tuples, str, safe ints, bool, None."""
    scalars = st.none() | st.booleans() | safe_ints | texts
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=6)
            | st.lists(children, max_size=6).map(tuple)
            | st.dictionaries(texts, children, max_size=6)
        ),
        max_leaves=max_leaves,
    )


@st.composite
def source_spans(draw: st.DrawFn) -> SourceSpan:
    """A valid `SourceSpan` (``0 <= start <= end``)."""
    start = draw(st.integers(min_value=0, max_value=10_000))
    end = draw(st.integers(min_value=start, max_value=start + 500))
    return SourceSpan(
        text=draw(texts),
        start=start,
        end=end,
        sentence_index=draw(st.none() | st.integers(min_value=0, max_value=500)),
    )


budget_charges = st.builds(
    BudgetCharge,
    candidates=st.integers(min_value=1, max_value=5),
    steps=st.integers(min_value=1, max_value=5),
)
"""Positive budget charges."""

version_pairs = st.dictionaries(
    st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=8),
    st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=8),
    max_size=4,
).map(lambda d: tuple(sorted(d.items())))
"""Sorted, unique ``(name, version)`` pairs."""
