"""JSON objects and arbitrary JSON as record fields (ADR-0007): ``FrozenMap[V]`` and
``JsonValue`` are compiled from the one shape model into a construction rule, a parser,
an encoder, a JSON Schema and a strategy, and every record holding them stays frozen,
hashable and canonical JSON."""

from __future__ import annotations

import enum
import pickle
from typing import Any, ClassVar, Literal

import attrs
import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.effects.schemas import schema_for
from kernel.errors import FieldError, RecordError
from kernel.records.codec import (
    UNSEALED,
    Identity,
    Record,
    compute_id,
    document_digest,
    field_check,
    nested_form,
)
from kernel.records.identity import MAX_DEPTH, canonical_json, sha256_hex
from kernel.records.parsers import plain_json
from kernel.records.rules import check_json
from kernel.records.shapes import JSON, FrozenMap, JsonShape, ObjectShape, Scalar, shape_of
from kernel.records.values import Digest, JsonValue, NonBlank
from kernel.strategies.fields import from_annotation, json_values, records_of


class Tone(enum.StrEnum):
    """Values of a map that are encoded (enum members as their values)."""

    LOW = "low"
    HIGH = "high"


@attrs.frozen(kw_only=True)
class Holder(Record):
    """A record with an object of strings, an object of enums and arbitrary JSON."""

    env: FrozenMap[str]
    tones: FrozenMap[Tone]
    names: FrozenMap[NonBlank]
    args: JsonValue
    maybe: FrozenMap[str] | None


def _document(**changes: object) -> dict[str, object]:
    document: dict[str, object] = {
        "env": {"PATH": "/bin", "LANG": "C"},
        "tones": {"a": "low"},
        "names": {"k": "v"},
        "args": [1, {"x": [True, None, "s"]}, "t"],
        "maybe": None,
    }
    document.update(changes)
    return document


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def test_the_shapes_of_a_json_object_and_of_any_json() -> None:
    """``FrozenMap[str]`` is an object of strings; ``JsonValue`` any JSON value."""
    shape = shape_of(FrozenMap[str])
    assert isinstance(shape, ObjectShape)
    assert isinstance(shape.value, Scalar)
    assert isinstance(shape_of(JsonValue), JsonShape)


def test_a_document_reads_into_frozen_hashable_values_and_writes_back() -> None:
    """Objects become FrozenMaps and arrays tuples; ``to_dict`` gives the document back,
    and the record is hashable, comparable and picklable."""
    document = _document()
    record = Holder.from_dict(document)
    assert record.env == FrozenMap({"PATH": "/bin", "LANG": "C"})
    assert record.tones == FrozenMap({"a": Tone.LOW})
    assert record.args == (1, FrozenMap({"x": (True, None, "s")}), "t")
    assert record.to_dict() == document
    assert hash(record) == hash(Holder.from_dict(_document()))
    assert pickle.loads(pickle.dumps(record)) == record
    assert record.env != {"PATH": "/bin", "LANG": "C"}  # exactly a FrozenMap, as a tuple
    assert repr(FrozenMap({"a": "b"})) == "FrozenMap({'a': 'b'})"
    assert len(record.env) == 2
    assert repr(JSON) == "JSON"


@attrs.frozen(kw_only=True)
class Named(Record):
    """A self-sealing record over JSON fields."""

    __identity__: ClassVar[Identity] = Identity(field="id")
    id: Digest = UNSEALED
    env: FrozenMap[str]
    args: JsonValue


def test_identities_of_a_record_holding_json_are_those_of_its_document() -> None:
    """Ids, digests and nested forms write a FrozenMap as the JSON object it holds."""
    record = Holder.from_dict(_document())
    assert document_digest(record) == sha256_hex(record.to_dict())
    assert nested_form(record) == record.to_dict()
    named = Named(env=FrozenMap({"A": "b"}), args=(FrozenMap({"k": (1,)}),))
    expected = sha256_hex({"id": "", "env": {"A": "b"}, "args": [{"k": [1]}]})
    assert named.id == compute_id(named) == compute_id(named, cached=False) == expected
    assert Named.from_dict(named.to_dict()) == named


