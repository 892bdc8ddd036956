"""Construction rules: what each field annotation admits when a record is built.

`field_check` compiles an annotation's shape (`kernel.records.shapes`) once into a rule
that checks a value at a path (raising `FieldError`) and a fast ``accepts`` answer;
`kernel.records.codec` runs a record class's rules on every construction (ADR-0007).
This module never imports the codec, so the codec can compile its specs from here.
"""

from __future__ import annotations

import enum
import functools
import operator
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from kernel.errors import FieldError
from kernel.records.identity import MAX_DEPTH, MAX_SAFE_INT, is_canonical_str
from kernel.records.shapes import (
    Anything,
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
    is_record_class,
    shape_of,
)

__all__ = [
    "check_json",
    "describe_found",
    "field_check",
    "short_repr",
]


_Check = Callable[[object, str], None]
"""Checks one value at a construction path; raises `FieldError` naming that path."""
_Accepts = Callable[[object], bool]
"""Answers whether a value is admitted: no path, no message (the fast path)."""


class _At:
    """Stands in for an ``attrs.Attribute`` when a kind's validator checks a value
    (``inputs[2]``): validators read only ``name``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


# What a kind's validator sees when only its verdict is wanted (`_Rule.accepts`).
_ANYWHERE: Final = _At("")
_SAFE_INTS: Final = range(-MAX_SAFE_INT, MAX_SAFE_INT + 1)
_TEXT_TYPES: Final = frozenset({str, type(None)})
_NUMBER_TYPES: Final = frozenset({int, type(None)})


class _Rule:
    """What one annotation admits, said twice.

    ``check(value, path)`` raises a `FieldError` naming the path and the rule broken;
    ``accepts(value)`` only answers, building no path and no message: construction
    runs ``accepts`` and calls ``check`` only for a value it refuses, so the two must
    agree on every value (a property test holds them together).

    ``types`` is set when the rule is exactly "the value's exact type is one of
    ``types``; a ``str`` is valid Unicode; an ``int`` is safe": such fields of a
    record are checked together (`_FieldChecks`), without a Python call per field.
    """

    __slots__ = ("accepts", "check", "types", "validators")

    def __init__(
        self,
        check: _Check,
        accepts: _Accepts,
        types: frozenset[type] | None,
        validators: tuple[Callable[[Any, Any, Any], None], ...] | None = None,
    ) -> None:
        self.check = check
        self.accepts = accepts
        self.types = types
        self.validators = validators
        """The kind's validators, for a rule that is exactly an ``Annotated`` kind."""


def field_check(hint: Any, where: str) -> _Check | None:
    """The construction check an annotation implies, or None when it admits anything.

    ``str`` is exact, valid-Unicode text; ``int`` an exact int inside +/-(2**53 - 1)
    (``bool`` is not an int); ``bool`` exact; an enum its members only (not their
    values); a record class exactly that class; ``Literal`` its values; ``X | None``
    and unions of records; ``tuple[X, ...]`` and fixed tuples item by item (the
    failing item named ``field[i]``); ``Annotated[T, kind]`` runs the kinds of
    `kernel.records.values` (digest, count, ...), which state the whole rule.
    """
    rule = _rule(hint, where)
    return None if rule is None else rule.check


def _rule(hint: Any, where: str) -> _Rule | None:
    return _shape_rule(shape_of(hint), where)


def _shape_rule(shape: Shape, where: str) -> _Rule | None:
    match shape:
        case Kinded(validators=validators):
            return _kind_rule(validators)
        case Scalar(hint=hint):
            return _scalar_rule(hint)
        case EnumShape(hint=hint, abstract=True):
            # A concrete enum admits its own members; an abstract base (``StrEnum`` in the
            # refusal base class) admits the members of any subclass, which subclasses narrow.
            abstract: type = hint
            return _Rule(_class_check(hint), lambda value: isinstance(value, abstract), None)
        case EnumShape(hint=hint) | RecordShape(hint=hint):
            return _typed_rule(_class_check(hint), frozenset({hint}))
        case LiteralShape(values=values):
            return _literal_rule(values)
        case UnionShape(members=members, optional=optional):
            none = (shape_of(type(None)),) if optional else ()
            return _union_rule((*members, *none), where)
        case VarTuple(item=item):
            return _tuple_rule((item,), where, variadic=True)
        case FixedTuple(items=items):
            return _tuple_rule(items, where, variadic=False)
        case ObjectShape() | JsonShape():
            return _json_rule(shape, where)
        case OmissibleShape(inner=inner):
            # In the record a left-out key is None: what ``X | None`` admits.
            return _shape_rule(inner, where)
        case Anything(hint=hint) if hint is object or hint is Any:
            return None
    raise TypeError(f"{where}: no construction check for field type {shape.hint!r}")


