"""Shared primitives: field validators, spans, budget charges, version pairs, refusals.

Rules enforced at construction (a record that exists is well formed):

- a digest is exactly 64 lowercase hex characters (bare SHA-256, no prefix);
- strings are exact ``str`` holding valid Unicode (no lone surrogate), so every record
  can be encoded as canonical JSON and an id computed over it never raises;
- ints are exact ints (``bool`` is not an int) inside +/-(2**53 - 1), and counts are
  non-negative;
- collections are tuples, never lists;
- ``(name, version)`` pairs are non-empty strings, unique and sorted ascending;
- a `SourceSpan` has ``0 <= start <= end``.

Field vocabulary: a field's annotation is the one statement of what it admits. Plain
types mean their strict form (``str`` valid Unicode text, ``int`` a safe int, ``bool``,
an enum's members, a record class, ``Literal`` values, ``X | None``, tuples item by
item, a union of records told apart by a ``Literal`` tag); each further kind of field
(`Digest`, `OptionalDigest`, `Text`, `NonBlank`, `Count`, `Positive`, `SafeInt`,
`Digests`, `VersionPairsField`, `Timestamp`, `UniqueTexts`) is one ``typing.Annotated``
type whose metadata is its validator, and the validator carries its `Kind` (name, JSON
Schema keywords, description). From the annotation the codec derives the construction
check (`kernel.records.codec.field_check`, naming record and field) and the parser,
`kernel.effects.schemas` the JSON Schema, the identity docs the field's type and kind,
and `kernel.strategies.values.of_kind` valid values. ``attrs.field(validator=...)`` is
left for a record's own rule (ascending indexes, no absolute path), which runs after.

Outcome contract (every pure ``build_*``/``check_*``/``verify_*``/``record_*``/
``admit_*`` function keeps it):

- it returns ``Result | <Domain>Refusal``; each refusal class subclasses `Refusal`,
  carries at least one code of a closed ``StrEnum`` (a refusal without a code cannot
  be built) and a non-blank explanation saying what was expected and what was found;
- a wrong argument type raises `kernel.errors.ParameterTypeError` (a ``TypeError``),
  checked against the function's annotations by `boundary`, the same way everywhere;
  so does a record argument altered after it was built (a field overwritten or
  deleted in place), named by the altered field (`kernel.records.codec.malformed`);
  ADR-0232's binding functions refuse instead, as the reference implementation does;
- `unwrap` is the one raising helper: it raises the refusal's own error family
  (``Refusal.__error__``, `RefusedError` unless a domain names a subclass).
"""

from __future__ import annotations

import collections.abc
import datetime
import enum
import functools
import itertools
import re
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Final, ParamSpec, TypeVar

import attrs

from kernel.errors import ParameterTypeError, RefusedError
from kernel.records.codec import (
    Identity,
    Record,
    describe_found,
    field_check,
    field_error,
    malformed,
    short_repr,
)
from kernel.records.identity import MAX_SAFE_INT, is_canonical_str, is_digest
from kernel.records.shapes import (
    JSON,
    NOT_NULL,
    ClassShape,
    EnumShape,
    FixedTuple,
    LiteralShape,
    MappingShape,
    OtherGeneric,
    RecordShape,
    Scalar,
    SequenceShape,
    Shape,
    TypeShape,
    UnionShape,
    VarTuple,
    shape_of,
)

__all__ = [
    "BudgetCharge",
    "Count",
    "Digest",
    "Digests",
    "JsonValue",
    "Kind",
    "NonBlank",
    "Omissible",
    "OptionalDigest",
    "Positive",
    "SafeInt",
    "Text",
    "Timestamp",
    "UniqueTexts",
    "VersionPairsField",
    "boundary",
    "Refusal",
    "SourceSpan",
    "VersionPairs",
    "differs",
    "digest",
    "digests",
    "kind_of",
    "enum_member",
    "exact",
    "non_negative",
    "nonblank",
    "optional",
    "optional_digest",
    "positive",
    "rfc3339_utc_problem",
    "safe_int",
    "short_digest",
    "timestamp",
    "tuple_of",
    "unique_texts",
    "unwrap",
    "version_pair_problem",
    "version_pairs",
]

