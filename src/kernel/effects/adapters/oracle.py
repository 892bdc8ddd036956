"""Oracle checks: the kernel computes the verdict, from output compared with an answer
the sandbox never sees (issue 18 item 6, ADR-0004 §1c).

A verifier check ``{"id": ..., "oracle": {...}}`` runs one command in the candidate's
sandbox, exactly like any check, and captures its stdout; the verifier (the kernel's
process, never the sandbox) compares it with the expected output read from a file in
the config folder when the config loads. Nothing of the expected output is passed to
the sandbox (no argument, no variable, no file the check names). Oracle entry::

    {"command": ["python3", "-c", "..."],          exactly one of command and call
     "call": {"module": "stats", "function": "median", "args": [[4, 1, 3, 2]],
              "kwargs": {}},                       a Python call written as data
     "expected": "oracle/median.json",             relative to the config folder
     "compare": "json"}                            "json" (default) or "bytes"

Rules enforced:

- ``bytes``: stdout equals the expected file's bytes exactly;
- ``json``: stdout and the expected file are each one JSON document (duplicate keys,
  ``NaN`` and ``Infinity`` refused) and are equal by value *and type*: ``1``, ``1.0``
  and ``true`` all differ; objects compare by keys, arrays in order;
- the expected file lies in no folder a namespace sandbox of the run shows (the
  baseline, the folder of a worker's or a check's program, the interpreter's and the
  kernel's folders, the system folders): a config that puts it there is refused
  (`shown_by`), so neither a worker nor the candidate's code can read the answer;
- a call runs ``python3 -I -c <kernel's call code> <request JSON>`` in the tree (the
  module imported from the candidate's tree, which is appended to ``sys.path`` after
  the standard library, so a tree ``json.py`` shadows nothing) and prints the return value as JSON
  (``allow_nan=False``; a value that is not plain JSON data, such as an object whose
  ``__eq__`` is always true, cannot be printed and fails the check);
- the check passes only on exit 0 with matching output: exit 0 with other output is
  ``oracle_mismatch``, output that is not one JSON document (or larger than
  `MAX_ORACLE_BYTES`) is ``oracle_output_unreadable``, a non-zero exit is
  ``nonzero_exit``: each fails the check; a missing or unreadable expected file is a
  config error (exit 2 before anything runs).

Its `kernel.run.record.TrustLevel` is ``oracle``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from kernel.effects.files import read_input
from kernel.effects.run_config import argv, relative
from kernel.effects.sandbox.spec import SYSTEM_BINDS
from kernel.errors import ConfigError, EffectError
from kernel.records.codec import Record, field_error
from kernel.records.identity import sha256_bytes
from kernel.records.parsers import plain_json
from kernel.records.shapes import FrozenMap
from kernel.records.values import JsonValue, NonBlank, Omissible
from kernel.run.record import TrustLevel
from kernel.run.verification import CheckReason, CheckStatus

if TYPE_CHECKING:
    from kernel.effects.adapters.base import ConfigSource

__all__ = [
    "CALL_LOCATOR",
    "CallEntry",
    "OracleEntry",
    "MAX_ORACLE_BYTES",
    "ORACLES_KEY",
    "OracleSpec",
    "judge_oracle",
    "json_same",
    "parse_json_output",
    "parse_oracle",
    "refuse_shown_expected",
    "required_trust",
    "shown_by",
]

MAX_ORACLE_BYTES: Final = 1 << 20
"""Largest stdout (and expected file) an oracle compares."""
CALL_LOCATOR: Final = "kernel:oracle-call"
"""How a call oracle's recorded command names the kernel's call code."""
_CALL_CODE: Final = (
    "import importlib, json, os, sys\n"
    # After the standard library: a tree's json.py (or any module of the standard
    # library's name) cannot stand in for what this code itself imports.
    "sys.path.append(os.getcwd())\n"
    "r = json.loads(sys.argv[1])\n"
    "f = getattr(importlib.import_module(r['module']), r['function'])\n"
    "sys.stdout.write(json.dumps(f(*r['args'], **r['kwargs']), allow_nan=False))\n"
)


def _python_name(_instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    # A module is dotted (``pkg.mod``), a function one identifier.
    parts = value.split(".") if attribute.name == "module" else [value]
    if not all(part.isidentifier() for part in parts):
        raise field_error(
            attribute.name, f"expected Python names (module pkg.mod, function f), got {value!r}"
        )


@attrs.frozen(kw_only=True)
class CallEntry(Record):
    """An oracle's Python call, written as data: ``module.function(*args, **kwargs)``."""

    module: NonBlank = attrs.field(validator=_python_name)
    """The module, imported from the candidate's tree (dotted)."""
    function: NonBlank = attrs.field(validator=_python_name)
    """The function's name in the module."""
    args: tuple[JsonValue, ...] = ()
    """Positional arguments (JSON)."""
    kwargs: FrozenMap[JsonValue] = attrs.field(factory=FrozenMap)
    """Keyword arguments (JSON)."""