def _scalar_rule(hint: type) -> _Rule:
    if hint is str:
        return _Rule(_check_str, _accepts_str, frozenset({str}))
    if hint is int:
        return _Rule(_check_int, _accepts_int, frozenset({int}))
    return _typed_rule(_exact_check(hint), frozenset({hint}))


def _json_rule(shape: ObjectShape | JsonShape, where: str) -> _Rule:
    """``FrozenMap[V]``: exactly a `FrozenMap`, its keys valid text, each value V's;
    ``JsonValue``: `check_json`."""
    if isinstance(shape, JsonShape):
        return _Rule(check_json, _accepts_json, None)
    rule = _shape_rule(shape.value, where)
    each = _anything if rule is None else rule.accepts
    check_value = None if rule is None else rule.check

    def check_object(value: object, path: str) -> None:
        if type(value) is not FrozenMap:
            raise FieldError(path, f"expected a FrozenMap, got {describe_found(value)}")
        for key, item in value.items():
            _check_key(key, path)
            if check_value is not None:
                check_value(item, f"{path}[{short_repr(key)}]")

    def accepts_object(value: object) -> bool:
        return (
            type(value) is FrozenMap
            and all(map(_accepts_str, value.keys()))
            and all(map(each, value.values()))
        )

    return _Rule(check_object, accepts_object, None)


def _check_key(key: object, path: str) -> None:
    if not _accepts_str(key):
        raise FieldError(path, f"expected text keys, got key {describe_found(key)}")


def check_json(value: object, path: str, depth: int = 1) -> None:
    """What a `kernel.records.values.JsonValue` field admits: None, a bool, a safe int,
    valid text, a tuple or a `FrozenMap` of text keys, of such values, nested at most
    `MAX_DEPTH` deep (no float: every record stays canonical JSON).

    Raises:
        FieldError: naming the path of the first value refused (``args[0]['x']``).
    """
    kind = type(value)
    if value is None or kind is bool:
        return
    if kind is str:
        _check_str(value, path)
    elif kind is int:
        _check_int(value, path)
    elif kind is tuple or kind is FrozenMap:
        # Checked before going down, so a hostile depth never reaches the recursion limit.
        if depth > MAX_DEPTH:
            raise FieldError(path, f"JSON nested deeper than {MAX_DEPTH}")
        if type(value) is tuple:
            for index, item in enumerate(value):
                check_json(item, f"{path}[{index}]", depth + 1)
        else:
            for key, item in typing.cast("FrozenMap[object]", value).items():
                _check_key(key, path)
                check_json(item, f"{path}[{short_repr(key)}]", depth + 1)
    else:
        raise FieldError(
            path,
            "expected a JSON value (None, bool, int, str, tuple or FrozenMap), got "
            + describe_found(value),
        )


def _accepts_json(value: object) -> bool:
    try:
        check_json(value, "")
    except FieldError:
        return False
    return True


def _kind_rule(validators: tuple[Callable[[Any, Any, Any], None], ...]) -> _Rule:
    def check_kind(value: object, path: str) -> None:
        at = _At(path)
        for validator in validators:
            validator(None, at, value)

    if len(validators) == 1:
        (validator,) = validators

        def accepts_kind(value: object) -> bool:
            try:
                validator(None, _ANYWHERE, value)
            except FieldError:
                return False
            return True

        return _Rule(check_kind, accepts_kind, None, validators)

    def accepts_kinds(value: object) -> bool:
        try:
            for validator in validators:
                validator(None, _ANYWHERE, value)
        except FieldError:
            return False
        return True

    return _Rule(check_kind, accepts_kinds, None, validators)


