"""Issue 11: a refusal's explanation says what was expected and what was found.

Each refusal-producing builder is driven into every reason code touched here; the
explanation, once its code names are taken out, must still name the field (path) and
show the value found. Property tests check the same over the refusal strategies: no
explanation is just its codes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.corroboration.consensus import (
    CaptureStatus,
    ConsensusReason,
    ConsensusRefusal,
    Isolation,
    RunObservation,
    build_consensus,
)
from kernel.decide.decision import (
    DecisionReason,
    DecisionRefusal,
    HumanDecisionRecord,
    record_decision,
    verify_decision,
)
from kernel.effects.orchestrate import run_config
from kernel.records.codec import seal
from kernel.records.values import Refusal
from kernel.run.report import (
    EvidenceState,
    ReportReason,
    ReportRefusal,
    RunEvidenceReport,
    build_evidence_report,
    check_evidence_report,
)
from kernel.run.verification import (
    EvidenceChainReason,
    EvidenceChainRefusal,
    ResultManifest,
    VerificationResult,
    WorkUnit,
    check_evidence_chain,
)
from kernel.search.binding import (
    CandidateAttemptRunBinding,
    CandidateAttemptRunBindingRefusal,
    RunAttemptBindingRefusalReason,
    bind_candidate_attempt_to_run,
    verify_binding,
    verify_binding_set,
)
from kernel.search.records import CandidateOperatorResult, GeometricSearchRun
from kernel.strategies import (
    binding_refusals,
    reports,
    result_manifests,
    run_observations,
    verification_results,
    work_units,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "orchestration"


def residue(refusal: Refusal) -> str:
    """The explanation without any code name of its enum."""
    text = refusal.explanation
    codes = {str(member) for member in type(refusal.reason_codes[0])}
    for code in sorted(codes, key=len, reverse=True):
        text = text.replace(f"[{code}]", "").replace(code, "")
    return text


def says(refusal: Refusal, *needles: str) -> None:
    """Every code is named, and the prose beyond the codes holds each needle."""
    for code in refusal.reason_codes:
        assert str(code) in refusal.explanation, (code, refusal.explanation)
    rest = residue(refusal)
    for needle in needles:
        assert needle in rest, (needle, refusal.explanation)


def not_just_codes(refusal: Refusal, prefix: str) -> None:
    """The explanation holds more than its prefix and codes: an expectation or a finding."""
    rest = re.sub(r"[\s,;\[\]()]+", " ", residue(refusal)).removeprefix(prefix).lstrip(": ")
    assert len(rest.split()) >= 3, refusal.explanation
    assert re.search(r"expected|got|names no|again", rest), refusal.explanation
    assert ":" in rest, refusal.explanation  # a field path precedes what it says


# -- decision -----------------------------------------------------------------------


def _report(name: str = "two-attempt-good-vs-bad") -> RunEvidenceReport:
    report = build_evidence_report(run_config(FIXTURES / f"{name}.json"))
    assert isinstance(report, RunEvidenceReport)
    return report


REPORT = _report()
GOOD: dict[str, Any] = {
    "decision_id": "decision-001",
    "decision": "accept",
    "rationale": "attempt-001 passed every required check",
    "decider_id": "reviewer-1",
    "decided_at": "2026-01-01T00:00:00Z",
    "selected_attempt_id": "attempt-001",
}


def _forged_report() -> RunEvidenceReport:
    forged = attrs.evolve(REPORT.attempts[1], evidence_state=EvidenceState.SUPPORTED)
    return attrs.evolve(
        REPORT,
        attempts=(REPORT.attempts[0], forged),
        summary=attrs.evolve(REPORT.summary, supported=2, rejected=0),
    )


def _decide(report: RunEvidenceReport = REPORT, **changes: Any) -> DecisionRefusal:
    outcome = record_decision(report, **{**GOOD, **changes})
    assert isinstance(outcome, DecisionRefusal)
    return outcome


def test_the_reviewed_decision_refusal_says_what_was_expected() -> None:
    """The review's example: a non-existent date and an unknown attempt."""
    refusal = _decide(decided_at="2026-02-30T00:00:00Z", selected_attempt_id="nope")
    assert refusal.reason_codes == (DecisionReason.BAD_TIMESTAMP, DecisionReason.UNKNOWN_ATTEMPT)
    says(refusal, "decided_at", "'2026-02-30T00:00:00Z'", "not a real date")
    says(refusal, "selected_attempt_id", "'nope'", "'attempt-001'", "'attempt-002'")


