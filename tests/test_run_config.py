"""The run config as records: the configs that ship parse, the schema agrees with the
parser, open entries and literal-or-record fields read and write as documented."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

import attrs
import jsonschema
import pytest

from kernel.effects.adapters import builtin_registry
from kernel.effects.adapters.command import CommandVerifierEntry
from kernel.effects.adapters.command_worker import CommandWorkerEntry
from kernel.effects.adapters.fixture import FixtureFailureEntry, FixtureFailureWorker
from kernel.effects.cli import main
from kernel.effects.orchestrate import load_config
from kernel.effects.run_config import (
    CONFIG_KIND,
    AttemptEntry,
    CalibrationEntry,
    IsolationEntry,
    RunConfig,
    VerifierEntry,
    filled,
)
from kernel.effects.sandbox import Limits
from kernel.effects.schemas import load_schema
from kernel.errors import ConfigError, RecordError
from kernel.records.codec import Record, nested_form
from kernel.run.record import DeclaredReplay, TrustLevel
from kernel.run.verification import Isolation

ROOT = Path(__file__).resolve().parents[1]


def _shipped_configs() -> list[Path]:
    found = []
    for path in sorted((ROOT / "fixtures").rglob("*.json")):
        try:
            document = json.loads(path.read_text("utf-8"))
        except ValueError:  # fixtures of broken documents
            continue
        if type(document) is dict and document.get("kind") == CONFIG_KIND:
            found.append(path)
    return found


def _minimal() -> dict[str, Any]:
    return {
        "kind": CONFIG_KIND,
        "schema_version": "1",
        "run_id": "r",
        "work_unit": "unit.json",
        "verifier": {"adapter": "fixture-policy", "policy": "p.json"},
        "attempts": [{"attempt_id": "a", "adapter": "fixture-failure", "failure": "no"}],
    }


def _read(document: dict[str, Any]) -> RunConfig:
    return RunConfig.from_dict(filled(RunConfig, document))


@pytest.mark.parametrize("path", _shipped_configs(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_shipped_config_parses_and_fits_the_schema(path: Path) -> None:
    """The fixtures' and the demo's configs load as records and the `config` schema
    admits them as written (left-out keys included)."""
    document = json.loads(path.read_text("utf-8"))
    config = _read(document)
    assert config.attempts
    jsonschema.Draft202012Validator(load_schema("config")).validate(document)


def test_the_shipped_configs_include_the_demo() -> None:
    """The parametrized test above reaches the demo's config, not only the fixtures'."""
    assert ROOT / "fixtures" / "demo" / "config.json" in _shipped_configs()


def test_left_out_keys_take_their_defaults_and_the_input_is_not_mutated() -> None:
    """`filled` writes in every default (recursively) and leaves its input alone."""
    document = {**_minimal(), "limits": {"processes": 7}, "isolation": {}}
    before = json.dumps(document, sort_keys=True)
    config = _read(document)
    assert json.dumps(document, sort_keys=True) == before
    assert config.replay is DeclaredReplay.DETERMINISTIC
    assert config.costly is False
    assert config.calibration is None
    assert config.limits == attrs.evolve(Limits(), processes=7)
    assert config.isolation == IsolationEntry()
    assert config.verifier == VerifierEntry(adapter="fixture-policy")
    assert config.attempts == (AttemptEntry(attempt_id="a", adapter="fixture-failure"),)


@pytest.mark.parametrize(
    ("edit", "path", "reason"),
    [
        (lambda c: c.update(attempts=[]), "attempts", "expected a non-empty array"),
        (
            lambda c: c["attempts"].append({"attempt_id": "a", "adapter": "x"}),
            "attempts[1].attempt_id",
            "duplicate attempt id 'a'",
        ),
        (lambda c: c.update(work_unit="../u.json"), "work_unit", "relative path without '..'"),
        (lambda c: c.update(work_unit="/u.json"), "work_unit", "relative path without '..'"),
        (lambda c: c.update(work_unit="a\\u.json"), "work_unit", "relative path without '..'"),
        (
            lambda c: c.update(calibration={"reference_patch": "../p"}),
            "calibration.reference_patch",
            "relative path without '..'",
        ),
        (lambda c: c.update(calibration=True), "calibration", "expected an object or one of"),
        (lambda c: c["attempts"][0].pop("attempt_id"), "attempts[0].attempt_id", "missing"),
        (lambda c: c["verifier"].update(adapter=" "), "verifier.adapter", "non-blank"),
        (lambda c: c.update(isolation={"minimum": "chroot"}), "isolation.minimum", "one of"),
        (lambda c: c.update(limits={"cpu_seconds": 0}), "limits.cpu_seconds", ">= 1"),
        (lambda c: c.update(limits=None), "limits", "expected an object"),
        (lambda c: c.update(replay="maybe"), "replay", "one of"),
    ],
)
def test_bad_entries_are_refused_at_their_path(edit: Any, path: str, reason: str) -> None:
    """Each bad entry is a RecordError at its document path saying what was expected;
    the schema refuses the same document."""
    document = _minimal()
    edit(document)
    with pytest.raises(RecordError) as info:
        _read(document)
    assert info.value.path == path
    assert reason in info.value.reason
    schema_refuses = not jsonschema.Draft202012Validator(load_schema("config")).is_valid(document)
    # The schema states types and shapes; a rule between values (unique attempt ids,
    # a path's confinement) is the record's alone.
    assert schema_refuses or "relative path" in reason or "duplicate" in reason


def test_open_entries_ignore_the_adapters_keys_but_not_their_own() -> None:
    """An adapter entry carries keys the kernel does not read (they are the adapter's);
    the keys the kernel reads are still required and checked."""
    entry = AttemptEntry.from_dict({"attempt_id": "a", "adapter": "x", "command": ["true"]})
    assert entry == AttemptEntry(attempt_id="a", adapter="x")
    assert AttemptEntry.from_dict(entry.to_dict()) == entry
    with pytest.raises(RecordError, match="adapter: missing field"):
        AttemptEntry.from_dict({"attempt_id": "a", "command": ["true"]})


def test_the_config_schema_is_closed_over_the_built_in_adapters_entries() -> None:
    """No entry of the config schema admits unknown keys: an attempt and the verifier
    are the tagged union (on ``adapter``) of the built-in adapters' entry records."""
    schema = load_schema("config")
    assert '"additionalProperties":true' not in json.dumps(schema, separators=(",", ":"))
    registry = builtin_registry()
    attempts = schema["properties"]["attempts"]["items"]
    verifier = schema["properties"]["verifier"]
    assert attempts["discriminator"] == verifier["discriminator"] == "adapter"
    assert [r["$ref"].rpartition("/")[2] for r in attempts["oneOf"]] == [
        cls.__name__ for cls in registry.entries("worker")
    ]
    assert [r["$ref"].rpartition("/")[2] for r in verifier["oneOf"]] == [
        cls.__name__ for cls in registry.entries("verifier")
    ]
    assert "AttemptEntry" not in schema["$defs"]


def test_a_registered_entry_must_name_its_own_kind() -> None:
    """The entry record a kind is registered with is tagged by that kind."""
    registry = builtin_registry()
    with pytest.raises(TypeError, match="adapter: Literal\\['other'\\]"):
        registry.add_worker(
            "other",
            lambda entry, source: FixtureFailureWorker(failure="x"),
            entry=FixtureFailureEntry,
        )
    with pytest.raises(TypeError, match="adapter: Literal"):
        registry.add_verifier("other", lambda entry, source: (None, ""), entry=IsolationEntry)  # type: ignore[arg-type, return-value]
    registry.add_worker("plain", lambda entry, source: FixtureFailureWorker(failure="x"))
    assert registry.worker("plain") is not None
    assert FixtureFailureEntry not in registry.entries("verifier")


DEMO_VERIFIER_EDITS: Final[dict[str, tuple[Callable[[dict[str, Any]], object], str]]] = {
    "unknown key of a command attempt": (
        lambda c: c["attempts"][0].update(retries=2),
        "attempts['attempt-1'].retries: unknown field",
    ),
    "unknown key of a check": (
        lambda c: c["verifier"]["checks"][0].update(shell=True),
        "$.verifier.checks[0].shell: unknown field",
    ),
    "unknown key of declared tests": (
        lambda c: c["verifier"]["checks"][0]["tests"].update(flaky=[]),
        "$.verifier.checks[0].tests.flaky: unknown field",
    ),
    "env value not a string": (
        lambda c: c["verifier"].update(env={"X": 1}),
        "$.verifier.env['X']: expected string, got integer",
    ),
    "env name with =": (
        lambda c: c["attempts"][0].update(env={"A=B": "1"}),
        "attempts['attempt-1'].env: expected variable names without '=', got 'A=B'",
    ),
    "timeout zero": (
        lambda c: c["attempts"][0].update(timeout_s=0),
        "attempts['attempt-1'].timeout_s: expected an integer >= 1",
    ),
    "network not a bool": (
        lambda c: c["verifier"]["checks"][0].update(network="yes"),
        "$.verifier.checks[0].network: expected boolean, got string",
    ),
    "empty command": (
        lambda c: c["attempts"][0].update(command=[]),
        "attempts['attempt-1'].command: expected a non-empty array of non-empty strings",
    ),
    "null oracle": (
        lambda c: c["verifier"]["checks"][0].update(oracle=None),
        "$.verifier.checks[0].oracle: expected an object, got null",
    ),
    "environment with both forms": (
        lambda c: c["verifier"]["checks"][0].update(
            environment={"requirements": "r.txt", "digest": "0" * 64}
        ),
        "$.verifier.checks[0].environment.requirements: an environment has exactly one of",
    ),
    "python with a slash": (
        lambda c: c["verifier"]["checks"][0].update(python="bin/python"),
        "$.verifier.checks[0].python: expected an interpreter name",
    ),
    "call kwargs not an object": (
        lambda c: c["verifier"]["checks"].append(
            {
                "id": "c",
                "oracle": {
                    "expected": "e.json",
                    "call": {"module": "m", "function": "f", "kwargs": []},
                },
            }
        ),
        "$.verifier.checks[2].oracle.call.kwargs: expected an object, got array",
    ),
    "actor type unknown": (
        lambda c: c["attempts"][0].update(actor_type="robot"),
        "attempts['attempt-1'].actor_type: expected one of",
    ),
    "a check of two kinds": (
        lambda c: c["verifier"]["checks"][0].update(command=["true"]),
        "$.verifier.checks[0].command: a check has exactly one of command, tests or oracle",
    ),
    "a check of no kind": (
        lambda c: c["verifier"]["checks"].append({"id": "c"}),
        "$.verifier.checks[2].command: a check has exactly one of command, tests or oracle",
    ),
    "an interpreter for a command": (
        lambda c: c["verifier"]["checks"].append(
            {"id": "c", "command": ["true"], "python": "python3"}
        ),
        "$.verifier.checks[2].python: only a tests check names an interpreter",
    ),
    "no checks": (
        lambda c: c["verifier"].update(checks=[]),
        "$.verifier.checks: no checks: an empty verifier is not verification",
    ),
    "a check id twice": (
        lambda c: c["verifier"]["checks"].append(
            {"id": c["verifier"]["checks"][0]["id"], "command": ["true"]}
        ),
        "$.verifier.checks[2].id: duplicate or reserved check id",
    ),
    "a reserved check id": (
        lambda c: c["verifier"]["checks"].append({"id": "protected-paths", "command": ["true"]}),
        "$.verifier.checks[2].id: duplicate or reserved check id 'protected-paths'",
    ),
    "declared tests naming no test": (
        lambda c: c["verifier"]["checks"][0].update(tests={"fail_to_pass": []}),
        "$.verifier.checks[0].tests: no tests: name at least one test that must pass",
    ),
    "a declared test named twice": (
        lambda c: c["verifier"]["checks"][0]["tests"]["pass_to_pass"].append(
            c["verifier"]["checks"][0]["tests"]["fail_to_pass"][0]
        ),
        "$.verifier.checks[0].tests: a test is named twice",
    ),
    "a baseline that is a file": (
        lambda c: c["verifier"].update(baseline="work-unit.json"),
        "$.verifier.baseline: 'work-unit.json' is not a directory",
    ),
    "an absolute worker program": (
        lambda c: c["attempts"][0].update(command=["/bin/sh", "-c", "true"]),
        "attempts['attempt-1'].command[0]: must be relative to the config folder: '/bin/sh'",
    ),
    "a worker program outside the config folder": (
        lambda c: c["attempts"][0].update(command=["../workers/correct_fix.sh"]),
        "attempts['attempt-1'].command[0]: must be relative to the config folder",
    ),
    "a worker program that is not executable": (
        lambda c: c["attempts"][0].update(command=["./work-unit.json"]),
        "attempts['attempt-1'].command[0]: './work-unit.json' is not an executable file",
    ),
    "a timeout past the interchangeable integers": (
        lambda c: c["verifier"]["checks"][0].update(timeout_s=2**53),
        "$.verifier.checks[0].timeout_s: ",
    ),
}


RECORD_RULES_ONLY: Final = {
    "environment with both forms",
    "env name with =",
    "python with a slash",
    "a check of two kinds",
    "a check of no kind",
    "an interpreter for a command",
    "a check id twice",
    "a reserved check id",
    "a timeout past the interchangeable integers",
    "a baseline that is a file",
    "declared tests naming no test",
    "a declared test named twice",
    "an absolute worker program",
    "a worker program outside the config folder",
    "a worker program that is not executable",
}


@pytest.mark.parametrize("case", sorted(DEMO_VERIFIER_EDITS))
def test_the_command_adapters_read_their_entries_as_records(tmp_path: Path, case: str) -> None:
    """The command worker's and verifier's entries, their checks, declared tests,
    oracles and environments are records: a wrong key is one error naming the file, the
    path, what was expected and what was found, and the schema refuses it too."""
    edit, message = DEMO_VERIFIER_EDITS[case]
    demo = tmp_path / "demo"
    shutil.copytree(ROOT / "fixtures" / "demo", demo)
    path = demo / "config.json"
    document = json.loads(path.read_text("utf-8"))
    edit(document)
    path.write_text(json.dumps(document), "utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: {message}")
    assert "\n" not in str(info.value)
    # The schema states types and shapes; a record's own rules (validators, rules
    # between fields) are the records' alone.
    if case not in RECORD_RULES_ONLY:
        assert not jsonschema.Draft202012Validator(load_schema("config")).is_valid(document)


def test_a_literal_or_record_field_reads_writes_and_nests_both_forms() -> None:
    """``calibration`` is ``false``, an object or null: each reads back as itself, and
    the record's nested form (identity payloads) holds the JSON form."""
    for value in (False, CalibrationEntry(reference_patch="fix.patch"), None):
        config = attrs.evolve(_read(_minimal()), calibration=value)
        assert RunConfig.from_dict(config.to_dict()) == config
        expected = value.to_dict() if isinstance(value, Record) else value
        assert config.to_dict()["calibration"] == expected
        assert nested_form(config)["calibration"] == expected


@attrs.frozen(kw_only=True)
class _Literals(Record):
    """Two literal members and no record: a value is one of them, or refused."""

    mode: Literal["a"] | Literal[1]


@attrs.frozen(kw_only=True)
class _TwoRecordsAndLiteral(Record):
    """A literal beside two records: no tag can tell an object's record, refused."""

    value: IsolationEntry | CalibrationEntry | Literal[False]


def test_unions_of_literals_read_only_their_values() -> None:
    """A union of literals alone admits its values of the same type, nothing else."""
    assert _Literals.from_dict({"mode": 1}).mode == 1
    assert _Literals.from_dict({"mode": "a"}).mode == "a"
    for wrong in ({"a": 1}, 2, "1", True):
        with pytest.raises(RecordError, match="mode: expected one of"):
            _Literals.from_dict({"mode": wrong})


def test_a_union_of_literals_and_several_records_is_a_declaration_error() -> None:
    """Literals beside more than one record cannot be read: refused when first used."""
    with pytest.raises(TypeError, match="at most one record"):
        _TwoRecordsAndLiteral.from_dict({"value": False})


def test_kernel_schemas_show_config(capsys: pytest.CaptureFixture[str]) -> None:
    """`kernel schemas show config` prints the run config's schema."""
    assert main(["schemas", "show", "config"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["$id"] == "urn:evidence-kernel:schema:config"
    assert set(schema["required"]) == {
        "kind",
        "schema_version",
        "run_id",
        "work_unit",
        "verifier",
        "attempts",
    }
    assert schema["properties"]["isolation"]["anyOf"][0] == {"$ref": "#/$defs/IsolationEntry"}
    assert Isolation.OVERLAY.value in json.dumps(schema)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda c: c["attempts"][0].update(extra=1),
            "attempts['attempt-001'].extra: unknown field",
        ),
        (
            lambda c: c["attempts"][0].update(result_manifest="../m.json"),
            "attempts['attempt-001'].result_manifest: must be a relative path without '..'",
        ),
        (
            lambda c: c["verifier"].update(policy=""),
            "verifier.policy: expected a non-blank string",
        ),
        (
            lambda c: c["attempts"].__setitem__(
                1, {"attempt_id": "attempt-002", "adapter": "fixture-failure"}
            ),
            "attempts['attempt-002'].failure: missing field",
        ),
    ],
)
def test_the_fixture_adapters_read_their_entries_as_records(
    tmp_path: Path, edit: Any, message: str
) -> None:
    """An adapter's own keys are read by its entry record: the error names the file and
    the key, and says what was expected."""
    folder = tmp_path / "f"
    shutil.copytree(ROOT / "fixtures" / "orchestration", folder)
    path = folder / "two-attempt-good-vs-bad.json"
    document = json.loads(path.read_text("utf-8"))
    edit(document)
    path.write_text(json.dumps(document), "utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: {message}")


