"""Tests for `kernel.corroboration.run_admission`: evidence classes of candidate groups (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from kernel.corroboration.commit_admission import (
    CommitReason,
    EvidenceClass,
    VerifierOutcome,
)
from kernel.corroboration.consensus import (
    EMPTY_SHA256,
    CaptureMode,
    CaptureStatus,
    Consensus,
    CorroborationReport,
    Isolation,
    NoConsensus,
    RunObservation,
    build_consensus,
    build_corroboration_report,
)
from kernel.corroboration.run_admission import RunAdmission, build_run_admission
from kernel.effects.orchestrate import load_config, run_loaded
from kernel.errors import ParameterValueError
from kernel.run.report import RunEvidenceReport, build_evidence_report
from kernel.strategies.report import reports
from kernel.views import render_html, render_markdown
from kernel.views.admission import admission_section

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
A = "a" * 64
B = "b" * 64
CTX1 = "1" * 64
CTX2 = "2" * 64


def _report(name: str = "two-attempt-good-vs-bad") -> RunEvidenceReport:
    report = build_evidence_report(run_loaded(load_config(FIXTURES / f"orchestration/{name}.json")))
    assert isinstance(report, RunEvidenceReport)
    return report


def _reruns(*digests: str | None, candidate: str) -> CorroborationReport:
    observations = [
        RunObservation(
            index=i,
            status=CaptureStatus.OK if d else CaptureStatus.FAILED,
            exit_code=0 if d else 1,
            output_digest=d,
            output_size=10 if d else None,
            isolation=Isolation.OVERLAY,
            duration_ms=1,
        )
        for i, d in enumerate(digests)
    ]
    outcome = build_consensus(observations, candidate_digest=candidate)
    assert isinstance(outcome, Consensus | NoConsensus)
    return build_corroboration_report(
        outcome, command=("w",), capture_mode=CaptureMode.PATCH, network=False, timeout_ms=None
    )


def test_supported_group_is_verified_rejected_group_refused() -> None:
    """A supported candidate's group is verified; a rejected one is refused by rule A3."""
    report = _report()
    good, bad = (a.attempt_id for a in report.attempts)
    admission = build_run_admission(
        report, candidates={good: A, bad: B}, contexts={good: CTX1, bad: CTX2}, corroborations={}
    )
    first, second = admission.groups
    assert first.evidence_class is EvidenceClass.VERIFIED
    assert first.verifier is VerifierOutcome.PASSED
    assert second.evidence_class is None
    assert second.refusal_reasons == (CommitReason.VERIFIER_REJECTED,)
    assert admission.report_digest == report.digest
    assert RunAdmission.from_dict(admission.to_dict()) == admission


def test_same_bytes_share_a_group_and_a_rejection_wins() -> None:
    """Attempts with identical candidates form one group; any rejection fails it closed."""
    report = _report()
    good, bad = (a.attempt_id for a in report.attempts)
    admission = build_run_admission(
        report, candidates={good: A, bad: A}, contexts={}, corroborations={}
    )
    (group,) = admission.groups
    assert group.attempt_ids == (good, bad)
    assert group.verifier is VerifierOutcome.FAILED
    assert group.evidence_class is None


def test_reruns_alone_are_corroborated_only_or_refused() -> None:
    """Without a verifier verdict: decorrelated agreement is corroborated_only; unanimous
    correlated agreement is refused (A4); and adding reruns never makes it verified."""
    report = _report("two-attempt-worker-failure")
    # The worker_error attempt holds the candidate: it has no verifier verdict.
    failed = next(a.attempt_id for a in report.attempts if a.evidence_state == "worker_error")
    correlated = build_run_admission(
        report,
        candidates={failed: A},
        contexts={failed: CTX1},
        corroborations={A: _reruns(A, A, A, candidate=A)},
    )
    (group,) = correlated.groups
    assert group.verifier is VerifierOutcome.NONE
    assert group.refusal_reasons == (CommitReason.UNANIMOUS_CORRELATED_DRAFTS,)
    assert group.rerun_consensus
    assert group.reruns_reproduced == 3
    mixed = build_run_admission(
        report,
        candidates={failed: A},
        contexts={failed: CTX1},
        corroborations={A: _reruns(A, B, None, candidate=A)},
    )
    (group,) = mixed.groups
    assert group.evidence_class is EvidenceClass.CORROBORATED_ONLY


def test_no_change_candidate_is_never_admitted() -> None:
    """An empty patch contributes no draft: refused no_drafts, whatever the reruns."""
    report = _report("two-attempt-worker-failure")
    failed = next(a.attempt_id for a in report.attempts if a.evidence_state == "worker_error")
    admission = build_run_admission(
        report,
        candidates={failed: EMPTY_SHA256},
        contexts={},
        corroborations={EMPTY_SHA256: _reruns(None, None, candidate=EMPTY_SHA256)},
    )
    (group,) = admission.groups
    assert group.no_change
    assert group.refusal_reasons == (CommitReason.NO_DRAFTS,)


def test_unknown_attempt_is_misuse() -> None:
    """A candidate for an attempt the report does not have is an `ParameterValueError`
    (still a ValueError) naming the argument and the unknown attempt ids."""
    with pytest.raises(ParameterValueError, match=r"candidates: .*does not have: \['nope'\]") as e:
        build_run_admission(_report(), candidates={"nope": A}, contexts={}, corroborations={})
    assert isinstance(e.value, ValueError)
    assert (e.value.function, e.value.path) == ("build_run_admission", "candidates")


def test_section_renders_escaped() -> None:
    """The section's hostile text renders inert in HTML and Markdown."""
    report = _report("hostile-strings")
    first = report.attempts[0].attempt_id
    admission = build_run_admission(report, candidates={first: A}, contexts={}, corroborations={})
    section = admission_section(admission)
    html = render_html(report, [section])
    markdown = render_markdown(report, [section])
    assert "Evidence classes of candidate groups" in html
    assert "<script" not in html
    assert "<script" not in markdown
    table = [line for line in markdown.splitlines() if line.startswith("| aaaaaaaaaaaa")]
    assert len(table) == 1
    # Eight cells (Isolation and Trust included): nothing hostile splits a row.
    assert table[0].count(" | ") == 7


@settings(max_examples=30, deadline=None)
@given(reports(max_attempts=5))
def test_property_never_a_selection(report: RunEvidenceReport) -> None:
    """Whatever the report, the section keeps the decision pending and grants nothing,
    and only a group with a supporting, unrejected verification is verified."""
    candidates = {a.attempt_id: (A if a.order % 2 else B) for a in report.attempts}
    admission = build_run_admission(report, candidates=candidates, contexts={}, corroborations={})
    assert admission.human_decision.status == "pending"
    assert not any(admission.authority.to_dict().values())
    for group in admission.groups:
        if group.evidence_class is EvidenceClass.VERIFIED:
            assert "supported" in group.evidence_states
            assert "rejected" not in group.evidence_states
