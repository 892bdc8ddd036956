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

This module reads run records and holds the strict reader the others share; evidence
reports and decisions are read in `idkmesh_reports`, configs, work units, verifier
policies and IDKMesh's digests in `idkmesh_config`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from kernel.errors import CanonicalizationError, RecordError
from kernel.records.identity import sha256_hex
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
from kernel.run.verification import CheckStatus, Recommendation, VerificationStatus, WorkerStatus

__all__ = [
    "IDKMESH_RUN_KIND",
    "is_idkmesh_document",
    "is_idkmesh_run",
    "parse_prefixed_digest",
    "require_kind",
    "run_record_from_idkmesh",
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

# IDKMesh's identifier pattern (decision ids, work unit ids).
_DECISION_ID: Final = re.compile(r"[a-z0-9][a-z0-9._/-]{2,127}", re.ASCII)


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
