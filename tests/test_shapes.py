"""Shapes: every annotation is compiled once into the tree its readers walk."""

from __future__ import annotations

import collections.abc
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.records.codec import short_repr
from kernel.records.shapes import (
    Anything,
    ClassShape,
    EnumShape,
    FixedTuple,
    Kinded,
    LiteralShape,
    MappingShape,
    OtherGeneric,
    RecordShape,
    Scalar,
    SequenceShape,
    TypeShape,
    UnionShape,
    VarTuple,
    shape_of,
)
from kernel.records.values import Count, Digest
from kernel.run.verification import Isolation, WorkUnit
from kernel.strategies.fields import from_annotation

T = TypeVar("T")


class _Empty(enum.StrEnum):
    """An enum base without members."""


@pytest.mark.parametrize(
    ("hint", "shape"),
    [
        (str, Scalar),
        (None, Scalar),
        (type(None), Scalar),
        (Isolation, EnumShape),
        (WorkUnit, RecordShape),
        (Path, ClassShape),
        (object, Anything),
        (Any, Anything),
        (T, Anything),
        (Literal["a", 1], LiteralShape),
        (Digest, Kinded),
        (Digest | None, UnionShape),
        (tuple[Count, ...], VarTuple),
        (tuple[str, int], FixedTuple),
        (Sequence[int], SequenceShape),
        (list[int], SequenceShape),
        (Mapping[str, int], MappingShape),
        (dict[str, Any], MappingShape),
        (type[WorkUnit], TypeShape),
        (Iterable[int], OtherGeneric),
        (Callable[[int], int], OtherGeneric),
    ],
    ids=short_repr,
)
def test_each_annotation_compiles_to_its_shape(hint: object, shape: type) -> None:
    """Every form of the vocabulary (and of a parameter's annotation) has its node,
    which keeps the annotation it was read from."""
    compiled = shape_of(hint)
    assert type(compiled) is shape
    assert repr(compiled).startswith(f"{shape.__name__}(")


def test_a_shape_is_compiled_once_and_kept() -> None:
    """The same annotation gives the same shape object (compiled at its first use)."""
    assert shape_of(tuple[Digest, ...] | None) is shape_of(tuple[Digest, ...] | None)


def test_an_unhashable_annotation_is_compiled_but_not_kept() -> None:
    """A Literal of a list cannot key the cache: compiled each time, never an error."""
    hint: Any = Literal[[1]]
    first, second = shape_of(hint), shape_of(hint)
    assert isinstance(first, LiteralShape)
    assert first is not second


def test_nodes_hold_their_parts() -> None:
    """Unions leave None out and say so; kinds keep their inner type; mappings without
    arguments are classes; an enum without members is abstract."""
    union = shape_of(Digest | Count | None)
    assert isinstance(union, UnionShape)
    assert union.optional
    assert [type(m) for m in union.members] == [Kinded, Kinded]
    kinded = shape_of(Digest)
    assert isinstance(kinded, Kinded)
    assert kinded.inner is shape_of(str)
    assert shape_of(Annotated[str, "a note, no kind"]) is shape_of(str)
    bare = shape_of(collections.abc.Mapping)
    assert isinstance(bare, ClassShape)
    empty = shape_of(dict[str, int])
    assert isinstance(empty, MappingShape)
    assert empty.key is shape_of(str)
    plain = shape_of(dict)
    assert isinstance(plain, ClassShape)
    abstract = shape_of(_Empty)
    assert isinstance(abstract, EnumShape)
    assert abstract.abstract
    assert not shape_of(Isolation).abstract  # type: ignore[attr-defined]


def _not_a_kind(_instance: object, _attribute: object, _value: object) -> None:
    """Carries a ``kernel_kind`` marker that is no `Kind`."""


_not_a_kind.kernel_kind = "not a Kind"  # type: ignore[attr-defined]


@given(st.data())
def test_a_marker_that_is_no_kind_draws_from_the_inner_type(data: st.DataObject) -> None:
    """The strategies draw from the annotated type when the metadata names no Kind."""
    value = data.draw(from_annotation(Annotated[int, _not_a_kind]))
    assert type(value) is int
