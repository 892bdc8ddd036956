"""The one record codec: strict ``from_dict``/``to_dict`` and identity payloads.

Every `kernel` record is an ``@attrs.frozen(kw_only=True)`` subclass of `Record`.
The codec reads each record's field annotations once, compiles a construction check
(`kernel.records.rules`) and a parser and an encoder (`kernel.records.parsers`) per
field, and caches them per class (its spec).

Rules enforced by ``from_dict`` (each failure is a `RecordError` naming the path,
e.g. ``attempts[3].budget_charge.steps``):

- the document is an exact ``dict`` (a JSON object); its input is never mutated;
- unknown keys and missing keys are refused (every field is written out), but an
  omissible field (`kernel.records.values.Omissible`) may be left out (it is None,
  and an explicit ``null`` is refused), and an *open* record (``__open__ = True``:
  an entry whose other keys belong to a reader outside the record, as a run config's
  adapter entries) ignores keys it does not declare;
- ``str`` fields take exact ``str`` holding valid Unicode (a lone surrogate has no
  canonical JSON form); ``int`` fields take ``int`` but never ``bool``,
  and only within +/-(2**53 - 1) so every record stays canonical JSON;
  ``bool`` fields take ``bool`` only; floats are never admitted;
- enums are read by value; ``tuple[...]`` fields take JSON arrays; nested records
  are parsed recursively; ``X | None`` admits ``null``;
- the record's own validators then check invariants (digest shape, ordering);
  their failures are reported with the same path;
- a record that declares a recomputable identity is refused when the id in the
  document does not reproduce, unless the caller passes ``verify_ids=False``.

Identity (see ``Identity``): a record's id is SHA-256 over canonical JSON of its
*identity payload*, the record's fields (all but ``exclude``, or exactly
``include``) with the id field blanked to ``""`` when the id self-seals, or left
out when it does not. Nested records enter a payload in their *nested form*:
every field but their own ``exclude`` set, ids unblanked. ``explanation`` is in
every default ``exclude`` set: prose never enters an identity.
"""

from __future__ import annotations

import enum
import functools
import operator
import typing
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, ClassVar, Final, ParamSpec, Self, TypeVar

import attrs

from kernel.errors import FieldError, ParameterTypeError, RecordError
from kernel.records.identity import sha256_prevalidated
from kernel.records.parsers import Encoder, Parser, compile_field, join_path, json_type, tag_of
from kernel.records.rules import (
    describe_found,
    field_check,
    field_checks,
    item_getter,
    short_repr,
)
from kernel.records.shapes import (
    FrozenMap,
    OmissibleShape,
    RecordShape,
    Shape,
    UnionShape,
    VarTuple,
    kind_validators,
    shape_of,
)

# The rules' and parsers' public names are re-exported: a module above the records
# imports the codec alone (the guard's allow-lists name it, ADR-0002 and ADR-0232).
__all__ = [
    "Identity",
    "Record",
    "compute_id",
    "describe_found",
    "document_digest",
    "field_check",
    "field_error",
    "id_of_fields",
    "identity_payload",
    "malformed",
    "kind_validators",
    "nested_form",
    "nested_id",
    "UNSEALED",
    "seal",
    "short_repr",
    "tag_of",
]

R = TypeVar("R")
P = ParamSpec("P")

_EXCLUDE_DEFAULT: Final = frozenset({"explanation"})


@attrs.frozen(kw_only=True)
class Identity:
    """How a record's identity is computed.

    Attributes:
        field: the field that holds the id, or None when the record only has
            a nested form (e.g. a span) or its id cannot be recomputed from it.
        seals: True when the id field stays in its own payload as ``""``
            ("self-seals"); False when it is left out.
        include: when given, exactly these fields form the payload.
        exclude: fields never in the payload (nor in the nested form).
        recomputable: False for records whose id covers data they do not carry;
            then ``from_dict`` cannot verify it and never tries.
    """

    field: str | None = None
    seals: bool = True
    include: tuple[str, ...] | None = None
    exclude: frozenset[str] = _EXCLUDE_DEFAULT
    recomputable: bool = True