T = TypeVar("T")
P = ParamSpec("P")
_Validator = Callable[[object, "attrs.Attribute[Any]", object], None]


@attrs.frozen(kw_only=True)
class Kind:
    """One kind of field: what it admits, as a JSON Schema and in words."""

    name: str
    """The kind's name (``digest``, ``count``, ...)."""
    description: str
    """One line for documentation."""
    schema: tuple[tuple[str, object], ...]
    """JSON Schema keywords a value of this kind satisfies (beyond its JSON type)."""
    items: bool = False
    """True when ``schema`` applies to each item of an array."""


def kind_of(validator: object) -> Kind | None:
    """The `Kind` a validator implements, or None for a record's own rule."""
    found = getattr(validator, "kernel_kind", None)
    return found if isinstance(found, Kind) else None


def _kind(validator: _Validator, kind: Kind) -> _Validator:
    validator.kernel_kind = kind  # type: ignore[attr-defined]
    return validator


VersionPairs = tuple[tuple[str, str], ...]
"""Sorted, unique ``(name, version)`` pairs, e.g. ``schema_versions``."""


def digest(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: 64 lowercase hex characters.

    Raises:
        FieldError: ``value`` is not what the field admits (the error names it).
    """
    if not is_digest(value):
        raise field_error(
            attribute.name, f"not a 64-char lowercase hex digest: {short_repr(value)}"
        )


def optional_digest(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: a digest or None."""
    if value is not None:
        digest(instance, attribute, value)


def _text_problem(value: object) -> str | None:
    """Why an exact ``str`` cannot enter canonical JSON, or None."""
    if is_canonical_str(value):
        return None
    return "string holds a lone surrogate (not valid Unicode)"


def _validator_of(hint: Any, what: str) -> _Validator:
    """An attrs validator doing what the annotation ``hint`` says (`field_check`).

    Raises:
        TypeError: ``hint`` admits anything (``object``), so there is nothing to check.
    """
    found = field_check(hint, what)
    if found is None:
        raise TypeError(f"{what}: {hint!r} admits anything; there is nothing to validate")

    def validate(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        found(value, attribute.name)

    return validate


def exact(kind: type) -> _Validator:
    """attrs validator: what an annotation ``kind`` admits (``type(value) is kind``, so
    ``bool`` never passes as ``int``; a ``str`` must be valid Unicode). For records of
    users' own: a `Record`'s annotation alone already says it (ADR-0007)."""
    return _validator_of(kind, f"exact({kind.__name__})")


def non_negative(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: an exact int in ``0 .. 2**53 - 1`` (canonical JSON's range).

    Raises:
        FieldError: ``value`` is not what the field admits (the error names it).
    """
    if type(value) is not int or not 0 <= value <= MAX_SAFE_INT:
        raise field_error(
            attribute.name, f"expected an integer in 0..2**53-1, got {short_repr(value)}"
        )


def safe_int(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: an exact int inside +/-(2**53 - 1) (any sign).

    Raises:
        FieldError: ``value`` is not what the field admits (the error names it).
    """
    if type(value) is not int or not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
        raise field_error(
            attribute.name, f"expected an integer within +/-(2**53 - 1), got {short_repr(value)}"
        )


def positive(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: an exact int in ``1 .. 2**53 - 1``.

    Raises:
        FieldError: ``value`` is not what the field admits (the error names it).
    """
    if type(value) is not int or not 1 <= value <= MAX_SAFE_INT:
        raise field_error(attribute.name, f"expected an integer >= 1, got {short_repr(value)}")


def nonblank(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: an exact ``str`` that is not empty or whitespace only.

    Raises:
        FieldError: ``value`` is not what the field admits (the error names it).
    """
    if type(value) is not str or not value.strip():
        raise field_error(attribute.name, f"expected a non-blank string, got {short_repr(value)}")
    if (problem := _text_problem(value)) is not None:
        raise field_error(attribute.name, problem)


def digests(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: a tuple of digests (the failing item is named by its index).

    Raises:
        FieldError: ``value`` is not what the field admits (the error names it).
    """
    if type(value) is not tuple:
        raise field_error(attribute.name, f"expected a tuple, got {type(value).__name__}")
    for index, item in enumerate(value):
        if not is_digest(item):
            raise field_error(
                f"{attribute.name}[{index}]",
                f"not a 64-char lowercase hex digest: {short_repr(item)}",
            )


def optional(
    validator: Callable[[object, attrs.Attribute[Any], object], None],
) -> Callable[[object, attrs.Attribute[Any], object], None]:
    """attrs validator: None, or what ``validator`` admits."""

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            validator(instance, attribute, value)

    return check


def enum_member(kind: type[enum.Enum]) -> _Validator:
    """attrs validator: a member of ``kind`` (not its bare value); an annotation ``kind``
    says the same on a `Record` (ADR-0007)."""
    return _validator_of(kind, f"enum_member({kind.__name__})")


def tuple_of(kind: type) -> _Validator:
    """attrs validator: a tuple whose items are all exactly ``kind``; the annotation
    ``tuple[kind, ...]`` says the same on a `Record` (ADR-0007)."""
    return _validator_of(tuple[kind, ...], f"tuple_of({kind.__name__})")  # type: ignore[valid-type]


def version_pair_problem(value: object) -> str | None:
    """Why ``value`` is not a valid `VersionPairs`, or None when it is.

    Shared by the record validator and by validators that must *refuse* (not
    raise on) bad pairs passed as plain arguments.
    """
    if type(value) is not tuple:
        return f"expected a tuple of (name, version) pairs, got {type(value).__name__}"
    previous: str | None = None
    for index, pair in enumerate(value):
        if (
            type(pair) is not tuple
            or len(pair) != 2
            or type(pair[0]) is not str
            or type(pair[1]) is not str
            or not pair[0]
            or not pair[1]
        ):
            return f"[{index}] is not a (name, version) pair of non-empty strings"
        if previous is not None and pair[0] <= previous:
            return (
                f"[{index}] {short_repr(pair[0])} is duplicated or out of order (names must ascend)"
            )
        previous = pair[0]
    return None


def version_pairs(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: sorted, unique ``(name, version)`` pairs.

    Raises:
        FieldError: ``value`` is not what the field admits (the error names it).
    """
    problem = version_pair_problem(value)
    if problem is not None:
        raise field_error(attribute.name, problem)


# ASCII digits only: ``\d`` alone would admit fullwidth or Arabic-Indic digits.
_RFC3339_UTC: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z", re.ASCII)


def rfc3339_utc_problem(value: object) -> str | None:
    """Why ``value`` is not an RFC 3339 UTC timestamp (``...Z``), or None."""
    if type(value) is not str or not _RFC3339_UTC.fullmatch(value):
        return f"expected RFC 3339 UTC like 2026-01-01T00:00:00Z, got {short_repr(value)}"
    try:
        # The pattern fixed the shape; this says whether the date and time exist
        # (fromisoformat: the same verdicts as strptime, at a fraction of its cost).
        datetime.datetime.fromisoformat(value[:19])
    except ValueError:
        return f"not a real date and time: {short_repr(value)}"
    return None


def timestamp(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: an RFC 3339 UTC timestamp that names a real date and time.

    Raises:
        FieldError: ``value`` is not what the field admits (the error names it).
    """
    problem = rfc3339_utc_problem(value)
    if problem is not None:
        raise field_error(attribute.name, problem)


def differs(path: str, expected: str, want: object, got: object) -> str:
    """A refusal's words for a value that is not the one expected: ``path: expected
    <what> <want>, got <got>`` (both bounded, `short_repr`). Never raises."""
    return f"{path}: expected {expected} {short_repr(want)}, got {short_repr(got)}"


def unique_texts(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: a tuple of distinct texts (order kept: it may mean something).

    Raises:
        FieldError: ``value`` is not what the field admits (the error names it).
    """
    if type(value) is not tuple:
        raise field_error(attribute.name, f"expected a tuple, got {type(value).__name__}")
    seen: set[str] = set()
    for index, item in enumerate(value):
        if type(item) is not str:
            raise field_error(
                f"{attribute.name}[{index}]", f"expected str, got {type(item).__name__}"
            )
        if (problem := _text_problem(item)) is not None:
            raise field_error(f"{attribute.name}[{index}]", problem)
        if item in seen:
            raise field_error(
                f"{attribute.name}[{index}]",
                f"{short_repr(item)} is repeated (items must be unique)",
            )
        seen.add(item)


_DIGEST_PATTERN = "^[0-9a-f]{64}$"
_kind(
    timestamp,
    Kind(
        name="timestamp",
        description="RFC 3339 UTC, e.g. 2026-01-01T00:00:00Z (a real date and time)",
        schema=(
            (
                "pattern",
                "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?Z$",
            ),
        ),
    ),
)
_kind(
    unique_texts,
    Kind(
        name="unique texts",
        description="an array of distinct texts",
        schema=(("uniqueItems", True),),
    ),
)
_kind(
    digest,
    Kind(
        name="digest",
        description="64 lowercase hex characters (SHA-256)",
        schema=(("pattern", _DIGEST_PATTERN),),
    ),
)
_kind(
    optional_digest,
    Kind(
        name="optional digest",
        description="a digest, or null",
        schema=(("pattern", _DIGEST_PATTERN),),
    ),
)
_kind(
    non_negative,
    Kind(
        name="count",
        description="an integer in 0..2**53-1",
        schema=(("minimum", 0), ("maximum", MAX_SAFE_INT)),
    ),
)
_kind(
    positive,
    Kind(
        name="positive",
        description="an integer in 1..2**53-1",
        schema=(("minimum", 1), ("maximum", MAX_SAFE_INT)),
    ),
)
_kind(
    safe_int,
    Kind(
        name="safe int",
        description="an integer within +/-(2**53 - 1)",
        schema=(("minimum", -MAX_SAFE_INT), ("maximum", MAX_SAFE_INT)),
    ),
)
_kind(
    nonblank,
    Kind(
        name="non-blank text",
        description="text that is not only whitespace",
        schema=(("minLength", 1), ("pattern", "\\S")),
    ),
)
_kind(
    digests,
    Kind(
        name="digests",
        description="an array of digests",
        items=True,
        schema=(("pattern", _DIGEST_PATTERN),),
    ),
)
_kind(
    version_pairs,
    Kind(
        name="version pairs",
        description="[name, version] pairs, non-empty, names ascending",
        schema=(("uniqueItems", True),),
    ),
)
_TEXT = _kind(exact(str), Kind(name="text", description="valid Unicode text", schema=()))

Digest = Annotated[str, digest]
"""64 lowercase hex characters."""
OptionalDigest = Annotated[str | None, optional_digest]
"""A digest or None."""
Text = Annotated[str, _TEXT]
"""An exact ``str`` of valid Unicode (no lone surrogate)."""
NonBlank = Annotated[str, nonblank]
"""Text that is not empty or whitespace only."""
Count = Annotated[int, non_negative]
"""An exact int in ``0 .. 2**53 - 1``."""
Positive = Annotated[int, positive]
"""An exact int in ``1 .. 2**53 - 1``."""
SafeInt = Annotated[int, safe_int]
"""An exact int within +/-(2**53 - 1)."""
Digests = Annotated[tuple[str, ...], digests]
"""A tuple of digests."""
VersionPairsField = Annotated[VersionPairs, version_pairs]
"""Sorted, unique ``(name, version)`` pairs."""
Timestamp = Annotated[str, timestamp]
"""An RFC 3339 UTC timestamp (``2026-01-01T00:00:00Z``) naming a real date and time."""
UniqueTexts = Annotated[tuple[str, ...], unique_texts]
"""A tuple of distinct texts."""
Omissible = Annotated[T | None, NOT_NULL]
"""``Omissible[X]``: X, or None when a document leaves the key out; an explicit ``null``
is refused, and ``to_dict`` leaves the key out for None (a run config's calibration
``reference_patch``: null would silently drop the reference run its author asked for).
The field's default is None."""
JsonValue = Annotated[object, JSON]
"""Any JSON value without floats (a record stays canonical JSON): None, bool, a safe int,
text, a tuple or a `kernel.records.shapes.FrozenMap` of such values, nested at most
`kernel.records.identity.MAX_DEPTH` deep (an oracle call's arguments). A JSON object of
one type of value is ``FrozenMap[V]`` (``FrozenMap[str]``: an object of strings)."""


@attrs.frozen(kw_only=True)
class SourceSpan(Record):
    """A span of source text cited as evidence.

    Nested form (how it enters every identity): ``{"text", "start", "end",
    "sentence_index"}``. Order and duplicates of spans are meaningful.
    """

    text: Text
    """The cited text."""
    start: Count
    """Start offset (characters), ``0 <= start <= end``."""
    end: Count
    """End offset (characters, exclusive)."""
    sentence_index: Count | None = None
    """Index of the sentence the span is in, when known."""

    def __attrs_post_init__(self) -> None:
        if self.start > self.end:
            raise field_error("end", f"span end {self.end} is before start {self.start}")


@attrs.frozen(kw_only=True)
class BudgetCharge(Record):
    """What one candidate attempt declares it consumes. Nested form: both fields."""

    candidates: SafeInt
    """Candidates charged (validators require > 0 where the ADR does)."""
    steps: SafeInt
    """Steps charged."""


@attrs.frozen(kw_only=True)
class Refusal(Record):
    """Base of every refusal: closed reason codes and prose that never enters an id.

    Subclasses add their own self-sealed id field and the identities they could
    validate without guessing (else None). A refusal is never a partial result.
    """

    __identity__ = Identity()
    __error__: ClassVar[type[RefusedError]] = RefusedError
    """The exception `unwrap` raises for a refusal of this class."""

    reason_codes: tuple[enum.StrEnum, ...]
    """Closed, deterministic reason codes (one per failed check, check order)."""
    explanation: str = ""
    """Human prose: what was expected and what was found; never part of an identity."""

    def __attrs_post_init__(self) -> None:
        # A refusal says why: at least one closed code, and prose beyond the codes.
        if not self.reason_codes:
            raise field_error(
                "reason_codes", f"a {type(self).__name__} needs at least one reason code"
            )
        if not self.explanation.strip():
            raise field_error(
                "explanation", f"a {type(self).__name__} needs an explanation (expected/found)"
            )


def short_digest(value: str, size: int = 12) -> str:
    """The first ``size`` hex characters of a digest, with an ellipsis (messages, views)."""
    return value if len(value) <= size else value[:size] + "\u2026"


def unwrap(outcome: T | Refusal) -> T:
    """Return ``outcome`` unless it is a refusal, which is raised.

    The one raising helper of `kernel`: callers who prefer exceptions write
    ``unwrap(admit_to_commit(branch))``.

    Raises:
        RefusedError: carrying the refusal record itself (``type(outcome).__error__``,
            e.g. `kernel.errors.CommitBoundaryError` for a `CommitRefusal`).
    """
    if isinstance(outcome, Refusal):
        codes = ", ".join(str(code) for code in outcome.reason_codes)
        raise type(outcome).__error__(outcome, f"refused ({codes}): {outcome.explanation}")
    return outcome


def boundary(function: Callable[P, T]) -> Callable[P, T]:
    """Decorator: check every argument against ``function``'s annotations first.

    A wrong type raises `ParameterTypeError` naming the function, the parameter path
    (``observations[2]``), the expected type and what was found. Checked: exact
    ``str``/``int``/``bool`` (``bool`` is not an int), classes (records, enums),
    unions, ``Literal``, ``tuple[...]``, ``Sequence[...]`` and ``Mapping[...]`` items,
    ``type[...]``; other annotations (``object``, type variables) admit anything.
    Arity errors stay Python's own ``TypeError``. When the call fails and a record
    argument no longer keeps its annotations (altered in place after it was built), the
    failure is an `ParameterTypeError` naming the altered field instead; any other
    failure is raised as it is.
    """
    code = function.__code__
    positional = code.co_varnames[: code.co_argcount]
    known = frozenset(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    name = function.__qualname__
    hints: dict[str, Any] = {}

    @functools.wraps(function)
    def checked(*args: P.args, **kwargs: P.kwargs) -> T:
        if not hints:
            hints.update(typing.get_type_hints(function))
        for param, value in zip(positional, args, strict=False):
            _raise_on_mismatch(name, param, value, hints)
        for param, value in kwargs.items():
            if param in known:
                _raise_on_mismatch(name, param, value, hints)
        try:
            return function(*args, **kwargs)
        except ParameterTypeError:
            raise
        except Exception as error:
            # A record argument altered after it was built (a field overwritten or
            # deleted in place) passes the type check above and fails deep inside:
            # name the field instead. Anything else is a bug of ours, raised as it is.
            named = itertools.chain(zip(positional, args, strict=False), kwargs.items())
            for param, value in named:
                problem = malformed(value, param)
                if problem is not None:
                    where, why = problem
                    raise ParameterTypeError(
                        name, where, "a record as it was built", f"altered: {why}"
                    ) from error
            raise

    return checked


def _raise_on_mismatch(function: str, param: str, value: object, hints: dict[str, Any]) -> None:
    problem = _mismatch(value, hints.get(param, object), param)
    if problem is not None:
        raise ParameterTypeError(function, *problem)


def _describe(hint: object) -> str:
    if isinstance(hint, type):
        return "None" if hint is type(None) else hint.__name__
    return str(hint).replace("typing.", "").replace("collections.abc.", "")


def _mismatch(value: object, hint: Any, path: str) -> tuple[str, str, str] | None:
    """``(path, expected, found)`` for the first part of ``value`` not of type ``hint``."""
    return _shape_mismatch(value, shape_of(hint), path)


def _shape_mismatch(value: object, shape: Shape, path: str) -> tuple[str, str, str] | None:
    ok: bool
    match shape:
        case Scalar(hint=hint):
            # bool is no int; a str or int subclass is one (a parameter, not a field).
            ok = type(value) is bool if hint is bool else isinstance(value, hint)
            ok = ok and not (hint is int and isinstance(value, bool))
        case EnumShape(hint=hint) | RecordShape(hint=hint) | ClassShape(hint=hint):
            ok = isinstance(value, hint)
        case UnionShape(members=members, optional=optional):
            ok = (optional and value is None) or any(
                _shape_mismatch(value, member, path) is None for member in members
            )
        case LiteralShape(values=values):
            ok = any(type(value) is type(choice) and value == choice for choice in values)
        case VarTuple(item=item) | SequenceShape(item=item):
            ok = (
                type(value) is tuple
                if isinstance(shape, VarTuple)
                else isinstance(value, list | tuple)
            )
            if ok:
                return _items_mismatch(typing.cast("tuple[object, ...]", value), None, item, path)
        case FixedTuple(items=items):
            ok = type(value) is tuple
            if ok:
                return _items_mismatch(typing.cast("tuple[object, ...]", value), items, None, path)
        case MappingShape(key=key, value=item):
            ok = isinstance(value, collections.abc.Mapping)
            if ok:
                return _entries_mismatch(
                    typing.cast("Mapping[object, object]", value), key, item, path
                )
        case TypeShape(bound=bound):
            ok = isinstance(value, type) and (
                not isinstance(bound, type) or issubclass(value, bound)
            )
        case OtherGeneric(origin=origin) if origin in (
            collections.abc.Iterable,
            collections.abc.Iterator,
        ):
            # Its items are the function's to check (one pass).
            ok = isinstance(value, typing.cast("type", origin))
        case _:
            # object, Any, type variables, Callable (and kinds, which the parameter hints
            # of `boundary` never carry): checked by the function itself.
            return None
    return None if ok else (path, _describe(shape.hint), describe_found(value))


def _entries_mismatch(
    value: Mapping[object, object], key: Shape, item: Shape, path: str
) -> tuple[str, str, str] | None:
    for name, entry in value.items():
        problem = _shape_mismatch(name, key, f"{path} key {short_repr(name)}")
        problem = problem or _shape_mismatch(entry, item, f"{path}[{short_repr(name)}]")
        if problem is not None:
            return problem
    return None


def _items_mismatch(
    value: tuple[object, ...], fixed: tuple[Shape, ...] | None, each: Shape | None, path: str
) -> tuple[str, str, str] | None:
    if fixed is not None and len(fixed) != len(value):
        return (path, f"{len(fixed)} items", f"{len(value)} items")
    shapes = fixed if fixed is not None else (typing.cast("Shape", each),) * len(value)
    for index, (item, shape) in enumerate(zip(value, shapes, strict=True)):
        problem = _shape_mismatch(item, shape, f"{path}[{index}]")
        if problem is not None:
            return problem
    return None
