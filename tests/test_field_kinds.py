"""The annotation of a field is its one statement: construction checks derived from it
(`kernel.records.codec.field_check`) and tagged unions of records in the codec."""

from __future__ import annotations

import datetime
import enum
import importlib
import pkgutil
import typing
from typing import Annotated, Any, Literal

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kernel
from kernel.errors import FieldError, RecordError
from kernel.records.codec import Record, field_check, nested_form, short_repr, tag_of
from kernel.records.identity import MAX_SAFE_INT
from kernel.records.values import (
    Count,
    Digest,
    Digests,
    NonBlank,
    OptionalDigest,
    SourceSpan,
    UniqueTexts,
    exact,
    kind_of,
    rfc3339_utc_problem,
    tuple_of,
)
from kernel.strategies import digests, texts
from kernel.strategies.fields import from_annotation, records_of


class Colour(enum.StrEnum):
    """A closed vocabulary for the sample record."""

    RED = "red"
    BLUE = "blue"


@attrs.frozen(kw_only=True)
class Plain(Record):
    """Every field is checked by its annotation alone: no ``attrs.field`` validator."""

    text: str
    number: int
    flag: bool
    colour: Colour
    span: SourceSpan
    mode: Literal["a", "b"]
    maybe: int | None
    names: tuple[str, ...]
    pair: tuple[str, int]
    digest: Digest
    optional_digest: OptionalDigest
    count: Count
    label: NonBlank
    hashes: Digests
    spans: tuple[SourceSpan, ...]
    counts: tuple[Count, ...]
    tags: UniqueTexts


def good(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "text": "t",
        "number": -3,
        "flag": True,
        "colour": Colour.RED,
        "span": SourceSpan(text="s", start=0, end=1),
        "mode": "a",
        "maybe": None,
        "names": ("x",),
        "pair": ("p", 1),
        "digest": "a" * 64,
        "optional_digest": None,
        "count": 0,
        "label": "l",
        "hashes": ("b" * 64,),
        "spans": (),
        "counts": (1, 2),
        "tags": ("a", "b"),
    }
    fields.update(changes)
    return fields


def test_a_record_of_annotations_alone_is_built() -> None:
    record = Plain(**good())
    assert record.colour is Colour.RED
    assert Plain.from_dict(record.to_dict()) == record


