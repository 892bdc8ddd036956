"""Generate ``src/kernel/schemas/*.schema.json`` (JSON Schema 2020-12) from the record
classes, and list or read the schemas the installed package ships.

Usage::

    python -m kernel.effects.schemas            # (re)write src/kernel/schemas/
    python -m kernel.effects.schemas --check    # exit 1 when a file is stale or missing
    kernel schemas list                         # what ships (name and $id)
    kernel schemas show run-record              # one schema, as shipped

From Python: `schema_names()` and `load_schema(name)` read the package data through
``importlib.resources`` (they work from a wheel, a zip or a checkout alike).

The schemas are derived from each record's field annotations (types, enums,
``X | None``, nested records as ``$defs``) and from its validators (digest patterns,
non-blank strings, minimum values, the all-false authority, non-empty attempts), so a
change to a record that is not regenerated fails ``--check``. A field added to a
published run record with a default (``RunRecord.provenance``,
``RunRecord.isolation_policy`` and ``calibration``, ``AttemptRecord.worker_sandbox``
and ``check_runs``,
a corroboration run's ``limits``) is optional in the schema: documents written before
it existed stay valid, and the CLI readers take its absence as the default (``null``,
``[]``). Files are canonical JSON
(sorted keys, compact) plus a newline.
"""

from __future__ import annotations