class Record:
    """Base of every frozen record: strict parsing, JSON encoding, identity.

    Subclasses are declared ``@attrs.frozen(kw_only=True)`` and may set
    ``__identity__``. Never hand-write ``__eq__``/``__hash__`` on them.
    """

    # One private slot caches the nested form: a frozen record's payload never changes,
    # and nested records (spans, charges) are shared by many parents.
    __slots__ = ("_kernel_nested",)
    __identity__: ClassVar[Identity] = Identity()
    __open__: ClassVar[bool] = False
    """True: ``from_dict`` ignores keys the record does not declare (they belong to
    another reader, e.g. a run config's adapter entry to its adapter)."""
    _kernel_nested: dict[str, object]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # attrs builds a slotted class anew with its generated __init__ in place; wrap
        # that one so that a construction error names its record (`WorkUnit.inputs`).
        init = cls.__dict__.get("__init__")
        if init is not None and "__attrs_attrs__" in cls.__dict__:
            cls.__init__ = _naming_init(init)  # type: ignore[method-assign]

    @classmethod
    def from_dict(cls, data: object, /, *, verify_ids: bool = True) -> Self:
        """Parse a JSON object into this record (see module rules).

        Args:
            data: the decoded JSON object; never mutated.
            verify_ids: when True (the default), refuse a document whose
                recomputable ids (this record's and nested ones) do not reproduce.

        Raises:
            RecordError: naming the failing field path.
        """
        return _spec(cls).parse(data, "", verify_ids)  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        """This record as JSON types only (str, int, bool, None, list, dict)."""
        return _spec(type(self)).encode(self)


def _naming_init(init: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(init)
    def __init__(self: Record, *args: Any, **kwargs: Any) -> None:
        kind = type(self)
        spec = _SPECS.get(kind) or _spec(kind)
        try:
            # Every field is checked by its annotation first, so the record's own
            # invariants (attrs validators, ``__attrs_post_init__``) see well-typed values.
            spec.check_fields(kwargs)
            init(self, *args, **kwargs)
        except FieldError as e:
            if e.record:
                raise
            raise FieldError(e.kernel_field, e.reason, kind.__name__) from e
        # Built without its id (which defaults to UNSEALED): seal it now.
        id_field = spec.identity.field
        if id_field is not None and id_field not in kwargs:
            _set_id(self, id_field, spec)

    return __init__


def identity_payload(record: Record) -> dict[str, Any]:
    """The JSON identity payload of ``record`` (documented per record class).

    Exactly what `compute_id` hashes, as JSON types: nested records in nested form.

    Raises:
        ParameterTypeError: ``record`` is not a `Record`.
    """
    _require_record("identity_payload", record)
    payload = _spec(type(record)).raw_payload(record)
    return {name: _jsonify(value) for name, value in payload.items()}


def nested_form(record: Record) -> dict[str, Any]:
    """``record`` as it enters a parent's identity payload, as JSON types: every field
    but its class's ``exclude`` set, its own id (if any) kept as it is.

    Raises:
        ParameterTypeError: ``record`` is not a `Record`.
    """
    _require_record("nested_form", record)
    result: dict[str, Any] = _jsonify(record)
    return result


def _jsonify(value: object) -> Any:
    if isinstance(value, Record):
        nested = _spec(type(value)).raw_nested(value)
        return {name: _jsonify(item) for name, item in nested.items()}
    if isinstance(value, dict | FrozenMap):
        return {name: _jsonify(item) for name, item in value.items()}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_jsonify(item) for item in value]
    return value


