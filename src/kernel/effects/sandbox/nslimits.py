"""The limits and confinement of one sandboxed run, for the in-namespace helper.

Stdlib only, like `nshelper` (which imports it by name: the helper runs this folder's
modules as top-level modules under ``python -I -S``): the command's confinement (a fresh
session keyring and the seccomp filter, `seccomp_program`), its resource limits, the
run's cgroup v1 memory group, and the evidence of a limit hit (`report_limits`,
`oversized`; `memory_hit` is also the runner's rule at the ``copy`` level).
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable
from typing import Final

__all__ = [
    "CGROUP_MEMORY",
    "MEMORY_EVIDENCE",
    "cgroup_done",
    "confine",
    "join_cgroup",
    "memory_cgroup",
    "memory_hit",
    "oom_control",
    "oversized",
    "processes_of",
    "remove_cgroup",
    "report_limits",
    "seccomp_program",
    "set_limits",
    "slice_ns",
]

MEMORY_EVIDENCE: Final = 0.9
"""A failed run whose largest process held this share of the memory limit resident
(peak RSS, the kernel's own accounting) is recorded as a memory hit."""

_PR_SET_SECCOMP: Final = 22
_libc = ctypes.CDLL(None, use_errno=True)

_SYSCALLS: Final = {
    # socket, socketpair, io_uring_setup/enter/register, add_key, request_key, keyctl
    "x86_64": (0xC000003E, 41, 53, (425, 426, 427, 248, 249, 250)),
    "aarch64": (0xC00000B7, 198, 199, (425, 426, 427, 217, 218, 219)),
}
_X32: Final = 0x40000000
_KEYCTL_JOIN_SESSION_KEYRING: Final = 1


def seccomp_program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The classic-BPF filter of a command, or None (no filter for this architecture).

    Always refused (EPERM), as Docker's default profile does: io_uring (its socket
    operation bypasses a filter on ``socket``), the keyring calls (``add_key``,
    ``request_key``, ``keyctl``), other architectures' calls (32-bit compat) and x32
    calls. Also refused (EACCES), with or without network: ``socket(AF_UNIX)`` and a
    datagram ``socketpair`` (whose ``connect``/``sendto`` can name any socket path; with
    network the host's abstract socket names are in the shared network namespace, so
    ``network`` asks for IP, never the host's unix sockets); a stream or seqpacket pair
    stays (asyncio, multiprocessing), it cannot be redirected.
    """
    if machine not in _SYSCALLS:
        return None
    arch, socket_nr, pair_nr, denied = _SYSCALLS[machine]
    ld, jeq, jge, and_, ret = 0x20, 0x15, 0x35, 0x54, 0x06
    program: list[tuple[int, int, int, int]] = [
        (ld, 0, 0, 4),  # A = seccomp_data.arch
        (jeq, 1, 0, arch),  # native architecture: go on, else deny
        (ret, 0, 0, 0x00050000 | 1),  # SECCOMP_RET_ERRNO | EPERM
        (ld, 0, 0, 0),  # A = seccomp_data.nr
        (jge, 0, 1, _X32),
        (ret, 0, 0, 0x00050000 | 1),
    ]
    for nr in denied:
        program += [(jeq, 0, 1, nr), (ret, 0, 0, 0x00050000 | 1)]
    program += [
        (jeq, 0, 2, socket_nr),  # socket(): check the family
        (ld, 0, 0, 16),  # A = low 32 bits of args[0] (little endian)
        (jeq, 4, 5, 1),  # AF_UNIX: deny, else allow
        (jeq, 0, 4, pair_nr),  # socketpair(): check the type
        (ld, 0, 0, 24),  # A = low 32 bits of args[1]
        (and_, 0, 0, 0xF),  # without SOCK_NONBLOCK / SOCK_CLOEXEC
        (jeq, 0, 1, 2),  # SOCK_DGRAM: deny, else allow
        (ret, 0, 0, 0x00050000 | 13),  # SECCOMP_RET_ERRNO | EACCES
    ]
    program.append((ret, 0, 0, 0x7FFF0000))  # SECCOMP_RET_ALLOW
    return program


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter)))


def confine() -> None:
    """A fresh session keyring (runc's), then the seccomp filter (`seccomp_program`)."""
    machine = os.uname().machine
    if machine in _SYSCALLS:
        # The runner's session keyring is inherited across fork and user namespaces:
        # join a new anonymous one, so nothing of the runner's keys is possessed.
        ctypes.set_errno(0)
        keyctl = _SYSCALLS[machine][3][-1]
        if _libc.syscall(keyctl, _KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
            raise OSError(ctypes.get_errno(), "cannot join a fresh session keyring")
    program = seccomp_program(machine)
    if program is None:
        return  # no filter for this architecture (documented limitation)
    filters = (_SockFilter * len(program))(*(_SockFilter(*insn) for insn in program))
    fprog = _SockFprog(len(program), filters)
    if _libc.prctl(_PR_SET_SECCOMP, 2, ctypes.byref(fprog), 0, 0) != 0:  # MODE_FILTER
        raise OSError(ctypes.get_errno(), "cannot install the seccomp filter")


SHORT_SLICE: Final = 100_000
"""The time slice (ns) of a run's own processes: PID 1 once prepared, the command's
process until its ``execve``. A task woken with a short slice takes a core from one
running a longer one (EEVDF, Linux >= 6.12): a run's few short steps no longer wait
behind the next sandbox's preparation, which runs beside it on a 2-core machine."""
LONG_SLICE: Final = 20_000_000
"""The time slice (ns) of a sandbox's preparation (its helper until taken, ns until it
forks PID 1, PID 1 until it forks the command's process); the teardown runs with the
kernel's default (the next run's first steps wait for the teardown of the one before
last)."""
_SYS_SCHED_SETATTR: Final = {"x86_64": 314, "aarch64": 274}.get(os.uname().machine)
_SCHED_FLAG_KEEP_POLICY: Final = 0x08


class _SchedAttr(ctypes.Structure):
    """``struct sched_attr``, its first version (48 bytes)."""

    _fields_ = (
        ("size", ctypes.c_uint32),
        ("policy", ctypes.c_uint32),
        ("flags", ctypes.c_uint64),
        ("nice", ctypes.c_int32),
        ("priority", ctypes.c_uint32),
        ("runtime", ctypes.c_uint64),  # a fair task's slice
        ("deadline", ctypes.c_uint64),
        ("period", ctypes.c_uint64),
    )


def slice_ns(nanoseconds: int) -> None:
    """Ask for time slices of ``nanoseconds`` for this thread (0: the kernel's
    default), keeping its policy and nice value; best effort (an older kernel ignores
    it, a real-time policy refuses it)."""
    if _SYS_SCHED_SETATTR is None:
        return
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    attr = _SchedAttr(48, 0, _SCHED_FLAG_KEEP_POLICY, nice, 0, nanoseconds, 0, 0)
    _libc.syscall(_SYS_SCHED_SETATTR, 0, ctypes.byref(attr), 0)


def set_limits(opts: dict[str, str]) -> None:
    import resource

    for key, which, extra in (
        # Private writable memory: what a process can really use. Address-space
        # reservations (a JVM heap, V8's cage, Go's arenas) are not counted, so such
        # runtimes still start, as they would not under RLIMIT_AS.
        ("mem", resource.RLIMIT_DATA, 0),
        ("nproc", resource.RLIMIT_NPROC, 0),
        # SIGXCPU at the soft limit, SIGKILL one second later.
        ("cpu", resource.RLIMIT_CPU, 1),
    ):
        if opts[key]:
            value = int(opts[key])
            resource.setrlimit(which, (value, value + extra))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core files in the tree


def join_cgroup(
    report: Callable[[str], None], cgroup: str, limit: str, fds: tuple[int, int]
) -> None:
    """Move PID 1 into the run's memory group (its command forks after this), then
    let it go on (``fds``: the pipes of PID 1's pid and of its go-ahead); the
    mechanism is reported only once the move is done."""
    init_r, joined_w = fds
    pid = os.read(init_r, 64)
    for _attempt in range(3 if cgroup and pid else 0):
        try:
            with open(f"{cgroup}/cgroup.procs", "w") as handle:
                handle.write(pid.decode())
            report("memory-mechanism cgroup_v1")
            break
        except FileNotFoundError:
            try:  # removed meanwhile by a sweep that took it for a leftover: again
                _make_group(cgroup, limit)
            except OSError:
                break
        except OSError:
            break  # not moved: the record keeps rlimit_private
    try:  # noqa: SIM105 - contextlib is not imported in the helper (start-up time)
        os.write(joined_w, b"1")
    except OSError:
        pass  # PID 1 is gone already
    os.close(init_r)
    os.close(joined_w)


CGROUP_MEMORY: Final = "/sys/fs/cgroup/memory/kernel-sandbox"
"""Parent of the runs' cgroup v1 memory groups (one per sandbox, ``sbx-<runner>-h<helper>``)."""


def memory_cgroup(name: str, limit: str) -> str:
    """A new cgroup v1 memory group ``name`` limited to ``limit`` bytes (PID 1 joins
    it: `join_cgroup`), so shared memory, memfd and tmpfs pages count too; "" where
    the controller is unusable (the rlimit then holds private memory only).

    Each helper removes its group when its run is over; groups of killed runners
    (their runner pid, the name's second field, is gone) are removed here. A live
    runner's group is never touched: it may be made and not yet joined."""
    path = f"{CGROUP_MEMORY}/{name}"
    try:
        os.makedirs(CGROUP_MEMORY, exist_ok=True)
        for other in os.listdir(CGROUP_MEMORY):
            if _runner_gone(other):
                _rmdir(f"{CGROUP_MEMORY}/{other}")
        _make_group(path, limit)
    except OSError:
        _rmdir(path)
        return ""
    return path


def _make_group(path: str, limit: str) -> None:
    os.mkdir(path)
    for control in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
        if control == "memory.limit_in_bytes" or os.path.exists(f"{path}/{control}"):
            with open(f"{path}/{control}", "w") as handle:
                handle.write(limit)


def _runner_gone(name: str) -> bool:
    """True when the runner pid in ``sbx-<pid>-<random>`` names no live process."""
    parts = name.split("-")
    if len(parts) < 3 or parts[0] != "sbx" or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, another user's
    return False


def _rmdir(path: str) -> None:
    try:  # noqa: SIM105 - contextlib is not imported in the helper (start-up time)
        os.rmdir(path)
    except OSError:
        pass  # busy (a run's group) or gone


def oom_control(cgroup: str) -> int:
    """The run's memory group's ``memory.oom_control``, opened (-1: no group, or gone).
    PID 1 opens it before its run and reads it after (`cgroup_done`): the open's path
    walk and the file objects were ~0.1 ms of the run's end."""
    if not cgroup:
        return -1
    try:
        return os.open(f"{cgroup}/memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1


def cgroup_done(report: Callable[[str], None], cgroup: str, control: int = -1) -> None:
    """Report an OOM kill in the run's memory group as a memory hit (read outside too,
    when the kill took PID 1). ``control``: its `oom_control`, opened already (a
    seq file: each read from offset 0 is made afresh), else it is opened here."""
    if not cgroup:
        return
    fd = control if control >= 0 else oom_control(cgroup)
    try:
        data = os.pread(fd, 4096, 0)
    except OSError:
        return  # no evidence either way
    finally:
        if fd >= 0 and control < 0:
            os.close(fd)
    fields = dict(line.split() for line in data.splitlines() if len(line.split()) == 2)
    if int(fields.get(b"oom_kill", b"0")) > 0:
        report("limit memory")


def remove_cgroup(cgroup: str) -> None:
    """Remove the run's memory group once its processes are gone (the PID namespace
    ended; this helper never joined it, PID 1 did, so no second migration is needed)."""
    if cgroup:
        _rmdir(cgroup)


def memory_hit(limit: str, code: int, peak_bytes: int, inherited_bytes: int) -> bool:
    """Whether a run shows it hit its memory limit: it failed (``code``: its exit code,
    negative for a signal), and one of its processes held at least `MEMORY_EVIDENCE`
    of the limit resident. A forked child reports the peak of the memory it was forked
    with (up to ``inherited_bytes``, its parent's peak then): a peak not above that is
    no evidence. An allocation refused before it was touched leaves no trace either
    (not recorded: no evidence)."""
    if not limit or code == 0 or peak_bytes <= inherited_bytes:
        return False
    return peak_bytes >= MEMORY_EVIDENCE * int(limit)


def report_limits(
    report: Callable[[str], None],
    opts: dict[str, str],
    *,
    status: int,
    rusage: object,
    evidence: tuple[int, int, int],
    layers: tuple[str, str],
) -> None:
    """Report the limit the run hit, when the helper has evidence of it.

    ``evidence``: the largest peak RSS (bytes) of the run's processes, PID 1's own
    peak when it forked the command, and the run's tasks counted when the command
    ended (zombie included). ``layers``: the writable
    layer's and /tmp's upper layers."""
    peak_bytes, inherited_bytes, held = evidence
    if opts["cpu"] and os.WIFSIGNALED(status):
        # SIGXCPU comes from RLIMIT_CPU's soft limit; SIGKILL from its hard limit
        # (then the CPU time used tells it from another kill).
        used = rusage.ru_utime + rusage.ru_stime  # type: ignore[attr-defined]
        signum = os.WTERMSIG(status)
        if signum == signal.SIGXCPU or (signum == signal.SIGKILL and used >= int(opts["cpu"])):
            report("limit cpu")
            return
    if opts["nproc"] and held >= int(opts["nproc"]):
        report("limit processes")  # at the limit: every further fork failed with EAGAIN
        return
    if memory_hit(opts["mem"], os.waitstatus_to_exitcode(status), peak_bytes, inherited_bytes):
        report("limit memory")
        return
    for kind, folder in zip(("writable", "tmp"), layers, strict=True):
        if opts[kind] and os.path.ismount(folder):
            info = os.statvfs(folder)
            if info.f_bavail == 0 or info.f_favail == 0:  # full, in bytes or in files
                report(f"limit {kind}")
                return


def processes_of(proc: str, uid: int) -> int:
    """Tasks (threads included, zombies too) of ``uid`` in this PID namespace: what
    ``RLIMIT_NPROC`` counts for the command."""
    count = 0
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            status = _read(f"{proc}/{name}/status")
            uids = _status_field(status, b"Uid")
            if uids is not None and int(uids.split()[0]) == uid:
                threads = _status_field(status, b"Threads")
                count += 1 if threads is None else int(threads)
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return count


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(fd, 1 << 14)]
        while chunks[-1]:
            chunks.append(os.read(fd, 1 << 14))
    finally:
        os.close(fd)
    return b"".join(chunks)


def _status_field(status: bytes, name: bytes) -> bytes | None:
    """The value of line ``name`` of a ``/proc/<pid>/status``, or None. Only the first
    line (``Name``) holds text of the process's choosing, its newlines escaped: a line
    found after a newline is the kernel's. Parsing the whole file into a dict touched
    ~40 pages of a forked PID 1 at the run's end."""
    start = status.find(b"\n" + name + b":")
    if start < 0:
        return None
    end = status.find(b"\n", start + 1)
    return status[start + len(name) + 2 : end if end >= 0 else len(status)]


def oversized(
    report: Callable[[str], None], opts: dict[str, str], work: str, layers: tuple[str, str]
) -> bool:
    """Report a changed file too large to capture, before the diff reads it: larger
    than the writable layer (a sparse file: the layer holds its size, not its bytes)
    or than the output limit. A diff of a 100 GB sparse file would run for hours.
    ``layers``: the overlay's upper tmpfs and its lower (the baseline). A file no larger
    than the baseline's own file at its path is not counted: its diff reads no more
    than the baseline does (a subordinate id's tree holds every baseline file of the
    runner, copied up by the hand-over, not written by the run)."""
    layer, lower = layers
    limits = [(int(opts[kind]), kind) for kind in ("writable", "output") if opts[kind]]
    if opts["mode"] == "overlay" or opts["sub_uid"]:
        # Only what the run changed, or (a copy on a tmpfs of the run) the whole tree.
        work = layer + "/upper"
    else:
        limits = [(size, kind) for size, kind in limits if kind == "output"]
    if not limits:
        return False
    folders = [work]
    while folders:
        for entry in os.scandir(folders.pop()):
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                size = entry.stat(follow_symlinks=False).st_size
                over = [kind for limit, kind in limits if size > limit]
                if over and not _in_baseline(lower + entry.path[len(work) :], size):
                    report(f"limit {over[0]}")
                    return True
    return False


def _in_baseline(path: str, size: int) -> bool:
    """True when the baseline holds a regular file at ``path`` of at least ``size``."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return info.st_size >= size and (info.st_mode & 0o170000) == 0o100000
