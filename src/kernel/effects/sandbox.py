"""Isolated, disposable runs of one command against a baseline directory.

`run_sandboxed` runs one command in a fresh sandbox and returns a `Capture`. Levels,
strongest first (`kernel.consensus.Isolation`); the one actually obtained is recorded
in every capture:

``overlay``
    A helper interpreter (``python -I -S``, stdlib only, `_sandbox_init` precompiled)
    creates user + mount + PID (+ network, unless asked for) namespaces, maps the
    runner to the unprivileged sandbox uid/gid 1000, and as PID 1 of the new PID
    namespace builds a new root: a recursive bind of ``/`` made read-only with one
    ``mount_setattr(AT_RECURSIVE)``; a private ``/tmp``: an overlay (``userxattr``)
    whose lower layer is the host's ``/tmp``, read-only like the rest of the
    filesystem, and whose upper layer is a tmpfs of this namespace only (an empty
    tmpfs when overlayfs refuses it); an empty private tmpfs ``/dev/shm``; an empty
    read-only tmpfs over `scratch_root` (no run sees another run's scratch or the
    runner's private folders); a fresh ``/proc``; and the baseline as an overlay at
    `SANDBOX_WORKDIR` whose upper dir holds the run's changes. The command runs
    chrooted there, with ``no_new_privs`` and, because its uid is not namespace root,
    no capabilities after ``execve``: it cannot remount, unmount, chroot out or
    raise privileges, so the rest of the filesystem stays read-only to it.
``namespace_copy``
    The same namespaces around a private copy of the baseline (overlayfs unusable).
``copy``
    No namespaces: a private copy and a new session only. Weaker: the command can
    write anywhere its uid may, and a process that leaves the session survives.

Rules enforced:

- the baseline, other runs and everything outside the sandbox are unchanged by a run
  (``overlay``/``namespace_copy``); network is off unless ``network=True``: a
  network namespace cuts IP and abstract sockets, and a seccomp filter (x86_64,
  aarch64) makes ``socket(AF_UNIX)`` fail, because a filesystem socket on the
  read-only tree (``docker.sock``, an agent socket) still accepts ``connect()``;
- die with the runner: the helper has ``PR_SET_PDEATHSIG=SIGKILL`` towards the
  runner and PID 1 towards the helper, and the kernel kills every process of a PID
  namespace when its PID 1 dies; a timeout kills the helper, hence the whole tree;
  when the command itself exits, PID 1 kills whatever it left behind;
- outputs stream: stdout, stderr and the patch are hashed while read
  (`kernel.identity.Sha256Stream`) and spilled to files under the caller's
  ``spill_dir``; memory stays flat whatever the output size;
- patch capture is ``git diff --no-index`` with pinned options and environment
  (`PATCH_COMMAND`) between the baseline (``a/``) and the final tree (``b/``):
  sorted paths, deletions, binary files and the executable bit are handled; the
  same end state gives the same bytes; touch-only, create-then-delete and empty
  directories are no change;
- every scratch directory lives under `scratch_root()`, is locked by its owner with
  ``flock`` and removed after capture, also on failure; one left by a killed runner
  is swept by the next sandbox that starts; `private_tempdir` gives the runner's own
  folders (spills, attempt folders, the verifier's files) the same treatment, so a
  namespace sandbox sees none of them;
- every run gets ``KERNEL_RUN_INDEX``; a `Variation` (TZ, locale, umask, HOME, seed)
  is applied per run and recorded in the capture.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import functools
import inspect
import marshal
import os
import queue
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from kernel.codec import Record
from kernel.consensus import CaptureMode, CaptureStatus, Isolation, RunObservation
from kernel.errors import EffectError
from kernel.identity import Sha256Stream

__all__ = [
    "PATCH_COMMAND",
    "PATCH_ENV",
    "SANDBOX_GID",
    "SANDBOX_UID",
    "SANDBOX_WORKDIR",
    "Capture",
    "SandboxSpec",
    "Variation",
    "available_isolation",
    "check_command_starts",
    "observation",
    "private_tempdir",
    "read_output",
    "run_sandboxed",
    "scratch_root",
    "variation_env",
]

SANDBOX_WORKDIR: Final = "/tmp/kernel-sandbox"  # noqa: S108 - in the private /tmp layer
"""Where the baseline view is mounted inside a namespace sandbox (the command's cwd)."""
SANDBOX_UID: Final = 1000
"""The command's uid inside the namespaces (never namespace root: no capabilities)."""
SANDBOX_GID: Final = 1000
"""The command's gid inside the namespaces."""

PATCH_COMMAND: Final = (
    "git",
    "-c", "core.quotePath=true",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "diff.relative=false",
    "-c", "core.attributesFile=/dev/null",
    "diff", "--no-index", "--binary", "--full-index", "--no-prefix", "--no-color",
    "--no-ext-diff", "--no-textconv", "--no-renames", "--diff-algorithm=myers",
    "--unified=3", "--ignore-submodules=none", "a", "b",
)  # fmt: skip
"""The pinned diff, run from a directory holding ``a`` (baseline) and ``b`` (final)."""

PATCH_ENV: Final = {
    "LC_ALL": "C",
    "LANG": "C",
    "TZ": "UTC",
    "HOME": "/nonexistent",
    "XDG_CONFIG_HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}
"""The whole environment of the diff (nothing inherited can change its bytes)."""

_CHUNK: Final = 256 << 10
"""Read size: a chunk stays in a core's L2 from the pipe read through hash and write.

1 MiB chunks cost twice the CPU per byte here (2.4 vs 1.2 s/GiB, bench/sandbox.py).
"""
_BUFFERS: Final = 8
"""Chunks in flight per sink (read, hashing, queued): memory bound of one sink."""
_OFFLOAD_MIN: Final = 64 << 10
"""A chunk this large starts the sink's hashing thread; small outputs hash inline."""
_PIPE_SIZE: Final = 1 << 20
_STALE_AFTER_S: Final = 30.0


class Variation(enum.StrEnum):
    """A per-run environment variation that decorrelates reruns (each is recorded)."""

    TZ = "tz"
    """``TZ`` cycles through a few zones."""
    LOCALE = "locale"
    """``LANG``/``LC_ALL`` cycle through locales every libc has."""
    UMASK = "umask"
    """The command's umask cycles through 022, 077, 002, 027."""
    HOME = "home"
    """``HOME`` is a fresh, per-run directory."""
    SEED = "seed"
    """``KERNEL_RUN_SEED`` and ``PYTHONHASHSEED`` are set from the run index."""


_TZS: Final = ("UTC", "America/New_York", "Asia/Tokyo", "Europe/Berlin", "Australia/Adelaide")
_LOCALES: Final = ("C.UTF-8", "C", "POSIX")
_UMASKS: Final = ("022", "077", "002", "027")


def variation_env(index: int, variations: Sequence[Variation]) -> tuple[tuple[str, str], ...]:
    """The recorded ``(name, value)`` pairs of run ``index`` for ``variations``.

    ``umask`` is recorded as ``("umask", "077")``; every other pair is an environment
    variable. Deterministic: the same index and variations give the same pairs.
    """
    pairs: dict[str, str] = {}
    for variation in variations:
        if variation is Variation.TZ:
            pairs["TZ"] = _TZS[index % len(_TZS)]
        elif variation is Variation.LOCALE:
            pairs["LANG"] = pairs["LC_ALL"] = _LOCALES[index % len(_LOCALES)]
        elif variation is Variation.UMASK:
            pairs["umask"] = _UMASKS[index % len(_UMASKS)]
        elif variation is Variation.HOME:
            pairs["HOME"] = f"/tmp/kernel-home-{index}"  # noqa: S108 - private /tmp layer
        else:
            pairs["KERNEL_RUN_SEED"] = str(index + 1)
            pairs["PYTHONHASHSEED"] = str(index + 1)
    return tuple(sorted(pairs.items()))


@attrs.frozen(kw_only=True)
class SandboxSpec:
    """Everything one sandboxed run needs (picklable, so any executor can ship it)."""

    command: tuple[str, ...]
    """argv; ``command[0]`` is looked up on the command's ``PATH``."""
    baseline: str | None = None
    """Directory the run starts from; None for an empty one."""
    capture: CaptureMode = CaptureMode.STDOUT
    """What the run's output is."""
    run_index: int = 0
    """Exported as ``KERNEL_RUN_INDEX``."""
    timeout_s: float | None = None
    """Time limit of the whole run (setup, command and capture); None for none."""
    network: bool = False
    """Share the runner's network instead of an empty network namespace."""
    env: tuple[tuple[str, str], ...] | None = None
    """The command's base environment; None inherits the runner's."""
    variation: tuple[tuple[str, str], ...] = ()
    """Per-run variation pairs (see `variation_env`), applied and recorded."""
    preload: str | None = None
    """A directory whose contents are copied over the tree before the command runs."""
    apply_patch: str | None = None
    """A patch file applied (``git apply``) to the tree before the command runs."""
    isolation: Isolation | None = None
    """Require this level; None takes the strongest available."""
    max_output_bytes: int | None = None
    """Refuse (``sandbox_error``) an output larger than this; None for no limit."""


@attrs.frozen(kw_only=True)
class Capture(Record):
    """What one sandboxed run produced. Paths name files in the caller's spill dir."""

    run_index: int
    """``KERNEL_RUN_INDEX`` of the run."""
    status: CaptureStatus
    """ok, failed, timeout or sandbox_error."""
    exit_code: int | None
    """Exit status; negative for a signal; None when the command never ended by itself."""
    start_failed: bool
    """True when the command could not be executed at all."""
    duration_ms: int
    """Wall time of the whole run."""
    isolation: Isolation
    """Isolation level obtained."""
    capture_mode: CaptureMode
    """What ``output`` is."""
    network: bool
    """Whether the run had network access."""
    variation: tuple[tuple[str, str], ...]
    """Variation pairs applied."""
    output_digest: str | None
    """SHA-256 of the output; None unless the output was captured whole."""
    output_size: int | None
    """Output size in bytes, with ``output_digest``."""
    output_path: str | None
    """Spilled output file, with ``output_digest``."""
    stdout_digest: str
    """SHA-256 of everything read from stdout."""
    stdout_size: int
    """Bytes read from stdout."""
    stdout_path: str
    """Spilled stdout."""
    stderr_digest: str
    """SHA-256 of everything read from stderr."""
    stderr_size: int
    """Bytes read from stderr."""
    stderr_path: str
    """Spilled stderr."""
    error: str | None
    """Why the sandbox failed or the command did not start, else None."""


def observation(capture: Capture) -> RunObservation:
    """The pure `RunObservation` of a capture (what `kernel.consensus` judges)."""
    ok = capture.status is CaptureStatus.OK
    return RunObservation(
        index=capture.run_index,
        status=capture.status,
        exit_code=capture.exit_code,
        output_digest=capture.output_digest if ok else None,
        output_size=capture.output_size if ok else None,
        isolation=capture.isolation,
        duration_ms=capture.duration_ms,
        variation=capture.variation,
    )


def read_output(capture: Capture, *, max_bytes: int = 1 << 30) -> bytes:
    """The captured output bytes (e.g. the patch), checked against the recorded digest.

    Raises:
        EffectError: no output was captured, it is larger than ``max_bytes``, or the
            spilled file no longer matches its digest.
    """
    if capture.output_path is None or capture.output_size is None:
        raise EffectError(f"run {capture.run_index}: no output was captured")
    if capture.output_size > max_bytes:
        raise EffectError(f"run {capture.run_index}: output larger than {max_bytes} bytes")
    try:
        data = Path(capture.output_path).read_bytes()
    except OSError as e:
        raise EffectError(f"{capture.output_path}: cannot read output: {e.strerror}") from e
    stream = Sha256Stream()
    stream.update(data)
    if stream.hexdigest() != capture.output_digest:
        raise EffectError(f"{capture.output_path}: output changed since it was captured")
    return data


def scratch_root() -> Path:
    """Parent of every sandbox scratch directory (``$TMPDIR/kernel-sandboxes``).

    Namespace sandboxes mount an empty read-only tmpfs over it: nothing below it is
    visible to a sandboxed command.
    """
    return Path(tempfile.gettempdir()) / "kernel-sandboxes"


@contextlib.contextmanager
def private_tempdir(kind: str) -> Iterator[Path]:
    """A new folder under `scratch_root`, hidden from every namespace sandbox.

    For the runner's own scratch and spill folders. Named ``<kind>-<pid>-<random>``,
    locked by this process while in use (a ``.lock`` file inside) and removed on
    exit, also on failure; one left by a killed process is swept like a sandbox's
    scratch dir.

    Raises:
        EffectError: the folder cannot be created.
        ValueError: ``kind`` is not alphanumeric.
    """
    if not kind.isalnum():
        raise ValueError(f"scratch kind must be alphanumeric, got {kind!r}")
    scratch = _Scratch(kind)
    try:
        yield scratch.path
    finally:
        scratch.close()


def check_command_starts(command: Sequence[str], *, env: Mapping[str, str] | None = None) -> None:
    """Refuse a command that cannot start, before any run is launched.

    A bare name must be on ``PATH``; a path containing ``/`` is resolved relative to
    the baseline at run time, so only an absolute one is checked here.

    Raises:
        EffectError: empty argv, or the program is not found or not executable.
    """
    if not command:
        raise EffectError("no command given")
    program = command[0]
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    if "/" not in program:
        if shutil.which(program, path=path) is None:
            raise EffectError(f"{program}: command not found on PATH")
    elif program.startswith("/") and not (os.path.isfile(program) and os.access(program, os.X_OK)):
        raise EffectError(f"{program}: not an executable file")


# ---------------------------------------------------------------------------
# Isolation probe


_PROBE_LOCK = threading.Lock()
_PROBED: dict[str, Isolation] = {}


def available_isolation() -> Isolation:
    """The strongest isolation level this machine provides (probed once, cached)."""
    with _PROBE_LOCK:
        if "level" not in _PROBED:
            _PROBED["level"] = _probe()
        return _PROBED["level"]


def _probe() -> Isolation:
    for level in (Isolation.OVERLAY, Isolation.NAMESPACE_COPY):
        with private_tempdir("probe") as spill:
            try:
                capture = run_sandboxed(
                    SandboxSpec(command=("true",), isolation=level, timeout_s=20.0),
                    spill_dir=spill,
                )
            except EffectError:
                continue
            if capture.status is CaptureStatus.OK:
                return level
    return Isolation.COPY


# ---------------------------------------------------------------------------
# Scratch directories


class _Scratch:
    """A locked scratch directory: removed on close; swept if its owner died."""

    def __init__(self, kind: str = "sbx") -> None:
        root = scratch_root()
        try:
            root.mkdir(parents=True, exist_ok=True)
            _sweep(root)
            self.path = Path(tempfile.mkdtemp(prefix=f"{kind}-{os.getpid()}-", dir=root))
            self._lock = os.open(self.path / ".lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            raise EffectError(f"{root}: cannot create a sandbox scratch dir: {e.strerror}") from e

    def close(self) -> None:
        _remove_tree(self.path)
        os.close(self._lock)


def _sweep(root: Path) -> None:
    """Remove scratch dirs whose owner is gone (lock free) and that are not brand new."""
    now = time.time()
    for entry in root.iterdir():
        try:
            if now - entry.stat().st_mtime < _STALE_AFTER_S:
                continue
            fd = os.open(entry / ".lock", os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _remove_tree(entry)
        os.close(fd)


def _remove_tree(path: Path) -> None:
    def unlock(_func: Any, failed: str, _exc: BaseException) -> None:
        # overlayfs leaves its work dir mode 000; make parents writable and retry once.
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
                shutil.rmtree(failed, ignore_errors=True)
            else:
                os.unlink(failed)

    if sys.version_info >= (3, 12):  # pragma: no cover - version dependent
        shutil.rmtree(path, onexc=unlock)
    else:
        shutil.rmtree(path, onerror=lambda f, p, e: unlock(f, p, e[1]))


def _copy_tree(source: Path | None, target: Path, *, link: bool = False) -> None:
    """Copy ``source`` (or nothing) to ``target``; hard links when ``link`` and possible."""
    if source is None:
        target.mkdir()
        return

    def copy(src: str, dst: str) -> object:
        if link:
            try:
                os.link(src, dst)
                return dst
            except OSError:
                pass
        return shutil.copy2(src, dst)

    shutil.copytree(source, target, symlinks=True, copy_function=copy)


# ---------------------------------------------------------------------------
# Streaming capture


class _Sink:
    """Hash and spill one stream, read straight into a small pool of reusable buffers.

    The runner thread reads each chunk into a pooled buffer and writes it to the spill
    file; hashing runs on a per-sink worker thread started by the first large chunk
    (`Sha256Stream` and the file write both release the GIL on large buffers, so the
    two overlap on separate cores). Chunks stay in order; memory is at most
    `_BUFFERS` x `_CHUNK` whatever the output size.
    """

    def __init__(self, path: Path, limit: int | None) -> None:
        self.path = path
        self.stream = Sha256Stream()
        self.limit = limit
        self.overflow = False
        self.size = 0
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        self._free: queue.SimpleQueue[bytearray] = queue.SimpleQueue()
        self._allocated = 0
        self._work: queue.SimpleQueue[tuple[bytearray, int] | None] | None = None
        self._worker: threading.Thread | None = None

    def read_from(self, fd: int) -> bool:
        """Read the next chunk of ``fd`` (non-blocking) into the sink; False at EOF.

        Raises:
            BlockingIOError: nothing to read yet.
        """
        buffer = self._buffer()
        try:
            size = os.readv(fd, (buffer,))
        except BaseException:
            self._free.put(buffer)
            raise
        if not size:
            self._free.put(buffer)
            return False
        self.size += size
        if self._work is None and size >= _OFFLOAD_MIN:
            self._start_worker()
        if self._work is not None:
            self._work.put((buffer, size))  # hashed on the worker while written here
        else:
            self.stream.update(memoryview(buffer)[:size])
            self._free.put(buffer)
        if self.limit is not None and self.size > self.limit:
            self.overflow = True
        if not self.overflow:
            view = memoryview(buffer)[:size]
            while view:
                view = view[os.write(self._fd, view) :]
        return True

    def close(self) -> None:
        """Finish hashing (``stream`` is final afterwards) and close the spill file."""
        if self._work is not None and self._worker is not None:
            self._work.put(None)
            self._worker.join()
            self._work = None
        os.close(self._fd)

    def _buffer(self) -> bytearray:
        if self._allocated < _BUFFERS:
            try:
                return self._free.get_nowait()
            except queue.Empty:
                self._allocated += 1
                return bytearray(_CHUNK)
        return self._free.get()  # every buffer is queued for hashing: wait for one

    def _start_worker(self) -> None:
        work: queue.SimpleQueue[tuple[bytearray, int] | None] = queue.SimpleQueue()

        def hash_chunks() -> None:
            while (item := work.get()) is not None:
                buffer, size = item
                try:
                    self.stream.update(memoryview(buffer)[:size])
                finally:
                    self._free.put(buffer)

        self._work = work
        self._worker = threading.Thread(target=hash_chunks, name="sandbox-hash", daemon=True)
        self._worker.start()


def _pump(
    streams: dict[int, _Sink | list[bytes]], deadline: float | None, proc: subprocess.Popen[bytes]
) -> bool:
    """Read every fd to EOF into its sink; returns False when the deadline passed."""
    selector = selectors.DefaultSelector()
    for fd in streams:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    timed_out = False
    try:
        while selector.get_map():
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                if timed_out:
                    break  # killed already and still no EOF: give up on the rest
                timed_out = True
                _kill(proc)
                deadline = time.monotonic() + 5.0
                continue
            for key, _ in selector.select(wait):
                fd = key.fd
                assert isinstance(fd, int)
                sink = streams[fd]
                try:
                    if isinstance(sink, list):
                        chunk = os.read(fd, _CHUNK)
                        sink.append(chunk)
                        more = bool(chunk)
                    else:
                        more = sink.read_from(fd)
                except BlockingIOError:
                    continue
                if not more:
                    selector.unregister(fd)
    finally:
        selector.close()
    return not timed_out


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _pipe() -> tuple[int, int]:
    r, w = os.pipe2(os.O_CLOEXEC)
    with contextlib.suppress(OSError):
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    return r, w


# ---------------------------------------------------------------------------
# The run


def run_sandboxed(spec: SandboxSpec, *, spill_dir: Path) -> Capture:
    """Run ``spec.command`` once in a fresh sandbox of ``spec.baseline``.

    Outputs are spilled to ``spill_dir/run-<index>.{stdout,stderr,patch}``; the caller
    owns that directory. The sandbox itself is discarded before this returns.

    Returns:
        The `Capture`; failures of the command (non-zero exit, timeout, cannot start)
        and of the sandbox are statuses, not exceptions.

    Raises:
        EffectError: the baseline is missing or not a directory, ``spill_dir`` is not
            writable, or a required isolation level cannot be set up at all.
    """
    started = time.monotonic()
    deadline = None if spec.timeout_s is None else started + spec.timeout_s
    baseline = None if spec.baseline is None else Path(spec.baseline).resolve()
    if baseline is not None and not baseline.is_dir():
        raise EffectError(f"{spec.baseline}: baseline is not a directory")
    level = spec.isolation if spec.isolation is not None else available_isolation()
    prefix = spill_dir / f"run-{spec.run_index}"
    try:
        out = _Sink(prefix.with_suffix(".stdout"), spec.max_output_bytes)
        err = _Sink(prefix.with_suffix(".stderr"), None)
        patch = (
            _Sink(prefix.with_suffix(".patch"), spec.max_output_bytes)
            if spec.capture is CaptureMode.PATCH
            else None
        )
    except OSError as e:
        raise EffectError(f"{spill_dir}: cannot spill outputs: {e.strerror}") from e
    env = dict(spec.env) if spec.env is not None else dict(os.environ)
    umask = 0o022
    for name, value in spec.variation:
        if name == "umask":
            umask = int(value, 8)
        else:
            env[name] = value
    env["KERNEL_RUN_INDEX"] = str(spec.run_index)
    scratch = _Scratch()
    try:
        if level is Isolation.COPY:
            result = _run_copy(
                spec, baseline=baseline, scratch=scratch.path, env=env, umask=umask,
                out=out, err=err, patch=patch, deadline=deadline,
            )  # fmt: skip
        else:
            result = _run_namespaced(
                spec, level=level, baseline=baseline, scratch=scratch.path, env=env,
                umask=umask, out=out, err=err, patch=patch, deadline=deadline,
            )  # fmt: skip
    finally:
        for sink in (out, err, patch):
            if sink is not None:
                sink.close()
        scratch.close()
    status, exit_code, start_failed, error = result
    output = patch if patch is not None else out
    if status is CaptureStatus.OK and output.overflow:
        status, error = CaptureStatus.SANDBOX_ERROR, "output larger than max_output_bytes"
    captured = status in (CaptureStatus.OK, CaptureStatus.FAILED) and not output.overflow
    return Capture(
        run_index=spec.run_index,
        status=status,
        exit_code=exit_code,
        start_failed=start_failed,
        duration_ms=int((time.monotonic() - started) * 1000),
        isolation=level,
        capture_mode=spec.capture,
        network=spec.network,
        variation=spec.variation,
        output_digest=output.stream.hexdigest() if captured else None,
        output_size=output.stream.size if captured else None,
        output_path=str(output.path) if captured else None,
        stdout_digest=out.stream.hexdigest(),
        stdout_size=out.stream.size,
        stdout_path=str(out.path),
        stderr_digest=err.stream.hexdigest(),
        stderr_size=err.stream.size,
        stderr_path=str(err.path),
        error=error,
    )


_Result = tuple[CaptureStatus, int | None, bool, str | None]


def _run_namespaced(
    spec: SandboxSpec,
    *,
    level: Isolation,
    baseline: Path | None,
    scratch: Path,
    env: dict[str, str],
    umask: int,
    out: _Sink,
    err: _Sink,
    patch: _Sink | None,
    deadline: float | None,
) -> _Result:
    for name in ("lower", "upper", "work", "root", "diff", "layer"):
        (scratch / name).mkdir()
    if baseline is None:
        baseline = scratch / "empty"
        baseline.mkdir()
    if level is Isolation.NAMESPACE_COPY:
        _copy_tree(baseline, scratch / "copy")
    home = env.get("HOME", "") if any(k == "HOME" for k, _ in spec.variation) else ""
    options = {
        "mode": "overlay" if level is Isolation.OVERLAY else "bind",
        "scratch": str(scratch),
        "baseline": str(baseline),
        "workdir": SANDBOX_WORKDIR,
        "net": "1" if spec.network else "0",
        "umask": str(umask),
        "patch": "1" if patch is not None else "0",
        "preload": spec.preload or "",
        "apply": spec.apply_patch or "",
        "home": home,
        "hide": os.path.realpath(scratch_root()),
        "ppid": str(os.getpid()),
        "uid": str(SANDBOX_UID),
        "gid": str(SANDBOX_GID),
        "git": " ".join(PATCH_COMMAND),
    }
    argv = [sys.executable, "-I", "-S", "-c", _BOOTSTRAP, _init_code()]
    argv += [f"{key}={value}" for key, value in options.items()]
    argv += ["--", *spec.command]
    status_r, status_w = _pipe()
    patch_r, patch_w = _pipe()
    out_r, out_w = _pipe()
    err_r, err_w = _pipe()
    status_lines: list[bytes] = []
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            pass_fds=(status_w, patch_w),
            env={
                **env,
                "KERNEL_SANDBOX_STATUS_FD": str(status_w),
                "KERNEL_SANDBOX_PATCH_FD": str(patch_w),
            },
            start_new_session=True,
        )
    except OSError as e:
        for fd in (status_r, status_w, patch_r, patch_w, out_r, out_w, err_r, err_w):
            os.close(fd)
        raise EffectError(f"cannot start the sandbox helper: {e.strerror}") from e
    for fd in (status_w, patch_w, out_w, err_w):
        os.close(fd)
    streams: dict[int, _Sink | list[bytes]] = {out_r: out, err_r: err, status_r: status_lines}
    streams[patch_r] = patch if patch is not None else []
    try:
        in_time = _pump(streams, deadline, proc)
    finally:
        _kill(proc)
        proc.wait()
        for fd in (status_r, patch_r, out_r, err_r):
            os.close(fd)
    return _interpret(b"".join(status_lines).decode("utf-8", "replace"), in_time, patch)


def _interpret(report: str, in_time: bool, patch: _Sink | None) -> _Result:
    """Turn the helper's status lines into (status, exit code, start failed, error)."""
    fields = dict(line.split(" ", 1) for line in report.splitlines() if " " in line)
    if not in_time:
        return CaptureStatus.TIMEOUT, None, False, "time limit reached; process tree killed"
    if "error" in fields:
        return CaptureStatus.SANDBOX_ERROR, None, False, fields["error"]
    if "start-failed" in fields:
        return CaptureStatus.FAILED, 127, True, f"command could not start: {fields['start-failed']}"
    if "exit" not in fields:
        return CaptureStatus.SANDBOX_ERROR, None, False, "sandbox ended without a status"
    code = int(fields["exit"])
    if patch is not None:
        diff_rc = fields.get("diff")
        if diff_rc not in ("0", "1"):
            return CaptureStatus.SANDBOX_ERROR, code, False, f"patch capture failed ({diff_rc})"
    if code != 0:
        return CaptureStatus.FAILED, code, False, None
    return CaptureStatus.OK, 0, False, None


def _run_copy(
    spec: SandboxSpec,
    *,
    baseline: Path | None,
    scratch: Path,
    env: dict[str, str],
    umask: int,
    out: _Sink,
    err: _Sink,
    patch: _Sink | None,
    deadline: float | None,
) -> _Result:
    diff = scratch / "diff"
    diff.mkdir()
    tree = diff / "b"
    try:
        _copy_tree(baseline, tree)
        if patch is not None:
            _copy_tree(baseline, diff / "a", link=True)
        if spec.preload:
            shutil.copytree(spec.preload, tree, symlinks=True, dirs_exist_ok=True)
        if spec.apply_patch:
            subprocess.run(
                ["git", "apply", "--whitespace=nowarn", os.path.abspath(spec.apply_patch)],
                cwd=tree, env=PATCH_ENV, check=True, capture_output=True,
            )  # fmt: skip
        if "HOME" in dict(spec.variation):
            home = scratch / "home"
            home.mkdir()
            env["HOME"] = str(home)
    except (OSError, subprocess.CalledProcessError) as e:
        return CaptureStatus.SANDBOX_ERROR, None, False, f"cannot prepare the copy: {e}"
    out_r, out_w = _pipe()
    err_r, err_w = _pipe()
    try:
        proc = subprocess.Popen(
            list(spec.command),
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            cwd=tree,
            env=env,
            umask=umask,
            start_new_session=True,
        )
    except OSError as e:
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        return CaptureStatus.FAILED, 127, True, f"command could not start: {e.strerror}"
    os.close(out_w)
    os.close(err_w)
    try:
        in_time = _pump({out_r: out, err_r: err}, deadline, proc)
    finally:
        code = proc.poll()
        _kill(proc)  # whatever the command left in its session
        code = proc.wait() if code is None else code
        os.close(out_r)
        os.close(err_r)
    if not in_time:
        return CaptureStatus.TIMEOUT, None, False, "time limit reached; process group killed"
    if patch is not None:
        with subprocess.Popen(
            list(PATCH_COMMAND), cwd=diff, env=PATCH_ENV, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True,
        ) as differ:  # fmt: skip
            assert differ.stdout is not None
            in_time = _pump({differ.stdout.fileno(): patch}, deadline, differ)
            rc = differ.wait()
        if not in_time:
            return CaptureStatus.TIMEOUT, code, False, "time limit reached during patch capture"
        if rc not in (0, 1):
            return CaptureStatus.SANDBOX_ERROR, code, False, f"patch capture failed ({rc})"
    if code != 0:
        return CaptureStatus.FAILED, code, False, None
    return CaptureStatus.OK, 0, False, None


_BOOTSTRAP: Final = (
    "import marshal, sys\nexec(marshal.loads(bytes.fromhex(sys.argv.pop(1))))\n_sandbox_init()\n"
)
"""The helper's ``-c`` program: load the precompiled `_sandbox_init`, run it."""


@functools.cache
def _init_code() -> str:
    """`_sandbox_init` compiled once per runner, marshalled, hex (the helper's argv[1]).

    The helper is this same interpreter, so the marshal format matches; loading it
    skips compiling the source in every helper (~3 ms of its start-up here).
    """
    source = inspect.getsource(_sandbox_init)
    return marshal.dumps(compile(source, "<kernel-sandbox-init>", "exec")).hex()


def _sandbox_init() -> None:
    """The namespace helper: runs in a fresh ``python -I -S`` and imports stdlib only.

    argv: ``key=value`` options, ``--``, the command. Reports on the status fd, one
    line each: ``error <what>`` | ``start-failed <why>`` | ``exit <code>`` |
    ``diff <rc>``. Never returns normally.
    """
    import ctypes
    import os
    import signal
    import sys

    split = sys.argv.index("--")
    opts = dict(arg.split("=", 1) for arg in sys.argv[1:split])
    command = sys.argv[split + 1 :]
    status_fd = int(os.environ.pop("KERNEL_SANDBOX_STATUS_FD"))
    patch_fd = int(os.environ.pop("KERNEL_SANDBOX_PATCH_FD"))
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig, pr_set_no_new_privs = 1, 38
    ms_rdonly, ms_nosuid, ms_nodev, ms_noexec = 1, 2, 4, 8
    ms_bind, ms_rec, ms_private = 4096, 16384, 1 << 18
    clone_newns, clone_newuser, clone_newpid, clone_newnet = (
        0x00020000,
        0x10000000,
        0x20000000,
        0x40000000,
    )

    def report(line: str) -> None:
        os.write(status_fd, (line + "\n").encode())

    def fail(what: str) -> None:
        err = ctypes.get_errno()
        report(f"error {what}: {os.strerror(err) if err else 'failed'}")
        os._exit(1)

    def mount(src: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
        ctypes.set_errno(0)
        if (
            libc.mount(
                src.encode(),
                target.encode(),
                None if fstype is None else fstype.encode(),
                ctypes.c_ulong(flags),
                None if data is None else data.encode(),
            )
            != 0
        ):
            fail(f"mount {fstype or 'bind'} on {target}")

    def read_only(target: str, recursive: bool) -> None:
        # struct mount_attr {attr_set, attr_clr, propagation, userns_fd}: MOUNT_ATTR_RDONLY.
        attr = (ctypes.c_uint64 * 4)(1, 0, 0, 0)
        ctypes.set_errno(0)
        flags = 0x8000 if recursive else 0  # AT_RECURSIVE
        rc = libc.syscall(442, -100, target.encode(), flags, ctypes.byref(attr), 32)
        if rc == 0:
            return
        # No mount_setattr (Linux < 5.12): remount each mount below target read-only.
        with open("/proc/self/mountinfo", "rb") as handle:
            points = [line.split()[4] for line in handle]
        names = [p.decode("unicode_escape") for p in points]
        atime = {"noatime": 1024, "nodiratime": 2048, "relatime": 1 << 21}
        for name in names:
            if name == target or (recursive and name.startswith(target + "/")):
                flags = 32 | ms_bind | ms_rdonly  # MS_REMOUNT
                for line in open("/proc/self/mountinfo"):  # noqa: SIM115
                    parts = line.split()
                    if parts[4].encode().decode("unicode_escape") == name:
                        for opt in parts[5].split(","):
                            flags |= {"nosuid": ms_nosuid, "nodev": ms_nodev}.get(opt, 0)
                            flags |= {"noexec": ms_noexec}.get(opt, 0) | atime.get(opt, 0)
                mount("none", name, None, flags, None)

    def deny_unix_sockets() -> None:
        # A network namespace cuts IP and abstract sockets, but a filesystem socket
        # (docker.sock, an agent socket) stays reachable through the read-only tree:
        # connect() needs no write permission. With network off, a seccomp filter
        # makes socket(AF_UNIX, ...) fail with EACCES; socketpair() stays allowed.
        # Other architectures' syscalls (x32, 32-bit compat) are refused outright.
        arch_nr = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}
        machine = os.uname().machine
        if machine not in arch_nr:
            return  # no filter for this architecture (documented limitation)
        arch, socket_nr = arch_nr[machine]
        ld, jeq, ret = 0x20, 0x15, 0x06
        deny, allow = 0x00050000 | 13, 0x7FFF0000  # SECCOMP_RET_ERRNO|EACCES, RET_ALLOW
        program = [
            (ld, 0, 0, 4),  # A = seccomp_data.arch
            (jeq, 1, 0, arch),  # native architecture: go on, else deny
            (ret, 0, 0, deny),
            (ld, 0, 0, 0),  # A = seccomp_data.nr
            (jeq, 3, 0, 0x40000000 | socket_nr),  # x32 socket(): deny
            (jeq, 0, 3, socket_nr),  # socket(): check the family, else allow
            (ld, 0, 0, 16),  # A = low 32 bits of args[0] (little endian)
            (jeq, 0, 1, 1),  # AF_UNIX: deny, else allow
            (ret, 0, 0, deny),
            (ret, 0, 0, allow),
        ]

        class SockFilter(ctypes.Structure):
            _fields_ = (
                ("code", ctypes.c_uint16),
                ("jt", ctypes.c_uint8),
                ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32),
            )

        class SockFprog(ctypes.Structure):
            _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(SockFilter)))

        filters = (SockFilter * len(program))(*(SockFilter(*insn) for insn in program))
        fprog = SockFprog(len(program), filters)
        pr_set_seccomp, seccomp_mode_filter = 22, 2
        if libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "cannot install the unix-socket filter")

    def spawn(argv: list[str], cwd: str, stdout: int, env: dict[str, str]) -> int:
        pid = os.fork()
        if pid == 0:
            try:
                os.chdir(cwd)
                os.dup2(stdout, 1)
                devnull = os.open("/dev/null", os.O_RDWR)
                os.dup2(devnull, 0)
                os.dup2(devnull, 2)
                os.execvpe(argv[0], argv, env)  # noqa: S606 - argv, no shell
            finally:
                os._exit(127)
        while True:
            done, status = os.waitpid(-1, 0)
            if done == pid:
                return os.waitstatus_to_exitcode(status)

    # Die with the runner (and refuse to start if it is already gone).
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != int(opts["ppid"]):
        os._exit(1)
    outer_uid, outer_gid = os.geteuid(), os.getegid()
    flags = clone_newuser | clone_newns | clone_newpid | (0 if opts["net"] == "1" else clone_newnet)
    ctypes.set_errno(0)
    if libc.unshare(flags) != 0:
        fail("unshare")
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != int(opts["ppid"]):
        os._exit(1)
    try:
        with open("/proc/self/setgroups", "w") as handle:
            handle.write("deny")
        with open("/proc/self/uid_map", "w") as handle:
            handle.write(f"{opts['uid']} {outer_uid} 1")
        with open("/proc/self/gid_map", "w") as handle:
            handle.write(f"{opts['gid']} {outer_gid} 1")
    except OSError as e:
        report(f"error uid/gid map: {e.strerror}")
        os._exit(1)
    child = os.fork()
    if child:
        # Outside the new PID namespace: wait for its PID 1, die with it.
        _, status = os.waitpid(child, 0)
        os._exit(0)

    # PID 1 of the new namespace. Die with the helper above.
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    scratch = opts["scratch"]
    root = scratch + "/root"
    work = root + opts["workdir"]
    lower = scratch + "/lower"
    mount("none", "/", None, ms_rec | ms_private, None)
    # The rest of the filesystem: a recursive bind of / made read-only in one call.
    mount("/", root, None, ms_bind | ms_rec, None)
    read_only(root, True)
    # Private, writable /tmp: the host's /tmp (read-only under root) as the lower layer
    # of an overlay whose upper layer is a tmpfs of this mount namespace only; host
    # files stay visible, every write lands in (and vanishes with) this run's layer.
    private_tmp, private_shm = root + "/tmp", root + "/dev/shm"  # noqa: S108
    layer = scratch + "/layer"
    mount("tmpfs", layer, "tmpfs", ms_nosuid | ms_nodev, "mode=0700")
    os.mkdir(layer + "/upper")
    os.chmod(layer + "/upper", 0o1777)  # noqa: S103 - /tmp of this sandbox
    os.mkdir(layer + "/work", 0o700)
    data = f"lowerdir={private_tmp},upperdir={layer}/upper,workdir={layer}/work,userxattr"
    ctypes.set_errno(0)
    if libc.mount(
        b"overlay", private_tmp.encode(), b"overlay", ms_nosuid | ms_nodev, data.encode()
    ):
        # No overlayfs here (or no userxattr): an empty private tmpfs, as before.
        mount("tmpfs", private_tmp, "tmpfs", ms_nosuid | ms_nodev, "mode=1777")
    # Empty private /dev/shm (host segments are not shared).
    if os.path.isdir(private_shm):
        mount("tmpfs", private_shm, "tmpfs", ms_nosuid | ms_nodev, "mode=1777")
    # Every kernel scratch area (other runs' trees, spills, the verifier's private
    # files) behind an empty read-only tmpfs; one that is not there is hidden already.
    hidden = root + opts["hide"]
    if os.path.isdir(hidden):
        flags = ms_rdonly | ms_nosuid | ms_nodev | ms_noexec
        mount("tmpfs", hidden, "tmpfs", flags, "mode=0555,size=4k")
    ctypes.set_errno(0)
    if libc.mount(
        b"proc", (root + "/proc").encode(), b"proc", ms_nosuid | ms_nodev | ms_noexec, None
    ):
        pass  # a fresh /proc is best effort; the read-only host one stays otherwise
    os.makedirs(work)
    # The baseline, read-only, at a path overlayfs can parse.
    mount(opts["baseline"], lower, None, ms_bind | ms_rec, None)
    read_only(lower, True)
    if opts["mode"] == "overlay":
        data = f"lowerdir={lower},upperdir={scratch}/upper,workdir={scratch}/work,userxattr"
        mount("overlay", work, "overlay", 0, data)
    else:
        mount(scratch + "/copy", work, None, ms_bind, None)
    if opts["home"]:
        os.makedirs(root + opts["home"], exist_ok=True)
        os.chown(root + opts["home"], int(opts["uid"]), int(opts["gid"]))
    os.chown(private_tmp, int(opts["uid"]), int(opts["gid"]))
    git_env = {
        "LC_ALL": "C",
        "LANG": "C",
        "TZ": "UTC",
        "HOME": "/nonexistent",
        "XDG_CONFIG_HOME": "/nonexistent",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_CEILING_DIRECTORIES": scratch,
        "PATH": "/usr/local/bin:/usr/bin:/bin",
    }
    if opts["preload"]:
        import shutil

        try:
            shutil.copytree(opts["preload"], work, symlinks=True, dirs_exist_ok=True)
        except OSError as e:
            report(f"error preload: {e}")
            os._exit(1)
    if opts["apply"]:
        argv = ["git", "apply", "--whitespace=nowarn", os.path.abspath(opts["apply"])]
        rc = spawn(argv, work, 2, git_env)
        if rc != 0:
            report(f"error apply patch: git apply exited {rc}")
            os._exit(1)

    # The command: chrooted, not namespace root (no capabilities after execve).
    error_r, error_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(error_r)
            os.chroot(root)
            os.chdir(opts["workdir"])
            os.umask(int(opts["umask"]))
            libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0)
            if opts["net"] != "1":
                deny_unix_sockets()
            os.closerange(3, error_w)
            os.closerange(error_w + 1, 1 << 16)
            os.execvpe(command[0], command, dict(os.environ))  # noqa: S606 - argv, no shell
        except OSError as e:
            os.write(error_w, (e.strerror or str(e)).encode())
        finally:
            os._exit(127)
    os.close(error_w)
    start_error = os.read(error_r, 4096)
    os.close(error_r)
    # As PID 1, reap every orphan until the command itself ends.
    while True:
        done, status = os.waitpid(-1, 0)
        if done == pid:
            break
    if start_error:
        report(f"start-failed {start_error.decode('utf-8', 'replace')}")
    else:
        report(f"exit {os.waitstatus_to_exitcode(status)}")
    # The run is over: kill whatever it left behind (never PID 1 itself).
    try:  # noqa: SIM105 - contextlib is not imported in the helper (start-up time)
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass  # nothing was left behind
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    if opts["patch"] == "1" and not start_error:
        diff = scratch + "/diff"
        mount("tmpfs", diff, "tmpfs", ms_nosuid | ms_nodev, "mode=0755")
        os.mkdir(diff + "/a")
        os.mkdir(diff + "/b")
        mount(lower, diff + "/a", None, ms_bind | ms_rec, None)
        mount(work, diff + "/b", None, ms_bind | ms_rec, None)
        read_only(diff + "/b", True)
        rc = spawn(opts["git"].split(" "), diff, patch_fd, git_env)
        report(f"diff {rc}")
    os._exit(0)
