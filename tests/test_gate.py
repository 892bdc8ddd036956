"""Tests for kernel.decide.gate: every promotion and staging rule, as properties over the
record strategies (a world in which everything holds is permitted; breaking any one
rule refuses with exactly that rule's code)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kernel.corroboration.commit_admission import EvidenceClass
from kernel.corroboration.consensus import (
    CaptureMode,
    CaptureStatus,
    ConsensusRefusal,
    CorroborationReport,
    Isolation,
    RunObservation,
    build_consensus,
    build_corroboration_report,
)
from kernel.corroboration.run_admission import RunAdmission
from kernel.decide.decision import Decision, HumanDecisionRecord, record_decision
from kernel.decide.gate import (
    GateReason,
    GateRefusal,
    PromotionPermit,
    SignatureCheck,
    SignatureStatus,
    StagingPermit,
    contexts_of,
    decide_promotion,
    decide_staging,
    decision_message,
    derive_run_admission,
)
from kernel.decide.ledger import (
    GENESIS_ID,
    LedgerHead,
    LedgerReason,
    LedgerRefusal,
    LedgerVerified,
    verify_chain,
)
from kernel.errors import FieldError, ParameterTypeError
from kernel.records.codec import seal
from kernel.run.record import (
    SCREEN_CHECK_ID,
    CheckRun,
    CheckSummary,
    DeclaredReplay,
    ProvenanceInput,
    RunProvenance,
    RunRecord,
    ScreenFinding,
    TrustLevel,
)
from kernel.run.report import RunEvidenceReport, build_evidence_report
from kernel.run.verification import CheckReason, CheckStatus, Recommendation, WorkerStatus
from kernel.strategies import digests, run_records

TREE = "a" * 40
INTACT = LedgerVerified(count=0, head=LedgerHead.empty())
# Each example builds a run, its report and admission and asks the gate several times.


def stdlib_sha(payload: Any) -> str:
    """SHA-256 of the stdlib canonical JSON."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@attrs.frozen
class World:
    """Everything a promotion is decided from, with every rule satisfied."""

    run: RunRecord
    report: RunEvidenceReport
    admission: RunAdmission
    attempt_id: str
    decision: HumanDecisionRecord
    signature: SignatureCheck

    def promote(self, **changes: Any) -> PromotionPermit | GateRefusal:
        """decide_promotion with this world, ``changes`` applied."""
        args: dict[str, Any] = {
            "run": self.run,
            "report": self.report,
            "admission": self.admission,
            "corroborations": {},
            "attempt_id": self.attempt_id,
            "decision": self.decision,
            "signature": self.signature,
            "branch_tree": TREE,
            "ledger": INTACT,
        }
        return decide_promotion(**{**args, **changes})

    def stage(self, **changes: Any) -> StagingPermit | GateRefusal:
        """decide_staging with this world, ``changes`` applied."""
        args: dict[str, Any] = {
            "run": self.run,
            "report": self.report,
            "admission": self.admission,
            "corroborations": {},
            "attempt_id": self.attempt_id,
            "base_tree": TREE,
            "ledger": INTACT,
        }
        return decide_staging(**{**args, **changes})


def signature_for(record: HumanDecisionRecord, status: SignatureStatus) -> SignatureCheck:
    """What the effects layer reports for ``record``'s signature."""
    return SignatureCheck(
        status=status,
        principal=record.decider.id,
        message_digest=hashlib.sha256(decision_message(record)).hexdigest(),
    )


