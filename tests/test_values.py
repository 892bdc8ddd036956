"""Tests for kernel.records.values: shared primitives, validators and the refusal helper."""

from __future__ import annotations

import enum
import json
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.errors import (
    CanonicalizationError,
    FieldError,
    ParameterTypeError,
    RecordError,
    RefusedError,
)
from kernel.records import values
from kernel.records.codec import UNSEALED, Identity, Record, kind_validators, seal
from kernel.records.values import (
    BudgetCharge,
    Refusal,
    SourceSpan,
    digest,
    unwrap,
    version_pair_problem,
)
from kernel.run.verification import WorkUnit
from kernel.strategies import budget_charges, source_spans, version_pairs
from kernel.strategies.values import of_kind


@settings(max_examples=200, deadline=None)
@given(source_spans())
def test_span_round_trip_and_nested_form(span: SourceSpan) -> None:
    """A span round-trips and its JSON form has exactly the four reference keys."""
    document = span.to_dict()
    assert set(document) == {"text", "start", "end", "sentence_index"}
    assert SourceSpan.from_dict(document) == span


@settings(max_examples=100, deadline=None)
@given(budget_charges())
def test_budget_charge_round_trip(charge: BudgetCharge) -> None:
    """A budget charge round-trips through its JSON form."""
    assert BudgetCharge.from_dict(charge.to_dict()) == charge


@pytest.mark.parametrize(
    "kwargs",
    [
        {"text": "x", "start": 2, "end": 1},
        {"text": "x", "start": -1, "end": 1},
        {"text": "x", "start": True, "end": 1},
        {"text": 1, "start": 0, "end": 1},
        {"text": "x", "start": 0, "end": 1, "sentence_index": -1},
    ],
)
def test_invalid_spans_cannot_exist(kwargs: dict[str, object]) -> None:
    """A span with bad offsets or types is refused at construction."""
    with pytest.raises(ValueError):  # noqa: PT011 - every validator error is a ValueError
        SourceSpan(**kwargs)  # type: ignore[arg-type]


def test_bool_is_not_an_int_in_a_budget_charge() -> None:
    """bool never passes for an int field."""
    with pytest.raises(ValueError):  # noqa: PT011
        BudgetCharge(candidates=True, steps=1)
    with pytest.raises(RecordError):
        BudgetCharge.from_dict({"candidates": 1, "steps": False})


@settings(max_examples=100, deadline=None)
@given(version_pairs())
def test_generated_version_pairs_are_valid(pairs: tuple[tuple[str, str], ...]) -> None:
    """The strategy only builds sorted, unique, non-empty pairs."""
    assert version_pair_problem(pairs) is None


@pytest.mark.parametrize(
    "pairs",
    [
        [("a", "1")],
        (("b", "1"), ("a", "1")),
        (("a", "1"), ("a", "2")),
        (("a", ""),),
        (("", "1"),),
        (("a", "1", "x"),),
        (("a", 1),),
        (["a", "1"],),
        None,
    ],
)
def test_version_pair_problems(pairs: object) -> None:
    """Lists, unsorted, duplicate, empty or ill-typed pairs each have a stated problem."""
    assert version_pair_problem(pairs) is not None


class Reason(enum.StrEnum):
    """Reason codes of the sample refusal."""

    BAD = "bad_input"


@attrs.frozen(kw_only=True)
class SampleRefusal(Refusal):
    """A minimal refusal with a self-sealed id."""

    __identity__ = Identity(field="refusal_id")

    refusal_id: str = attrs.field(default=UNSEALED, validator=digest)
    reason_codes: tuple[Reason, ...]


def test_unwrap_raises_refusals_and_passes_results() -> None:
    """unwrap() returns results and raises RefusedError carrying the refusal."""
    refusal = seal(SampleRefusal, reason_codes=(Reason.BAD,), explanation="why")
    assert unwrap(5) == 5
    with pytest.raises(RefusedError) as info:
        unwrap(refusal)
    assert info.value.refusal is refusal
    assert "bad_input" in str(info.value)


