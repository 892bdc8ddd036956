"""IDKMesh v0.1 evidence reports and human decision records, read strictly, and the check
that an IDKMesh decision agrees with the run it decided on (`verify_idkmesh_decision`);
the rules of reading are `kernel.importers.idkmesh`'s."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

from kernel.decide.decision import Decider, DeciderType, Decision, DecisionReason, EvidenceReportRef
from kernel.errors import CanonicalizationError, RecordError
from kernel.importers.idkmesh import (
    _DECISION_ID,
    _R,
    IDKMESH_RUN_KIND,
    parse_prefixed_digest,
    require_kind,
)
from kernel.records.identity import sha256_hex
from kernel.run.record import (
    AttemptRecord,
    AttemptState,
    RunRecord,
)
from kernel.run.report import EvidenceState
from kernel.run.verification import Recommendation

__all__ = [
    "IDKMESH_DECISION_KIND",
    "IDKMESH_REPORT_KIND",
    "IdkmeshDecision",
    "IdkmeshReport",
    "IdkmeshReportAttempt",
    "read_idkmesh_decision",
    "read_idkmesh_report",
    "verify_idkmesh_decision",
]


IDKMESH_REPORT_KIND: Final = "idkmesh-run-evidence-report"
IDKMESH_DECISION_KIND: Final = "idkmesh-human-decision-record"
_DATE_TIME: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", re.ASCII
)


@attrs.frozen(kw_only=True)
class IdkmeshReportAttempt:
    """One attempt of an IDKMesh evidence report, as its report states it."""

    attempt_id: str
    """Attempt id."""
    state: AttemptState
    """Control state (verified or an error state)."""
    evidence_state: EvidenceState
    """The evidence state the report claims."""
    recommendation: Recommendation | None
    """The verifier's recommendation, when a verifier ran."""


@attrs.frozen(kw_only=True)
class IdkmeshReport:
    """An IDKMesh v0.1 run evidence report, read strictly (``idkmesh-run-evidence-report``)."""

    run_id: str
    """Run id."""
    digest: str
    """SHA-256 of the canonical JSON of the whole document (what a decision names)."""
    source_run_digest: str
    """The run record it claims to report on (bare hex)."""
    source_config_digest: str
    """The config of that run (bare hex)."""
    attempts: tuple[IdkmeshReportAttempt, ...]
    """Attempts in order."""
    summary: tuple[tuple[str, int | bool], ...]
    """The report's summary, sorted by name."""


@attrs.frozen(kw_only=True)
class IdkmeshDecision:
    """An IDKMesh v0.1 human decision record, read strictly."""

    decision_id: str
    """The decider's id for the decision."""
    decision: Decision
    """accept, reject or escalate."""
    selected_attempt_id: str | None
    """The attempt decided on, or None (the run as a whole)."""
    report: EvidenceReportRef
    """The report decided on (digest bare hex)."""
    decider: Decider
    """Who decided (``display_name`` kept)."""
    decided_at: str
    """When (RFC 3339)."""
    rationale: str
    """Why."""


def _optional_object(value: object, path: str, keys: set[str]) -> Mapping[str, Any] | None:
    return None if value is None else _R.obj(value, path, keys)


def _report_attempt(item: object, index: int) -> IdkmeshReportAttempt:
    """One attempt of an IDKMesh report (``index``: its position, order ``index + 1``)."""
    where = f"$.attempts[{index}]"
    keys = {"attempt_id", "error", "evidence_state", "order", "state", "verifier", "worker",
            "worker_adapter"}  # fmt: skip
    entry = _R.obj(item, where, keys)
    verifier = _optional_object(
        entry["verifier"],
        f"{where}.verifier",
        {"checks", "id", "recommendation", "status", "verification_semantic_digest"},
    )
    _optional_object(
        entry["worker"],
        f"{where}.worker",
        {"id", "result_manifest_digest", "result_manifest_id", "status"},
    )
    if _R.integer(entry["order"], f"{where}.order") != index + 1:
        raise RecordError(f"{where}.order", f"is not the position {index + 1}")
    return IdkmeshReportAttempt(
        attempt_id=_R.string(entry["attempt_id"], f"{where}.attempt_id"),
        state=_R.member(AttemptState, entry["state"], f"{where}.state"),
        evidence_state=_R.member(EvidenceState, entry["evidence_state"], f"{where}.evidence_state"),
        recommendation=None
        if verifier is None
        else _R.member(
            Recommendation,
            verifier["recommendation"],
            f"{where}.verifier.recommendation",
        ),
    )


