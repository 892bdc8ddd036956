"""Run a work unit's attempts through worker adapters and an independent verifier.

Produces a `kernel.runrecord.RunRecord`. Same config, same bytes: nothing here reads a
clock, the host name, the environment or an absolute path into the record; every
message names files relative to the config's folder.

Adapter boundary (open for the later ``command`` adapters that run real commands in
sandboxes): a worker adapter is built by a factory registered under its adapter kind
(`register_worker_adapter`), takes the attempt's config entry, and returns either
`WorkerProduced` (where its manifest and candidate are) or `WorkerFailed`. A verifier
adapter is registered the same way (`register_verifier_adapter`) and turns a manifest
and a candidate folder into a `VerificationResult`, or raises `VerifierFailure`.

Built-in adapters (fixtures, deterministic):

- worker ``fixture-result``: a canned result manifest + candidate folder;
- worker ``fixture-failure``: a canned failure message;
- verifier ``fixture-policy``: checks the candidate against a verifier policy with the
  checks ``artifact-digest``, ``candidate-scope`` and ``independent-acceptance``.

Config document (JSON; relative paths are resolved against the config's folder)::

    {"kind": "kernel-orchestration-config", "schema_version": "1",
     "run_id": "...", "work_unit": "<path to a WorkUnit document>",
     "verifier": {"adapter": "fixture-policy", "policy": "<path>"},
     "attempts": [{"attempt_id": "...", "adapter": "fixture-result",
                   "result_manifest": "<path>", "candidate_root": "<path>"},
                  {"attempt_id": "...", "adapter": "fixture-failure",
                   "failure": "<message>"}]}

``config_digest`` is SHA-256 of the canonical JSON of the config document as read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Final, Protocol

import attrs

from kernel.effects.files import load_json
from kernel.errors import (
    CanonicalizationError,
    ConfigError,
    EffectError,
    KernelError,
    RecordError,
)
from kernel.identity import canonical_json, sha256_bytes, sha256_hex
from kernel.runrecord import (
    AttemptError,
    AttemptErrorCode,
    AttemptRecord,
    AttemptState,
    ManifestSummary,
    RunAuthority,
    RunRecord,
    VerificationSummary,
    WorkUnitRef,
    redact_absolute_paths,
)
from kernel.verification import (
    Actor,
    ActorType,
    BindingRefusal,
    CheckResult,
    CheckStatus,
    Independence,
    Recommendation,
    ResultManifest,
    VerificationResult,
    VerificationStatus,
    WorkerStatus,
    WorkUnit,
    check_binding,
    check_manifest_binding,
)

__all__ = [
    "CONFIG_KIND",
    "ORCHESTRATOR",
    "AttemptContext",
    "LoadedConfig",
    "VerifierAdapter",
    "VerifierFailure",
    "WorkerAdapter",
    "WorkerFailed",
    "WorkerProduced",
    "load_config",
    "register_verifier_adapter",
    "register_worker_adapter",
    "run_config",
    "run_loaded",
]

CONFIG_KIND: Final = "kernel-orchestration-config"
POLICY_KIND: Final = "kernel-fixture-verifier-policy"
ORCHESTRATOR: Final = "kernel.effects.orchestrate/1"
_FIXTURE_VERSION: Final = "1"


@attrs.frozen(kw_only=True)
class AttemptContext:
    """What a worker adapter may know about the attempt it runs."""

    attempt_id: str
    """The attempt's id."""
    base_dir: Path
    """The config's folder (relative paths in the config resolve against it)."""
    work_unit: WorkUnit
    """The work unit to work on."""


@attrs.frozen(kw_only=True)
class WorkerProduced:
    """A worker produced a manifest and a candidate folder."""

    manifest_path: Path
    """Where the manifest document is."""
    manifest_locator: str
    """How to name it in messages (relative, portable)."""
    candidate_root: Path
    """The candidate folder the verifier inspects."""
    candidate_locator: str
    """How to name it in messages (relative, portable)."""


