"""The runner side of one sandboxed run: pick the level, start the helper, capture.

Rules enforced:

- the command's environment is `base_env` + the spec's names + the variation +
  ``KERNEL_RUN_INDEX``: nothing else of the runner's environment;
- when the runner is root, the command's outer uid/gid is unprivileged: the first
  id of root's subordinate range (``/etc/subuid``, ``/etc/subgid``), else
  `FALLBACK_OUTER_ID`; an id that names an existing user is refused;
- every limit is applied and recorded (`AppliedLimit`); a hit the runner or the
  helper can see is status ``limit_exceeded`` with its `LimitKind` as reason.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import resource
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from kernel.corroboration.consensus import CaptureMode, CaptureStatus, Isolation
from kernel.effects.sandbox.capture import Report, Sink, kill, pipe, pump
from kernel.effects.sandbox.hostview import view_entries, view_plan
from kernel.effects.sandbox.nslimits import memory_hit
from kernel.effects.sandbox.scratch import (
    Scratch,
    copy_tree,
    mount_points,
    private_tempdir,
    scratch_root,
)
from kernel.effects.sandbox.server import (
    COVERAGE_ENV,
    ForkedHelper,
    helper_argv,
    helper_servers,
    prepared_sandboxes,
    running_server,
)
from kernel.effects.sandbox.spec import (
    PATCH_COMMAND,
    PATCH_ENV,
    SANDBOX_GID,
    SANDBOX_UID,
    SANDBOX_WORKDIR,
    Capture,
    CommandUid,
    LimitKind,
    LimitMechanism,
    Limits,
    SandboxSpec,
    applied_limits,
    base_env,
    tmpfs_options,
)
from kernel.errors import EffectError

__all__ = [
    "COVERAGE_ENV",
    "FALLBACK_OUTER_ID",
    "available_isolation",
    "check_command_starts",
    "copy_ids",
    "helper_servers",
    "outer_ids",
    "prepared_sandboxes",
    "run_sandboxed",
    "subordinate_ids",
]

FALLBACK_OUTER_ID: Final = 2147418112
"""The command's outer uid/gid under a root runner without a subordinate range
(``2**31 - 2**16``: far above ``useradd``'s ranges, below the 32-bit ``-1``)."""


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
    path = (env if env is not None else base_env()).get("PATH", os.defpath)
    if "/" not in program:
        if shutil.which(program, path=path) is None:
            raise EffectError(f"{program}: command not found on PATH")
    elif program.startswith("/") and not (os.path.isfile(program) and os.access(program, os.X_OK)):
        raise EffectError(f"{program}: not an executable file")


def _first_subordinate(path: str, names: tuple[str, ...] = ("root", "0")) -> int | None:
    """The first id of the range of ``names`` (a user's name and uid) in
    ``/etc/subuid``-style ``path``, or None."""
    found = _subordinate_range(path, names)
    return None if found is None else found[0]


def _subordinate_range(path: str, names: tuple[str, ...]) -> tuple[int, int] | None:
    """The first id and the size of the range of ``names`` in ``path``, or None."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.strip().split(":")
        if (
            len(parts) == 3
            and parts[0] in names
            and parts[1].isdigit()
            and parts[2].isdigit()
            and int(parts[2]) > 0
        ):
            return int(parts[1]), int(parts[2])
    return None


_IDMAP_PATH: Final = "/usr/bin:/bin:/usr/sbin:/sbin"


def subordinate_ids() -> tuple[int, int, str, str] | None:
    """An unprivileged runner's first subordinate (uid, gid) and its ``newuidmap`` and
    ``newgidmap``, when ``/etc/subuid`` and ``/etc/subgid`` grant it ranges and both
    tools are installed (Debian ``uidmap``); else None. An id that names an existing
    user is not used (the command would get that user's files). Read at every run: an
    administrator's grant applies to the next one."""
    uid = os.geteuid()
    names: tuple[str, ...] = (str(uid),)
    with contextlib.suppress(KeyError):
        names = (pwd.getpwuid(uid).pw_name, str(uid))
    sub_uid = _first_subordinate("/etc/subuid", names)
    sub_gid = _first_subordinate("/etc/subgid", names)
    tools = [shutil.which(tool, path=_IDMAP_PATH) for tool in ("newuidmap", "newgidmap")]
    if sub_uid is None or sub_gid is None or None in tools:
        return None
    with contextlib.suppress(KeyError):
        pwd.getpwuid(sub_uid)
        return None
    return sub_uid, sub_gid, str(tools[0]), str(tools[1])


@functools.cache
def outer_ids() -> tuple[int, int]:
    """The command's outer (uid, gid) under a root runner.

    Raises:
        EffectError: the id belongs to an existing user (the command would get its files).
    """
    uid = _first_subordinate("/etc/subuid") or FALLBACK_OUTER_ID
    gid = _first_subordinate("/etc/subgid") or FALLBACK_OUTER_ID
    with contextlib.suppress(KeyError):
        user = pwd.getpwuid(uid)
        raise EffectError(f"outer sandbox uid {uid} is the existing user {user.pw_name}")
    return uid, gid


@functools.cache
def copy_ids() -> tuple[int, int]:
    """The command's outer (uid, gid) at the ``copy`` level under a root runner: the
    ids after `outer_ids`. A copy command shares the host's PID namespace, so it sees
    the namespaced runs' commands (prepared ones waiting for their run too); sharing
    their uid it could signal them, changing another run's evidence.

    Raises:
        EffectError: the id belongs to an existing user, or lies past root's range.
    """
    ids = []
    for path, outer in zip(("/etc/subuid", "/etc/subgid"), outer_ids(), strict=True):
        span = _subordinate_range(path, ("root", "0"))
        if span is not None and outer + 1 >= span[0] + span[1]:
            raise EffectError(f"{path}: root's range holds no id after {outer} for copy runs")
        ids.append(outer + 1)
    with contextlib.suppress(KeyError):
        user = pwd.getpwuid(ids[0])
        raise EffectError(f"copy sandbox uid {ids[0]} is the existing user {user.pw_name}")
    return ids[0], ids[1]


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
# The run


def _mechanisms(level: Isolation) -> dict[LimitKind, LimitMechanism]:
    mechanisms = {
        LimitKind.MEMORY: LimitMechanism.RLIMIT_PRIVATE,
        LimitKind.PROCESSES: LimitMechanism.RLIMIT,
        LimitKind.CPU: LimitMechanism.RLIMIT,
        LimitKind.OUTPUT: LimitMechanism.RUNNER,
    }
    if level is not Isolation.COPY:
        mechanisms[LimitKind.TMP] = LimitMechanism.TMPFS
    if level is Isolation.OVERLAY:
        mechanisms[LimitKind.WRITABLE] = LimitMechanism.TMPFS
    return mechanisms


def _output_limit(spec: SandboxSpec) -> int | None:
    limits = [x for x in (spec.limits.output_bytes, spec.max_output_bytes) if x is not None]
    return min(limits) if limits else None


_Result = tuple[CaptureStatus, int | None, bool, str | None, LimitKind | None]


def run_sandboxed(spec: SandboxSpec, *, spill_dir: Path) -> Capture:
    """Run ``spec.command`` once in a fresh sandbox of ``spec.baseline``.

    Outputs are spilled to ``spill_dir/run-<index>.{stdout,stderr,patch}``; the caller
    owns that directory. The sandbox itself is discarded before this returns.

    Returns:
        The `Capture`; failures of the command (non-zero exit, timeout, a limit hit,
        cannot start) and of the sandbox are statuses, not exceptions.

    Raises:
        EffectError: the baseline is missing or not a directory, ``spill_dir`` is not
            writable, the scratch root is not private (`UnsafeScratchError`), a
            required isolation level cannot be set up at all, or an absolute program's
            Python installation would show a shared host folder whole.
        ConfigError: the view would show what a sandbox never does (`mount_plan`: the
            host's root or ``/tmp``, a path under ``/proc`` or ``/dev``).
    """
    started = time.monotonic()
    deadline = None if spec.timeout_s is None else started + spec.timeout_s
    baseline = None if spec.baseline is None else Path(spec.baseline).resolve()
    if baseline is not None and not baseline.is_dir():
        raise EffectError(f"{spec.baseline}: baseline is not a directory")
    level = spec.isolation if spec.isolation is not None else available_isolation()
    out, err, patch = _sinks(spec, spill_dir)
    env, umask = _command_env(spec)
    try:
        # An overlay run keeps nothing on the host: its scratch is a name only.
        scratch = Scratch(folder=level is not Isolation.OVERLAY)
    except BaseException:
        for sink in (out, err, patch):
            if sink is not None:
                sink.close()
        raise
    mechanisms = _mechanisms(level)
    try:
        if level is Isolation.COPY:
            result = _run_copy(
                spec, baseline=baseline, scratch=scratch.path, env=env, umask=umask,
                out=out, err=err, patch=patch, deadline=deadline,
            )  # fmt: skip
            command_uid = _runner_uid()
        else:
            result, command_uid = _run_namespaced(
                spec, level=level, baseline=baseline, scratch=scratch.path, env=env,
                umask=umask, out=out, err=err, patch=patch, deadline=deadline,
                mechanisms=mechanisms,
            )  # fmt: skip
    finally:
        for sink in (out, err, patch):
            if sink is not None:
                sink.close()
        scratch.close()
    return _capture(
        spec, result, level=level, sinks=(out, err, patch), mechanisms=mechanisms,
        duration_ms=int((time.monotonic() - started) * 1000), command_uid=command_uid,
    )  # fmt: skip


def _sinks(spec: SandboxSpec, spill_dir: Path) -> tuple[Sink, Sink, Sink | None]:
    """The run's stdout, stderr and (patch capture) patch sinks in ``spill_dir``."""
    prefix = spill_dir / f"run-{spec.run_index}"
    output_limit = _output_limit(spec)
    try:
        out = Sink(prefix.with_suffix(".stdout"), output_limit)
        err = Sink(prefix.with_suffix(".stderr"), spec.limits.output_bytes)
        patch = (
            Sink(prefix.with_suffix(".patch"), output_limit)
            if spec.capture is CaptureMode.PATCH
            else None
        )
    except OSError as e:
        raise EffectError(f"{spill_dir}: cannot spill outputs: {e.strerror}") from e
    return out, err, patch


def _command_env(spec: SandboxSpec) -> tuple[dict[str, str], int]:
    """The command's environment and umask: `base_env`, the spec's names, the
    variation (``umask`` is the umask, not a variable) and ``KERNEL_RUN_INDEX``."""
    env = base_env()
    env.update(spec.env or ())
    umask = 0o022
    for name, value in spec.variation:
        if name == "umask":
            umask = int(value, 8)
        else:
            env[name] = value
    env["KERNEL_RUN_INDEX"] = str(spec.run_index)
    return env, umask


def _capture(
    spec: SandboxSpec,
    result: _Result,
    *,
    level: Isolation,
    sinks: tuple[Sink, Sink, Sink | None],
    mechanisms: dict[LimitKind, LimitMechanism],
    duration_ms: int,
    command_uid: CommandUid,
) -> Capture:
    """The `Capture` of a finished run: its status (an overflowing stream is an output
    limit hit), digests, sizes, spill paths and limits."""
    out, err, patch = sinks
    status, exit_code, start_failed, error, hit = result
    output = patch if patch is not None else out
    # Also stdout's overflow when the output is the patch: a flood is a limit hit.
    full = next((s for s in (output, out, err) if s is not None and s.overflow), None)
    if status is not CaptureStatus.TIMEOUT and full is not None:
        status, hit = CaptureStatus.LIMIT_EXCEEDED, LimitKind.OUTPUT
        error = f"output larger than {full.limit} bytes"
    captured = status in (CaptureStatus.OK, CaptureStatus.FAILED)
    return Capture(
        run_index=spec.run_index,
        status=status,
        exit_code=exit_code,
        start_failed=start_failed,
        duration_ms=duration_ms,
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
        limits=applied_limits(spec.limits, mechanisms),
        limit_hit=hit,
        command_uid=command_uid,
    )


def _runner_uid() -> CommandUid:
    """Who the command is on the host without subordinate ids: a root runner's command
    an unprivileged outer uid, an unprivileged runner's the runner itself."""
    return CommandUid.OUTER_UNPRIVILEGED if os.geteuid() == 0 else CommandUid.SAME_UID_AS_RUNNER


def _opt(value: int | None) -> str:
    return "" if value is None else str(value)


def _run_namespaced(
    spec: SandboxSpec,
    *,
    level: Isolation,
    baseline: Path | None,
    scratch: Path,
    env: dict[str, str],
    umask: int,
    out: Sink,
    err: Sink,
    patch: Sink | None,
    deadline: float | None,
    mechanisms: dict[LimitKind, LimitMechanism],
) -> tuple[_Result, CommandUid]:
    privileged = os.geteuid() == 0
    outer = outer_ids() if privileged else (os.geteuid(), os.getegid())
    options = _helper_options(spec, level=level, scratch=scratch, baseline=baseline, outer=outer)
    if options["sub_uid"]:
        # The command may be a subordinate id: the copy is made in the namespace, on a
        # tmpfs of the run with the writable limit (a host folder of that id's files
        # would outlive a killed run, unremovable by the runner).
        mechanisms[LimitKind.WRITABLE] = LimitMechanism.TMPFS
    elif level is Isolation.NAMESPACE_COPY:
        copy_tree(baseline, scratch / "copy")
        if privileged:
            _chown_tree(scratch / "copy", *outer)
    home = env.get("HOME", "") if any(k == "HOME" for k, _ in spec.variation) else ""
    options.update(umask=str(umask), home=home, patch="1" if patch is not None else "0")

    def helper_args(parent: int) -> list[str]:
        items = {**options, "ppid": str(parent)}
        return [*(f"{key}={value}" for key, value in items.items()), "--", *spec.command]

    status_r, status_w = pipe()
    patch_r, patch_w = pipe()
    out_r, out_w = pipe()
    err_r, err_w = pipe()
    status_lines = Report()
    helper_env = {
        **env,
        "KERNEL_SANDBOX_STATUS_FD": str(status_w),
        "KERNEL_SANDBOX_PATCH_FD": str(patch_w),
    }
    proc: subprocess.Popen[bytes] | ForkedHelper | None = None
    server = running_server()
    if server is not None:
        proc = server.start(helper_args(server.pid), env, (out_w, err_w, status_w, patch_w))
    try:
        if proc is None:  # no helper server here: start a helper directly
            proc = subprocess.Popen(
                [*helper_argv(), *helper_args(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                pass_fds=(status_w, patch_w),
                env=helper_env,
                start_new_session=True,
            )
    except OSError as e:
        for fd in (status_r, status_w, patch_r, patch_w, out_r, out_w, err_r, err_w):
            os.close(fd)
        raise EffectError(f"cannot start the sandbox helper: {e.strerror}") from e
    for fd in (status_w, patch_w, out_w, err_w):
        os.close(fd)
    streams: dict[int, Sink | list[bytes]] = {out_r: out, err_r: err, status_r: status_lines}
    streams[patch_r] = patch if patch is not None else []
    try:
        in_time = _collect(streams, deadline, proc, status_lines)
    finally:
        for fd in (status_r, patch_r, out_r, err_r):
            os.close(fd)
    report = b"".join(status_lines).decode("utf-8", "replace")
    if "\nmemory-mechanism cgroup_v1\n" in "\n" + report:
        mechanisms[LimitKind.MEMORY] = LimitMechanism.CGROUP_V1
    # The helper says so once the subordinate maps are written (else it fell back).
    uid = _runner_uid()
    if "\ncommand-uid subordinate\n" in "\n" + report:
        uid = CommandUid.SUBORDINATE
    return _interpret(report, in_time, patch), uid


def _collect(
    streams: dict[int, Sink | list[bytes]],
    deadline: float | None,
    proc: subprocess.Popen[bytes] | ForkedHelper,
    report: Report,
) -> bool:
    """Read the run's streams (`pump`) until its helper's ``done``; False when the
    deadline passed. After ``done`` the helper tears the sandbox down: the server's
    next request (or its close) waits for that, not this run's reply."""
    in_time = False
    try:
        in_time = pump(streams, deadline, proc)
    finally:
        if not (in_time and report.done()):
            kill(proc)
        if isinstance(proc, ForkedHelper):
            proc.release()
        else:
            proc.wait()
    return in_time


def _helper_options(
    spec: SandboxSpec,
    *,
    level: Isolation,
    scratch: Path,
    baseline: Path | None,
    outer: tuple[int, int],
) -> dict[str, str]:
    """The helper's ``key=value`` options of one run (its view's mount plan included)."""
    entries, copies = view_entries(spec)
    hidden = os.path.realpath(scratch_root())
    plan = view_plan(tuple(entries), spec.limits.tmp_bytes, hidden, copies)
    limits = spec.limits
    # An unprivileged runner's subordinate ids (ADR-0005 §1).
    sub = None if os.geteuid() == 0 else subordinate_ids()
    points, points_folder = mount_points(scratch.parent)
    return {
        "sub_uid": "" if sub is None else str(sub[0]),
        "sub_gid": "" if sub is None else str(sub[1]),
        "newuidmap": "" if sub is None else sub[2],
        "newgidmap": "" if sub is None else sub[3],
        "mode": "overlay" if level is Isolation.OVERLAY else "bind",
        "scratch": str(scratch),
        "baseline": "" if baseline is None else str(baseline),
        "points": points,
        "points_folder": points_folder,
        "workdir": SANDBOX_WORKDIR,
        "net": "1" if spec.network else "0",
        "preload": spec.preload or "",
        "apply": os.path.abspath(spec.apply_patch) if spec.apply_patch else "",
        "ppid": str(os.getpid()),
        "runner": str(os.getpid()),
        "uid": str(SANDBOX_UID),
        "gid": str(SANDBOX_GID),
        "outer_uid": str(outer[0]),
        "outer_gid": str(outer[1]),
        "git": " ".join(PATCH_COMMAND),
        "mem": _opt(limits.memory_bytes),
        "nproc": _opt(limits.processes),
        "cpu": _opt(limits.cpu_seconds),
        "writable": _opt(limits.writable_bytes),
        "output": _opt(_output_limit(spec)),
        "tmp": _opt(limits.tmp_bytes),
        "layer": tmpfs_options("0700", limits.writable_bytes),
        "plan": plan,
    }


def _chown_tree(top: Path, uid: int, gid: int) -> None:
    """Hand a private copy to the command's outer uid (never following symlinks)."""
    os.lchown(top, uid, gid)
    for folder, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            os.lchown(os.path.join(folder, name), uid, gid)


def _interpret(report: str, in_time: bool, patch: Sink | None) -> _Result:
    """Turn the helper's status lines into (status, exit code, start failed, error, hit)."""
    fields = dict(line.split(" ", 1) for line in report.splitlines() if " " in line)
    if not in_time:
        return CaptureStatus.TIMEOUT, None, False, "time limit reached; process tree killed", None
    if "error" in fields:
        return CaptureStatus.SANDBOX_ERROR, None, False, fields["error"], None
    if "start-failed" in fields:
        why = f"command could not start: {fields['start-failed']}"
        return CaptureStatus.FAILED, 127, True, why, None
    code = int(fields["exit"]) if "exit" in fields else None
    if fields.get("limit") in set(LimitKind):
        # Also without an exit status: a memory cgroup's OOM kill may take PID 1.
        hit = LimitKind(fields["limit"])
        return CaptureStatus.LIMIT_EXCEEDED, code, False, f"{hit} limit reached", hit
    if code is None:
        return CaptureStatus.SANDBOX_ERROR, None, False, "sandbox ended without a status", None
    if patch is not None:
        diff_rc = fields.get("diff")
        if diff_rc not in ("0", "1"):
            why = f"patch capture failed ({diff_rc})"
            return CaptureStatus.SANDBOX_ERROR, code, False, why, None
    if code != 0:
        return CaptureStatus.FAILED, code, False, None, None
    return CaptureStatus.OK, 0, False, None, None


def _rlimits(limits: Limits) -> None:
    """``preexec_fn`` of a copy run: the same rlimits as the helper sets."""
    if limits.memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_DATA, (limits.memory_bytes, limits.memory_bytes))
    if limits.processes is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    if limits.cpu_seconds is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _run_copy(
    spec: SandboxSpec,
    *,
    baseline: Path | None,
    scratch: Path,
    env: dict[str, str],
    umask: int,
    out: Sink,
    err: Sink,
    patch: Sink | None,
    deadline: float | None,
) -> _Result:
    diff = scratch / "diff"
    # A root runner never runs the command as root: it gets the unprivileged outer ids.
    privileged = os.geteuid() == 0
    ids = copy_ids() if privileged else (os.geteuid(), os.getegid())
    try:
        tree = _prepare_copy(spec, baseline, diff, env, ids if privileged else None)
    except (OSError, subprocess.CalledProcessError) as e:
        return CaptureStatus.SANDBOX_ERROR, None, False, f"cannot prepare the copy: {e}", None
    out_r, out_w = pipe()
    err_r, err_w = pipe()
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
            user=ids[0] if privileged else None,
            group=ids[1] if privileged else None,
            extra_groups=[] if privileged else None,
            preexec_fn=functools.partial(_rlimits, spec.limits),  # noqa: PLW1509 - rlimits only
        )
    except OSError as e:
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        return CaptureStatus.FAILED, 127, True, f"command could not start: {e.strerror}", None
    # The child was forked from this process: its peak RSS starts from ours.
    inherited_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    os.close(out_w)
    os.close(err_w)
    try:
        in_time = pump({out_r: out, err_r: err}, deadline, proc)
    finally:
        # Whatever the command left in its session; the command itself is reaped here
        # (for its rusage) unless the pump's kill reaped it already.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        peak_kib = 0
        if proc.returncode is None:
            _pid, status, rusage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            peak_kib = rusage.ru_maxrss
        code = proc.returncode
        os.close(out_r)
        os.close(err_r)
    if not in_time:
        return CaptureStatus.TIMEOUT, None, False, "time limit reached; process group killed", None
    if patch is not None:
        failed = _copy_patch(diff, patch, deadline, code)
        if failed is not None:
            return failed
    # A copy run's orphans leave the session unseen: only memory has evidence here.
    if memory_hit(_opt(spec.limits.memory_bytes), code, peak_kib << 10, inherited_kib << 10):
        hit = LimitKind.MEMORY
        return CaptureStatus.LIMIT_EXCEEDED, code, False, f"{hit} limit reached", hit
    if code != 0:
        return CaptureStatus.FAILED, code, False, None, None
    return CaptureStatus.OK, 0, False, None, None


def _prepare_copy(
    spec: SandboxSpec,
    baseline: Path | None,
    diff: Path,
    env: dict[str, str],
    ids: tuple[int, int] | None,
) -> Path:
    """The copy run's tree ``diff/b`` (and ``diff/a``, the baseline's links, for the
    patch): copied, preloaded, patched, with a ``HOME`` of its own when the variation
    names one, and handed to ``ids`` (a root runner's outer ids). Returns the tree.

    Raises:
        OSError, subprocess.CalledProcessError: the copy cannot be made.
    """
    diff.mkdir()
    tree = diff / "b"
    copy_tree(baseline, tree)
    if spec.capture is CaptureMode.PATCH:
        copy_tree(baseline, diff / "a", link=True)
    if spec.preload:
        shutil.copytree(spec.preload, tree, symlinks=True, dirs_exist_ok=True)
    if spec.apply_patch:
        subprocess.run(
            ["git", "apply", "--whitespace=nowarn", os.path.abspath(spec.apply_patch)],
            cwd=tree, env=PATCH_ENV, check=True, capture_output=True,
        )  # fmt: skip
    home = diff.parent / "home"
    if "HOME" in dict(spec.variation):
        home.mkdir()
        env["HOME"] = str(home)
    if ids is not None:
        _chown_tree(tree, *ids)
        if "HOME" in dict(spec.variation):
            os.lchown(home, *ids)
    return tree


def _copy_patch(diff: Path, patch: Sink, deadline: float | None, code: int) -> _Result | None:
    """Capture a copy run's patch (``git diff`` of ``diff/a`` and ``diff/b``) into
    ``patch``; the run's result when that failed, else None."""
    with subprocess.Popen(
        list(PATCH_COMMAND), cwd=diff, env=PATCH_ENV, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True,
    ) as differ:  # fmt: skip
        if differ.stdout is None:  # pragma: no cover - stdout=PIPE always gives one
            raise EffectError("patch capture: no pipe")
        in_time = pump({differ.stdout.fileno(): patch}, deadline, differ)
        rc = differ.wait()
    if not in_time:
        return CaptureStatus.TIMEOUT, code, False, "time limit reached during patch capture", None
    if rc not in (0, 1):
        return CaptureStatus.SANDBOX_ERROR, code, False, f"patch capture failed ({rc})", None
    return None
