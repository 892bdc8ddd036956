"""The ``command`` adapter's worker, and the command entries its worker and verifier parse.

`kernel.effects.adapters.command` documents the adapter (its rules and provenance) and
registers both sides; this module holds a command as written and run (`CommandSpec`),
the baseline's tree digest, the pinned environment and the worker (`CommandWorker`): one
sandboxed run of a command on the baseline, its patch and outputs digested.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Final, Literal, cast

import attrs

from kernel.corroboration.consensus import CaptureMode, CaptureStatus, Isolation
from kernel.effects.adapters.base import (
    AttemptContext,
    ConfigSource,
    WorkerAdapter,
    WorkerFailed,
    WorkerProduced,
    below_minimum,
    note,
    record_worker_sandbox,
)
from kernel.effects.adapters.oracle import (
    ORACLES_KEY,
    OracleSpec,
    refuse_shown_expected,
)
from kernel.effects.run_config import argv, env_names, relative
from kernel.effects.sandbox import (
    Capture,
    Limits,
    SandboxSpec,
    available_isolation,
    check_command_starts,
    read_output,
    recorded_limits,
    run_sandboxed,
    scratch_root,
)
from kernel.errors import EffectError
from kernel.records.codec import Record
from kernel.records.identity import Sha256Stream, canonical_json, sha256_bytes, sha256_hex
from kernel.records.shapes import FrozenMap
from kernel.records.values import NonBlank, Positive
from kernel.run.record import (
    AttemptErrorCode,
    SandboxRun,
    redact_absolute_paths,
)
from kernel.run.verification import (
    Actor,
    ActorType,
    Artifact,
    ResultManifest,
    WorkerStatus,
)

__all__ = [
    "ADAPTER_KIND",
    "ADAPTER_VERSION",
    "BASE_ENV",
    "CommandSpec",
    "CommandWorker",
    "CommandWorkerEntry",
    "DEFAULT_TIMEOUT_S",
    "OUTPUT_TAIL",
    "PATCH_FILE",
    "PROTECTED_CHECK",
    "sandbox_run",
    "tree_digest",
]

ADAPTER_KIND: Final = "command"
ADAPTER_VERSION: Final = "1"
PROTECTED_CHECK: Final = "protected-paths"
PATCH_FILE: Final = "candidate.patch"
DEFAULT_TIMEOUT_S: Final = 300
_MAX_PATCH_BYTES: Final = 256 << 20
BASE_ENV: Final = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "HOME": "/tmp",  # noqa: S108 - the sandbox's private /tmp (writes stay in the run)
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
}
"""The environment every sandboxed command starts from (the entry's ``env`` is added)."""


# --- config parsing -------------------------------------------------------------------


def _sandbox_hidden() -> tuple[Path, ...]:
    """Host folders a namespace sandbox shows empty: its own ``/dev/shm`` and every
    kernel scratch area (`scratch_root`); a program there would not be found."""
    return (Path("/dev/shm"), Path(os.path.realpath(scratch_root())))  # noqa: S108


def tree_digest(root: Path) -> str:
    """SHA-256 of a directory tree: sorted relative paths, kinds, exec bits, contents.

    Raises:
        EffectError: a file cannot be read.
    """
    entries: list[list[str]] = []
    try:
        for folder, dirs, files in os.walk(root, followlinks=False):
            dirs.sort()
            base = Path(folder)
            for name in sorted([*dirs, *files]):
                path = base / name
                relative = path.relative_to(root).as_posix()
                info = path.lstat()
                if stat.S_ISLNK(info.st_mode):
                    entries.append([relative, "link", os.readlink(path)])
                elif stat.S_ISDIR(info.st_mode):
                    entries.append([relative, "dir", ""])
                elif stat.S_ISREG(info.st_mode):
                    kind = "exec" if info.st_mode & 0o111 else "file"
                    entries.append([relative, kind, _file_digest(path)])
                else:
                    entries.append([relative, "other", ""])
    except OSError as e:
        raise EffectError(f"{root}: cannot read baseline: {e.strerror}") from e
    return sha256_hex(entries)


def _file_digest(path: Path) -> str:
    stream = Sha256Stream()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            stream.update(chunk)
    return stream.hexdigest()


@attrs.frozen(kw_only=True)
class CommandWorkerEntry(Record):
    """A ``command`` attempt of a run config: one sandboxed run of a command on a
    baseline tree."""

    attempt_id: NonBlank
    """The attempt's id."""
    adapter: Literal["command"]
    """The worker adapter."""
    worker_id: NonBlank
    """The worker's actor id."""
    command: tuple[str, ...] = attrs.field(validator=argv)
    """The command (a program on the sandbox PATH, or relative to the config)."""
    baseline: NonBlank = attrs.field(validator=relative)
    """The baseline tree the command works on (relative to the config)."""
    timeout_s: Positive = DEFAULT_TIMEOUT_S
    """Time limit of the run."""
    env: FrozenMap[str] = attrs.field(factory=FrozenMap, validator=env_names)
    """Variables over `BASE_ENV`."""
    network: bool = False
    """Network access (off unless asked for)."""
    actor_type: ActorType = ActorType.SYSTEM
    """Who the worker is."""


def _baseline(source: ConfigSource, locator: str, where: str) -> tuple[str, Path, str]:
    path = source.reads((source.base_dir / locator).resolve())
    if not path.is_dir():
        raise source.error(f"{where}.baseline", f"{locator!r} is not a directory")
    key = ("tree", str(path))
    digest = source.cache.get(key)
    if digest is None:
        digest = tree_digest(path)
        source.cache[key] = digest
    # The cache maps a ("tree", path) key only to that tree's digest.
    return locator, path, cast(str, digest)


@attrs.frozen(kw_only=True)
class CommandSpec:
    """A command as written in the config, and how to run it."""

    argv: tuple[str, ...]
    """As written (recorded; relative program paths stay relative)."""
    run_argv: tuple[str, ...]
    """As run (the program resolved against the config folder)."""
    program_digest: str | None
    """SHA-256 of the program file's bytes when it is a file in the config folder."""
    timeout_s: int
    """Time limit of one sandboxed run."""
    env: tuple[tuple[str, str], ...]
    """The whole environment of the command."""
    network: bool
    """Network access (off unless asked for)."""
    limits: Limits = attrs.field(factory=Limits)
    """Resource limits of each sandboxed run (recorded per run, not part of the digest)."""
    environment_digest: str | None = None
    """The digest of the check's environment (`kernel.effects.environments`), if any."""

    def describe(self) -> dict[str, object]:
        """What the command's provenance digest covers (JSON types)."""
        environment = self.environment_digest
        return {
            "argv": list(self.argv),
            "program_digest": self.program_digest,
            "timeout_s": self.timeout_s,
            "env": [list(pair) for pair in self.env],
            "network": self.network,
            **({} if environment is None else {"environment": environment}),
        }


def _command(
    source: ConfigSource,
    argv: tuple[str, ...],
    options: tuple[int, Mapping[str, str], bool],
    where: str,
    key: str = "command",
) -> CommandSpec:
    """The command ``argv`` as written in the config and as run, with ``options``: its
    time limit, environment (over `BASE_ENV`) and network access."""
    timeout_s, variables, network = options
    env = tuple(sorted({**BASE_ENV, **variables}.items()))
    program = argv[0]
    digest = None
    run_argv = list(argv)
    if "/" in program:
        pure = PurePosixPath(program)
        if pure.is_absolute() or ".." in pure.parts:
            raise source.error(
                f"{where}.{key}[0]", f"must be relative to the config folder: {program!r}"
            )
        path = source.reads((source.base_dir / program).resolve())
        if not path.is_file() or not os.access(path, os.X_OK):
            raise source.error(f"{where}.{key}[0]", f"{program!r} is not an executable file")
        hidden = next((h for h in _sandbox_hidden() if path.is_relative_to(h)), None)
        if hidden is not None and available_isolation() is not Isolation.COPY:
            raise source.error(
                f"{where}.{key}[0]",
                f"{program!r} lies under {hidden}, which a sandboxed command sees empty; "
                "keep programs outside it",
            )
        digest = _file_digest(path)
        run_argv[0] = str(path)
    else:
        try:
            check_command_starts(list(argv), env=dict(env))
        except EffectError as e:
            raise source.error(f"{where}.{key}[0]", str(e)) from e
    return CommandSpec(
        argv=tuple(argv),
        run_argv=tuple(run_argv),
        program_digest=digest,
        timeout_s=timeout_s,
        env=env,
        network=network,
        limits=source.limits,
    )


# --- worker ---------------------------------------------------------------------------


def sandbox_run(capture: Capture) -> SandboxRun:
    """How a capture's sandbox ran, as a run record keeps it (isolation, limits and
    who the command was on the host)."""
    return SandboxRun(
        isolation=capture.isolation,
        limits=recorded_limits(capture),
        command_uid=capture.command_uid,
    )


def _excerpt(capture: Capture) -> str:
    """The last non-blank stderr line (untrusted text, bounded, paths redacted)."""
    try:
        with open(capture.stderr_path, "rb") as handle:
            handle.seek(max(0, capture.stderr_size - 4096))
            tail = handle.read(4096).decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return redact_absolute_paths(lines[-1][:200]) if lines else ""


OUTPUT_TAIL: Final = "output_tail"
"""Volatile note (``check:<id>:output_tail``, ``worker:output_tail``): the end of a check's
or the worker's stdout and stderr, for the reviewer (``checks/<digest>.txt`` beside the
report)."""
_TAIL_BYTES: Final = 4096


def _output_tail(capture: Capture, *, stdout: bool = True) -> str:
    """The last few KiB of a check's stdout and stderr, labelled, starting on a line.

    A declared-tests check's stdout is the bootstrap's machine stream: not for the
    reader, so only its stderr is kept (the collector's summary follows it)."""
    parts = []
    streams = [("stdout", capture.stdout_path, capture.stdout_size)] if stdout else []
    for name, path, size in (
        *streams,
        ("stderr", capture.stderr_path, capture.stderr_size),
    ):
        try:
            with open(path, "rb") as handle:
                handle.seek(max(0, size - _TAIL_BYTES))
                data = handle.read(_TAIL_BYTES)
        except OSError:
            data = b""
        if size > _TAIL_BYTES and b"\n" in data:
            data = data[data.index(b"\n") + 1 :]
        shown = "" if size <= _TAIL_BYTES else f", last {len(data)} shown"
        parts.append(f"--- {name} ({size} bytes{shown}) ---\n")
        parts.append(data.decode("utf-8", "replace"))
        if data and not data.endswith(b"\n"):
            parts.append("\n")
    return "".join(parts)


def _exit_text(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


@attrs.frozen(kw_only=True)
class CommandWorker:
    """Worker ``command``: one sandboxed run of a command on the baseline."""

    attempt_id: str
    worker_id: str
    actor_type: ActorType
    command: CommandSpec
    baseline_locator: str
    baseline: Path
    baseline_digest: str
    kind: str = ADAPTER_KIND
    version: str = ADAPTER_VERSION

    def provenance(self) -> tuple[tuple[str, str], ...]:
        """Baseline tree and command digests."""
        described = {"baseline": self.baseline_digest, **self.command.describe()}
        return (
            (f"baseline:{self.baseline_locator}", self.baseline_digest),
            (f"worker:{self.attempt_id}", sha256_hex(described)),
        )

    def context_digest(self) -> str:
        """The worker's context (its provenance digest): what correlates two drafts."""
        return self.provenance()[1][1]

    def spec(self, *, run_index: int = 0) -> SandboxSpec:
        """The sandbox run of this worker (also used for reruns)."""
        return SandboxSpec(
            command=self.command.run_argv,
            baseline=str(self.baseline),
            capture=CaptureMode.PATCH,
            run_index=run_index,
            timeout_s=float(self.command.timeout_s),
            network=self.command.network,
            env=self.command.env,
            max_output_bytes=_MAX_PATCH_BYTES,
            limits=self.command.limits,
        )

    def run(self, context: AttemptContext) -> WorkerProduced | WorkerFailed:
        """Run the command once in a fresh sandbox; digest its patch and outputs."""
        if context.scratch is None:
            return WorkerFailed(message="command worker needs a scratch folder")
        spill = context.scratch / "worker-spill"
        spill.mkdir()
        try:
            try:
                capture = run_sandboxed(self.spec(), spill_dir=spill)
            except EffectError as e:
                return WorkerFailed(
                    message=f"sandbox could not run: {e}", code=AttemptErrorCode.SANDBOX_ERROR
                )
            note("worker_ms", capture.duration_ms)
            note("worker_isolation", str(capture.isolation))
            record_worker_sandbox(sandbox_run(capture))
            weak = below_minimum(capture.isolation)
            if weak is not None:
                return WorkerFailed(message=weak, code=AttemptErrorCode.SANDBOX_ERROR)
            note("worker_stdout_bytes", capture.stdout_size)
            note("worker_stderr_bytes", capture.stderr_size)
            # The reviewer reads what the worker said, a crashed worker's most of all.
            note(f"worker:{OUTPUT_TAIL}", _output_tail(capture))
            failed = self._failure(capture)
            if failed is not None:
                return failed
            try:
                patch = read_output(capture, max_bytes=_MAX_PATCH_BYTES)
            except EffectError as e:
                return WorkerFailed(
                    message=f"patch capture: {e}", code=AttemptErrorCode.SANDBOX_ERROR
                )
        finally:
            # The worker's outputs are digested; nothing of them outlives this call.
            shutil.rmtree(spill, ignore_errors=True)
        candidate = context.scratch / "candidate"
        candidate.mkdir()
        # Private scratch, removed after the run: plain writes, no fsync needed.
        (candidate / PATCH_FILE).write_bytes(patch)
        manifest = self._manifest(context, capture, sha256_bytes(patch))
        manifest_path = context.scratch / "result-manifest.json"
        manifest_path.write_bytes(canonical_json(manifest.to_dict()))
        note("patch_bytes", len(patch))
        return WorkerProduced(
            manifest_path=manifest_path,
            manifest_locator=f"{context.attempt_id}/result-manifest.json",
            candidate_root=candidate,
            candidate_locator=f"{context.attempt_id}/candidate",
        )

    def _failure(self, capture: Capture) -> WorkerFailed | None:
        excerpt = _excerpt(capture)
        tail = f"; stderr: {excerpt}" if excerpt else ""
        if capture.status is CaptureStatus.TIMEOUT:
            return WorkerFailed(
                message=f"worker timed out after {self.command.timeout_s} s{tail}",
                code=AttemptErrorCode.WORKER_TIMEOUT,
            )
        if capture.status is CaptureStatus.SANDBOX_ERROR:
            why = redact_absolute_paths(capture.error or "unknown")
            return WorkerFailed(
                message=f"sandbox error: {why}", code=AttemptErrorCode.SANDBOX_ERROR
            )
        if capture.status is CaptureStatus.LIMIT_EXCEEDED:
            return WorkerFailed(message=f"worker hit its {capture.limit_hit} limit{tail}")
        if capture.status is CaptureStatus.FAILED:
            if capture.start_failed:
                why = redact_absolute_paths(capture.error or "")
                return WorkerFailed(message=f"worker command could not start: {why}")
            return WorkerFailed(message=f"worker failed: {_exit_text(capture.exit_code)}{tail}")
        return None

    def _manifest(self, context: AttemptContext, capture: Capture, patch: str) -> ResultManifest:
        unit = context.work_unit
        return ResultManifest(
            id=f"{context.attempt_id}/result-manifest",
            work_unit_id=unit.id,
            work_unit_version=unit.version,
            work_unit_digest=unit.digest,
            attempt=1,
            worker=Actor(
                id=self.worker_id,
                type=self.actor_type,
                adapter=self.kind,
                adapter_version=self.version,
            ),
            status=WorkerStatus.SUCCEEDED,
            artifacts=(
                Artifact(id="patch", locator=PATCH_FILE, digest=patch, media_type="text/x-diff"),
                Artifact(
                    id="stdout", locator="stdout", digest=capture.stdout_digest, media_type=""
                ),
                Artifact(
                    id="stderr", locator="stderr", digest=capture.stderr_digest, media_type=""
                ),
            ),
            claims=(),
        )


def _command_worker(entry: Mapping[str, object], source: ConfigSource) -> WorkerAdapter:
    where = f"attempts[{entry.get('attempt_id')!r}]"
    read = source.parse(CommandWorkerEntry, entry, where)
    locator, baseline, digest = _baseline(source, read.baseline, where)
    command = _command(source, read.command, (read.timeout_s, read.env, read.network), where)
    oracles = cast(tuple[OracleSpec, ...], source.cache.get(ORACLES_KEY, ()))
    refuse_shown_expected(source, oracles, [command.run_argv[0]], baseline, where)
    return CommandWorker(
        attempt_id=read.attempt_id,
        worker_id=read.worker_id,
        actor_type=read.actor_type,
        command=command,
        baseline_locator=locator,
        baseline=baseline,
        baseline_digest=digest,
    )