BAD = [
    ("text", 1, "Plain.text: expected str, got int 1"),
    ("text", "\ud800", "Plain.text: string holds a lone surrogate"),
    ("number", True, "Plain.number: expected an integer"),
    ("number", MAX_SAFE_INT + 1, "Plain.number: expected an integer"),
    ("flag", 1, "Plain.flag: expected bool, got int 1"),
    ("colour", "red", "Plain.colour: expected a Colour, got str 'red'"),
    ("span", {"text": "s"}, "Plain.span: expected a SourceSpan, got dict"),
    ("mode", "c", "Plain.mode: expected one of ['a', 'b'], got 'c'"),
    ("maybe", "1", "Plain.maybe: expected an integer"),
    ("names", ["x"], "Plain.names: expected a tuple, got list"),
    ("names", ("x", 2), "Plain.names[1]: expected str, got int 2"),
    ("pair", ("p",), "Plain.pair: expected 2 items, got 1"),
    ("pair", ("p", "1"), "Plain.pair[1]: expected an integer"),
    ("digest", "A" * 64, "Plain.digest: not a 64-char lowercase hex digest"),
    ("optional_digest", "x", "Plain.optional_digest: not a 64-char lowercase hex digest"),
    ("count", -1, "Plain.count: expected an integer in 0..2**53-1"),
    ("label", " ", "Plain.label: expected a non-blank string"),
    ("hashes", ("b" * 64, "z"), "Plain.hashes[1]: not a 64-char lowercase hex digest"),
    ("spans", (None,), "Plain.spans[0]: expected a SourceSpan, got NoneType"),
    ("counts", (1, -2), "Plain.counts[1]: expected an integer in 0..2**53-1"),
    ("label", "a\ud800", "Plain.label: string holds a lone surrogate"),
    ("tags", ("a", "a"), "Plain.tags[1]: 'a' is repeated"),
    ("tags", ("\udfff",), "Plain.tags[0]: string holds a lone surrogate"),
    ("tags", (1,), "Plain.tags[0]: expected str, got int"),
    ("tags", ["a"], "Plain.tags: expected a tuple, got list"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD)
def test_each_annotation_refuses_what_it_does_not_admit(
    field: str, value: object, message: str
) -> None:
    with pytest.raises(FieldError) as caught:
        Plain(**good(**{field: value}))
    assert str(caught.value).startswith(message)
    assert caught.value.record == "Plain"


JSON_BAD = [
    (field, list(value) if type(value) is tuple else value)
    for field, value, _ in BAD
    if field not in {"colour", "span", "spans"} and type(value) is not list
]


@pytest.mark.parametrize(("field", "value"), JSON_BAD)
def test_from_dict_refuses_the_same_values_at_their_document_path(
    field: str, value: object
) -> None:
    document = Plain(**good()).to_dict()
    document[field] = value
    with pytest.raises(RecordError) as caught:
        Plain.from_dict(document)
    assert caught.value.path.startswith(field)


@given(st.one_of(st.floats(), st.binary(), st.lists(st.integers()), st.booleans()))
def test_text_and_digest_fields_admit_only_exact_strings(value: object) -> None:
    for field in ("text", "digest", "label"):
        with pytest.raises(FieldError):
            Plain(**good(**{field: value}))


@given(texts(), digests())
def test_valid_values_of_each_kind_are_admitted(text: str, digest: str) -> None:
    record = Plain(**good(text=text, digest=digest, hashes=(digest, digest)))
    assert record.text == text


def test_an_unknown_field_type_is_refused_when_its_record_is_first_used() -> None:
    with pytest.raises(TypeError, match="no construction check for field type"):
        field_check(list[int], "Sample.field")
    assert field_check(object, "Sample.field") is None
    assert field_check(Any, "Sample.field") is None


def test_an_abstract_enum_admits_members_of_its_subclasses_only() -> None:
    check = field_check(enum.StrEnum, "Refusal.code")
    assert check is not None
    check(Colour.RED, "code")
    with pytest.raises(FieldError, match="expected a StrEnum, got str 'red'"):
        check("red", "code")


# Tagged unions ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Cat(Record):
    """One member of a tagged union."""

    kind: Literal["cat"] = "cat"
    lives: Count


@attrs.frozen(kw_only=True)
class Dog(Record):
    """Another member, told apart by ``kind``."""

    kind: Literal["dog"] = "dog"
    name: NonBlank


@attrs.frozen(kw_only=True)
class Home(Record):
    """Holds union values directly, optionally and in a tuple."""

    pet: Cat | Dog
    other: Dog | Cat | None
    pets: tuple[Cat | Dog, ...]


def test_a_union_of_records_round_trips_by_its_tag() -> None:
    home = Home(pet=Dog(name="rex"), other=None, pets=(Cat(lives=9), Dog(name="a")))
    document = home.to_dict()
    assert document["pet"] == {"kind": "dog", "name": "rex"}
    assert Home.from_dict(document) == home
    again = Home.from_dict({**document, "other": {"kind": "cat", "lives": 1}})
    assert again.other == Cat(lives=1)


def test_the_nested_form_of_a_union_value_is_its_member_s_own() -> None:
    home = Home(pet=Cat(lives=3), other=Dog(name="x"), pets=(Dog(name="y"),))
    form = nested_form(home)
    assert form == {
        "pet": {"kind": "cat", "lives": 3},
        "other": {"kind": "dog", "name": "x"},
        "pets": [{"kind": "dog", "name": "y"}],
    }


@pytest.mark.parametrize(
    ("pet", "path", "message"),
    [
        ({"kind": "fish"}, "pet.kind", "expected one of ['cat', 'dog'], got 'fish'"),
        ({"lives": 1}, "pet.kind", "got None"),
        ({"kind": 1}, "pet.kind", "got 1"),
        (["cat"], "pet", "expected an object, got array"),
        ({"kind": "cat", "name": "rex"}, "pet.name", "unknown field"),
        ({"kind": "dog", "name": " "}, "pet.name", "non-blank"),
    ],
)
def test_a_union_value_with_a_wrong_or_missing_tag_is_refused_at_its_path(
    pet: object, path: str, message: str
) -> None:
    document = Home(pet=Cat(lives=1), other=None, pets=()).to_dict()
    document["pet"] = pet
    with pytest.raises(RecordError) as caught:
        Home.from_dict(document)
    assert caught.value.path == path
    assert message in str(caught.value)


def test_construction_refuses_a_value_outside_the_union() -> None:
    with pytest.raises(FieldError, match=r"Home.pets\[0\]: expected Cat \| Dog, got SourceSpan"):
        Home(pet=Cat(lives=1), other=None, pets=(SourceSpan(text="", start=0, end=0),))  # type: ignore[arg-type]


@attrs.frozen(kw_only=True)
class Twin(Record):
    """Shares the tag value ``cat`` with `Cat`."""

    kind: Literal["cat"] = "cat"


def test_a_union_without_a_telling_tag_is_a_declaration_error() -> None:
    with pytest.raises(TypeError, match="one-value Literal field"):
        tag_of((Cat, Twin))
    with pytest.raises(TypeError, match="one-value Literal field"):
        tag_of((Cat, SourceSpan))
    with pytest.raises(TypeError, match="a union of records"):
        tag_of((Cat, int))
    assert tag_of((Cat, Dog)) == ("kind", {"cat": Cat, "dog": Dog})


# The vocabulary is the one statement ------------------------------------------------


def _kernel_records() -> list[type[Record]]:
    for module in pkgutil.walk_packages(kernel.__path__, "kernel."):
        importlib.import_module(module.name)
    found: list[type[Record]] = []
    pending = list(Record.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("kernel.") and "__attrs_attrs__" in cls.__dict__:
            found.append(cls)
    return sorted(set(found), key=lambda c: (c.__module__, c.__qualname__))


def test_every_kernel_record_compiles_its_checks_parser_and_schema() -> None:
    """Every annotation of every record is one the vocabulary knows (field_check, the
    parser and the schema builder all accept it)."""
    from kernel.effects.schemas import _Builder

    records = _kernel_records()
    assert len(records) > 50
    for cls in records:
        for field in attrs.fields(cls):  # type: ignore[arg-type]
            field_check(typing.get_type_hints(cls, include_extras=True)[field.name], cls.__name__)
        _Builder().record(cls)


_GARBAGE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=5),
    st.binary(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.tuples(st.text(max_size=2)),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.sampled_from([Colour.RED, SourceSpan(text="", start=0, end=0), object()]),
)


@pytest.mark.slow
@settings(max_examples=500)
@given(data=st.data())
def test_no_record_constructor_lets_garbage_escape_as_a_foreign_exception(
    data: st.DataObject,
) -> None:
    """For every record of the package and any values: either the record is built, or
    construction raises `FieldError` naming the record (never AttributeError,
    TypeError from inside a rule, or a partial record)."""
    cls = data.draw(st.sampled_from(_RECORDS))
    fields = attrs.fields(cls)  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls, include_extras=True)
    kwargs = {
        field.name: data.draw(_valid_or_garbage(hints[field.name]), label=field.name)
        for field in fields
    }
    refused: FieldError | None = None
    try:
        cls(**kwargs)
    except FieldError as e:
        refused = e
    if refused is not None:
        assert refused.record == cls.__name__
        assert refused.kernel_field.split("[")[0].split(".")[0] in kwargs