DECISION_CASES: dict[DecisionReason, tuple[dict[str, Any], tuple[str, ...]]] = {
    DecisionReason.BLANK_DECISION_ID: ({"decision_id": "  "}, ("decision_id", "'  '")),
    DecisionReason.REPORT_VOCABULARY: (
        {"decision": "accept_candidate"},
        ("decision", "accept, reject or escalate", "'accept_candidate'"),
    ),
    DecisionReason.UNKNOWN_DECISION: ({"decision": "merge"}, ("decision", "'merge'")),
    DecisionReason.BLANK_RATIONALE: ({"rationale": "\t"}, ("rationale", "'\\t'")),
    DecisionReason.BLANK_DECIDER: (
        {"decider_display_name": " "},
        ("decider_display_name", "' '"),
    ),
    DecisionReason.UNENCODABLE_TEXT: (
        {"rationale": "bad \ud800"},
        ("rationale", "valid Unicode", "lone surrogate"),
    ),
    DecisionReason.UNKNOWN_DECIDER_TYPE: ({"decider_type": "bot"}, ("decider_type", "'bot'")),
    DecisionReason.BAD_TIMESTAMP: (
        {"decided_at": "2026-01-01T00:00:00+02:00"},
        ("decided_at", "RFC 3339", "'2026-01-01T00:00:00+02:00'"),
    ),
    DecisionReason.ACCEPT_WITHOUT_SELECTION: (
        {"selected_attempt_id": None},
        ("selected_attempt_id", "None"),
    ),
}


@pytest.mark.parametrize("code", sorted(DECISION_CASES))
def test_each_record_decision_refusal_names_field_and_value(code: DecisionReason) -> None:
    changes, needles = DECISION_CASES[code]
    refusal = _decide(**changes)
    assert refusal.reason_codes == (code,)
    says(refusal, *needles)
    not_just_codes(refusal, "decision refused")


def test_report_and_selection_refusals_name_what_they_found() -> None:
    """report_inconsistent repeats the report's own findings; an accept of an attempt
    without verification names its state."""
    refusal = _decide(_forged_report(), selected_attempt_id="attempt-002")
    says(refusal, "report", "check_evidence_report", "summary.supported", "got 2")
    failed = _report("two-attempt-worker-failure")
    refusal = _decide(failed, selected_attempt_id="attempt-002")
    assert refusal.reason_codes == (DecisionReason.SELECTED_WITHOUT_EVIDENCE,)
    says(refusal, "selected_attempt_id", "'attempt-002'", "worker_error")


def test_verify_decision_refusals_name_field_and_value() -> None:
    record = record_decision(REPORT, **GOOD)
    assert isinstance(record, HumanDecisionRecord)
    other = _report("two-attempt-worker-failure")
    refusal = verify_decision(record, other)
    assert isinstance(refusal, DecisionRefusal)
    assert DecisionReason.REPORT_DIGEST in refusal.reason_codes
    says(refusal, "evidence_report.digest", other.digest[:20], record.evidence_report.digest[:20])
    edited = attrs.evolve(record, rationale="edited afterwards")
    refusal = verify_decision(edited, REPORT)
    assert isinstance(refusal, DecisionRefusal)
    assert refusal.reason_codes == (DecisionReason.RECORD_ID,)
    says(refusal, "record_id", record.record_id[:20])
    renamed = attrs.evolve(record.evidence_report, run_id="another-run", kind="other-kind")
    refusal = verify_decision(attrs.evolve(record, evidence_report=renamed), REPORT)
    assert isinstance(refusal, DecisionRefusal)
    assert DecisionReason.REPORT_RUN_ID in refusal.reason_codes
    says(refusal, "evidence_report.run_id", "'another-run'", "evidence_report", "'other-kind'")


