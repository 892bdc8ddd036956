"""Read IDKMesh v0.1 documents: run records (``kind: idkmesh-two-attempt-run``) as
`RunRecord`s, evidence reports and human decision records (to verify an IDKMesh
decision), orchestration configs (to replay-check a saved IDKMesh run in provenance
mode: `idkmesh_provenance_differences`), and IDKMesh's digests of its work units,
verifier policies and result manifests (floats included: `idkmesh_digest`).

Pure conversion at the edge: a decoded JSON document in, a `RunRecord` out, or a
`kernel.errors.RecordError` naming the failing path (never a traceback).

Where this is stricter than IDKMesh v0.1:

- digests must be exactly ``"sha256:"`` + 64 lowercase hex characters (no other prefix,
  no upper case, no trailing newline); they are stored bare;
- unknown keys are refused at every level, every field has its exact JSON type;
- attempt ``order`` must be the launch position and agree with ``attempt_order``;
- error messages are kept, but absolute paths in them are replaced by ``<path>`` so that
  the converted record's digest does not depend on the original checkout location;
- the result binds to the original document: ``imported_from.digest`` is SHA-256 of the
  canonical JSON of the document as read (the same definition IDKMesh uses) after the
  same redaction of absolute paths in ``attempts[].error`` and
  ``attempts[].candidate_root``: the same run read from two checkouts has one digest,
  and for a document without absolute paths it is IDKMesh's own ``source_run_digest``;
- both orchestrator versions that write ``schema_version`` "0.1" are read:
  ``orchestrator_version`` "0.1" has no ``verification_control`` block, "0.2" must have
  one, naming the same verifier policy digest; any other version is refused by name;
- a document of another IDKMesh kind or version is refused naming its kind and
  version; duplicate attempt ids are refused naming the second one.

N is not fixed at two: any N >= 1 is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

from kernel.decide.decision import Decider, DeciderType, Decision, DecisionReason, EvidenceReportRef
from kernel.errors import CanonicalizationError, RecordError
from kernel.records.identity import sha256_hex, sha256_python_json
from kernel.run.record import (
    AttemptError,
    AttemptErrorCode,
    AttemptRecord,
    AttemptState,
    CheckSummary,
    ImportedFrom,
    ManifestSummary,
    RunAuthority,
    RunRecord,
    VerificationSummary,
    WorkUnitRef,
    redact_absolute_paths,
)
from kernel.run.report import EvidenceState
from kernel.run.verification import CheckStatus, Recommendation, VerificationStatus, WorkerStatus

__all__ = [
    "IDKMESH_DECISION_KIND",
    "IDKMESH_REPORT_KIND",
    "IDKMESH_RUN_KIND",
    "IdkmeshAttemptSpec",
    "IdkmeshConfig",
    "IdkmeshDecision",
    "IdkmeshReport",
    "IdkmeshReportAttempt",
    "IdkmeshVerifierPolicy",
    "IdkmeshWorkUnit",
    "idkmesh_digest",
    "idkmesh_provenance_differences",
    "is_idkmesh_config",
    "is_idkmesh_document",
    "is_idkmesh_run",
    "parse_prefixed_digest",
    "read_idkmesh_config",
    "read_idkmesh_decision",
    "read_idkmesh_report",
    "read_idkmesh_verifier_policy",
    "read_idkmesh_work_unit",
    "require_kind",
    "run_record_from_idkmesh",
    "verify_idkmesh_decision",
]

IDKMESH_RUN_KIND: Final = "idkmesh-two-attempt-run"
_PREFIXED: Final = re.compile(r"sha256:([0-9a-f]{64})")
_ERROR_CODES: Final = {
    AttemptState.WORKER_ERROR: AttemptErrorCode.WORKER_FAILED,
    AttemptState.RESULT_MANIFEST_ERROR: AttemptErrorCode.MANIFEST_INVALID,
    AttemptState.VERIFICATION_ERROR: AttemptErrorCode.VERIFIER_FAILED,
}


_ORCHESTRATOR_VERSIONS: Final = ("0.1", "0.2")
_CONTROLLED_FROM: Final = "0.2"


def is_idkmesh_run(document: object) -> bool:
    """True when ``document`` declares itself an IDKMesh v0.1 run record."""
    return isinstance(document, dict) and document.get("kind") == IDKMESH_RUN_KIND


def is_idkmesh_document(document: object) -> bool:
    """True when ``document`` declares an IDKMesh kind (``idkmesh-...``), any version."""
    return (
        isinstance(document, dict)
        and type(document.get("kind")) is str
        and document["kind"].startswith("idkmesh-")
    )


def require_kind(document: object, kind: str, version: str = "0.1") -> None:
    """Refuse, naming what it is, a document that is not ``kind`` ``version``.

    Raises:
        RecordError: not an object, or another kind or version.
    """
    if type(document) is not dict:
        raise RecordError("$", "expected an object")
    found = (document.get("kind"), document.get("schema_version"))
    if found != (kind, version):
        raise RecordError(
            "$.kind",
            f"expected IDKMesh {kind} schema_version {version!r}; this document is "
            f"{found[0]!r} schema_version {found[1]!r}",
        )


def _location_free(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document with absolute paths redacted where IDKMesh writes them (errors,
    candidate roots), so its digest does not depend on the folder IDKMesh ran in."""
    attempts = document.get("attempts")
    if type(attempts) is not list:
        return dict(document)
    cleaned = [
        {
            key: redact_absolute_paths(value)
            if key in {"error", "candidate_root"} and type(value) is str
            else value
            for key, value in attempt.items()
        }
        if type(attempt) is dict
        else attempt
        for attempt in attempts
    ]
    return {**document, "attempts": cleaned}