def _typed_rule(check: _Check, kinds: frozenset[type]) -> _Rule:
    return _Rule(check, _accepts_typed(kinds), kinds)


def _accepts_typed(kinds: frozenset[type]) -> _Accepts:
    """``accepts`` of a rule given by its ``types`` (see `_Rule`); ``str`` and ``int``
    alone have their own (`_accepts_str`, `_accepts_int`)."""
    if str not in kinds and int not in kinds:
        if len(kinds) == 1:
            (only,) = kinds
            return lambda value: type(value) is only
        return lambda value: type(value) in kinds

    def accepts(value: object) -> bool:
        kind = type(value)
        if kind is str:
            return str in kinds and is_canonical_str(value)
        if kind is int:
            return int in kinds and value in _SAFE_INTS
        return kind in kinds

    return accepts


def _items_of_types(kinds: frozenset[type]) -> Callable[[tuple[object, ...]], bool]:
    """A test that every item of a tuple is admitted by the rule given by ``kinds``."""
    has = kinds.__contains__
    if kinds == {str}:
        return lambda values: all(map(has, map(type, values))) and _texts_admitted(values)
    if kinds <= _TEXT_TYPES:
        return lambda values: (
            all(map(has, map(type, values))) and _texts_admitted(filter(None, values))
        )
    if kinds <= _NUMBER_TYPES:
        return lambda values: all(map(has, map(type, values))) and _numbers_admitted(values)
    if str in kinds or int in kinds:
        each = _accepts_typed(kinds)
        return lambda values: all(map(each, values))
    return lambda values: all(map(has, map(type, values)))


def _accepts_str(value: object) -> bool:
    return type(value) is str and (value.isascii() or is_canonical_str(value))


def _accepts_int(value: object) -> bool:
    return type(value) is int and value in _SAFE_INTS


def _check_str(value: object, path: str) -> None:
    if type(value) is not str:
        raise FieldError(path, f"expected str, got {describe_found(value)}")
    if not is_canonical_str(value):
        raise FieldError(path, "string holds a lone surrogate (not valid Unicode)")


def _check_int(value: object, path: str) -> None:
    if type(value) is not int or not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
        raise FieldError(
            path, f"expected an integer within +/-(2**53 - 1), got {describe_found(value)}"
        )


def _exact_check(kind: type) -> _Check:
    def check_exact(value: object, path: str) -> None:
        if type(value) is not kind:
            raise FieldError(path, f"expected {kind.__name__}, got {describe_found(value)}")

    return check_exact


def _class_check(kind: type) -> _Check:
    abstract = issubclass(kind, enum.Enum) and not list(kind)
    a = "an" if kind.__name__[0] in "AEIOU" else "a"

    def check_class(value: object, path: str) -> None:
        if type(value) is not kind and not (abstract and isinstance(value, kind)):
            raise FieldError(path, f"expected {a} {kind.__name__}, got {describe_found(value)}")

    return check_class


def _literal_rule(allowed: tuple[Any, ...]) -> _Rule:
    # Only values of the literals' own (builtin or enum) types are hashed: a foreign
    # value's ``__hash__`` is never called.
    kinds = frozenset(type(a) for a in allowed)
    pairs = frozenset((type(a), a) for a in allowed)

    def check_literal(value: object, path: str) -> None:
        if not any(type(value) is type(a) and value == a for a in allowed):
            raise FieldError(path, f"expected one of {list(allowed)}, got {short_repr(value)}")

    def accepts_literal(value: object) -> bool:
        return type(value) in kinds and (type(value), value) in pairs

    return _Rule(check_literal, accepts_literal, None)


def short_repr(value: object, limit: int = 40) -> str:
    """A bounded repr of a caller's value for an error message; never raises.

    An int too long for Python to write out (over 4,300 digits) is described by its
    size; a hostile ``__repr__`` or a structure too deep to repr, by its type.
    """
    if isinstance(value, int) and value.bit_length() > 128:
        return f"<{type(value).__name__} of {value.bit_length()} bits>"
    try:
        text = repr(value)
    except Exception:  # a message about bad input must not fail on it
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}..."


