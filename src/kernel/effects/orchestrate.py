"""Run a work unit's attempts through worker adapters and an independent verifier.

Produces a `kernel.run.record.RunRecord`. Same config, same bytes: nothing here reads a
clock, the host name, the environment or an absolute path into the record; every
message names files relative to the config's folder.

Adapters (`kernel.effects.adapters`): a worker adapter is built by a factory that a
caller adds to an `AdapterRegistry` under its adapter kind, takes the attempt's config
entry, and returns either `WorkerProduced` (where its manifest and candidate are) or
`WorkerFailed`. A verifier adapter is added the same way and turns a manifest and a
candidate folder into a `VerificationResult`, or raises `VerifierFailure`. Without an
explicit registry, `load_config` uses `kernel.effects.adapters.builtin_registry`: the
fixture adapters (``fixture-result``, ``fixture-failure``, ``fixture-policy``) and the
``command`` worker and verifier. Nothing registers itself on import.

Attempts run in parallel through a `concurrent.futures.Executor` (default: a local
thread pool sized to the machine); the record lists them in launch order whatever
order they finish in, and an attempt whose future raised is a ``worker_error``,
never dropped. Each attempt gets a private scratch folder (removed after the run)
inside the run's `kernel.effects.sandbox.private_tempdir`, which no sandbox can see.
Adapters may `note` volatile facts (durations, isolation, output sizes); they go to
`RunOutcome.volatile`, never into the record.

Config document (JSON; relative paths are resolved against the config's folder; the
records and the schema ``config``: `kernel.effects.run_config`)::

    {"kind": "kernel-orchestration-config", "schema_version": "1",
     "run_id": "...", "work_unit": "<path to a WorkUnit document>",
     "verifier": {"adapter": "fixture-policy", "policy": "<path>"},
     "attempts": [{"attempt_id": "...", "adapter": "fixture-result",
                   "result_manifest": "<path>", "candidate_root": "<path>"},
                  {"attempt_id": "...", "adapter": "fixture-failure",
                   "failure": "<message>"}],
     "replay": "deterministic" | "nondeterministic",     (optional, default deterministic)
     "costly": false,      (optional: true when a worker run costs money, e.g. a paid
                            model; `kernel run` then skips the replay unless asked)
     "isolation": {"minimum": "overlay" | "namespace_copy" | "copy",
                   "accept_below_overlay": false},          (optional, see below)
     "limits": {"memory_bytes": ..., "processes": ..., "cpu_seconds": ...,
                "output_bytes": ..., "writable_bytes": ..., "tmp_bytes": ...}}
                                          (optional; integers >= 1 or null for none)

Isolation is evidence: the ``minimum`` defaults to the strongest level this machine
offers, and below it the run refuses to start (`ConfigError`, exit 2); a config with
sandboxed adapters records its `IsolationPolicy` in the run. Each attempt's record
carries its worker's `SandboxRun` and each verifier check's `CheckRun` (isolation,
limits and mechanisms, reason), reported by the adapters through
`record_worker_sandbox` / `record_check_run`. ``limits`` (over the defaults of
`kernel.effects.sandbox.Limits`, and under ``limit_overrides`` from the command line)
apply to every sandboxed run of the config.

``config_digest`` is SHA-256 of the canonical JSON of the config document as read.
Adapters that run real commands report provenance (`ProvenanceSource`): the digests
of what they run on, recorded in the run's `RunProvenance` with the declared replay.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import tempfile
import time
import typing
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Final

import attrs

from kernel.effects import console
from kernel.effects.adapters import builtin_registry
from kernel.effects.adapters.base import (
    AdapterRegistry,
    AttemptContext,
    AttemptEvidence,
    ConfigSource,
    ProvenanceSource,
    VerifierAdapter,
    WorkerAdapter,
    WorkerFailed,
    WorkerProduced,
    collecting_notes,
    load_object,
    note,
)
from kernel.effects.calibration import (
    CalibrationPlan,
    calibrate_run,
    calibration_plan,
    not_valid,
)
from kernel.effects.files import load_json
from kernel.effects.git import content_tree_id
from kernel.effects.run_config import CONFIG_KIND, IsolationEntry, RunConfig, filled
from kernel.effects.sandbox import Limits, available_isolation, private_tempdir
from kernel.effects.testids import unknown_test_ids
from kernel.errors import (
    CanonicalizationError,
    ConfigError,
    EffectError,
    FieldError,
    RecordError,
    RefusedError,
    VerifierFailure,
)
from kernel.records.identity import sha256_bytes, sha256_hex
from kernel.run.record import (
    AttemptError,
    AttemptErrorCode,
    AttemptRecord,
    AttemptState,
    Calibration,
    DeclaredReplay,
    IsolationPolicy,
    ManifestSummary,
    ProvenanceInput,
    RunAuthority,
    RunProvenance,
    RunRecord,
    VerificationSummary,
    WorkUnitRef,
    redact_absolute_paths,
)
from kernel.run.report import evidence_state_of
from kernel.run.verification import (
    EvidenceChainRefusal,
    ResultManifest,
    VerificationResult,
    WorkUnit,
    check_evidence_chain,
    check_manifest_chain,
    weakest_isolation,
)

__all__ = [
    "CONFIG_KIND",
    "LIMIT_KEYS",
    "ORCHESTRATOR",
    "AdapterRegistry",
    "AttemptContext",
    "AttemptOutcome",
    "ConfigSource",
    "LoadedConfig",
    "ProvenanceSource",
    "RunOutcome",
    "VerifierAdapter",
    "WorkerAdapter",
    "WorkerFailed",
    "WorkerProduced",
    "builtin_registry",
    "load_config",
    "note",
    "run_config",
    "run_detailed",
    "run_loaded",
]

ORCHESTRATOR: Final = "kernel.effects.orchestrate/1"


# --- orchestration ---------------------------------------------------------------------


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
    isolation_policy: IsolationPolicy | None = None
    """The isolation the config accepts (runs with sandboxed adapters)."""
    costly: bool = False
    """The config declares its workers costly: they are not re-run for replay unasked."""
    calibration: CalibrationPlan | None = None
    """What runs before any attempt is judged (None: the verifier declares no tests, or
    the config says ``"calibration": false``)."""


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
    # ADR-0006: the verifier's baseline as a git tree, what a promotion's branch tip
    # must hold (adapters[0] is the verifier).
    baseline = getattr(adapters[0], "baseline", None) if adapters else None
    return RunProvenance(
        declared_replay=declared,
        inputs=tuple(ProvenanceInput(name=n, digest=d) for n, d in sorted(inputs.items())),
        baseline_git_tree=content_tree_id(baseline) if isinstance(baseline, Path) else None,
    )


def load_config(
    path: Path | str,
    *,
    registry: AdapterRegistry | None = None,
    limit_overrides: Mapping[str, int | None] | None = None,
) -> LoadedConfig:
    """Read and check an orchestration config and the files it names.

    Args:
        path: the config file.
        registry: the adapters the config may name (None: `builtin_registry`).
        limit_overrides: resource limits (`LIMIT_KEYS`) of every sandboxed run that
            replace the config's ``limits`` entry key by key (e.g. from the CLI).

    Raises:
        EffectError: a file is missing or unreadable.
        ConfigError: a document is unusable (message names the file and key).
    """
    adapters = builtin_registry() if registry is None else registry
    source = ConfigSource(path=Path(path))
    document = load_object(source.path, "orchestration config")
    config = _parsed(document, source)
    source = attrs.evolve(source, limits=_limits(config.limits, limit_overrides or {}))
    unit_path = source.base_dir / config.work_unit
    try:
        work_unit = WorkUnit.from_dict(load_json(unit_path, what="work unit"))
    except RecordError as e:
        raise ConfigError(f"{unit_path}: {e}") from e
    verifier, policy_digest = _verifier(document, config, source, adapters)
    _check_required_validators(verifier, work_unit, unit_path)
    _check_test_ids(verifier, source)
    attempts = _attempts(document, config, source, adapters)
    calibration = calibration_plan(config.calibration, source, verifier)
    provenance = _provenance(
        config.replay, "replay" in document, [verifier, *(a for _, a in attempts)], source
    )
    sandboxed = any(isinstance(a, ProvenanceSource) for a in (verifier, *(a for _, a in attempts)))
    return LoadedConfig(
        source=source,
        run_id=config.run_id,
        config_digest=sha256_hex(document),
        work_unit=work_unit,
        verifier=verifier,
        verifier_policy_digest=policy_digest,
        attempts=tuple(attempts),
        inputs=(source.path, unit_path, *source.read),
        declared_replay=config.replay,
        provenance=provenance,
        isolation_policy=_isolation_policy(config.isolation, source, sandboxed=sandboxed),
        costly=config.costly,
        calibration=calibration,
    )


def _parsed(document: Mapping[str, object], source: ConfigSource) -> RunConfig:
    """The document as a `RunConfig` (its left-out keys at their defaults).

    Raises:
        ConfigError: naming the file and the document path (``$.attempts[1].adapter``).
    """
    try:
        # Canonical JSON first: the config's digest must exist (no float, no NaN).
        sha256_hex(document)
        return RunConfig.from_dict(filled(RunConfig, document))
    except CanonicalizationError as e:
        raise source.error(e.path, e.reason) from e
    except RecordError as e:
        raise source.error(f"$.{e.path}" if e.path else "$", e.reason) from e


def _verifier(
    document: Mapping[str, object],
    config: RunConfig,
    source: ConfigSource,
    adapters: AdapterRegistry,
) -> tuple[VerifierAdapter, str]:
    """The config's verifier adapter (built from its whole entry) and its policy digest."""
    kind = config.verifier.adapter
    verifier_factory = adapters.verifier(kind)
    if verifier_factory is None:
        raise source.error("$.verifier.adapter", f"unknown verifier adapter {kind!r}")
    entry = document["verifier"]
    return verifier_factory(typing.cast("Mapping[str, object]", entry), source)


