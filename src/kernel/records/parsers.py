"""Parsers and encoders: how ``from_dict`` reads, and ``to_dict`` writes, each field.

`compile_field` compiles an annotation's shape (`kernel.records.shapes`) into a parser
(JSON value -> field value, raising `RecordError` at a document path) and an encoder
(None when the value is already JSON). A nested record is parsed by the codec's spec
of its class, which the codec passes in as ``nested`` (a record class -> its parser):
this module never imports the codec, which compiles its specs from here.
"""

from __future__ import annotations

import enum
import operator
import typing
from collections.abc import Callable
from typing import Any

from kernel.errors import RecordError
from kernel.records.identity import MAX_DEPTH, MAX_SAFE_INT, is_canonical_str
from kernel.records.rules import short_repr
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
    is_record_class,
    shape_of,
)

__all__ = ["plain_json", "tag_of"]

Parser = Callable[[object, str, bool], object]
"""Reads one JSON value at a document path (``verify_ids`` last) into a field value."""
Encoder = Callable[[Any], object]
"""Writes one field value as JSON types."""
Nested = Callable[[type], Parser]
"""The codec's parser of a record class (looked up when a value is parsed)."""


def join_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def json_type(value: object) -> str:
    match value:
        case None:
            return "null"
        case bool():
            return "boolean"
        case int():
            return "integer"
        case float():
            return "number"
        case str():
            return "string"
        case list():
            return "array"
        case dict():
            return "object"
    return type(value).__name__


def compile_field(hint: Any, where: str, nested: Nested) -> tuple[Parser, Encoder | None]:
    """Parser and encoder (None when the value is already JSON) for one type.

    Raises:
        TypeError: ``hint`` is a type no record field may have (named with ``where``),
            or a union of records no field tags apart (`tag_of`).
    """
    return _compile(shape_of(hint), where, nested)


def _compile(shape: Shape, where: str, nested: Nested) -> tuple[Parser, Encoder | None]:
    match shape:
        case Kinded(inner=inner):
            # A kind's rule is the construction check's; the JSON is read as its type's.
            return _compile(inner, where, nested)
        case Scalar(hint=hint):
            return _exact(hint), None
        case ObjectShape(value=value):
            return _compile_object(value, where, nested)
        case JsonShape():
            return _parse_json, plain_json
        case OmissibleShape(inner=UnionShape(members=members, optional=True)):
            return _compile_omissible(members, where, nested)
        case UnionShape(members=members, optional=optional):
            return _compile_union(members, optional, where, nested)
        case LiteralShape(values=allowed):
            return _literal_parser(allowed), None
        case EnumShape(hint=hint):
            return _enum_parser(hint), operator.attrgetter("value")
        case RecordShape(hint=hint):
            return _record_parser(hint, nested), operator.methodcaller("to_dict")
        case VarTuple(item=item):
            return _compile_var_tuple(item, where, nested)
        case FixedTuple(items=items):
            return _compile_fixed_tuple(items, where, nested)
    raise TypeError(f"{where}: unsupported field type {shape.hint!r}")


def _compile_union(
    members: tuple[Shape, ...], optional: bool, where: str, nested: Nested
) -> tuple[Parser, Encoder | None]:
    inner_parse: Parser
    inner_encode: Encoder | None
    if len(members) > 1 and not all(isinstance(m, RecordShape) for m in members):
        inner_parse, inner_encode = _compile_mixed(members, where, nested)
    elif len(members) > 1:
        inner_parse, inner_encode = _compile_tagged(members, where, nested)
    else:
        inner_parse, inner_encode = _compile(members[0], where, nested)
    if not optional:
        return inner_parse, inner_encode

    def parse_optional(value: object, path: str, verify: bool) -> object:
        return None if value is None else inner_parse(value, path, verify)

    if inner_encode is None:
        return parse_optional, None
    encode_inner = inner_encode
    return parse_optional, lambda v: None if v is None else encode_inner(v)


def _compile_omissible(
    members: tuple[Shape, ...], where: str, nested: Nested
) -> tuple[Parser, Encoder | None]:
    # A left-out key never reaches a parser (the codec leaves it to its default, None),
    # and null is no value of the field: X's parser alone. None is encoded as None,
    # which the codec then leaves out of the document.
    parse, encode = _compile_union(members, False, where, nested)
    if encode is None:
        return parse, None
    encode_present = encode
    return parse, lambda v: None if v is None else encode_present(v)


def _literal_parser(allowed: tuple[Any, ...]) -> Parser:
    def parse_literal(value: object, path: str, _verify: bool) -> object:
        # Same exact type as well as equal: `Literal[False]` never admits 0, and
        # `Literal["1"]` never admits 1.
        if not any(type(value) is type(a) and value == a for a in allowed):
            raise RecordError(path, f"expected one of {list(allowed)}, got {short_repr(value)}")
        return value

    return parse_literal


def _record_parser(record_cls: type, nested: Nested) -> Parser:
    # Looked up at the first value, not here (a record class may hold itself), then
    # kept: the codec's parser of a class never changes.
    resolved: list[Parser] = []

    def parse_record(value: object, path: str, verify: bool) -> object:
        if not resolved:
            resolved.append(nested(record_cls))
        return resolved[0](value, path, verify)

    return parse_record


