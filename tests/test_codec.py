"""Tests for kernel.records.codec: strict parsing, encoding and identity payloads of records."""

from __future__ import annotations

import copy
import enum
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.errors import ParameterTypeError, RecordError
from kernel.records.codec import (
    UNSEALED,
    Identity,
    Record,
    compute_id,
    id_of_fields,
    identity_payload,
    nested_form,
    nested_id,
    seal,
)
from kernel.records.values import SourceSpan, digest, non_negative, optional_digest, tuple_of
from kernel.records.values import version_pairs as version_pairs_validator
from kernel.strategies import digests, source_spans, texts, version_pairs


def independent_id(payload: dict[str, Any]) -> str:
    """SHA-256 of the stdlib canonical definition, never through kernel."""
    data = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class Status(enum.StrEnum):
    """A closed status vocabulary for the sample records."""

    OPEN = "open"
    CLOSED = "closed"


@attrs.frozen(kw_only=True)
class Leaf(Record):
    """A nested record whose nested form drops its explanation."""

    name: str
    count: int = attrs.field(validator=non_negative)
    explanation: str = ""


@attrs.frozen(kw_only=True)
class Sample(Record):
    """A self-sealing record exercising every supported field type."""

    __identity__ = Identity(field="sample_id")

    sample_id: str = attrs.field(default=UNSEALED, validator=digest)
    status: Status
    flag: bool
    size: int = attrs.field(validator=non_negative)
    parent: str | None = attrs.field(validator=optional_digest)
    leaf: Leaf
    leaves: tuple[Leaf, ...] = attrs.field(validator=tuple_of(Leaf))
    spans: tuple[SourceSpan, ...]
    tags: tuple[str, ...]
    versions: tuple[tuple[str, str], ...] = attrs.field(validator=version_pairs_validator)
    kind: Literal["sample"]
    explanation: str = ""


@attrs.frozen(kw_only=True)
class Unsealed(Record):
    """A record whose digest covers a subset of fields and omits itself."""

    __identity__ = Identity(field="digest", seals=False, include=("a", "b"))

    digest: str = attrs.field(default=UNSEALED, validator=digest)
    a: int
    b: str
    c: str
    explanation: str = ""


@st.composite
def samples(draw: st.DrawFn) -> Sample:
    """Valid Sample records."""
    leaf = st.builds(Leaf, name=texts(), count=st.integers(0, 100), explanation=texts())
    return seal(
        Sample,
        status=draw(st.sampled_from(Status)),
        flag=draw(st.booleans()),
        size=draw(st.integers(0, 2**53 - 1)),
        parent=draw(st.none() | digests()),
        leaf=draw(leaf),
        leaves=tuple(draw(st.lists(leaf, max_size=3))),
        spans=tuple(draw(st.lists(source_spans(), max_size=3))),
        tags=tuple(draw(st.lists(texts(), max_size=3))),
        versions=draw(version_pairs()),
        kind="sample",
        explanation=draw(texts()),
    )


@settings(max_examples=200, deadline=None)
@given(samples())
def test_round_trip(sample: Sample) -> None:
    """from_dict(to_dict(x)) == x, and to_dict is plain JSON."""
    document = sample.to_dict()
    assert json.loads(json.dumps(document)) == document
    assert Sample.from_dict(document) == sample


@settings(max_examples=200, deadline=None)
@given(samples(), texts())
def test_id_is_recomputed_independently_and_ignores_explanation(sample: Sample, other: str) -> None:
    """The sealed id equals stdlib json + hashlib over the documented payload."""
    payload = sample.to_dict()
    del payload["explanation"]
    payload["sample_id"] = ""
    payload["leaf"].pop("explanation")
    for leaf in payload["leaves"]:
        leaf.pop("explanation")
    assert identity_payload(sample) == payload
    assert sample.sample_id == independent_id(payload)
    assert compute_id(sample) == sample.sample_id
    changed = attrs.evolve(sample, explanation=other)
    assert compute_id(changed) == sample.sample_id