def compute_id(record: Record, *, cached: bool = True) -> str:
    """Recompute ``record``'s id from its identity payload (fast path).

    Args:
        record: the record.
        cached: when False, nested records enter the payload as their fields hold
            now, never from (nor into) the nested-form cache: for a caller hashing
            records that may have been altered after construction (the cache would
            hold their values from before). Both give the same id for an unaltered
            record.

    Raises:
        ParameterTypeError: ``record`` is not a `Record`.
        TypeError: the record class declares no identity field.
        CanonicalizationError: a value has no canonical JSON form (a lone surrogate,
            an int beyond 2**53 - 1: only a record altered after construction holds one).
    """
    spec = _SPECS.get(type(record)) or _record_spec("compute_id", record)
    if spec.identity.field is None:
        raise TypeError(f"{type(record).__name__} declares no identity field")
    return sha256_prevalidated(
        spec.raw_payload(record, cached), default=_nested_default if cached else _fresh_default
    )


def nested_id(record: Record, *, cached: bool = True) -> str:
    """SHA-256 of ``record``'s nested form (`nested_form`) as canonical JSON: the
    content digest a parent uses to name an exact record (``candidate_attempt_ref``).

    ``cached`` as for `compute_id`.

    Raises:
        ParameterTypeError: ``record`` is not a `Record`.
        CanonicalizationError: as for `compute_id`.
    """
    spec = _SPECS.get(type(record)) or _record_spec("nested_id", record)
    nested = spec.raw_nested(record) if cached else spec.fresh_nested(record)
    return sha256_prevalidated(nested, default=_nested_default if cached else _fresh_default)


def document_digest(record: Record) -> str:
    """SHA-256 of the canonical JSON of ``record.to_dict()``: the digest by which a
    document names an exact record (a run record's, a manifest's ``digest``).

    Computed without building ``to_dict()``: orjson writes enum members as their
    values and tuples as arrays, exactly as ``to_dict`` does, and a frozen record's
    values were checked when it was built.

    Raises:
        ParameterTypeError: ``record`` is not a `Record`.
        CanonicalizationError: as for `compute_id`.
    """
    spec = _SPECS.get(type(record)) or _record_spec("document_digest", record)
    return sha256_prevalidated(spec.raw_document(record), default=_document_default)


def id_of_fields(cls: type[Record], fields: Mapping[str, object], /) -> str:
    """The id a record of ``cls`` holding ``fields`` has, without building the record.

    For a caller that has already checked every value against the record's rules and
    builds the record afterwards with this id (the binding's hot path). The payload
    is chosen by ``cls.__identity__`` exactly as for `compute_id` (keys of ``fields``
    outside it, the id and ``explanation`` among them, are ignored); nested records
    enter it as their fields hold now (as with ``compute_id(..., cached=False)``).

    Raises:
        ParameterTypeError: ``cls`` is not a `Record` class.
        TypeError: ``cls`` declares no identity field, or ``fields`` lacks a payload field.
        CanonicalizationError: a value has no canonical JSON form.
    """
    spec = (_SPECS.get(cls) if isinstance(cls, type) else None) or _class_spec("id_of_fields", cls)
    if spec.identity.field is None:
        raise TypeError(f"{cls.__name__} declares no identity field")
    try:
        payload = spec.payload_of_fields(fields)
    except KeyError as e:
        raise TypeError(f"{cls.__name__}: no value for payload field {e}") from None
    return sha256_prevalidated(payload, default=_fresh_default)


def seal(cls: Callable[P, R], /, *args: P.args, **fields: P.kwargs) -> R:
    """Build a record of ``cls`` and fill in its identity field.

    Typed by ``cls``'s own constructor (a ParamSpec), so ``mypy --strict`` refuses a
    misspelt or missing field (``seal(CandidateAttempt, attempt_indx=0)``); the id
    field itself defaults to `UNSEALED` and is never passed. The record is
    constructed (so every validator runs), then its id is computed from the identity
    payload and set. ``cls(**fields)`` without the id does the same.

    Raises:
        ParameterTypeError: ``cls`` is not a `Record` class.
        TypeError: ``cls`` declares no identity field, the id or a positional argument
            is passed, or a field is unknown or missing.
        FieldError: a field breaks its invariant (the error names record and field).
    """
    spec = (_SPECS.get(cls) if isinstance(cls, type) else None) or _class_spec("seal", cls)
    id_field = spec.identity.field
    if id_field is None:
        raise TypeError(f"{spec.cls.__name__} declares no identity field")
    if args or id_field in fields:
        raise TypeError(f"seal({spec.cls.__name__}) takes fields by name, never {id_field}")
    fields[id_field] = UNSEALED  # **fields is a dict of our own
    record = spec.cls(**fields)
    _set_id(record, id_field, spec)
    return record  # type: ignore[return-value]  # an instance of cls, as P/R promise


