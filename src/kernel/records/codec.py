"""The one record codec: strict ``from_dict``/``to_dict`` and identity payloads.

Every `kernel` record is an ``@attrs.frozen(kw_only=True)`` subclass of `Record`.
The codec reads each record's field annotations once, compiles a parser and an
encoder per field, and caches them per class.

Rules enforced by ``from_dict`` (each failure is a `RecordError` naming the path,
e.g. ``attempts[3].budget_charge.steps``):

- the document is an exact ``dict`` (a JSON object); its input is never mutated;
- unknown keys and missing keys are refused (every field is written out);
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
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Final, ParamSpec, Self, TypeVar

import attrs

from kernel.errors import FieldError, ParameterTypeError, RecordError
from kernel.records.identity import MAX_SAFE_INT, is_canonical_str, sha256_prevalidated

__all__ = [
    "Identity",
    "Record",
    "compute_id",
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
    "tag_of",
]

R = TypeVar("R")
P = ParamSpec("P")

_Parser = Callable[[object, str, bool], object]
_Encoder = Callable[[Any], object]

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
    if isinstance(value, dict):
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
                return (_join(path, name), "missing (deleted after construction)")
        try:
            spec.check_fields(current)
        except FieldError as e:
            return (_join(path, e.kernel_field), e.reason)
        items: Iterable[tuple[str, object]] = ((_join(path, n), v) for n, v in current.items())
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
    raise TypeError(f"{type(value).__name__} is not a record")


def _document_default(value: object) -> object:
    """orjson ``default`` hook of `document_digest`: a nested record as its document."""
    if isinstance(value, Record):
        return _spec(type(value)).raw_document(value)
    raise TypeError(f"{type(value).__name__} is not a record")


def _fresh_default(value: object) -> object:
    """`_nested_default` for ``cached=False``: the nested form built afresh."""
    if isinstance(value, Record):
        return _spec(type(value)).fresh_nested(value)
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
        self.check_fields = _field_checks(
            cls.__name__,
            [(f.name, extras[f.name], f.default is attrs.NOTHING) for f in declared],
        )
        self.fields = tuple(f.name for f in declared)
        self.field_set = frozenset(self.fields)
        self.parsers: dict[str, _Parser] = {}
        self.encoders: list[tuple[str, _Encoder | None]] = []
        for name in self.fields:
            parser, encoder = _compile(hints[name], f"{cls.__name__}.{name}")
            self.parsers[name] = parser
            self.encoders.append((name, encoder))
        self._encoding = tuple((n, e) for n, e in self.encoders if e is not None)
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
        self._get_payload_items = _item_getter(self.payload_fields)
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
        return out

    def raw_document(self, record: Record) -> dict[str, object]:
        """Every field with its raw value: `encode` as orjson writes it, nested records
        left to `_document_default`."""
        return dict(zip(self.fields, self._get_all(record)))  # noqa: B905 - equal lengths

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
            raise RecordError(path, f"expected an object, got {_json_type(data)}")
        keys = data.keys()
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
                raise RecordError(_join(path, name), "unknown field")
            missing = sorted(self.field_set - keys)
            raise RecordError(_join(path, missing[0]), "missing field")
        kwargs = {
            name: parser(data[name], _join(path, name), verify_ids)
            for name, parser in self.parsers.items()
        }
        try:
            record = self.cls(**kwargs)
        except (ValueError, TypeError) as e:
            field = getattr(e, "kernel_field", None)
            reason = e.reason if isinstance(e, FieldError) else str(e)
            raise RecordError(_join(path, field) if field else path, reason) from e
        ident = self.identity
        if verify_ids and ident.field is not None and ident.recomputable:
            expected = compute_id(record)
            if getattr(record, ident.field) != expected:
                raise RecordError(
                    _join(path, ident.field),
                    f"id does not reproduce from the record (expected {expected})",
                )
        return record


def kind_validators(hint: Any) -> tuple[Callable[[Any, Any, Any], None], ...]:
    """The validators an ``Annotated`` hint carries (callables marked with a kind)."""
    if typing.get_origin(hint) is not typing.Annotated:
        return ()
    return tuple(
        item
        for item in typing.get_args(hint)[1:]
        if callable(item) and getattr(item, "kernel_kind", None) is not None
    )


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
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        validators = kind_validators(hint)
        if not validators:
            return _rule(typing.get_args(hint)[0], where)
        return _kind_rule(validators)
    if hint is str:
        return _Rule(_check_str, _accepts_str, frozenset({str}))
    if hint is int:
        return _Rule(_check_int, _accepts_int, frozenset({int}))
    if hint is bool or hint is type(None):
        return _typed_rule(_exact_check(hint), frozenset({hint}))
    if isinstance(hint, type) and issubclass(hint, Record | enum.Enum):
        # A concrete enum admits its own members; an abstract base (``StrEnum`` in the
        # refusal base class) admits the members of any subclass, which subclasses narrow.
        if issubclass(hint, enum.Enum) and not list(hint):
            abstract: type = hint
            return _Rule(_class_check(hint), lambda value: isinstance(value, abstract), None)
        return _typed_rule(_class_check(hint), frozenset({hint}))
    if origin is typing.Literal:
        return _literal_rule(typing.get_args(hint))
    if origin in (types.UnionType, typing.Union):
        return _union_rule(typing.get_args(hint), where)
    if origin is tuple:
        return _tuple_rule(typing.get_args(hint), where)
    if hint is object or hint is Any:
        return None
    raise TypeError(f"{where}: no construction check for field type {hint!r}")


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
    if value is None or isinstance(value, enum.Enum | Record):
        return kind
    if isinstance(value, str | int | float):
        return f"{kind} {short_repr(value)}"
    if isinstance(value, list | tuple | dict | set | frozenset):
        return f"{kind} of {len(value)} items"
    return kind


def _union_rule(members: tuple[Any, ...], where: str) -> _Rule | None:
    rules = [_rule(member, where) for member in members]
    known = [r for r in rules if r is not None]
    if len(known) < len(rules):
        return None
    names = " | ".join(_type_name(member) for member in members)
    # ``X | None``: a wrong value is explained by X's own check (which item, which rule).
    proper = [r.check for m, r in zip(members, known, strict=True) if m is not type(None)]
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
    inner = tuple(r.accepts for r, m in zip(known, members, strict=True) if m is not type(None))
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


def _tuple_rule(args: tuple[Any, ...], where: str) -> _Rule:
    variadic = len(args) == 2 and args[1] is Ellipsis
    items = [_rule(a, where) for a in (args[:1] if variadic else args)]
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


def _field_checks(record: str, fields: list[tuple[str, Any, bool]]) -> _FieldsCheck:
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
    get = _item_getter(tuple(name for name, _ in typed)) if typed else None
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


_SPECS: dict[type, _Spec] = {}


def _spec(cls: type[Record]) -> _Spec:
    spec = _SPECS.get(cls)
    if spec is None:
        spec = _SPECS[cls] = _Spec(cls)
    return spec


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
    origin = typing.get_origin(hint)
    if isinstance(hint, type) and issubclass(hint, Record):
        record_cls: type[Record] = hint
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
    if origin in (types.UnionType, typing.Union):
        inner = [_record_converter(a, cached) for a in typing.get_args(hint)]
        found = [c for c in inner if c is not None]
        if not found:
            return None
        if len(found) > 1:  # a tagged union: each value is converted by its own class
            if cached:
                return lambda value: None if value is None else _spec(type(value)).raw_nested(value)
            return lambda value: None if value is None else _spec(type(value)).fresh_nested(value)
        convert_member = found[0]
        return lambda value: None if value is None else convert_member(value)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            convert_item = _record_converter(args[0], cached)
            if convert_item is not None:
                item_fn = convert_item
                return lambda value: list(map(item_fn, value))
    return None


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


def _item_getter(names: tuple[str, ...]) -> Callable[[Mapping[str, object]], tuple[object, ...]]:
    if not names:
        return lambda _fields: ()
    if len(names) == 1:
        single = operator.itemgetter(names[0])
        return lambda fields: (single(fields),)
    return operator.itemgetter(*names)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _json_type(value: object) -> str:
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


def _compile(hint: Any, where: str) -> tuple[_Parser, _Encoder | None]:
    """Parser and encoder (None when the value is already JSON) for one type."""
    origin = typing.get_origin(hint)
    if hint is str or hint is int or hint is bool:
        return _exact(hint), None
    if hint is type(None):
        return _exact(type(None)), None
    if origin in (types.UnionType, typing.Union):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        inner_parse: _Parser
        inner_encode: _Encoder | None
        if len(members) > 1:
            inner_parse, inner_encode = _compile_tagged(tuple(members), where)
        else:
            inner_parse, inner_encode = _compile(members[0], where)
        if len(members) == len(typing.get_args(hint)):
            return inner_parse, inner_encode

        def parse_optional(value: object, path: str, verify: bool) -> object:
            return None if value is None else inner_parse(value, path, verify)

        if inner_encode is None:
            return parse_optional, None
        encode_inner = inner_encode
        return parse_optional, lambda v: None if v is None else encode_inner(v)
    if origin is typing.Literal:
        allowed = typing.get_args(hint)

        def parse_literal(value: object, path: str, _verify: bool) -> object:
            # Same exact type as well as equal: `Literal[False]` never admits 0, and
            # `Literal["1"]` never admits 1.
            if not any(type(value) is type(a) and value == a for a in allowed):
                raise RecordError(path, f"expected one of {list(allowed)}, got {short_repr(value)}")
            return value

        return parse_literal, None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_parser(hint), operator.attrgetter("value")
    if isinstance(hint, type) and issubclass(hint, Record):
        record_cls = hint

        def parse_record(value: object, path: str, verify: bool) -> object:
            return _spec(record_cls).parse(value, path, verify)

        return parse_record, operator.methodcaller("to_dict")
    if origin is tuple:
        return _compile_tuple(typing.get_args(hint), where)
    raise TypeError(f"{where}: unsupported field type {hint!r}")


def tag_of(members: tuple[type[Record], ...], where: str = "union") -> tuple[str, dict[str, Any]]:
    """The discriminating field of a union of records, and its value per member.

    A union of records is *tagged*: every member has a field of the same name
    annotated with a one-value ``Literal`` (``kind: Literal["kernel-run-record"]``),
    and no two members share the value. The JSON form is the member's own object; the
    tag picks the member when parsing.

    Raises:
        TypeError: the members are not records, or no field tags them apart.
    """
    if not all(isinstance(m, type) and issubclass(m, Record) for m in members):
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


def _compile_tagged(members: tuple[Any, ...], where: str) -> tuple[_Parser, _Encoder]:
    tag, by_value = tag_of(members, where)
    allowed = sorted(by_value)

    def parse_tagged(value: object, path: str, verify: bool) -> object:
        if type(value) is not dict:
            raise RecordError(path, f"expected an object, got {_json_type(value)}")
        found = value.get(tag)
        member = by_value.get(found) if type(found) is str else None
        if member is None:
            raise RecordError(
                _join(path, tag), f"expected one of {allowed}, got {short_repr(found)}"
            )
        return _spec(member).parse(value, path, verify)

    return parse_tagged, operator.methodcaller("to_dict")


def _compile_tuple(args: tuple[Any, ...], where: str) -> tuple[_Parser, _Encoder | None]:
    if len(args) == 2 and args[1] is Ellipsis:
        item_parse, item_encode = _compile(args[0], where)

        def parse_var(value: object, path: str, verify: bool) -> object:
            if type(value) is not list and type(value) is not tuple:
                raise RecordError(path, f"expected an array, got {_json_type(value)}")
            return tuple(item_parse(item, f"{path}[{i}]", verify) for i, item in enumerate(value))

        if item_encode is None:
            return parse_var, list
        encode_item = item_encode
        return parse_var, lambda v: [encode_item(x) for x in v]
    compiled = [_compile(a, where) for a in args]
    size = len(compiled)

    def parse_fixed(value: object, path: str, verify: bool) -> object:
        if type(value) is not list and type(value) is not tuple:
            raise RecordError(path, f"expected an array, got {_json_type(value)}")
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


def _exact(kind: type) -> _Parser:
    name = {str: "string", int: "integer", bool: "boolean", type(None): "null"}[kind]
    if kind is int:
        return _parse_int
    if kind is str:
        return _parse_str

    def parse_exact(value: object, path: str, _verify: bool) -> object:
        # `type(...) is` so that bool is not int and no str/int subclass slips in.
        if type(value) is not kind:
            raise RecordError(path, f"expected {name}, got {_json_type(value)}")
        return value

    return parse_exact


def _parse_str(value: object, path: str, _verify: bool) -> object:
    # `type(...) is str` so that no str subclass slips in; valid Unicode so that every
    # record stays canonical JSON (an id can always be computed from it).
    if type(value) is not str:
        raise RecordError(path, f"expected string, got {_json_type(value)}")
    if not is_canonical_str(value):
        raise RecordError(path, "string holds a lone surrogate (not valid Unicode)")
    return value


def _parse_int(value: object, path: str, _verify: bool) -> object:
    # `type(...) is int` so that bool is not int; the range keeps every record
    # encodable as canonical JSON, so an id can always be computed from it.
    if type(value) is not int:
        raise RecordError(path, f"expected integer, got {_json_type(value)}")
    if not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
        raise RecordError(path, "integer outside +/-(2**53 - 1)")
    return value


def _enum_parser(kind: type[enum.Enum]) -> _Parser:
    values = {member.value: member for member in kind}
    allowed = sorted(str(v) for v in values)

    def parse_enum(value: object, path: str, _verify: bool) -> object:
        member = values.get(value) if type(value) in (str, int) else None
        if member is None:
            raise RecordError(path, f"expected one of {allowed}, got {short_repr(value)}")
        return member

    return parse_enum


def field_error(field: str, message: str) -> FieldError:
    """A validator error naming the field; the record's ``__init__`` adds the record's
    name, and ``from_dict`` the document path."""
    return FieldError(field, message)