@attrs.frozen(kw_only=True)
class WorkerFailed:
    """A worker failed before producing a manifest."""

    message: str
    """Portable message (no absolute paths)."""


class WorkerAdapter(Protocol):
    """A worker adapter: runs one attempt."""

    @property
    def kind(self) -> str:
        """Adapter kind (the registry key)."""
        ...

    @property
    def version(self) -> str:
        """Adapter version."""
        ...

    def run(self, context: AttemptContext) -> WorkerProduced | WorkerFailed:
        """Run the attempt; report where its outputs are, or that it failed."""
        ...


class VerifierFailure(Exception):
    """The verifier control path failed: no verification result exists."""


class VerifierAdapter(Protocol):
    """An independent verifier adapter."""

    @property
    def kind(self) -> str:
        """Adapter kind (the registry key)."""
        ...

    @property
    def version(self) -> str:
        """Adapter version."""
        ...

    def verify(
        self, work_unit: WorkUnit, manifest: ResultManifest, produced: WorkerProduced
    ) -> VerificationResult:
        """Verify one candidate.

        Raises:
            VerifierFailure: no verification result could be produced.
        """
        ...


WorkerFactory = Callable[[Mapping[str, object], "ConfigSource"], WorkerAdapter]
VerifierFactory = Callable[[Mapping[str, object], "ConfigSource"], tuple[VerifierAdapter, str]]
"""A verifier factory returns the adapter and the verifier policy digest."""

_WORKERS: dict[str, WorkerFactory] = {}
_VERIFIERS: dict[str, VerifierFactory] = {}


def register_worker_adapter(kind: str, factory: WorkerFactory) -> None:
    """Make worker adapter ``kind`` available to configs (e.g. a later ``command``)."""
    _WORKERS[kind] = factory


def register_verifier_adapter(kind: str, factory: VerifierFactory) -> None:
    """Make verifier adapter ``kind`` available to configs."""
    _VERIFIERS[kind] = factory


@attrs.frozen(kw_only=True)
class ConfigSource:
    """Where a config came from: typed getters that name file and key on failure."""

    path: Path
    """The config file (as the user named it)."""

    @property
    def base_dir(self) -> Path:
        """The config's folder."""
        return self.path.parent

    def error(self, key: str, message: str) -> ConfigError:
        """A ConfigError naming the file and the key."""
        return ConfigError(f"{self.path}: {key}: {message}")

    def string(self, entry: Mapping[str, object], key: str, where: str) -> str:
        """A required non-blank string."""
        value = entry.get(key)
        if type(value) is not str or not value.strip():
            raise self.error(f"{where}.{key}", f"expected a non-blank string, got {value!r}")
        return value

    def relative_path(self, entry: Mapping[str, object], key: str, where: str) -> str:
        """A required relative POSIX path without ``..`` (portable, confined)."""
        value = self.string(entry, key, where)
        pure = PurePosixPath(value)
        if pure.is_absolute() or ".." in pure.parts or "\\" in value:
            raise self.error(f"{where}.{key}", f"must be a relative path without '..': {value!r}")
        return value

    def only_keys(self, entry: Mapping[str, object], keys: set[str], where: str) -> None:
        """Refuse unknown keys and missing keys."""
        unknown = sorted(set(entry) - keys)
        if unknown:
            raise self.error(f"{where}.{unknown[0]}", "unknown key")
        missing = sorted(keys - set(entry))
        if missing:
            raise self.error(f"{where}.{missing[0]}", "missing key")


# --- fixture workers -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class FixtureResultWorker:
    """Worker ``fixture-result``: a canned manifest and candidate folder."""

    manifest: str
    candidate_root: str
    kind: str = "fixture-result"
    version: str = _FIXTURE_VERSION

    def run(self, context: AttemptContext) -> WorkerProduced | WorkerFailed:
        """Point at the canned outputs (the verifier reads them, not this adapter)."""
        return WorkerProduced(
            manifest_path=context.base_dir / self.manifest,
            manifest_locator=self.manifest,
            candidate_root=context.base_dir / self.candidate_root,
            candidate_locator=self.candidate_root,
        )


