"""Self-test checks for run evidence reports and human decision records.

The seed's eight checks, then the decision checks. Each builds its own fixtures in a
private temporary folder (nothing depends on the source checkout) and raises
`SelfTestFailure` with what it saw.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from kernel.decide.decision import DecisionReason, DecisionRefusal, record_decision, verify_decision
from kernel.effects.files import write_canonical_json
from kernel.effects.orchestrate import run_config
from kernel.effects.sandbox.scratch import private_tempdir
from kernel.errors import SelfTestFailure
from kernel.records.identity import canonical_json, sha256_bytes, sha256_hex
from kernel.run.record import RunRecord
from kernel.run.report import (
    EvidenceState,
    ReportReason,
    ReportRefusal,
    RunEvidenceReport,
    build_evidence_report,
    check_evidence_report,
)
from kernel.run.verification import WorkUnit

__all__ = ["REPORT_CHECKS", "fixture_tree"]

_GOOD = b'{\n  "schema_version": "0.1",\n  "answer": 42,\n  "status": "ready"\n}\n'
_BAD = b'{\n  "schema_version": "0.1",\n  "answer": 41,\n  "status": "ready"\n}\n'
_WORK_UNIT: dict[str, Any] = {
    "id": "verification/local-smoke",
    "version": 1,
    "objective": "Verify an isolated candidate artifact with verifier-owned checks.",
    "inputs": [],
    "required_validators": ["artifact-digest", "candidate-scope", "independent-acceptance"],
}


@contextmanager
def fixture_tree() -> Iterator[Path]:
    """A temporary folder with a work unit, a policy, good and bad candidates and the
    configs ``good-vs-bad.json`` and ``worker-failure.json``."""
    with private_tempdir("selftest") as tmp:
        base = Path(tmp)
        unit = WorkUnit.from_dict(_WORK_UNIT)
        write_canonical_json(base / "work-unit.json", _WORK_UNIT)
        write_canonical_json(
            base / "policy.json",
            {
                "kind": "kernel-fixture-verifier-policy",
                "schema_version": "1",
                "id": "verifier-smoke-policy",
                "candidate_artifact_id": "candidate-result",
                "allowed_files": ["candidate.json"],
                "max_candidate_bytes": 4096,
                "required_json": {"schema_version": "0.1", "answer": 42, "status": "ready"},
            },
        )
        for name, data in (("good", _GOOD), ("bad", _BAD)):
            root = base / name / "candidate-root"
            root.mkdir(parents=True)
            (root / "candidate.json").write_bytes(data)
            write_canonical_json(
                base / name / "result-manifest.json",
                {
                    "id": f"verification/local-smoke-result/{name}",
                    "work_unit_id": unit.id,
                    "work_unit_version": unit.version,
                    "work_unit_digest": unit.digest,
                    "attempt": 1,
                    "worker": {
                        "id": f"fixture-{name}-worker",
                        "type": "system",
                        "adapter": "fixture-result",
                        "adapter_version": "1",
                    },
                    "status": "succeeded",
                    "artifacts": [
                        {
                            "id": "candidate-result",
                            "locator": "candidate.json",
                            "digest": sha256_bytes(data),
                            "media_type": "application/json",
                        }
                    ],
                    "claims": ["The candidate is ready for independent verification."],
                },
            )

        def attempt(index: int, name: str) -> dict[str, str]:
            return {
                "attempt_id": f"attempt-{index:03d}",
                "adapter": "fixture-result",
                "result_manifest": f"{name}/result-manifest.json",
                "candidate_root": f"{name}/candidate-root",
            }

        failure = {
            "attempt_id": "attempt-002",
            "adapter": "fixture-failure",
            "failure": "simulated worker failure before ResultManifest",
        }
        for config, attempts in (
            ("good-vs-bad", [attempt(1, "good"), attempt(2, "bad")]),
            ("worker-failure", [attempt(1, "good"), failure]),
        ):
            write_canonical_json(
                base / f"{config}.json",
                {
                    "kind": "kernel-orchestration-config",
                    "schema_version": "1",
                    "run_id": f"self-test/{config}",
                    "work_unit": "work-unit.json",
                    "verifier": {"adapter": "fixture-policy", "policy": "policy.json"},
                    "attempts": attempts,
                },
            )
        yield base


@functools.cache
def _runs() -> dict[str, RunRecord]:
    """Each fixture config run once, plus a second run of ``good-vs-bad`` for the
    replay check, all from one fixture tree (written atomically, once). The runs are
    deterministic, so the checks share them: the self-test costs three runs, not one
    fixture tree and one run per check."""
    with fixture_tree() as base:
        return {
            "good-vs-bad": run_config(base / "good-vs-bad.json"),
            "good-vs-bad/replay": run_config(base / "good-vs-bad.json"),
            "worker-failure": run_config(base / "worker-failure.json"),
        }


def _report(config: str) -> tuple[RunRecord, RunEvidenceReport]:
    run = _runs()[config]
    report = build_evidence_report(run)
    if not isinstance(report, RunEvidenceReport):
        raise SelfTestFailure(f"report refused: {report}")
    return run, report


def _states(report: RunEvidenceReport) -> list[EvidenceState]:
    return [a.evidence_state for a in report.attempts]


def _one_support_one_rejection() -> None:
    _, report = _report("good-vs-bad")
    states = _states(report)
    if not (states == [EvidenceState.SUPPORTED, EvidenceState.REJECTED]):
        raise SelfTestFailure(states)
    if not ((report.summary.supported, report.summary.rejected) == (1, 1)):
        raise SelfTestFailure(report.summary)


def _disagreement_visible() -> None:
    _, report = _report("good-vs-bad")
    if not report.summary.verification_disagreement:
        raise SelfTestFailure(report.summary)


def _decision_pending() -> None:
    _, report = _report("good-vs-bad")
    pending = report.human_decision
    if not (pending.status == "pending"):
        raise SelfTestFailure(pending)
    if pending.selected_attempt_id is not None:
        raise SelfTestFailure(pending)


def _no_automatic_selection() -> None:
    _, report = _report("good-vs-bad")
    if any(report.authority.to_dict().values()):
        raise SelfTestFailure(report.authority)


def _worker_failure_visible() -> None:
    _, report = _report("worker-failure")
    states = _states(report)
    if not (states == [EvidenceState.SUPPORTED, EvidenceState.WORKER_ERROR]):
        raise SelfTestFailure(states)
    if not (report.summary.control_errors == 1):
        raise SelfTestFailure(report.summary)
    if not (report.attempts[0].verification is not None):
        raise SelfTestFailure("surviving evidence was dropped")


def _replay_matches() -> None:
    first, second = _runs()["good-vs-bad"], _runs()["good-vs-bad/replay"]
    if not (canonical_json(first.to_dict()) == canonical_json(second.to_dict())):
        raise SelfTestFailure("bytes differ")
    if not (first.digest == second.digest):
        raise SelfTestFailure("expected first.digest == second.digest")


def _tamper_fails_replay() -> None:
    run, _ = _report("good-vs-bad")
    saved = run.to_dict()
    saved["attempts"][1]["verification"]["recommendation"] = "accept_candidate"
    if not (sha256_hex(saved) != run.digest):
        raise SelfTestFailure("a tampered run record still matches")


def _drift_rejected() -> None:
    run, _ = _report("good-vs-bad")
    attempt = run.attempts[0]
    if not (attempt.verification is not None):
        raise SelfTestFailure("expected attempt.verification is not None")
    drifted = attrs.evolve(
        attempt,
        verification=attrs.evolve(attempt.verification, result_manifest_digest="0" * 64),
    )
    outcome = build_evidence_report(attrs.evolve(run, attempts=(drifted, *run.attempts[1:])))
    if not isinstance(outcome, ReportRefusal):
        raise SelfTestFailure("drift produced a report")
    if not (outcome.reason_codes == (ReportReason.VERIFICATION_MANIFEST_DRIFT,)):
        raise SelfTestFailure(outcome)


_DECIDE: dict[str, Any] = {
    "decision_id": "self-test/decision-1",
    "rationale": "attempt-001 passed every required check",
    "decider_id": "reviewer-1",
    "decided_at": "2026-01-01T00:00:00Z",
}


def _decision_binds() -> None:
    _, report = _report("good-vs-bad")
    record = record_decision(
        report, decision="accept", selected_attempt_id="attempt-001", **_DECIDE
    )
    if isinstance(record, DecisionRefusal):
        raise SelfTestFailure(record)
    if not (record.evidence_report.digest == report.digest):
        raise SelfTestFailure("expected record.evidence_report.digest == report.digest")
    if isinstance(verify_decision(record, report), DecisionRefusal):
        raise SelfTestFailure(
            "expected not isinstance(verify_decision(record, report), DecisionRefusal)"
        )


def _edited_report_fails_verify() -> None:
    _, report = _report("good-vs-bad")
    record = record_decision(report, decision="reject", **_DECIDE)
    if isinstance(record, DecisionRefusal):
        raise SelfTestFailure(record)
    edited = attrs.evolve(report, run_id="self-test/other-run")
    outcome = verify_decision(record, edited)
    if not isinstance(outcome, DecisionRefusal):
        raise SelfTestFailure("an edited report verified")
    if DecisionReason.REPORT_DIGEST not in outcome.reason_codes:
        raise SelfTestFailure(outcome)


def _report_vocabulary_refused() -> None:
    _, report = _report("good-vs-bad")
    outcome = record_decision(
        report, decision="accept_candidate", selected_attempt_id="attempt-001", **_DECIDE
    )
    if not isinstance(outcome, DecisionRefusal):
        raise SelfTestFailure("report vocabulary was recorded")
    if not (outcome.reason_codes == (DecisionReason.REPORT_VOCABULARY,)):
        raise SelfTestFailure(outcome)


def _forged_report_refused() -> None:
    _, report = _report("good-vs-bad")
    forged_attempt = attrs.evolve(report.attempts[1], evidence_state=EvidenceState.SUPPORTED)
    forged = attrs.evolve(
        report,
        attempts=(report.attempts[0], forged_attempt),
        summary=attrs.evolve(report.summary, supported=2, rejected=0),
    )
    checked = check_evidence_report(forged)
    if not isinstance(checked, ReportRefusal):
        raise SelfTestFailure("a relabelled report checked")
    if ReportReason.EVIDENCE_STATE not in checked.reason_codes:
        raise SelfTestFailure(checked)
    outcome = record_decision(
        forged, decision="accept", selected_attempt_id="attempt-002", **_DECIDE
    )
    if not isinstance(outcome, DecisionRefusal):
        raise SelfTestFailure("a forged report was decided on")
    if not (outcome.reason_codes == (DecisionReason.REPORT_INCONSISTENT,)):
        raise SelfTestFailure(outcome)


def _unknown_attempt_refused() -> None:
    _, report = _report("good-vs-bad")
    outcome = record_decision(
        report, decision="accept", selected_attempt_id="attempt-999", **_DECIDE
    )
    if not isinstance(outcome, DecisionRefusal):
        raise SelfTestFailure("an unknown attempt was recorded")
    if not (outcome.reason_codes == (DecisionReason.UNKNOWN_ATTEMPT,)):
        raise SelfTestFailure(outcome)


REPORT_CHECKS: tuple[tuple[str, Callable[[], None]], ...] = (
    (
        "report: known-good and known-bad attempts stay one support + one rejection",
        _one_support_one_rejection,
    ),
    ("report: support/reject disagreement is visible", _disagreement_visible),
    ("report: the human integration decision stays pending", _decision_pending),
    ("report: automatic candidate selection stays disabled", _no_automatic_selection),
    (
        "report: a peer worker failure stays visible, surviving evidence is kept",
        _worker_failure_visible,
    ),
    ("report: replaying the same config matches the saved-run digest", _replay_matches),
    ("report: a tampered saved run fails replay equality", _tamper_fails_replay),
    (
        "report: manifest/verification digest drift is refused before a report exists",
        _drift_rejected,
    ),
    ("decision: a recorded decision binds to the report digest and verifies", _decision_binds),
    ("decision: an edited report fails decision verify", _edited_report_fails_verify),
    ("decision: the report's own vocabulary is refused as a decision", _report_vocabulary_refused),
    (
        "decision: a relabelled report is refused by check_evidence_report and record",
        _forged_report_refused,
    ),
    ("decision: an unknown selected attempt is refused", _unknown_attempt_refused),
)