def _attempts(
    document: Mapping[str, object],
    config: RunConfig,
    source: ConfigSource,
    adapters: AdapterRegistry,
) -> list[tuple[str, WorkerAdapter]]:
    """The config's attempts, in launch order, each built by its worker adapter from its
    whole entry."""
    entries = typing.cast("list[Mapping[str, object]]", document["attempts"])
    attempts: list[tuple[str, WorkerAdapter]] = []
    for index, (attempt, entry) in enumerate(zip(config.attempts, entries, strict=True)):
        factory = adapters.worker(attempt.adapter)
        if factory is None:
            raise source.error(
                f"$.attempts[{index}].adapter", f"unknown worker adapter {attempt.adapter!r}"
            )
        attempts.append((attempt.attempt_id, factory(entry, source)))
    return attempts


def _check_required_validators(verifier: object, work_unit: WorkUnit, unit_path: Path) -> None:
    """A required validator the verifier never reports is a config error at load time
    (issue 19): otherwise every attempt would end ``required_check_missing`` after the
    whole run. Checked for verifiers that declare their check ids (``check_ids()``)."""
    declared = getattr(verifier, "check_ids", None)
    if not callable(declared):
        return
    ids = declared()
    missing = [v for v in work_unit.required_validators if v not in ids]
    if missing:
        raise ConfigError(
            f"{unit_path}: required_validators: {missing[0]!r} is not a check of the "
            f"verifier (its checks: {', '.join(sorted(ids))})"
        )


