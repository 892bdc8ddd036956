"""Tests for kernel.run.report: evidence states, counts, disagreement, refusals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings

from kernel.effects.orchestrate import run_config
from kernel.run.record import AttemptState, CheckSummary, ManifestSummary, RunRecord
from kernel.run.report import (
    CandidateDisagreement,
    EvidenceState,
    ReportReason,
    ReportRefusal,
    ReportVerified,
    ReportWarning,
    RunEvidenceReport,
    build_evidence_report,
    candidate_disagreements,
    check_evidence_report,
)
from kernel.run.verification import CheckStatus, Recommendation
from kernel.strategies import run_records

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "orchestration"


def _run(name: str) -> RunRecord:
    return run_config(FIXTURES / f"{name}.json")


def _report(name: str) -> RunEvidenceReport:
    report = build_evidence_report(_run(name))
    assert isinstance(report, RunEvidenceReport)
    return report


# --- the seed's eight self-test properties -----------------------------------------------


def test_seed_1_good_and_bad_stay_one_support_one_rejection() -> None:
    """Known-good and known-bad attempts remain one support + one rejection."""
    report = _report("two-attempt-good-vs-bad")
    assert [a.evidence_state for a in report.attempts] == [
        EvidenceState.SUPPORTED,
        EvidenceState.REJECTED,
    ]
    assert (report.summary.supported, report.summary.rejected) == (1, 1)


def test_seed_2_disagreement_is_visible() -> None:
    """Support/reject disagreement is visible in the summary and the warnings."""
    report = _report("two-attempt-good-vs-bad")
    assert report.summary.verification_disagreement
    assert report.summary.recommendations == (
        Recommendation.ACCEPT_CANDIDATE,
        Recommendation.REJECT_CANDIDATE,
    )
    assert ReportWarning.VERIFICATION_DISAGREEMENT in report.warnings


def test_seed_3_human_decision_stays_pending() -> None:
    """The human integration decision remains pending with nothing selected."""
    decision = _report("two-attempt-good-vs-bad").human_decision.to_dict()
    assert decision == {
        "status": "pending",
        "selected_attempt_id": None,
        "integration_authority": "external_human_or_governance",
    }


def test_seed_4_automatic_selection_stays_disabled() -> None:
    """Automatic candidate selection (and every other authority) remains disabled."""
    authority = _report("two-attempt-good-vs-bad").authority.to_dict()
    assert authority == dict.fromkeys(authority, False)
    assert authority["automatic_candidate_selection"] is False


def test_seed_5_peer_worker_failure_is_visible_and_evidence_kept() -> None:
    """A peer worker failure stays visible while surviving evidence is retained."""
    report = _report("two-attempt-worker-failure")
    good, failed = report.attempts
    assert good.evidence_state is EvidenceState.SUPPORTED
    assert good.verification is not None
    assert failed.evidence_state is EvidenceState.WORKER_ERROR
    assert failed.error is not None
    assert report.summary.control_errors == 1
    assert report.summary.control_failure_present


def test_seed_6_replay_matches_the_saved_run_digest() -> None:
    """Replaying the same deterministic config matches the complete saved-run digest."""
    assert _run("two-attempt-good-vs-bad").digest == _run("two-attempt-good-vs-bad").digest
    assert _run("nine-attempt-all-states").to_dict() == _run("nine-attempt-all-states").to_dict()


def test_seed_7_tampered_saved_run_fails_replay_equality() -> None:
    """A tampered saved run no longer has the replayed digest."""
    run = _run("two-attempt-good-vs-bad")
    tampered = attrs.evolve(run, run_id="orchestration/other")
    assert tampered.digest != run.digest


@pytest.mark.parametrize(
    ("field", "reason"),
    [
        ("result_manifest_digest", ReportReason.VERIFICATION_MANIFEST_DRIFT),
        ("work_unit_digest", ReportReason.VERIFICATION_WORK_UNIT_DRIFT),
    ],
)
def test_seed_8_digest_binding_drift_is_refused(field: str, reason: ReportReason) -> None:
    """Manifest/verification digest drift is refused before a report exists."""
    run = _run("two-attempt-good-vs-bad")
    attempt = run.attempts[1]
    assert attempt.verification is not None
    changes: dict[str, Any] = {field: "0" * 64}
    drifted = attrs.evolve(attempt, verification=attrs.evolve(attempt.verification, **changes))
    outcome = build_evidence_report(attrs.evolve(run, attempts=(run.attempts[0], drifted)))
    assert isinstance(outcome, ReportRefusal)
    assert outcome.reason_codes == (reason,)
    assert outcome.attempt_ids == ("attempt-002",)
    assert ReportRefusal.from_dict(outcome.to_dict()) == outcome


def test_a_report_checked_against_a_run_whose_report_cannot_be_built_is_refused() -> None:
    """The source run given with a report must itself build a report: a drifted run
    is named as the source mismatch, with the build's own codes."""
    run = _run("two-attempt-good-vs-bad")
    report = build_evidence_report(run)
    assert isinstance(report, RunEvidenceReport)
    attempt = run.attempts[0]
    assert attempt.manifest is not None
    drifted = attrs.evolve(
        attempt, manifest=attrs.evolve(attempt.manifest, work_unit_digest="1" * 64)
    )
    outcome = check_evidence_report(
        report, run=attrs.evolve(run, attempts=(drifted, run.attempts[1]))
    )
    assert isinstance(outcome, ReportRefusal)
    assert outcome.reason_codes == (ReportReason.SOURCE,)
    assert "run: expected a run whose report builds" in outcome.explanation
    assert str(ReportReason.MANIFEST_WORK_UNIT_DRIFT) in outcome.explanation