def parse_prefixed_digest(value: object, path: str) -> str:
    """The bare hex of an IDKMesh ``sha256:<hex>`` digest.

    Raises:
        RecordError: anything but exactly ``sha256:`` + 64 lowercase hex.
    """
    match = _PREFIXED.fullmatch(value) if type(value) is str else None
    if match is None:
        raise RecordError(path, f"expected 'sha256:' + 64 lowercase hex, got {value!r}")
    return match.group(1)


class _Reader:
    """Typed getters that build the failing path."""

    def obj(self, value: object, path: str, keys: set[str]) -> Mapping[str, Any]:
        if type(value) is not dict:
            raise RecordError(path, "expected an object")
        unknown = sorted(set(value) - keys)
        if unknown:
            raise RecordError(f"{path}.{unknown[0]}", "unknown field")
        missing = sorted(keys - set(value))
        if missing:
            raise RecordError(f"{path}.{missing[0]}", "missing field")
        return value

    def string(self, value: object, path: str) -> str:
        if type(value) is not str or not value.strip():
            raise RecordError(path, f"expected a non-blank string, got {value!r}")
        return value

    def integer(self, value: object, path: str) -> int:
        if type(value) is not int or value < 1:
            raise RecordError(path, f"expected an integer >= 1, got {value!r}")
        return value

    def boolean(self, value: object, path: str) -> bool:
        if type(value) is not bool:
            raise RecordError(path, f"expected a boolean, got {value!r}")
        return value

    def array(self, value: object, path: str) -> list[Any]:
        if type(value) is not list:
            raise RecordError(path, "expected an array")
        return value

    def member(self, kind: Any, value: object, path: str) -> Any:
        try:
            return kind(value)
        except ValueError as e:
            allowed = sorted(m.value for m in kind)
            raise RecordError(path, f"expected one of {allowed}, got {value!r}") from e


_R: Final = _Reader()
_RUN_KEYS: Final = {
    "attempt_order",
    "attempts",
    "authority",
    "config_digest",
    "kind",
    "orchestrator_version",
    "run_id",
    "run_state",
    "schema_version",
    "summary",
    "verifier_policy_digest",
    "work_unit",
}
_ATTEMPT_KEYS: Final = {
    "attempt_id",
    "candidate_root",
    "error",
    "order",
    "result_manifest",
    "state",
    "verification",
    "worker_adapter",
}


