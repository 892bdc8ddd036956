"""IDKMesh v0.1 orchestration configs, work units and verifier policies, read strictly,
and what differs between a saved run and its config (`idkmesh_provenance_differences`,
for a replay check in provenance mode); IDKMesh's digests (`idkmesh_digest`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from kernel.errors import CanonicalizationError, RecordError
from kernel.importers.idkmesh import (
    _DECISION_ID,
    _R,
)
from kernel.records.identity import sha256_hex, sha256_python_json

__all__ = [
    "IdkmeshAttemptSpec",
    "IdkmeshConfig",
    "IdkmeshVerifierPolicy",
    "IdkmeshWorkUnit",
    "idkmesh_digest",
    "idkmesh_provenance_differences",
    "is_idkmesh_config",
    "read_idkmesh_config",
    "read_idkmesh_verifier_policy",
    "read_idkmesh_work_unit",
]


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