@st.composite
def worlds(draw: st.DrawFn) -> World:
    """A run with one attempt made supported with a candidate of its own, its report,
    admission, a signed accept of that attempt and a matching branch tip."""
    run = draw(run_records(max_attempts=5))
    verified = [i for i, a in enumerate(run.attempts) if a.verification is not None]
    assume(verified)
    index = draw(st.sampled_from(verified))
    attempt = run.attempts[index]
    assert attempt.manifest is not None
    assert attempt.verification is not None
    candidate = draw(digests().filter(lambda d: d not in {"c" * 64, "d" * 64}))
    passed = attrs.evolve(
        attempt.verification,
        recommendation=Recommendation.ACCEPT_CANDIDATE,
        checks=tuple(
            CheckSummary(id=c.id, required=c.required, status=CheckStatus.PASSED)
            for c in attempt.verification.checks
        ),
    )
    chosen = attrs.evolve(
        attempt,
        manifest=attrs.evolve(attempt.manifest, candidate_digest=candidate),
        verification=passed,
    )
    attempts = (*run.attempts[:index], chosen, *run.attempts[index + 1 :])
    provenance = RunProvenance(
        declared_replay=DeclaredReplay.DETERMINISTIC,
        inputs=tuple(
            ProvenanceInput(name=f"worker:{a.attempt_id}", digest=draw(digests())) for a in attempts
        ),
        baseline_git_tree=TREE,
    )
    run = attrs.evolve(run, attempts=attempts, provenance=provenance)
    report = build_evidence_report(run)
    assert isinstance(report, RunEvidenceReport)
    admission = derive_run_admission(run, report, {})
    assert admission is not None
    decision = record_decision(
        report,
        decision_id="d",
        decision="accept",
        rationale="checked",
        decider_id=draw(st.sampled_from(["alice@example.com", "bob"])),
        decided_at="2026-01-01T00:00:00Z",
        selected_attempt_id=chosen.attempt_id,
    )
    assert isinstance(decision, HumanDecisionRecord)
    return World(
        run=run,
        report=report,
        admission=admission,
        attempt_id=chosen.attempt_id,
        decision=decision,
        signature=signature_for(decision, SignatureStatus.VALID),
    )


def codes(outcome: object) -> tuple[GateReason, ...]:
    """The refusal's codes (fails the test on a permit)."""
    assert isinstance(outcome, GateRefusal), outcome
    return outcome.reason_codes


@settings(max_examples=30)
@given(worlds())
def test_everything_holds_permits(world: World) -> None:
    """When every rule holds, the gate permits, and the permit names the evidence."""
    permit = world.promote()
    assert isinstance(permit, PromotionPermit)
    assert permit.report_digest == world.report.digest
    assert permit.admission_id == world.admission.admission_id
    assert permit.decision_record_id == world.decision.record_id
    assert permit.baseline_git_tree == TREE
    assert permit.ledger_head_id == GENESIS_ID
    payload = {k: v for k, v in permit.to_dict().items() if k != "permit_id"}
    assert permit.permit_id == stdlib_sha({**payload, "permit_id": ""})
    staged = world.stage()
    assert isinstance(staged, StagingPermit)
    assert staged.evidence_class is EvidenceClass.VERIFIED


@settings(max_examples=30)
@given(worlds(), st.data())
def test_p1_report_of_another_run(world: World, data: st.DataObject) -> None:
    """P1: a report that is not exactly this run's report."""
    other = attrs.evolve(world.run, config_digest=data.draw(digests()))
    assume(other.digest != world.run.digest)
    assert GateReason.REPORT_RUN_MISMATCH in codes(world.promote(run=other))
    assert GateReason.REPORT_RUN_MISMATCH in codes(world.stage(run=other))


def _flip(admission: RunAdmission, attempt_id: str, to: EvidenceClass | None) -> RunAdmission:
    groups = tuple(
        attrs.evolve(
            g,
            evidence_class=to,
            refusal_reasons=() if to is not None else g.refusal_reasons or ("no_drafts",),  # type: ignore[arg-type]
        )
        if attempt_id in g.attempt_ids
        else g
        for g in admission.groups
    )
    fields = {f.name: getattr(admission, f.name) for f in attrs.fields(RunAdmission)}
    del fields["admission_id"]
    return seal(RunAdmission, **{**fields, "groups": groups})


@settings(max_examples=30)
@given(worlds())
def test_p2_resealed_admission_edit(world: World) -> None:
    """P2: an admission whose class was edited and resealed does not re-derive."""
    edited = _flip(world.admission, world.attempt_id, EvidenceClass.CORROBORATED_ONLY)
    assert codes(world.promote(admission=edited)) == (GateReason.ADMISSION_MISMATCH,)
    assert codes(world.stage(admission=edited)) == (GateReason.ADMISSION_MISMATCH,)