def test_non_sealing_identity_uses_only_included_fields() -> None:
    """An include-list identity omits its own field and every other field."""
    record = seal(Unsealed, a=1, b="x", c="ignored")
    assert identity_payload(record) == {"a": 1, "b": "x"}
    assert record.digest == independent_id({"a": 1, "b": "x"})
    assert seal(Unsealed, a=1, b="x", c="other").digest == record.digest


def base_document() -> dict[str, Any]:
    """A valid Sample document."""
    leaf = {"name": "n", "count": 1, "explanation": ""}
    return seal(
        Sample,
        status=Status.OPEN,
        flag=False,
        size=3,
        parent=None,
        leaf=Leaf.from_dict(leaf),
        leaves=(Leaf.from_dict(leaf),),
        spans=(SourceSpan(text="t", start=0, end=1, sentence_index=None),),
        tags=("a",),
        versions=(("a", "1"),),
        kind="sample",
    ).to_dict()


def edit(path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    """The base document with one field replaced (or deleted when value is ...)."""
    document = base_document()
    target: Any = document
    for part in path[:-1]:
        target = target[part]
    if value is ...:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return document


REFUSALS: list[tuple[str, dict[str, Any] | object, str]] = [
    ("not an object", [1], ""),
    ("unknown field", edit(("surprise",), 1), "surprise"),
    ("missing field", edit(("flag",), ...), "flag"),
    ("bool is not int", edit(("size",), True), "size"),
    ("float is not int", edit(("size",), 3.0), "size"),
    ("int is not bool", edit(("flag",), 0), "flag"),
    ("str expected", edit(("leaf", "name"), 5), "leaf.name"),
    ("negative count", edit(("leaves", 0, "count"), -1), "leaves[0].count"),
    ("enum by value only", edit(("status",), "OPEN"), "status"),
    ("list expected", edit(("tags",), "a"), "tags"),
    ("tuple item type", edit(("tags", 0), None), "tags[0]"),
    ("pair arity", edit(("versions", 0), ["a"]), "versions[0]"),
    ("unsorted pairs", edit(("versions",), [["b", "1"], ["a", "1"]]), "versions"),
    ("duplicate pairs", edit(("versions",), [["a", "1"], ["a", "2"]]), "versions"),
    ("span end before start", edit(("spans", 0, "start"), 5), "spans[0].end"),
    ("literal", edit(("kind",), "other"), "kind"),
    ("bad digest shape", edit(("parent",), "ABC"), "parent"),
    ("id does not reproduce", edit(("size",), 4), "sample_id"),
    ("nested unknown field", edit(("leaf", "x"), 1), "leaf.x"),
]


@pytest.mark.parametrize(
    ("document", "path"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_from_dict_refuses_with_the_field_path(document: object, path: str) -> None:
    """Unknown, missing, mistyped or inconsistent fields raise RecordError naming the path."""
    before = copy.deepcopy(document)
    with pytest.raises(RecordError) as info:
        Sample.from_dict(document)
    assert info.value.path == path
    assert document == before


def test_from_dict_can_skip_id_verification() -> None:
    """verify_ids=False admits a document whose id does not reproduce (documented escape)."""
    document = edit(("size",), 4)
    assert Sample.from_dict(document, verify_ids=False).size == 4


def test_records_are_frozen_and_hashable() -> None:
    """Records cannot be mutated and can be set members."""
    record = Sample.from_dict(base_document())
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        record.size = 5  # type: ignore[misc]
    assert len({record, Sample.from_dict(base_document())}) == 1


def test_seal_runs_validators_first() -> None:
    """seal() refuses invalid fields through the record's own validators."""
    fields = Sample.from_dict(base_document()).to_dict()
    del fields["sample_id"]
    parsed = {k: getattr(Sample.from_dict(base_document()), k) for k in fields}
    with pytest.raises(ValueError, match=r"0\.\.2"):
        seal(Sample, **{**parsed, "size": -1})


def test_compute_id_needs_an_identity_field() -> None:
    """Records without an identity field have no id to compute."""
    with pytest.raises(TypeError):
        compute_id(Leaf(name="x", count=1))


def test_ints_outside_the_canonical_range_are_refused_with_a_path() -> None:
    """A document int beyond +/-(2**53 - 1) is a RecordError at its path, not a crash."""
    for bad in (2**53, -(2**53), 2**64):
        with pytest.raises(RecordError) as info:
            Sample.from_dict(edit(("leaves", 0, "count"), bad))
        assert info.value.path == "leaves[0].count"
    with pytest.raises(RecordError) as span_info:
        SourceSpan.from_dict({"text": "t", "start": 0, "end": 2**53, "sentence_index": None})
    assert span_info.value.path == "end"


def test_from_dict_refuses_keys_of_mixed_types_with_record_error() -> None:
    """Regression: a document with a non-str key beside an unknown str key raised a bare
    TypeError (sorting mixed keys) instead of a RecordError naming the key."""
    document: dict[Any, Any] = {**base_document(), 1: "x", "surprise": "y"}
    before = copy.deepcopy(document)
    with pytest.raises(RecordError) as info:
        Sample.from_dict(document)
    assert info.value.path == "surprise"
    assert document == before
    int_keyed: dict[Any, Any] = {**base_document(), 7: "x"}
    with pytest.raises(RecordError) as only_int:
        Sample.from_dict(int_keyed)
    assert only_int.value.path == "7"


@pytest.mark.parametrize(
    ("path", "path_text"),
    [
        (("leaf", "name"), "leaf.name"),
        (("tags", 0), "tags[0]"),
        (("spans", 0, "text"), "spans[0].text"),
    ],
)
def test_from_dict_refuses_lone_surrogates_at_their_path(
    path: tuple[str | int, ...], path_text: str
) -> None:
    """Regression: a str field holding a lone surrogate parsed into a record that no id
    could ever be computed for (a later identity raised); it is a RecordError at its path."""
    with pytest.raises(RecordError) as info:
        Sample.from_dict(edit(path, "ok\ud800"), verify_ids=False)
    assert info.value.path == path_text


def test_identity_payload_is_a_fresh_copy_of_the_cached_nested_form() -> None:
    """Mutating what identity_payload returns (nested dicts and lists included) never
    changes a later id or payload: the codec's per-record cache is not handed out."""
    record = Sample.from_dict(base_document())
    payload = identity_payload(record)
    expected_id = compute_id(record)
    payload["leaf"]["name"] = "changed"
    payload["leaves"].append({"name": "x", "count": 1})
    payload["leaves"][0]["count"] = 99
    payload["spans"][0]["text"] = "changed"
    assert identity_payload(record) == identity_payload(Sample.from_dict(base_document()))
    assert compute_id(record) == expected_id == record.sample_id


@given(samples())
def test_constructing_without_the_id_seals(sample: Sample) -> None:
    """`cls(**fields)` without the id field seals like `seal` (the id defaults to UNSEALED)."""
    fields = {f.name: getattr(sample, f.name) for f in attrs.fields(Sample)}
    del fields["sample_id"]
    built = Sample(**fields)
    assert built == sample
    assert built.sample_id == compute_id(built) != UNSEALED
    kept = Sample(**fields, sample_id="f" * 64)  # an explicit id is kept as given
    assert kept.sample_id == "f" * 64


def test_seal_refuses_the_id_and_positional_arguments() -> None:
    """`seal` computes the id: passing it, or fields by position, is a TypeError."""
    with pytest.raises(TypeError, match="never sample_id"):
        seal(Sample, sample_id="a" * 64)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="by name"):
        seal(Unsealed, 1)  # type: ignore[call-arg, arg-type]


@pytest.mark.slow
def test_mypy_catches_a_misspelt_seal_field(tmp_path: Path) -> None:
    """`seal` is typed by the record's constructor: mypy --strict names a misspelt field."""
    from mypy import api

    source = tmp_path / "misspelt.py"
    source.write_text(
        "from kernel.records.codec import seal\n"
        "from kernel.search.records import CandidateAttempt\n"
        "seal(CandidateAttempt, attempt_indx=0)\n",
        encoding="utf-8",
    )
    out, _err, status = api.run(
        ["--strict", "--no-incremental", "--follow-imports=silent", str(source)]
    )
    assert status == 1
    assert 'Unexpected keyword argument "attempt_indx" for "seal"' in out


def test_nested_form_is_what_a_parent_hashes() -> None:
    """nested_form: every field but the excluded ones, id kept; misuse is named."""
    span = SourceSpan(text="t", start=0, end=1)
    assert nested_form(span) == {"text": "t", "start": 0, "end": 1, "sentence_index": None}
    with pytest.raises(ParameterTypeError, match=r"nested_form\(\): record: expected Record"):
        nested_form({"text": "t"})  # type: ignore[arg-type]


def test_seal_needs_a_record_class_with_an_identity() -> None:
    """seal refuses a non-record class and a record without an identity field."""
    with pytest.raises(ParameterTypeError, match=r"seal\(\): cls"):
        seal(dict)
    with pytest.raises(TypeError, match="declares no identity field"):
        seal(SourceSpan, text="t", start=0, end=1)


def test_lazy_loader_refuses_an_unknown_submodule() -> None:
    """kernel's loader knows its public submodules only."""
    import kernel

    with pytest.raises(AttributeError, match=r"no submodule 'kernel\.nope'"):
        kernel._load("kernel.nope")


def fields_of(record: Record) -> dict[str, Any]:
    """Every field of ``record`` by name (as a constructor would take them)."""
    return {f.name: getattr(record, f.name) for f in attrs.fields(type(record))}  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(samples())
def test_every_way_to_an_id_agrees_with_the_stdlib(sample: Sample) -> None:
    """For all records: id_of_fields (no record built), compute_id with and without the
    nested-form cache, and nested_id all hash what the stdlib hashes."""
    payload = identity_payload(sample)
    assert id_of_fields(Sample, fields_of(sample)) == independent_id(payload) == sample.sample_id
    assert compute_id(sample, cached=False) == sample.sample_id
    fields = fields_of(sample) | {"sample_id": "f" * 64, "explanation": "ignored"}
    assert id_of_fields(Sample, fields) == sample.sample_id
    assert (
        nested_id(sample) == nested_id(sample, cached=False) == independent_id(nested_form(sample))
    )
    for leaf in sample.leaves:
        assert nested_id(leaf, cached=False) == independent_id(nested_form(leaf))


def test_id_of_fields_follows_an_include_list() -> None:
    """A non-sealing include-list identity: only the included fields, never the id."""
    record = seal(Unsealed, a=1, b="x", c="ignored")
    assert id_of_fields(Unsealed, {"a": 1, "b": "x"}) == record.digest
    assert id_of_fields(Unsealed, fields_of(record) | {"c": "other"}) == record.digest


def test_uncached_ids_see_a_record_altered_after_its_nested_form_was_cached() -> None:
    """The nested-form cache holds a record's values from when it was first hashed;
    ``cached=False`` and `id_of_fields` hash the fields as they hold now."""
    record = Sample.from_dict(base_document())
    before = compute_id(record)  # caches the nested forms of its leaves
    object.__setattr__(record.leaf, "name", "altered")  # harmless: our own object
    payload = identity_payload(Sample.from_dict(base_document()))
    payload["leaf"]["name"] = "altered"
    assert compute_id(record) == before  # the cache still answers
    assert compute_id(record, cached=False) == independent_id(payload) != before
    assert id_of_fields(Sample, fields_of(record)) == independent_id(payload)
    assert nested_id(record.leaf) != nested_id(record.leaf, cached=False)
    assert nested_id(record.leaf, cached=False) == independent_id(payload["leaf"])


def test_id_of_fields_and_nested_id_name_their_misuse() -> None:
    """A non-record class, a record without an identity, a missing payload field, a
    non-record are refused with errors that say so."""
    with pytest.raises(ParameterTypeError, match=r"id_of_fields\(\): cls"):
        id_of_fields(dict, {})  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match=r"id_of_fields\(\): cls"):
        id_of_fields("Sample", {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="declares no identity field"):
        id_of_fields(SourceSpan, {"text": "t", "start": 0, "end": 1, "sentence_index": None})
    with pytest.raises(TypeError, match="no value for payload field 'b'"):
        id_of_fields(Unsealed, {"a": 1})
    with pytest.raises(ParameterTypeError, match=r"nested_id\(\): record: expected Record"):
        nested_id({"text": "t"})  # type: ignore[arg-type]