# -- consensus ----------------------------------------------------------------------


def _observation(index: int, digest: str | None = "a" * 64, size: int = 3) -> RunObservation:
    return RunObservation(
        index=index,
        status=CaptureStatus.OK,
        exit_code=0,
        output_digest=digest,
        output_size=size,
        isolation=Isolation.COPY,
        duration_ms=1,
    )


def test_consensus_refusals_name_field_and_value() -> None:
    refusal = build_consensus(())
    assert isinstance(refusal, ConsensusRefusal)
    assert refusal.reason_codes == (ConsensusReason.NO_RUNS_LAUNCHED,)
    says(refusal, "observations", "at least one launched run", "got 0")
    not_just_codes(refusal, "cannot judge these runs")

    refusal = build_consensus((_observation(0), _observation(2)))
    assert isinstance(refusal, ConsensusRefusal)
    assert refusal.reason_codes == (ConsensusReason.RUN_INDEXES_NOT_SEQUENTIAL,)
    says(refusal, "observations[1].index", "expected 1", "got 2")

    refusal = build_consensus(
        (_observation(0),), baseline_output_digest="A" * 64, candidate_digest="x" * 500
    )
    assert isinstance(refusal, ConsensusRefusal)
    assert refusal.reason_codes == (
        ConsensusReason.INVALID_BASELINE_OUTPUT_DIGEST,
        ConsensusReason.INVALID_CANDIDATE_DIGEST,
    )
    says(refusal, "baseline_output_digest", "'AAAA", "candidate_digest", "500 characters")
    assert len(refusal.explanation) < 500  # the long value is cut short

    refusal = build_consensus((_observation(0, size=3), _observation(1, size=4)))
    assert isinstance(refusal, ConsensusRefusal)
    assert refusal.reason_codes == (ConsensusReason.DIGEST_SIZE_CONFLICT,)
    says(refusal, "output_size", "expected 3", "got 4", "run 1")


# -- evidence report ----------------------------------------------------------------


def test_check_evidence_report_refusals_name_field_and_value() -> None:
    refusal = check_evidence_report(_forged_report())
    assert isinstance(refusal, ReportRefusal)
    assert refusal.reason_codes == (ReportReason.EVIDENCE_STATE, ReportReason.SUMMARY_COUNTS)
    says(refusal, "'attempt-002'", "evidence_state", "expected rejected", "got supported")
    says(refusal, "summary.supported", "expected 1", "got 2", "summary.rejected")
    not_just_codes(refusal, "report refused")

    first, second = REPORT.attempts
    reordered = attrs.evolve(REPORT, attempts=(first, attrs.evolve(first, order=5)))
    refusal = check_evidence_report(reordered)
    assert isinstance(refusal, ReportRefusal)
    assert ReportReason.ATTEMPT_ORDER in refusal.reason_codes
    assert ReportReason.DUPLICATE_ATTEMPT in refusal.reason_codes
    says(refusal, "attempts[1]", "order", "expected 2", "got 5", "'attempt-001' again")

    shapeless = attrs.evolve(REPORT, attempts=(attrs.evolve(first, verification=None), second))
    refusal = check_evidence_report(shapeless)
    assert isinstance(refusal, ReportRefusal)
    assert ReportReason.ATTEMPT_SHAPE in refusal.reason_codes
    says(refusal, "'attempt-001'", "a verified attempt", "verification none")

    flagged = attrs.evolve(
        REPORT,
        summary=attrs.evolve(REPORT.summary, verification_disagreement=False, recommendations=()),
        warnings=(),
    )
    refusal = check_evidence_report(flagged)
    assert isinstance(refusal, ReportRefusal)
    assert ReportReason.DISAGREEMENT in refusal.reason_codes
    says(refusal, "summary.recommendations", "got [] ")
    if ReportReason.WARNINGS in refusal.reason_codes:
        says(refusal, "warnings: expected")

    empty = attrs.evolve(REPORT, attempts=())
    refusal = check_evidence_report(empty)
    assert isinstance(refusal, ReportRefusal)
    says(refusal, "attempts: expected at least one, got 0")


