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
    uid); an unprivileged runner with subordinate ids (overlay) -> ``0 <runner> 1``
    and ``<uid> <first subordinate> 1``, written by ``newgidmap``/``newuidmap``
    (`_subordinate_maps`; the tree is handed to the command: `_hand_over`); otherwise
    ``<uid> <runner> 1`` as an unprivileged user namespace does.
``init`` (PID 1 of the new PID namespace)
    Builds the new root by carrying out the runner's mount plan (option ``plan``:
    `spec.mount_plan`, steps joined by RS, fields by US), mounts the baseline, runs
    the command, reaps orphans, captures the patch.
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

__all__ = ["main", "serve"]

EXIT_HOOKS: list[Callable[[], None]] = []
"""Run before each helper process ends (the test suite saves coverage data here)."""

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 32, 4096, 16384, 1 << 18
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT = 428, 429
_AT_FDCWD, _AT_EMPTY_PATH = -100, 0x1000
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_IDMAP = 0x1, 0x00100000
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC = 1, 0o2000000
_MOVE_MOUNT_F_EMPTY_PATH = 4

_libc = ctypes.CDLL(None, use_errno=True)


def _exit(code: int) -> NoReturn:
    for hook in EXIT_HOOKS:
        hook()
    os._exit(code)


class _Report:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __call__(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())

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
    while True:
        done, status = os.waitpid(-1, 0)
        if done == pid:
            return os.waitstatus_to_exitcode(status)


_USERNS: dict[tuple[int, int, int, int], int] = {}
"""User namespaces for idmapped baselines, by (baseline owner uid, gid, outer uid,
gid): made once by the helper server and inherited by every helper it forks (one
process and two map writes less per run)."""


def _userns_fd(uid_map: str, gid_map: str) -> int:
    """A user namespace with the given maps, held by an fd (its process is gone).

    Raises:
        OSError: it cannot be made.
    """
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(done_w)
        ok = _libc.unshare(_CLONE_NEWUSER) == 0
        os.write(ready_w, b"1" if ok else b"0")
        os.read(done_r, 1)
        os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    try:
        if os.read(ready_r, 1) != b"1":
            raise OSError(0, "cannot create a user namespace")
        for name, text in (("uid_map", uid_map), ("gid_map", gid_map)):
            with open(f"/proc/{pid}/{name}", "w") as handle:
                handle.write(text)
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(done_w)
        try:  # noqa: SIM105 - contextlib is not imported in the helper (start-up time)
            os.waitpid(pid, 0)
        except ChildProcessError:
            # In the helper server (SIGCHLD ignored) the kernel reaps it: before this
            # was caught, the server's cache never kept a namespace and every run made two.
            pass
        os.close(ready_r)


def _idmap_key(baseline: str, outer_uid: int, outer_gid: int) -> tuple[int, int, int, int]:
    info = os.stat(baseline)
    return info.st_uid, info.st_gid, outer_uid, outer_gid


def _cache_userns(argv: list[str]) -> None:
    """In the helper server, before forking a root runner's overlay helper: make the
    user namespace its idmapped baseline needs, unless one is cached already."""
    try:
        opts = dict(arg.split("=", 1) for arg in argv[: argv.index("--")])
        if os.geteuid() != 0 or opts.get("mode") != "overlay":
            return
        key = _idmap_key(opts["baseline"], int(opts["outer_uid"]), int(opts["outer_gid"]))
        if key not in _USERNS:
            _USERNS[key] = _userns_fd(f"{key[0]} {key[2]} 1", f"{key[1]} {key[3]} 1")
    except (OSError, ValueError, KeyError):
        return  # the helper makes its own, and reports why it cannot