def _check_test_ids(verifier: object, source: ConfigSource) -> None:
    """A declared test id the verifier's baseline statically does not define is a config
    error at load time (issue 19), not a check that fails every candidate."""
    baseline = getattr(verifier, "baseline", None)
    if not isinstance(baseline, Path):
        return

    def read(relative: str) -> str | None:
        try:
            return (baseline / relative).read_text("utf-8", "replace")
        except OSError:
            return None

    for check in getattr(verifier, "checks", ()):
        unknown = unknown_test_ids(getattr(check, "tests", ()), read)
        if unknown:
            raise source.error(
                "$.verifier.checks",
                f"check {check.id!r}: unknown test id {unknown[0]!r}: the baseline defines "
                "no such test",
            )


LIMIT_KEYS: Final = tuple(f.name for f in attrs.fields(Limits))
"""The keys of a config's ``limits`` entry (each a positive integer or null)."""


def _limits(limits: Limits, overrides: Mapping[str, int | None]) -> Limits:
    """The config's ``limits`` entry (over the defaults, `kernel.effects.sandbox.Limits`),
    then ``overrides`` over both."""
    unknown = sorted(set(overrides) - set(LIMIT_KEYS))
    if unknown:
        raise ConfigError(f"--limit: unknown limit {unknown[0]!r} (one of {', '.join(LIMIT_KEYS)})")
    try:
        return attrs.evolve(limits, **overrides)
    except FieldError as e:
        raise ConfigError(f"--limit: {e}") from e


