"""Codec branches the main codec tests do not reach: record classes the codec must
refuse to compile (named), fixed-size tuples holding records or enums, how wrong JSON
types are named, kind-checked fields left at their default, and id-only records."""

from __future__ import annotations

import enum
import hashlib
import json
from typing import Any

import attrs
import pytest

from kernel.errors import CanonicalizationError, FieldError, ParameterTypeError, RecordError
from kernel.records.codec import UNSEALED, Identity, Record, compute_id, identity_payload, nested_id
from kernel.records.values import Count, digest


class Colour(enum.StrEnum):
    RED = "red"


@attrs.frozen(kw_only=True)
class Leaf(Record):
    name: str


@attrs.frozen(kw_only=True)
class Pairs(Record):
    """Fixed-size tuples: one holding a record, one an enum, one plain."""

    __identity__ = Identity(field="pairs_id")

    pairs_id: str = attrs.field(default=UNSEALED, validator=digest)
    tagged: tuple[Leaf, int]
    coloured: tuple[Colour, str]
    plain: tuple[str, int]


def _stdlib_id(payload: dict[str, Any]) -> str:
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def test_fixed_tuples_of_records_and_enums_encode_and_hash_in_nested_form() -> None:
    record = Pairs(tagged=(Leaf(name="x"), 1), coloured=(Colour.RED, "y"), plain=("z", 2))
    document = record.to_dict()
    assert document["tagged"] == [{"name": "x"}, 1]
    assert document["coloured"] == ["red", "y"]
    assert document["plain"] == ["z", 2]
    assert Pairs.from_dict(document) == record
    payload = identity_payload(record)
    assert payload == {
        "pairs_id": "",
        "tagged": [{"name": "x"}, 1],
        "coloured": ["red", "y"],
        "plain": ["z", 2],
    }
    assert compute_id(record) == _stdlib_id(payload)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("xz", "tagged: expected an array, got string"),
        ([{"name": "x"}], "tagged: expected 2 items, got 1"),
        ([{}, 1], "tagged[0]"),
    ],
)
def test_a_malformed_fixed_tuple_is_refused_with_its_path(value: object, message: str) -> None:
    document = Pairs(tagged=(Leaf(name="x"), 1), coloured=(Colour.RED, "y"), plain=("z", 2))
    with pytest.raises(RecordError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Pairs.from_dict(document.to_dict() | {"tagged": value})


@pytest.mark.parametrize(("value", "found"), [({}, "object"), ((), "tuple"), (1.5, "number")])
def test_a_wrong_json_type_is_named(value: object, found: str) -> None:
    with pytest.raises(RecordError, match=f"name: expected string, got {found}"):
        Leaf.from_dict({"name": value})


def test_a_non_json_value_is_refused_at_construction_and_cannot_be_sealed() -> None:
    """The annotation checks a field without a validator of its own; a value smuggled
    in after construction makes the id a CanonicalizationError naming the type, never
    a silent repr."""
    with pytest.raises(FieldError, match=r"Pairs.plain\[1\]: expected an integer"):
        Pairs(tagged=(Leaf(name="x"), 1), coloured=(Colour.RED, "y"), plain=("z", {1}))  # type: ignore[arg-type]
    pairs = Pairs(tagged=(Leaf(name="x"), 1), coloured=(Colour.RED, "y"), plain=("z", 2))
    object.__setattr__(pairs, "plain", ("z", {1}))
    with pytest.raises(CanonicalizationError, match="set"):
        compute_id(pairs, cached=False)


@attrs.frozen(kw_only=True)
class Middle(Record):
    leaf: Leaf
    maybe: Leaf | None
    colour: Colour | None
    nothing: None = None


@attrs.frozen(kw_only=True)
class Outer(Record):
    __identity__ = Identity(field="outer_id")

    outer_id: str = attrs.field(default=UNSEALED, validator=digest)
    middle: Middle
    maybe: Middle | None


def test_records_nested_two_deep_and_optional_fields_hash_in_nested_form() -> None:
    middle = Middle(leaf=Leaf(name="a"), maybe=None, colour=Colour.RED)
    record = Outer(
        middle=middle, maybe=Middle(leaf=Leaf(name="b"), maybe=Leaf(name="c"), colour=None)
    )
    nested = {"leaf": {"name": "a"}, "maybe": None, "colour": "red", "nothing": None}
    other = {"leaf": {"name": "b"}, "maybe": {"name": "c"}, "colour": None, "nothing": None}
    assert record.to_dict() == {"outer_id": record.outer_id, "middle": nested, "maybe": other}
    assert compute_id(record) == _stdlib_id({"outer_id": "", "middle": nested, "maybe": other})
    assert Outer.from_dict(record.to_dict()) == record
    with pytest.raises(RecordError, match="nothing: expected null"):
        Middle.from_dict(nested | {"nothing": 0})


@attrs.frozen(kw_only=True)
class Wrapper(Record):
    n: int

    def __attrs_post_init__(self) -> None:
        Counted(n=self.n)


def test_an_error_from_a_record_built_inside_another_keeps_the_inner_name() -> None:
    with pytest.raises(FieldError, match=r"^Counted\.n"):
        Wrapper(n=-1)


@attrs.frozen(kw_only=True)
class Counted(Record):
    n: Count = 0
    m: Count = 0


def test_kind_checked_fields_left_at_their_default_are_not_checked_twice() -> None:
    assert Counted().to_dict() == {"n": 0, "m": 0}
    assert Counted(m=3).m == 3
    with pytest.raises(FieldError, match=r"Counted\.n"):
        Counted(n=-1)


@attrs.frozen(kw_only=True)
class OnlyId(Record):
    __identity__ = Identity(field="only_id")

    only_id: str = attrs.field(default=UNSEALED, validator=digest)


def test_a_record_with_only_its_id_hashes_the_blank_id() -> None:
    record = OnlyId()
    assert compute_id(record) == _stdlib_id(identity_payload(record))


def _compile(cls: type[Record]) -> None:
    cls.from_dict({})


def test_record_classes_the_codec_cannot_compile_are_named() -> None:
    @attrs.frozen(kw_only=True)
    class Either(Record):
        value: int | str

    @attrs.frozen(kw_only=True)
    class Floating(Record):
        value: float

    @attrs.frozen(kw_only=True)
    class UnknownInclude(Record):
        __identity__ = Identity(include=("nope",))
        value: int

    @attrs.frozen(kw_only=True)
    class UnknownIdField(Record):
        __identity__ = Identity(field="nope_id")
        value: int

    cases: list[tuple[type[Record], str]] = [
        (
            Either,
            "Either.value: a union of several types must be a union of records, or of "
            "literals and enums with at most one record and at most one tuple",
        ),
        (Floating, "Floating.value: no construction check for field type <class 'float'>"),
        (UnknownInclude, "UnknownInclude.__identity__ names unknown field nope"),
        (UnknownIdField, "UnknownIdField.__identity__.field nope_id unknown"),
    ]
    for cls, message in cases:
        with pytest.raises(TypeError) as info:
            _compile(cls)
        assert str(info.value) == message


# -- nested_id: the content digest of a record's nested form ----------------------------


def test_nested_id_is_the_stdlib_hash_of_the_nested_form_cached_or_fresh() -> None:
    @attrs.frozen(kw_only=True)
    class Fresh(Record):
        """A class whose codec spec is not compiled yet when nested_id first meets it."""

        pair: tuple[Leaf, int]

    record = Fresh(pair=(Leaf(name="x"), 1))
    expected = _stdlib_id({"pair": [{"name": "x"}, 1]})
    assert nested_id(record) == expected
    assert nested_id(record, cached=False) == expected
    # Altered after its nested form was cached: only cached=False sees the new value.
    object.__setattr__(record, "pair", (Leaf(name="y"), 1))
    assert nested_id(record, cached=False) == _stdlib_id({"pair": [{"name": "y"}, 1]})


def test_nested_id_of_a_non_record_or_a_smuggled_value_is_refused() -> None:
    with pytest.raises(ParameterTypeError, match="nested_id"):
        nested_id({"name": "x"})  # type: ignore[arg-type]
    smuggled = Pairs(tagged=(Leaf(name="x"), 1), coloured=(Colour.RED, "y"), plain=("z", 2))
    object.__setattr__(smuggled, "tagged", ({1}, 1))
    with pytest.raises(CanonicalizationError, match="set"):
        nested_id(smuggled, cached=False)