@pytest.mark.parametrize(
    ("changes", "path", "reason"),
    [
        ({"env": ["PATH"]}, "env", "expected an object, got array"),
        ({"env": {"PATH": 1}}, "env['PATH']", "expected string, got integer"),
        ({"tones": {"a": "loud"}}, "tones['a']", "expected one of"),
        ({"names": {"k": " "}}, "names['k']", "non-blank"),
        ({"args": 1.5}, "args", "expected a JSON value without floats, got number"),
        ({"args": [{"x": [2.0]}]}, "args[0]['x'][0]", "without floats"),
        ({"args": {1: "x"}}, "args", "expected text keys"),
        ({"env": {2: "x"}}, "env", "expected text keys"),
        ({"args": {"\ud800": 1}}, "args", "expected text keys"),
        ({"args": "\ud800"}, "args", "lone surrogate"),
        ({"args": 2**60}, "args", "outside"),
        ({"args": {1, 2}}, "args", "expected a JSON value without floats, got set"),
        ({"maybe": []}, "maybe", "expected an object"),
    ],
)
def test_a_wrong_document_is_refused_at_its_path(
    changes: dict[str, object], path: str, reason: str
) -> None:
    """Each refusal names the document path and what was expected and found."""
    with pytest.raises(RecordError, match=reason) as caught:
        Holder.from_dict(_document(**changes))
    assert caught.value.path == path


def test_json_nests_as_deep_as_the_codec_admits_and_no_deeper() -> None:
    """``MAX_DEPTH`` containers are read; one more is refused without recursing on."""
    assert Holder.from_dict(_document(args=_nested(MAX_DEPTH))).args == _frozen(MAX_DEPTH)
    with pytest.raises(RecordError, match=f"nested deeper than {MAX_DEPTH}"):
        Holder.from_dict(_document(args=_nested(MAX_DEPTH + 1)))
    with pytest.raises(RecordError, match="nested deeper"):
        Holder.from_dict(_document(args=_nested(100_000)))
    with pytest.raises(FieldError, match="nested deeper"):
        check_json(_frozen(MAX_DEPTH + 1), "args")
    check_json(_frozen(MAX_DEPTH), "args")


def _frozen(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = (value,)
    return value


def _valid() -> dict[str, Any]:
    return {
        "env": FrozenMap({"A": "b"}),
        "tones": FrozenMap({"t": Tone.HIGH}),
        "names": FrozenMap({"n": "x"}),
        "args": (FrozenMap({"k": (1, None)}),),
        "maybe": None,
    }


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"env": {"A": "b"}}, "Holder.env: expected a FrozenMap, got dict of 1 items"),
        ({"env": FrozenMap({"A": 1})}, r"Holder.env\['A'\]: expected str, got int 1"),
        (
            {"env": FrozenMap({1: "b"})},  # type: ignore[dict-item]  # the wrong key
            "Holder.env: expected text keys, got key int 1",
        ),
        ({"args": [1]}, "Holder.args: expected a JSON value .*, got list of 1 items"),
        ({"args": (1.5,)}, r"Holder.args\[0\]: expected a JSON value .*, got float 1.5"),
        (
            {"args": FrozenMap({2: 1})},  # type: ignore[dict-item]  # the wrong key
            "Holder.args: expected text keys",
        ),
        ({"args": FrozenMap({"k": "\ud800"})}, "Holder.args\\['k'\\]: string holds a lone"),
        ({"args": 2**60}, "Holder.args: expected an integer within"),
        ({"maybe": FrozenMap({"A": 2})}, "Holder.maybe\\['A'\\]: expected str"),
    ],
)
def test_construction_refuses_what_the_annotation_does_not_admit(
    changes: dict[str, object], message: str
) -> None:
    """A FrozenMap is exact (never a dict), its keys text, its values the value's rule;
    JSON holds tuples and FrozenMaps, never lists or floats."""
    with pytest.raises(FieldError, match=message):
        Holder(**{**_valid(), **changes})