def _set_id(record: Record, id_field: str, spec: _Spec) -> None:
    # The record is frozen and not yet shared; set the id its payload yields (as
    # `compute_id` computes it).
    payload = spec.raw_payload(record)
    object.__setattr__(record, id_field, sha256_prevalidated(payload, default=_nested_default))
    # A nested form cached before the id was set would hold the placeholder.
    if getattr(record, "_kernel_nested", None) is not None:
        object.__delattr__(record, "_kernel_nested")


UNSEALED: Final = "0" * 64
"""Default of every id field: a record built without its id is sealed at construction.

A digest of 64 zeros (so the field's validator passes while the record is built);
`seal` and ``cls(**fields)`` then replace it by the id the payload yields. An id passed
explicitly (``from_dict``, ``attrs.evolve``) is kept as given, and checked where ids
are verified.
"""


def malformed(value: object, path: str = "") -> tuple[str, str] | None:
    """Where ``value`` (a record, or tuples, lists and mappings of records) breaks its
    records' annotations as it holds *now*, and why; None when nothing does.

    A record that exists was well formed when it was built; this finds one altered
    afterwards (``object.__setattr__``, a deleted attribute, a record holding itself),
    so an operation that failed on it can say which field, instead of an
    AttributeError from deep inside. Never raises.
    """
    try:
        return _malformed(value, path, set())
    except Exception:  # a hostile mapping or a structure too deep: nothing to name
        return None


def _malformed(value: object, path: str, holders: set[int]) -> tuple[str, str] | None:
    # ``holders``: the records on the way here (one shared by two parents is no loop).
    if isinstance(value, Record):
        if id(value) in holders:
            return (path, "a record that holds itself")
        spec = _spec(type(value))
        current: dict[str, object] = {}
        for name in spec.fields:
            try:
                current[name] = getattr(value, name)
            except AttributeError:
                return (join_path(path, name), "missing (deleted after construction)")
        try:
            spec.check_fields(current)
        except FieldError as e:
            return (join_path(path, e.kernel_field), e.reason)
        items: Iterable[tuple[str, object]] = ((join_path(path, n), v) for n, v in current.items())
    elif type(value) is tuple or type(value) is list:
        items = ((f"{path}[{i}]", item) for i, item in enumerate(value))
    elif isinstance(value, Mapping):
        items = ((f"{path}[{short_repr(key)}]", item) for key, item in value.items())
    else:
        return None
    if isinstance(value, Record):
        holders = holders | {id(value)}
    for where, item in items:
        found = _malformed(item, where, holders)
        if found is not None:
            return found
    return None


def _require_record(function: str, record: object) -> None:
    if not isinstance(record, Record):
        raise ParameterTypeError(function, "record", "Record", type(record).__name__)


def _record_spec(function: str, record: object) -> _Spec:
    """The spec of ``record``'s class when it is not compiled yet: a record made
    without ``__init__`` (unpickled, ``object.__new__``), or not a record at all."""
    _require_record(function, record)
    return _spec(type(record))  # type: ignore[arg-type]  # a Record, checked just above


def _class_spec(function: str, cls: object) -> _Spec:
    """The spec of ``cls`` when it is not compiled yet (every compiled class is a
    `Record` class, so only this path checks the argument)."""
    if not (isinstance(cls, type) and issubclass(cls, Record)):
        raise ParameterTypeError(function, "cls", "a Record class", type(cls).__name__)
    return _spec(cls)