def test_no_record_field_restates_its_annotation_in_a_validator() -> None:
    """A field's annotation is its one statement: an ``attrs`` validator of a kernel
    record may only add the record's own rule (ordering, cross-field, no paths)."""
    restating = []
    for cls in _kernel_records():
        for field in attrs.fields(cls):  # type: ignore[arg-type]
            for validator in _flatten(field.validator) if field.validator else []:
                name = getattr(validator, "__qualname__", type(validator).__qualname__)
                if (
                    kind_of(validator) is not None
                    or name.startswith(_RESTATING)
                    or type(validator).__module__ == "attrs.validators"
                    or type(validator).__module__.startswith("attr.")
                ):
                    restating.append(f"{cls.__module__}.{cls.__qualname__}.{field.name}: {name}")
    assert restating == []


def _flatten(validator: object) -> list[object]:
    inner = getattr(validator, "_validators", None)
    if inner is not None:
        return [v for item in inner for v in _flatten(item)]
    wrapped = getattr(validator, "validator", None)
    return _flatten(wrapped) if wrapped is not None else [validator]


# Validators that say only what an annotation says (type, kind, optionality, items).
_RESTATING = ("_validator_of.", "optional.", "constant.", "_false")


_RECORDS = _kernel_records()


def _holds_a_record(hint: object) -> bool:
    if isinstance(hint, type):
        return issubclass(hint, Record)
    return any(_holds_a_record(arg) for arg in typing.get_args(hint))


def _valid_or_garbage(hint: object) -> st.SearchStrategy[object]:
    """A value the annotation admits, or anything; nested records only as garbage (a
    valid nested record is drawn by its own class's turn)."""
    if _holds_a_record(hint):
        return _GARBAGE
    return st.one_of(from_annotation(hint), _GARBAGE)


@given(st.data())
def test_records_drawn_from_annotations_are_valid_and_round_trip(data: st.DataObject) -> None:
    """`records_of` derives a strategy from a record's annotations alone."""
    classes: list[type[Record]] = [SourceSpan, Plain, Home, Cat]
    cls = data.draw(st.sampled_from(classes))
    record = data.draw(records_of(cls))
    assert type(record) is cls
    assert cls.from_dict(record.to_dict()) == record


def test_from_annotation_refuses_what_the_vocabulary_does_not_know() -> None:
    with pytest.raises(TypeError, match="no strategy for field type"):
        from_annotation(list[int])
    assert from_annotation(enum.StrEnum).is_empty


@given(from_annotation(Annotated[Count, "a note, not a kind"]))
def test_annotated_metadata_that_is_no_kind_changes_nothing(value: int) -> None:
    assert 0 <= value <= MAX_SAFE_INT