def tag_of(members: tuple[type, ...], where: str = "union") -> tuple[str, dict[str, Any]]:
    """The discriminating field of a union of records, and its value per member.

    A union of records is *tagged*: every member has a field of the same name
    annotated with a one-value ``Literal`` (``kind: Literal["kernel-run-record"]``),
    and no two members share the value. The JSON form is the member's own object; the
    tag picks the member when parsing.

    Raises:
        TypeError: the members are not records, or no field tags them apart.
    """
    if not all(is_record_class(m) for m in members):
        raise TypeError(f"{where}: a union of several types must be a union of records")
    hints = [typing.get_type_hints(m) for m in members]
    for name in hints[0]:
        values = []
        for member_hints in hints:
            hint = member_hints.get(name)
            if typing.get_origin(hint) is not typing.Literal or len(typing.get_args(hint)) != 1:
                break
            values.append(typing.get_args(hint)[0])
        else:
            if len(set(values)) == len(values):
                return name, dict(zip(values, members, strict=True))
    raise TypeError(
        f"{where}: the records of a union need a one-value Literal field to tell them apart"
    )


def _compile_tagged(
    members: tuple[Shape, ...], where: str, nested: Nested
) -> tuple[Parser, Encoder]:
    tag, by_value = tag_of(tuple(m.hint for m in members), where)
    allowed = sorted(by_value)

    def parse_tagged(value: object, path: str, verify: bool) -> object:
        if type(value) is not dict:
            raise RecordError(path, f"expected an object, got {json_type(value)}")
        found = value.get(tag)
        member = by_value.get(found) if type(found) is str else None
        if member is None:
            raise RecordError(
                join_path(path, tag), f"expected one of {allowed}, got {short_repr(found)}"
            )
        return nested(member)(value, path, verify)

    return parse_tagged, operator.methodcaller("to_dict")


def _compile_mixed(
    members: tuple[Shape, ...], where: str, nested: Nested
) -> tuple[Parser, Encoder]:
    """A union told apart by the JSON type of a value: at most one record (read from an
    object), at most one tuple (read from an array), and literals or enums for any
    other value (``CalibrationEntry | Literal[False]``, ``TrustLevel | tuple[TrustLevel,
    ...]``: a level or a list of them)."""
    records = [m for m in members if isinstance(m, RecordShape)]
    arrays = [m for m in members if isinstance(m, VarTuple | FixedTuple)]
    scalars = [m for m in members if isinstance(m, LiteralShape | EnumShape)]
    if len(records) > 1 or len(arrays) > 1 or len(records + arrays + scalars) < len(members):
        raise TypeError(
            f"{where}: a union of several types must be a union of records, or of literals "
            "and enums with at most one record and at most one tuple"
        )
    parse_record = _record_parser(records[0].hint, nested) if records else None
    parse_array, encode_array = _compile(arrays[0], where, nested) if arrays else (None, None)
    parse_scalars = [_compile(m, where, nested)[0] for m in scalars]
    values = [v for m in scalars for v in (m.values if isinstance(m, LiteralShape) else _values(m))]
    expected = " or ".join(
        [*(["an object"] if records else []), *(["an array"] if arrays else [])]
        + ([f"one of {values}"] if values else [])
    )

    def parse_mixed(value: object, path: str, verify: bool) -> object:
        if type(value) is dict and parse_record is not None:
            return parse_record(value, path, verify)
        if (type(value) is list or type(value) is tuple) and parse_array is not None:
            return parse_array(value, path, verify)
        for parse in parse_scalars:
            try:
                return parse(value, path, verify)
            except RecordError:
                continue
        raise RecordError(path, f"expected {expected}, got {short_repr(value)}")

    def encode_mixed(value: Any) -> object:
        if is_record_class(type(value)):
            return value.to_dict()
        if encode_array is not None and type(value) is tuple:
            return encode_array(value)
        return value.value if isinstance(value, enum.Enum) else value

    return parse_mixed, encode_mixed


def _values(shape: Shape) -> list[object]:
    return [member.value for member in typing.cast("type[enum.Enum]", shape.hint)]


def _compile_object(value_shape: Shape, where: str, nested: Nested) -> tuple[Parser, Encoder]:
    parse_value, encode_value = _compile(value_shape, where, nested)

    def parse_object(value: object, path: str, verify: bool) -> object:
        if type(value) is not dict:
            raise RecordError(path, f"expected an object, got {json_type(value)}")
        for key in value:
            _parse_key(key, path)
        return FrozenMap(
            {k: parse_value(v, f"{path}[{short_repr(k)}]", verify) for k, v in value.items()}
        )

    if encode_value is None:
        return parse_object, dict
    encode = encode_value
    return parse_object, lambda m: {k: encode(v) for k, v in m.items()}