def _verification_control(value: object, policy_digest: str) -> None:
    """Orchestrator 0.2's verifier policy block: well formed and naming the policy the
    record's ``verifier_policy_digest`` names (it adds no identity of its own)."""
    path = "$.verification_control"
    doc = _R.obj(value, path, {"backend", "digest", "id", "kind", "schema_version"})
    for key in ("backend", "id"):
        _R.string(doc[key], f"{path}.{key}")
    if doc["kind"] != "verifier_policy" or doc["schema_version"] != "0.1":
        raise RecordError(
            f"{path}.kind",
            f"expected verifier_policy schema_version '0.1', got {doc['kind']!r} "
            f"schema_version {doc['schema_version']!r}",
        )
    if parse_prefixed_digest(doc["digest"], f"{path}.digest") != policy_digest:
        raise RecordError(f"{path}.digest", "is not the run's verifier_policy_digest")


def _manifest(value: object, path: str) -> ManifestSummary:
    doc = _R.obj(value, path, {"attempt", "digest", "id", "worker_id", "worker_status"})
    return ManifestSummary(
        id=_R.string(doc["id"], f"{path}.id"),
        digest=parse_prefixed_digest(doc["digest"], f"{path}.digest"),
        work_unit_digest=None,
        worker_id=_R.string(doc["worker_id"], f"{path}.worker_id"),
        worker_status=_R.member(WorkerStatus, doc["worker_status"], f"{path}.worker_status"),
        attempt=_R.integer(doc["attempt"], f"{path}.attempt"),
    )


def _verification(value: object, path: str) -> VerificationSummary:
    keys = {
        "checks",
        "id",
        "recommendation",
        "result_manifest_digest",
        "semantic_digest",
        "status",
        "verifier_id",
        "work_unit_digest",
    }
    doc = _R.obj(value, path, keys)
    checks = []
    for index, item in enumerate(_R.array(doc["checks"], f"{path}.checks")):
        where = f"{path}.checks[{index}]"
        check = _R.obj(item, where, {"id", "required", "status"})
        checks.append(
            CheckSummary(
                id=_R.string(check["id"], f"{where}.id"),
                required=_R.boolean(check["required"], f"{where}.required"),
                status=_R.member(CheckStatus, check["status"], f"{where}.status"),
            )
        )
    return VerificationSummary(
        id=_R.string(doc["id"], f"{path}.id"),
        verifier_id=_R.string(doc["verifier_id"], f"{path}.verifier_id"),
        status=_R.member(VerificationStatus, doc["status"], f"{path}.status"),
        recommendation=_R.member(Recommendation, doc["recommendation"], f"{path}.recommendation"),
        checks=tuple(checks),
        result_manifest_digest=parse_prefixed_digest(
            doc["result_manifest_digest"], f"{path}.result_manifest_digest"
        ),
        work_unit_digest=parse_prefixed_digest(doc["work_unit_digest"], f"{path}.work_unit_digest"),
        semantic_digest=parse_prefixed_digest(doc["semantic_digest"], f"{path}.semantic_digest"),
    )


def _attempt(value: object, path: str, index: int) -> AttemptRecord:
    keys = set(value) & {"candidate_root"} if type(value) is dict else set()
    doc = _R.obj(value, path, (_ATTEMPT_KEYS - {"candidate_root"}) | keys)
    state = _R.member(AttemptState, doc["state"], f"{path}.state")
    order = _R.integer(doc["order"], f"{path}.order")
    if order != index + 1:
        raise RecordError(f"{path}.order", f"order {order} is not the launch position {index + 1}")
    manifest = (
        None
        if doc["result_manifest"] is None
        else _manifest(doc["result_manifest"], f"{path}.result_manifest")
    )
    verification = (
        None
        if doc["verification"] is None
        else _verification(doc["verification"], f"{path}.verification")
    )
    error = None
    if doc["error"] is not None:
        message = redact_absolute_paths(_R.string(doc["error"], f"{path}.error"))
        error = AttemptError(
            code=_ERROR_CODES.get(state, AttemptErrorCode.VERIFIER_FAILED), message=message
        )
    try:
        return AttemptRecord(
            attempt_id=_R.string(doc["attempt_id"], f"{path}.attempt_id"),
            order=order,
            adapter=_R.string(doc["worker_adapter"], f"{path}.worker_adapter"),
            adapter_version=None,
            state=state,
            manifest=manifest,
            verification=verification,
            error=error,
        )
    except ValueError as e:
        field = getattr(e, "kernel_field", "")
        raise RecordError(f"{path}.{field}" if field else path, str(e)) from e