def _isolation_policy(
    entry: IsolationEntry | None, source: ConfigSource, *, sandboxed: bool
) -> IsolationPolicy | None:
    """The config's ``isolation`` entry, checked against what this machine offers.

    Its ``minimum`` defaults to the strongest level this machine offers, and evidence
    below ``overlay`` is never grounds for ``verified`` unless accepted here.
    """
    if entry is None and not sandboxed:
        return None
    if entry is None:
        entry = IsolationEntry()
    offered = available_isolation()
    minimum = offered if entry.minimum is None else entry.minimum
    # Below the minimum the run refuses to start: no attempt runs weaker than accepted.
    if weakest_isolation((offered, minimum)) is not minimum:
        raise source.error(
            "$.isolation.minimum",
            f"this machine offers {offered} isolation, below the minimum {minimum}; "
            "the run does not start",
        )
    return IsolationPolicy(minimum=minimum, accept_below_overlay=entry.accept_below_overlay)


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
    binding = check_manifest_chain(work_unit, manifest)
    if isinstance(binding, EvidenceChainRefusal):
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
    keep_artifacts: bool = False,
) -> AttemptOutcome:
    notes: dict[str, object] = {}
    started = time.monotonic()
    # Unique per try: a task retried after a lost worker (Dask reschedules it) starts
    # from clean scratch of its own, never from what the lost try left behind.
    folder = Path(tempfile.mkdtemp(prefix=f"attempt-{order}-", dir=scratch))
    console.progress(f"attempt {attempt_id}: started ({worker.kind})")
    policy = loaded.isolation_policy
    evidence = AttemptEvidence(minimum=None if policy is None else policy.minimum)
    try:
        with collecting_notes(notes, evidence):
            record, manifest, produced = _run_attempt(loaded, order, attempt_id, worker, folder)
            kept = _kept(manifest, produced) if keep_artifacts else {}
        record = attrs.evolve(
            record,
            worker_sandbox=evidence.worker_sandbox,
            check_runs=tuple(evidence.check_runs),
        )
    finally:
        notes["attempt_ms"] = int((time.monotonic() - started) * 1000)
        shutil.rmtree(folder, ignore_errors=True)
    # The evidence state, not the control state: "verified" also names a rejected attempt.
    shown = evidence_state_of(record.state, record.verification)
    console.progress(f"attempt {attempt_id}: {shown} ({notes['attempt_ms']} ms)")
    return AttemptOutcome(record=record, manifest=manifest, notes=notes, artifacts=kept)


def _calibration_attempt(
    loaded: LoadedConfig, order: int, attempt_id: str, worker: WorkerAdapter, scratch: Path
) -> AttemptRecord:
    """A calibration attempt (`kernel.effects.calibration`): an attempt like any other,
    of which calibration reads the record alone."""
    return _attempt_in_scratch(loaded, order, attempt_id, worker, scratch).record


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
        state, code, message = AttemptState.WORKER_ERROR, outcome.code, outcome.message
        failed = _error(attempt_id, order, worker, state=state, code=code, message=message)
        return failed, None, None
    collected = _collect_manifest(outcome, loaded.work_unit)
    if not isinstance(collected, ResultManifest):
        code, message = collected
        state = AttemptState.RESULT_MANIFEST_ERROR
        failed = _error(attempt_id, order, worker, state=state, code=code, message=message)
        return failed, None, None
    verified = _verify(loaded, collected, outcome)
    if isinstance(verified, AttemptError):
        record = _error(
            attempt_id,
            order,
            worker,
            state=AttemptState.VERIFICATION_ERROR,
            code=verified.code,
            message=verified.message,
            manifest=ManifestSummary.of(collected),
        )
        return record, collected, outcome
    record = AttemptRecord(
        attempt_id=attempt_id,
        order=order,
        adapter=worker.kind,
        adapter_version=worker.version,
        state=AttemptState.VERIFIED,
        manifest=ManifestSummary.of(collected),
        verification=VerificationSummary.of(verified),
        error=None,
    )
    return record, collected, outcome


