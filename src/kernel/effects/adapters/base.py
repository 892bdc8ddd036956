"""What a worker or verifier adapter is, and how a config reaches it.

`kernel.effects.orchestrate` runs attempts through adapters; the adapters
(`kernel.effects.adapters.fixture`, `kernel.effects.adapters.command`) implement
these protocols. Both sides import this module and never each other's, so there is
no import cycle, and an adapter is available only when a caller adds it to an
`AdapterRegistry`.

Rules enforced:

- a worker adapter returns `WorkerProduced` or `WorkerFailed`; a verifier adapter
  returns a `VerificationResult` or raises `VerifierFailure`;
- `note` facts are volatile: they never enter a record;
- a registry refuses a second factory for the same kind (`DuplicateAdapterError`);
- `ConfigSource` names the file and key of every config error; an adapter reads its
  entry as a record (`ConfigSource.parse`).
"""

from __future__ import annotations

import contextlib
import contextvars
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Literal, Protocol, TypeVar, runtime_checkable

import attrs

from kernel.effects.files import load_json
from kernel.effects.run_config import filled
from kernel.effects.sandbox import Limits
from kernel.errors import ConfigError, DuplicateAdapterError, RecordError
from kernel.records.codec import Record
from kernel.records.shapes import LiteralShape, shape_of
from kernel.run.record import AttemptErrorCode, CheckRun, SandboxRun
from kernel.run.verification import (
    Actor,
    ActorType,
    CheckResult,
    Independence,
    Isolation,
    ResultManifest,
    VerificationResult,
    WorkUnit,
    verdict_from_checks,
    weakest_isolation,
)

R = TypeVar("R", bound=Record)

__all__ = [
    "AdapterRegistry",
    "AttemptContext",
    "ConfigSource",
    "ProvenanceSource",
    "VerifierAdapter",
    "VerifierFactory",
    "WorkerAdapter",
    "WorkerFactory",
    "WorkerFailed",
    "WorkerProduced",
    "AttemptEvidence",
    "below_minimum",
    "collecting_notes",
    "independent_verification",
    "load_object",
    "note",
    "record_check_run",
    "record_worker_sandbox",
]


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

    def for_run(self) -> VerifierAdapter:
        """This verifier as one run uses it, called before each run (a replay and a
        calibration too).

        A verifier that keeps what it learnt between the attempts of a run (the
        ``command`` verifier runs a patch's checks once) returns a fresh copy, so no run
        reuses another's results. The default, for a verifier that keeps nothing, is
        the verifier itself: an adapter inherits it by subclassing `VerifierAdapter`.
        """
        return self


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


@attrs.define
class AttemptEvidence:
    """What an attempt's adapters report for its record: how each sandbox ran."""

    worker_sandbox: SandboxRun | None = None
    """The worker's sandbox."""
    check_runs: list[CheckRun] = attrs.Factory(list)
    """Each verifier check, in check order."""
    minimum: Isolation | None = None
    """The run's minimum isolation (its `kernel.run.record.IsolationPolicy`), if any."""


_EVIDENCE: contextvars.ContextVar[AttemptEvidence | None] = contextvars.ContextVar(
    "kernel_attempt_evidence", default=None
)


def record_worker_sandbox(run: SandboxRun) -> None:
    """Record (in the attempt's run record) how the worker's sandbox ran."""
    evidence = _EVIDENCE.get()
    if evidence is not None:
        evidence.worker_sandbox = run


def record_check_run(run: CheckRun) -> None:
    """Record (in the attempt's run record) how one verifier check ran."""
    evidence = _EVIDENCE.get()
    if evidence is not None:
        evidence.check_runs.append(run)


def below_minimum(level: Isolation) -> str | None:
    """Why a sandbox obtained at ``level`` is below the run's minimum, or None.

    A sandbox may fall back at run time (the machine changed since the config loaded);
    evidence weaker than the config accepts is a sandbox failure, never evidence.
    """
    evidence = _EVIDENCE.get()
    minimum = None if evidence is None else evidence.minimum
    if minimum is None or weakest_isolation((level, minimum)) is minimum:
        return None
    return f"the sandbox obtained {level} isolation, below the run's minimum {minimum}"


@contextlib.contextmanager
def collecting_notes(
    notes: dict[str, object], evidence: AttemptEvidence | None = None
) -> Iterator[None]:
    """Within the block, `note` (in this thread/context) writes into ``notes`` and the
    ``record_*`` functions into ``evidence``."""
    token = _NOTES.set(notes)
    evidence_token = _EVIDENCE.set(evidence)
    try:
        yield
    finally:
        _EVIDENCE.reset(evidence_token)
        _NOTES.reset(token)


WorkerFactory = Callable[[Mapping[str, object], "ConfigSource"], WorkerAdapter]
VerifierFactory = Callable[[Mapping[str, object], "ConfigSource"], tuple[VerifierAdapter, str]]
"""A verifier factory returns the adapter and the verifier policy digest."""