def describe_found(value: object) -> str:
    """What a wrong value is, for an error message (never raises): its exact type, a
    short repr of a scalar (``int 5``, ``str 'x'``), the size of a container."""
    kind = type(value).__name__
    if value is None or isinstance(value, enum.Enum) or is_record_class(type(value)):
        return kind
    if isinstance(value, str | int | float):
        return f"{kind} {short_repr(value)}"
    if isinstance(value, list | tuple | dict | set | frozenset):
        return f"{kind} of {len(value)} items"
    return kind


def _union_rule(members: tuple[Shape, ...], where: str) -> _Rule | None:
    rules = [_shape_rule(member, where) for member in members]
    known = [r for r in rules if r is not None]
    if len(known) < len(rules):
        return None
    names = " | ".join(_type_name(member.hint) for member in members)
    # ``X | None``: a wrong value is explained by X's own check (which item, which rule).
    proper = [r.check for m, r in zip(members, known, strict=True) if m.hint is not type(None)]
    explain = proper[0] if len(proper) == 1 else None
    optional = len(proper) < len(members)

    def check_union(value: object, path: str) -> None:
        if value is None and optional:
            return
        if explain is not None:
            try:
                explain(value, path)
            except FieldError as e:
                reason = e.reason
                if e.kernel_field == path and reason.startswith("expected ") and ", got " in reason:
                    cut = reason.rindex(", got ")
                    raise FieldError(path, f"{reason[:cut]} or None{reason[cut:]}") from None
                raise
            return
        for check in proper:
            try:
                check(value, path)
            except FieldError:
                continue
            return
        raise FieldError(path, f"expected {names}, got {describe_found(value)}")

    if all(r.types is not None for r in known):
        return _typed_rule(check_union, frozenset().union(*(r.types or () for r in known)))
    inner = tuple(
        r.accepts for r, m in zip(known, members, strict=True) if m.hint is not type(None)
    )
    if optional and len(inner) == 1:
        (only,) = inner
        return _Rule(check_union, lambda value: value is None or only(value), None)
    return _Rule(
        check_union,
        lambda value: (value is None and optional) or any(a(value) for a in inner),
        None,
    )


def _type_name(hint: Any) -> str:
    if hint is type(None):
        return "None"
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def _tuple_rule(shapes: tuple[Shape, ...], where: str, *, variadic: bool) -> _Rule:
    items = [_shape_rule(shape, where) for shape in shapes]
    checks = [None if item is None else item.check for item in items]

    def check_tuple(value: object, path: str) -> None:
        if type(value) is not tuple:
            raise FieldError(path, f"expected a tuple, got {type(value).__name__}")
        if variadic:
            item = checks[0]
            if item is not None:
                for index, element in enumerate(value):
                    item(element, f"{path}[{index}]")
            return
        if len(value) != len(checks):
            raise FieldError(path, f"expected {len(checks)} items, got {len(value)}")
        for index, (element, check) in enumerate(zip(value, checks, strict=True)):
            if check is not None:
                check(element, f"{path}[{index}]")

    accepts: _Accepts
    if variadic:
        item = items[0]
        if item is None:
            accepts = _is_tuple
        elif item.types is not None:
            items_ok = _items_of_types(item.types)
            accepts = lambda value: type(value) is tuple and items_ok(value)  # noqa: E731
        else:
            each = item.accepts
            accepts = lambda value: type(value) is tuple and all(map(each, value))  # noqa: E731
    else:
        size = len(items)
        each_of = tuple(_anything if item is None else item.accepts for item in items)
        accepts = lambda value: (  # noqa: E731
            type(value) is tuple and len(value) == size and all(map(operator.call, each_of, value))
        )
    return _Rule(check_tuple, accepts, None)


def _is_tuple(value: object) -> bool:
    return type(value) is tuple


def _anything(_value: object) -> bool:
    return True


