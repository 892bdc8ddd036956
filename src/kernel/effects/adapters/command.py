"""Worker and verifier adapters that run real commands in sandboxes (adapter ``command``).

`register` adds both to an `AdapterRegistry` (`kernel.effects.adapters.builtin_registry`
does it for every run that names no registry of its own).

Worker entry (an item of the config's ``attempts``; paths relative to the config)::

    {"attempt_id": "a1", "adapter": "command", "worker_id": "fixer",
     "command": ["workers/fix.sh", "--fast"], "baseline": "repo",
     "timeout_s": 60, "env": {"NAME": "value"}, "network": false,
     "actor_type": "system"}                       (the last four are optional)

Verifier entry::

    {"adapter": "command", "verifier_id": "tests", "baseline": "repo",
     "checks": [{"id": "unit-tests", "command": ["python3", "-m", "unittest"],
                 "required": true, "timeout_s": 120}],
     "protected": ["test_*.py"], "env": {...}}    (protected, env, required,
                                                    timeout_s optional)

Rules enforced:

- a command's program (``command[0]``) is a path relative to the config folder when it
  contains ``/`` (it must be an executable file outside ``/dev/shm`` and the sandbox
  scratch root, which a namespace sandbox shows empty; ``/tmp`` is fine: a sandbox
  sees the host's files there read-only), else a name on the sandbox ``PATH``; it is
  checked before anything runs: a missing command is a `ConfigError`;
- the baseline must be a directory; an empty ``checks`` list is refused: an empty
  verifier is not verification;
- commands run with a pinned environment (``PATH``, ``LANG``/``LC_ALL`` C.UTF-8,
  ``TZ=UTC``, ``HOME=/tmp``, no bytecode files, ``PYTHONHASHSEED=0``) plus the entry's
  ``env``: nothing of the runner's environment (tokens, paths) leaks into a sandbox;
- the worker runs once in a fresh sandbox of the baseline; its patch (byte-stable
  ``git diff``), exit status and stdout/stderr digests become a `ResultManifest`
  (artifacts ``patch``, ``stdout``, ``stderr``); a non-zero exit or signal, a timeout
  and a sandbox failure are `WorkerFailed` with codes ``worker_failed``,
  ``worker_timeout`` and ``sandbox_error``; its outputs are discarded once digested;
- the verifier receives only the patch bytes (re-read from the attempt folder and
  checked against the manifest's digest), copies them to its own private folder (a
  `kernel.effects.sandbox.private_tempdir`, invisible to every sandbox), and
  runs each check in its *own fresh* sandbox of the baseline with the patch applied
  (an empty patch applies nothing); the built-in required check ``protected-paths``
  reads the patch (`kernel.effects.adapters.patch.HYGIENE_RULES`, one reason code
  each) and fails it when it touches a ``protected`` path (a worker may not rewrite the
  tests), adds bytecode or a sourceless module, shadows a protected module's import
  name, adds or retargets a symlink, or touches git metadata;
- a ``tests`` check (``{"id": ..., "tests": {"fail_to_pass": [...], "pass_to_pass":
  [...]}, "python": "python3"}``) runs ``python -I -B <kernel bootstrap> PLAN``
  (`kernel.effects.adapters.tests_bootstrap`, read-only in the sandbox: each test and
  each known-answer control in its own process under an audit hook) and passes only
  when the trusted collector (`kernel.effects.adapters.declared_tests`, in this
  process) finds no tampering and every declared test passed; a ``command`` check
  never passes (exit 0 is ``exit_status_only``, inconclusive) and fails on a non-zero
  exit; both are ``error`` on a timeout or when they cannot start; a sandbox failure
  is a `VerifierFailure`. Every non-pass has its `kernel.run.verification.CheckReason`
  (in the evidence digest, the rationale and the volatile notes). The recommendation
  follows the required checks: any failed -> ``reject_candidate``; all passed ->
  ``accept_candidate`` (``escalate`` when the worker did not report success); else
  ``insufficient_evidence``;
- a check's evidence digest covers its id, command (as written), exit status and the
  patch digest; its stdout/stderr digests and every duration are volatile notes
  (`kernel.effects.orchestrate.note`), never in the record, so test runners that print
  timings do not break exact replay;
- nothing recorded holds an absolute path: commands are recorded as written, messages
  are redacted.

Provenance (`ProvenanceSource`): ``baseline:<path>`` (tree digest: sorted relative
paths, kinds, executable bits, content digests, symlink targets), ``worker:<attempt>``
(command as written, program bytes, baseline digest, timeout, env, network) and
``verifier`` (the verifier policy digest).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Final, Literal

import attrs

from kernel.corroboration.consensus import EMPTY_SHA256, CaptureMode, CaptureStatus
from kernel.effects import console
from kernel.effects.adapters import declared_tests, tests_bootstrap
from kernel.effects.adapters.base import (
    AdapterRegistry,
    ConfigSource,
    VerifierAdapter,
    WorkerProduced,
    below_minimum,
    independent_verification,
    note,
    record_check_run,
)
from kernel.effects.adapters.command_worker import (
    _MAX_PATCH_BYTES,
    ADAPTER_KIND,
    ADAPTER_VERSION,
    BASE_ENV,
    DEFAULT_TIMEOUT_S,
    OUTPUT_TAIL,
    PATCH_FILE,
    PROTECTED_CHECK,
    CommandSpec,
    CommandWorker,
    CommandWorkerEntry,
    _baseline,
    _command,
    _command_worker,
    _file_digest,
    _output_tail,
    sandbox_run,
    tree_digest,
)
from kernel.effects.adapters.declared_tests import TestsEntry
from kernel.effects.adapters.junit import declared_test_results
from kernel.effects.adapters.oracle import (
    MAX_ORACLE_BYTES,
    ORACLES_KEY,
    OracleEntry,
    OracleSpec,
    judge_oracle,
    parse_oracle,
    refuse_shown_expected,
    required_trust,
)
from kernel.effects.adapters.patch import (
    FileChange,
    PatchRefusal,
    changed_paths,
    hygiene_findings,
    parse_patch,
)
from kernel.effects.adapters.screen import (
    SCREEN_CHECK,
    candidate_policy,
    declared_names,
    screen_changes,
)
from kernel.effects.environments import EnvironmentEntry, check_environment
from kernel.effects.run_config import argv, env_names, relative
from kernel.effects.sandbox import (
    Capture,
    SandboxSpec,
    private_tempdir,
    read_output,
    run_sandboxed,
)
from kernel.errors import CanonicalizationError, ConfigError, EffectError, VerifierFailure
from kernel.guard import policy_hash
from kernel.records.codec import Record, field_error
from kernel.records.identity import sha256_bytes, sha256_hex
from kernel.records.shapes import FrozenMap
from kernel.records.values import NonBlank, Omissible, Positive
from kernel.run.record import (
    CheckRun,
    ScreenFinding,
    TrustLevel,
    redact_absolute_paths,
)
from kernel.run.verification import (
    CheckReason,
    CheckResult,
    CheckStatus,
    ResultManifest,
    VerificationResult,
    WorkUnit,
)

__all__ = [
    "ADAPTER_KIND",
    "ADAPTER_VERSION",
    "BASE_ENV",
    "OUTPUT_TAIL",
    "PROTECTED_CHECK",
    "PYTEST_PROTECTED",
    "CheckEntry",
    "CheckSpec",
    "CommandVerifierEntry",
    "CommandSpec",
    "CommandVerifier",
    "CommandWorker",
    "register",
    "sandbox_run",
    "tree_digest",
]

# --- verifier -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CheckSpec:
    """One verifier check: a command run on the baseline with the patch applied."""

    id: str
    command: CommandSpec
    required: bool
    tests: tuple[str, ...] = ()
    """Declared tests (FAIL_TO_PASS then PASS_TO_PASS), run by the kernel's runner; empty
    for a plain command check, which never passes (no per-test evidence)."""
    fail_to_pass: tuple[str, ...] = ()
    """The declared tests the patch must make pass (recorded in the policy)."""
    runner: str = "unittest"
    """The declared tests' runner (`declared_tests.RUNNERS`)."""
    oracle: OracleSpec | None = None
    """The expected output an ``oracle`` check's stdout is compared with (by the
    verifier, `kernel.effects.adapters.oracle`)."""

    @property
    def trust(self) -> TrustLevel:
        """Who computes this check's verdict (recorded in its `CheckRun`)."""
        if self.oracle is not None:
            return TrustLevel.ORACLE
        return TrustLevel.IN_PROCESS_TESTS if self.tests else TrustLevel.EXIT_STATUS