def test_report_source_and_drift_refusals_name_field_and_value() -> None:
    run = run_config(FIXTURES / "two-attempt-good-vs-bad.json")
    other = _report("two-attempt-worker-failure")
    refusal = check_evidence_report(other, run=run)
    assert isinstance(refusal, ReportRefusal)
    assert refusal.reason_codes == (ReportReason.SOURCE,)
    says(refusal, "report: expected exactly the report run", "differing in", "run_id")

    attempt = run.attempts[0]
    assert attempt.verification is not None
    drifted_verification = attrs.evolve(attempt.verification, work_unit_digest="e" * 64)
    drifted = attrs.evolve(
        run, attempts=(attrs.evolve(attempt, verification=drifted_verification), *run.attempts[1:])
    )
    built = build_evidence_report(drifted)
    assert isinstance(built, ReportRefusal)
    assert built.reason_codes == (ReportReason.VERIFICATION_WORK_UNIT_DRIFT,)
    says(built, "verification.work_unit_digest", "'eeee", repr(attempt.attempt_id))


@settings(max_examples=40, deadline=None)
@given(report=reports(4), data=st.data())
def test_property_no_report_refusal_is_just_codes(
    report: RunEvidenceReport, data: st.DataObject
) -> None:
    """Any summary edit that check_evidence_report refuses is explained beyond codes."""
    summary = attrs.evolve(
        report.summary,
        supported=data.draw(st.integers(0, 9)),
        verification_disagreement=data.draw(st.booleans()),
    )
    outcome = check_evidence_report(attrs.evolve(report, summary=summary))
    if isinstance(outcome, ReportRefusal):
        not_just_codes(outcome, "report refused")


# -- evidence chain -----------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    unit=work_units(),
    manifest=result_manifests(),
    verification=verification_results(),
)
def test_property_no_evidence_chain_refusal_is_just_codes(
    unit: WorkUnit, manifest: ResultManifest, verification: VerificationResult
) -> None:
    """Random, mostly unrelated triples: every refusal explains each failed check."""
    outcome = check_evidence_chain(unit, manifest, verification)
    if isinstance(outcome, EvidenceChainRefusal):
        not_just_codes(outcome, "evidence does not bind")
        for code in outcome.reason_codes:
            # Each code follows the phrase that explains it.
            assert re.search(rf"\w[^\[\]]*: [^\[\]]+ \[{code}\]", outcome.explanation), code


@settings(max_examples=20, deadline=None)
@given(unit=work_units(), data=st.data())
def test_evidence_chain_refusal_names_field_and_value(unit: WorkUnit, data: st.DataObject) -> None:
    """A manifest of another work unit, and a verification of another manifest attempt."""
    other = attrs.evolve(unit, id=f"{unit.id}-other", version=unit.version + 1)
    manifest = data.draw(result_manifests(other))
    verification = data.draw(verification_results(unit, manifest))
    verification = attrs.evolve(verification, attempt=manifest.attempt + 1)
    outcome = check_evidence_chain(unit, manifest, verification)
    assert isinstance(outcome, EvidenceChainRefusal)
    for code in (
        EvidenceChainReason.MANIFEST_WORK_UNIT_ID,
        EvidenceChainReason.MANIFEST_WORK_UNIT_VERSION,
        EvidenceChainReason.MANIFEST_WORK_UNIT_DIGEST,
        EvidenceChainReason.VERIFICATION_ATTEMPT,
    ):
        assert code in outcome.reason_codes
    says(
        outcome, "manifest.work_unit_id", "manifest.work_unit_version", "manifest.work_unit_digest"
    )
    says(outcome, f"got {manifest.attempt + 1}", f"attempt {manifest.attempt}")