def _fixture_result(entry: Mapping[str, object], source: ConfigSource) -> WorkerAdapter:
    where = f"attempts[{entry.get('attempt_id')!r}]"
    source.only_keys(entry, {"attempt_id", "adapter", "result_manifest", "candidate_root"}, where)
    return FixtureResultWorker(
        manifest=source.relative_path(entry, "result_manifest", where),
        candidate_root=source.relative_path(entry, "candidate_root", where),
    )


@attrs.frozen(kw_only=True)
class FixtureFailureWorker:
    """Worker ``fixture-failure``: fails with a canned message."""

    failure: str
    kind: str = "fixture-failure"
    version: str = _FIXTURE_VERSION

    def run(self, context: AttemptContext) -> WorkerProduced | WorkerFailed:
        """Fail, as configured."""
        del context
        return WorkerFailed(message=redact_absolute_paths(self.failure))


def _fixture_failure(entry: Mapping[str, object], source: ConfigSource) -> WorkerAdapter:
    where = f"attempts[{entry.get('attempt_id')!r}]"
    source.only_keys(entry, {"attempt_id", "adapter", "failure"}, where)
    return FixtureFailureWorker(failure=source.string(entry, "failure", where))


# --- fixture verifier ------------------------------------------------------------------

_CHECK_DIGEST: Final = "artifact-digest"
_CHECK_SCOPE: Final = "candidate-scope"
_CHECK_ACCEPT: Final = "independent-acceptance"


@attrs.frozen(kw_only=True)
class FixturePolicyVerifier:
    """Verifier ``fixture-policy``: deterministic checks against a verifier policy."""

    policy_id: str
    candidate_artifact_id: str
    allowed_files: frozenset[str]
    max_candidate_bytes: int
    required_canonical: bytes
    kind: str = "fixture-policy"
    version: str = _FIXTURE_VERSION

    def verify(
        self, work_unit: WorkUnit, manifest: ResultManifest, produced: WorkerProduced
    ) -> VerificationResult:
        """Run the three checks; see the module docstring."""
        root = produced.candidate_root
        if not root.is_dir() or root.is_symlink():
            raise VerifierFailure(f"{produced.candidate_locator}: candidate folder is missing")
        try:
            files = sorted(
                (p.relative_to(root).as_posix(), p.lstat().st_size)
                for p in root.rglob("*")
                if not p.is_dir() or p.is_symlink()
            )
        except OSError as e:
            raise VerifierFailure(
                f"{produced.candidate_locator}: cannot list candidate: {e.strerror}"
            ) from e
        scope_ok = all(
            name in self.allowed_files and size <= self.max_candidate_bytes for name, size in files
        )
        scope = (
            CheckStatus.PASSED if scope_ok else CheckStatus.FAILED,
            (sha256_hex([[name, size] for name, size in files]),),
        )
        artifact = next((a for a in manifest.artifacts if a.id == self.candidate_artifact_id), None)
        data: bytes | None = None
        path = root
        if artifact is not None:
            locator = PurePosixPath(artifact.locator)
            confined = not locator.is_absolute() and ".." not in locator.parts
            path = root / artifact.locator
            if confined and path.is_file() and not path.is_symlink():
                try:
                    with path.open("rb") as handle:
                        data = handle.read(self.max_candidate_bytes + 1)
                except OSError:
                    data = None
        observed = None if data is None else sha256_bytes(data)
        digest_check = (
            CheckStatus.PASSED
            if artifact is not None and observed == artifact.digest
            else CheckStatus.FAILED,
            () if observed is None else (observed,),
        )
        acceptance = self._acceptance(data, path)
        statuses = {_CHECK_DIGEST: digest_check, _CHECK_SCOPE: scope, _CHECK_ACCEPT: acceptance}
        required = set(work_unit.required_validators)
        checks = tuple(
            CheckResult(id=name, required=name in required, status=status, evidence_digests=ev)
            for name, (status, ev) in statuses.items()
        )
        relevant = [c.status for c in checks if c.required] or [c.status for c in checks]
        if CheckStatus.FAILED in relevant:
            status, recommendation = VerificationStatus.FAILED, Recommendation.REJECT_CANDIDATE
        elif all(s is CheckStatus.PASSED for s in relevant):
            status = VerificationStatus.PASSED
            # Checks pass but the worker itself reports no success: a human should look.
            recommendation = (
                Recommendation.ACCEPT_CANDIDATE
                if manifest.status is WorkerStatus.SUCCEEDED
                else Recommendation.ESCALATE
            )
        else:
            status = VerificationStatus.INCONCLUSIVE
            recommendation = Recommendation.INSUFFICIENT_EVIDENCE
        return VerificationResult(
            id=f"{manifest.id}/{self.policy_id}/verification",
            result_manifest_id=manifest.id,
            result_manifest_digest=manifest.digest,
            work_unit_id=work_unit.id,
            work_unit_version=work_unit.version,
            work_unit_digest=work_unit.digest,
            attempt=manifest.attempt,
            verifier=Actor(
                id="kernel-fixture-verifier",
                type=ActorType.SYSTEM,
                adapter=self.kind,
                adapter_version=self.version,
            ),
            independence=Independence(
                independent_from_worker=True,
                worker_id_observed=manifest.worker.id,
                shared_model_family=False,
                shared_runtime=False,
            ),
            status=status,
            checks=checks,
            recommendation=recommendation,
            rationale=f"policy {self.policy_id}: "
            + ", ".join(f"{c.id}={c.status}" for c in checks),
        )

    def _acceptance(self, data: bytes | None, path: Path) -> tuple[CheckStatus, tuple[str, ...]]:
        if data is None or len(data) > self.max_candidate_bytes:
            return CheckStatus.INCONCLUSIVE, ()
        try:
            # The candidate is untrusted bytes; parse it like any JSON input.
            observed = canonical_json(load_json(path, what="candidate"))
        except (KernelError, CanonicalizationError):
            return CheckStatus.INCONCLUSIVE, (sha256_bytes(data),)
        status = CheckStatus.PASSED if observed == self.required_canonical else CheckStatus.FAILED
        return status, (sha256_bytes(observed),)


