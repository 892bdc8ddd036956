"""The in-namespace helper: builds one sandbox and runs the command in it.

Started by the runner as ``python -I -S -c <bootstrap>`` with this folder appended
to ``sys.path`` (stdlib only, nothing of the runner's site; the bootstrap imports this
module, so its byte code is cached like any module's): once per runner as a helper
server (`serve`) that forks one helper per run, or per run (`main`) where no server
runs. argv: ``key=value`` options,
``--``, the command. Reports on the status fd, one line each: ``error <what>`` |
``start-failed <why>`` | ``exit <code>`` | ``limit <kind>`` | ``diff <rc>``.

Processes, outermost first:

``helper`` (the runner's uid, host namespaces)
    Dies with the runner (``PR_SET_PDEATHSIG``). When the runner is root it builds an
    *idmapped*, read-only clone of the baseline mount (``open_tree`` +
    ``mount_setattr(MOUNT_ATTR_IDMAP)``) whose owner appears as the command's outer
    uid, then forks ``ns`` and writes its uid/gid maps from outside (root may map
    any id of a child from the parent namespace).
``ns`` (new user, mount, PID, UTS, IPC and, unless asked, network namespaces)
    Maps: runner root -> ``0 0 1`` (the helper's setup keeps root's rights over the
    host files it reads) and ``<uid> <outer> 1`` (the command: an unprivileged outer
    uid); an unprivileged runner with subordinate ids -> ``0 <runner> 1``
    and ``<uid> <first subordinate> 1``, written by ``newgidmap``/``newuidmap``
    (`_subordinate_maps`; the tree is handed to the command: `nsview.hand_over`,
    at namespace_copy a copy on a tmpfs of the run: `nsview.copy_in_namespace`); otherwise
    ``<uid> <runner> 1`` as an unprivileged user namespace does.
``init`` (PID 1 of the new PID namespace)
    Builds the new root by carrying out the runner's mount plan (option ``plan``:
    `spec.mount_plan`, steps joined by RS, fields by US), mounts the baseline, runs
    the command, reaps orphans, captures the patch. Undumpable once the command's
    process is forked, its ``SIGINT`` the default: out of the command's reach.
``command``
    chrooted, uid/gid `uid` with no supplementary group, ``no_new_privs``, resource
    limits set, a fresh session keyring, the seccomp filter (`nslimits.seccomp_program`);
    never namespace root, so no capabilities after ``execve``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, NoReturn

if TYPE_CHECKING:  # type-checked as the package's module
    from kernel.effects.sandbox import nslimits, nsview
elif __package__:  # listed in the runner's process (module walks): no helper code runs there
    nslimits = nsview = None
else:  # the helper runs this folder's modules as top-level modules (`python -I -S`)
    import nslimits
    import nsview

__all__ = ["WARM_KEY", "exit_now", "helper", "main", "parse", "quiet", "warm_key"]

EXIT_HOOKS: list[Callable[[], None]] = []
"""Run before each helper process ends (the test suite saves coverage data here)."""

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS = 1, 4, 38
_SYS_MOVE_MOUNT = 429
_AT_FDCWD, _AT_EMPTY_PATH = -100, 0x1000
_MOVE_MOUNT_F_EMPTY_PATH = 4

_libc = ctypes.CDLL(None, use_errno=True)


def exit_now(code: int) -> NoReturn:
    """End this helper process (after `EXIT_HOOKS`), never unwinding into its caller."""
    for hook in EXIT_HOOKS:
        hook()
    os._exit(code)


_exit = exit_now


class _Report:
    """Status lines to ``fd``; kept until `attach` while there is none (a prepared
    sandbox's helper has no run, and no status fd, yet)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        if self.fd < 0:
            self.lines.append(line)
        else:
            os.write(self.fd, (line + "\n").encode())

    def attach(self, fd: int) -> None:
        """Write to ``fd`` from now on, the lines kept so far first."""
        self.fd = fd
        for line in self.lines:
            self(line)
        self.lines.clear()

    def fail(self, what: str) -> NoReturn:
        err = ctypes.get_errno()
        self(f"error {what}: {os.strerror(err) if err else 'failed'}")
        _exit(1)


def _drop(uid: int, gid: int, groups: bool) -> None:
    """Become the command's uid/gid (caps go with uid 0 -> non-zero)."""
    if groups:
        os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def _spawn(
    argv: list[str],
    cwd: str,
    *,
    stdin: int,
    stdout: int,
    env: dict[str, str],
    user: tuple[int, int, bool] | None,
    chroot: str | None = None,
) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            if chroot is not None:
                os.chroot(chroot)
            os.chdir(cwd)
            devnull = os.open("/dev/null", os.O_RDWR)
            os.dup2(stdout, 1)
            os.dup2(stdin if stdin >= 0 else devnull, 0)
            os.dup2(devnull, 2)
            if user is not None:
                _drop(*user)
            os.execvpe(argv[0], argv, env)  # noqa: S606 - argv, no shell
        finally:
            os._exit(127)
    # Only this child: the command's process, forked already, is reaped by its loop.
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def parse(message: bytes) -> tuple[dict[str, str], list[str], dict[str, str]]:
    """A request's options, command and environment: argv (``key=value`` options,
    ``--``, the command) and environment entries joined by NUL, an empty entry between."""
    parts = message.decode("utf-8", "surrogateescape").split("\0")
    split = parts.index("")
    argv = parts[:split]
    cut = argv.index("--")
    opts = dict(arg.split("=", 1) for arg in argv[:cut])
    env = dict(part.split("=", 1) for part in parts[split + 1 :])
    return opts, argv[cut + 1 :], env


WARM_KEY: Final = (
    "ppid", "runner", "mode", "net", "points", "points_folder", "plan", "uid", "gid",
    "outer_uid", "outer_gid", "sub_uid", "sub_gid", "newuidmap", "newgidmap", "mem", "nproc",
    "cpu", "writable", "tmp", "output",
)  # fmt: skip
"""The options that shape a prepared sandbox (its namespaces, maps, view, memory group)
or its limits: a request takes a prepared sandbox only when all of them are equal."""


def warm_key(opts: dict[str, str]) -> tuple[str, ...]:
    """What a prepared sandbox and a request must agree on (`WARM_KEY`)."""
    return tuple(opts.get(name, "") for name in WARM_KEY)


Request = tuple[bytes, list[int]]
"""A request (`parse`) and its stdout, stderr, status and patch fds."""


def main() -> None:
    """Run the helper without a server (argv as documented above). Never returns."""
    status = int(os.environ.pop("KERNEL_SANDBOX_STATUS_FD"))
    patch = int(os.environ.pop("KERNEL_SANDBOX_PATCH_FD"))
    entries = [*sys.argv[1:], "", *(f"{k}={v}" for k, v in os.environ.items())]
    message = "\0".join(entries).encode("utf-8", "surrogateescape")
    fds = [os.dup(1), os.dup(2), status, patch]
    quiet()
    helper(message, (message, fds))


def quiet() -> None:
    """Point fds 0-2 at /dev/null: a run's pipes reach EOF once PID 1 lets go of them."""
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def helper(message: bytes, request: Request | None, sock: int = -1) -> None:
    """Prepare a sandbox for ``message``'s options and run one request in it. Never
    returns.

    ``request``: the run itself (a fresh sandbox), or None for a prepared one: it tells
    ``sock`` (the server) "ready" and waits there for the request, whose options must
    agree with ``message``'s on `WARM_KEY` (the server's check).
    """
    opts = parse(message)[0]
    report = _Report(-1 if request is None else request[1][2])
    privileged = os.geteuid() == 0
    # Die with the runner (and refuse to start if it is already gone).
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(opts["ppid"]):
        _exit(1)
    tree = -1  # a fresh sandbox's idmapped baseline: made before anything needs undoing
    if request is not None and privileged and opts["mode"] == "overlay" and opts["baseline"]:
        outer = int(opts["outer_uid"]), int(opts["outer_gid"])
        tree = nsview.idmapped_baseline(report, opts["baseline"], *outer)
    flags = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWUTS | _CLONE_NEWIPC
    flags |= 0 if opts["net"] == "1" else _CLONE_NEWNET
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    # PID 1's host pid (from ns), then "joined its memory group" (to PID 1): the
    # migration (an RCU grace period) runs while PID 1 builds the view.
    init_r, init_w = os.pipe()
    joined_r, joined_w = os.pipe()
    # PID 1 (and ns) -> helper: report lines until "ready"; helper -> PID 1: the
    # request; PID 1 -> helper: "finished" once its last report is written.
    chan, theirs = _socketpair()
    opts["init_fd"], opts["joined_fd"] = str(init_w), str(joined_r)
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        held = request[1] if request is not None else []
        for fd in (ready_r, go_w, init_r, joined_w, chan, sock, tree, *held):
            if fd >= 0:
                os.close(fd)
        _ns(opts, flags, parent, (ready_w, go_r, theirs), privileged=privileged)
    for fd in (ready_w, go_r, init_w, joined_r, theirs):
        os.close(fd)
    if os.read(ready_r, 1) != b"1":
        _relay(chan, report)
        _give_up(child, "", chan)
    try:
        if _write_maps(child, opts, privileged):
            report("command-uid subordinate")
    except OSError as e:
        report(f"error uid/gid map: {e.strerror}")
        os.write(go_w, b"0")
        _give_up(child, "", chan)
    os.write(go_w, b"1")
    os.close(go_w)
    # Made while PID 1 builds the view (PID 1 waits for the join before it is ready).
    group = f"sbx-{opts['runner']}-h{parent}"
    cgroup = nslimits.memory_cgroup(group, opts["mem"]) if privileged and opts["mem"] else ""
    nslimits.join_cgroup(report, cgroup, opts["mem"], (init_r, joined_w))
    if not _relay(chan, report):
        _give_up(child, cgroup, chan)  # PID 1 could not prepare (it reported why)
    # PID 1 writes the lines kept so far once it has the run, and its memory group's
    # OOM count before its "done" (the runner's reply).
    setup = "\0".join(["setup", cgroup, *report.lines])
    report.lines.clear()
    os.write(chan, setup.encode())
    if request is None:
        # The server hands the run to PID 1 itself (one process less on its way), and
        # this helper the status fd (for a "done" PID 1 cannot write).
        status = _await(sock, chan)
        if status < 0:
            _give_up(child, cgroup, chan)  # discarded by the server
        report.attach(status)
        nslimits.slice_ns(0)  # prepared: from here on the teardown's, as any process
    else:
        _hand_to_init(chan, request, tree)
    _end(report, chan, child, cgroup)


def _socketpair() -> tuple[int, int]:
    import socket

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    return ours.detach(), theirs.detach()


def _relay(chan: int, report: _Report) -> bool:
    """Pass ns's and PID 1's report lines on until PID 1 is ready (True) or gone."""
    while True:
        line = os.read(chan, 1 << 16)
        if line == b"ready\n":
            return True
        if not line:
            return False
        report(line.decode("utf-8", "replace").rstrip("\n"))


def _give_up(child: int, cgroup: str, chan: int) -> NoReturn:
    """End a sandbox that will run nothing: close PID 1's channel (it ends when it reads
    EOF there, and ns with it), wait for ns, remove the memory group, exit. Killing ns
    instead would leave PID 1 dying in the group as it is removed."""
    os.close(chan)
    os.waitpid(child, 0)
    nslimits.remove_cgroup(cgroup)
    _exit(1)


def _await(sock: int, chan: int) -> int:
    """Tell the server this sandbox is ready, with PID 1's channel (the server sends it
    the run); the run's status fd, or -1 when discarded."""
    import socket

    server = socket.socket(fileno=sock)
    try:
        socket.send_fds(server, [b"ready"], [chan])
        message, fds, _flags, _addr = socket.recv_fds(server, 64, 1)
    except OSError:
        return -1
    finally:
        server.close()
    return fds[0] if message == b"status" and len(fds) == 1 else -1


def _hand_to_init(chan: int, request: Request, tree: int) -> None:
    """Give PID 1 the request (with the idmapped baseline, or -1); keep only the status
    fd."""
    import socket

    message, fds = request
    sock = socket.socket(fileno=os.dup(chan))
    socket.send_fds(sock, [message], [*fds, tree] if tree >= 0 else fds)
    sock.close()
    for fd in (fds[0], fds[1], fds[3], tree):
        if fd >= 0:
            os.close(fd)


def _end(report: _Report, chan: int, child: int, cgroup: str) -> NoReturn:
    """Once PID 1 is finished (it wrote "done"), or gone before that (an OOM kill may
    take it: then the OOM evidence and "done" here), the teardown: ns and PID 1 exit,
    the memory group is removed."""
    if os.read(chan, 64) != b"finished":
        nslimits.cgroup_done(report, cgroup)
        report("done")
    os.close(report.fd)
    os.waitpid(child, 0)
    nslimits.remove_cgroup(cgroup)
    _exit(0)


def _write_maps(child: int, opts: dict[str, str], privileged: bool) -> bool:
    """Write the uid/gid maps of ``child``'s new user namespace, from outside it; True
    when the command is an unprivileged runner's subordinate id (`_subordinate_maps`).

    Raises:
        OSError: the maps cannot be written.
    """
    uid, gid = opts["uid"], opts["gid"]
    if not privileged and opts["sub_uid"] and _subordinate_maps(child, opts):
        return True
    if privileged:
        # Root maps from the parent namespace: the setup keeps root, the command
        # gets an unprivileged outer uid, and supplementary groups can be dropped.
        uid_map = f"0 0 1\n{uid} {opts['outer_uid']} 1"
        gid_map = f"0 0 1\n{gid} {opts['outer_gid']} 1"
    else:
        with open(f"/proc/{child}/setgroups", "w") as handle:
            handle.write("deny")
        uid_map, gid_map = f"{uid} {os.geteuid()} 1", f"{gid} {os.getegid()} 1"
    with open(f"/proc/{child}/uid_map", "w") as handle:
        handle.write(uid_map)
    with open(f"/proc/{child}/gid_map", "w") as handle:
        handle.write(gid_map)
    return False


def _subordinate_maps(child: int, opts: dict[str, str]) -> bool:
    """Map an unprivileged runner to root of ``child``'s namespace (its setup keeps the
    runner's access to the runner's folders) and the command to the runner's first
    subordinate uid/gid, through the setuid ``newgidmap``/``newuidmap``: the command is
    then not the runner on the host, so the runner's own 0600 files are out of its reach.
    False when ``newgidmap`` refuses (nothing is written: the caller maps the command to
    the runner, as without subordinate ids).

    Raises:
        OSError: ``newuidmap`` refused after ``newgidmap`` had mapped the groups.
    """
    quiet = [(os.POSIX_SPAWN_OPEN, fd, "/dev/null", os.O_WRONLY, 0) for fd in (1, 2)]
    for tool, own, sub, inner in (
        ("newgidmap", os.getegid(), opts["sub_gid"], opts["gid"]),
        ("newuidmap", os.geteuid(), opts["sub_uid"], opts["uid"]),
    ):
        argv = [tool, str(child), "0", str(own), "1", inner, sub, "1"]
        try:
            pid = os.posix_spawn(opts[tool], argv, {}, file_actions=quiet)
            done = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        except OSError:
            done = False
        if not done and tool == "newgidmap":
            return False
        if not done:
            raise OSError(0, "newuidmap refused the subordinate uid")
    return True


def _ns(
    opts: dict[str, str], flags: int, parent: int, fds: tuple[int, int, int], *, privileged: bool
) -> NoReturn:
    """ns: unshare the namespaces, wait for the maps, fork PID 1, wait for it."""
    ready_w, go_r, chan = fds
    report = _Report(chan)  # lines reach the runner through the helper (`_relay`)
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        _exit(1)
    ctypes.set_errno(0)
    if _libc.unshare(flags) != 0:
        report.fail("unshare")
    os.write(ready_w, b"1")
    if os.read(go_r, 1) != b"1":
        _exit(1)  # the helper could not write the maps (it reported why)
    for fd in (ready_w, go_r):
        os.close(fd)
    # Still outside the new PID namespace: its first child is PID 1.
    child = os.fork()
    if child:
        # What is left to it (its exit) is the teardown's; before PID 1 can be ready
        # (the helper waits for its pid below).
        nslimits.slice_ns(0)
        for fd in (chan, int(opts["joined_fd"])):
            os.close(fd)
        os.write(int(opts["init_fd"]), str(child).encode())  # its pid on the host
        os.close(int(opts["init_fd"]))
        os.waitpid(child, 0)
        _exit(0)
    os.close(int(opts["init_fd"]))
    # PID 1 sees no parent (getppid() is 0): die with the one outside.
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    _init(opts, report, chan, privileged=privileged)


def _enter_points(report: _Report, points: str) -> str:
    """Mount the tmpfs that holds every mount point (the host folder ``points`` holds
    none: its removal never waits on mounts torn down) and enter it; the path that names
    it from now on. A removal (a temp cleaner) detaches it: a path through the folder
    (made again) would build the view on the host's disk, but through the working
    directory every step stays on the tmpfs, and a mount on a detached one fails."""
    nsview.mount(report, "tmpfs", points, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0700,size=64k")
    try:
        os.chdir(points)
        mounted = os.stat(".").st_dev != os.stat("..").st_dev
    except OSError as e:
        report(f"error enter the mount points: {e.strerror}")
        _exit(1)
    if not mounted:
        report("error enter the mount points: the folder was replaced on the host")
        _exit(1)
    return "."


def _init(opts: dict[str, str], report: _Report, chan: int, *, privileged: bool) -> NoReturn:
    """PID 1: build the view and join the memory group (the prepared part), tell the
    helper it is ready, then run the request it sends (`_run`)."""
    nsview.mount(report, "none", "/", None, _MS_REC | _MS_PRIVATE, None)
    points = _enter_points(report, opts["points"])
    for name in ("/root", "/lower", "/upper", "/diff"):
        os.mkdir(points + name, 0o700)
    ctypes.set_errno(0)
    _libc.sethostname(b"kernel-sandbox", 14)  # own UTS namespace: the host's is untouched
    nsview.build_view(report, points + "/root", opts["plan"])
    os.read(int(opts["joined_fd"]), 1)  # in the run's memory group before any of the run
    os.close(int(opts["joined_fd"]))
    user = (int(opts["uid"]), int(opts["gid"]), os.getuid() == 0)
    if opts["mode"] == "overlay":
        nsview.upper_layer(report, opts, points + "/upper", hand_over=user[2] and not privileged)
    # From here on PID 1 and the command's process (forked now: it inherits the slice,
    # and gives it up at its execve) are on the run's path.
    nslimits.slice_ns(nslimits.SHORT_SLICE)
    process = _fork_command(opts, points + "/root", user)
    # Out of the command's reach whatever its uid: a signal sent from inside this PID
    # namespace reaches PID 1 only through a handler (Python's SIGINT one let a
    # same-uid command end PID 1: a sandbox error instead of its result), and an
    # undumpable PID 1 is opened by no tracer and no /proc/1/fd or /proc/1/mem (its
    # capabilities refuse a same-uid command that too; this holds without them). Set
    # after the maps: an undumpable process's /proc files are root's, and an
    # unprivileged helper writes ns's uid_map there.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    os.write(chan, b"ready\n")
    import socket

    sock = socket.socket(fileno=os.dup(chan))
    try:
        setup = sock.recv(1 << 16).decode("utf-8", "surrogateescape").split("\0")
        # Sent as soon as PID 1 is ready: the group's OOM count is opened before the run.
        oom = nslimits.oom_control(setup[1] if len(setup) > 1 else "")
        message, fds, _flags, _addr = socket.recv_fds(sock, 1 << 22, 5)
    except OSError:
        _exit(1)
    finally:
        sock.close()
    if setup[0] != "setup" or not message or len(fds) < 4:
        _exit(1)  # the helper is gone
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    os.close(fds[0])
    os.close(fds[1])
    report.fd = fds[2]
    for line in setup[2:]:
        report(line)
    run_opts, command, env = parse(message)
    run_opts["cgroup"] = setup[1]
    run_opts["oom"] = str(oom)
    run_opts["points"] = points
    tree = fds[4] if len(fds) > 4 else -1
    _run(
        run_opts, command, env, report=report, fds=(fds[3], tree, chan), privileged=privileged,
        process=process,
    )  # fmt: skip


def _run(
    opts: dict[str, str],
    command: list[str],
    env: dict[str, str],
    *,
    report: _Report,
    fds: tuple[int, int, int],
    privileged: bool,
    process: Command,
) -> NoReturn:
    """PID 1 with a request: the tree, the command (its ``process`` waits, confined),
    its reports, the patch, "done"; then "finished" to the helper (``fds``: the patch fd, the
    idmapped baseline or -1, and the helper's channel)."""
    patch_fd, tree, chan = fds
    uid, gid = int(opts["uid"]), int(opts["gid"])
    # Root inside (a root runner, or an unprivileged one mapped through its subordinate
    # ids): the command drops to its uid; otherwise the setup is the command's uid already.
    inside_root = os.getuid() == 0
    user = (uid, gid, inside_root)
    root, lower, tree_layer, diff = (
        opts["points"] + name for name in ("/root", "/lower", "/upper", "/diff")
    )
    work = _mount_tree(
        report, opts, root=root, lower=lower, layer=tree_layer, tree=tree,
        hand_over=inside_root and not privileged,
    )  # fmt: skip
    git_env = {**_GIT_ENV, "GIT_CEILING_DIRECTORIES": opts["scratch"]}
    _prepare_tree(report, opts, root=root, work=work, user=user, git_env=git_env)
    nsview.read_only(report, root, False)  # the view's own tmpfs: nothing new appears in it
    pid, start_error, peak, inherited = _run_command(process, opts, command, env)
    held = nslimits.processes_of(root + "/proc", uid)
    _done, status, rusage = os.wait4(pid, 0)
    peak = max(peak, rusage.ru_maxrss)
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
            peak = max(peak, os.wait4(-1, 0)[2].ru_maxrss)
        except ChildProcessError:
            break
    quiet()  # the run's stdout and stderr are final: the runner sees their EOF now
    nslimits.report_limits(
        report,
        opts,
        status=status,
        rusage=rusage,
        evidence=(peak << 10, inherited << 10, held),
        layers=(tree_layer, root + "/tmp"),  # noqa: S108 - the sandbox's own /tmp
    )
    if (
        opts["patch"] == "1"
        and not start_error
        and not nslimits.oversized(report, opts, work, (tree_layer, lower))
    ):
        _capture_patch(report, opts, (lower, work, diff), patch_fd, git_env)
    os.close(patch_fd)
    nslimits.cgroup_done(report, opts["cgroup"], int(opts["oom"]))  # outside too: PID 1 killed
    report("done")
    nslimits.slice_ns(0)  # its exit is the teardown: no longer a step of the run
    os.write(chan, b"finished")
    _exit(0)


_GIT_ENV: Final = {
    "LC_ALL": "C",
    "LANG": "C",
    "TZ": "UTC",
    "HOME": "/nonexistent",
    "XDG_CONFIG_HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}
"""git's environment in the helper (``git apply``, the patch's ``git diff``): nothing
of the host's or the user's configuration."""


def _capture_patch(
    report: _Report,
    opts: dict[str, str],
    folders: tuple[str, str, str],
    patch_fd: int,
    git_env: dict[str, str],
) -> None:
    """Write the run's patch (``git diff`` of the baseline at ``diff/a`` and the tree,
    read-only, at ``diff/b``; ``folders``: lower, work, diff) to ``patch_fd``."""
    lower, work, diff = folders
    nsview.mount(report, "tmpfs", diff, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755")
    os.mkdir(diff + "/a")
    os.mkdir(diff + "/b")
    nsview.mount(report, lower, diff + "/a", None, _MS_BIND | _MS_REC, None)
    nsview.mount(report, work, diff + "/b", None, _MS_BIND | _MS_REC, None)
    nsview.read_only(report, diff + "/b", True)
    rc = _spawn(opts["git"].split(" "), diff, stdin=-1, stdout=patch_fd, env=git_env, user=None)
    report(f"diff {rc}")


def _mount_tree(
    report: _Report,
    opts: dict[str, str],
    *,
    root: str,
    lower: str,
    layer: str,
    tree: int,
    hand_over: bool,
) -> str:
    """Mount the baseline (the idmapped clone, or a read-only bind) at ``lower`` and the
    run's tree at the work dir (an overlay with a size-limited upper layer, or the
    private copy); returns the work dir's host path. ``hand_over``: the command is a
    subordinate id, not the baseline's owner (`nsview.hand_over`)."""
    work = root + opts["workdir"]
    os.makedirs(work)
    if tree >= 0:
        # The idmapped clone made outside, moved into this namespace.
        ctypes.set_errno(0)
        if _libc.syscall(
            _SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, lower.encode(), _MOVE_MOUNT_F_EMPTY_PATH
        ):
            report.fail("move the idmapped baseline")
        os.close(tree)
    elif opts["baseline"]:
        nsview.mount(report, opts["baseline"], lower, None, _MS_BIND | _MS_REC, None)
        nsview.read_only(report, lower, True)
    else:
        os.chmod(lower, 0o755)  # noqa: S103 - no baseline: the empty tree of a fresh folder
    if opts["mode"] != "overlay" and not opts["sub_uid"]:
        nsview.mount(report, opts["scratch"] + "/copy", work, None, _MS_BIND, None)
        return work
    if opts["mode"] != "overlay":
        nsview.copy_in_namespace(
            report, opts, lower=lower, layer=layer, work=work, to_command=hand_over
        )
        return work
    # The upper layer was made with the view (`nsview.upper_layer`), its root as the baseline's.
    os.chmod(layer + "/upper", os.stat(lower).st_mode & 0o7777)
    data = f"lowerdir={lower},upperdir={layer}/upper,workdir={layer}/work,userxattr"
    nsview.mount(report, "overlay", work, "overlay", 0, data)
    if hand_over:
        try:
            nsview.hand_over(report, opts, work, layer)
        except OSError as e:
            report(f"error hand the tree to the command: {e}")
            _exit(1)
    return work


def _prepare_tree(
    report: _Report,
    opts: dict[str, str],
    *,
    root: str,
    work: str,
    user: tuple[int, int, bool],
    git_env: dict[str, str],
) -> None:
    """The command's home and /tmp, then the preload and the patch to apply."""
    uid, gid, _groups = user
    if opts["home"]:
        os.makedirs(root + opts["home"], exist_ok=True)
        os.chown(root + opts["home"], uid, gid)
    os.chown(root + "/tmp", uid, gid)  # noqa: S108 - the sandbox's own /tmp
    if opts["preload"]:
        import shutil

        try:
            shutil.copytree(opts["preload"], work, symlinks=True, dirs_exist_ok=True)
            # Copied by this (privileged) process: hand the files to the command.
            for folder, dirs, files in os.walk(opts["preload"]):
                rel = os.path.relpath(folder, opts["preload"])
                for name in (*dirs, *files):
                    os.lchown(os.path.join(work, rel, name), uid, gid)
        except OSError as e:
            report(f"error preload: {e}")
            _exit(1)
    if opts["apply"]:
        # Read here (the runner's folder); applied as the command's user.
        patch = os.open(opts["apply"], os.O_RDONLY | os.O_CLOEXEC)
        argv = ["git", "apply", "--whitespace=nowarn", "-"]
        rc = _spawn(
            argv, opts["workdir"], stdin=patch, stdout=2, env=git_env, user=user, chroot=root
        )
        os.close(patch)
        if rc != 0:
            report(f"error apply patch: git apply exited {rc}")
            _exit(1)


Command = tuple[int, int, int, int]
"""The command's process, forked and confined before the request (`_fork_command`): its
pid, the socket that sends it the run, its error pipe, PID 1's peak RSS (KiB) at the
fork (a child's peak may be inherited up to it)."""


def _fork_command(opts: dict[str, str], root: str, user: tuple[int, int, bool]) -> Command:
    """Fork the command's process and confine it (chroot, limits, ids, no_new_privs,
    keyring, seccomp filter: all fixed by the options a prepared sandbox is keyed on);
    it waits for its run (`_run_command`)."""
    import resource

    inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    error_r, error_w = os.pipe2(os.O_CLOEXEC)
    ours, theirs = _socketpair()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(error_r)
            os.close(ours)
            with open("/proc/self/oom_score_adj", "w") as handle:
                # A memory cgroup's OOM kill takes the command, not PID 1: a memfd
                # is nobody's resident memory, and the helper's interpreter would
                # be the biggest process (the command may lower it back: then the
                # kill is still reported as a memory hit, by the helper outside).
                handle.write("1000")
            os.chroot(root)
            nslimits.set_limits(opts)
            if user[2]:
                _drop(*user)
            _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            nslimits.confine()
            _exec_command(theirs, error_w)
        except OSError as e:
            os.write(error_w, (e.strerror or str(e)).encode())
        finally:
            os._exit(127)
    os.close(error_w)
    os.close(theirs)
    return pid, ours, error_r, inherited


def _exec_command(sock_fd: int, error_w: int) -> None:
    """In the command's process: take the run (work dir, umask, argv, environment,
    with stdout and stderr attached), then ``execve``; nothing when PID 1 sends none."""
    import socket

    sock = socket.socket(fileno=sock_fd)
    message, fds, _flags, _addr = socket.recv_fds(sock, 1 << 22, 2)
    sock.close()
    if not message or len(fds) != 2:
        os._exit(127)  # the run never came (a discarded sandbox)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    workdir, umask, *argv = message.decode("utf-8", "surrogateescape").split("\0")
    split = argv.index("")
    env = dict(part.split("=", 1) for part in argv[split + 1 :])
    os.chdir(workdir)
    os.umask(int(umask))
    os.closerange(3, error_w)
    os.closerange(error_w + 1, 1 << 16)
    nslimits.slice_ns(0)  # the command runs with the kernel's default slice, as outside
    nsview.execvpe(argv[:split], env)


def _run_command(
    process: Command, opts: dict[str, str], command: list[str], env: dict[str, str]
) -> tuple[int, bytes, int, int]:
    """Send the command's process its run; as PID 1 reap every orphan until it ends.

    Returns its pid (a zombie, not yet reaped), why it could not start (empty if it
    did), the largest peak RSS (KiB) of the orphans reaped meanwhile, and this
    process's own peak RSS at the fork."""
    import socket

    pid, sock_fd, error_r, inherited = process
    entries = [opts["workdir"], opts["umask"], *command, "", *(f"{k}={v}" for k, v in env.items())]
    sock = socket.socket(fileno=sock_fd)
    socket.send_fds(sock, ["\0".join(entries).encode("utf-8", "surrogateescape")], [1, 2])
    sock.close()
    peak = 0
    while True:
        # The command stays a zombie (still counted against RLIMIT_NPROC) until
        # `_reap` has counted the run's processes.
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        if info is None or info.si_pid != pid:
            _done, _status, rusage = os.wait4(-1 if info is None else info.si_pid, 0)
            peak = max(peak, rusage.ru_maxrss)
            continue
        # Read once it has ended (one wakeup less): closed at its execve, or its error.
        start_error = os.read(error_r, 4096)
        os.close(error_r)
        return pid, start_error, peak, inherited