# -- ADR-0232 binding ---------------------------------------------------------------

BINDING_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "binding"
CHAIN = json.loads((BINDING_FIXTURES / "reference-chain.json").read_text("utf-8"))
REFERENCE_SENTENCE = "CandidateAttempt run binding refused"


def _chain() -> tuple[GeometricSearchRun, CandidateOperatorResult]:
    return (
        GeometricSearchRun.from_dict(CHAIN["geometric_search_run"]),
        CandidateOperatorResult.from_dict(CHAIN["candidate_operator_result"]),
    )


def _bind(run: object, result: object) -> CandidateAttemptRunBindingRefusal:
    outcome = bind_candidate_attempt_to_run(
        original_run=run,  # type: ignore[arg-type]
        candidate_operator_result=result,  # type: ignore[arg-type]
    )
    assert type(outcome) is CandidateAttemptRunBindingRefusal
    return outcome


def test_the_reviewed_binding_refusal_says_what_was_expected() -> None:
    """The review's example: no run and no result."""
    refusal = _bind(None, None)
    assert refusal.reason_codes == (RunAttemptBindingRefusalReason.INVALID_BINDING_INPUT,)
    assert refusal.explanation.startswith(f"{REFERENCE_SENTENCE}: invalid_binding_input. ")
    says(refusal, "original_run", "GeometricSearchRun", "got None")
    not_just_codes(refusal, REFERENCE_SENTENCE)
    run, _ = _chain()
    refusal = _bind(run, 7)
    says(refusal, "candidate_operator_result", "CandidateOperatorResult", "got int 7")


@pytest.mark.parametrize(
    "name", sorted(path.name for path in (BINDING_FIXTURES / "cases").glob("*.json"))
)
def test_every_golden_binding_refusal_says_more_than_its_code(name: str) -> None:
    """One golden case per reason code the binding produces: each explains itself."""
    expected = json.loads((BINDING_FIXTURES / "cases" / name).read_text("utf-8"))["expected"]
    if "binding_refusal_id" not in expected:
        return
    refusal = CandidateAttemptRunBindingRefusal.from_dict(expected)
    not_just_codes(refusal, REFERENCE_SENTENCE)


def test_a_huge_forged_int_is_described_by_its_size() -> None:
    """A forged int Python cannot write out is named by its size; the code is unchanged."""
    run, result = _chain()
    forged = attrs.evolve(result)
    object.__setattr__(forged, "attempt_index", 10**5000)
    refusal = _bind(run, forged)
    assert refusal.reason_codes == (RunAttemptBindingRefusalReason.ATTEMPT_RESULT_MISMATCH,)
    says(refusal, "candidate_operator_result.attempt_index", "bits")
    assert len(refusal.explanation) < 400