class AdapterRegistry:
    """The worker and verifier adapters a config may name, registered explicitly.

    Built by the caller (`kernel.effects.adapters.builtin_registry` gives the
    built-in ones); nothing registers itself on import. Registering a kind twice
    raises `DuplicateAdapterError`: a second factory never silently replaces the first.
    A kind registered with its ``entry`` record (the config entry its factory reads,
    with ``adapter: Literal[kind]``) is described by the config's JSON Schema.
    """

    __slots__ = ("_entries", "_verifiers", "_workers")

    def __init__(self) -> None:
        self._workers: dict[str, WorkerFactory] = {}
        self._verifiers: dict[str, VerifierFactory] = {}
        self._entries: dict[tuple[str, str], type[Record]] = {}

    def add_worker(
        self, kind: str, factory: WorkerFactory, *, entry: type[Record] | None = None
    ) -> None:
        """Make worker adapter ``kind`` available to configs.

        Raises:
            DuplicateAdapterError: ``kind`` is already registered.
            TypeError: ``entry`` has no field ``adapter: Literal[kind]``.
        """
        if kind in self._workers:
            raise DuplicateAdapterError(f"worker adapter {kind!r} is already registered")
        self._add_entry("worker", kind, entry)
        self._workers[kind] = factory

    def add_verifier(
        self, kind: str, factory: VerifierFactory, *, entry: type[Record] | None = None
    ) -> None:
        """Make verifier adapter ``kind`` available to configs.

        Raises:
            DuplicateAdapterError: ``kind`` is already registered.
            TypeError: ``entry`` has no field ``adapter: Literal[kind]``.
        """
        if kind in self._verifiers:
            raise DuplicateAdapterError(f"verifier adapter {kind!r} is already registered")
        self._add_entry("verifier", kind, entry)
        self._verifiers[kind] = factory

    def _add_entry(self, side: str, kind: str, entry: type[Record] | None) -> None:
        if entry is None:
            return
        shape = shape_of(typing.get_type_hints(entry).get("adapter"))
        if not (isinstance(shape, LiteralShape) and shape.values == (kind,)):
            raise TypeError(f"{entry.__name__} needs a field adapter: Literal[{kind!r}]")
        self._entries[(side, kind)] = entry

    def worker(self, kind: str) -> WorkerFactory | None:
        """The factory of worker adapter ``kind``, or None."""
        return self._workers.get(kind)

    def verifier(self, kind: str) -> VerifierFactory | None:
        """The factory of verifier adapter ``kind``, or None."""
        return self._verifiers.get(kind)

    def entries(self, side: Literal["worker", "verifier"]) -> tuple[type[Record], ...]:
        """The entry records of the ``worker`` or ``verifier`` kinds registered with one,
        in registration order."""
        return tuple(cls for (found, _), cls in self._entries.items() if found == side)


@attrs.frozen(kw_only=True)
class ConfigSource:
    """Where a config came from: entries read as records (`parse`) name file and key on
    failure."""

    path: Path
    """The config file (as the user named it)."""
    cache: dict[object, object] = attrs.field(factory=dict, eq=False, hash=False, repr=False)
    """Per-load memo for adapters (e.g. one baseline tree digest per folder)."""
    limits: Limits = attrs.field(factory=Limits)
    """Resource limits of every sandboxed run of the config (its ``limits`` entry, or
    the command line's, over the defaults)."""
    read: list[Path] = attrs.field(factory=list, eq=False, hash=False, repr=False)
    """Every file and folder an adapter said it reads (`reads`): no output may land there."""

    def reads(self, path: Path) -> Path:
        """Note that the run reads ``path`` (a file, or every file under a folder)."""
        self.read.append(path)
        return path

    @property
    def base_dir(self) -> Path:
        """The config's folder."""
        return self.path.parent

    def error(self, key: str, message: str) -> ConfigError:
        """A ConfigError naming the file and the key."""
        return ConfigError(f"{self.path}: {key}: {message}")

    def parse(self, cls: type[R], entry: Mapping[str, object], where: str) -> R:
        """``entry`` read as a record of ``cls`` (its left-out keys at their defaults,
        `kernel.effects.run_config.filled`).

        Raises:
            ConfigError: naming the file and the path (``attempts['a'].patch``).
        """
        try:
            return cls.from_dict(filled(cls, entry))
        except RecordError as e:
            raise self.error(f"{where}.{e.path}" if e.path else where, e.reason) from e


def load_object(path: Path, what: str) -> dict[str, object]:
    """Read a JSON object document.

    Raises:
        EffectError: the file is missing or unreadable.
        ConfigError: it is not JSON, or not an object.
    """
    document = load_json(path, what=what)
    if type(document) is not dict:
        raise ConfigError(f"{path}: {what} must be a JSON object")
    return document


def independent_verification(
    *,
    verifier_id: str,
    adapter: VerifierAdapter,
    work_unit: WorkUnit,
    manifest: ResultManifest,
    checks: tuple[CheckResult, ...],
    result_id: str,
    rationale: str,
) -> VerificationResult:
    """The verification result a kernel verifier adapter reports for ``manifest``.

    Every built-in verifier is a system actor independent of the worker (it sees only
    the manifest and the candidate), and its verdict follows the one shared rule
    (`verdict_from_checks`); only the id, the checks and the rationale differ.
    """
    status, recommendation = verdict_from_checks(checks, manifest.status)
    return VerificationResult(
        id=result_id,
        result_manifest_id=manifest.id,
        result_manifest_digest=manifest.digest,
        work_unit_id=work_unit.id,
        work_unit_version=work_unit.version,
        work_unit_digest=work_unit.digest,
        attempt=manifest.attempt,
        verifier=Actor(
            id=verifier_id,
            type=ActorType.SYSTEM,
            adapter=adapter.kind,
            adapter_version=adapter.version,
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
        rationale=rationale,
    )
