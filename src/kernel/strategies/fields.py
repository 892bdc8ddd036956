"""Strategies derived from field annotations (ADR-0007): the vocabulary drives them too.

`from_annotation` draws values an annotation admits, kind by kind; `records_of` builds
records of any class from its annotations and keeps only those its own rules accept
(cross-field rules refuse the rest). The seeded strategies of the other modules stay
the fast way to draw whole, consistent runs; these reach every record class.
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Any, TypeVar

import attrs
from hypothesis import strategies as st

from kernel.errors import FieldError
from kernel.records.codec import Record, kind_validators
from kernel.records.identity import MAX_SAFE_INT
from kernel.records.values import kind_of
from kernel.strategies.values import of_kind, texts

__all__ = ["from_annotation", "records_of"]

R = TypeVar("R", bound=Record)


def from_annotation(hint: Any) -> st.SearchStrategy[Any]:
    """Values a field annotated ``hint`` admits (see `kernel.records.codec.field_check`).

    Raises:
        TypeError: ``hint`` is not part of the vocabulary.
    """
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        kinds = [kind_of(validator) for validator in kind_validators(hint)]
        # The kind states the whole rule; metadata that is no kind adds nothing.
        return of_kind(kinds[0]) if kinds and kinds[0] else from_annotation(hint.__origin__)
    if hint is str:
        return texts()
    if hint is int:
        return st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)
    if hint is bool:
        return st.booleans()
    if hint is type(None):
        return st.none()
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        members = list(hint)
        return st.sampled_from(members) if members else st.nothing()
    if isinstance(hint, type) and issubclass(hint, Record):
        return st.deferred(lambda: records_of(hint))
    if origin is typing.Literal:
        return st.sampled_from(typing.get_args(hint))
    if origin in (types.UnionType, typing.Union):
        return st.one_of([from_annotation(member) for member in typing.get_args(hint)])
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            items = from_annotation(args[0])
            # An abstract enum (`Refusal.reason_codes`) has no members to draw.
            return st.just(()) if items.is_empty else st.lists(items, max_size=3).map(tuple)
        return st.tuples(*(from_annotation(arg) for arg in args))
    raise TypeError(f"no strategy for field type {hint!r}")


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