@settings(max_examples=30)
@given(worlds())
def test_p2_flipping_any_group_to_verified_is_refused(world: World) -> None:
    """P2/P4: flipping another attempt's group to verified never permits it."""
    others = [
        a
        for g in world.admission.groups
        if g.evidence_class is not EvidenceClass.VERIFIED and not g.no_change
        for a in g.attempt_ids
    ]
    assume(others)
    target = others[0]
    flipped = _flip(world.admission, target, EvidenceClass.VERIFIED)
    outcome = world.promote(admission=flipped, attempt_id=target)
    assert GateReason.ADMISSION_MISMATCH in codes(outcome)
    assert GateReason.NOT_VERIFIED in codes(outcome)


@settings(max_examples=30)
@given(worlds())
def test_p3_attempt_without_candidate(world: World) -> None:
    """P3: an attempt the run does not have has no candidate."""
    assert GateReason.NO_CANDIDATE in codes(world.promote(attempt_id="no-such-attempt"))
    assert GateReason.NO_CANDIDATE in codes(world.stage(attempt_id="no-such-attempt"))


def _reruns(candidate: str, agreeing: int) -> CorroborationReport:
    observations = [
        RunObservation(
            index=i, status=CaptureStatus.OK, exit_code=0, output_digest=candidate,
            output_size=10, isolation=Isolation.OVERLAY, duration_ms=1,
        )
        for i in range(agreeing)
    ]  # fmt: skip
    outcome = build_consensus(observations, candidate_digest=candidate)
    assert not isinstance(outcome, ConsensusRefusal)
    return build_corroboration_report(
        outcome, command=("w",), capture_mode=CaptureMode.PATCH, network=False, timeout_ms=None
    )


@settings(max_examples=30)
@given(worlds(), st.integers(min_value=1, max_value=12))
def test_p4_no_verifier_pass_never_promotes_whatever_the_reruns(
    world: World, agreeing: int
) -> None:
    """P4: with the verifier's pass removed, no number of unanimous reruns promotes;
    the candidate is stageable only while admission gives it a class."""
    attempt = next(a for a in world.run.attempts if a.attempt_id == world.attempt_id)
    assert attempt.verification is not None
    assert attempt.manifest is not None
    no_pass = attrs.evolve(
        attempt,
        verification=attrs.evolve(attempt.verification, recommendation=Recommendation.ESCALATE),
    )
    run = attrs.evolve(
        world.run,
        attempts=tuple(no_pass if a is attempt else a for a in world.run.attempts),
    )
    report = build_evidence_report(run)
    assert isinstance(report, RunEvidenceReport)
    candidate = attempt.manifest.candidate_digest
    assert candidate is not None
    for corroborations in ({}, {candidate: _reruns(candidate, agreeing)}):
        admission = derive_run_admission(run, report, corroborations)
        assert admission is not None
        group = next(g for g in admission.groups if world.attempt_id in g.attempt_ids)
        assert group.evidence_class is not EvidenceClass.VERIFIED
        decision = record_decision(
            report, decision_id="d", decision="escalate", rationale="r",
            decider_id="alice", decided_at="2026-01-01T00:00:00Z",
        )  # fmt: skip
        assert isinstance(decision, HumanDecisionRecord)
        outcome = world.promote(
            run=run, report=report, admission=admission, corroborations=corroborations,
            decision=decision, signature=signature_for(decision, SignatureStatus.VALID),
        )  # fmt: skip
        assert GateReason.NOT_VERIFIED in codes(outcome)
        staged = world.stage(
            run=run, report=report, admission=admission, corroborations=corroborations
        )
        if group.evidence_class is EvidenceClass.CORROBORATED_ONLY:
            assert isinstance(staged, StagingPermit)
            assert staged.evidence_class is EvidenceClass.CORROBORATED_ONLY
        else:
            assert codes(staged) == (GateReason.NOT_STAGEABLE,)