def _fixture_policy(
    entry: Mapping[str, object], source: ConfigSource
) -> tuple[VerifierAdapter, str]:
    source.only_keys(entry, {"adapter", "policy"}, "verifier")
    locator = source.relative_path(entry, "policy", "verifier")
    path = source.base_dir / locator
    document = _load_object(path, "verifier policy")
    policy = ConfigSource(path=path)
    policy.only_keys(
        document,
        {
            "kind",
            "schema_version",
            "id",
            "candidate_artifact_id",
            "allowed_files",
            "max_candidate_bytes",
            "required_json",
        },
        "$",
    )
    if document["kind"] != POLICY_KIND or document["schema_version"] != "1":
        raise policy.error("$.kind", f"expected {POLICY_KIND} schema_version 1")
    allowed = document["allowed_files"]
    if type(allowed) is not list or not all(type(a) is str and a for a in allowed):
        raise policy.error("$.allowed_files", "expected an array of non-empty strings")
    max_bytes = document["max_candidate_bytes"]
    if type(max_bytes) is not int or max_bytes < 1:
        raise policy.error("$.max_candidate_bytes", "expected an integer >= 1")
    try:
        required = canonical_json(document["required_json"])
        digest = sha256_hex(document)
    except CanonicalizationError as e:
        raise policy.error(e.path, e.reason) from e
    verifier = FixturePolicyVerifier(
        policy_id=policy.string(document, "id", "$"),
        candidate_artifact_id=policy.string(document, "candidate_artifact_id", "$"),
        allowed_files=frozenset(allowed),
        max_candidate_bytes=max_bytes,
        required_canonical=required,
    )
    return verifier, digest


register_worker_adapter("fixture-result", _fixture_result)
register_worker_adapter("fixture-failure", _fixture_failure)
register_verifier_adapter("fixture-policy", _fixture_policy)