def read_idkmesh_report(document: object) -> IdkmeshReport:
    """Read an IDKMesh v0.1 evidence report (its schema, strictly).

    Raises:
        RecordError: another kind or version, or a malformed report (path named).
    """
    require_kind(document, IDKMESH_REPORT_KIND)
    keys = {
        "attempts", "authority", "human_decision", "kind", "orchestrator_version", "run_id",
        "schema_version", "source_config_digest", "source_run_digest", "source_run_kind",
        "summary", "verifier_policy_digest", "warnings", "work_unit",
    }  # fmt: skip
    doc = _R.obj(document, "$", keys)
    try:
        digest = sha256_hex(doc)
    except CanonicalizationError as e:
        raise RecordError(e.path, e.reason) from e
    if doc["source_run_kind"] != IDKMESH_RUN_KIND:
        raise RecordError("$.source_run_kind", f"expected {IDKMESH_RUN_KIND!r}")
    decision = _R.obj(
        doc["human_decision"],
        "$.human_decision",
        {"integration_authority", "selected_attempt_id", "status"},
    )
    if decision["status"] != "pending" or decision["selected_attempt_id"] is not None:
        raise RecordError("$.human_decision", "a generated report keeps the decision pending")
    authority = _R.obj(
        doc["authority"],
        "$.authority",
        {"automatic_candidate_selection", "canonical_state_write", "git_push", "merge"},
    )
    for key, flag in sorted(authority.items()):
        if flag is not False:
            raise RecordError(f"$.authority.{key}", "authority must be false")
    attempts = [
        _report_attempt(item, index)
        for index, item in enumerate(_R.array(doc["attempts"], "$.attempts"))
    ]
    if not attempts:
        raise RecordError("$.attempts", "a report has at least one attempt")
    summary_keys = {
        "attempt_count", "control_errors", "control_failure_present", "inconclusive",
        "rejected", "supported", "verification_disagreement",
    }  # fmt: skip
    summary = _R.obj(doc["summary"], "$.summary", summary_keys)
    for key, value in summary.items():
        if type(value) not in {int, bool}:
            raise RecordError(f"$.summary.{key}", "expected an integer or a boolean")
    return IdkmeshReport(
        run_id=_R.string(doc["run_id"], "$.run_id"),
        digest=digest,
        source_run_digest=parse_prefixed_digest(doc["source_run_digest"], "$.source_run_digest"),
        source_config_digest=parse_prefixed_digest(
            doc["source_config_digest"], "$.source_config_digest"
        ),
        attempts=tuple(attempts),
        summary=tuple(sorted(summary.items())),
    )


def read_idkmesh_decision(document: object) -> IdkmeshDecision:
    """Read an IDKMesh v0.1 human decision record (its schema, strictly).

    Raises:
        RecordError: another kind or version, or a malformed record (path named).
    """
    require_kind(document, IDKMESH_DECISION_KIND)
    keys = {"authority", "decided_at", "decider", "decision", "decision_id", "evidence_report",
            "kind", "rationale", "schema_version", "selected_attempt_id"}  # fmt: skip
    doc = _R.obj(document, "$", keys)
    decision_id = _R.string(doc["decision_id"], "$.decision_id")
    if not _DECISION_ID.fullmatch(decision_id):
        raise RecordError("$.decision_id", "expected [a-z0-9][a-z0-9._/-]{2,127}")
    ref = _R.obj(
        doc["evidence_report"], "$.evidence_report", {"digest", "kind", "run_id", "schema_version"}
    )
    raw_decider = doc["decider"]
    decider_keys = {"id", "type"} | ({"display_name"} if "display_name" in raw_decider else set())
    decider = _R.obj(raw_decider, "$.decider", decider_keys)
    display = decider.get("display_name")
    if display is not None and type(display) is not str:
        raise RecordError("$.decider.display_name", "expected a string")
    authority = _R.obj(
        doc["authority"], "$.authority", {"canonical_state_write", "git_push", "merge"}
    )
    for key, flag in sorted(authority.items()):
        if flag is not False:
            raise RecordError(f"$.authority.{key}", "authority must be false")
    decided_at = _R.string(doc["decided_at"], "$.decided_at")
    if not _DATE_TIME.fullmatch(decided_at):
        raise RecordError("$.decided_at", "expected an RFC 3339 date-time")
    selected = doc["selected_attempt_id"]
    return IdkmeshDecision(
        decision_id=decision_id,
        decision=_R.member(Decision, doc["decision"], "$.decision"),
        selected_attempt_id=None
        if selected is None
        else _R.string(selected, "$.selected_attempt_id"),
        report=EvidenceReportRef(
            kind=_R.string(ref["kind"], "$.evidence_report.kind"),
            schema_version=_R.string(ref["schema_version"], "$.evidence_report.schema_version"),
            run_id=_R.string(ref["run_id"], "$.evidence_report.run_id"),
            digest=parse_prefixed_digest(ref["digest"], "$.evidence_report.digest"),
        ),
        decider=Decider(
            id=_R.string(decider["id"], "$.decider.id"),
            type=_R.member(DeciderType, decider["type"], "$.decider.type"),
            display_name=display or None,
        ),
        decided_at=decided_at,
        rationale=_R.string(doc["rationale"], "$.rationale"),
    )