@settings(max_examples=30)
@given(worlds(), st.sampled_from([Decision.REJECT, Decision.ESCALATE]))
def test_p5_decision_that_is_not_an_accept_of_this_attempt(
    world: World, decision: Decision
) -> None:
    """P5: a reject or escalate, or an accept of another attempt, or another report."""
    for other in (
        attrs.evolve(world.decision, decision=decision),
        attrs.evolve(world.decision, selected_attempt_id=None),
    ):
        resealed = seal(
            HumanDecisionRecord,
            **{
                f.name: getattr(other, f.name)
                for f in attrs.fields(HumanDecisionRecord)
                if f.name != "record_id"
            },
        )
        outcome = world.promote(
            decision=resealed, signature=signature_for(resealed, SignatureStatus.VALID)
        )
        assert codes(outcome) == (GateReason.NO_ACCEPT_DECISION,)
    assert codes(world.promote(decision=None)) == (
        GateReason.NO_ACCEPT_DECISION,
        GateReason.DECISION_UNSIGNED,
    )


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (SignatureStatus.UNSIGNED, GateReason.DECISION_UNSIGNED),
        (SignatureStatus.INVALID, GateReason.SIGNATURE_INVALID),
        (SignatureStatus.SIGNER_NOT_ALLOWED, GateReason.SIGNER_NOT_ALLOWED),
    ],
)
@settings(max_examples=30)
@given(world=worlds())
def test_p6_signature_status(world: World, status: SignatureStatus, code: GateReason) -> None:
    """P6: every signature status but valid refuses with its own code."""
    check = signature_for(world.decision, status)
    assert codes(world.promote(signature=check)) == (code,)


@settings(max_examples=30)
@given(worlds(), digests())
def test_p6_signature_over_other_bytes_or_principal(world: World, other: str) -> None:
    """P6: a valid check for other bytes or another principal is not this signature."""
    assume(other != world.signature.message_digest)
    for check in (
        attrs.evolve(world.signature, message_digest=other),
        attrs.evolve(world.signature, principal=world.decision.decider.id + "x"),
    ):
        assert codes(world.promote(signature=check)) == (GateReason.SIGNATURE_INVALID,)


@settings(max_examples=30)
@given(worlds(), st.sampled_from(["b" * 40, "c" * 64, None]))
def test_p7_branch_tip_is_not_the_baseline(world: World, tree: str | None) -> None:
    """P7: a tip whose tree is not the run's baseline tree (or no tip, or no baseline)."""
    assert codes(world.promote(branch_tree=tree)) == (GateReason.BRANCH_NOT_BASELINE,)
    assert codes(world.stage(base_tree=tree)) == (GateReason.BRANCH_NOT_BASELINE,)
    assert world.run.provenance is not None
    unnamed = attrs.evolve(
        world.run, provenance=attrs.evolve(world.run.provenance, baseline_git_tree=None)
    )
    assert GateReason.BRANCH_NOT_BASELINE in codes(world.promote(run=unnamed))


@settings(max_examples=30)
@given(worlds())
def test_p8_ledger_broken(world: World) -> None:
    """P8: a broken ledger refuses staging and promotion."""
    broken = seal(
        LedgerRefusal,
        position=1,
        entry_id="",
        reason_codes=(LedgerReason.LINK_BROKEN,),
        explanation="entry 1: prev_id is not the previous entry's id",
    )
    assert codes(world.promote(ledger=broken)) == (GateReason.LEDGER_BROKEN,)
    assert codes(world.stage(ledger=broken)) == (GateReason.LEDGER_BROKEN,)


def test_refusal_identity_recomputed() -> None:
    """A GateRefusal's id self-seals over every field but the explanation."""
    refusal = seal(
        GateRefusal,
        action="promote",
        run_id="r",
        attempt_id="a",
        report_digest=None,
        reason_codes=(GateReason.LEDGER_BROKEN, GateReason.BRANCH_MOVED),
        explanation="prose",
    )
    assert refusal.refusal_id == stdlib_sha(
        {
            "refusal_id": "",
            "action": "promote",
            "run_id": "r",
            "attempt_id": "a",
            "report_digest": None,
            "reason_codes": ["ledger_broken", "branch_moved"],
        }
    )
    assert GateRefusal.from_dict(refusal.to_dict()) == refusal


# -- branches: a run naming attempts its report lacks; a run without provenance ----------


