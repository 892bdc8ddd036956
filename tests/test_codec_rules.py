"""Construction checks (`kernel.records.rules`): the fast answer (``_Rule.accepts``, the
record-wide fast path) agrees with the field-by-field check that names the bad field, for
every value."""

from __future__ import annotations

import enum
import re
import typing
from typing import Any, Literal

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.errors import FieldError
from kernel.records.codec import Record, field_check
from kernel.records.identity import MAX_SAFE_INT
from kernel.records.rules import _rule, field_checks
from kernel.records.values import (
    Count,
    Digest,
    Digests,
    NonBlank,
    OptionalDigest,
    SourceSpan,
    Text,
    Timestamp,
    UniqueTexts,
    VersionPairsField,
)


class Colour(enum.StrEnum):
    """A closed vocabulary."""

    RED = "red"
    BLUE = "blue"


class Size(enum.IntEnum):
    """An int enum: its members are ints, but not exact ints."""

    ONE = 1


@attrs.frozen(kw_only=True)
class Cat(Record):
    """A member of a tagged union."""

    kind: Literal["cat"] = "cat"
    lives: Count


@attrs.frozen(kw_only=True)
class Dog(Record):
    """Another member."""

    kind: Literal["dog"] = "dog"
    name: NonBlank


HINTS: list[Any] = [
    str,
    int,
    bool,
    type(None),
    Colour,
    enum.StrEnum,
    SourceSpan,
    Literal["a", "b"],
    Literal[1, True, Colour.RED],
    str | None,
    int | None,
    Colour | None,
    Cat | Dog,
    Cat | Dog | None,
    str | int,
    str | SourceSpan,
    tuple[str, ...],
    tuple[int, ...],
    tuple[str | None, ...],
    tuple[int | None, ...],
    tuple[str | int, ...],
    tuple[Colour, ...],
    tuple[SourceSpan, ...],
    tuple[Cat | Dog, ...],
    tuple[Count, ...],
    tuple[tuple[str, str], ...],
    tuple[str, int],
    tuple[str, object],
    tuple[object, ...],
    tuple[str, ...] | None,
    tuple[Count, ...] | Colour,
    Digest,
    OptionalDigest,
    Text,
    NonBlank,
    Count,
    Count | None,
    Digests,
    VersionPairsField,
    Timestamp,
    UniqueTexts,
]

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-MAX_SAFE_INT - 2, max_value=MAX_SAFE_INT + 2),
    st.sampled_from([0, -1, 1, MAX_SAFE_INT, -MAX_SAFE_INT, MAX_SAFE_INT + 1, 2**64]),
    st.floats(allow_nan=False),
    st.text(max_size=6),
    st.text(st.characters(categories=["Cs"]), min_size=1, max_size=2),
    st.sampled_from(["a", "b", "c", " ", "", "a" * 64, "A" * 64, "2026-01-01T00:00:00Z"]),
    st.sampled_from([Colour.RED, Colour.BLUE, Size.ONE]),
    st.builds(SourceSpan, text=st.text(max_size=3), start=st.just(0), end=st.integers(0, 3)),
    st.builds(Cat, lives=st.integers(0, 9)),
    st.builds(Dog, name=st.just("rex")),
    st.binary(max_size=2),
)
VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4).map(tuple), st.lists(inner, max_size=3)),
    max_leaves=8,
)


def _check_passes(hint: Any, value: object) -> bool:
    check = field_check(hint, "Sample.field")
    if check is None:
        return True
    try:
        check(value, "field")
    except FieldError:
        return False
    return True


def _hint_id(hint: object) -> str:
    # Without the functions' addresses: parallel workers must collect the same ids.
    return re.sub(r" at 0x[0-9a-f]+", "", str(hint))


@pytest.mark.parametrize("hint", HINTS, ids=_hint_id)
@settings(max_examples=60)
@given(value=VALUES)
def test_accepts_agrees_with_the_check_that_names_the_error(hint: Any, value: object) -> None:
    """For all values: the fast answer is True exactly when the check raises nothing."""
    rule = _rule(hint, "Sample.field")
    expected = _check_passes(hint, value)
    assert rule is None or rule.accepts(value) is expected


