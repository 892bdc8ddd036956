"""Shapes: each annotation compiled once into a tree its readers walk (ADR-0007).

`shape_of` reads an annotation (``tuple[Digest, ...] | None``) into a `Shape` and keeps
it: the construction rules, the parsers, the JSON Schemas, the strategies and the
parameter checks of ``@boundary`` all walk the shape instead of taking the
annotation apart again with ``typing``. A shape says what the annotation is, never
what a reader makes of it: a reader that has no answer for a shape (a float field, a
union the parser cannot tag) raises its own error.
"""

from __future__ import annotations

import collections.abc
import enum
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, TypeVar

__all__ = [
    "JSON",
    "NOT_NULL",
    "Anything",
    "ClassShape",
    "EnumShape",
    "FixedTuple",
    "FrozenMap",
    "JsonShape",
    "Kinded",
    "LiteralShape",
    "MappingShape",
    "ObjectShape",
    "OmissibleShape",
    "OtherGeneric",
    "RecordShape",
    "Scalar",
    "SequenceShape",
    "Shape",
    "TypeShape",
    "UnionShape",
    "VarTuple",
    "is_record_class",
    "kind_validators",
    "shape_of",
]


V_co = TypeVar("V_co", covariant=True)


class FrozenMap(Mapping[str, V_co]):
    """A JSON object a record holds: string keys, immutable and hashable, as a tuple is
    a JSON array a record holds (a frozen record never holds a ``dict``).

    ``FrozenMap[str]`` annotates an object of strings (a command's ``env``); the codec
    reads a JSON object into one and writes it back as a ``dict``.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, V_co] | None = None, /) -> None:
        self._items: dict[str, V_co] = {} if items is None else dict(items)

    def __getitem__(self, key: str) -> V_co:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            return self._items == other._items
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenMap({self._items!r})"

    def __reduce__(self) -> tuple[type[FrozenMap[V_co]], tuple[dict[str, V_co]]]:
        return (type(self), (self._items,))


class _JsonMarker:
    __slots__ = ()

    def __repr__(self) -> str:
        return "JSON"


JSON: Final = _JsonMarker()
"""The metadata of ``Annotated[object, JSON]`` (`kernel.records.values.JsonValue`): any
JSON value a canonical document admits, arrays as tuples and objects as `FrozenMap`."""


class _NotNullMarker:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_NULL"


NOT_NULL: Final = _NotNullMarker()
"""The metadata of ``Annotated[X | None, NOT_NULL]`` (`kernel.records.values.Omissible`):
X in a document, or the key left out (None in the record); never ``null``."""


def is_record_class(hint: object) -> bool:
    """True when ``hint`` is a record class (`kernel.records.codec.Record` or a
    subclass): every one carries the codec's ``__identity__``."""
    return isinstance(hint, type) and hasattr(hint, "__identity__")


def kind_validators(hint: Any) -> tuple[Callable[[Any, Any, Any], None], ...]:
    """The validators an ``Annotated`` hint carries (callables marked with a kind)."""
    if typing.get_origin(hint) is not typing.Annotated:
        return ()
    return tuple(
        item
        for item in typing.get_args(hint)[1:]
        if callable(item) and getattr(item, "kernel_kind", None) is not None
    )


class Shape:
    """One node of a compiled annotation; ``hint`` is the annotation it was read from."""

    __slots__ = ("hint",)

    def __init__(self, hint: Any) -> None:
        self.hint = hint

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.hint!r})"


class Scalar(Shape):
    """``str``, ``int``, ``bool`` or ``None`` (``hint`` is the type, ``NoneType`` for None)."""

    __slots__ = ()


class Anything(Shape):
    """``object``, ``Any`` or a type variable: admits any value."""

    __slots__ = ()


class EnumShape(Shape):
    """An enum class; ``abstract`` when it has no members (a base such as ``StrEnum``)."""

    __slots__ = ("abstract",)

    def __init__(self, hint: type[enum.Enum]) -> None:
        super().__init__(hint)
        self.abstract = not list(hint)


class RecordShape(Shape):
    """A record class (`is_record_class`)."""

    __slots__ = ()


class ClassShape(Shape):
    """Any other class (a parameter's ``Path``; no record field may have one)."""

    __slots__ = ()


class LiteralShape(Shape):
    """``Literal[...]``: its ``values``."""

    __slots__ = ("values",)

    def __init__(self, hint: Any) -> None:
        super().__init__(hint)
        self.values: tuple[Any, ...] = typing.get_args(hint)


class Kinded(Shape):
    """``Annotated[T, kind, ...]`` carrying field kinds (`kernel.records.values`):
    ``inner`` is T's shape, ``validators`` the kinds' validators in order."""

    __slots__ = ("inner", "validators")

    def __init__(self, hint: Any, inner: Shape, validators: tuple[Any, ...]) -> None:
        super().__init__(hint)
        self.inner = inner
        self.validators = validators