@settings(max_examples=20)
@given(worlds())
def test_a_run_naming_a_candidate_its_report_lacks_derives_no_admission(world: World) -> None:
    """The run's candidate belongs to an attempt the report does not have: nothing is
    derived, so the stored admission does not match and no candidate group exists."""
    index = next(i for i, a in enumerate(world.run.attempts) if a.attempt_id == world.attempt_id)
    renamed = attrs.evolve(world.run.attempts[index], attempt_id="zz-not-in-the-report")
    attempts = (*world.run.attempts[:index], renamed, *world.run.attempts[index + 1 :])
    run = attrs.evolve(world.run, attempts=attempts)
    assert derive_run_admission(run, world.report, {}) is None
    outcome = world.stage(run=run)
    assert isinstance(outcome, GateRefusal)
    assert GateReason.ADMISSION_MISMATCH in outcome.reason_codes
    assert GateReason.NO_CANDIDATE in outcome.reason_codes


@settings(max_examples=10)
@given(worlds())
def test_a_run_without_provenance_has_no_worker_contexts(world: World) -> None:
    contexts = contexts_of(world.run)
    assert set(contexts) == {a.attempt_id for a in world.run.attempts}
    assert world.run.provenance is not None
    assert set(contexts.values()) <= {i.digest for i in world.run.provenance.inputs}
    assert contexts_of(attrs.evolve(world.run, provenance=None)) == {}


# --- P4's screen exception and P4b (issue 18 items 5, 6) -------------------------------

FINDING = ScreenFinding(rule="environment-sniffing", path="stats.py", line=12)


def suspicious(
    world: World,
    rationale: str,
    *,
    other_failed: bool = False,
    worker: WorkerStatus = WorkerStatus.SUCCEEDED,
    oracle: bool = False,
) -> World:
    """``world`` with its chosen attempt held back only by the static screen (one
    finding): every other required check passed, recommendation insufficient."""
    index = next(i for i, a in enumerate(world.run.attempts) if a.attempt_id == world.attempt_id)
    attempt = world.run.attempts[index]
    assert attempt.verification is not None
    assert attempt.manifest is not None
    checks = (
        *attempt.verification.checks,
        CheckSummary(id=SCREEN_CHECK_ID, required=True, status=CheckStatus.INCONCLUSIVE),
    )
    if other_failed:
        checks = (CheckSummary(id="extra", required=True, status=CheckStatus.FAILED), *checks)
    screen = CheckRun(
        check_id=SCREEN_CHECK_ID,
        sandbox=None,
        reason=CheckReason.SUSPICIOUS_CODE,
        trust=TrustLevel.STATIC,
        findings=(FINDING,),
    )
    extra = (CheckRun(check_id="o", sandbox=None, reason=None, trust=TrustLevel.ORACLE),)
    chosen = attrs.evolve(
        attempt,
        manifest=attrs.evolve(attempt.manifest, worker_status=worker),
        verification=attrs.evolve(
            attempt.verification,
            recommendation=Recommendation.INSUFFICIENT_EVIDENCE,
            checks=checks,
        ),
        # Only the oracle run added here passes with oracle trust (P4b is decided by it).
        check_runs=(
            *(r for r in attempt.check_runs if r.trust is not TrustLevel.ORACLE),
            screen,
            *(extra if oracle else ()),
        ),
    )
    run = attrs.evolve(
        world.run, attempts=tuple(chosen if a is attempt else a for a in world.run.attempts)
    )
    report = build_evidence_report(run)
    assert isinstance(report, RunEvidenceReport)
    admission = derive_run_admission(run, report, {})
    assert admission is not None
    decision = record_decision(
        report,
        decision_id="d",
        decision="accept",
        rationale=rationale,
        decider_id=world.decision.decider.id,
        decided_at="2026-01-01T00:00:00Z",
        selected_attempt_id=world.attempt_id,
    )
    assert isinstance(decision, HumanDecisionRecord)
    return World(
        run=run,
        report=report,
        admission=admission,
        attempt_id=world.attempt_id,
        decision=decision,
        signature=signature_for(decision, SignatureStatus.VALID),
    )


ACKNOWLEDGES = f"read the hostname sniff: {FINDING.finding_id}; harmless logging"


@settings(max_examples=20)
@given(worlds())
def test_p4_a_signed_decision_naming_every_screen_finding_promotes(world: World) -> None:
    """A candidate held back only by the screen: never verified (the admission says so,
    staging refuses it unless reruns agree), promoted only by an accept decision whose
    rationale names each finding id."""
    held = suspicious(world, ACKNOWLEDGES)
    group = next(g for g in held.admission.groups if held.attempt_id in g.attempt_ids)
    assert group.evidence_class is not EvidenceClass.VERIFIED
    assert isinstance(held.promote(), PromotionPermit)


