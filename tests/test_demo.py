"""End-to-end tests of the bundled demo (`fixtures/demo/`) through `kernel run`."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kernel.corroboration.commit_admission import (
    CommitReason,
    EvidenceClass,
    VerifierOutcome,
)
from kernel.corroboration.consensus import EMPTY_SHA256
from kernel.effects.cli import main
from kernel.effects.commands.run import summary_lines
from kernel.effects.pipeline import PipelineResult, run_pipeline
from kernel.effects.sandbox import scratch_root
from kernel.run.record import AttemptErrorCode, RunRecord
from kernel.run.report import EvidenceState, ReportWarning, check_evidence_report

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo"
SCHEMAS = ROOT / "src/kernel/schemas"


def visible_scratch() -> Path:
    """A scratch folder in the system temp dir (usually /tmp: sandboxes see it read-only)."""
    return Path(tempfile.mkdtemp(prefix="kernel-test-"))


@pytest.fixture(scope="module")
def demo() -> Iterator[tuple[Path, PipelineResult]]:
    """The demo copied to a scratch folder and run once for the whole module."""
    base = visible_scratch()
    try:
        shutil.copytree(DEMO, base / "demo")
        result = run_pipeline(
            base / "demo" / "config.json", base / "results" / "demo", results_root=base / "results"
        )
        yield base, result
    finally:
        shutil.rmtree(base)


def _state(result: PipelineResult, attempt_id: str) -> EvidenceState:
    return next(a.evidence_state for a in result.report.attempts if a.attempt_id == attempt_id)


def test_correct_fix_is_supported_and_verified(demo: tuple[Path, PipelineResult]) -> None:
    """The correct fix is supported by the verifier and its group is verified."""
    _, result = demo
    assert _state(result, "attempt-1") is EvidenceState.SUPPORTED
    group = next(g for g in result.admission.groups if "attempt-1" in g.attempt_ids)
    assert group.verifier is VerifierOutcome.PASSED
    assert group.evidence_class is EvidenceClass.VERIFIED
    # Two attempts produced the same bytes: one candidate group, not two votes.
    assert group.attempt_ids == ("attempt-1", "attempt-5")


def test_wrong_fix_is_rejected(demo: tuple[Path, PipelineResult]) -> None:
    """The wrong fix is rejected, and admission refuses its group (verifier_rejected)."""
    _, result = demo
    assert _state(result, "attempt-2") is EvidenceState.REJECTED
    group = next(g for g in result.admission.groups if "attempt-2" in g.attempt_ids)
    assert group.evidence_class is None
    assert group.refusal_reasons == (CommitReason.VERIFIER_REJECTED,)
    # Reruns agree byte for byte, and that changes nothing: agreement is not verification.
    assert group.rerun_consensus


def test_crash_is_a_worker_error_that_keeps_its_peers(demo: tuple[Path, PipelineResult]) -> None:
    """The crash is a worker_error with a message; every peer's evidence is still there."""
    _, result = demo
    crash = next(a for a in result.report.attempts if a.attempt_id == "attempt-3")
    assert crash.evidence_state is EvidenceState.WORKER_ERROR
    assert crash.error is not None
    assert crash.error.code is AttemptErrorCode.WORKER_FAILED
    assert "SIGSEGV" in crash.error.message
    assert [a.attempt_id for a in result.report.attempts] == [f"attempt-{i}" for i in range(1, 6)]
    assert result.report.summary.supported == 2
    assert all("attempt-3" not in g.attempt_ids for g in result.admission.groups)


def test_noop_never_carries_consensus(demo: tuple[Path, PipelineResult]) -> None:
    """The no-op's empty patch is rejected, its reruns have no consensus, it is not admitted."""
    _, result = demo
    assert _state(result, "attempt-4") is EvidenceState.REJECTED
    group = next(g for g in result.admission.groups if g.no_change)
    assert group.candidate_digest == EMPTY_SHA256
    assert not group.rerun_consensus
    assert group.evidence_class is None
    assert group.refusal_reasons == (CommitReason.NO_DRAFTS,)
    assert not result.corroborations[EMPTY_SHA256].consensus


def test_disagreement_shown_and_decision_pending(demo: tuple[Path, PipelineResult]) -> None:
    """Recommendations differ across candidates (a right and a wrong fix): the report
    says so without a red banner (no candidate was judged two ways), the decision is
    pending."""
    base, result = demo
    assert result.report.summary.verification_disagreement
    assert ReportWarning.VERIFICATION_DISAGREEMENT in result.report.warnings
    assert result.report.human_decision.status == "pending"
    assert result.report.human_decision.selected_attempt_id is None
    assert result.admission.human_decision.status == "pending"
    markdown = (base / "results/demo/evidence.md").read_text()
    assert "- **Recommendations differ across candidates:** yes" in markdown
    assert "- **Same candidate judged differently:** no" in markdown
    assert markdown.index("## Decision") < markdown.index("Evidence classes of candidate groups")
    assert "**Candidate to accept: 8e7ada4e6bdc" in markdown
    assert "- **Human integration decision:** **pending**" in markdown
    assert 'class="banner"' not in (base / "results/demo/evidence.html").read_text()