def test_refusal_explanation_never_enters_the_id() -> None:
    """Two refusals differing only in explanation share their id."""
    a = seal(SampleRefusal, reason_codes=(Reason.BAD,), explanation="one")
    b = seal(SampleRefusal, reason_codes=(Reason.BAD,), explanation="two")
    assert a.refusal_id == b.refusal_id
    assert SampleRefusal.from_dict(a.to_dict()) == a


@pytest.mark.parametrize(
    "build",
    [
        lambda: SourceSpan(text="a\udc80", start=0, end=1),
        lambda: BudgetCharge(candidates=2**53, steps=1),
        lambda: BudgetCharge(candidates=1, steps=-(2**53)),
    ],
    ids=["lone-surrogate-text", "charge-above-2**53-1", "charge-below--(2**53-1)"],
)
def test_records_that_could_never_have_an_id_cannot_exist(build: Any) -> None:
    """Regression: a span with a lone surrogate or a charge beyond +/-(2**53 - 1) was
    constructed, and every id computed over it later raised CanonicalizationError."""
    with pytest.raises(ValueError, match=r"lone surrogate|2\*\*53") as info:
        build()
    assert not isinstance(info.value, CanonicalizationError)
    assert getattr(info.value, "kernel_field", None) in {"text", "candidates", "steps"}


# -- the field vocabulary ---------------------------------------------------------------

KINDS = {
    "Digest": values.Digest,
    "OptionalDigest": values.OptionalDigest,
    "Text": values.Text,
    "NonBlank": values.NonBlank,
    "Count": values.Count,
    "Positive": values.Positive,
    "SafeInt": values.SafeInt,
    "Digests": values.Digests,
    "VersionPairsField": values.VersionPairsField,
    "Timestamp": values.Timestamp,
    "UniqueTexts": values.UniqueTexts,
}


def _kind(alias: object) -> values.Kind:
    (validator,) = kind_validators(alias)
    kind = values.kind_of(validator)
    assert kind is not None
    return kind


@pytest.mark.parametrize("name", sorted(KINDS))
@given(data=st.data())
def test_every_kind_admits_what_its_strategy_draws(name: str, data: st.DataObject) -> None:
    """One vocabulary: each kind's validator admits every value its strategy draws, and
    its JSON Schema keywords are stated (documentation and schemas read them)."""
    alias = KINDS[name]
    (validator,) = kind_validators(alias)
    kind = _kind(alias)
    value = data.draw(of_kind(kind))
    validator(None, attrs.fields(values.SourceSpan).text, value)
    assert kind.description
    # The kind's JSON Schema keywords admit the same value written as JSON.
    document = json.loads(json.dumps(value))
    base = _JSON_TYPES[typing.get_args(alias)[0]]
    schema = (
        {**base, "items": {**base.get("items", {}), **dict(kind.schema)}}
        if kind.items
        else {**base, **dict(kind.schema)}
    )
    jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)


_JSON_TYPES: dict[object, dict[str, Any]] = {
    str: {"type": "string"},
    str | None: {"type": ["string", "null"]},
    int: {"type": "integer"},
    tuple[str, ...]: {"type": "array", "items": {"type": "string"}},
    tuple[tuple[str, str], ...]: {"type": "array", "items": {"type": "array"}},
}


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"text": "t", "start": True, "end": 1}, "SourceSpan.start"),
        ({"text": "t", "start": 0, "end": -1}, "SourceSpan.end"),
        ({"text": 3, "start": 0, "end": 1}, "SourceSpan.text"),
    ],
)
def test_a_kind_field_is_validated_without_an_attrs_validator(
    fields: dict[str, Any], path: str
) -> None:
    """SourceSpan declares its fields by kind only; construction still refuses, naming
    record and field, before the record's own invariant (start <= end) runs."""
    with pytest.raises(FieldError, match=path):
        values.SourceSpan(**fields)


