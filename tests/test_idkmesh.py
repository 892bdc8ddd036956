"""Tests for kernel.importers.idkmesh: IDKMesh v0.1 run records report with IDKMesh's states."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kernel.errors import RecordError
from kernel.evidence_report import RunEvidenceReport, build_evidence_report
from kernel.importers.idkmesh import parse_prefixed_digest, run_record_from_idkmesh

IDKMESH = Path(__file__).resolve().parents[1] / "fixtures" / "idkmesh"


def _load(name: str) -> Any:
    return json.loads((IDKMESH / name).read_text())


def _report(document: Any) -> RunEvidenceReport:
    report = build_evidence_report(run_record_from_idkmesh(document))
    assert isinstance(report, RunEvidenceReport)
    return report


def test_same_states_and_counts_as_idkmesh() -> None:
    """The demo run reports exactly the states and counts of IDKMesh's own report."""
    theirs = _load("demo.evidence.json")
    ours = _report(_load("demo.run.json"))
    assert [a.evidence_state.value for a in ours.attempts] == [
        a["evidence_state"] for a in theirs["attempts"]
    ]
    assert [a.state.value for a in ours.attempts] == [a["state"] for a in theirs["attempts"]]
    for key in ("attempt_count", "supported", "rejected", "inconclusive", "control_errors"):
        assert getattr(ours.summary, key) == theirs["summary"][key], key
    assert ours.summary.verification_disagreement is theirs["summary"]["verification_disagreement"]
    assert ours.summary.control_failure_present is theirs["summary"]["control_failure_present"]


def test_imported_from_is_idkmesh_source_digest() -> None:
    """imported_from.digest equals IDKMesh's own source_run_digest of the same document."""
    ours = _report(_load("demo.run.json"))
    theirs = _load("demo.evidence.json")
    assert ours.imported_from is not None
    assert "sha256:" + ours.imported_from.digest == theirs["source_run_digest"]
    assert "sha256:" + ours.source_config_digest == theirs["source_config_digest"]


def test_failure_run_keeps_the_worker_error() -> None:
    """The failure run: one supported, one worker_error, control failure present."""
    report = _report(_load("failure.run.json"))
    assert [a.evidence_state.value for a in report.attempts] == ["supported", "worker_error"]
    assert report.summary.control_errors == 1


def test_absolute_paths_in_errors_are_redacted() -> None:
    """An IDKMesh error string with an absolute path is kept, path redacted."""
    document = _load("failure.run.json")
    document["attempts"][1]["error"] = "could not read /home/alice/idkmesh/x.json"
    attempt = run_record_from_idkmesh(document).attempts[1]
    assert attempt.error is not None
    assert attempt.error.message == "could not read <path>"


@pytest.mark.parametrize(
    "value",
    [
        "sha256:" + "A" * 64,
        "sha256:" + "a" * 63,
        "a" * 64,
        "sha512:" + "a" * 64,
        "sha256:" + "a" * 64 + "\n",
        7,
    ],
)
def test_digests_are_parsed_strictly(value: object) -> None:
    """Only exactly sha256: + 64 lowercase hex is admitted."""
    with pytest.raises(RecordError) as info:
        parse_prefixed_digest(value, "$.x")
    assert info.value.path == "$.x"


def _edit(path: list[Any], value: Any) -> Any:
    document = copy.deepcopy(_load("demo.run.json"))
    target = document
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return document


BAD = {
    "not-an-object": ([], "$"),
    "loose-digest": (_edit(["config_digest"], "sha256:XYZ"), "$.config_digest"),
    "bad-state": (_edit(["attempts", 0, "state"], "great"), "$.attempts[0].state"),
    "missing-field": (
        _edit(["attempts", 1, "verification"], KeyError),
        "$.attempts[1].verification",
    ),
    "unknown-field": (_edit(["attempts", 0, "score"], 1), "$.attempts[0].score"),
    "authority": (_edit(["authority", "merge"], True), "$.authority.merge"),
    "order": (_edit(["attempts", 1, "order"], 5), "$.attempts[1].order"),
    "attempt-order": (_edit(["attempt_order"], ["attempt-002", "attempt-001"]), "$.attempt_order"),
    "shape": (_edit(["attempts", 0, "verification"], None), "$.attempts[0].state"),
    "float": (
        _edit(["attempts", 0, "result_manifest", "attempt"], 1.0),
        "$.attempts[0].result_manifest.attempt",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_malformed_idkmesh_runs_are_refused_with_a_path(name: str) -> None:
    """Malformed input is a RecordError naming the path, never a traceback."""
    document, path = BAD[name]
    with pytest.raises(RecordError) as info:
        run_record_from_idkmesh(document)
    assert info.value.path == path


def test_drifted_idkmesh_run_is_refused_by_the_report() -> None:
    """IDKMesh's binding rule holds: verification/manifest drift refuses the report."""
    document = _edit(
        ["attempts", 0, "verification", "result_manifest_digest"], "sha256:" + "0" * 64
    )
    outcome = build_evidence_report(run_record_from_idkmesh(document))
    assert not isinstance(outcome, RunEvidenceReport)
