"""A field a document may leave out but never write as null (``Omissible[X]``): the
codec tells an absent key from an explicit ``null`` (ADR-0007), so a run config's
``"reference_patch": null`` is refused where leaving the key out means no reference."""

from __future__ import annotations

import enum
import typing
from typing import Annotated

import attrs
import jsonschema
import pytest
from hypothesis import given

from kernel.effects.run_config import CalibrationEntry, filled
from kernel.effects.schemas import schema_for
from kernel.errors import FieldError, RecordError
from kernel.records.codec import Record, document_digest
from kernel.records.identity import sha256_hex
from kernel.records.parsers import compile_field
from kernel.records.shapes import NOT_NULL, OmissibleShape, UnionShape, shape_of
from kernel.records.values import NonBlank, Omissible
from kernel.strategies.fields import records_of


class Speed(enum.StrEnum):
    """An encoded value (enum members are written as their values)."""

    SLOW = "slow"
    FAST = "fast"


@attrs.frozen(kw_only=True)
class Entry(Record):
    """Omissible fields beside an optional one and a required one."""

    name: NonBlank
    note: Omissible[NonBlank] = None
    speed: Omissible[Speed] = None
    maybe: str | None = None


def test_an_omissible_field_is_an_optional_shape_under_its_marker() -> None:
    """``Omissible[X]`` is ``X | None`` marked NOT_NULL."""
    shape = shape_of(typing.get_type_hints(Entry, include_extras=True)["note"])
    assert isinstance(shape, OmissibleShape)
    assert isinstance(shape.inner, UnionShape)
    assert shape.inner.optional
    assert repr(NOT_NULL) == "NOT_NULL"


def test_a_left_out_key_is_none_and_is_left_out_again() -> None:
    """Absent reads as None and ``to_dict`` leaves it out, so the document round-trips;
    its document digest is that of the document without the key."""
    entry = Entry.from_dict({"name": "a", "maybe": None})
    assert entry == Entry(name="a")
    assert entry.to_dict() == {"name": "a", "maybe": None}
    assert document_digest(entry) == sha256_hex(entry.to_dict())
    full = Entry.from_dict({"name": "a", "note": "n", "speed": "fast", "maybe": "m"})
    assert full.speed is Speed.FAST
    assert full.to_dict() == {"name": "a", "note": "n", "speed": "fast", "maybe": "m"}
    assert Entry.from_dict(full.to_dict()) == full


@pytest.mark.parametrize(
    ("document", "path", "reason"),
    [
        ({"name": "a", "maybe": None, "note": None}, "note", "expected string, got null"),
        ({"name": "a", "maybe": None, "speed": None}, "speed", "expected one of"),
        ({"name": "a", "maybe": None, "note": " "}, "note", "non-blank"),
        ({"maybe": None}, "name", "missing field"),
        ({"name": "a"}, "maybe", "missing field"),
        ({"name": "a", "maybe": None, "other": 1}, "other", "unknown field"),
    ],
)
def test_null_is_no_value_of_an_omissible_field(
    document: dict[str, object], path: str, reason: str
) -> None:
    """An explicit null is refused at the field; other fields keep their rules (a
    ``X | None`` field is still written out, as every field of a kernel document)."""
    with pytest.raises(RecordError, match=reason) as caught:
        Entry.from_dict(document)
    assert caught.value.path == path


def test_construction_admits_none_for_a_left_out_key() -> None:
    """In the record None stands for the left-out key; other values keep X's rule."""
    assert Entry(name="a", note=None).note is None
    with pytest.raises(FieldError, match=r"Entry\.note: expected a non-blank string"):
        Entry(name="a", note=" ")


def test_the_schema_neither_requires_nor_admits_null() -> None:
    """The generated schema leaves the field out of ``required`` and refuses null."""
    schema = schema_for("entry", Entry)
    assert "note" not in schema["required"]
    assert "maybe" in schema["required"]
    jsonschema.validate({"name": "a", "maybe": None}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "a", "maybe": None, "note": None}, schema)


@given(records_of(Entry))
def test_drawn_records_round_trip(entry: Entry) -> None:
    """For all drawn records: ``from_dict(to_dict())`` is the record."""
    assert Entry.from_dict(entry.to_dict()) == entry


def test_a_marker_on_a_type_that_admits_no_none_has_no_parser() -> None:
    """NOT_NULL marks ``X | None``; on a bare X it is a declaration error."""
    with pytest.raises(TypeError, match="unsupported field type"):
        compile_field(Annotated[str, NOT_NULL], "Bad.field", lambda cls: cls)


def test_a_run_config_reference_patch_left_out_is_none_and_null_is_refused() -> None:
    """``"calibration": {}`` calibrates without a reference; ``"reference_patch":
    null`` is refused by the codec (no special case in the loader)."""
    assert CalibrationEntry.from_dict(filled(CalibrationEntry, {})).reference_patch is None
    assert filled(CalibrationEntry, {}) == {}
    with pytest.raises(RecordError, match="reference_patch: expected string, got null"):
        CalibrationEntry.from_dict(filled(CalibrationEntry, {"reference_patch": None}))
