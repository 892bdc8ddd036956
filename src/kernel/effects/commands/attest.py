"""`kernel attest`: an in-toto Statement v1 for one attempt's candidate (ADR-0006 §6).

    kernel attest --run-dir results/demo --attempt attempt-1 [--decision FILE]
                  [--output results/demo/attestations/attempt-1.intoto.json]

The subject is the candidate patch (its sha256, named ``patches/<digest>.patch``); the
predicate (``predicateType`` `PREDICATE_TYPE`) carries what supply-chain tooling needs
to weigh it: the run and report digests, the re-derived admission id and evidence
class, the independent verifier's checks, and the decision record's id when a
decision on exactly this report is given. The statement is written as canonical JSON,
unsigned (sign it with the tool your pipeline uses, e.g. an in-toto/DSSE signer).

Nothing stored is trusted: the report must be exactly the run's report and the stored
admission must re-derive, else the attestation is refused.

Exit codes: 0 written; 1 refused (reason codes on one line); 2 unusable input.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Final

from kernel.codec import compute_id
from kernel.decision import DecisionRefusal, HumanDecisionRecord, verify_decision
from kernel.effects.commands.options import add_results_root
from kernel.effects.documents import plan_outputs
from kernel.effects.exit_status import ExitStatus
from kernel.effects.files import load_json, write_canonical_json
from kernel.effects.run_folder import RunFolder, load_run_folder
from kernel.errors import ConfigError, RecordError
from kernel.evidence_report import ReportCheck, check_evidence_report
from kernel.gate import GateReason, derive_run_admission

__all__ = ["PREDICATE_TYPE", "STATEMENT_TYPE", "register", "run_attest", "statement"]

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE: Final = "https://evidence-kernel.dev/attestation/candidate/v1"


def statement(
    folder: RunFolder, attempt_id: str, decision: HumanDecisionRecord | None
) -> dict[str, Any] | list[GateReason]:
    """The statement for ``attempt_id``, or the reasons it cannot be made."""
    reasons: list[GateReason] = []
    if not isinstance(check_evidence_report(folder.report, run=folder.run), ReportCheck):
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


def run_attest(args: argparse.Namespace) -> int:
    """Write the statement; 1 when the evidence does not hold together."""
    folder = load_run_folder(args.run_dir)
    decision = None
    inputs: list[Path | str] = [Path(args.run_dir) / "run.json"]
    if args.decision is not None:
        inputs.append(args.decision)
        try:
            decision = HumanDecisionRecord.from_dict(load_json(args.decision, what="decision"))
        except RecordError as e:
            raise ConfigError(f"{args.decision}: {e}") from e
    output = args.output or (Path(args.run_dir) / "attestations" / f"{args.attempt}.intoto.json")
    (target,) = plan_outputs(args.results_root, [output], inputs)
    if target is None:  # pragma: no cover - plan_outputs maps a path to a path
        raise ConfigError("no output")
    outcome = statement(folder, args.attempt, decision)
    if isinstance(outcome, list):
        print(f"kernel attest: refused ({', '.join(outcome)})")
        return ExitStatus.REFUSED
    write_canonical_json(target, outcome)
    print(f"wrote {target} (subject sha256:{outcome['subject'][0]['digest']['sha256']})")
    return ExitStatus.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``attest`` verb."""
    parser = subparsers.add_parser(
        "attest",
        help="write an in-toto Statement v1 for an attempt's candidate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--run-dir", required=True, help="a `kernel run` output folder")
    parser.add_argument("--attempt", required=True, help="the attempt whose candidate to attest")
    parser.add_argument("--decision", help="a decision record on the run's report")
    parser.add_argument("--output", help="default: <run-dir>/attestations/<attempt>.intoto.json")
    add_results_root(parser)
    parser.set_defaults(handler=run_attest)