def test_a_null_reference_patch_is_refused_not_dropped(tmp_path: Path) -> None:
    """``"reference_patch": null`` would silently calibrate without the reference run its
    author asked for: the config is refused at load, naming the key."""
    demo = tmp_path / "demo"
    shutil.copytree(ROOT / "fixtures" / "demo", demo)
    config = demo / "config.json"
    document = json.loads(config.read_text("utf-8"))
    document["calibration"] = {"reference_patch": None}
    config.write_text(json.dumps(document), "utf-8")
    with pytest.raises(
        ConfigError, match=r"calibration\.reference_patch: expected string, got null"
    ):
        load_config(config)


def test_the_command_entries_read_back_as_they_were_written() -> None:
    """The demo's verifier and attempts, an oracle call with JSON arguments and an
    environment read as records and write back as the same entries (defaults in)."""
    document = json.loads((ROOT / "fixtures" / "demo" / "config.json").read_text("utf-8"))
    call = {"module": "pkg.stats", "function": "median", "args": [[4, 1], {"k": None}]}
    document["verifier"]["checks"].append(
        {"id": "call", "oracle": {"expected": "e.json", "call": {**call, "kwargs": {"x": 1}}}}
    )
    document["verifier"]["checks"][0]["environment"] = {"requirements": "r.txt"}
    verifier = CommandVerifierEntry.from_dict(filled(CommandVerifierEntry, document["verifier"]))
    assert CommandVerifierEntry.from_dict(verifier.to_dict()) == verifier
    written = verifier.to_dict()["checks"][2]["oracle"]["call"]
    assert written == {**call, "kwargs": {"x": 1}}
    assert verifier.require_trust is TrustLevel.ORACLE
    for attempt in document["attempts"]:
        entry = CommandWorkerEntry.from_dict(filled(CommandWorkerEntry, attempt))
        assert CommandWorkerEntry.from_dict(entry.to_dict()) == entry
        assert hash(entry) == hash(CommandWorkerEntry.from_dict(entry.to_dict()))