def run_record_from_idkmesh(document: object) -> RunRecord:
    """Convert an IDKMesh v0.1 run record into a `RunRecord`.

    Raises:
        RecordError: the document is not a well-formed IDKMesh v0.1 run record; the
            error names the failing path (e.g. ``attempts[1].verification.status``).
    """
    require_kind(document, IDKMESH_RUN_KIND)
    version = document.get("orchestrator_version") if type(document) is dict else None
    if version not in _ORCHESTRATOR_VERSIONS:
        raise RecordError(
            "$.orchestrator_version",
            f"IDKMesh orchestrator version {version!r} is not one this reader knows "
            f"({', '.join(_ORCHESTRATOR_VERSIONS)})",
        )
    controlled = version == _CONTROLLED_FROM
    doc = _R.obj(document, "$", _RUN_KEYS | ({"verification_control"} if controlled else set()))
    policy_digest = parse_prefixed_digest(doc["verifier_policy_digest"], "$.verifier_policy_digest")
    if controlled:
        _verification_control(doc["verification_control"], policy_digest)
    try:
        source_digest = sha256_hex(_location_free(doc))
    except CanonicalizationError as e:
        raise RecordError(e.path, e.reason) from e
    unit = _R.obj(doc["work_unit"], "$.work_unit", {"digest", "id", "version"})
    entries = _R.array(doc["attempts"], "$.attempts")
    if not entries:
        raise RecordError("$.attempts", "a run has at least one attempt")
    attempts = tuple(_attempt(entry, f"$.attempts[{i}]", i) for i, entry in enumerate(entries))
    seen: set[str] = set()
    for index, attempt in enumerate(attempts):
        if attempt.attempt_id in seen:
            raise RecordError(
                f"$.attempts[{index}].attempt_id", f"duplicate attempt id {attempt.attempt_id!r}"
            )
        seen.add(attempt.attempt_id)
    order = _R.array(doc["attempt_order"], "$.attempt_order")
    if order != [a.attempt_id for a in attempts]:
        raise RecordError("$.attempt_order", "does not list the attempts in order")
    authority = _R.obj(
        doc["authority"],
        "$.authority",
        {"automatic_candidate_selection", "canonical_state_write", "git_push", "merge"},
    )
    for key, flag in sorted(authority.items()):
        if flag is not False:
            raise RecordError(f"$.authority.{key}", "authority must be false")
    _summary(doc, attempts)
    try:
        return RunRecord(
            run_id=_R.string(doc["run_id"], "$.run_id"),
            orchestrator="idkmesh/"
            + _R.string(doc["orchestrator_version"], "$.orchestrator_version"),
            work_unit=WorkUnitRef(
                id=_R.string(unit["id"], "$.work_unit.id"),
                version=_R.integer(unit["version"], "$.work_unit.version"),
                digest=parse_prefixed_digest(unit["digest"], "$.work_unit.digest"),
            ),
            config_digest=parse_prefixed_digest(doc["config_digest"], "$.config_digest"),
            verifier_policy_digest=policy_digest,
            imported_from=ImportedFrom(kind=IDKMESH_RUN_KIND, digest=source_digest),
            attempts=attempts,
            authority=RunAuthority.none(),
        )
    except RecordError:
        raise
    # Defensive: the whole-document canonicalization and the readers above already refuse
    # every value RunRecord's validators would (text, int range, order, duplicates).
    except ValueError as e:  # pragma: no cover
        field = getattr(e, "kernel_field", "")
        raise RecordError(f"$.{field}" if field else "$", str(e)) from e


