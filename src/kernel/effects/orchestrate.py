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

Built-in adapters for real runs (`kernel.effects.command_adapters`, loaded on first
use so a config never needs an import): worker ``command`` and verifier ``command``.

Attempts run in parallel through a `concurrent.futures.Executor` (default: a local
thread pool sized to the machine); the record lists them in launch order whatever
order they finish in, and an attempt whose future raised is a ``worker_error``,
never dropped. Each attempt gets a private scratch folder (removed after the run)
inside the run's `kernel.effects.sandbox.private_tempdir`, which no sandbox can see.
Adapters may `note` volatile facts (durations, isolation, output sizes); they go to
`RunOutcome.volatile`, never into the record.

Config document (JSON; relative paths are resolved against the config's folder)::

    {"kind": "kernel-orchestration-config", "schema_version": "1",
     "run_id": "...", "work_unit": "<path to a WorkUnit document>",
     "verifier": {"adapter": "fixture-policy", "policy": "<path>"},
     "attempts": [{"attempt_id": "...", "adapter": "fixture-result",
                   "result_manifest": "<path>", "candidate_root": "<path>"},
                  {"attempt_id": "...", "adapter": "fixture-failure",
                   "failure": "<message>"}],
     "replay": "deterministic" | "nondeterministic"}     (optional, default deterministic)

``config_digest`` is SHA-256 of the canonical JSON of the config document as read.
Adapters that run real commands report provenance (`ProvenanceSource`): the digests
of what they run on, recorded in the run's `RunProvenance` with the declared replay.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Final, Protocol, runtime_checkable

import attrs

from kernel.effects.files import load_json
from kernel.effects.sandbox import private_tempdir
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
    DeclaredReplay,
    ManifestSummary,
    ProvenanceInput,
    RunAuthority,
    RunProvenance,
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
    ResultManifest,
    VerificationResult,
    WorkUnit,
    check_binding,
    check_manifest_binding,
    verdict_from_checks,
)