@attrs.frozen(kw_only=True)
class OracleEntry(Record):
    """A check's ``oracle``: a command or a call whose stdout is compared with a file."""

    expected: NonBlank = attrs.field(validator=relative)
    """The expected output (relative to the config; no sandbox of the run shows it)."""
    compare: Literal["json", "bytes"] = "json"
    """JSON by value and type, or exact bytes."""
    command: Omissible[tuple[str, ...]] = attrs.field(default=None, validator=argv)
    """The command whose stdout is compared (exactly one of command and call)."""
    call: Omissible[CallEntry] = None
    """The call whose return value is compared, as JSON."""

    def __attrs_post_init__(self) -> None:
        if (self.command is None) == (self.call is None):
            raise field_error("command", "an oracle has exactly one of command or call")


@attrs.frozen(kw_only=True)
class OracleSpec:
    """What an oracle check compares its stdout with (held by the verifier only)."""

    compare: Literal["bytes", "json"]
    """Exact bytes, or JSON by value and type."""
    expected_locator: str
    """The expected file, as written in the config (relative to its folder)."""
    expected: bytes = attrs.field(repr=False)
    """The expected output (never passed to a sandbox)."""
    expected_path: Path | None = None
    """Where the expected file lies on the host (resolved), for `shown_by`."""

    def describe(self) -> dict[str, object]:
        """What the verifier policy digest covers (the expected bytes by digest)."""
        return {
            "oracle": {
                "compare": self.compare,
                "expected": self.expected_locator,
                "expected_digest": sha256_bytes(self.expected),
            }
        }


class _Unreadable(Exception):
    pass


def _refuse_constant(name: str) -> object:
    raise _Unreadable(name)


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Unreadable("duplicate key")
    return dict(pairs)


def parse_json_output(data: bytes) -> tuple[bool, object]:
    """``(True, value)`` for one strict JSON document, ``(False, None)`` otherwise."""
    try:
        text = data.decode("utf-8")
        return True, json.loads(text, object_pairs_hook=_unique, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError, _Unreadable):
        return False, None


def json_same(left: object, right: object) -> bool:
    """Equal by value and type (``1`` is not ``1.0`` is not ``true``), recursively."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_same(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            json_same(a, b) for a, b in zip(left, right, strict=True)
        )
    return left == right


def judge_oracle(
    spec: OracleSpec, output: bytes | None, exit_code: int | None
) -> tuple[CheckStatus, CheckReason | None]:
    """The verdict on one oracle run's stdout (None: larger than `MAX_ORACLE_BYTES`)."""
    if exit_code != 0:
        return CheckStatus.FAILED, CheckReason.NONZERO_EXIT
    if output is None:
        return CheckStatus.FAILED, CheckReason.ORACLE_OUTPUT_UNREADABLE
    if spec.compare == "bytes":
        same = output == spec.expected
    else:
        readable, value = parse_json_output(output)
        if not readable:
            return CheckStatus.FAILED, CheckReason.ORACLE_OUTPUT_UNREADABLE
        # The expected file parsed when the config loaded.
        same = json_same(value, parse_json_output(spec.expected)[1])
    if not same:
        return CheckStatus.FAILED, CheckReason.ORACLE_MISMATCH
    return CheckStatus.PASSED, None


def _shown_folders(programs: Iterable[str], baseline: Path | None) -> list[Path]:
    """Host folders a namespace sandbox of these programs shows (`kernel.effects.sandbox`
    binds the folder of an absolute program, its Python prefix for a ``bin`` folder, the
    interpreter's prefixes, the kernel package and the system folders)."""
    folders = [Path(p) for p in (*SYSTEM_BINDS, "/etc", sys.prefix, sys.base_prefix)]
    folders.append(Path(__file__).resolve().parents[2])
    if baseline is not None:
        folders.append(baseline)
    for program in programs:
        if program.startswith("/"):
            for folder in {os.path.dirname(program), os.path.dirname(os.path.realpath(program))}:
                path = Path(folder).resolve()
                folders.append(path.parent if path.name == "bin" else path)
    return [f.resolve() for f in folders]