@attrs.define
class _Checked:
    """The sandboxed checks of one patch, as `CommandVerifier.verify` shares them."""

    ran_for: str
    """The manifest (attempt) whose verification ran them."""
    results: list[CheckResult] = attrs.Factory(list)
    runs: list[CheckRun] = attrs.Factory(list)
    reasons: dict[str, CheckReason] = attrs.Factory(dict)
    notes: list[tuple[str, object]] = attrs.Factory(list)


@attrs.frozen(kw_only=True)
class CommandVerifier(VerifierAdapter):
    """Verifier ``command``: each check in a fresh sandbox with the candidate patch."""

    verifier_id: str
    baseline_locator: str
    baseline: Path
    baseline_digest: str
    checks: tuple[CheckSpec, ...]
    protected: tuple[str, ...]
    policy_digest: str
    kind: str = ADAPTER_KIND
    version: str = ADAPTER_VERSION
    _shared: dict[tuple[str, frozenset[str]], _Checked] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )
    """(patch digest, required checks) -> its sandboxed checks, run once (`verify`)."""

    def for_run(self) -> CommandVerifier:
        """This verifier with nothing shared yet: a run's shared checks never reach
        another run (a replay judges afresh)."""
        return attrs.evolve(self)

    def check_ids(self) -> frozenset[str]:
        """The ids of the checks this verifier reports (the built-in ``protected-paths``
        and ``candidate-screen`` always run)."""
        return frozenset([*(c.id for c in self.checks), PROTECTED_CHECK, SCREEN_CHECK])

    def provenance(self) -> tuple[tuple[str, str], ...]:
        """Baseline tree, verifier policy and check environment digests."""
        return (
            (f"baseline:{self.baseline_locator}", self.baseline_digest),
            ("verifier", self.policy_digest),
            *(
                (f"environment:{c.id}", c.command.environment_digest)
                for c in self.checks
                if c.command.environment_digest is not None
            ),
        )

    def _patch(self, manifest: ResultManifest, produced: WorkerProduced) -> bytes:
        artifact = next((a for a in manifest.artifacts if a.id == "patch"), None)
        if artifact is None:
            raise VerifierFailure(f"{manifest.id}: the manifest names no patch artifact")
        locator = PurePosixPath(artifact.locator)
        if locator.is_absolute() or ".." in locator.parts:
            raise VerifierFailure(f"{manifest.id}: patch locator escapes the candidate")
        path = produced.candidate_root / artifact.locator
        try:
            if path.is_symlink() or not path.is_file():
                raise VerifierFailure(f"{produced.candidate_locator}: patch file is missing")
            with open(path, "rb") as handle:
                data = handle.read(_MAX_PATCH_BYTES + 1)
        except OSError as e:
            raise VerifierFailure(f"{produced.candidate_locator}: {e.strerror}") from e
        # The verifier trusts only bytes that match the digest the manifest binds.
        if len(data) > _MAX_PATCH_BYTES or sha256_bytes(data) != artifact.digest:
            raise VerifierFailure(f"{produced.candidate_locator}: patch does not match its digest")
        return data

    def verify(
        self, work_unit: WorkUnit, manifest: ResultManifest, produced: WorkerProduced
    ) -> VerificationResult:
        """Run every check on a fresh sandbox of the baseline with the patch applied.

        The sandboxed checks of a patch run once per verifier: another attempt with the
        same patch bytes (two predictions with the same ``model_patch``) is given the
        same check results and runs (`_Checked`), and its volatile notes name the
        attempt whose checks ran (``checks_shared_from``). A check's evidence is a
        function of the patch digest, never of the attempt (ADR-0004 §2), so its record
        is the one a second run gives; the admission groups attempts by that digest."""
        data = self._patch(manifest, produced)
        patch_digest = sha256_bytes(data)
        results: list[CheckResult] = []
        reasons: dict[str, CheckReason] = {}
        parsed = parse_patch(data)
        results.append(self._patch_rules(parsed, reasons))
        results.append(self._screen(parsed, reasons))
        required_ids = frozenset(work_unit.required_validators)
        checked = self._shared.get((patch_digest, required_ids))
        if checked is None:
            checked = self._sandboxed_checks(data, manifest.id, set(required_ids))
            # Only a complete run is shared: a verifier failure raised above.
            self._shared[patch_digest, required_ids] = checked
        else:
            for run in checked.runs:
                record_check_run(run)
            for key, value in checked.notes:
                note(key, value)
            note("checks_shared_from", checked.ran_for)
        results += checked.results
        reasons.update(checked.reasons)
        return self._verification(work_unit, manifest, tuple(results), reasons)

    def _sandboxed_checks(self, data: bytes, manifest_id: str, required_ids: set[str]) -> _Checked:
        """Every check of the verifier, each in its own fresh sandbox of the baseline
        with the patch applied (the check runs and notes recorded as they come)."""
        patch_digest = sha256_bytes(data)
        checked = _Checked(ran_for=manifest_id)

        def keep(key: str, value: object) -> None:
            note(key, value)
            checked.notes.append((key, value))

        # The verifier's own folder: only the patch bytes cross from the worker.
        total_ms = 0
        with private_tempdir("verify") as private:
            patch_path = private / PATCH_FILE
            patch_path.write_bytes(data)
            for index, check in enumerate(self.checks):
                spill = private / f"check-{index}"
                spill.mkdir()
                # Fresh per check, known only here: the controls and the run order.
                plan = None
                argv = check.command.run_argv
                if check.tests:
                    preload = private / f"check-{index}-tree"
                    plan = declared_tests.prepare(self.baseline, check.tests, preload, check.runner)
                    argv = (*argv, plan.file_name)
                spec = SandboxSpec(
                    command=argv,
                    baseline=str(self.baseline),
                    capture=CaptureMode.STDOUT,
                    timeout_s=float(check.command.timeout_s),
                    network=check.command.network,
                    env=check.command.env,
                    preload=None if plan is None else str(preload),
                    apply_patch=None if patch_digest == EMPTY_SHA256 else str(patch_path),
                    limits=check.command.limits,
                )
                try:
                    capture = run_sandboxed(spec, spill_dir=spill)
                except EffectError as e:
                    raise VerifierFailure(f"check {check.id}: sandbox could not run: {e}") from e
                total_ms += capture.duration_ms
                keep(f"check:{check.id}:ms", capture.duration_ms)
                keep(f"check:{check.id}:stdout_digest", capture.stdout_digest)
                keep(f"check:{check.id}:stderr_digest", capture.stderr_digest)
                keep(f"check:{check.id}:isolation", str(capture.isolation))
                result, reason, tests, summary, imports = self._result(
                    check, capture, patch_digest, required_ids, plan
                )
                keep(
                    f"check:{check.id}:{OUTPUT_TAIL}",
                    _output_tail(capture, stdout=not check.tests) + summary,
                )
                checked.results.append(result)
                console.progress(
                    f"  {manifest_id}: check {check.id} {result.status} ({capture.duration_ms} ms)"
                )
                run = CheckRun(
                    check_id=check.id,
                    sandbox=sandbox_run(capture),
                    reason=reason,
                    tests=declared_test_results(check.tests, check.fail_to_pass, tests, imports),
                    trust=check.trust,
                    environment_digest=check.command.environment_digest,
                )
                record_check_run(run)
                checked.runs.append(run)
                weak = below_minimum(capture.isolation)
                if weak is not None:
                    raise VerifierFailure(f"check {check.id}: {weak}")
                if reason is not None:
                    checked.reasons[check.id] = reason
        keep("verifier_ms", total_ms)
        return checked

    def _patch_rules(
        self, parsed: tuple[FileChange, ...] | PatchRefusal, reasons: dict[str, CheckReason]
    ) -> CheckResult:
        """The built-in ``protected-paths`` check: the patch rules of `HYGIENE_RULES`
        (protected paths, bytecode, sourceless modules, shadowing, symlinks, git
        metadata); a patch it cannot read fails it."""
        if isinstance(parsed, PatchRefusal):
            findings: tuple[tuple[CheckReason, str], ...] = ((CheckReason.PATCH_UNREADABLE, ""),)
        else:
            findings = hygiene_findings(parsed, self.protected)
        reason = findings[0][0] if findings else None
        if reason is not None:
            reasons[PROTECTED_CHECK] = reason
        record_check_run(
            CheckRun(check_id=PROTECTED_CHECK, sandbox=None, reason=reason, trust=TrustLevel.STATIC)
        )
        touched = None if isinstance(parsed, PatchRefusal) else changed_paths(parsed)
        evidence: dict[str, object] = {
            "touched": None if touched is None else list(touched),
            "refused": str(parsed.reason) if isinstance(parsed, PatchRefusal) else None,
        }
        if findings and touched is not None:
            # Only a refusal adds its findings, so a passing patch keeps its digest.
            evidence["findings"] = [[str(r), p] for r, p in findings]
        return CheckResult(
            id=PROTECTED_CHECK,
            required=True,
            status=CheckStatus.FAILED if findings else CheckStatus.PASSED,
            evidence_digests=(sha256_hex(evidence),),
        )

    def _screen(
        self, parsed: tuple[FileChange, ...] | PatchRefusal, reasons: dict[str, CheckReason]
    ) -> CheckResult:
        """The built-in ``candidate-screen`` check (`kernel.effects.adapters.screen`): a
        finding makes it inconclusive (``suspicious_code``), never a pass."""
        try:
            policy = candidate_policy()
        except ConfigError as e:
            raise VerifierFailure(f"check {SCREEN_CHECK}: {e}") from e
        if isinstance(parsed, PatchRefusal):
            findings: tuple[ScreenFinding, ...] = (
                ScreenFinding(rule="unscreenable", path=PATCH_FILE, line=0),
            )
        else:
            names = declared_names(t for check in self.checks for t in check.tests)
            findings = screen_changes(parsed, self.baseline, policy, names)
        reason = CheckReason.SUSPICIOUS_CODE if findings else None
        if reason is not None:
            reasons[SCREEN_CHECK] = reason
        note(f"check:{SCREEN_CHECK}:findings", [f.finding_id for f in findings])
        record_check_run(
            CheckRun(
                check_id=SCREEN_CHECK,
                sandbox=None,
                reason=reason,
                trust=TrustLevel.STATIC,
                findings=findings,
            )
        )
        return CheckResult(
            id=SCREEN_CHECK,
            required=True,
            status=CheckStatus.INCONCLUSIVE if findings else CheckStatus.PASSED,
            evidence_digests=(sha256_hex({"findings": [f.to_dict() for f in findings]}),),
        )

    def _result(
        self,
        check: CheckSpec,
        capture: Capture,
        patch_digest: str,
        required_ids: set[str],
        plan: declared_tests.Plan | None,
    ) -> tuple[
        CheckResult, CheckReason | None, Mapping[str, str] | CheckReason, str, dict[str, str | None]
    ]:
        """The check's result and reason, its declared tests' outcomes (or why there are
        none), the collector's summary for a reader, and the tests whose module failed to
        import (with the missing module)."""
        if capture.status is CaptureStatus.SANDBOX_ERROR:
            why = redact_absolute_paths(capture.error or "unknown")
            raise VerifierFailure(f"check {check.id}: sandbox error: {why}")
        tests: dict[str, str] = {}
        imports: dict[str, str | None] = {}
        found: Mapping[str, str] | CheckReason = CheckReason.RESULT_MISSING
        summary = ""
        status: CheckStatus
        reason: CheckReason | None
        if capture.status is CaptureStatus.TIMEOUT:
            status, reason = CheckStatus.ERROR, CheckReason.TIMEOUT
        elif capture.status is CaptureStatus.LIMIT_EXCEEDED:
            status, reason = CheckStatus.ERROR, CheckReason.LIMIT_EXCEEDED
        elif capture.start_failed:
            status, reason = CheckStatus.ERROR, CheckReason.START_FAILED
        elif check.tests and plan is not None:
            status, reason, tests, summary, imports = declared_tests.verdict(
                check.id, check.tests, capture, plan
            )
            found = CheckReason.RUNNER_TAMPERED if reason is CheckReason.RUNNER_TAMPERED else tests
        elif check.oracle is not None:
            # The verdict is the kernel's: stdout against the answer the sandbox never saw.
            output: bytes | None = None
            if (capture.output_size or 0) <= MAX_ORACLE_BYTES:
                try:
                    output = (
                        read_output(capture, max_bytes=MAX_ORACLE_BYTES)
                        if capture.output_path is not None
                        else b""
                    )
                except EffectError:
                    output = None
            status, reason = judge_oracle(check.oracle, output, capture.exit_code)
        elif capture.status is CaptureStatus.OK:
            # An exit status is no per-test evidence: it can be reached by exiting early.
            status, reason = CheckStatus.INCONCLUSIVE, CheckReason.EXIT_STATUS_ONLY
        else:
            status, reason = CheckStatus.FAILED, CheckReason.NONZERO_EXIT
        note(f"check:{check.id}:reason", None if reason is None else str(reason))
        evidence = sha256_hex(
            {
                "check": check.id,
                "command": list(check.command.argv),
                "exit_code": capture.exit_code,
                "status": str(status),
                "reason": None if reason is None else str(reason),
                "tests": sorted([t, o] for t, o in tests.items()),
                "patch": patch_digest,
            }
        )
        return (
            CheckResult(
                id=check.id,
                required=check.required or check.id in required_ids,
                status=status,
                evidence_digests=(evidence,),
            ),
            reason,
            found,
            summary,
            imports,
        )

    def _verification(
        self,
        work_unit: WorkUnit,
        manifest: ResultManifest,
        checks: tuple[CheckResult, ...],
        reasons: Mapping[str, CheckReason],
    ) -> VerificationResult:
        return independent_verification(
            verifier_id=self.verifier_id,
            adapter=self,
            work_unit=work_unit,
            manifest=manifest,
            checks=checks,
            result_id=f"{manifest.id}/{self.verifier_id}/verification",
            rationale=", ".join(f"{c.id}={c.status}" for c in checks)
            + "".join(f"; {c}: {r}" for c, r in reasons.items()),
        )