def test_a_map_of_anything_checks_its_keys_only() -> None:
    """``FrozenMap[object]``: any value, text keys, still exactly a FrozenMap."""
    check = field_check(FrozenMap[object], "m")
    assert check is not None
    check(FrozenMap({"a": object()}), "m")
    with pytest.raises(FieldError, match="expected text keys"):
        check(FrozenMap({3: 1}), "m")  # type: ignore[dict-item]  # the wrong key


def _frozen_map(items: dict[Any, object]) -> object:
    return FrozenMap(items)


_ANYTHING: st.SearchStrategy[object] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.just("\ud800"),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text() | st.integers(), inner, max_size=3)
        | st.dictionaries(st.text() | st.integers(), inner, max_size=3).map(_frozen_map)
    ),
    max_leaves=10,
)


@given(_ANYTHING)
def test_construction_and_its_fast_answer_agree_on_every_value(value: object) -> None:
    """For all values: a JSON field admits a value exactly when its check passes, and
    the codec reads a JSON document exactly when it is JSON without floats."""
    holder = {**_valid(), "args": value}
    try:
        check_json(value, "args")
        admitted = True
    except FieldError:
        admitted = False
    try:
        Holder(**holder)
        built = True
    except FieldError:
        built = False
    assert built == admitted


@given(json_values())
def test_drawn_json_round_trips_and_stays_canonical(value: object) -> None:
    """For all drawn values: admitted, written as plain JSON, read back equal."""
    record = Holder(**{**_valid(), "args": value})
    document = record.to_dict()
    assert document["args"] == plain_json(value)
    assert Holder.from_dict(document) == record
    canonical_json(document)


@given(records_of(Holder))
def test_drawn_records_satisfy_their_schema(record: Holder) -> None:
    """The generated schema admits every record the strategies draw, and refuses a
    float inside the JSON field."""
    schema = schema_for("holder", Holder)
    jsonschema.validate(record.to_dict(), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**record.to_dict(), "args": [{"x": 1.5}]}, schema)


def test_from_annotation_draws_maps_of_the_value_kind() -> None:
    """The strategy of ``FrozenMap[Tone]`` draws FrozenMaps of Tone members."""

    @given(from_annotation(FrozenMap[Tone]))
    def drawn(value: object) -> None:
        assert type(value) is FrozenMap
        assert all(isinstance(v, Tone) for v in value.values())

    drawn()


@attrs.frozen(kw_only=True)
class Either(Record):
    """Unions told apart by a value's JSON type: a member or an array of them."""

    levels: Tone | tuple[Tone, ...]
    pair: Literal["none"] | tuple[str, int]


@pytest.mark.parametrize(
    ("document", "record"),
    [
        ({"levels": "low", "pair": "none"}, Either(levels=Tone.LOW, pair="none")),
        (
            {"levels": ["high", "low"], "pair": ["a", 1]},
            Either(levels=(Tone.HIGH, Tone.LOW), pair=("a", 1)),
        ),
    ],
)
def test_a_value_or_an_array_of_values_reads_and_writes_both_forms(
    document: dict[str, object], record: Either
) -> None:
    """A run config's ``require_trust`` is a level or a list of them: both read back as
    written."""
    assert Either.from_dict(document) == record
    assert record.to_dict() == document


@pytest.mark.parametrize(
    ("document", "path", "reason"),
    [
        ({"levels": 3, "pair": "none"}, "levels", "expected an array or one of ['low', 'high']"),
        ({"levels": {}, "pair": "none"}, "levels", "expected an array or one of"),
        ({"levels": ["loud"], "pair": "none"}, "levels[0]", "expected one of ['high', 'low']"),
        ({"levels": "low", "pair": ["a"]}, "pair", "expected 2 items"),
        ({"levels": "low", "pair": "some"}, "pair", "expected an array or one of ['none']"),
    ],
)
def test_a_value_of_no_member_names_every_form(
    document: dict[str, object], path: str, reason: str
) -> None:
    """The refusal says each form the union admits and what was found."""
    with pytest.raises(RecordError) as caught:
        Either.from_dict(document)
    assert caught.value.path == path
    assert reason in caught.value.reason