def test_manifest_work_unit_drift_is_refused() -> None:
    """A manifest bound to another work unit digest is refused too."""
    run = _run("two-attempt-good-vs-bad")
    attempt = run.attempts[0]
    assert attempt.manifest is not None
    drifted = attrs.evolve(
        attempt, manifest=attrs.evolve(attempt.manifest, work_unit_digest="1" * 64)
    )
    outcome = build_evidence_report(attrs.evolve(run, attempts=(drifted, run.attempts[1])))
    assert isinstance(outcome, ReportRefusal)
    assert outcome.reason_codes == (ReportReason.MANIFEST_WORK_UNIT_DRIFT,)


# --- every state, counts, warnings ------------------------------------------------------


def test_every_state_is_reported_and_nothing_is_dropped() -> None:
    """The nine-attempt fixture yields each evidence state; counts add up to N."""
    report = _report("nine-attempt-all-states")
    states = [a.evidence_state for a in report.attempts]
    assert set(states) == set(EvidenceState)
    s = report.summary
    assert s.attempt_count == len(report.attempts) == 9
    assert s.supported + s.rejected + s.inconclusive + s.control_errors == 9
    assert s.control_errors == s.worker_errors + s.result_manifest_errors + s.verification_errors


def test_acceptance_contradicting_a_required_check_is_inconclusive() -> None:
    """accept_candidate with a failed required check is shown inconclusive, with a warning."""
    run = _run("two-attempt-good-vs-bad")
    attempt = run.attempts[0]
    assert attempt.verification is not None
    checks = (CheckSummary(id="independent-acceptance", required=True, status=CheckStatus.FAILED),)
    odd = attrs.evolve(attempt, verification=attrs.evolve(attempt.verification, checks=checks))
    report = build_evidence_report(attrs.evolve(run, attempts=(odd, run.attempts[1])))
    assert isinstance(report, RunEvidenceReport)
    assert report.attempts[0].evidence_state is EvidenceState.INCONCLUSIVE
    assert ReportWarning.RECOMMENDATION_CONTRADICTS_CHECKS in report.warnings
    assert isinstance(check_evidence_report(report), ReportVerified)


# --- check_evidence_report ------------------------------------------------------------------------


def _forge(report: RunEvidenceReport, index: int, **changes: Any) -> RunEvidenceReport:
    attempts = list(report.attempts)
    attempts[index] = attrs.evolve(attempts[index], **changes)
    return attrs.evolve(report, attempts=tuple(attempts))


def test_forged_relabel_with_adjusted_counts_is_refused() -> None:
    """An attempt relabelled `supported` with counts adjusted to match is refused."""
    report = _report("two-attempt-good-vs-bad")
    forged = _forge(report, 1, evidence_state=EvidenceState.SUPPORTED)
    forged = attrs.evolve(forged, summary=attrs.evolve(forged.summary, supported=2, rejected=0))
    outcome = check_evidence_report(forged)
    assert isinstance(outcome, ReportRefusal)
    assert outcome.reason_codes == (ReportReason.EVIDENCE_STATE, ReportReason.SUMMARY_COUNTS)
    assert outcome.attempt_ids == ("attempt-002",)