def _nested_default(value: object) -> object:
    """orjson ``default`` hook: a nested record enters a payload in nested form."""
    if isinstance(value, Record):
        return _spec(type(value)).raw_nested(value)
    return _plain_map(value)


def _document_default(value: object) -> object:
    """orjson ``default`` hook of `document_digest`: a nested record as its document."""
    if isinstance(value, Record):
        return _spec(type(value)).raw_document(value)
    return _plain_map(value)


def _fresh_default(value: object) -> object:
    """`_nested_default` for ``cached=False``: the nested form built afresh."""
    if isinstance(value, Record):
        return _spec(type(value)).fresh_nested(value)
    return _plain_map(value)


def _plain_map(value: object) -> object:
    """The orjson ``default`` hooks' answer for what is not a record: a `FrozenMap` is
    written as its ``dict`` (orjson comes back for the records and maps inside)."""
    if type(value) is FrozenMap:
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not a record")


class _Spec:
    """Compiled parser/encoder for one record class."""

    def __init__(self, cls: type[Record]) -> None:
        self.cls = cls
        self.identity = cls.__identity__
        hints = typing.get_type_hints(cls)
        # Every field is checked by what its annotation says (`field_check`): the
        # annotation is the one statement of the field's kind; a validator of the
        # field's own (attrs) adds the record's rule and runs after, on a checked value.
        extras = typing.get_type_hints(cls, include_extras=True)
        declared = attrs.fields(cls)  # type: ignore[arg-type]
        self.check_fields = field_checks(
            cls.__name__,
            [(f.name, extras[f.name], f.default is attrs.NOTHING) for f in declared],
        )
        self.fields = tuple(f.name for f in declared)
        self.field_set = frozenset(self.fields)
        self.open = cls.__open__
        self.parsers: dict[str, Parser] = {}
        self.encoders: list[tuple[str, Encoder | None]] = []
        for name in self.fields:
            # With its ``Annotated`` metadata: `kernel.records.values.JsonValue` is read by it.
            parser, encoder = compile_field(extras[name], f"{cls.__name__}.{name}", _parser_of)
            self.parsers[name] = parser
            self.encoders.append((name, encoder))
        self._encoding = tuple((n, e) for n, e in self.encoders if e is not None)
        # `kernel.records.values.Omissible` fields: a document leaves them out for None.
        self.omissible = frozenset(
            name for name in self.fields if isinstance(shape_of(extras[name]), OmissibleShape)
        )
        self._get_all = _getter(self.fields)
        ident = self.identity
        for name in (ident.include or ()) + tuple(ident.exclude):
            if name not in self.field_set and name != "explanation":
                raise TypeError(f"{cls.__name__}.__identity__ names unknown field {name}")
        if ident.field is not None and ident.field not in self.field_set:
            raise TypeError(f"{cls.__name__}.__identity__.field {ident.field} unknown")
        nested = tuple(n for n in self.fields if n not in ident.exclude)
        self.nested_fields = nested
        if ident.include is not None:
            chosen = ident.include
        else:
            chosen = tuple(n for n in nested if n != ident.field)
        self.payload_fields = tuple(n for n in chosen if n != ident.field)
        self._get_payload = _getter(self.payload_fields)
        self._get_nested = _getter(nested)
        self._get_payload_items = item_getter(self.payload_fields)
        # The id field blanked to "" in its own payload (self-sealing ids), else None.
        self.blank = ident.field if ident.field is not None and ident.seals else None
        self._payload_template: dict[str, object] = dict.fromkeys(self.payload_fields)
        if self.blank is not None:
            self._payload_template[self.blank] = ""
        # Nested records are turned into their nested-form dicts here rather than by
        # an orjson ``default`` hook: a C -> Python round trip per record costs ~2x.
        self._payload_records = _record_converters(hints, self.payload_fields, cached=True)
        self._nested_records = _record_converters(hints, nested, cached=True)
        self._fresh_payload_records = _record_converters(hints, self.payload_fields, cached=False)
        # The nested form from the fields as they hold now; the cache is left alone.
        self.fresh_nested = _dict_builder(
            nested, self._get_nested, _record_converters(hints, nested, cached=False)
        )

    def encode(self, record: Record) -> dict[str, Any]:
        out: dict[str, Any] = dict(zip(self.fields, self._get_all(record)))  # noqa: B905
        for name, encoder in self._encoding:
            out[name] = encoder(out[name])
        return self._omit_absent(out) if self.omissible else out

    def raw_document(self, record: Record) -> dict[str, object]:
        """Every field with its raw value: `encode` as orjson writes it, nested records
        left to `_document_default`."""
        out = dict(zip(self.fields, self._get_all(record)))  # noqa: B905 - equal lengths
        return self._omit_absent(out) if self.omissible else out

    def _omit_absent(self, out: dict[str, Any]) -> dict[str, Any]:
        """``out`` without the omissible fields that hold None (a document leaves them out)."""
        for name in self.omissible:
            if out[name] is None:
                del out[name]
        return out

    def raw_payload(self, record: Record, cached: bool = True) -> dict[str, object]:
        """Payload with raw field values (enums, tuples, records) for orjson."""
        # A copy of a template of the right size, filled in: no resizing as keys come.
        payload = self._payload_template.copy()
        payload.update(zip(self.payload_fields, self._get_payload(record)))  # noqa: B905
        for name, convert in self._payload_records if cached else self._fresh_payload_records:
            payload[name] = convert(payload[name])
        return payload

    def payload_of_fields(self, fields: Mapping[str, object]) -> dict[str, object]:
        """`raw_payload` of the record ``fields`` describe (nested forms built afresh)."""
        payload = dict(zip(self.payload_fields, self._get_payload_items(fields)))  # noqa: B905
        for name, convert in self._fresh_payload_records:
            payload[name] = convert(payload[name])
        if self.blank is not None:
            payload[self.blank] = ""
        return payload

    def raw_nested(self, record: Record) -> dict[str, object]:
        try:
            return record._kernel_nested
        except AttributeError:
            pass
        nested = dict(zip(self.nested_fields, self._get_nested(record)))  # noqa: B905
        for name, convert in self._nested_records:
            nested[name] = convert(nested[name])
        object.__setattr__(record, "_kernel_nested", nested)
        return nested

    def parse(self, data: object, path: str, verify_ids: bool) -> Record:
        if type(data) is not dict:
            raise RecordError(path, f"expected an object, got {json_type(data)}")
        keys: AbstractSet[object] = data.keys() & self.field_set if self.open else data.keys()
        parsers: Iterable[tuple[str, Parser]] = self.parsers.items()
        if keys != self.field_set:
            # str keys first, in order; other keys (a JSON object has none) by repr, so
            # that keys of mixed types never make the sort itself raise.
            unknown = sorted(
                (k for k in keys if k not in self.field_set),
                key=lambda k: (0, k) if type(k) is str else (1, short_repr(k)),
            )
            if unknown:
                first = unknown[0]
                name = first if type(first) is str else short_repr(first)
                raise RecordError(join_path(path, name), "unknown field")
            missing = sorted(self.field_set - keys - self.omissible)
            if missing:
                raise RecordError(join_path(path, missing[0]), "missing field")
            # Only an omissible field is left out: it then takes its default, None.
            parsers = [(name, parser) for name, parser in parsers if name in keys]
        kwargs = {
            name: parser(data[name], join_path(path, name), verify_ids) for name, parser in parsers
        }
        try:
            record = self.cls(**kwargs)
        except (ValueError, TypeError) as e:
            field = getattr(e, "kernel_field", None)
            reason = e.reason if isinstance(e, FieldError) else str(e)
            raise RecordError(join_path(path, field) if field else path, reason) from e
        ident = self.identity
        if verify_ids and ident.field is not None and ident.recomputable:
            expected = compute_id(record)
            if getattr(record, ident.field) != expected:
                raise RecordError(
                    join_path(path, ident.field),
                    f"id does not reproduce from the record (expected {expected})",
                )
        return record


