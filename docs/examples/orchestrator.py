"""An orchestrator that drives kernel as a library: run, decide, sign, promote.

    python docs/examples/orchestrator.py CONFIG OUTPUT_DIR RESULTS_ROOT DECIDER \
        REPO SIGNING_KEY ALLOWED_SIGNERS LEDGER

It runs the whole pipeline (attempts, verifier, report, reruns, admission, views) and
picks nothing by itself: unless exactly one candidate group is ``verified`` it records
an ``escalate`` and stops; otherwise it records an ``accept`` of that group's first
attempt, signs it with DECIDER's key, and asks the gate to promote it onto REPO's
``main`` (every step in the ledger). Nothing here imports a CLI module.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kernel import DecisionRefusal, EvidenceClass, record_decision
from kernel.effects.documents import load_report
from kernel.effects.git import Repo
from kernel.effects.ledger_store import opened
from kernel.effects.pipeline import run_pipeline
from kernel.effects.promotion import Refused, promote
from kernel.effects.run_folder import load_run_folder
from kernel.effects.signing import check_decision_signature, sign_decision


def main(config: str, out: str, root: str, decider: str, *promotion: str) -> int:
    result = run_pipeline(config, out, results_root=root, reruns=2)
    if result.replay is not None and not result.replay.match:
        print(f"replay mismatch at {result.replay.first_difference}: not deciding")
        return 1
    report = load_report(result.files["evidence.json"])  # decide on the saved report
    verified = [g for g in result.admission.groups if g.evidence_class is EvidenceClass.VERIFIED]
    accept = len(verified) == 1
    decision = record_decision(
        report,
        decision_id=f"{report.run_id}/auto-1",
        decision="accept" if accept else "escalate",
        rationale="exactly one verified candidate" if accept else "no single verified one",
        decider_id=decider,
        decided_at="2026-01-01T00:00:00Z",
        selected_attempt_id=verified[0].attempt_ids[0] if accept else None,
    )
    if isinstance(decision, DecisionRefusal):
        print(f"decision refused: {decision.explanation}")
        return 1
    print(f"{report.run_id}: {decision.decision} ({decision.rationale})")
    if not accept or not promotion:
        return 0
    repo, key, allowed, ledger = promotion
    signature = check_decision_signature(
        decision, sign_decision(decision, Path(key)), Path(allowed)
    )
    with opened(ledger) as store:
        outcome = promote(
            load_run_folder(out),
            Repo(repo),
            store,
            branch="refs/heads/main",
            attempt_id=decision.selected_attempt_id or "",
            decision=decision,
            signature=signature,
        )
    if isinstance(outcome, Refused):
        print(f"promotion refused: {', '.join(outcome.refusal.reason_codes)}")
        return 1
    print(f"promoted {outcome.permit.attempt_id}: {outcome.tip[:12]} -> {outcome.commit[:12]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