def test_fully_fabricated_attempt_is_refused_against_the_run() -> None:
    """Relabelling recommendation and state together checks alone, not against the run."""
    report = _report("two-attempt-good-vs-bad")
    bad = report.attempts[1]
    assert bad.verification is not None
    passed = tuple(attrs.evolve(c, status=CheckStatus.PASSED) for c in bad.verification.checks)
    fabricated = _forge(
        report,
        1,
        evidence_state=EvidenceState.SUPPORTED,
        verification=attrs.evolve(
            bad.verification, recommendation=Recommendation.ACCEPT_CANDIDATE, checks=passed
        ),
    )
    fabricated = attrs.evolve(
        fabricated,
        summary=attrs.evolve(
            fabricated.summary,
            supported=2,
            rejected=0,
            recommendations=(Recommendation.ACCEPT_CANDIDATE,),
            verification_disagreement=False,
        ),
        warnings=(ReportWarning.DECISION_SUPPORT_ONLY,),
    )
    assert isinstance(check_evidence_report(fabricated), ReportVerified)
    outcome = check_evidence_report(fabricated, run=_run("two-attempt-good-vs-bad"))
    assert isinstance(outcome, ReportRefusal)
    assert outcome.reason_codes == (ReportReason.SOURCE,)


def _manifest(report: RunEvidenceReport) -> ManifestSummary:
    manifest = report.attempts[0].manifest
    assert manifest is not None
    return manifest


CHECK_REFUSALS: dict[
    str, tuple[Callable[[RunEvidenceReport], RunEvidenceReport], tuple[ReportReason, ...]]
] = {
    "order": (lambda r: _forge(r, 0, order=2), (ReportReason.ATTEMPT_ORDER,)),
    "duplicate": (
        lambda r: _forge(r, 1, attempt_id="attempt-001"),
        (ReportReason.DUPLICATE_ATTEMPT,),
    ),
    "shape": (
        lambda r: _forge(
            r, 1, state=AttemptState.WORKER_ERROR, evidence_state=EvidenceState.WORKER_ERROR
        ),
        (
            ReportReason.ATTEMPT_SHAPE,
            ReportReason.SUMMARY_COUNTS,
            ReportReason.DISAGREEMENT,
            ReportReason.WARNINGS,
        ),
    ),
    "disagreement": (
        lambda r: attrs.evolve(r, summary=attrs.evolve(r.summary, verification_disagreement=False)),
        (ReportReason.DISAGREEMENT,),
    ),
    "warnings": (lambda r: attrs.evolve(r, warnings=()), (ReportReason.WARNINGS,)),
    "empty": (
        lambda r: attrs.evolve(r, attempts=()),
        (
            ReportReason.ATTEMPT_ORDER,
            ReportReason.SUMMARY_COUNTS,
            ReportReason.DISAGREEMENT,
            ReportReason.WARNINGS,
        ),
    ),
    "drift": (
        lambda r: _forge(r, 0, manifest=attrs.evolve(_manifest(r), digest="2" * 64)),
        (ReportReason.VERIFICATION_MANIFEST_DRIFT,),
    ),
}


@pytest.mark.parametrize("name", sorted(CHECK_REFUSALS))
def test_check_report_refusals(name: str) -> None:
    """Each inconsistency is refused with its reason codes, in ReportReason order."""
    edit, codes = CHECK_REFUSALS[name]
    outcome = check_evidence_report(edit(_report("two-attempt-good-vs-bad")))
    assert isinstance(outcome, ReportRefusal)
    assert outcome.reason_codes == codes


def test_built_reports_check_and_round_trip() -> None:
    """Reports of every fixture check, also against their run, and round-trip."""
    for name in ("two-attempt-good-vs-bad", "nine-attempt-all-states", "hostile-strings"):
        run = _run(name)
        report = build_evidence_report(run)
        assert isinstance(report, RunEvidenceReport)
        assert check_evidence_report(report, run=run) == ReportVerified(
            report_digest=report.digest, source_run_digest=run.digest
        )
        assert RunEvidenceReport.from_dict(report.to_dict()) == report