PYTEST_PROTECTED: Final = (
    *("conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml"),
    *("tox.ini", "setup.cfg", "pyproject.toml"),
)
"""Protected whenever a check runs pytest (its configuration and fixtures, every file
name pytest 9 reads its configuration from; the whole of ``pyproject.toml``, not only
its ``[tool.pytest]`` part)."""
RUNNER_LOCATOR: Final = "kernel:tests_bootstrap"
"""How a declared-tests check names the kernel's bootstrap in its recorded command."""


def _interpreter(_instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and (not value or "/" in value):
        raise field_error(attribute.name, "expected an interpreter name on the sandbox PATH")


@attrs.frozen(kw_only=True)
class CheckEntry(Record):
    """One check of a ``command`` verifier: a command, declared tests or an oracle."""

    id: NonBlank
    """The check's id (unique in the verifier)."""
    command: Omissible[tuple[str, ...]] = attrs.field(default=None, validator=argv)
    """A command whose exit status is the verdict (never ``passed``: no per-test evidence)."""
    tests: Omissible[TestsEntry] = None
    """Declared tests, run by the kernel's runner."""
    oracle: Omissible[OracleEntry] = None
    """An output compared with an answer no sandbox sees."""
    python: Omissible[str] = attrs.field(default=None, validator=_interpreter)
    """The interpreter of a tests check or a call oracle (default ``python3``)."""
    runner: Omissible[Literal["unittest", "pytest"]] = None
    """The declared tests' runner (default: told by the test ids' shape)."""
    environment: Omissible[EnvironmentEntry] = None
    """A pinned environment the tests check runs in."""
    required: bool = True
    """A failed required check fails the verification."""
    timeout_s: Positive = DEFAULT_TIMEOUT_S
    """Time limit of one run."""
    env: FrozenMap[str] = attrs.field(factory=FrozenMap, validator=env_names)
    """Variables over the verifier's ``env`` and `BASE_ENV`."""
    network: bool = False
    """Network access (off unless asked for)."""

    def __attrs_post_init__(self) -> None:
        if [self.command, self.tests, self.oracle].count(None) != 2:
            raise field_error("command", "a check has exactly one of command, tests or oracle")
        if self.python is not None and self.command is not None:
            raise field_error("python", "only a tests check names an interpreter")


def _check_ids(
    _instance: object, attribute: attrs.Attribute[Any], value: tuple[CheckEntry, ...]
) -> None:
    # Vacuous input is refused: an empty verifier is not verification.
    if not value:
        raise field_error(attribute.name, "no checks: an empty verifier is not verification")
    seen = {PROTECTED_CHECK, SCREEN_CHECK}
    for index, check in enumerate(value):
        if check.id in seen:
            raise field_error(
                f"{attribute.name}[{index}].id", f"duplicate or reserved check id {check.id!r}"
            )
        seen.add(check.id)


@attrs.frozen(kw_only=True)
class CommandVerifierEntry(Record):
    """A run config's ``command`` verifier: checks run on the baseline with the patch."""

    adapter: Literal["command"]
    """The verifier adapter."""
    verifier_id: NonBlank
    """The verifier's actor id."""
    baseline: NonBlank = attrs.field(validator=relative)
    """The baseline tree (relative to the config)."""
    checks: tuple[CheckEntry, ...] = attrs.field(validator=_check_ids)
    """The checks, in order."""
    protected: Omissible[tuple[str, ...]] = attrs.field(default=None, validator=argv)
    """Paths a candidate may not change (globs, over the pytest files when pytest runs)."""
    env: FrozenMap[str] = attrs.field(factory=FrozenMap, validator=env_names)
    """Variables of every check (a check's own ``env`` over them)."""
    require_trust: TrustLevel | tuple[TrustLevel, ...] = ()
    """A trust level (or a list of them) some required check must have."""


def _tests_check(
    source: ConfigSource, check: CheckEntry, env: Mapping[str, str], at: str
) -> CheckSpec:
    """A declared-tests check: ``python -I -B <kernel bootstrap> PLAN`` (read-only)."""
    tests_entry = typing.cast("TestsEntry", check.tests)
    fail_to_pass, pass_to_pass, runner = declared_tests.declared(
        source, tests_entry, check.runner, at
    )
    python = check.python or "python3"
    tests = fail_to_pass + pass_to_pass
    bootstrap = Path(tests_bootstrap.__file__).resolve()
    spec = _command(source, (python,), (check.timeout_s, env, check.network), at)
    built = (
        None
        if check.environment is None
        else check_environment(source, check.environment, at, python)
    )
    return CheckSpec(
        id=check.id,
        command=attrs.evolve(
            spec,
            argv=(python, "-I", "-B", RUNNER_LOCATOR, *tests),
            run_argv=(str(built.python) if built else spec.run_argv[0], "-I", "-B", str(bootstrap)),
            # The runner is two files: the bootstrap and the audit hook it loads.
            program_digest=sha256_hex(
                [_file_digest(bootstrap), _file_digest(bootstrap.with_name("tests_audit.py"))]
            ),
            environment_digest=None if built is None else built.digest,
        ),
        required=check.required,
        tests=tests,
        fail_to_pass=fail_to_pass,
        runner=runner,
    )


def _check(
    source: ConfigSource, check: CheckEntry, verifier_env: Mapping[str, str], at: str
) -> CheckSpec:
    """One entry of the verifier's ``checks``: a command, declared tests or an oracle."""
    env = {**verifier_env, **check.env}
    options = (check.timeout_s, env, check.network)
    if check.tests is not None:
        return _tests_check(source, check, env, at)
    if check.oracle is not None:
        oracle, run_argv, argv_ = parse_oracle(source, check.oracle, check.python or "python3", at)
        spec = _command(source, tuple(run_argv), options, at)
        spec = attrs.evolve(spec, argv=tuple(argv_))
        return CheckSpec(id=check.id, command=spec, required=check.required, oracle=oracle)
    command = typing.cast("tuple[str, ...]", check.command)
    return CheckSpec(
        id=check.id, command=_command(source, command, options, at), required=check.required
    )


def _command_verifier(
    entry: Mapping[str, object], source: ConfigSource
) -> tuple[VerifierAdapter, str]:
    where = "$.verifier"
    read = source.parse(CommandVerifierEntry, entry, where)
    locator, baseline, digest = _baseline(source, read.baseline, where)
    checks = [
        _check(source, item, read.env, f"{where}.checks[{index}]")
        for index, item in enumerate(read.checks)
    ]
    protected = list(read.protected or ())
    if any(c.runner == "pytest" for c in checks):
        # pytest reads these before any test: a candidate may not rewrite them either.
        protected += [g for g in PYTEST_PROTECTED if g not in protected]
    require_trust = required_trust(
        source, read.require_trust, where, [(c.required, c.trust) for c in checks]
    )
    oracles = tuple(c.oracle for c in checks if c.oracle is not None)
    refuse_shown_expected(source, oracles, [c.command.run_argv[0] for c in checks], baseline, where)
    # Workers are read after the verifier: each is checked against these in turn.
    source.cache[ORACLES_KEY] = oracles
    try:
        policy_digest = sha256_hex(
            {
                "adapter": ADAPTER_KIND,
                "adapter_version": ADAPTER_VERSION,
                "verifier_id": read.verifier_id,
                "baseline": digest,
                "checks": [
                    {
                        "id": c.id,
                        "required": c.required,
                        **c.command.describe(),
                        **(
                            {"fail_to_pass": list(c.fail_to_pass), "tests": list(c.tests)}
                            | ({"runner": c.runner} if c.runner != "unittest" else {})
                            if c.tests
                            else {}
                        ),
                        **(c.oracle.describe() if c.oracle is not None else {}),
                    }
                    for c in checks
                ],
                "protected": protected,
                "screen_policy": policy_hash(candidate_policy()),
                **({"require_trust": [str(t) for t in require_trust]} if require_trust else {}),
            }
        )
    except CanonicalizationError as e:
        raise source.error(f"{where}{e.path[1:]}", e.reason) from e
    verifier = CommandVerifier(
        verifier_id=read.verifier_id,
        baseline_locator=locator,
        baseline=baseline,
        baseline_digest=digest,
        checks=tuple(checks),
        protected=tuple(protected),
        policy_digest=policy_digest,
    )
    return verifier, policy_digest


def register(registry: AdapterRegistry) -> None:
    """Add the ``command`` worker and verifier to ``registry``.

    Raises:
        DuplicateAdapterError: kind ``command`` is already registered.
    """
    registry.add_worker(ADAPTER_KIND, _command_worker, entry=CommandWorkerEntry)
    registry.add_verifier(ADAPTER_KIND, _command_verifier, entry=CommandVerifierEntry)
