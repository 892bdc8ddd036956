"""Tests for `kernel decision record|verify` on the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kernel.effects.cli import main
from kernel.effects.commands import decision as decision_cmd

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch project with a generated run record and report under results/demo."""
    shutil.copytree(ROOT / "fixtures" / "orchestration", tmp_path / "orchestration")
    monkeypatch.chdir(tmp_path)
    code = main(
        ["report", "generate", "--config", "orchestration/two-attempt-good-vs-bad.json",
         "--run-output", "results/demo/run.json", "--report-json", "results/demo/evidence.json",
         "--report-markdown", "results/demo/evidence.md"]
    )  # fmt: skip
    assert code == 0
    return tmp_path


def _record(*extra: str, report: str = "results/demo/evidence.json") -> int:
    return main(
        ["decision", "record", "--evidence-report", report,
         "--output", "results/demo/decision.json", "--decision-id", "demo.decision.001",
         "--rationale", "attempt-001 passed", "--decider-id", "reviewer-1", *extra]
    )  # fmt: skip


def _verify(report: str = "results/demo/evidence.json") -> int:
    return main(
        ["decision", "verify", "--decision-record", "results/demo/decision.json",
         "--evidence-report", report]
    )  # fmt: skip


def test_record_and_verify(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decision is recorded (default clock from effects), validates, and verifies."""
    monkeypatch.setattr(decision_cmd, "CLOCK", lambda: "2026-03-04T05:06:07Z")
    assert _record("--decision", "accept", "--selected-attempt-id", "attempt-001",
                   "--run-record", "results/demo/run.json") == 0  # fmt: skip
    document: dict[str, Any] = json.loads((work / "results/demo/decision.json").read_text())
    schema = json.loads((ROOT / "src/kernel/schemas/human-decision-record.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(document)
    assert document["decided_at"] == "2026-03-04T05:06:07Z"
    assert _verify() == 0


def test_default_clock_is_rfc3339_utc() -> None:
    """The effects clock yields second-precision RFC 3339 UTC."""
    from kernel.decide.decision import rfc3339_utc_problem

    assert rfc3339_utc_problem(decision_cmd.utc_now()) is None


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (
            ("--decision", "accept_candidate", "--selected-attempt-id", "attempt-001"),
            "report_vocabulary",
        ),
        (("--decision", "accept", "--selected-attempt-id", "attempt-404"), "unknown_attempt"),
        (("--decision", "reject", "--decided-at", "yesterday"), "bad_decided_at"),
        (("--decision", "reject", "--decider-type", "robot"), "unknown_decider_type"),
    ],
)
def test_refusals_exit_1_and_write_nothing(
    args: tuple[str, ...], code: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A refused decision exits 1, prints its reason code, writes no file."""
    capsys.readouterr()
    assert _record(*args) == 1
    assert code in capsys.readouterr().out
    assert not (work / "results/demo/decision.json").exists()


def test_forged_report_file_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A hand-edited report (relabelled supported, counts adjusted) cannot be decided on."""
    path = work / "results/demo/evidence.json"
    document = json.loads(path.read_text())
    document["attempts"][1]["evidence_state"] = "supported"
    document["summary"]["supported"] = 2
    document["summary"]["rejected"] = 0
    (work / "results/forged.json").write_text(json.dumps(document))
    capsys.readouterr()
    assert _record("--decision", "accept", "--selected-attempt-id", "attempt-002",
                   report="results/forged.json") == 1  # fmt: skip
    assert "report_inconsistent" in capsys.readouterr().out
    assert not (work / "results/demo/decision.json").exists()


def test_report_not_of_the_run_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With --run-record, a report that is not exactly that run's report is refused."""
    assert main(
        ["report", "generate", "--config", "orchestration/two-attempt-worker-failure.json",
         "--run-output", "results/other/run.json", "--report-json", "results/other/evidence.json",
         "--report-markdown", "results/other/evidence.md"]
    ) == 0  # fmt: skip
    capsys.readouterr()
    assert _record("--decision", "reject", "--run-record", "results/other/run.json") == 1
    assert "source_mismatch" in capsys.readouterr().out


def test_verify_fails_closed_on_edited_report(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Editing the report file after the decision makes verify exit 1."""
    assert _record("--decision", "reject", "--decided-at", "2026-01-01T00:00:00Z") == 0
    path = work / "results/demo/evidence.json"
    document = json.loads(path.read_text())
    document["orchestrator"] = "someone-else/1"
    path.write_text(json.dumps(document))
    capsys.readouterr()
    assert _verify() == 1
    assert "report_digest_mismatch" in capsys.readouterr().out


@pytest.mark.parametrize("content", [b"", b"{}", b'{"kind": 1}', b"null"])
def test_malformed_decision_record_exit_2(
    content: bytes, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed decision record is one error line and exit 2."""
    (work / "results/demo/decision.json").write_bytes(content)
    capsys.readouterr()
    assert _verify() == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "decision.json" in err


def test_decision_output_may_not_overwrite_the_report(work: Path) -> None:
    """--output naming the evidence report is refused (exit 2), the report untouched."""
    before = (work / "results/demo/evidence.json").read_bytes()
    code = main(
        ["decision", "record", "--evidence-report", "results/demo/evidence.json",
         "--output", "results/demo/evidence.json", "--decision-id", "d", "--decision", "reject",
         "--rationale", "r", "--decider-id", "x", "--decided-at", "2026-01-01T00:00:00Z"]
    )  # fmt: skip
    assert code == 2
    assert (work / "results/demo/evidence.json").read_bytes() == before


def test_a_decision_older_than_the_report_beside_it_is_flagged_stale(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regenerating the report beside a decision on an earlier report warns that the
    decision is stale (naming both digests), and `decision verify` says "stale"."""
    assert _record("--decision", "escalate", "--decided-at", "2026-01-01T00:00:00Z") == 0
    assert _verify() == 0
    decided_on = json.loads((work / "results/demo/decision.json").read_text())
    # A different run written into the same folder: the report beside it changes.
    config = work / "orchestration/two-attempt-good-vs-bad.json"
    document = json.loads(config.read_text())
    document["attempts"] = document["attempts"][:1]
    config.write_text(json.dumps(document))
    capsys.readouterr()
    assert main(
        ["report", "generate", "--config", str(config),
         "--run-output", "results/demo/run.json", "--report-json", "results/demo/evidence.json",
         "--report-markdown", "results/demo/evidence.md"]
    ) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "decision.json is stale" in err
    assert decided_on["evidence_report"]["digest"] in err
    assert _verify() == 1
    out = capsys.readouterr().out
    assert "stale:" in out
    assert "report_digest_mismatch" in out


def test_a_current_decision_is_not_flagged(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Re-rendering the same report beside its decision says nothing about staleness;
    files that are not decision records are ignored."""
    assert _record("--decision", "escalate", "--decided-at", "2026-01-01T00:00:00Z") == 0
    (work / "results/demo/other.decision.json").write_text("not json")
    capsys.readouterr()
    assert main(
        ["report", "render", "--run-record", "results/demo/run.json",
         "--report-json", "results/demo/evidence.json",
         "--report-markdown", "results/demo/evidence.md"]
    ) == 0  # fmt: skip
    assert "stale" not in capsys.readouterr().err


IDKMESH = ROOT / "fixtures" / "idkmesh"


def _verify_idkmesh(report: Path, *extra: str) -> int:
    return main(
        ["decision", "verify", "--decision-record", str(IDKMESH / "demo.decision.json"),
         "--evidence-report", str(report), *extra]
    )  # fmt: skip


def test_verify_an_idkmesh_decision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An IDKMesh user verifies IDKMesh's decision on IDKMesh's report with `kernel`
    (and against the run record it reports on); an edited copy is stale, exit 1."""
    assert _verify_idkmesh(IDKMESH / "demo.evidence.json") == 0
    run = ["--run-record", str(IDKMESH / "demo.run.json")]
    assert _verify_idkmesh(IDKMESH / "demo.evidence.json", *run) == 0
    assert "verified: IDKMesh decision" in capsys.readouterr().out
    edited = json.loads((IDKMESH / "demo.evidence.json").read_text())
    edited["warnings"].append("edited")
    (tmp_path / "r.json").write_text(json.dumps(edited))
    assert _verify_idkmesh(tmp_path / "r.json") == 1
    out = capsys.readouterr().out
    assert "stale:" in out
    assert "report_digest_mismatch" in out


def test_verify_idkmesh_refuses_a_document_of_another_kind(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A run record passed as the report is refused by name and version: exit 2, one line."""
    assert _verify_idkmesh(IDKMESH / "demo.run.json") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "'idkmesh-two-attempt-run' schema_version '0.1'" in err


def test_decider_display_name_is_recorded(work: Path) -> None:
    """--decider-display-name (as IDKMesh has it) is kept in the record and its id."""
    assert _record("--decision", "escalate", "--decider-display-name", "Reviewer One") == 0
    document = json.loads((work / "results/demo/decision.json").read_text())
    assert document["decider"]["display_name"] == "Reviewer One"
    assert _verify() == 0


def test_decision_record_without_display_name_still_verifies(work: Path) -> None:
    """A decision record written before display_name existed reads as null."""
    assert _record("--decision", "escalate") == 0
    path = work / "results/demo/decision.json"
    document = json.loads(path.read_text())
    assert document["decider"].pop("display_name") is None
    path.write_text(json.dumps(document))
    assert _verify() == 0


def test_decision_help_lists_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    """--decision lists accept, reject and escalate in the help."""
    with pytest.raises(SystemExit):
        main(["decision", "record", "--help"])
    out = capsys.readouterr().out
    assert "{accept,reject,escalate}" in out
    assert "--decider-display-name" in out