@pytest.mark.parametrize("hint", HINTS, ids=_hint_id)
@settings(max_examples=40)
@given(value=st.lists(VALUES, max_size=4).map(tuple))
def test_accepts_agrees_on_tuples_of_every_kind(hint: Any, value: tuple[object, ...]) -> None:
    """The same for tuples of the hint's items (item rules, all at once)."""
    for wrapped in (tuple[hint, ...], tuple[hint, hint]):
        rule = _rule(wrapped, "Sample.field")
        assert rule is None or rule.accepts(value) is _check_passes(wrapped, value)


FIELDS: list[tuple[str, Any, bool]] = [
    ("text", str, True),
    ("number", int, True),
    ("maybe_text", str | None, True),
    ("maybe_number", int | None, True),
    ("colour", Colour, True),
    ("span", SourceSpan, True),
    ("pet", Cat | Dog, True),
    ("mixed", str | int, True),
    ("digest", Digest, True),
    ("names", tuple[str, ...], True),
    ("mode", Literal["a", "b"], True),
    ("defaulted", str, False),
    ("counts", tuple[Count, ...], False),
]

_GOOD: dict[str, st.SearchStrategy[object]] = {
    "text": st.text(max_size=4),
    "number": st.integers(-5, 5),
    "maybe_text": st.none() | st.text(max_size=4),
    "maybe_number": st.none() | st.integers(-5, 5),
    "colour": st.sampled_from(Colour),
    "span": st.just(SourceSpan(text="s", start=0, end=1)),
    "pet": st.just(Dog(name="rex")),
    "mixed": st.text(max_size=2) | st.integers(0, 3),
    "digest": st.just("a" * 64),
    "names": st.lists(st.text(max_size=2), max_size=3).map(tuple),
    "mode": st.sampled_from(["a", "b"]),
    "defaulted": st.text(max_size=2),
    "counts": st.lists(st.integers(0, 3), max_size=3).map(tuple),
}


@st.composite
def _kwargs(draw: st.DrawFn) -> dict[str, object]:
    """Mostly good fields; some bad, some left out (defaulted ones and required ones)."""
    kwargs: dict[str, object] = {}
    for name, _, _ in FIELDS:
        choice = draw(st.integers(0, 9))
        if choice == 0:
            continue
        kwargs[name] = draw(VALUES) if choice == 1 else draw(_GOOD[name])
    return kwargs


def _one_by_one(kwargs: dict[str, object]) -> FieldError | None:
    """The reference: each field checked by `field_check`, in declaration order."""
    for name, hint, _ in FIELDS:
        if name in kwargs:
            check = field_check(hint, f"Sample.{name}")
            if check is None:
                continue
            try:
                check(kwargs[name], name)
            except FieldError as e:
                return e
    return None


_RUN = field_checks("Sample", FIELDS)


@pytest.mark.slow
@settings(max_examples=400)
@given(_kwargs())
def test_a_record_s_checks_refuse_the_first_bad_field_as_one_by_one_checks_do(
    kwargs: dict[str, object],
) -> None:
    """For all keyword arguments: the record-wide fast path passes exactly when every
    field passes its own check, and otherwise raises that check's error for the first
    bad field in declaration order (same field, same message)."""
    expected = _one_by_one(kwargs)
    if expected is None:
        _RUN(kwargs)
        return
    with pytest.raises(FieldError) as caught:
        _RUN(kwargs)
    assert (caught.value.kernel_field, caught.value.reason) == (
        expected.kernel_field,
        expected.reason,
    )


def test_every_record_s_annotations_compile_to_rules() -> None:
    """Each field of the sample records has a rule whose two answers exist."""
    for cls in (Cat, Dog, SourceSpan):
        hints = typing.get_type_hints(cls, include_extras=True)
        for field in attrs.fields(cls):
            rule = _rule(hints[field.name], field.name)
            assert rule is not None
            assert callable(rule.accepts)