@settings(max_examples=20)
@given(worlds())
def test_p4_the_screen_exception_takes_nothing_less(world: World) -> None:
    """Not naming the finding (or naming another line of it), another failed required
    check, a worker that did not report success, or no decision: not verified."""
    unnamed = suspicious(world, "checked, all fine")
    assert GateReason.NOT_VERIFIED in codes(unnamed.promote())
    prefix = suspicious(world, ACKNOWLEDGES.replace(":12", ":1"))
    assert GateReason.NOT_VERIFIED in codes(prefix.promote())
    failed = suspicious(world, ACKNOWLEDGES, other_failed=True)
    assert GateReason.NOT_VERIFIED in codes(failed.promote())
    crashed = suspicious(world, ACKNOWLEDGES, worker=WorkerStatus.FAILED)
    assert GateReason.NOT_VERIFIED in codes(crashed.promote())
    held = suspicious(world, ACKNOWLEDGES)
    assert GateReason.NOT_VERIFIED in codes(held.promote(decision=None))


@settings(max_examples=20)
@given(worlds())
def test_p4b_a_required_trust_level_must_have_passed(world: World) -> None:
    """``require_trust=oracle`` refuses a group with no passed oracle check and permits
    one with it."""
    held = suspicious(world, ACKNOWLEDGES)
    assert GateReason.TRUST_NOT_MET in codes(held.promote(require_trust=TrustLevel.ORACLE))
    held = suspicious(world, ACKNOWLEDGES, oracle=True)
    assert isinstance(held.promote(require_trust=TrustLevel.ORACLE), PromotionPermit)


@settings(max_examples=10)
@given(worlds())
def test_misuse_names_the_parameter(world: World) -> None:
    """Issue 20: a wrong argument raises the kernel's ParameterTypeError naming it."""
    cases: list[tuple[dict[str, Any], str]] = [
        ({"run": None}, "run"),
        ({"ledger": "intact"}, "ledger"),
        ({"corroborations": {"a": 1}}, "corroborations"),
        ({"attempt_id": 5}, "attempt_id"),
        ({"signature": None}, "signature"),
    ]
    for changes, name in cases:
        with pytest.raises(ParameterTypeError, match=name):
            world.promote(**changes)
    with pytest.raises(ParameterTypeError, match="base_tree"):
        world.stage(base_tree=b"tree")


@settings(max_examples=10)
@given(worlds())
def test_every_refusal_says_what_was_expected_and_found(world: World) -> None:
    broken = verify_chain([("x",) * 6], recorded_head=None)
    outcome = world.promote(
        branch_tree="other",
        ledger=broken,
        signature=signature_for(world.decision, SignatureStatus.SIGNER_NOT_ALLOWED),
        attempt_id="nobody",
    )  # fmt: skip
    assert isinstance(outcome, GateRefusal)
    text = outcome.explanation
    for code in outcome.reason_codes:
        assert f"{code}: expected" in text or f"{code}: found" in text, code
    assert "found other" in text
    assert "found accept selecting" in text
    unsigned = world.promote(decision=None)
    assert isinstance(unsigned, GateRefusal)
    assert "found no decision record" in unsigned.explanation
    forged = world.promote(signature=attrs.evolve(world.signature, status=SignatureStatus.INVALID))
    assert isinstance(forged, GateRefusal)
    assert "that is invalid" in forged.explanation


@settings(max_examples=10)
@given(worlds())
def test_an_evolved_permit_is_refused(world: World) -> None:
    """`attrs.evolve` keeps the sealed id: the permit no longer is its content."""
    permit = world.promote()
    assert isinstance(permit, PromotionPermit)
    with pytest.raises(FieldError, match="permit_id"):
        attrs.evolve(permit, attempt_id="y")
    staged = world.stage()
    assert isinstance(staged, StagingPermit)
    with pytest.raises(FieldError, match="permit_id"):
        attrs.evolve(staged, candidate_digest="f" * 64)
    assert PromotionPermit.from_dict(permit.to_dict()) == permit