import argparse
import importlib.resources
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from kernel.corroboration.run_admission import RunAdmission
from kernel.decide.decision import HumanDecisionRecord
from kernel.effects.adapters import builtin_registry
from kernel.effects.files import atomic_write_bytes
from kernel.effects.run_config import AttemptEntry, RunConfig, VerifierEntry
from kernel.errors import ConfigError
from kernel.records.codec import Record, tag_of
from kernel.records.identity import canonical_json
from kernel.records.shapes import (
    EnumShape,
    FixedTuple,
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
from kernel.records.values import Kind, kind_of
from kernel.run.record import RunRecord
from kernel.run.replay import ReplayCheck
from kernel.run.report import RunEvidenceReport
from kernel.run.verification import ResultManifest, VerificationResult, WorkUnit

__all__ = [
    "DOCUMENTS",
    "PACKAGE_FOLDER",
    "SCHEMA_SUFFIX",
    "WRITTEN_BY_PEOPLE",
    "generate",
    "load_schema",
    "main",
    "schema_for",
    "schema_names",
]

DOCUMENTS: Final[dict[str, type[Record]]] = {
    "run-record": RunRecord,
    "run-evidence-report": RunEvidenceReport,
    "human-decision-record": HumanDecisionRecord,
    "work-unit": WorkUnit,
    "result-manifest": ResultManifest,
    "verification-result": VerificationResult,
    "run-admission": RunAdmission,
    "replay-check": ReplayCheck,
    "config": RunConfig,
}
"""Schema file stem -> record class. The CLI writes the first three and the last two;
people write the run config (`kernel.effects.run_config`)."""

WRITTEN_BY_PEOPLE: Final = frozenset({"config"})
"""Documents people write: a field with a default may be left out (it is optional in
the schema, and the reader fills it in)."""

# Constraints of a record's own validators (the field kinds of `kernel.records.values` carry
# their keywords themselves: `kind_of`), keyed by validator function name.
_CONSTRAINTS: Final[dict[str, dict[str, Any]]] = {
    "_attempts": {"minItems": 1},
    "_check_ids": {"minItems": 1},
    "argv": {"minItems": 1},
    "_git_object_id": {"pattern": "^([0-9a-f]{40}|[0-9a-f]{64})$"},
}
# Fields added to a published document later, with a None default (module docstring).
_OPTIONAL: Final = frozenset(
    {
        ("RunRecord", "provenance"),
        ("RunRecord", "isolation_policy"),
        ("RunRecord", "calibration"),
        ("RunEvidenceReport", "calibration"),
        ("CalibrationTest", "reason"),
        ("AttemptRecord", "worker_sandbox"),
        ("AttemptRecord", "check_runs"),
        ("CheckRun", "trust"),
        ("CheckRun", "findings"),
        ("CandidateGroup", "trust_levels"),
        ("RunObservation", "limits"),
        ("ClassifiedRun", "limits"),
    }
)


def _validators(validator: object) -> list[Callable[..., object]]:
    """Flatten attrs ``and_``/``optional`` wrappers into plain validator functions."""
    if validator is None:
        return []
    inner = getattr(validator, "_validators", None)
    if inner is not None:
        return [v for item in inner for v in _validators(item)]
    wrapped = getattr(validator, "validator", None)
    if wrapped is not None:
        return _validators(wrapped)
    return [validator]  # type: ignore[list-item]


def _name(function: object) -> str:
    return str(getattr(function, "__name__", ""))


def _apply(kind: Kind, schema: dict[str, Any]) -> None:
    """Add a field kind's keywords to ``schema`` (to its items for an items kind, to
    the non-null member of an optional)."""
    target = schema["anyOf"][0] if "anyOf" in schema else schema
    if kind.items:
        if "items" in target:
            target["items"].update(dict(kind.schema))
    else:
        target.update(dict(kind.schema))


_JSON_TYPES: Final = {str: "string", int: "integer", bool: "boolean", type(None): "null"}


class _Builder:
    def __init__(
        self,
        *,
        defaults_optional: bool = False,
        entries: Mapping[type[Record], tuple[type[Record], ...]] | None = None,
    ) -> None:
        self.defs: dict[str, Any] = {}
        # An open entry the config's adapters read (`AttemptEntry`), described as the
        # tagged union of the registered adapters' own entry records.
        self.entries = entries or {}
        # A document a person writes (the run config) may leave out a field that has a
        # default; a document kernel writes has every field written out.
        self.defaults_optional = defaults_optional

    def hint(self, hint: Any) -> dict[str, Any]:
        return self.shape(shape_of(hint))

    def shape(self, shape: Shape) -> dict[str, Any]:
        match shape:
            case Kinded(inner=inner, validators=validators):
                schema = self.shape(inner)
                for validator in validators:
                    kind = kind_of(validator)
                    if kind is not None:
                        _apply(kind, schema)
                return schema
            case Scalar(hint=hint):
                return {"type": _JSON_TYPES[hint]}
            case UnionShape(members=members, optional=optional):
                return self.union(members, optional=optional)
            case LiteralShape(values=values):
                return {"const": values[0]} if len(values) == 1 else {"enum": list(values)}
            case EnumShape(hint=hint):
                return {"enum": [m.value for m in hint]}
            case RecordShape(hint=hint) if hint in self.entries:
                return self.union(tuple(map(shape_of, self.entries[hint])), optional=False)
            case RecordShape(hint=hint):
                self.record(hint)
                return {"$ref": f"#/$defs/{hint.__name__}"}
            case VarTuple(item=item):
                return {"type": "array", "items": self.shape(item)}
            case ObjectShape(value=value):
                return {"type": "object", "additionalProperties": self.shape(value)}
            case JsonShape():
                return self.json_value()
            case OmissibleShape(inner=UnionShape(members=members)):
                # Left out, never null: the field is not required (`record`).
                return (
                    self.union(members, optional=False) if members[1:] else self.shape(members[0])
                )
            case FixedTuple(items=items):
                return {
                    "type": "array",
                    "prefixItems": [self.shape(item) for item in items],
                    "minItems": len(items),
                    "maxItems": len(items),
                }
        raise TypeError(f"no schema for {shape.hint!r}")

    def json_value(self) -> dict[str, Any]:
        """`kernel.records.values.JsonValue`: any JSON value but a number with a fraction
        or an exponent (``integer`` is JSON Schema's name for a number without one)."""
        ref = {"$ref": "#/$defs/JsonValue"}
        self.defs.setdefault(
            "JsonValue",
            {
                "description": "Any JSON value without floats.",
                "type": ["array", "boolean", "integer", "null", "object", "string"],
                "items": ref,
                "additionalProperties": ref,
            },
        )
        return dict(ref)

    def union(self, members: tuple[Shape, ...], *, optional: bool) -> dict[str, Any]:
        null = [{"type": "null"}] if optional else []
        if len(members) > 1 and not all(isinstance(m, RecordShape) for m in members):
            # Literals beside at most one record (`kernel.records.parsers`).
            return {"anyOf": [self.shape(m) for m in members] + null}
        if len(members) > 1:  # a tagged union of records (`kernel.records.codec.tag_of`)
            tag, _ = tag_of(tuple(m.hint for m in members))
            inner = {"oneOf": [self.shape(m) for m in members], "discriminator": tag}
            return {"anyOf": [inner, *null]} if optional else inner
        return {"anyOf": [self.shape(members[0]), *null]}

    def record(self, cls: type[Record]) -> dict[str, Any]:
        name = cls.__name__
        if name in self.defs:
            return self.defs[name]  # type: ignore[no-any-return]
        self.defs[name] = {}  # placeholder: recursion guard
        extras = typing.get_type_hints(cls, include_extras=True)
        properties: dict[str, Any] = {}
        optional: set[str] = set()
        for field in attrs.fields(cls):  # type: ignore[arg-type]
            if (
                (name, field.name) in _OPTIONAL
                or (self.defaults_optional and field.default is not attrs.NOTHING)
                or isinstance(shape_of(extras[field.name]), OmissibleShape)
            ):
                optional.add(field.name)
            schema = self.hint(extras[field.name])
            target = schema
            if "anyOf" in schema and "$ref" not in schema["anyOf"][0]:
                target = schema["anyOf"][0]
            for validator in _validators(field.validator):
                name_ = _name(validator)
                kind = kind_of(validator)
                if kind is not None and "$ref" not in target:
                    _apply(kind, target)
                if name_ in _CONSTRAINTS and "$ref" not in target:
                    extra = _CONSTRAINTS[name_]
                    if "const" in extra:
                        target.pop("type", None)
                    target.update(extra)
            properties[field.name] = schema
        doc = (cls.__doc__ or name).strip().split("\n\n")[0]
        definition = {
            "type": "object",
            "description": " ".join(doc.split()),
            "additionalProperties": cls.__open__,
            "required": sorted(set(properties) - optional),
            "properties": properties,
        }
        self.defs[name] = definition
        return definition


def schema_for(stem: str, cls: type[Record]) -> dict[str, Any]:
    """The JSON Schema (2020-12) document for records of ``cls``; the run config's
    adapter entries are those of the built-in adapters (`builtin_registry`), each
    closed, told apart by ``adapter``."""
    registry = builtin_registry()
    entries = {
        AttemptEntry: registry.entries("worker"),
        VerifierEntry: registry.entries("verifier"),
    }
    builder = _Builder(defaults_optional=stem in WRITTEN_BY_PEOPLE, entries=entries)
    root = builder.record(cls)
    defs = {k: v for k, v in builder.defs.items() if k != cls.__name__}
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:evidence-kernel:schema:{stem}",
        "title": f"evidence-kernel {cls.__name__}",
        **root,
    }
    if defs:
        schema["$defs"] = dict(sorted(defs.items()))
    return schema