def test_replay_exact_match(demo: tuple[Path, PipelineResult]) -> None:
    """The saved run record replays exactly (mode exact, outputs compared)."""
    base, result = demo
    assert result.replay is not None
    assert result.replay.match
    assert result.replay.mode == "exact"
    assert result.replay.outputs_compared
    saved = json.loads((base / "results/demo/replay.json").read_text())
    assert saved["mode"] == "exact"
    assert saved["match"] is True
    run = json.loads((base / "results/demo/run.json").read_text())
    assert saved["saved_digest"] == RunRecord.from_dict(run).digest


def test_files_validate_and_bind(demo: tuple[Path, PipelineResult]) -> None:
    """Every JSON output validates against its schema and binds to the one before it."""
    base, result = demo
    out = base / "results/demo"
    for name, schema in (
        ("run.json", "run-record"),
        ("evidence.json", "run-evidence-report"),
        ("admission.json", "run-admission"),
        ("replay.json", "replay-check"),
    ):
        document: Any = json.loads((out / name).read_text())
        jsonschema.Draft202012Validator(
            json.loads((SCHEMAS / f"{schema}.schema.json").read_text())
        ).validate(document)
    assert isinstance(check_evidence_report(result.report, run=result.outcome.record), object)
    admission = json.loads((out / "admission.json").read_text())
    assert admission["report_digest"] == result.report.digest
    volatile = json.loads((out / "run.volatile.json").read_text())
    assert volatile["source_run_digest"] == result.outcome.record.digest
    assert all("attempt_ms" in a for a in volatile["attempts"])
    # Volatile facts never reach the compared record.
    assert "_ms" not in (out / "run.json").read_text()
    patch = (out / "patches" / f"{result.admission.groups[0].candidate_digest}.patch").read_text()
    assert patch.startswith("diff --git a/stats.py b/stats.py")


def test_record_is_portable(demo: tuple[Path, PipelineResult]) -> None:
    """No absolute path (the checkout, scratch or sandbox) is in any recorded document."""
    base, _ = demo
    for name in ("run.json", "evidence.json", "admission.json", "replay.json"):
        text = (base / "results/demo" / name).read_text()
        assert str(base) not in text
        assert "/tmp/" not in text


def test_summary_is_five_lines(demo: tuple[Path, PipelineResult]) -> None:
    """The printed summary is five lines naming counts, classes, reruns, replay, decision."""
    _, result = demo
    lines = summary_lines(result)
    assert len(lines) == 5
    assert "supported 2, rejected 2" in lines[0]
    assert "verified" in lines[1]
    assert "reruns" in lines[2]
    assert "match" in lines[3]
    assert lines[4].startswith("human decision: pending")


def test_no_sandbox_left_behind(demo: tuple[Path, PipelineResult]) -> None:
    """After the pipeline no scratch or private folder of this process remains."""
    del demo
    root = scratch_root()
    if root.exists():
        assert not [p for p in root.iterdir() if p.name.split("-")[1:2] == [str(os.getpid())]]


def test_kernel_run_cli_prints_files_and_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kernel run` on the checkout's demo prints every file's path and the summary; exit 0."""
    monkeypatch.chdir(tmp_path)
    config = str(DEMO / "config.json")
    code = main(["run", "--config", config, "--output-dir", "results/demo", "--reruns", "1"])
    out = capsys.readouterr().out
    assert code == 0
    for name in ("run.json", "evidence.html", "admission.json", "replay.json"):
        assert str(tmp_path / "results/demo" / name) in out
    assert "human decision: pending" in out


def test_each_declared_test_outcome_is_in_the_run_record(
    demo: tuple[Path, PipelineResult],
) -> None:
    """run.json keeps each declared test's outcome per check (SWE-bench's per-test
    report): the correct fix passes all four, the no-op fails FAIL_TO_PASS only."""
    base, _ = demo
    run = RunRecord.from_dict(json.loads((base / "results/demo/run.json").read_text()))

    def outcomes(attempt_id: str) -> list[tuple[str, str, str]]:
        attempt = next(a for a in run.attempts if a.attempt_id == attempt_id)
        check = next(c for c in attempt.check_runs if c.check_id == "unit-tests")
        return [(t.test_id.rsplit(".", 1)[1], str(t.kind), str(t.outcome)) for t in check.tests]

    assert outcomes("attempt-1") == [
        ("test_median_even", "fail_to_pass", "passed"),
        ("test_mean", "pass_to_pass", "passed"),
        ("test_median_odd", "pass_to_pass", "passed"),
        ("test_median_unsorted_input_untouched", "pass_to_pass", "passed"),
    ]
    assert [o for _, _, o in outcomes("attempt-4")] == ["failed", "passed", "passed", "passed"]


def test_the_admission_carries_each_groups_declared_tests(
    demo: tuple[Path, PipelineResult],
) -> None:
    """G8: the admission keeps each candidate group's per-test outcomes (admission.json
    too): the correct fix's group passed all four declared tests."""
    base, result = demo
    group = next(g for g in result.admission.groups if "attempt-1" in g.attempt_ids)
    assert [str(t.outcome) for t in group.declared_tests] == ["passed"] * 4
    saved = json.loads((base / "results/demo/admission.json").read_text())
    assert any(g["declared_tests"] for g in saved["groups"])