def _claimed_state(attempt: IdkmeshReportAttempt) -> EvidenceState:
    """IDKMesh's mapping (its README, "Evidence states")."""
    if attempt.state is not AttemptState.VERIFIED:
        return EvidenceState(str(attempt.state))
    if attempt.recommendation is Recommendation.ACCEPT_CANDIDATE:
        return EvidenceState.SUPPORTED
    if attempt.recommendation is Recommendation.REJECT_CANDIDATE:
        return EvidenceState.REJECTED
    return EvidenceState.INCONCLUSIVE


def _report_problems(report: IdkmeshReport, run: RunRecord | None) -> bool:
    """True when the report contradicts itself, or is not the report of ``run``."""
    states = [a.evidence_state for a in report.attempts]
    if any(_claimed_state(a) is not a.evidence_state for a in report.attempts):
        return True
    if len({a.attempt_id for a in report.attempts}) != len(report.attempts):
        return True
    errors = sum(s in _ERROR_STATES for s in states)
    recommendations = {a.recommendation for a in report.attempts if a.recommendation}
    expected = {
        "attempt_count": len(states),
        "control_errors": errors,
        "control_failure_present": errors > 0,
        "inconclusive": states.count(EvidenceState.INCONCLUSIVE),
        "rejected": states.count(EvidenceState.REJECTED),
        "supported": states.count(EvidenceState.SUPPORTED),
        "verification_disagreement": len(recommendations) > 1,
    }
    if dict(report.summary) != expected or any(
        type(v) is not type(expected[k]) for k, v in report.summary
    ):
        return True
    if run is None:
        return False
    # The report must be exactly this run's: its source, config, and every attempt's
    # state as the run's own record gives it (a hand-edited, self-consistent report fails).
    source = run.imported_from.digest if run.imported_from is not None else None
    ours = [(a.attempt_id, a.state, _run_state(a)) for a in run.attempts]
    theirs = [(a.attempt_id, a.state, a.evidence_state) for a in report.attempts]
    return (
        report.run_id != run.run_id
        or report.source_run_digest != source
        or report.source_config_digest != run.config_digest
        or ours != theirs
    )


def _run_state(attempt: AttemptRecord) -> EvidenceState:
    verification = attempt.verification
    return _claimed_state(
        IdkmeshReportAttempt(
            attempt_id=attempt.attempt_id,
            state=attempt.state,
            evidence_state=EvidenceState.INCONCLUSIVE,
            recommendation=None if verification is None else verification.recommendation,
        )
    )


_ERROR_STATES: Final = frozenset(
    {
        EvidenceState.WORKER_ERROR,
        EvidenceState.RESULT_MANIFEST_ERROR,
        EvidenceState.VERIFICATION_ERROR,
    }
)


def verify_idkmesh_decision(
    decision: IdkmeshDecision, report: IdkmeshReport, run: RunRecord | None = None
) -> tuple[DecisionReason, ...]:
    """The reasons (kernel `DecisionReason` codes, check order) why an IDKMesh decision
    does not verify against ``report`` (and, when given, the imported ``run``); empty
    when it verifies.

    Checks: the report is consistent with itself and with the run (``report_inconsistent``:
    the weakness IDKMesh v0.1 has, a hand-edited report with self-consistent counts);
    the decision names this report's kind and version, run id and canonical digest; the
    selected attempt, if any, is one of the report's.
    """
    reasons = []
    if _report_problems(report, run):
        reasons.append(DecisionReason.REPORT_INCONSISTENT)
    ref = decision.report
    if (ref.kind, ref.schema_version) != (IDKMESH_REPORT_KIND, "0.1"):
        reasons.append(DecisionReason.REPORT_KIND)
    if ref.run_id != report.run_id:
        reasons.append(DecisionReason.REPORT_RUN_ID)
    if ref.digest != report.digest:
        reasons.append(DecisionReason.REPORT_DIGEST)
    attempt_ids = {a.attempt_id for a in report.attempts}
    if decision.selected_attempt_id is not None and decision.selected_attempt_id not in attempt_ids:
        reasons.append(DecisionReason.UNKNOWN_ATTEMPT)
    return tuple(reasons)


# --- orchestration configs: a provenance replay of a saved IDKMesh run -----------------