def _verify(
    loaded: LoadedConfig, manifest: ResultManifest, produced: WorkerProduced
) -> VerificationResult | AttemptError:
    """The verifier's result for a collected manifest, or why there is none (a verifier
    failure, a result that does not bind to the work unit and manifest)."""
    try:
        verification = loaded.verifier.verify(loaded.work_unit, manifest, produced)
    except VerifierFailure as e:
        return AttemptError(
            code=AttemptErrorCode.VERIFIER_FAILED, message=redact_absolute_paths(str(e))
        )
    binding = check_evidence_chain(loaded.work_unit, manifest, verification)
    if isinstance(binding, EvidenceChainRefusal):
        return AttemptError(
            code=AttemptErrorCode.VERIFICATION_BINDING,
            message="verification does not bind: " + ", ".join(binding.reason_codes),
        )
    return verification


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
    # Never a dropped attempt, never the worker's failure: a task that did not complete
    # (an adapter or executor fault, a worker lost after its retries) is a control error.
    record = _error(
        attempt_id,
        order,
        worker,
        state=AttemptState.WORKER_ERROR,
        code=AttemptErrorCode.INFRASTRUCTURE_FAULT,
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
        RefusedError: the config's calibration (`kernel.effects.calibration`) is not
            valid: no attempt ran; the error's ``refusal`` is the `Calibration`.
    """
    started = time.monotonic()
    own = executor is None
    loaded = _scoped_to_this_run(loaded)
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(private_tempdir("run"))
        pool = executor or concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, min(len(loaded.attempts), os.cpu_count() or 1))
        )
        if own:
            # Registered after the scratch folder: the pool is shut down before it goes.
            stack.callback(pool.shutdown, wait=True, cancel_futures=True)
        calibration = _calibrated(loaded, pool, scratch)
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
        isolation_policy=loaded.isolation_policy,
        calibration=calibration,
    )
    return RunOutcome(
        record=record,
        attempts=tuple(outcomes),
        wall_ms=int((time.monotonic() - started) * 1000),
    )


def _calibrated(
    loaded: LoadedConfig, pool: concurrent.futures.Executor, scratch: Path
) -> Calibration | None:
    """The config's calibration, run before any candidate is judged (None: none asked).

    Raises:
        RefusedError: the calibration is not valid: an invalid instance is not judged.
    """
    if loaded.calibration is None:
        return None
    calibrating = _scoped_to_this_run(attrs.evolve(loaded, verifier=loaded.calibration.verifier))
    calibration = calibrate_run(
        loaded.run_id,
        loaded.calibration,
        lambda order, attempt_id, worker: pool.submit(
            _calibration_attempt, calibrating, order, attempt_id, worker, scratch
        ),
    )
    if not calibration.valid:
        raise RefusedError(calibration, not_valid(calibration))
    return calibration


def _scoped_to_this_run(loaded: LoadedConfig) -> LoadedConfig:
    """``loaded`` with a verifier whose state lives for one run only.

    A verifier may keep what it learnt between the attempts of one run (the command
    verifier runs a patch's checks once for byte-identical patches); a replay or a
    second run of the same config must judge afresh, never reuse the first run's
    results, so such a verifier gives a fresh copy of itself here
    (`VerifierAdapter.for_run`)."""
    return attrs.evolve(loaded, verifier=loaded.verifier.for_run())


def run_loaded(
    loaded: LoadedConfig, *, executor: concurrent.futures.Executor | None = None
) -> RunRecord:
    """Run every attempt of a loaded config and return the run record (`run_detailed`)."""
    return run_detailed(loaded, executor=executor).record


def run_config(path: Path | str, *, registry: AdapterRegistry | None = None) -> RunRecord:
    """Load the config at ``path`` and run it (see `load_config` for what it raises)."""
    return run_loaded(load_config(path, registry=registry))