class UnionShape(Shape):
    """``A | B | None``: ``members`` in order, ``None`` left out (``optional`` says it was
    there)."""

    __slots__ = ("members", "optional")

    def __init__(self, hint: Any, members: tuple[Shape, ...], optional: bool) -> None:
        super().__init__(hint)
        self.members = members
        self.optional = optional


class ObjectShape(Shape):
    """``FrozenMap[V]``: a JSON object with string keys, every value ``value``."""

    __slots__ = ("value",)

    def __init__(self, hint: Any, value: Shape) -> None:
        super().__init__(hint)
        self.value = value


class JsonShape(Shape):
    """``Annotated[object, JSON]``: any JSON value (no float: every record stays
    canonical JSON), arrays as tuples and objects as `FrozenMap`, nested at most
    `kernel.records.identity.MAX_DEPTH` deep."""

    __slots__ = ()


class OmissibleShape(Shape):
    """``Annotated[X | None, NOT_NULL]``: ``inner`` is the shape of ``X | None``; a
    document leaves the key out for None and never writes ``null``."""

    __slots__ = ("inner",)

    def __init__(self, hint: Any, inner: Shape) -> None:
        super().__init__(hint)
        self.inner = inner


class VarTuple(Shape):
    """``tuple[X, ...]``: every item is ``item``."""

    __slots__ = ("item",)

    def __init__(self, hint: Any, item: Shape) -> None:
        super().__init__(hint)
        self.item = item


class FixedTuple(Shape):
    """``tuple[X, Y]``: item by item."""

    __slots__ = ("items",)

    def __init__(self, hint: Any, items: tuple[Shape, ...]) -> None:
        super().__init__(hint)
        self.items = items


class SequenceShape(Shape):
    """``Sequence[X]`` or ``list[X]`` (parameters only): a list or tuple of ``item``."""

    __slots__ = ("item",)

    def __init__(self, hint: Any, item: Shape) -> None:
        super().__init__(hint)
        self.item = item


class MappingShape(Shape):
    """``Mapping[K, V]`` or ``dict[K, V]`` (parameters only)."""

    __slots__ = ("key", "value")

    def __init__(self, hint: Any, key: Shape, value: Shape) -> None:
        super().__init__(hint)
        self.key = key
        self.value = value


class TypeShape(Shape):
    """``type[X]`` (parameters only): a class, a subclass of ``bound`` when it is a class."""

    __slots__ = ("bound",)

    def __init__(self, hint: Any, bound: object) -> None:
        super().__init__(hint)
        self.bound = bound


class OtherGeneric(Shape):
    """Any other generic (``Iterable[X]``, ``Callable[...]``): ``origin`` is its
    runtime class, when it has one."""

    __slots__ = ("origin",)

    def __init__(self, hint: Any, origin: object) -> None:
        super().__init__(hint)
        self.origin = origin


_SHAPES: dict[object, Shape] = {}
_SEQUENCES: Final = (collections.abc.Sequence, list)
_MAPPINGS: Final = (collections.abc.Mapping, dict)


def shape_of(hint: Any) -> Shape:
    """The shape of ``hint``, compiled at its first use and kept (annotations are
    hashable; one that is not is compiled each time). Never raises."""
    try:
        known = _SHAPES.get(hint)
    except TypeError:  # an unhashable annotation (a list in Literal): not kept
        return _compile(hint)
    if known is None:
        known = _SHAPES[hint] = _compile(hint)
    return known


def _compile(hint: Any) -> Shape:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return _compile_annotated(hint, args)
    if hint is None:
        return Scalar(type(None))
    if hint in (str, int, bool, type(None)):
        return Scalar(hint)
    if origin is None:
        return _compile_class(hint)
    if origin in (types.UnionType, typing.Union):
        members = tuple(shape_of(a) for a in args if a is not type(None))
        return UnionShape(hint, members, optional=len(members) < len(args))
    if origin is typing.Literal:
        return LiteralShape(hint)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return VarTuple(hint, shape_of(args[0]))
        return FixedTuple(hint, tuple(shape_of(a) for a in args))
    if origin is FrozenMap and len(args) == 1:
        return ObjectShape(hint, shape_of(args[0]))
    if origin in _SEQUENCES and len(args) == 1:
        return SequenceShape(hint, shape_of(args[0]))
    if origin in _MAPPINGS and len(args) == 2:
        return MappingShape(hint, shape_of(args[0]), shape_of(args[1]))
    if origin is type:
        return TypeShape(hint, args[0])
    return OtherGeneric(hint, origin)


def _compile_annotated(hint: Any, args: tuple[Any, ...]) -> Shape:
    if any(item is JSON for item in args[1:]):
        return JsonShape(hint)
    if any(item is NOT_NULL for item in args[1:]):
        return OmissibleShape(hint, shape_of(args[0]))
    validators = kind_validators(hint)
    inner = shape_of(args[0])
    return Kinded(hint, inner, validators) if validators else inner


def _compile_class(hint: Any) -> Shape:
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return EnumShape(hint)
    if is_record_class(hint):
        return RecordShape(hint)
    if isinstance(hint, type) and hint is not object and hint is not Any:
        return ClassShape(hint)
    return Anything(hint)