_SPECS: dict[type, _Spec] = {}


def _spec(cls: type[Record]) -> _Spec:
    spec = _SPECS.get(cls)
    if spec is None:
        spec = _SPECS[cls] = _Spec(cls)
    return spec


def _parser_of(cls: type) -> Parser:
    """The parser of a nested record of ``cls`` (`kernel.records.parsers` takes it from
    here): looked up when a value is parsed, since a record class may hold itself."""
    return _spec(cls).parse


def _record_converters(
    hints: dict[str, Any], names: tuple[str, ...], *, cached: bool
) -> tuple[tuple[str, Callable[[Any], object]], ...]:
    """For each field holding records, a function giving their nested forms (from the
    cache, or built afresh from the fields: ``cached``)."""
    converters = []
    for name in names:
        convert = _record_converter(hints[name], cached)
        if convert is not None:
            converters.append((name, convert))
    return tuple(converters)


def _record_converter(hint: Any, cached: bool) -> Callable[[Any], object] | None:
    return _shape_converter(shape_of(hint), cached)


def _shape_converter(shape: Shape, cached: bool) -> Callable[[Any], object] | None:
    match shape:
        case RecordShape(hint=record_cls):
            # A class not compiled yet is looked up at the first call, not here: a record
            # class may hold itself (or one not yet fully defined) in a field.
            known = _SPECS.get(record_cls)
            if known is not None:
                return known.raw_nested if cached else known.fresh_nested
            resolved: list[Callable[[Any], object]] = []

            def convert(value: Any) -> object:
                if not resolved:
                    spec = _spec(record_cls)
                    resolved.append(spec.raw_nested if cached else spec.fresh_nested)
                return resolved[0](value)

            return convert
        case UnionShape(members=members):
            return _union_converter(members, cached)
        case VarTuple(item=item):
            convert_item = _shape_converter(item, cached)
            if convert_item is not None:
                item_fn = convert_item
                return lambda value: list(map(item_fn, value))
    return None