def test_binding_verifier_refusals_name_field_and_value() -> None:
    run, result = _chain()
    bound = bind_candidate_attempt_to_run(original_run=run, candidate_operator_result=result)
    assert type(bound) is CandidateAttemptRunBinding
    refusal = verify_binding("nope", run, result)  # type: ignore[arg-type]
    assert type(refusal) is CandidateAttemptRunBindingRefusal
    says(refusal, "binding", "CandidateAttemptRunBinding", "got str 'nope'")
    edited = seal(CandidateAttemptRunBinding, **{**_fields(bound), "depth": bound.depth + 1})
    refusal = verify_binding(edited, run, result)
    assert type(refusal) is CandidateAttemptRunBindingRefusal
    assert refusal.reason_codes == (RunAttemptBindingRefusalReason.BINDING_RECORD_MISMATCH,)
    says(refusal, "binding.depth", f"got {bound.depth + 1}")
    in_set = verify_binding_set(run, ())
    assert type(in_set) is CandidateAttemptRunBindingRefusal
    says(in_set, "bindings", "at least one", "got 0")
    in_set = verify_binding_set(run, (bound, bound))
    assert type(in_set) is CandidateAttemptRunBindingRefusal
    assert in_set.reason_codes == (RunAttemptBindingRefusalReason.DUPLICATE_ATTEMPT_INDEX,)
    says(in_set, "bindings[1].attempt_index", f"got {bound.attempt_index}")
    in_set = verify_binding_set(run, (bound, 3))  # type: ignore[arg-type]
    assert type(in_set) is CandidateAttemptRunBindingRefusal
    says(in_set, "bindings[1]", "got int 3")


def _fields(record: CandidateAttemptRunBinding) -> dict[str, Any]:
    fields = attrs.fields(type(record))
    return {f.name: getattr(record, f.name) for f in fields if f.name != "binding_id"}


@settings(max_examples=60, deadline=None)
@given(refusal=binding_refusals())
def test_property_no_binding_refusal_is_just_codes(
    refusal: CandidateAttemptRunBindingRefusal,
) -> None:
    """Every refusal the corrupted-pair strategy yields explains its one check."""
    assert refusal.explanation.startswith(f"{REFERENCE_SENTENCE}: {refusal.reason_codes[0]}. ")
    not_just_codes(refusal, REFERENCE_SENTENCE)


_TEXTS = st.one_of(st.sampled_from(["", " ", "accept", "reject", "accept_candidate"]), st.text())


@settings(max_examples=60, deadline=None)
@given(
    report=reports(3),
    decision=_TEXTS,
    rationale=_TEXTS,
    decider_id=_TEXTS,
    decider_type=st.sampled_from(["human", "governance_body", "bot"]),
    decided_at=st.one_of(st.just("2026-01-01T00:00:00Z"), st.text(max_size=30)),
    selected=st.one_of(st.none(), st.text(max_size=5)),
)
def test_property_no_decision_refusal_is_just_codes(
    report: RunEvidenceReport,
    decision: str,
    rationale: str,
    decider_id: str,
    decider_type: str,
    decided_at: str,
    selected: str | None,
) -> None:
    """Any arguments record_decision refuses: the refusal explains every failed check."""
    outcome = record_decision(
        report,
        decision_id="d-1",
        decision=decision,
        rationale=rationale,
        decider_id=decider_id,
        decider_type=decider_type,
        decided_at=decided_at,
        selected_attempt_id=selected,
    )
    if isinstance(outcome, DecisionRefusal):
        not_just_codes(outcome, "decision refused")
        for code in outcome.reason_codes:
            assert f"[{code}]" in outcome.explanation


@settings(max_examples=60, deadline=None)
@given(
    observations=run_observations(0, 5),
    order=st.permutations(range(5)),
    baseline=st.one_of(st.none(), st.text(max_size=70)),
    candidate=st.one_of(st.none(), st.text(max_size=70)),
)
def test_property_no_consensus_refusal_is_just_codes(
    observations: tuple[RunObservation, ...],
    order: list[int],
    baseline: str | None,
    candidate: str | None,
) -> None:
    """Shuffled runs and arbitrary digests: every consensus refusal explains itself."""
    shuffled = tuple(observations[i] for i in order if i < len(observations))
    outcome = build_consensus(shuffled, baseline_output_digest=baseline, candidate_digest=candidate)
    if isinstance(outcome, ConsensusRefusal):
        not_just_codes(outcome, "cannot judge these runs")
        for code in outcome.reason_codes:
            assert f"[{code}]" in outcome.explanation
