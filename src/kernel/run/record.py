"""`RunRecord`: one multi-attempt run, every attempt in launch order, every failure kept.

Rules enforced at construction (a record that exists is well formed):

- a run has at least one attempt (vacuous runs are refused); attempt ids are unique and
  ``order`` is the 1-based launch position (``attempts[i].order == i + 1``);
- each attempt's ``state`` fixes what it carries: ``verified`` has a manifest summary and
  a verification summary and no error; ``worker_error`` has neither and an error;
  ``result_manifest_error`` has no verification and an error; ``verification_error`` has a
  manifest summary, no verification and an error;
- an error is a closed `AttemptErrorCode` plus a message that holds no absolute path
  (so a failure run's digest does not depend on where the checkout lives);
- the authority block is all false: a run record grants nothing;
- no timestamps and no host data: the same config gives the same bytes;
- a run of real (command) workers carries its `RunProvenance`: the replay it
  declares (``deterministic`` or ``nondeterministic``) and the digests of what it ran
  on (baseline tree, worker and verifier commands), so replay can check provenance
  apart from outputs. Volatile facts (durations) are never in a run record;
- isolation is evidence: each attempt records how its worker's sandbox ran
  (`SandboxRun`: isolation level and every limit with its mechanism) and how each
  verifier check ran (`CheckRun`: its sandbox, and the `CheckReason` when it did not
  pass); the run records the `IsolationPolicy` its config accepted.

``RunRecord.digest`` is SHA-256 over the canonical JSON of the whole ``to_dict()``
document: the value a report binds to (``source_run_digest``) and replay compares.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable
from typing import Any, Final, Literal, cast

import attrs

from kernel.records.codec import Record, document_digest, field_error, short_repr
from kernel.records.values import Count, Digest, NonBlank, OptionalDigest, Positive
from kernel.run.verification import (
    CheckReason,
    CheckStatus,
    Isolation,
    Recommendation,
    ResultManifest,
    SandboxLimit,
    VerificationResult,
    VerificationStatus,
    WorkerStatus,
    WorkUnit,
    weakest_isolation,
)

__all__ = [
    "RUN_RECORD_KIND",
    "RUN_RECORD_SCHEMA_VERSION",
    "SCREEN_CHECK_ID",
    "AttemptError",
    "AttemptErrorCode",
    "AttemptRecord",
    "AttemptState",
    "Calibration",
    "CalibrationReason",
    "CalibrationTest",
    "CheckRun",
    "CheckSummary",
    "CommandUid",
    "DeclaredReplay",
    "DeclaredTestKind",
    "DeclaredTestOutcome",
    "DeclaredTestResult",
    "ImportedFrom",
    "IsolationPolicy",
    "ManifestSummary",
    "ProvenanceInput",
    "RunAuthority",
    "RunProvenance",
    "RunRecord",
    "SandboxLimit",
    "SandboxRun",
    "ScreenFinding",
    "TrustLevel",
    "VerificationSummary",
    "WorkUnitRef",
    "attempt_shape_problem",
    "evidence_isolation",
    "first_difference",
    "has_absolute_path",
    "redact_absolute_paths",
    "unique_attempt_ids",
]

RUN_RECORD_KIND: Final = "kernel-run-record"
RUN_RECORD_SCHEMA_VERSION: Final = "1"

# An absolute POSIX path, a home-relative path, a Windows drive path or a file URL,
# starting a token (start of text, after whitespace, a quote, a bracket or '=').
_ABSOLUTE_PATH: Final = re.compile(r"""(?:^|[\s'"(\[=])(?:/[^/\s]|~/|[A-Za-z]:[\\/])|file:/""")


def has_absolute_path(text: str) -> bool:
    """True when ``text`` appears to embed an absolute filesystem path."""
    return _ABSOLUTE_PATH.search(text) is not None


_ABSOLUTE_TOKEN: Final = re.compile(r"""(^|[\s'"(\[=])(?:/|~/|[A-Za-z]:[\\/]|file:/)[^\s'")\]>]*""")


def redact_absolute_paths(text: str) -> str:
    """``text`` with every absolute-path token replaced by ``<path>`` (portable messages)."""
    redacted = _ABSOLUTE_TOKEN.sub(lambda m: m.group(1) + "<path>", text)
    # A token the first pattern misses (e.g. a bare file URL mid-word) is cut outright.
    return redacted if not has_absolute_path(redacted) else _ABSOLUTE_PATH.sub(" <path>", redacted)


class AttemptState(enum.StrEnum):
    """How far an attempt's control path got."""

    VERIFIED = "verified"
    WORKER_ERROR = "worker_error"
    RESULT_MANIFEST_ERROR = "result_manifest_error"
    VERIFICATION_ERROR = "verification_error"


class AttemptErrorCode(enum.StrEnum):
    """Why an attempt's control path stopped (one code per failure point)."""

    WORKER_FAILED = "worker_failed"
    """The worker adapter reported a failure before producing a manifest."""
    WORKER_TIMEOUT = "worker_timeout"
    """The worker hit its time limit (its whole process tree was killed)."""
    SANDBOX_ERROR = "sandbox_error"
    """The worker's sandbox could not be set up or its output could not be captured."""
    MANIFEST_MISSING = "manifest_missing"
    """The worker produced no result manifest."""
    MANIFEST_UNREADABLE = "manifest_unreadable"
    """The manifest is not readable JSON."""
    MANIFEST_INVALID = "manifest_invalid"
    """The manifest does not parse into a `ResultManifest`."""
    MANIFEST_BINDING = "manifest_binding_mismatch"
    """The manifest reports on another work unit (id, version or digest)."""
    VERIFIER_FAILED = "verifier_failed"
    """The verifier could not run to a result (e.g. no candidate to inspect)."""
    VERIFICATION_BINDING = "verification_binding_mismatch"
    """The verifier's result does not bind to the manifest and work unit."""
    INFRASTRUCTURE_FAULT = "infrastructure_fault"
    """The attempt's task did not complete (an executor or adapter fault, a lost worker
    after its retries): a control error of the run, never the worker's failure."""


@attrs.frozen(kw_only=True)
class WorkUnitRef(Record):
    """Which work unit a run worked on."""

    id: NonBlank
    """Work unit id."""
    version: Positive
    """Work unit version."""
    digest: Digest
    """Work unit digest."""

    @classmethod
    def of(cls, work_unit: WorkUnit) -> WorkUnitRef:
        """The reference to ``work_unit``."""
        return cls(id=work_unit.id, version=work_unit.version, digest=work_unit.digest)


@attrs.frozen(kw_only=True)
class ManifestSummary(Record):
    """What a run keeps of a worker's `ResultManifest`."""

    id: NonBlank
    """Manifest id."""
    digest: Digest
    """Manifest digest (the whole document)."""
    work_unit_digest: OptionalDigest
    """Work unit digest the manifest binds to (None when the source did not record it)."""
    worker_id: NonBlank
    """Worker id."""
    worker_status: WorkerStatus
    """The worker's self-reported status."""
    attempt: Positive
    """The worker's attempt counter."""
    candidate_digest: OptionalDigest = None
    """SHA-256 of the manifest's ``patch`` artifact (the candidate), when it has one:
    what staging and promotion apply, bound to the run (ADR-0006)."""

    @classmethod
    def of(cls, manifest: ResultManifest) -> ManifestSummary:
        """Summarize ``manifest``."""
        patch = next((a.digest for a in manifest.artifacts if a.id == "patch"), None)
        return cls(
            id=manifest.id,
            digest=manifest.digest,
            work_unit_digest=manifest.work_unit_digest,
            worker_id=manifest.worker.id,
            worker_status=manifest.status,
            attempt=manifest.attempt,
            candidate_digest=patch,
        )


@attrs.frozen(kw_only=True)
class CheckSummary(Record):
    """One verifier check as a run keeps it."""

    id: NonBlank
    """Check id."""
    required: bool
    """Required for acceptance."""
    status: CheckStatus
    """Outcome."""


@attrs.frozen(kw_only=True)
class VerificationSummary(Record):
    """What a run keeps of an independent `VerificationResult`."""

    id: NonBlank
    """Verification id."""
    verifier_id: NonBlank
    """Verifier id."""
    status: VerificationStatus
    """Verifier run outcome."""
    recommendation: Recommendation
    """Decision support."""
    checks: tuple[CheckSummary, ...]
    """Named checks."""
    result_manifest_digest: Digest
    """Manifest digest the verification binds to."""
    work_unit_digest: Digest
    """Work unit digest the verification binds to."""
    semantic_digest: Digest
    """The verification's semantic digest."""

    @classmethod
    def of(cls, verification: VerificationResult) -> VerificationSummary:
        """Summarize ``verification``."""
        return cls(
            id=verification.id,
            verifier_id=verification.verifier.id,
            status=verification.status,
            recommendation=verification.recommendation,
            checks=tuple(
                CheckSummary(id=c.id, required=c.required, status=c.status)
                for c in verification.checks
            ),
            result_manifest_digest=verification.result_manifest_digest,
            work_unit_digest=verification.work_unit_digest,
            semantic_digest=verification.semantic_digest,
        )


def _portable_message(_instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if has_absolute_path(value):
        raise field_error(attribute.name, "error messages may not embed absolute paths")


@attrs.frozen(kw_only=True)
class AttemptError(Record):
    """Why an attempt stopped: a closed code and a portable message."""

    code: AttemptErrorCode
    """Closed reason code."""
    message: NonBlank = attrs.field(validator=_portable_message)
    """Human message; never an absolute path."""


class CommandUid(enum.StrEnum):
    """Who a sandboxed command was on the host (isolation evidence: the sandbox's
    capture records it, and the run record keeps it with the isolation level)."""

    OUTER_UNPRIVILEGED = "outer_unprivileged"
    """A root runner's command: an unprivileged uid of its own (root's first
    subordinate id, else a fixed high id); the runner's files are "others'"."""
    SAME_UID_AS_RUNNER = "same_uid_as_runner"
    """An unprivileged runner's command is that runner's uid on the host, because no
    other id is available to it: the runner has no subordinate ids (or ``newuidmap``
    refused them), or the level is ``copy`` (no user namespace to map one in). Its own
    0600 files shown in the view (a ro_bind, the program's folder) are readable to the
    command; at ``copy`` the command can also reach the runner's process itself."""
    SUBORDINATE = "subordinate"
    """An unprivileged runner's command (``overlay``, ``namespace_copy``) runs as the
    runner's first subordinate uid/gid (``/etc/subuid``, ``/etc/subgid``, mapped by
    ``newuidmap``/``newgidmap``): the runner's own files are "others'" to it, as to a
    root runner's command."""


@attrs.frozen(kw_only=True)
class SandboxRun(Record):
    """How one sandboxed run (a worker, a verifier check) was isolated and limited."""

    isolation: Isolation
    """The isolation level the run obtained."""
    limits: tuple[SandboxLimit, ...]
    """Every limit of the run, as the sandbox applied it."""
    command_uid: CommandUid | None = None
    """Who the command was on the host (None: not known, a run recorded without it)."""


class DeclaredTestOutcome(enum.StrEnum):
    """What the verifier found of one declared test (SWE-bench's per-test report)."""

    PASSED = "passed"
    """The runner's result shows it passed."""
    FAILED = "failed"
    """It ran and an assertion failed."""
    ERROR = "error"
    """It ran and raised (an import it needs included)."""
    SKIPPED = "skipped"
    """It was skipped: no evidence either way."""
    MISSING = "missing"
    """No usable result names it (not collected, no result, a timeout, a limit)."""
    TAMPERED = "tampered"
    """The result was forged or the runner was tampered with: nothing it says counts."""


class DeclaredTestKind(enum.StrEnum):
    """Which list of the instance a declared test comes from."""

    FAIL_TO_PASS = "fail_to_pass"  # noqa: S105 - a test list name, not a secret
    """Fails on the baseline; the patch must make it pass."""
    PASS_TO_PASS = "pass_to_pass"  # noqa: S105 - a test list name, not a secret
    """Passes on the baseline; the patch must keep it passing."""


@attrs.frozen(kw_only=True)
class DeclaredTestResult(Record):
    """One declared test of a check, and its outcome in that check's run."""

    test_id: NonBlank
    """The test id as declared (a unittest or pytest id)."""
    kind: DeclaredTestKind
    """FAIL_TO_PASS or PASS_TO_PASS."""
    outcome: DeclaredTestOutcome
    """What the runner's result says of it."""
    import_failed: bool = False
    """Its test module could not be imported, so it never ran (its outcome is
    ``error``): on a baseline, an environment error, not the test's verdict."""
    missing_module: NonBlank | None = None
    """The module whose absence failed that import (``ModuleNotFoundError.name``: a
    missing dependency, or the test module itself for an id naming no module)."""


class CalibrationReason(enum.StrEnum):
    """Why an instance (a work unit's declared tests on its baseline) is not valid
    (`kernel.run.suite.calibrate`). Each also names the one test it holds for in the
    calibration table, except ``calibration_error`` and ``infrastructure_fault``."""

    FAIL_TO_PASS_PASSES = "fail_to_pass_passes_on_baseline"  # noqa: S105 - not a secret
    """A FAIL_TO_PASS test already passes on the baseline: it tests nothing."""
    PASS_TO_PASS_NOT_PASSING = "pass_to_pass_not_passing_on_baseline"  # noqa: S105
    """A PASS_TO_PASS test fails or errors on the baseline (its module imported: one
    that cannot is ``environment_error_test_module_not_importable``)."""
    TEST_NOT_RUN = "test_not_run"
    """A declared test was not reported, was skipped, or came from a tampered result."""
    REFERENCE_NOT_PASSING = "reference_not_passing"
    """The reference patch does not pass every declared test."""
    CALIBRATION_ERROR = "calibration_error"
    """The calibration run reached no per-test result (a control error)."""
    INFRASTRUCTURE_FAULT = "infrastructure_fault"
    """The instance's task did not complete (a worker lost past the scheduler's retries):
    a control error of the suite, recorded by its runner, never a verdict."""
    TEST_MODULE_NOT_IMPORTABLE = "environment_error_test_module_not_importable"
    """A declared test's module cannot be imported on the baseline (a missing dependency,
    an id naming a module that does not exist): an environment or control error of the
    instance, never a rejection of a patch. A FAIL_TO_PASS test must fail inside the
    test, not by its module failing to import."""
    UNKNOWN_TEST_ID = "unknown_test_id"
    """A declared test id names nothing the baseline defines (found statically: the
    instance is not run)."""
    REFUSED_FOR_ANOTHER_TEST = "not_run_refused_for_another_test"
    """Per test only (never an instance's reason): this test was not run because the
    instance was refused before anything ran, for another test's reason."""


@attrs.frozen(kw_only=True)
class CalibrationTest(Record):
    """One declared test on the baseline and on the reference patch."""

    test_id: NonBlank
    """The declared test id."""
    kind: DeclaredTestKind
    """FAIL_TO_PASS or PASS_TO_PASS."""
    baseline: DeclaredTestOutcome
    """Its outcome on the baseline."""
    reference: DeclaredTestOutcome | None
    """Its outcome with the reference patch (None: no reference patch)."""
    reason: CalibrationReason | None = None
    """Why this test makes the instance invalid, or was not run (None: it is as
    calibration expects)."""
    missing_module: NonBlank | None = None
    """The module whose absence kept this test's module from importing on the baseline
    (``ModuleNotFoundError.name``), when that is why."""
    check_id: NonBlank | None = None
    """The declared-tests check this row calibrates (every such check of a verifier is
    calibrated); None in records written before rows named their check."""

    @property
    def blame(self) -> str | None:
        """The row's reason as every view shows it (with the missing module, when one
        is why), or None when the test is as calibration expects."""
        if self.reason is None or self.missing_module is None:
            return None if self.reason is None else str(self.reason)
        return f"{self.reason}: no module named {self.missing_module!r}"


@attrs.frozen(kw_only=True)
class Calibration(Record):
    """Whether an instance is valid, and the per-test table that says why."""

    instance_id: NonBlank
    """The instance (a suite's instance id, or a run's id)."""
    valid: bool
    """True when no reason holds: the instance may be judged."""
    reasons: tuple[CalibrationReason, ...]
    """Every reason that holds, in the enum's order (empty when valid)."""
    tests: tuple[CalibrationTest, ...]
    """Each declared test, check by check in the verifier's order; within a check,
    FAIL_TO_PASS first, in declaration order."""


SCREEN_CHECK_ID: Final = "candidate-screen"
"""The built-in check of the static screen (`kernel.effects.adapters.screen`): its
`CheckRun` carries the findings a human decision may acknowledge (`kernel.decide.gate`, P4)."""


class TrustLevel(enum.StrEnum):
    """Who computed a check's verdict, and how near it ran to the candidate (ADR-0004)."""

    ORACLE = "oracle"
    """The kernel compared the candidate's output, in its own process, with an expected
    output the sandbox never saw (``oracle`` checks)."""
    IN_PROCESS_TESTS = "in_process_tests"
    """Declared tests, whose results a runner beside the candidate's code reported."""
    EXIT_STATUS = "exit_status"
    """A plain command's exit status (never a pass on its own)."""
    STATIC = "static"
    """The kernel read the patch text without running it (``protected-paths``, the
    static screen ``candidate-screen``)."""


@attrs.frozen(kw_only=True)
class ScreenFinding(Record):
    """One finding of the static screen of a candidate's Python files."""

    rule: NonBlank
    """The candidate-surface policy family (e.g. ``interpreter-hooks``)."""
    path: NonBlank
    """The patched file (relative to the tree)."""
    line: Count
    """1-based line (0: the whole file, e.g. its text could not be rebuilt)."""

    @property
    def finding_id(self) -> str:
        """``rule:path:line``: what a signed human decision names to acknowledge it."""
        return f"{self.rule}:{self.path}:{self.line}"


@attrs.frozen(kw_only=True)
class CheckRun(Record):
    """How one verifier check of an attempt ran, and why it did not pass (if it did not)."""

    check_id: NonBlank
    """The check's id (as in the verification's checks)."""
    sandbox: SandboxRun | None
    """Its sandbox's isolation and limits (None: a check run without a sandbox, such as
    ``protected-paths``, which reads the patch)."""
    reason: CheckReason | None
    """Why the check did not pass; None when it passed."""
    tests: tuple[DeclaredTestResult, ...] = ()
    """Each declared test's outcome, in declaration order (FAIL_TO_PASS first); empty
    for a check that declares no tests."""
    trust: TrustLevel | None = None
    """Who computed the verdict (None: a record written before trust levels)."""
    findings: tuple[ScreenFinding, ...] = ()
    """The static screen's findings (``candidate-screen`` only), in path and line order."""
    environment_digest: OptionalDigest = None
    """The digest of the environment its tests ran in (`kernel.effects.environments`:
    interpreter version and hash-pinned requirements); None: the sandbox's interpreter."""


def evidence_isolation(
    worker_sandbox: SandboxRun | None, check_runs: tuple[CheckRun, ...]
) -> Isolation | None:
    """The weakest isolation of an attempt's sandboxed runs (None: nothing was sandboxed)."""
    levels = [r.sandbox.isolation for r in check_runs if r.sandbox is not None]
    if worker_sandbox is not None:
        levels.append(worker_sandbox.isolation)
    return weakest_isolation(levels) if levels else None


@attrs.frozen(kw_only=True)
class AttemptRecord(Record):
    """One attempt of a run, whatever happened to it."""

    attempt_id: NonBlank
    """Attempt id, unique within the run."""
    order: Positive
    """1-based launch position."""
    adapter: NonBlank
    """Worker adapter kind (``fixture-result``, ``fixture-failure``, later ``command``)."""
    adapter_version: NonBlank | None
    """Worker adapter version (None when the source did not record it)."""
    state: AttemptState
    """How far the control path got."""
    manifest: ManifestSummary | None
    """The manifest summary, when one was collected."""
    verification: VerificationSummary | None
    """The verification summary, when the verifier produced one."""
    error: AttemptError | None
    """The control failure, when there was one."""
    worker_sandbox: SandboxRun | None = None
    """The worker's sandbox (None: the worker ran no sandbox, e.g. a fixture)."""
    check_runs: tuple[CheckRun, ...] = ()
    """Each sandboxed verifier check of this attempt, in check order."""

    @property
    def weakest_isolation(self) -> Isolation | None:
        """The weakest isolation of the attempt's sandboxed evidence (None: none was)."""
        return evidence_isolation(self.worker_sandbox, self.check_runs)

    def __attrs_post_init__(self) -> None:
        problem = attempt_shape_problem(
            self.state, self.manifest is not None, self.verification is not None, self.error
        )
        if problem is not None:
            raise field_error("state", problem)


def attempt_shape_problem(
    state: AttemptState, has_manifest: bool, has_verification: bool, error: object
) -> str | None:
    """Why an attempt of ``state`` may not carry what it carries, or None.

    Shared by `AttemptRecord` (which raises) and
    `kernel.run.report.check_evidence_report` (which refuses).
    """
    if state is AttemptState.VERIFIED:
        if not (has_manifest and has_verification) or error is not None:
            return "a verified attempt has a manifest, a verification and no error"
        return None
    if error is None or has_verification:
        return f"a {state} attempt has an error and no verification"
    if state is AttemptState.WORKER_ERROR and has_manifest:
        return "a worker_error attempt has no manifest"
    if state is AttemptState.VERIFICATION_ERROR and not has_manifest:
        return "a verification_error attempt has a manifest"
    return None


@attrs.frozen(kw_only=True)
class RunAuthority(Record):
    """What a run (and a report on it) may do: nothing. Every field is false."""

    canonical_state_write: Literal[False]
    """May write canonical project state."""
    git_push: Literal[False]
    """May push."""
    merge: Literal[False]
    """May merge."""
    automatic_candidate_selection: Literal[False]
    """May select a candidate on its own."""

    @classmethod
    def none(cls) -> RunAuthority:
        """The only admitted value: all false."""
        return cls(
            canonical_state_write=False,
            git_push=False,
            merge=False,
            automatic_candidate_selection=False,
        )


@attrs.frozen(kw_only=True)
class ImportedFrom(Record):
    """The foreign document a run record was converted from (e.g. IDKMesh v0.1)."""

    kind: NonBlank
    """The foreign document's kind (``idkmesh-two-attempt-run``)."""
    digest: Digest
    """SHA-256 of the canonical JSON of the foreign document as read."""


class DeclaredReplay(enum.StrEnum):
    """What a run's config declares about replaying it."""

    DETERMINISTIC = "deterministic"
    """The default: a replay is expected to reproduce the record (``exact`` replay)."""
    NONDETERMINISTIC = "nondeterministic"
    """Model/agent workers: replay checks provenance only; outputs are never compared."""


def _inputs(
    _instance: object, attribute: attrs.Attribute[Any], value: tuple[ProvenanceInput, ...]
) -> None:
    names = [item.name for item in value]
    if names != sorted(set(names)):
        raise field_error(attribute.name, "input names must be unique and ascending")


_GIT_OBJECT_ID: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _git_object_id(_instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and not _GIT_OBJECT_ID.fullmatch(value):
        raise field_error(attribute.name, f"expected a git object id (40 or 64 hex), got {value!r}")


@attrs.frozen(kw_only=True)
class ProvenanceInput(Record):
    """One thing a run ran on, pinned by a digest (e.g. ``baseline``, ``worker:a1``)."""

    name: NonBlank
    """What it is: ``baseline``, ``worker:<attempt id>`` or ``verifier``."""
    digest: Digest
    """SHA-256 of its canonical description (tree digest, command and program bytes)."""


@attrs.frozen(kw_only=True)
class RunProvenance(Record):
    """What a run of real workers ran on, apart from its outputs."""

    declared_replay: DeclaredReplay
    """The replay the config declares."""
    inputs: tuple[ProvenanceInput, ...] = attrs.field(validator=_inputs)
    """Input digests, sorted by name, unique."""
    baseline_git_tree: str | None = attrs.field(default=None, validator=_git_object_id)
    """Git tree id of the verifier's baseline contents (what a branch tip must hold for
    a promotion, ADR-0006), when git could compute it."""


def _attempts(
    _instance: object, attribute: attrs.Attribute[Any], value: tuple[AttemptRecord, ...]
) -> None:
    # Vacuous input is refused: a run has at least one attempt.
    if not value:
        raise field_error(attribute.name, "a run has at least one attempt")
    for index, attempt in enumerate(value):
        if attempt.order != index + 1:
            raise field_error(
                f"{attribute.name}[{index}].order",
                f"order {attempt.order} is not the launch position {index + 1}",
            )
    unique_attempt_ids(attribute.name, (attempt.attempt_id for attempt in value))


def unique_attempt_ids(field: str, attempt_ids: Iterable[str]) -> None:
    """Refuse an attempt id named twice: a run record and a run config name each
    attempt once.

    Raises:
        FieldError: naming ``field[i].attempt_id`` of the second one.
    """
    seen: set[str] = set()
    for index, attempt_id in enumerate(attempt_ids):
        if attempt_id in seen:
            raise field_error(
                f"{field}[{index}].attempt_id", f"duplicate attempt id {short_repr(attempt_id)}"
            )
        seen.add(attempt_id)


@attrs.frozen(kw_only=True)
class IsolationPolicy(Record):
    """What isolation a run's config accepts (ADR-0004): recorded with the run."""

    minimum: Isolation
    """The weakest level the run accepted to start at (default: the strongest the
    machine offered)."""
    accept_below_overlay: bool
    """True only when the config explicitly accepts evidence gathered below ``overlay``
    as grounds for ``verified``; otherwise such evidence never is."""


@attrs.frozen(kw_only=True)
class RunRecord(Record):
    """One multi-attempt run: attempts in launch order, every failure kept.

    ``digest`` is SHA-256 over the canonical JSON of the whole document.
    """

    kind: Literal["kernel-run-record"] = RUN_RECORD_KIND
    """Document kind."""
    schema_version: Literal["1"] = RUN_RECORD_SCHEMA_VERSION
    """Document schema version."""
    run_id: NonBlank
    """Run id."""
    orchestrator: NonBlank
    """Orchestrator name and version (e.g. ``kernel.effects.orchestrate/1``)."""
    work_unit: WorkUnitRef
    """The work unit every attempt worked on."""
    config_digest: Digest
    """SHA-256 of the canonical orchestration config."""
    verifier_policy_digest: Digest
    """SHA-256 of the canonical verifier policy."""
    imported_from: ImportedFrom | None
    """The foreign run document this record was converted from, if any."""
    attempts: tuple[AttemptRecord, ...] = attrs.field(validator=_attempts)
    """Attempts in launch order (at least one)."""
    authority: RunAuthority
    """All false."""
    provenance: RunProvenance | None = None
    """What the run ran on (command runs); None for fixture and imported runs."""
    isolation_policy: IsolationPolicy | None = None
    """The isolation the config accepted (command runs); None for fixture and imported
    runs."""
    calibration: Calibration | None = None
    """The declared tests on the baseline (and the reference patch) before any attempt
    was judged (a valid calibration: an invalid one stops the run); None when the
    verifier declares no tests, or for fixture and imported runs."""

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of ``to_dict()``."""
        return document_digest(self)


def first_difference(left: object, right: object, path: str = "$") -> str | None:
    """The JSON path of the first place where two JSON values differ, or None.

    Object keys are visited in sorted order, arrays by index (then by length), so the
    answer is deterministic. Types are compared exactly (``1`` differs from ``True``).
    """
    if type(left) is not type(right):
        return path
    if isinstance(left, dict):
        right = cast(dict[str, object], right)  # same type as left (checked above)
        for key in sorted(left.keys() | right.keys()):
            child = f"{path}.{key}"
            if key not in left or key not in right:
                return child
            found = first_difference(left[key], right[key], child)
            if found is not None:
                return found
        return None
    if isinstance(left, list | tuple):
        right = cast(list[object], right)  # same type as left (checked above)
        for index, (a, b) in enumerate(zip(left, right, strict=False)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found is not None:
                return found
        if len(left) != len(right):
            return f"{path}[{min(len(left), len(right))}]"
        return None
    return None if left == right else path