def _idmapped_baseline(report: _Report, baseline: str, outer_uid: int, outer_gid: int) -> int:
    """A detached, read-only clone of the baseline's mount where its owner is the
    command's outer uid/gid (so the command owns the tree it works on while being
    nobody on the host)."""
    key = _idmap_key(baseline, outer_uid, outer_gid)
    userns = _USERNS.get(key, -1)
    if userns < 0:
        try:
            userns = _userns_fd(f"{key[0]} {key[2]} 1", f"{key[1]} {key[3]} 1")
        except OSError as e:
            report(f"error idmap: {e.strerror}")
            _exit(1)
    ctypes.set_errno(0)
    tree = int(
        _libc.syscall(
            _SYS_OPEN_TREE, _AT_FDCWD, baseline.encode(), _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC
        )
    )
    if tree < 0:
        report.fail("open_tree of the baseline")
    idmap = _MOUNT_ATTR_IDMAP | _MOUNT_ATTR_RDONLY
    if nsview.mount_attr(tree, "", _AT_EMPTY_PATH, idmap, userns) != 0:
        report.fail("idmapped mount of the baseline")
    os.set_inheritable(tree, True)
    return tree


def serve(sock_fd: int, runner: int) -> None:
    """The pre-forked helper server: fork one helper per request. Never returns.

    A request is one ``SOCK_SEQPACKET`` message: argv and environment entries joined
    by NUL (an empty entry between them), with the run's stdout, stderr, status and
    patch fds attached. The reply is the helper's pid with a pidfd attached (the
    runner signals through it, so a reused pid is never hit). The server dies with
    the runner; its helpers die with it (``PR_SET_PDEATHSIG``).
    """
    import socket

    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != runner:
        _exit(1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # helpers are reaped by the kernel
    server = socket.socket(fileno=sock_fd)
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(server, 1 << 22, 4)
        except OSError:
            _exit(0)
        if not message or len(fds) != 4:
            _exit(0)  # the runner is gone (or broke the protocol)
        _cache_userns(message.decode("utf-8", "surrogateescape").split("\0"))
        pid = os.fork()
        if pid == 0:
            server.close()
            _child(message, fds)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pidfd = -1  # it ended already: the runner sees EOF on its pipes
        for fd in fds:
            os.close(fd)
        if pidfd < 0:
            server.send(str(pid).encode())
        else:
            socket.send_fds(server, [str(pid).encode()], [pidfd])
        if pidfd >= 0:
            os.close(pidfd)


def _child(message: bytes, fds: list[int]) -> None:
    """In a forked helper of the server: take the request's fds, argv and env; run."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    out, err, status, patch = fds
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in (devnull, out, err):
        os.close(fd)
    parts = message.decode("utf-8", "surrogateescape").split("\0")
    split = parts.index("")
    os.environ.clear()
    os.environ.update(part.split("=", 1) for part in parts[split + 1 :])  # type: ignore[misc]
    os.environ["KERNEL_SANDBOX_STATUS_FD"] = str(status)
    os.environ["KERNEL_SANDBOX_PATCH_FD"] = str(patch)
    sys.argv = ["nshelper", *parts[:split]]
    main()


def main() -> None:
    """Run the helper (argv as documented above). Never returns."""
    split = sys.argv.index("--")
    opts = dict(arg.split("=", 1) for arg in sys.argv[1:split])
    command = sys.argv[split + 1 :]
    report = _Report(int(os.environ.pop("KERNEL_SANDBOX_STATUS_FD")))
    patch_fd = int(os.environ.pop("KERNEL_SANDBOX_PATCH_FD"))
    privileged = os.geteuid() == 0

    # Die with the runner (and refuse to start if it is already gone).
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(opts["ppid"]):
        _exit(1)
    tree = -1
    if privileged and opts["mode"] == "overlay" and opts["baseline"]:
        tree = _idmapped_baseline(
            report, opts["baseline"], int(opts["outer_uid"]), int(opts["outer_gid"])
        )
    flags = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWUTS | _CLONE_NEWIPC
    flags |= 0 if opts["net"] == "1" else _CLONE_NEWNET
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    # PID 1's host pid (from ns), then "joined its memory group" (to PID 1): the
    # migration (an RCU grace period) runs while PID 1 builds the view.
    init_r, init_w = os.pipe()
    joined_r, joined_w = os.pipe()
    opts["init_fd"], opts["joined_fd"] = str(init_w), str(joined_r)
    helper = os.getpid()
    child = os.fork()
    if child == 0:
        for fd in (ready_r, go_w, init_r, joined_w):
            os.close(fd)
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != helper:
            _exit(1)
        ctypes.set_errno(0)
        if _libc.unshare(flags) != 0:
            report.fail("unshare")
        os.write(ready_w, b"1")
        if os.read(go_r, 1) != b"1":
            _exit(1)  # the helper could not write the maps (it reported why)
        os.close(go_r)
        _in_namespaces(
            opts, command, report=report, patch_fd=patch_fd, tree=tree, privileged=privileged
        )
    for fd in (ready_w, go_r, init_w, joined_r):
        os.close(fd)
    if os.read(ready_r, 1) != b"1":
        os.waitpid(child, 0)
        _exit(1)
    try:
        if _write_maps(child, opts, privileged):
            report("command-uid subordinate")
    except OSError as e:
        report(f"error uid/gid map: {e.strerror}")
        os.write(go_w, b"0")
        os.waitpid(child, 0)
        _exit(1)
    os.write(go_w, b"1")
    os.close(go_w)
    # Made while PID 1 builds the view (PID 1 waits for the join before the command).
    cgroup = nslimits.memory_cgroup(opts) if privileged and opts["mem"] else ""
    nslimits.join_cgroup(report, cgroup, opts["mem"], (init_r, joined_w))
    os.waitpid(child, 0)
    nslimits.cgroup_done(report, cgroup)
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


def _in_namespaces(
    opts: dict[str, str],
    command: list[str],
    *,
    report: _Report,
    patch_fd: int,
    tree: int,
    privileged: bool,
) -> None:
    # Still outside the new PID namespace: its first child is PID 1.
    child = os.fork()
    if child:
        os.write(int(opts["init_fd"]), str(child).encode())  # its pid on the host
        os.close(int(opts["init_fd"]))
        os.waitpid(child, 0)
        _exit(0)
    os.close(int(opts["init_fd"]))
    # PID 1 sees no parent (getppid() is 0): die with the one outside.
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    _init(opts, command, report=report, patch_fd=patch_fd, tree=tree, privileged=privileged)


def _init(
    opts: dict[str, str],
    command: list[str],
    *,
    report: _Report,
    patch_fd: int,
    tree: int,
    privileged: bool,
) -> None:
    uid, gid = int(opts["uid"]), int(opts["gid"])
    # Root inside (a root runner, or an unprivileged one mapped through its subordinate
    # ids): the command drops to its uid; otherwise the setup is the command's uid already.
    inside_root = os.getuid() == 0
    user = (uid, gid, inside_root)
    # Every mount point lives on a tmpfs of this namespace: the host folder holds none,
    # so removing it after the run never waits on mounts being torn down.
    points = opts["points"]
    root, lower, tree_layer, diff = (
        points + name for name in ("/root", "/lower", "/upper", "/diff")
    )
    nsview.mount(report, "none", "/", None, _MS_REC | _MS_PRIVATE, None)
    nsview.mount(report, "tmpfs", points, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0700,size=64k")
    for folder in (root, lower, tree_layer, diff):
        os.mkdir(folder, 0o700)
    ctypes.set_errno(0)
    _libc.sethostname(b"kernel-sandbox", 14)  # own UTS namespace: the host's is untouched
    nsview.build_view(report, root, opts["plan"])
    work = _mount_tree(
        report, opts, root=root, lower=lower, layer=tree_layer, tree=tree,
        hand_over=inside_root and not privileged,
    )  # fmt: skip
    git_env = {**_GIT_ENV, "GIT_CEILING_DIRECTORIES": opts["scratch"]}
    _prepare_tree(report, opts, root=root, work=work, user=user, git_env=git_env)
    nsview.read_only(report, root, False)  # the view's own tmpfs: nothing new appears in it
    os.read(int(opts["joined_fd"]), 1)  # in the run's memory group before the command
    os.close(int(opts["joined_fd"]))
    pid, start_error, peak, inherited = _run_command(opts, command, root, user)
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
    subordinate id, not the baseline's owner (`_hand_over`)."""
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
    if opts["mode"] != "overlay":
        nsview.mount(report, opts["scratch"] + "/copy", work, None, _MS_BIND, None)
        return work
    layer_options = "mode=0700" if hand_over else opts["layer"]
    nsview.mount(report, "tmpfs", layer, "tmpfs", _MS_NOSUID | _MS_NODEV, layer_options)
    os.mkdir(layer + "/upper")
    os.mkdir(layer + "/work")
    info = os.stat(lower)
    os.chmod(layer + "/upper", info.st_mode & 0o7777)
    os.chown(layer + "/upper", int(opts["uid"]), int(opts["gid"]))
    data = f"lowerdir={lower},upperdir={layer}/upper,workdir={layer}/work,userxattr"
    nsview.mount(report, "overlay", work, "overlay", 0, data)
    if hand_over:
        try:
            _hand_over(report, opts, work, layer)
        except OSError as e:
            report(f"error hand the tree to the command: {e}")
            _exit(1)
    return work


def _hand_over(report: _Report, opts: dict[str, str], work: str, layer: str) -> None:
    """Give the command (a subordinate id) the baseline's files of the runner (root
    inside), as a root runner's idmapped lower layer gives them to its command: chown
    through the overlay, which copies each one up into the upper layer (unprivileged,
    no idmapped mount of the host's filesystem can be made). Then limit the layer to
    what that took plus the run's writable limit, so the limit means what it means
    elsewhere. Files of other owners keep them."""
    uid, gid = int(opts["uid"]), int(opts["gid"])
    folders = [work]
    while folders:
        for entry in os.scandir(folders.pop()):
            info = entry.stat(follow_symlinks=False)
            if info.st_uid == 0 or info.st_gid == 0:
                os.lchown(
                    entry.path, uid if info.st_uid == 0 else -1, gid if info.st_gid == 0 else -1
                )
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
    if not opts["writable"]:
        return
    used = os.statvfs(layer)
    size = (used.f_blocks - used.f_bfree) * used.f_frsize + int(opts["writable"])
    limits = dict(part.split("=", 1) for part in opts["layer"].split(","))
    inodes = used.f_files - used.f_ffree + int(limits["nr_inodes"])
    flags = _MS_REMOUNT | _MS_NOSUID | _MS_NODEV
    nsview.mount(report, "none", layer, None, flags, f"size={size},nr_inodes={inodes}")


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


def _run_command(
    opts: dict[str, str], command: list[str], root: str, user: tuple[int, int, bool]
) -> tuple[int, bytes, int, int]:
    """Fork, confine and exec the command; as PID 1 reap every orphan until it ends.

    Returns its pid (a zombie, not yet reaped), why it could not start (empty if it
    did), the largest peak RSS (KiB) of the orphans reaped meanwhile, and this
    process's own peak RSS at the fork (a child's peak may be inherited up to it)."""
    import resource

    inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    error_r, error_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(error_r)
            with open("/proc/self/oom_score_adj", "w") as handle:
                # A memory cgroup's OOM kill takes the command, not PID 1: a memfd
                # is nobody's resident memory, and the helper's interpreter would
                # be the biggest process (the command may lower it back: then the
                # kill is still reported as a memory hit, by the helper outside).
                handle.write("1000")
            os.chroot(root)
            os.chdir(opts["workdir"])
            os.umask(int(opts["umask"]))
            nslimits.set_limits(opts)
            if user[2]:
                _drop(*user)
            _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            nslimits.confine()
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
    peak = 0
    while True:
        # The command stays a zombie (still counted against RLIMIT_NPROC) until
        # `_reap` has counted the run's processes.
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        if info is None or info.si_pid != pid:
            _done, _status, rusage = os.wait4(-1 if info is None else info.si_pid, 0)
            peak = max(peak, rusage.ru_maxrss)
            continue
        return pid, start_error, peak, inherited