_CONTROL_STATES: Final = frozenset(_ERROR_CODES)


def _summary(doc: Mapping[str, Any], attempts: tuple[AttemptRecord, ...]) -> None:
    """The record's own summary and run state agree with its attempts (as IDKMesh's
    orchestrator computes them): a hand-edited count is refused, not carried along."""
    keys = {"attempt_count", "candidates_rejected", "candidates_supported", "control_failures"}
    summary = _R.obj(doc["summary"], "$.summary", keys)
    recommendations = [a.verification.recommendation for a in attempts if a.verification]
    failures = sum(a.state in _CONTROL_STATES for a in attempts)
    expected = {
        "attempt_count": len(attempts),
        "candidates_rejected": recommendations.count(Recommendation.REJECT_CANDIDATE),
        "candidates_supported": recommendations.count(Recommendation.ACCEPT_CANDIDATE),
        "control_failures": failures,
    }
    for key, count in sorted(expected.items()):
        value = summary[key]
        if type(value) is not int or value != count:
            raise RecordError(
                f"$.summary.{key}", f"{value!r} disagrees with the attempts ({count})"
            )
    state = "completed_with_failures" if failures else "completed"
    if doc["run_state"] != state:
        raise RecordError(
            "$.run_state", f"{doc['run_state']!r} disagrees with the attempts ({state!r})"
        )


# --- evidence reports and human decision records ---------------------------------------

IDKMESH_REPORT_KIND: Final = "idkmesh-run-evidence-report"
IDKMESH_DECISION_KIND: Final = "idkmesh-human-decision-record"
_DATE_TIME: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", re.ASCII
)
_DECISION_ID: Final = re.compile(r"[a-z0-9][a-z0-9._/-]{2,127}", re.ASCII)


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

_CONFIG_KEYS: Final = frozenset({"attempts", "run_id", "schema_version", "verifier_policy",
                                 "work_unit"})  # fmt: skip
_FIXTURE_ADAPTERS: Final = ("fixture-result", "fixture-failure")
_DEFAULT_FAILURE: Final = "simulated worker failure before ResultManifest"


@attrs.frozen(kw_only=True)
class IdkmeshAttemptSpec:
    """One attempt of an IDKMesh v0.1 orchestration config."""

    attempt_id: str
    """Attempt id."""
    worker_adapter: str
    """``fixture-result`` or ``fixture-failure`` (IDKMesh v0.1's two adapters)."""
    result_manifest: str | None
    """Repository-relative path of the result manifest (fixture-result)."""
    candidate_root: str | None
    """Repository-relative path of the candidate folder (fixture-result)."""
    failure: str | None
    """The simulated failure message (fixture-failure)."""


@attrs.frozen(kw_only=True)
class IdkmeshConfig:
    """An IDKMesh v0.1 orchestration config (it has no ``kind``: schema_version 0.1 and
    these keys), with its digest as IDKMesh computes it."""

    digest: str
    """SHA-256 of the config document (IDKMesh's ``config_digest``, bare hex)."""
    run_id: str
    """Run id."""
    work_unit: str
    """Repository-relative path of the work unit."""
    verifier_policy: str
    """Repository-relative path of the verifier policy."""
    attempts: tuple[IdkmeshAttemptSpec, ...]
    """Attempts in launch order."""


def is_idkmesh_config(document: object) -> bool:
    """True when ``document`` looks like an IDKMesh v0.1 orchestration config."""
    return (
        isinstance(document, dict)
        and "kind" not in document
        and document.get("schema_version") == "0.1"
        and {"verifier_policy", "work_unit", "attempts"} <= set(document)
    )