def _union_converter(members: tuple[Shape, ...], cached: bool) -> Callable[[Any], object] | None:
    found = [c for c in (_shape_converter(m, cached) for m in members) if c is not None]
    if not found:
        return None
    if len(found) > 1:  # a tagged union: each value is converted by its own class
        if cached:
            return lambda value: None if value is None else _spec(type(value)).raw_nested(value)
        return lambda value: None if value is None else _spec(type(value)).fresh_nested(value)
    convert_member = found[0]
    if len(found) < len(members):
        # A record mixed with literals (`CalibrationEntry | Literal[False]`).
        return lambda value: convert_member(value) if isinstance(value, Record) else value
    return lambda value: None if value is None else convert_member(value)


def _getter(names: tuple[str, ...]) -> Callable[[object], tuple[object, ...]]:
    if not names:
        return lambda _record: ()
    if len(names) == 1:
        single = operator.attrgetter(names[0])
        return lambda record: (single(record),)
    return operator.attrgetter(*names)


def _dict_builder(
    names: tuple[str, ...],
    get: Callable[[Any], tuple[object, ...]],
    converters: tuple[tuple[str, Callable[[Any], object]], ...],
) -> Callable[[Any], dict[str, object]]:
    """A function building ``{name: value}`` from ``get``'s values, records converted."""
    if not converters:
        # Leaf records (spans, charges): one C-level pass, no Python loop.
        return lambda source: dict(zip(names, get(source)))  # noqa: B905 - equal lengths

    def build(source: Any) -> dict[str, object]:
        built = dict(zip(names, get(source)))  # noqa: B905 - equal lengths
        for name, convert in converters:
            built[name] = convert(built[name])
        return built

    return build


def field_error(field: str, message: str) -> FieldError:
    """A validator error naming the field; the record's ``__init__`` adds the record's
    name, and ``from_dict`` the document path."""
    return FieldError(field, message)