def test_an_annotation_that_admits_anything_makes_no_validator() -> None:
    with pytest.raises(TypeError, match="admits anything"):
        exact(object)
    with pytest.raises(FieldError, match=r"x\[1\]: expected str"):
        tuple_of(str)(None, attrs.fields(SourceSpan).text.evolve(name="x"), ("a", 1))


@attrs.frozen(kw_only=True)
class Flagged(Record):
    """A Literal of a bool and one of a str: exact types on both paths."""

    authority: Literal[False] = False
    version: Literal["1"] = "1"


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"authority": 0, "version": "1"}, "authority"),
        ({"authority": True, "version": "1"}, "authority"),
        ({"authority": False, "version": 1}, "version"),
        ({"authority": "false", "version": "1"}, "authority"),
    ],
)
def test_a_literal_admits_its_values_of_the_same_exact_type(
    document: dict[str, object], path: str
) -> None:
    assert Flagged.from_dict({"authority": False, "version": "1"}) == Flagged()
    with pytest.raises(RecordError) as caught:
        Flagged.from_dict(document)
    assert caught.value.path == path
    with pytest.raises(FieldError, match=f"Flagged.{path}: expected one of"):
        Flagged(**document)  # type: ignore[arg-type]


# Records whose rules tie fields together beyond what annotations say (a consensus's
# counts are its groups' sizes); their strategies are the seeded ones in
# `kernel.strategies`. `Refusal` is abstract (its codes come from a subclass's enum).
# A run config's check, oracle and call entries (exactly one of their forms, Python
# names) are drawn too rarely from annotations; `tests/test_run_config.py` round-trips them.
_CROSS_FIELD_RECORDS = frozenset(
    {"Consensus", "CorroborationReport", "NoConsensus", "Refusal"}
    | {"CheckEntry", "CommandVerifierEntry", "OracleEntry", "CallEntry"}
)


@pytest.mark.slow
@settings(max_examples=400, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_every_record_drawn_from_its_annotations_round_trips_with_its_id(
    data: st.DataObject,
) -> None:
    """For every other record class of the package: `records_of` draws valid records
    from annotations alone, and each one reads back equal, its id reproducing."""
    cls = data.draw(
        st.sampled_from([c for c in _RECORDS if c.__name__ not in _CROSS_FIELD_RECORDS])
    )
    record = data.draw(records_of(cls))
    assert cls.from_dict(record.to_dict()) == record


@given(st.datetimes(), st.sampled_from(["", ".5", ".123456789"]))
def test_a_timestamp_names_exactly_the_datetimes_that_exist(
    moment: datetime.datetime, fraction: str
) -> None:
    """For all datetimes: written as RFC 3339 UTC they are admitted; the same digits
    with a day, hour, minute or second pushed past its range are refused."""
    text = moment.isoformat(timespec="seconds") + fraction + "Z"
    assert rfc3339_utc_problem(text) is None
    for start, end, bad in ((8, 10, "32"), (11, 13, "24"), (14, 16, "60"), (17, 19, "60")):
        assert rfc3339_utc_problem(text[:start] + bad + text[end:]) is not None
    assert rfc3339_utc_problem(text[:5] + "02-30" + text[10:]) is not None


class _Hostile:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


HUGE = 10**5000  # Python refuses to write an int of over 4,300 digits as text


def test_a_value_that_cannot_be_written_out_is_described_not_repr_d() -> None:
    """Error messages never fail on the bad value they describe: a huge int, a hostile
    ``__repr__``, a structure too deep to repr."""
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert short_repr(HUGE) == "<int of 16610 bits>"
    assert short_repr(_Hostile()) == "<_Hostile>"
    assert short_repr(deep) == "<list>"
    assert short_repr("x" * 100).endswith("...")
    with pytest.raises(FieldError, match="got <int of 16610 bits>"):
        SourceSpan(text="x", start=HUGE, end=1)
    with pytest.raises(FieldError, match=r"Plain.digest: not a 64-char lowercase hex digest: <int"):
        Plain(**good(digest=HUGE))
    document = Plain(**good()).to_dict()
    with pytest.raises(RecordError, match="got <int of 16610 bits>"):
        Plain.from_dict({**document, "colour": HUGE})
    with_int_key: dict[object, object] = {HUGE: 1}
    with_int_key.update(document.items())
    with pytest.raises(RecordError, match="unknown field"):
        Plain.from_dict(with_int_key)


@given(st.integers(min_value=2**128))
def test_for_all_huge_ints_construction_and_parsing_refuse_by_their_own_errors(
    value: int,
) -> None:
    for field in ("number", "count", "maybe", "colour", "mode", "text"):
        with pytest.raises(FieldError):
            Plain(**good(**{field: value}))
        with pytest.raises(RecordError):
            Plain.from_dict({**Plain(**good()).to_dict(), field: value})