def read_idkmesh_config(document: object) -> IdkmeshConfig:
    """Read an IDKMesh v0.1 orchestration config strictly.

    Raises:
        RecordError: malformed, an unknown adapter, duplicate attempt ids (path named).
    """
    doc = _R.obj(document, "$", set(_CONFIG_KEYS))
    if doc["schema_version"] != "0.1":
        raise RecordError("$.schema_version", "expected IDKMesh config schema_version '0.1'")
    specs = []
    for index, item in enumerate(_R.array(doc["attempts"], "$.attempts")):
        where = f"$.attempts[{index}]"
        if type(item) is not dict:
            raise RecordError(where, "expected an object")
        optional = {"result_manifest", "candidate_root", "failure"} & set(item)
        entry = _R.obj(item, where, {"attempt_id", "worker_adapter"} | optional)
        adapter = _R.string(entry["worker_adapter"], f"{where}.worker_adapter")
        if adapter not in _FIXTURE_ADAPTERS:
            raise RecordError(
                f"{where}.worker_adapter", f"expected one of {list(_FIXTURE_ADAPTERS)}"
            )
        texts = {
            key: None if key not in entry else _R.string(entry[key], f"{where}.{key}")
            for key in ("result_manifest", "candidate_root", "failure")
        }
        specs.append(
            IdkmeshAttemptSpec(
                attempt_id=_R.string(entry["attempt_id"], f"{where}.attempt_id"),
                worker_adapter=adapter,
                result_manifest=texts["result_manifest"],
                candidate_root=texts["candidate_root"],
                failure=texts["failure"],
            )
        )
    if not specs:
        raise RecordError("$.attempts", "a config has at least one attempt")
    for key in ("work_unit", "verifier_policy"):
        _repository_path(doc[key], f"$.{key}")
    for index, spec in enumerate(specs):
        for key in ("result_manifest", "candidate_root"):
            value = getattr(spec, key)
            if value is not None:
                _repository_path(value, f"$.attempts[{index}].{key}")
    ids = [s.attempt_id for s in specs]
    for index, attempt_id in enumerate(ids):
        if attempt_id in ids[:index]:
            raise RecordError(f"$.attempts[{index}].attempt_id", "duplicate attempt id")
    try:
        digest = sha256_hex(doc)
    except CanonicalizationError as e:
        raise RecordError(e.path, e.reason) from e
    return IdkmeshConfig(
        digest=digest,
        run_id=_R.string(doc["run_id"], "$.run_id"),
        work_unit=_R.string(doc["work_unit"], "$.work_unit"),
        verifier_policy=_R.string(doc["verifier_policy"], "$.verifier_policy"),
        attempts=tuple(specs),
    )


def _repository_path(value: object, path: str) -> None:
    """IDKMesh paths are repository-relative: no absolute path, no ``..``."""
    text = _R.string(value, path)
    if text.startswith(("/", "\\")) or ".." in text.replace("\\", "/").split("/"):
        raise RecordError(path, f"expected a repository-relative path, got {text!r}")


def idkmesh_digest(document: object, path: str) -> str:
    """IDKMesh's digest of a document that may carry floats (work units, manifests).

    Raises:
        RecordError: NaN, Infinity or another value with no JSON form.
    """
    try:
        return sha256_python_json(document)
    except CanonicalizationError as e:
        raise RecordError(path, e.reason) from e


def _same(differences: list[str], path: str, expected: object, saved: object) -> None:
    if expected != saved:
        differences.append(f"{path}: replayed {expected!r}, saved {saved!r}")


