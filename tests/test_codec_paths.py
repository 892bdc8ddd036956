"""Codec paths a typical record never takes: classes used before any record of theirs
was built, nested forms cached during construction, records altered after it, and the
corners of the annotation vocabulary."""

from __future__ import annotations

from typing import Annotated, Any

import attrs
import pytest

from kernel.errors import CanonicalizationError, FieldError
from kernel.records.codec import (
    UNSEALED,
    Identity,
    Record,
    compute_id,
    document_digest,
    field_check,
    id_of_fields,
    kind_validators,
    nested_form,
    nested_id,
    seal,
)
from kernel.records.rules import _rule
from kernel.records.values import Digest, non_negative, positive


def _fresh_class() -> type[Record]:
    """A record class no record was ever built of (its spec is not compiled yet)."""

    @attrs.frozen(kw_only=True)
    class Fresh(Record):
        """Self-sealing id over a text and a count."""

        __identity__ = Identity(field="fresh_id")

        fresh_id: Digest = UNSEALED
        text: str
        count: int

    return Fresh


def _without_init(cls: type[Record], **fields: object) -> Record:
    """A record made as unpickling makes it: no ``__init__``, no construction check."""
    record = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(record, name, value)
    return record


@pytest.mark.parametrize("digest_of", [compute_id, nested_id, document_digest])
def test_ids_of_a_record_made_without_init_are_those_of_the_same_record_built(
    digest_of: Any,
) -> None:
    """The first use of a class may be a record that never ran ``__init__``."""
    made = _without_init(_fresh_class(), fresh_id=UNSEALED, text="a", count=1)
    first = digest_of(made)
    built = _fresh_class()(fresh_id=UNSEALED, text="a", count=1)  # type: ignore[call-arg]
    assert first == digest_of(built)


def test_seal_and_id_of_fields_compile_a_class_on_first_use() -> None:
    sealed = seal(_fresh_class(), text="b", count=2)
    expected = id_of_fields(_fresh_class(), {"text": "b", "count": 2})
    assert sealed.fresh_id == expected  # type: ignore[attr-defined]
    assert compute_id(sealed) == expected


@attrs.frozen(kw_only=True)
class SelfDescribed(Record):
    """Reads its own nested form while it is built (before its id is set)."""

    __identity__ = Identity(field="self_id")

    self_id: Digest = UNSEALED
    text: str
    seen: int = attrs.field(default=0, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "seen", len(nested_form(self)))


def test_a_nested_form_read_during_construction_never_keeps_the_placeholder() -> None:
    record = SelfDescribed(text="x")
    assert record.self_id != UNSEALED
    assert record.self_id == compute_id(record)
    assert nested_form(record)["self_id"] == record.self_id


def test_a_record_altered_to_hold_a_foreign_value_is_not_hashed() -> None:
    """Only ``object.__setattr__`` can do it; the ids and digests refuse, never guess."""
    record = _fresh_class()(text="t", count=0)  # type: ignore[call-arg]
    object.__setattr__(record, "text", object())
    for digest_of in (compute_id, nested_id, document_digest):
        with pytest.raises(CanonicalizationError):
            digest_of(record)
    with pytest.raises(CanonicalizationError):
        compute_id(record, cached=False)


def test_kind_validators_of_a_plain_type_are_none() -> None:
    assert kind_validators(int) == ()
    assert kind_validators(Annotated[int, "a note"]) == ()


def test_an_annotation_without_a_kind_is_checked_as_its_type() -> None:
    check = field_check(Annotated[int, "a note"], "Sample.field")
    assert check is not None
    check(1, "field")
    with pytest.raises(FieldError, match="expected an integer"):
        check("1", "field")


@pytest.mark.parametrize(
    ("value", "message"),
    [(0, "expected an integer >= 1"), (-1, r"expected an integer in 0\.\.2"), (2, None)],
)
def test_every_kind_of_an_annotation_runs_in_order(value: int, message: str | None) -> None:
    hint: Any = Annotated[int, non_negative, positive]
    rule = _rule(hint, "Sample.field")
    assert rule is not None
    assert rule.accepts(value) is (message is None)
    check = field_check(hint, "Sample.field")
    assert check is not None
    if message is None:
        check(value, "field")
        return
    with pytest.raises(FieldError, match=message):
        check(value, "field")


def test_what_admits_anything_has_no_check() -> None:
    assert field_check(object | None, "Sample.field") is None
    assert field_check(tuple[object, ...], "Sample.field") is not None


def test_a_fixed_tuple_checks_only_the_items_it_states() -> None:
    hint: Any = tuple[str, object]
    check = field_check(hint, "Sample.field")
    rule = _rule(hint, "Sample.field")
    assert check is not None
    assert rule is not None
    check(("a", object()), "field")
    assert rule.accepts(("a", object()))
    with pytest.raises(FieldError, match=r"field\[0\]: expected str"):
        check((1, "a"), "field")
    assert not rule.accepts((1, "a"))


def test_a_field_the_codec_cannot_read_is_refused_when_its_class_is_first_used() -> None:
    @attrs.frozen(kw_only=True)
    class Opaque(Record):
        """Holds anything: it can be built, never read from or written to JSON."""

        anything: object

    with pytest.raises(TypeError, match=r"Opaque\.anything: unsupported field type"):
        Opaque(anything=1)