def field_checks(record: str, fields: list[tuple[str, Any, bool]]) -> _FieldsCheck:
    """The construction check of one record class, run over its keyword arguments.

    ``fields`` are ``(name, annotation, required)`` in declaration order. The fast
    path answers for the whole record at once: the required fields whose rule is a
    set of exact types (`_Rule.types`) are read with one ``itemgetter`` and tested
    with C-level passes (types, then texts, then ints); then each other field by its
    own check, in declaration order. When the typed fields are refused, every field is
    checked one by one in declaration order, so the error names the first bad field
    exactly as a field-by-field check would.
    """
    rules = [(name, _rule(hint, f"{record}.{name}"), required) for name, hint, required in fields]
    ordered = tuple((name, rule) for name, rule, _ in rules if rule is not None)
    typed = [
        (name, rule.types)
        for name, rule, required in rules
        if rule is not None
        and rule.types is not None
        and required
        and (
            rule.types <= _TEXT_TYPES or rule.types <= _NUMBER_TYPES or not rule.types & {str, int}
        )
    ]
    grouped = {name for name, _ in typed}
    others = tuple((name, _at_field(name, rule)) for name, rule in ordered if name not in grouped)
    get = item_getter(tuple(name for name, _ in typed)) if typed else None
    kinds = tuple(kinds for _, kinds in typed)
    texts = _positions([kinds <= _TEXT_TYPES for _, kinds in typed])
    numbers = _positions([kinds <= _NUMBER_TYPES for _, kinds in typed])

    def one_by_one(kwargs: Mapping[str, object]) -> None:
        for name, rule in ordered:
            if name in kwargs:
                value = kwargs[name]
                if not rule.accepts(value):
                    rule.check(value, name)

    def run(kwargs: Mapping[str, object]) -> None:
        if get is not None:
            try:
                values = get(kwargs)
            except KeyError:  # a required field is missing: attrs' __init__ says which
                one_by_one(kwargs)
                return
            if not (
                all(map(operator.contains, kinds, map(type, values)))
                and (texts is None or _texts_admitted(filter(None, texts(values))))
                and (numbers is None or _numbers_admitted(numbers(values)))
            ):
                # Some field is refused: this raises, naming the first in declaration order.
                one_by_one(kwargs)
        for name, check in others:
            if name in kwargs:
                check(kwargs[name])

    return run


_FieldsCheck = Callable[[Mapping[str, object]], None]


def _positions(mask: list[bool]) -> Callable[[tuple[object, ...]], tuple[object, ...]] | None:
    """A getter of the values at the true positions of ``mask``, or None when none is."""
    indexes = [index for index, chosen in enumerate(mask) if chosen]
    if not indexes:
        return None
    if len(indexes) == 1:
        (only,) = indexes
        return lambda values: (values[only],)
    return operator.itemgetter(*indexes)


def _numbers_admitted(numbers: Iterable[object]) -> bool:
    """True when the ints among ``numbers`` (ints or None) are safe."""
    return all(map(_SAFE_INTS.__contains__, filter(None, numbers)))


def _texts_admitted(texts: Iterable[object]) -> bool:
    """True when ``texts`` (strings only) are valid Unicode; one string is tested,
    since a lone surrogate stays lone when strings are joined."""
    joined = "".join(texts)  # type: ignore[arg-type]
    return joined.isascii() or is_canonical_str(joined)


def _at_field(name: str, rule: _Rule) -> Callable[[object], None]:
    """``rule``'s check of a top-level field: raises naming ``name`` or returns."""
    validators = rule.validators
    if validators is not None and len(validators) == 1:
        # A kind's validator already raises naming the field: no wrapper of ours.
        return functools.partial(validators[0], None, _At(name))
    accepts, check = rule.accepts, rule.check

    def at_field(value: object) -> None:
        if not accepts(value):
            check(value, name)

    return at_field


def item_getter(names: tuple[str, ...]) -> Callable[[Mapping[str, object]], tuple[object, ...]]:
    if not names:
        return lambda _fields: ()
    if len(names) == 1:
        single = operator.itemgetter(names[0])
        return lambda fields: (single(fields),)
    return operator.itemgetter(*names)