def idkmesh_provenance_differences(
    config: IdkmeshConfig, documents: Mapping[str, object], saved: Mapping[str, Any]
) -> list[str]:
    """What a provenance replay of ``config`` finds different from the ``saved``
    IDKMesh run record (empty: they match), in document order.

    ``documents`` maps each repository-relative path the config names (work unit,
    verifier policy, result manifests) to its decoded document; a manifest path that
    could not be read maps to None (IDKMesh records ``result_manifest_error`` then).

    Re-derived and compared: the config digest, run id, work unit (id, version, digest),
    verifier policy digest (and orchestrator 0.2's verification_control), attempt
    order, ids and adapters, simulated failures, each result manifest's id, attempt,
    worker id and status and digest, the candidate roots, and the verification's
    binding to the manifest and work unit digests. IDKMesh's verifier itself is not
    re-run (its outcomes are compared only through that binding): this is IDKMesh's
    "provenance-equivalent replay", never a claim about correctness.

    ``saved`` must already have been read by `run_record_from_idkmesh` (well formed).
    """
    differences: list[str] = []
    _same(differences, "$.config_digest", "sha256:" + config.digest, saved["config_digest"])
    if differences:
        return differences  # a record of another config: nothing else is compared
    _same(differences, "$.run_id", config.run_id, saved["run_id"])
    unit = read_idkmesh_work_unit(documents[config.work_unit])
    unit_digest = "sha256:" + unit.digest
    expected_unit = {"id": unit.id, "version": unit.version, "digest": unit_digest}
    _same(differences, "$.work_unit", expected_unit, saved["work_unit"])
    policy = "sha256:" + read_idkmesh_verifier_policy(documents[config.verifier_policy]).digest
    _same(differences, "$.verifier_policy_digest", policy, saved["verifier_policy_digest"])
    if "verification_control" in saved:
        _same(
            differences,
            "$.verification_control.digest",
            policy,
            saved["verification_control"]["digest"],
        )
    ids = [spec.attempt_id for spec in config.attempts]
    _same(differences, "$.attempt_order", ids, saved["attempt_order"])
    attempts = saved["attempts"]
    if len(attempts) != len(config.attempts):
        differences.append(
            f"$.attempts: replayed {len(config.attempts)} attempts, saved {len(attempts)}"
        )
        return differences
    for index, (spec, attempt) in enumerate(zip(config.attempts, attempts, strict=True)):
        _attempt_differences(
            differences,
            f"$.attempts[{index}]",
            spec=spec,
            attempt=attempt,
            documents=documents,
            unit_digest=unit_digest,
        )
    return differences


def _attempt_differences(
    differences: list[str],
    where: str,
    *,
    spec: IdkmeshAttemptSpec,
    attempt: Mapping[str, Any],
    documents: Mapping[str, object],
    unit_digest: str,
) -> None:
    _same(differences, f"{where}.attempt_id", spec.attempt_id, attempt["attempt_id"])
    _same(differences, f"{where}.worker_adapter", spec.worker_adapter, attempt["worker_adapter"])
    if spec.worker_adapter == "fixture-failure":
        _same(differences, f"{where}.state", "worker_error", attempt["state"])
        _same(differences, f"{where}.error", spec.failure or _DEFAULT_FAILURE, attempt["error"])
        return
    if spec.result_manifest is None or spec.candidate_root is None:
        _same(differences, f"{where}.state", "worker_error", attempt["state"])
        return
    manifest = documents.get(spec.result_manifest)
    if not isinstance(manifest, dict):
        _same(differences, f"{where}.state", "result_manifest_error", attempt["state"])
        return
    worker = manifest.get("worker")
    digest = "sha256:" + idkmesh_digest(manifest, spec.result_manifest)
    expected = {
        "id": manifest.get("id"),
        "attempt": manifest.get("attempt"),
        "worker_id": worker.get("id") if isinstance(worker, dict) else None,
        "worker_status": manifest.get("status"),
        "digest": digest,
    }
    _same(differences, f"{where}.result_manifest", expected, attempt["result_manifest"])
    # IDKMesh writes the repository-relative path it resolved from this same string.
    _same(
        differences, f"{where}.candidate_root", spec.candidate_root, attempt.get("candidate_root")
    )
    if attempt["state"] not in {"verified", "verification_error"}:
        differences.append(
            f"{where}.state: replayed verified or verification_error, saved {attempt['state']!r}"
        )
        return
    verification = attempt["verification"]
    if verification is not None:
        binding = {"result_manifest_digest": digest, "work_unit_digest": unit_digest}
        saved_binding = {k: verification[k] for k in sorted(binding)}
        _same(differences, f"{where}.verification", binding, saved_binding)


# --- work units and verifier policies --------------------------------------------------