# --- orchestration ---------------------------------------------------------------------


def _load_object(path: Path, what: str) -> dict[str, object]:
    document = load_json(path, what=what)
    if type(document) is not dict:
        raise ConfigError(f"{path}: {what} must be a JSON object")
    return document


@attrs.frozen(kw_only=True)
class LoadedConfig:
    """A parsed config: everything a run needs, nothing run yet."""

    source: ConfigSource
    """Where it came from."""
    run_id: str
    """The run id."""
    config_digest: str
    """SHA-256 of the canonical config document."""
    work_unit: WorkUnit
    """The work unit."""
    verifier: VerifierAdapter
    """The verifier adapter."""
    verifier_policy_digest: str
    """SHA-256 of the canonical verifier policy."""
    attempts: tuple[tuple[str, WorkerAdapter], ...]
    """``(attempt_id, adapter)`` in launch order."""
    inputs: tuple[Path, ...]
    """Every file the config names that must exist (for output confinement)."""


def load_config(path: Path | str) -> LoadedConfig:
    """Read and check an orchestration config and the files it names.

    Raises:
        EffectError: a file is missing or unreadable.
        ConfigError: a document is unusable (message names the file and key).
    """
    source = ConfigSource(path=Path(path))
    document = _load_object(source.path, "orchestration config")
    source.only_keys(
        document, {"kind", "schema_version", "run_id", "work_unit", "verifier", "attempts"}, "$"
    )
    if document["kind"] != CONFIG_KIND:
        raise source.error("$.kind", f"expected {CONFIG_KIND!r}, got {document['kind']!r}")
    if document["schema_version"] != "1":
        raise source.error("$.schema_version", f"expected '1', got {document['schema_version']!r}")
    try:
        config_digest = sha256_hex(document)
    except CanonicalizationError as e:
        raise source.error(e.path, e.reason) from e
    run_id = source.string(document, "run_id", "$")
    unit_path = source.base_dir / source.relative_path(document, "work_unit", "$")
    try:
        work_unit = WorkUnit.from_dict(load_json(unit_path, what="work unit"))
    except RecordError as e:
        raise ConfigError(f"{unit_path}: {e}") from e
    verifier_entry = document["verifier"]
    if type(verifier_entry) is not dict:
        raise source.error("$.verifier", "expected an object")
    kind = source.string(verifier_entry, "adapter", "$.verifier")
    verifier_factory = _VERIFIERS.get(kind)
    if verifier_factory is None:
        raise source.error("$.verifier.adapter", f"unknown verifier adapter {kind!r}")
    verifier, policy_digest = verifier_factory(verifier_entry, source)
    entries = document["attempts"]
    # Vacuous input is refused: a run has at least one attempt.
    if type(entries) is not list or not entries:
        raise source.error("$.attempts", "expected a non-empty array")
    attempts: list[tuple[str, WorkerAdapter]] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"$.attempts[{index}]"
        if type(entry) is not dict:
            raise source.error(where, "expected an object")
        attempt_id = source.string(entry, "attempt_id", where)
        if attempt_id in seen:
            raise source.error(f"{where}.attempt_id", f"duplicate attempt id {attempt_id!r}")
        seen.add(attempt_id)
        adapter_kind = source.string(entry, "adapter", where)
        factory = _WORKERS.get(adapter_kind)
        if factory is None:
            raise source.error(f"{where}.adapter", f"unknown worker adapter {adapter_kind!r}")
        attempts.append((attempt_id, factory(entry, source)))
    return LoadedConfig(
        source=source,
        run_id=run_id,
        config_digest=config_digest,
        work_unit=work_unit,
        verifier=verifier,
        verifier_policy_digest=policy_digest,
        attempts=tuple(attempts),
        inputs=(source.path, unit_path),
    )