def shown_by(
    specs: Iterable[OracleSpec], programs: Iterable[str], baseline: Path | None
) -> tuple[OracleSpec, Path] | None:
    """An oracle whose expected file a sandbox of ``programs`` (or the ``baseline`` tree)
    would show, and the folder that shows it; None when every expected file is hidden.

    Under ``copy`` isolation a sandbox sees the whole host: the evidence is then below
    ``overlay`` and marked so (ADR-0004 §1b); this check is about namespace sandboxes.
    """
    folders = _shown_folders(programs, baseline)
    for spec in specs:
        if spec.expected_path is None:
            continue
        hit = next((f for f in folders if spec.expected_path.is_relative_to(f)), None)
        if hit is not None:
            return spec, hit
    return None


ORACLES_KEY: Final = ("oracle-expected",)
"""`ConfigSource.cache` key of the verifier's oracle specs: the workers, read after the
verifier, are checked against them (`refuse_shown_expected`)."""


def refuse_shown_expected(
    source: ConfigSource,
    oracles: tuple[OracleSpec, ...],
    programs: list[str],
    baseline: Path | None,
    where: str,
) -> None:
    """Refuse a config whose sandboxes would show an oracle's expected output.

    Raises:
        ConfigError: naming the expected file and the folder that shows it.
    """
    shown = shown_by(oracles, programs, baseline)
    if shown is not None:
        spec, folder = shown
        raise source.error(
            where,
            f"the oracle's expected file {spec.expected_locator!r} lies under {folder}, which "
            "a sandbox of this run shows; keep expected outputs in a folder of their own",
        )


def required_trust(
    source: ConfigSource,
    value: TrustLevel | tuple[TrustLevel, ...],
    where: str,
    checks: list[tuple[bool, TrustLevel]],
) -> tuple[TrustLevel, ...]:
    """The verifier's ``require_trust`` (a trust level or a list of them): each must be
    the trust of a required check (``checks``: each check's required flag and trust), so
    no candidate passes without such a verdict.

    Raises:
        ConfigError: no required check has one of the levels.
    """
    levels = (value,) if isinstance(value, TrustLevel) else value
    for level in levels:
        if not any(required and trust is level for required, trust in checks):
            raise source.error(f"{where}.require_trust", f"no required check has trust {level!s}")
    return tuple(sorted(set(levels)))


def _call_argv(call: CallEntry, python: str) -> list[list[str]]:
    request = {
        "module": call.module,
        "function": call.function,
        "args": plain_json(call.args),
        "kwargs": plain_json(call.kwargs),
    }
    # Not an identity: the request as the sandbox reads it (the record holds no float).
    encoded = json.dumps(request, sort_keys=True, allow_nan=False, ensure_ascii=False)
    return [
        [python, "-I", "-c", _CALL_CODE, encoded],
        [python, "-I", "-c", CALL_LOCATOR, encoded],
    ]


def parse_oracle(
    source: ConfigSource, oracle: OracleEntry, python: str, at: str
) -> tuple[OracleSpec, list[str], list[str]]:
    """The oracle of a check entry: its spec, the command to run and the command to record.

    Raises:
        ConfigError: an expected file that is missing, unreadable, too large or
            (``json``) not one strict JSON document.
    """
    where = f"{at}.oracle"
    locator = oracle.expected
    path = source.reads(source.base_dir / locator)
    try:
        expected = read_input(path, what="oracle expected output")
    except (EffectError, ConfigError) as e:
        raise source.error(f"{where}.expected", str(e)) from e
    if expected is None or len(expected) > MAX_ORACLE_BYTES:
        raise source.error(f"{where}.expected", f"larger than {MAX_ORACLE_BYTES} bytes")
    if oracle.compare == "json" and not parse_json_output(expected)[0]:
        raise source.error(f"{where}.expected", "not one strict JSON document")
    spec = OracleSpec(
        compare=oracle.compare,
        expected_locator=locator,
        expected=expected,
        expected_path=path.resolve(),
    )
    if oracle.call is not None:
        run, recorded = _call_argv(oracle.call, python)
        return spec, run, recorded
    argv = list(oracle.command or ())
    return spec, argv, argv
