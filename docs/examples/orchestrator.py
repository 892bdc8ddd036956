"""An orchestrator that drives kernel as a library: run, read the evidence, decide.

    python docs/examples/orchestrator.py CONFIG OUTPUT_DIR RESULTS_ROOT DECIDER

It runs the whole pipeline (attempts, verifier, report, reruns, admission, views),
picks nothing by itself: it records an ``escalate`` decision unless exactly one
candidate group is ``verified``, and then an ``accept`` of that group's first attempt.
Nothing here imports a CLI module (`kernel.effects.commands`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from kernel import DecisionRefusal, EvidenceClass, record_decision, verify_decision
from kernel.effects.documents import load_report
from kernel.effects.files import write_canonical_json
from kernel.effects.pipeline import run_pipeline


def main(config: str, output_dir: str, results_root: str, decider: str) -> int:
    result = run_pipeline(config, output_dir, results_root=results_root, reruns=2)
    if result.replay is not None and not result.replay.match:
        print(f"replay mismatch at {result.replay.first_difference}: not deciding")
        return 1
    # Decide on the report as saved, the way a human reviewer would read it.
    report = load_report(result.files["evidence.json"])
    verified = [
        group for group in result.admission.groups if group.evidence_class is EvidenceClass.VERIFIED
    ]
    accept = len(verified) == 1
    decision = record_decision(
        report,
        decision_id=f"{report.run_id}/auto-1",
        decision="accept" if accept else "escalate",
        rationale="exactly one verified candidate" if accept else "no single verified candidate",
        decider_id=decider,
        decided_at="2026-01-01T00:00:00Z",
        selected_attempt_id=verified[0].attempt_ids[0] if accept else None,
    )
    if isinstance(decision, DecisionRefusal):
        print(f"decision refused: {decision.explanation}")
        return 1
    checked = verify_decision(decision, report)
    print(f"{report.run_id}: {type(decision).__name__}, {type(checked).__name__}")
    if accept:
        write_canonical_json(Path(output_dir) / "decision.json", decision.to_dict())
        print(f"accepted {verified[0].candidate_digest[:12]} ({verified[0].attempt_ids[0]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:5]))
