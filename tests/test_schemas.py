"""Tests for the generated JSON Schemas and their --check mode."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kernel.effects import schemas
from kernel.effects.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_committed_schemas_are_current(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m kernel.effects.schemas --check` passes on the committed schemas/."""
    assert schemas.main(["--check", "--dir", str(ROOT / "src/kernel/schemas")]) == 0
    capsys.readouterr()


def test_check_fails_when_stale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--check exits 1 when a schema is missing or edited; regeneration fixes it."""
    assert schemas.main(["--dir", str(tmp_path)]) == 0
    assert schemas.main(["--check", "--dir", str(tmp_path)]) == 0
    path = tmp_path / "run-record.schema.json"
    path.write_bytes(path.read_bytes().replace(b'"minItems":1', b'"minItems":0'))
    assert schemas.main(["--check", "--dir", str(tmp_path)]) == 1
    assert "run-record.schema.json" in capsys.readouterr().err
    (tmp_path / "work-unit.schema.json").unlink()
    assert schemas.main(["--check", "--dir", str(tmp_path)]) == 1


@pytest.mark.parametrize("name", sorted(schemas.generate()))
def test_schemas_are_valid_2020_12(name: str) -> None:
    """Every schema is a valid JSON Schema 2020-12 document."""
    schema = json.loads(schemas.generate()[name])
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False


def test_schema_refuses_what_the_records_refuse() -> None:
    """The run-record schema refuses prefixed digests, zero attempts and granted authority."""
    schema = json.loads(schemas.generate()["run-record.schema.json"])
    validator = jsonschema.Draft202012Validator(schema)
    base = {
        "kind": "kernel-run-record", "schema_version": "1", "run_id": "r", "orchestrator": "o",
        "work_unit": {"id": "w", "version": 1, "digest": "a" * 64},
        "config_digest": "b" * 64, "verifier_policy_digest": "c" * 64, "imported_from": None,
        "attempts": [{"attempt_id": "a", "order": 1, "adapter": "x", "adapter_version": None,
                      "state": "worker_error", "manifest": None, "verification": None,
                      "error": {"code": "worker_failed", "message": "m"}}],
        "authority": {"canonical_state_write": False, "git_push": False, "merge": False,
                      "automatic_candidate_selection": False},
    }  # fmt: skip
    assert validator.is_valid(base)
    for field, value in (
        ("config_digest", "sha256:" + "b" * 64),
        ("attempts", []),
        ("authority", {**base["authority"], "merge": True}),  # type: ignore[dict-item]
    ):
        assert not validator.is_valid({**base, field: value}), field
    # A baseline tree is a git object id (SHA-1 or SHA-256), as the record's own rule says.
    for tree, valid in (("a" * 40, True), ("b" * 64, True), (None, True), ("a" * 41, False),
                        ("A" * 40, False), ("tree:" + "a" * 40, False)):  # fmt: skip
        provenance: dict[str, object] = {
            "declared_replay": "deterministic",
            "inputs": [],
            "baseline_git_tree": tree,
        }
        assert validator.is_valid({**base, "provenance": provenance}) is valid, tree


def test_an_unknown_schema_name_lists_the_shipped_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`kernel schemas show NAME` of a schema that does not ship is unusable input
    (exit 2) naming every one that does."""
    assert main(["schemas", "show", "run-recrod"]) == 2
    err = capsys.readouterr().err
    assert "no schema 'run-recrod'; shipped: " in err
    assert all(name in err for name in schemas.schema_names())
