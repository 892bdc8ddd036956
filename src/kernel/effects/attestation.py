"""In-toto attestations of a run's candidates, as a library call (ADR-0006 §6).

`statement` builds an in-toto Statement v1 for one attempt's candidate from a run
folder (`kernel.effects.run_folder`); nothing stored is trusted: the report must be
exactly the run's report and the stored admission must re-derive, else it returns the
reasons it cannot be made. `kernel attest` writes it.
"""

from __future__ import annotations

from typing import Any, Final

from kernel.decide.decision import DecisionRefusal, HumanDecisionRecord, verify_decision
from kernel.decide.gate import GateReason, derive_run_admission
from kernel.effects.run_folder import RunFolder
from kernel.records.codec import compute_id
from kernel.run.report import ReportVerified, check_evidence_report

__all__ = ["PREDICATE_TYPE", "STATEMENT_TYPE", "statement"]

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE: Final = "https://evidence-kernel.dev/attestation/candidate/v1"


def statement(
    folder: RunFolder, attempt_id: str, decision: HumanDecisionRecord | None
) -> dict[str, Any] | list[GateReason]:
    """The statement for ``attempt_id``, or the reasons it cannot be made."""
    reasons: list[GateReason] = []
    if not isinstance(check_evidence_report(folder.report, run=folder.run), ReportVerified):
        reasons.append(GateReason.REPORT_RUN_MISMATCH)
    derived = derive_run_admission(folder.run, folder.report, folder.corroborations)
    if (
        derived is None
        or compute_id(folder.admission) != folder.admission.admission_id
        or derived.admission_id != folder.admission.admission_id
    ):
        reasons.append(GateReason.ADMISSION_MISMATCH)
    group = None
    if derived is not None:
        group = next((g for g in derived.groups if attempt_id in g.attempt_ids), None)
    if group is None:
        reasons.append(GateReason.NO_CANDIDATE)
    if decision is not None and isinstance(
        verify_decision(decision, folder.report), DecisionRefusal
    ):
        reasons.append(GateReason.NO_ACCEPT_DECISION)
    if reasons or group is None or derived is None:
        return reasons
    attempt = next(a for a in folder.run.attempts if a.attempt_id == attempt_id)
    verification = attempt.verification
    provenance = folder.run.provenance
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {
                "name": f"patches/{group.candidate_digest}.patch",
                "digest": {"sha256": group.candidate_digest},
            }
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "run": {"run_id": folder.run.run_id, "run_digest": folder.run.digest},
            "attempt_id": attempt_id,
            "report_digest": folder.report.digest,
            "admission_id": derived.admission_id,
            "evidence_class": None if group.evidence_class is None else str(group.evidence_class),
            "admission_refusal_reasons": [str(r) for r in group.refusal_reasons],
            "baseline_git_tree": None if provenance is None else provenance.baseline_git_tree,
            "verifier": None
            if verification is None
            else {
                "verification_id": verification.id,
                "verifier_id": verification.verifier_id,
                "status": str(verification.status),
                "recommendation": str(verification.recommendation),
                "checks": [
                    {"id": c.id, "required": c.required, "status": str(c.status)}
                    for c in verification.checks
                ],
            },
            "decision": None
            if decision is None
            else {
                "record_id": decision.record_id,
                "decision_id": decision.decision_id,
                "decision": str(decision.decision),
                "decider_id": decision.decider.id,
                "selected_attempt_id": decision.selected_attempt_id,
            },
        },
    }