def _parse_key(key: object, path: str) -> None:
    # A decoded JSON object has only str keys; a dict handed to from_dict may not.
    if type(key) is not str or not is_canonical_str(key):
        raise RecordError(path, f"expected text keys, got key {short_repr(key)}")


def _parse_json(value: object, path: str, verify: bool, depth: int = 1) -> object:
    """Any JSON value as a record holds it (arrays as tuples, objects as `FrozenMap`):
    no float (a record stays canonical JSON), nested at most `MAX_DEPTH` deep."""
    kind = type(value)
    if value is None or kind is bool:
        return value
    if kind is str:
        return _parse_str(value, path, verify)
    if kind is int:
        return _parse_int(value, path, verify)
    if kind is not list and kind is not tuple and kind is not dict:
        raise RecordError(path, f"expected a JSON value without floats, got {json_type(value)}")
    # Checked before going down, so a hostile depth never reaches the recursion limit.
    if depth > MAX_DEPTH:
        raise RecordError(path, f"JSON nested deeper than {MAX_DEPTH}")
    if kind is dict:
        items = typing.cast("dict[object, object]", value)
        for key in items:
            _parse_key(key, path)
        return FrozenMap(
            {
                typing.cast("str", k): _parse_json(v, f"{path}[{short_repr(k)}]", verify, depth + 1)
                for k, v in items.items()
            }
        )
    return tuple(
        _parse_json(item, f"{path}[{i}]", verify, depth + 1)
        for i, item in enumerate(typing.cast("list[object]", value))
    )


def plain_json(value: Any) -> object:
    """A `kernel.records.values.JsonValue` as plain JSON types (`FrozenMap` -> ``dict``,
    tuple -> ``list``): what ``to_dict`` writes, and what ``json.dumps`` takes."""
    if type(value) is FrozenMap:
        return {key: plain_json(item) for key, item in value.items()}
    if type(value) is tuple:
        return [plain_json(item) for item in value]
    return value


def _compile_var_tuple(item: Shape, where: str, nested: Nested) -> tuple[Parser, Encoder | None]:
    item_parse, item_encode = _compile(item, where, nested)

    def parse_var(value: object, path: str, verify: bool) -> object:
        if type(value) is not list and type(value) is not tuple:
            raise RecordError(path, f"expected an array, got {json_type(value)}")
        return tuple(item_parse(item, f"{path}[{i}]", verify) for i, item in enumerate(value))

    if item_encode is None:
        return parse_var, list
    encode_item = item_encode
    return parse_var, lambda v: [encode_item(x) for x in v]


def _compile_fixed_tuple(
    items: tuple[Shape, ...], where: str, nested: Nested
) -> tuple[Parser, Encoder | None]:
    compiled = [_compile(item, where, nested) for item in items]
    size = len(compiled)

    def parse_fixed(value: object, path: str, verify: bool) -> object:
        if type(value) is not list and type(value) is not tuple:
            raise RecordError(path, f"expected an array, got {json_type(value)}")
        if len(value) != size:
            raise RecordError(path, f"expected {size} items, got {len(value)}")
        return tuple(
            p(item, f"{path}[{i}]", verify)
            for i, (item, (p, _)) in enumerate(zip(value, compiled, strict=True))
        )

    encoders = [e for _, e in compiled]
    if all(e is None for e in encoders):
        return parse_fixed, list
    return parse_fixed, lambda v: [
        x if e is None else e(x) for x, e in zip(v, encoders, strict=True)
    ]


def _exact(kind: type) -> Parser:
    name = {str: "string", int: "integer", bool: "boolean", type(None): "null"}[kind]
    if kind is int:
        return _parse_int
    if kind is str:
        return _parse_str

    def parse_exact(value: object, path: str, _verify: bool) -> object:
        # `type(...) is` so that bool is not int and no str/int subclass slips in.
        if type(value) is not kind:
            raise RecordError(path, f"expected {name}, got {json_type(value)}")
        return value

    return parse_exact


def _parse_str(value: object, path: str, _verify: bool) -> object:
    # `type(...) is str` so that no str subclass slips in; valid Unicode so that every
    # record stays canonical JSON (an id can always be computed from it).
    if type(value) is not str:
        raise RecordError(path, f"expected string, got {json_type(value)}")
    if not is_canonical_str(value):
        raise RecordError(path, "string holds a lone surrogate (not valid Unicode)")
    return value


def _parse_int(value: object, path: str, _verify: bool) -> object:
    # `type(...) is int` so that bool is not int; the range keeps every record
    # encodable as canonical JSON, so an id can always be computed from it.
    if type(value) is not int:
        raise RecordError(path, f"expected integer, got {json_type(value)}")
    if not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
        raise RecordError(path, "integer outside +/-(2**53 - 1)")
    return value


def _enum_parser(kind: type[enum.Enum]) -> Parser:
    values = {member.value: member for member in kind}
    allowed = sorted(str(v) for v in values)

    def parse_enum(value: object, path: str, _verify: bool) -> object:
        member = values.get(value) if type(value) in (str, int) else None
        if member is None:
            raise RecordError(path, f"expected one of {allowed}, got {short_repr(value)}")
        return member

    return parse_enum
