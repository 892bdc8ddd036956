"""The run config document as records: what ``kernel run`` reads, and its JSON Schema.

`RunConfig.from_dict` parses the document strictly (the codec, ADR-0007) after
`filled` puts in the defaults of the keys a person left out; `kernel schemas show
config` is generated from these classes and the built-in adapters' entry records. The
kernel reads the ``verifier`` entry and each attempt through *open* records (the keys
it owns: ``adapter``, ``attempt_id``); the adapter the entry names reads the whole
entry as its own closed record (`kernel.effects.adapters`).
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, ClassVar, Final, Literal

import attrs

from kernel.effects.sandbox import Limits
from kernel.records.codec import Record, field_error, short_repr
from kernel.records.parsers import plain_json
from kernel.records.shapes import (
    Kinded,
    OmissibleShape,
    RecordShape,
    Shape,
    UnionShape,
    VarTuple,
    shape_of,
)
from kernel.records.values import NonBlank, Omissible
from kernel.run.record import DeclaredReplay, unique_attempt_ids
from kernel.run.verification import Isolation

__all__ = [
    "CONFIG_KIND",
    "DEFAULT_LIMITS",
    "AttemptEntry",
    "CalibrationEntry",
    "IsolationEntry",
    "RunConfig",
    "VerifierEntry",
    "argv",
    "env_names",
    "filled",
    "relative",
    "relative_path_problem",
]

CONFIG_KIND: Final = "kernel-orchestration-config"
DEFAULT_LIMITS: Final = Limits()
"""The limits of a config that names none (`kernel.effects.sandbox.Limits`' defaults)."""


def relative_path_problem(value: str) -> str | None:
    """Why ``value`` is no relative POSIX path without ``..`` (portable, confined), or
    None when it is one."""
    pure = PurePosixPath(value)
    if pure.is_absolute() or ".." in pure.parts or "\\" in value:
        return f"must be a relative path without '..': {short_repr(value)}"
    return None


def relative(_instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    """attrs validator of a config's path (None passes): relative, without ``..``.

    Raises:
        FieldError: naming the field and the path.
    """
    problem = None if value is None else relative_path_problem(value)
    if problem is not None:
        raise field_error(attribute.name, problem)


def argv(_instance: object, attribute: attrs.Attribute[Any], value: tuple[str, ...] | None) -> None:
    """attrs validator of a command or a list of paths (None passes): a non-empty array
    of non-empty strings.

    Raises:
        FieldError: naming the field.
    """
    if value is not None and (not value or not all(value)):
        raise field_error(
            attribute.name, f"expected a non-empty array of non-empty strings, got {list(value)}"
        )


def env_names(_instance: object, attribute: attrs.Attribute[Any], value: Mapping[str, str]) -> None:
    """attrs validator of a command's ``env``: each name non-empty and without ``=``.

    Raises:
        FieldError: naming the field and the variable.
    """
    for name in value:
        if not name or "=" in name:
            raise field_error(
                attribute.name, f"expected variable names without '=', got {short_repr(name)}"
            )


@attrs.frozen(kw_only=True)
class VerifierEntry(Record):
    """The config's verifier: the adapter it names (its other keys are the adapter's)."""

    __open__: ClassVar[bool] = True

    adapter: NonBlank
    """The verifier adapter's kind (a key of the `AdapterRegistry`)."""


@attrs.frozen(kw_only=True)
class AttemptEntry(Record):
    """One attempt of the config (its other keys are its worker adapter's)."""

    __open__: ClassVar[bool] = True

    attempt_id: NonBlank
    """The attempt's id (unique in the config)."""
    adapter: NonBlank
    """The worker adapter's kind (a key of the `AdapterRegistry`)."""


@attrs.frozen(kw_only=True)
class IsolationEntry(Record):
    """The isolation the config accepts (checked against what the machine offers)."""

    minimum: Isolation | None = None
    """The weakest isolation a run may use (None: the strongest this machine offers)."""
    accept_below_overlay: bool = False
    """Evidence below ``overlay`` may ground ``verified``."""


@attrs.frozen(kw_only=True)
class CalibrationEntry(Record):
    """The calibration of a verifier's declared tests before any attempt is judged."""

    reference_patch: Omissible[str] = attrs.field(default=None, validator=relative)
    """A patch that must turn every fail-to-pass test green (relative to the config);
    left out, none (null is refused: it would silently drop the reference run)."""


def _attempts(
    _instance: object, attribute: attrs.Attribute[Any], value: tuple[AttemptEntry, ...]
) -> None:
    # Vacuous input is refused: a run has at least one attempt.
    if not value:
        raise field_error(attribute.name, "expected a non-empty array")
    unique_attempt_ids(attribute.name, (entry.attempt_id for entry in value))


@attrs.frozen(kw_only=True)
class RunConfig(Record):
    """An orchestration config: a work unit, a verifier and the attempts to run."""

    kind: Literal["kernel-orchestration-config"]
    """The document kind."""
    schema_version: Literal["1"]
    """The document version."""
    run_id: NonBlank
    """The run's id."""
    work_unit: NonBlank = attrs.field(validator=relative)
    """The work unit document (relative to the config's folder)."""
    verifier: VerifierEntry
    """The verifier adapter and its entry."""
    attempts: tuple[AttemptEntry, ...] = attrs.field(validator=_attempts)
    """The attempts, in launch order."""
    replay: DeclaredReplay = DeclaredReplay.DETERMINISTIC
    """What the config declares about replay."""
    costly: bool = False
    """A worker run costs money: ``kernel run`` skips the replay unless asked."""
    isolation: IsolationEntry | None = None
    """The isolation the config accepts (None: the defaults, for sandboxed adapters)."""
    limits: Limits = DEFAULT_LIMITS
    """Resource limits of every sandboxed run (over the defaults)."""
    calibration: CalibrationEntry | Literal[False] | None = None
    """``false`` turns calibration off; None (left out): on when the verifier declares
    tests."""


def filled(cls: type[Record], document: Mapping[str, object]) -> dict[str, object]:
    """``document`` with the defaults of ``cls``'s fields it leaves out, in JSON form,
    recursively into nested entries (records, and arrays of records); never mutated.
    An omissible field (`kernel.records.values.Omissible`) stays left out. Anything
    else is left for ``from_dict`` to refuse."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out = dict(document)
    for field in attrs.fields(cls):  # type: ignore[arg-type]
        shape = shape_of(hints[field.name])
        value = out.get(field.name, attrs.NOTHING)
        if value is not attrs.NOTHING:
            out[field.name] = _filled_value(shape, value)
        elif field.default is not attrs.NOTHING and not isinstance(shape, OmissibleShape):
            out[field.name] = _json(field.default)
    return out


def _filled_value(shape: Shape, value: object) -> object:
    match shape:
        case Kinded(inner=inner) | OmissibleShape(inner=inner):
            return _filled_value(inner, value)
        case RecordShape(hint=hint) if type(value) is dict:
            return filled(hint, value)
        case UnionShape(members=members) if type(value) is dict:
            records = [m for m in members if isinstance(m, RecordShape)]
            if len(records) == 1:
                return filled(records[0].hint, value)
        case VarTuple(item=item) if type(value) is list:
            return [_filled_value(item, v) for v in value]
    return value


def _json(default: object) -> object:
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]  # attrs' Factory is a class
        default = typing.cast("Any", default).factory()
    if isinstance(default, Record):
        return default.to_dict()
    if isinstance(default, enum.Enum):
        return default.value
    return plain_json(default)