def test_schemas_take_the_kind_keywords() -> None:
    """The published work-unit schema carries the kind keywords of its fields."""
    from kernel.effects.schemas import schema_for

    version = schema_for("work-unit", WorkUnit)["properties"]["version"]
    assert version["minimum"] == 1
    assert version["maximum"] == 2**53 - 1


@attrs.frozen(kw_only=True)
class Shapes(Record):
    """A record exercising every shared validator's refusal."""

    positive: int = attrs.field(default=1, validator=values.positive)
    nonblank: str = attrs.field(default="x", validator=values.nonblank)
    member: Reason = attrs.field(default=Reason.BAD, validator=values.enum_member(Reason))
    items: tuple[str, ...] = attrs.field(default=(), validator=values.tuple_of(str))
    digests: tuple[str, ...] = attrs.field(default=(), validator=values.digests)
    maybe: int | None = attrs.field(default=None, validator=values.optional(values.positive))


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"positive": 0}, "Shapes.positive: expected an integer >= 1"),
        ({"nonblank": " "}, "Shapes.nonblank: expected a non-blank string"),
        ({"nonblank": "a\ud800"}, "Shapes.nonblank: string holds a lone surrogate"),
        ({"member": "low"}, "Shapes.member: expected a Reason, got str 'low'"),
        ({"items": ["a"]}, "Shapes.items: expected a tuple, got list"),
        ({"items": ("a", 1)}, r"Shapes.items\[1\]: expected str, got int"),
        ({"items": ("a\udfff",)}, r"Shapes.items\[0\]: string holds a lone surrogate"),
        ({"digests": ["a" * 64]}, "Shapes.digests: expected a tuple"),
        ({"digests": ("A" * 64,)}, r"Shapes.digests\[0\]: not a 64-char"),
        ({"maybe": 0}, "Shapes.maybe: expected an integer >= 1"),
    ],
)
def test_shared_validators_name_record_field_and_what_they_found(
    changes: dict[str, Any], path: str
) -> None:
    """Each shared validator refuses with record, field (and index) and the value found."""
    with pytest.raises(FieldError, match=path):
        Shapes(**changes)
    assert Shapes(maybe=None).maybe is None


def _typed(
    number: int,
    flag: bool,
    pick: Literal["a", "b"],
    kind: type[Record],
    table: Mapping[str, int],
    items: Sequence[int],
    pair: tuple[int, str],
    anything: object,
    many: Iterable[int] = (),
) -> int:
    return number


CHECKED = values.boundary(_typed)
GOOD: dict[str, Any] = {
    "number": 1,
    "flag": True,
    "pick": "a",
    "kind": values.SourceSpan,
    "table": {"k": 1},
    "items": [1, 2],
    "pair": (1, "x"),
    "anything": object(),
}


@pytest.mark.parametrize(
    ("change", "path", "found"),
    [
        ({"number": True}, "number", "bool True"),
        ({"flag": 1}, "flag", "int 1"),
        ({"pick": "c"}, "pick", "str 'c'"),
        ({"kind": int}, "kind", "type"),
        ({"kind": 3}, "kind", "int 3"),
        ({"table": {"k": "v"}}, "table['k']", "str 'v'"),
        ({"table": {1: 1}}, "table key 1", "int 1"),
        ({"table": [1]}, "table", "list of 1 items"),
        ({"items": (1, "x")}, "items[1]", "str 'x'"),
        ({"pair": (1, 2)}, "pair[1]", "int 2"),
        ({"pair": (1,)}, "pair", "1 items"),
        ({"number": "x" * 60}, "number", "..."),
    ],
)
def test_boundary_names_the_parameter_path_and_what_it_found(
    change: dict[str, Any], path: str, found: str
) -> None:
    """The argument check behind every validator: path, expectation, and what was found."""
    with pytest.raises(ParameterTypeError) as caught:
        CHECKED(**{**GOOD, **change})
    assert caught.value.path == path
    assert found in caught.value.found
    assert CHECKED(**GOOD, many=iter([1])) == 1
    assert CHECKED(*GOOD.values()) == 1
