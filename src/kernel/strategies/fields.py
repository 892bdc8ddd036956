"""Strategies derived from field annotations (ADR-0007): the vocabulary drives them too.

`from_annotation` draws values an annotation admits, kind by kind; `records_of` builds
records of any class from its annotations and keeps only those its own rules accept
(cross-field rules refuse the rest). The seeded strategies of the other modules stay
the fast way to draw whole, consistent runs; these reach every record class.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, Final, TypeVar

import attrs
from hypothesis import strategies as st

from kernel.errors import FieldError
from kernel.records.codec import Record
from kernel.records.identity import MAX_SAFE_INT
from kernel.records.shapes import (
    EnumShape,
    FixedTuple,
    FrozenMap,
    JsonShape,
    Kinded,
    LiteralShape,
    ObjectShape,
    OmissibleShape,
    RecordShape,
    Scalar,
    Shape,
    UnionShape,
    VarTuple,
    shape_of,
)
from kernel.records.values import kind_of
from kernel.strategies.values import of_kind, texts

__all__ = ["from_annotation", "from_shape", "json_values", "records_of"]

R = TypeVar("R", bound=Record)


def from_annotation(hint: Any) -> st.SearchStrategy[Any]:
    """Values a field annotated ``hint`` admits (see `kernel.records.codec.field_check`).

    Raises:
        TypeError: ``hint`` is not part of the vocabulary.
    """
    return from_shape(shape_of(hint))


def from_shape(shape: Shape) -> st.SearchStrategy[Any]:
    """Values a field of ``shape`` admits (`from_annotation` of its annotation).

    Raises:
        TypeError: the shape is not part of the field vocabulary.
    """
    match shape:
        case Kinded(inner=inner, validators=validators):
            # The first kind states the whole rule (metadata that is no kind adds nothing).
            kind = kind_of(validators[0])
            return of_kind(kind) if kind is not None else from_shape(inner)
        case Scalar(hint=hint):
            return _SCALARS[hint]()
        case EnumShape(hint=hint, abstract=abstract):
            return st.nothing() if abstract else st.sampled_from(list(hint))
        case RecordShape(hint=hint):
            record_cls = hint
            return st.deferred(lambda: records_of(record_cls))
        case LiteralShape(values=values):
            return st.sampled_from(values)
        case UnionShape(members=members, optional=optional):
            drawn = [from_shape(member) for member in members]
            return st.one_of([*drawn, st.none()] if optional else drawn)
        case VarTuple(item=item):
            items = from_shape(item)
            # An abstract enum (`Refusal.reason_codes`) has no members to draw.
            return st.just(()) if items.is_empty else st.lists(items, max_size=3).map(tuple)
        case FixedTuple(items=items):
            return st.tuples(*(from_shape(item) for item in items))
        case ObjectShape(value=value):
            return st.dictionaries(texts(), from_shape(value), max_size=3).map(FrozenMap)
        case JsonShape():
            return json_values()
        case OmissibleShape(inner=inner):
            return from_shape(inner)
    raise TypeError(f"no strategy for field type {shape.hint!r}")


def json_values() -> st.SearchStrategy[object]:
    """What a `kernel.records.values.JsonValue` field admits: JSON without floats,
    arrays as tuples and objects as `FrozenMap`."""
    scalars = st.none() | st.booleans() | _SCALARS[int]() | texts()
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(texts(), inner, max_size=3).map(FrozenMap)
        ),
        max_leaves=8,
    )


_SCALARS: Final[dict[object, Callable[[], st.SearchStrategy[Any]]]] = {
    str: texts,
    int: lambda: st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT),
    bool: st.booleans,
    type(None): st.none,
}


def records_of(cls: type[R]) -> st.SearchStrategy[R]:
    """Records of ``cls`` drawn field by field from their annotations; a draw its own
    rules refuse (ordering, cross-field invariants) is discarded, never returned.

    Ids are sealed by the constructor (a record's id field keeps its default).
    """
    known = _RECORDS.get(cls)
    if known is not None:
        return typing.cast("st.SearchStrategy[R]", known)
    hints = typing.get_type_hints(cls, include_extras=True)
    id_field = cls.__identity__.field
    fields = {
        field.name: from_annotation(hints[field.name])
        for field in attrs.fields(cls)  # type: ignore[arg-type]
        if field.name != id_field or field.default is attrs.NOTHING
    }
    built = (
        st.fixed_dictionaries(fields)
        .map(lambda kwargs: _build(cls, kwargs))
        .filter(lambda record: record is not None)
    )
    _RECORDS[cls] = built
    return typing.cast("st.SearchStrategy[R]", built)


_RECORDS: dict[type[Record], st.SearchStrategy[Record | None]] = {}


def _build(cls: type[R], kwargs: dict[str, Any]) -> R | None:
    try:
        return cls(**kwargs)
    except FieldError:
        return None