_WORK_UNIT_REQUIRED: Final = frozenset(
    {"schema_version", "id", "version", "kind", "objective", "inputs", "outputs",
     "dependencies", "requirements", "constraints", "uncertainty", "security",
     "permissions", "verification_policy", "validators", "evidence_requirements",
     "budget", "provenance", "failure_semantics"}
)  # fmt: skip
_WORK_UNIT_OPTIONAL: Final = frozenset({"context", "extensions"})
_POLICY_KEYS: Final = frozenset(
    {"schema_version", "id", "candidate_artifact_id", "allowed_files", "max_candidate_bytes",
     "required_json"}
)  # fmt: skip


@attrs.frozen(kw_only=True)
class IdkmeshWorkUnit:
    """An IDKMesh work unit (schema 0.2, what its v0.1 orchestrator reads)."""

    id: str
    """Work unit id."""
    version: int
    """Work unit version."""
    digest: str
    """IDKMesh's digest of the document (bare hex; floats included)."""
    required_validators: tuple[str, ...]
    """Ids of the validators marked required, in order."""


@attrs.frozen(kw_only=True)
class IdkmeshVerifierPolicy:
    """An IDKMesh v0.1 fixture verifier policy."""

    id: str
    """Policy id."""
    digest: str
    """IDKMesh's digest of the document (its ``verifier_policy_digest``, bare hex)."""


def read_idkmesh_work_unit(document: object) -> IdkmeshWorkUnit:
    """Read an IDKMesh work unit (schema_version 0.2) strictly at its top level.

    Raises:
        RecordError: another schema version (named), a missing or unknown field, a
            malformed id, version or validator list.
    """
    if type(document) is not dict:
        raise RecordError("$", "expected an object")
    if document.get("schema_version") != "0.2":
        raise RecordError(
            "$.schema_version",
            f"expected an IDKMesh work unit schema_version '0.2', got "
            f"{document.get('schema_version')!r}",
        )
    optional = _WORK_UNIT_OPTIONAL & set(document)
    doc = _R.obj(document, "$", set(_WORK_UNIT_REQUIRED | optional))
    unit_id = _R.string(doc["id"], "$.id")
    if not _DECISION_ID.fullmatch(unit_id):
        raise RecordError("$.id", "expected [a-z0-9][a-z0-9._/-]{2,127}")
    required = []
    for index, item in enumerate(_R.array(doc["validators"], "$.validators")):
        where = f"$.validators[{index}]"
        if type(item) is not dict:
            raise RecordError(where, "expected an object")
        if _R.boolean(item.get("required"), f"{where}.required"):
            required.append(_R.string(item.get("id"), f"{where}.id"))
    return IdkmeshWorkUnit(
        id=unit_id,
        version=_R.integer(doc["version"], "$.version"),
        digest=idkmesh_digest(doc, "$"),
        required_validators=tuple(required),
    )


def read_idkmesh_verifier_policy(document: object) -> IdkmeshVerifierPolicy:
    """Read an IDKMesh v0.1 fixture verifier policy strictly.

    Raises:
        RecordError: another schema version (named), a missing or unknown field.
    """
    if type(document) is not dict:
        raise RecordError("$", "expected an object")
    if document.get("schema_version") != "0.1":
        raise RecordError(
            "$.schema_version",
            f"expected an IDKMesh verifier policy schema_version '0.1', got "
            f"{document.get('schema_version')!r}",
        )
    doc = _R.obj(document, "$", set(_POLICY_KEYS))
    for key in ("allowed_files",):
        for index, name in enumerate(_R.array(doc[key], f"$.{key}")):
            _R.string(name, f"$.{key}[{index}]")
    _R.integer(doc["max_candidate_bytes"], "$.max_candidate_bytes")
    _R.string(doc["candidate_artifact_id"], "$.candidate_artifact_id")
    if type(doc["required_json"]) is not dict:
        raise RecordError("$.required_json", "expected an object")
    return IdkmeshVerifierPolicy(id=_R.string(doc["id"], "$.id"), digest=idkmesh_digest(doc, "$"))