def _error(
    attempt_id: str,
    order: int,
    worker: WorkerAdapter,
    *,
    state: AttemptState,
    code: AttemptErrorCode,
    message: str,
    manifest: ManifestSummary | None = None,
) -> AttemptRecord:
    return AttemptRecord(
        attempt_id=attempt_id,
        order=order,
        adapter=worker.kind,
        adapter_version=worker.version,
        state=state,
        manifest=manifest,
        verification=None,
        error=AttemptError(code=code, message=redact_absolute_paths(message)),
    )


def _collect_manifest(
    produced: WorkerProduced, work_unit: WorkUnit
) -> ResultManifest | tuple[AttemptErrorCode, str]:
    locator = produced.manifest_locator
    try:
        document = load_json(produced.manifest_path, what="result manifest")
    except EffectError:
        return AttemptErrorCode.MANIFEST_MISSING, f"{locator}: result manifest missing"
    except ConfigError:
        return AttemptErrorCode.MANIFEST_UNREADABLE, f"{locator}: result manifest is not JSON"
    try:
        manifest = ResultManifest.from_dict(document)
    except RecordError as e:
        return AttemptErrorCode.MANIFEST_INVALID, f"{locator}: {e}"
    binding = check_manifest_binding(work_unit, manifest)
    if isinstance(binding, BindingRefusal):
        codes = ", ".join(binding.reason_codes)
        return AttemptErrorCode.MANIFEST_BINDING, f"{locator}: {codes}"
    return manifest


def _run_attempt(
    loaded: LoadedConfig, order: int, attempt_id: str, worker: WorkerAdapter
) -> AttemptRecord:
    context = AttemptContext(
        attempt_id=attempt_id, base_dir=loaded.source.base_dir, work_unit=loaded.work_unit
    )
    outcome = worker.run(context)
    if isinstance(outcome, WorkerFailed):
        return _error(
            attempt_id,
            order,
            worker,
            state=AttemptState.WORKER_ERROR,
            code=AttemptErrorCode.WORKER_FAILED,
            message=outcome.message,
        )
    collected = _collect_manifest(outcome, loaded.work_unit)
    if not isinstance(collected, ResultManifest):
        code, message = collected
        return _error(
            attempt_id,
            order,
            worker,
            state=AttemptState.RESULT_MANIFEST_ERROR,
            code=code,
            message=message,
        )
    summary = ManifestSummary.of(collected)
    try:
        verification = loaded.verifier.verify(loaded.work_unit, collected, outcome)
    except VerifierFailure as e:
        return _error(
            attempt_id,
            order,
            worker,
            state=AttemptState.VERIFICATION_ERROR,
            code=AttemptErrorCode.VERIFIER_FAILED,
            message=str(e),
            manifest=summary,
        )
    binding = check_binding(loaded.work_unit, collected, verification)
    if isinstance(binding, BindingRefusal):
        return _error(
            attempt_id,
            order,
            worker,
            state=AttemptState.VERIFICATION_ERROR,
            code=AttemptErrorCode.VERIFICATION_BINDING,
            message="verification does not bind: " + ", ".join(binding.reason_codes),
            manifest=summary,
        )
    return AttemptRecord(
        attempt_id=attempt_id,
        order=order,
        adapter=worker.kind,
        adapter_version=worker.version,
        state=AttemptState.VERIFIED,
        manifest=summary,
        verification=VerificationSummary.of(verification),
        error=None,
    )


def run_loaded(loaded: LoadedConfig) -> RunRecord:
    """Run every attempt of a loaded config, in order, and return the run record."""
    attempts = tuple(
        _run_attempt(loaded, order, attempt_id, worker)
        for order, (attempt_id, worker) in enumerate(loaded.attempts, start=1)
    )
    return RunRecord(
        run_id=loaded.run_id,
        orchestrator=ORCHESTRATOR,
        work_unit=WorkUnitRef.of(loaded.work_unit),
        config_digest=loaded.config_digest,
        verifier_policy_digest=loaded.verifier_policy_digest,
        imported_from=None,
        attempts=attempts,
        authority=RunAuthority.none(),
    )


def run_config(path: Path | str) -> RunRecord:
    """Load the config at ``path`` and run it (see `load_config` for what it raises)."""
    return run_loaded(load_config(path))