def generate() -> dict[str, bytes]:
    """File name -> canonical bytes for every schema."""
    return {
        f"{stem}.schema.json": canonical_json(schema_for(stem, cls)) + b"\n"
        for stem, cls in DOCUMENTS.items()
    }


SCHEMA_SUFFIX: Final = ".schema.json"
PACKAGE_FOLDER: Final = Path(__file__).resolve().parents[1] / "schemas"
"""Where the generator writes: the ``schemas`` folder of the package being developed."""


def _shipped() -> Any:
    return importlib.resources.files("kernel") / "schemas"


def schema_names() -> list[str]:
    """The names of the JSON Schemas the installed package ships (sorted), e.g.
    ``run-record`` for ``run-record.schema.json``."""
    return sorted(
        entry.name[: -len(SCHEMA_SUFFIX)]
        for entry in _shipped().iterdir()
        if entry.name.endswith(SCHEMA_SUFFIX)
    )


def load_schema(name: str) -> dict[str, Any]:
    """One shipped schema, decoded.

    Raises:
        ConfigError: no schema of that name ships (the message lists those that do).
    """
    if name not in schema_names():
        raise ConfigError(f"no schema {name!r}; shipped: {', '.join(schema_names())}")
    document = orjson.loads((_shipped() / f"{name}{SCHEMA_SUFFIX}").read_bytes())
    if type(document) is not dict:
        raise ConfigError(f"{name}: shipped schema is not an object")
    return document


def main(argv: Sequence[str] | None = None) -> int:
    """Write the schemas, or with ``--check`` report stale ones (exit 1)."""
    parser = argparse.ArgumentParser(prog="python -m kernel.effects.schemas")
    parser.add_argument("--check", action="store_true", help="fail when a schema is stale")
    parser.add_argument(
        "--dir",
        default=str(PACKAGE_FOLDER),
        help="schema folder (default: the package's schemas/)",
    )
    args = parser.parse_args(argv)
    folder = Path(args.dir)
    wanted = generate()
    if args.check:
        stale = []
        for name, data in wanted.items():
            path = folder / name
            if not path.is_file() or path.read_bytes() != data:
                stale.append(name)
        if stale:
            print(
                f"stale schemas in {folder}/: {', '.join(stale)}; run "
                "`python -m kernel.effects.schemas`",
                file=sys.stderr,
            )
            return 1
        print(f"{len(wanted)} schemas up to date in {folder}/")
        return 0
    for name, data in wanted.items():
        atomic_write_bytes(folder / name, data)
        print(f"wrote {folder / name}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