# --- properties ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(run_records())
def test_property_every_attempt_one_state_disagreement_iff_several(run: RunRecord) -> None:
    """Random runs: every attempt kept with one state; disagreement iff > 1 recommendation."""
    report = build_evidence_report(run)
    assert isinstance(report, RunEvidenceReport)
    assert [a.attempt_id for a in report.attempts] == [a.attempt_id for a in run.attempts]
    assert all(isinstance(a.evidence_state, EvidenceState) for a in report.attempts)
    s = report.summary
    assert s.supported + s.rejected + s.inconclusive + s.control_errors == len(run.attempts)
    recommendations = {
        a.verification.recommendation
        for a in run.attempts
        if a.state is AttemptState.VERIFIED and a.verification is not None
    }
    assert s.verification_disagreement is (len(recommendations) > 1)
    assert report.source_run_digest == run.digest
    assert isinstance(check_evidence_report(report, run=run), ReportVerified)
    assert report.human_decision.selected_attempt_id is None


# --- candidate_disagreements: the same candidate judged differently -----------------------

_A, _B = "a" * 64, "b" * 64


def _candidates(report: RunEvidenceReport, *digests: str | None) -> RunEvidenceReport:
    """``report`` with each attempt's manifest naming the given candidate digest."""
    attempts = []
    for attempt, digest in zip(report.attempts, digests, strict=True):
        manifest = attempt.manifest
        attempts.append(
            attempt
            if manifest is None
            else attrs.evolve(attempt, manifest=attrs.evolve(manifest, candidate_digest=digest))
        )
    return attrs.evolve(report, attempts=tuple(attempts))


def test_a_wrong_and_a_right_candidate_are_no_disagreement() -> None:
    """Two candidates, accepted and rejected: IDKMesh's flag is set, no candidate disagrees."""
    report = _candidates(_report("two-attempt-good-vs-bad"), _A, _B)
    assert report.summary.verification_disagreement
    assert candidate_disagreements(report) == ()


def test_one_candidate_judged_both_ways_disagrees() -> None:
    """One patch accepted by one verification and rejected by another is a disagreement,
    naming both attempts, both recommendations and the check whose status differs."""
    report = _candidates(_report("two-attempt-good-vs-bad"), _A, _A)
    assert candidate_disagreements(report) == (
        CandidateDisagreement(
            candidate_digest=_A,
            attempt_ids=("attempt-001", "attempt-002"),
            recommendations=(Recommendation.ACCEPT_CANDIDATE, Recommendation.REJECT_CANDIDATE),
            checks=("independent-acceptance",),
        ),
    )


def test_one_check_judged_both_ways_disagrees_under_one_recommendation() -> None:
    """Same recommendation, one optional check passed once and failed once: disagreement."""
    report = _candidates(_report("two-attempt-good-vs-bad"), _A, _A)
    good = report.attempts[0].verification
    assert good is not None
    flaky = (*good.checks[:-1], attrs.evolve(good.checks[-1], status=CheckStatus.FAILED))
    report = _forge(report, 1, verification=attrs.evolve(good, checks=flaky))
    (found,) = candidate_disagreements(report)
    assert found.recommendations == (Recommendation.ACCEPT_CANDIDATE,)
    assert found.checks == ("independent-acceptance",)


def test_a_candidate_judged_alike_twice_or_unjudged_is_no_disagreement() -> None:
    """Identical judgments agree; an attempt without a candidate or not verified is no judgment."""
    report = _candidates(_report("two-attempt-good-vs-bad"), _A, _A)
    alike = _forge(report, 1, verification=report.attempts[0].verification)
    assert candidate_disagreements(alike) == ()
    assert candidate_disagreements(_candidates(report, None, None)) == ()
    errored = _forge(report, 1, state=AttemptState.VERIFICATION_ERROR)
    assert candidate_disagreements(errored) == ()
    unverified = _forge(report, 1, verification=None)
    assert candidate_disagreements(unverified) == ()
    no_manifest = _forge(report, 1, manifest=None)
    assert candidate_disagreements(no_manifest) == ()


@settings(max_examples=60, deadline=None)
@given(run_records())
def test_property_distinct_candidates_never_disagree(run: RunRecord) -> None:
    """For all runs: when no two attempts share a candidate, no candidate disagrees, and
    a reported disagreement always names a candidate judged at least twice."""
    report = build_evidence_report(run)
    assert isinstance(report, RunEvidenceReport)
    distinct = _candidates(
        report, *(f"{i:064x}" if a.manifest else None for i, a in enumerate(report.attempts))
    )
    assert candidate_disagreements(distinct) == ()
    for found in candidate_disagreements(report):
        assert len(found.attempt_ids) >= 2
        assert len(found.recommendations) > 1 or found.checks