__all__ = [
    "CONFIG_KIND",
    "ORCHESTRATOR",
    "AttemptContext",
    "AttemptOutcome",
    "ConfigSource",
    "LoadedConfig",
    "ProvenanceSource",
    "RunOutcome",
    "VerifierAdapter",
    "VerifierFailure",
    "WorkerAdapter",
    "WorkerFailed",
    "WorkerProduced",
    "load_config",
    "note",
    "register_verifier_adapter",
    "register_worker_adapter",
    "run_config",
    "run_detailed",
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
    scratch: Path | None = None
    """A private, empty folder for this attempt's outputs (removed after the run)."""
    run_id: str = ""
    """The run's id."""


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
    code: AttemptErrorCode = AttemptErrorCode.WORKER_FAILED
    """Which failure: the worker failed, timed out, or its sandbox failed."""


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


@runtime_checkable
class ProvenanceSource(Protocol):
    """An adapter that can say what it runs on (command adapters)."""

    def provenance(self) -> tuple[tuple[str, str], ...]:
        """``(name, digest)`` pairs, e.g. ``("worker:a1", ...)``, ``("baseline:repo", ...)``."""
        ...


_NOTES: contextvars.ContextVar[dict[str, object] | None] = contextvars.ContextVar(
    "kernel_attempt_notes", default=None
)


def note(key: str, value: object) -> None:
    """Record a volatile fact about the current attempt (durations, sizes, isolation).

    Notes go to `RunOutcome.volatile`, never into the run record. Outside an attempt
    this does nothing.
    """
    notes = _NOTES.get()
    if notes is not None:
        notes[key] = value


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
    cache: dict[object, object] = attrs.field(factory=dict, eq=False, hash=False, repr=False)
    """Per-load memo for adapters (e.g. one baseline tree digest per folder)."""

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

    def only_keys(
        self,
        entry: Mapping[str, object],
        keys: set[str],
        where: str,
        optional: frozenset[str] = frozenset(),
    ) -> None:
        """Refuse unknown keys and missing keys (``optional`` keys may be absent)."""
        unknown = sorted(set(entry) - keys - optional)
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
        status, recommendation = verdict_from_checks(checks, manifest.status)
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
    declared_replay: DeclaredReplay = DeclaredReplay.DETERMINISTIC
    """What the config declares about replay."""
    provenance: RunProvenance | None = None
    """What the run runs on (when an adapter reports it, or replay is declared)."""


def _builtin_adapters() -> None:
    # The command adapters register themselves on import; importing here (not at
    # module level) avoids an import cycle and keeps fixture-only use light.
    from kernel.effects import command_adapters  # noqa: F401


def _provenance(
    declared: DeclaredReplay, explicit: bool, adapters: list[object], source: ConfigSource
) -> RunProvenance | None:
    inputs: dict[str, str] = {}
    for adapter in adapters:
        if isinstance(adapter, ProvenanceSource):
            for name, value in adapter.provenance():
                if inputs.setdefault(name, value) != value:
                    raise source.error("$", f"two different digests for input {name!r}")
    if not inputs and not explicit:
        return None
    return RunProvenance(
        declared_replay=declared,
        inputs=tuple(ProvenanceInput(name=n, digest=d) for n, d in sorted(inputs.items())),
    )


def load_config(path: Path | str) -> LoadedConfig:
    """Read and check an orchestration config and the files it names.

    Raises:
        EffectError: a file is missing or unreadable.
        ConfigError: a document is unusable (message names the file and key).
    """
    _builtin_adapters()
    source = ConfigSource(path=Path(path))
    document = _load_object(source.path, "orchestration config")
    source.only_keys(
        document,
        {"kind", "schema_version", "run_id", "work_unit", "verifier", "attempts"},
        "$",
        optional=frozenset({"replay"}),
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
    declared = DeclaredReplay.DETERMINISTIC
    if "replay" in document:
        try:
            declared = DeclaredReplay(source.string(document, "replay", "$"))
        except ValueError as e:
            allowed = ", ".join(d.value for d in DeclaredReplay)
            raise source.error("$.replay", f"expected one of {allowed}") from e
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
    provenance = _provenance(
        declared, "replay" in document, [verifier, *(a for _, a in attempts)], source
    )
    return LoadedConfig(
        source=source,
        run_id=run_id,
        config_digest=config_digest,
        work_unit=work_unit,
        verifier=verifier,
        verifier_policy_digest=policy_digest,
        attempts=tuple(attempts),
        inputs=(source.path, unit_path),
        declared_replay=declared,
        provenance=provenance,
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


@attrs.frozen(kw_only=True)
class AttemptOutcome:
    """One attempt's record, its manifest when collected, and its volatile notes."""

    record: AttemptRecord
    """What the run record keeps."""
    manifest: ResultManifest | None
    """The collected manifest (its artifacts name the candidate's digests)."""
    notes: Mapping[str, object]
    """Volatile facts (durations, isolation); never compared, never in the record."""
    artifacts: Mapping[str, bytes] = attrs.field(factory=dict)
    """Artifact id -> bytes, for manifest artifacts found in the candidate folder with
    their claimed digest (only when the run keeps artifacts)."""


_MAX_KEPT_BYTES: Final = 64 << 20


def _kept(manifest: ResultManifest | None, produced: WorkerProduced | None) -> dict[str, bytes]:
    """The manifest's artifacts that exist in the candidate folder with their digest."""
    kept: dict[str, bytes] = {}
    if manifest is None or produced is None:
        return kept
    for artifact in manifest.artifacts:
        locator = PurePosixPath(artifact.locator)
        if locator.is_absolute() or ".." in locator.parts:
            continue
        path = produced.candidate_root / artifact.locator
        try:
            if path.is_symlink() or not path.is_file():
                continue
            with path.open("rb") as handle:
                data = handle.read(_MAX_KEPT_BYTES + 1)
        except OSError:
            continue
        if len(data) <= _MAX_KEPT_BYTES and sha256_bytes(data) == artifact.digest:
            kept[artifact.id] = data
    return kept


def _attempt_in_scratch(
    loaded: LoadedConfig,
    order: int,
    attempt_id: str,
    worker: WorkerAdapter,
    scratch: Path,
    *,
    keep_artifacts: bool,
) -> AttemptOutcome:
    notes: dict[str, object] = {}
    token = _NOTES.set(notes)
    started = time.monotonic()
    folder = scratch / f"attempt-{order}"
    try:
        folder.mkdir()
        record, manifest, produced = _run_attempt(loaded, order, attempt_id, worker, folder)
        kept = _kept(manifest, produced) if keep_artifacts else {}
    finally:
        notes["attempt_ms"] = int((time.monotonic() - started) * 1000)
        _NOTES.reset(token)
        shutil.rmtree(folder, ignore_errors=True)
    return AttemptOutcome(record=record, manifest=manifest, notes=notes, artifacts=kept)


def _run_attempt(
    loaded: LoadedConfig, order: int, attempt_id: str, worker: WorkerAdapter, scratch: Path
) -> tuple[AttemptRecord, ResultManifest | None, WorkerProduced | None]:
    context = AttemptContext(
        attempt_id=attempt_id,
        base_dir=loaded.source.base_dir,
        work_unit=loaded.work_unit,
        scratch=scratch,
        run_id=loaded.run_id,
    )
    outcome = worker.run(context)
    if isinstance(outcome, WorkerFailed):
        return (
            _error(
                attempt_id,
                order,
                worker,
                state=AttemptState.WORKER_ERROR,
                code=outcome.code,
                message=outcome.message,
            ),
            None,
            None,
        )
    collected = _collect_manifest(outcome, loaded.work_unit)
    if not isinstance(collected, ResultManifest):
        code, message = collected
        return (
            _error(
                attempt_id,
                order,
                worker,
                state=AttemptState.RESULT_MANIFEST_ERROR,
                code=code,
                message=message,
            ),
            None,
            None,
        )
    summary = ManifestSummary.of(collected)
    try:
        verification = loaded.verifier.verify(loaded.work_unit, collected, outcome)
    except VerifierFailure as e:
        return (
            _error(
                attempt_id,
                order,
                worker,
                state=AttemptState.VERIFICATION_ERROR,
                code=AttemptErrorCode.VERIFIER_FAILED,
                message=str(e),
                manifest=summary,
            ),
            collected,
            outcome,
        )
    binding = check_binding(loaded.work_unit, collected, verification)
    if isinstance(binding, BindingRefusal):
        return (
            _error(
                attempt_id,
                order,
                worker,
                state=AttemptState.VERIFICATION_ERROR,
                code=AttemptErrorCode.VERIFICATION_BINDING,
                message="verification does not bind: " + ", ".join(binding.reason_codes),
                manifest=summary,
            ),
            collected,
            outcome,
        )
    return (
        AttemptRecord(
            attempt_id=attempt_id,
            order=order,
            adapter=worker.kind,
            adapter_version=worker.version,
            state=AttemptState.VERIFIED,
            manifest=summary,
            verification=VerificationSummary.of(verification),
            error=None,
        ),
        collected,
        outcome,
    )


@attrs.frozen(kw_only=True)
class RunOutcome:
    """A run record plus what is kept apart from it."""

    record: RunRecord
    """The run record (byte-stable: what replay compares)."""
    attempts: tuple[AttemptOutcome, ...]
    """Per attempt, launch order: record, manifest, volatile notes."""
    wall_ms: int
    """Wall time of the whole run (volatile)."""

    def volatile(self) -> dict[str, object]:
        """The volatile companion document (JSON types): durations, isolation, sizes."""
        return {
            "kind": "kernel-run-volatile",
            "schema_version": "1",
            "run_id": self.record.run_id,
            "source_run_digest": self.record.digest,
            "wall_ms": self.wall_ms,
            "attempts": [
                {"attempt_id": a.record.attempt_id, **dict(sorted(a.notes.items()))}
                for a in self.attempts
            ],
        }


def _crashed(
    attempt_id: str, order: int, worker: WorkerAdapter, error: BaseException
) -> AttemptOutcome:
    # Never a dropped attempt: an adapter or executor failure is a worker_error.
    record = _error(
        attempt_id,
        order,
        worker,
        state=AttemptState.WORKER_ERROR,
        code=AttemptErrorCode.WORKER_FAILED,
        message=f"attempt did not complete: {type(error).__name__}: {error}",
    )
    return AttemptOutcome(record=record, manifest=None, notes={})


def run_detailed(
    loaded: LoadedConfig,
    *,
    executor: concurrent.futures.Executor | None = None,
    keep_artifacts: bool = False,
) -> RunOutcome:
    """Run every attempt of a loaded config in parallel; keep launch order in the record.

    Args:
        loaded: the parsed config.
        executor: where attempts run (None: a local thread pool sized to the machine).
        keep_artifacts: return each attempt's verified-digest artifacts (e.g. the patch)
            in `AttemptOutcome.artifacts` before its scratch folder is removed.

    Raises:
        EffectError: the run's scratch folder cannot be created.
    """
    started = time.monotonic()
    own = executor is None
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(private_tempdir("run"))
        pool = executor or concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, min(len(loaded.attempts), os.cpu_count() or 1))
        )
        if own:
            # Registered after the scratch folder: the pool is shut down before it goes.
            stack.callback(pool.shutdown, wait=True, cancel_futures=True)
        futures = [
            pool.submit(
                _attempt_in_scratch,
                loaded,
                order,
                attempt_id,
                worker,
                scratch,
                keep_artifacts=keep_artifacts,
            )
            for order, (attempt_id, worker) in enumerate(loaded.attempts, start=1)
        ]
        outcomes: list[AttemptOutcome] = []
        for order, ((attempt_id, worker), future) in enumerate(
            zip(loaded.attempts, futures, strict=True), start=1
        ):
            try:
                outcomes.append(future.result())
            except Exception as e:
                outcomes.append(_crashed(attempt_id, order, worker, e))
    record = RunRecord(
        run_id=loaded.run_id,
        orchestrator=ORCHESTRATOR,
        work_unit=WorkUnitRef.of(loaded.work_unit),
        config_digest=loaded.config_digest,
        verifier_policy_digest=loaded.verifier_policy_digest,
        imported_from=None,
        attempts=tuple(o.record for o in outcomes),
        authority=RunAuthority.none(),
        provenance=loaded.provenance,
    )
    return RunOutcome(
        record=record,
        attempts=tuple(outcomes),
        wall_ms=int((time.monotonic() - started) * 1000),
    )


def run_loaded(
    loaded: LoadedConfig, *, executor: concurrent.futures.Executor | None = None
) -> RunRecord:
    """Run every attempt of a loaded config and return the run record (`run_detailed`)."""
    return run_detailed(loaded, executor=executor).record


def run_config(path: Path | str) -> RunRecord:
    """Load the config at ``path`` and run it (see `load_config` for what it raises)."""
    return run_loaded(load_config(path))
