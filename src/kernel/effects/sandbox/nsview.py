"""The sandbox's view of the host: mounts and the runner's mount plan, for the helper.

Stdlib only, like `nshelper` (which imports it by name: the helper runs this folder's
modules as top-level modules under ``python -I -S``). `build_view` carries out
`spec.mount_plan` below a root; `mount`, `mount_attr` and `read_only` are the calls it
and the helper make; `idmapped_baseline` the baseline's read-only clone whose owner is
the command (a root runner's overlay), through user namespaces `cache_userns` keeps;
`hand_over` and `copy_in_namespace` give an unprivileged runner's tree to its
subordinate id (no idmapped mount of the host's filesystem is open to it);
`upper_layer` the overlay's upper layer, made while the sandbox is prepared; `execvpe`
the command's ``PATH`` search, in the view.
"""

from __future__ import annotations

import ctypes
import os
from typing import NoReturn, Protocol

__all__ = [
    "Reporter",
    "build_view",
    "cache_userns",
    "copy_in_namespace",
    "execvpe",
    "hand_over",
    "idmapped_baseline",
    "mount",
    "mount_attr",
    "read_only",
    "upper_layer",
]

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
_SYS_MOUNT_SETATTR, _AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 0x1
_SYS_OPEN_TREE, _AT_EMPTY_PATH, _MOUNT_ATTR_IDMAP = 428, 0x1000, 0x00100000
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC = 1, 0o2000000
_CLONE_NEWUSER = 0x10000000

_libc = ctypes.CDLL(None, use_errno=True)


class Reporter(Protocol):
    """The helper's status line writer (`nshelper._Report`)."""

    def fail(self, what: str) -> NoReturn:
        """Report ``what`` failed (with errno's text) and end this process."""


def mount(  # noqa: PLR0917 - mount(2)'s own argument order
    report: Reporter, src: str, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    ctypes.set_errno(0)
    rc = _libc.mount(
        src.encode(),
        target.encode(),
        None if fstype is None else fstype.encode(),
        ctypes.c_ulong(flags),
        None if data is None else data.encode(),
    )
    if rc != 0:
        report.fail(f"mount {fstype or 'bind'} on {target}")


def mount_attr(fd: int, path: str, flags: int, attr_set: int, userns_fd: int = 0) -> int:
    # struct mount_attr {attr_set, attr_clr, propagation, userns_fd}
    attr = (ctypes.c_uint64 * 4)(attr_set, 0, 0, userns_fd)
    ctypes.set_errno(0)
    return int(_libc.syscall(_SYS_MOUNT_SETATTR, fd, path.encode(), flags, ctypes.byref(attr), 32))


def read_only(report: Reporter, target: str, recursive: bool) -> None:
    if mount_attr(_AT_FDCWD, target, _AT_RECURSIVE if recursive else 0, _MOUNT_ATTR_RDONLY) == 0:
        return
    # No mount_setattr (Linux < 5.12): remount each mount below target read-only,
    # keeping its locked flags (a user namespace may not clear them).
    atime = {"noatime": 1024, "nodiratime": 2048, "relatime": 1 << 21}
    with open("/proc/self/mountinfo") as handle:
        lines = [line.split() for line in handle]
    for parts in lines:
        name = parts[4].encode().decode("unicode_escape")
        if name == target or (recursive and name.startswith(target + "/")):
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY
            for opt in parts[5].split(","):
                flags |= {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}.get(opt, 0)
                flags |= atime.get(opt, 0)
            mount(report, "none", name, None, flags, None)


def build_view(report: Reporter, root: str, plan: str) -> None:
    """Carry out the runner's mount plan (`spec.mount_plan`) below ``root``."""
    folders = _Folders()
    for line in plan.split("\x1e"):
        op, target, *args = line.split("\x1f")
        where = root + target.rstrip("/")
        if op not in ("symlink", "file", "copy"):
            folders.cover(where)  # a mount there hides what was made below it
        if op == "tmpfs":
            folders.make(where)
            mount(report, "tmpfs", where, "tmpfs", MS_NOSUID | MS_NODEV, args[0])
        elif op in ("bind", "dev"):
            source = args[0] if args else target
            _mount_point(folders, where, os.path.isdir(source))
            mount(report, source, where, None, MS_BIND | (MS_REC if op == "bind" else 0), None)
            if op == "bind":
                read_only(report, where, True)
        elif op == "symlink":
            folders.make(os.path.dirname(where))
            os.symlink(args[0], where)
        elif op in ("file", "copy"):
            folders.make(os.path.dirname(where))
            _write_file(where, _read_small(args[0]) if op == "copy" else args[0].encode())
        elif op == "proc":
            folders.make(where, 0o555)
            mount(report, "proc", where, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        elif os.path.islink(where) or not os.path.exists(where):
            continue  # mask, readonly, hide: nothing there to hide
        elif op == "readonly":
            mount(report, where, where, None, MS_BIND | MS_REC, None)
            read_only(report, where, True)
        elif os.path.isdir(where):  # mask, hide: an empty read-only tmpfs over a folder
            flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
            mount(report, "tmpfs", where, "tmpfs", flags, "mode=0555,size=4k,nr_inodes=4")
        else:  # mask a file
            mount(report, root + "/dev/null", where, None, MS_BIND, None)


class _Folders:
    """The folders this view has made or found: each is made once (a plan names the
    same parents many times; a refused ``mkdir`` costs more than the check)."""

    def __init__(self) -> None:
        self.known: set[str] = set()

    def make(self, folder: str, mode: int = 0o755) -> None:
        if folder not in self.known:
            os.makedirs(folder, mode, exist_ok=True)
            self.known.add(folder)

    def cover(self, where: str) -> None:
        """Forget the folders below ``where`` (a step may mount over it)."""
        below = where + "/"
        self.known = {known for known in self.known if not known.startswith(below)}


def _read_small(path: str) -> bytes:
    """A small host file's bytes (an ``/etc`` file: 1 MiB at most), read at its size
    (a 1 MiB buffer for each cost more than the rest of the copy)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        return os.read(fd, min(size, 1 << 20) if size else 1 << 20)
    finally:
        os.close(fd)


def _write_file(where: str, data: bytes) -> None:
    """Write ``data`` to a new file of the view, mode 0644 whatever the umask (plain
    descriptors: a file object costs four more calls per file)."""
    fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
        os.fchmod(fd, 0o644)
    finally:
        os.close(fd)


def _mount_point(folders: _Folders, where: str, folder: bool) -> None:
    if folder:
        folders.make(where)
    else:
        folders.make(os.path.dirname(where))
        os.close(os.open(where, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))


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


def cache_userns(opts: dict[str, str]) -> None:
    """In the helper server, before forking a root runner's overlay helper: make the
    user namespace its idmapped baseline needs, unless one is cached already."""
    try:
        if os.geteuid() != 0 or opts.get("mode") != "overlay":
            return
        key = _idmap_key(opts["baseline"], int(opts["outer_uid"]), int(opts["outer_gid"]))
        if key not in _USERNS:
            _USERNS[key] = _userns_fd(f"{key[0]} {key[2]} 1", f"{key[1]} {key[3]} 1")
    except (OSError, ValueError, KeyError):
        return  # the helper makes its own, and reports why it cannot


def idmapped_baseline(report: Reporter, baseline: str, outer_uid: int, outer_gid: int) -> int:
    """A detached, read-only clone of the baseline's mount where its owner is the
    command's outer uid/gid (so the command owns the tree it works on while being
    nobody on the host)."""
    key = _idmap_key(baseline, outer_uid, outer_gid)
    userns = _USERNS.get(key, -1)
    if userns < 0:
        try:
            userns = _userns_fd(f"{key[0]} {key[2]} 1", f"{key[1]} {key[3]} 1")
        except OSError as e:
            ctypes.set_errno(e.errno or 0)
            report.fail("idmap")
    ctypes.set_errno(0)
    tree = int(
        _libc.syscall(
            _SYS_OPEN_TREE, _AT_FDCWD, baseline.encode(), _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC
        )
    )
    if tree < 0:
        report.fail("open_tree of the baseline")
    idmap = _MOUNT_ATTR_IDMAP | _MOUNT_ATTR_RDONLY
    if mount_attr(tree, "", _AT_EMPTY_PATH, idmap, userns) != 0:
        os.close(tree)  # (ctypes keeps the call's errno for the report)
        report.fail("idmapped mount of the baseline")
    os.set_inheritable(tree, True)
    return tree


def copy_in_namespace(
    report: Reporter, opts: dict[str, str], *, lower: str, layer: str, work: str, to_command: bool
) -> None:
    """The ``namespace_copy`` tree of an unprivileged runner with subordinate ids: a
    copy of the baseline on a tmpfs of the run (the runner makes no host copy), handed
    to the command when it is a subordinate id (``to_command``; a host folder of its
    files would outlive a killed run, unremovable by the runner), then limited as
    overlay's layer is (`hand_over`)."""
    import shutil

    mount(report, "tmpfs", layer, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700")
    tree = layer + "/upper"
    try:
        shutil.copytree(lower, tree, symlinks=True)
        if to_command:
            os.chown(tree, int(opts["uid"]), int(opts["gid"]))
            hand_over(report, opts, tree, layer)
        else:
            _limit_layer(report, opts, layer)
    except OSError as e:
        ctypes.set_errno(e.errno or 0)
        report.fail(f"copy the tree ({e.filename})")
    mount(report, tree, work, None, MS_BIND, None)


def hand_over(report: Reporter, opts: dict[str, str], work: str, layer: str) -> None:
    """Give the command (a subordinate id) the baseline's files of the runner (root
    inside), as a root runner's idmapped lower layer gives them to its command: chown
    through the overlay, which copies each one up into the upper layer (unprivileged,
    no idmapped mount of the host's filesystem can be made), or in the copy. Then limit
    the layer to what that took plus the run's writable limit, so the limit means what
    it means elsewhere. Files of other owners keep them.

    Raises:
        OSError: an entry cannot be handed over.
    """
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
    _limit_layer(report, opts, layer)


def upper_layer(report: Reporter, opts: dict[str, str], layer: str, *, hand_over: bool) -> None:
    """The overlay's upper layer on a size-limited tmpfs (unlimited until `hand_over`
    has copied the tree up, for a subordinate id), its ``upper`` folder the command's.
    It is fixed by the options a prepared sandbox is keyed on (the mode, the writable
    limit, the ids): PID 1 makes it with the view, off the run's path."""
    layer_options = "mode=0700" if hand_over else opts["layer"]
    mount(report, "tmpfs", layer, "tmpfs", MS_NOSUID | MS_NODEV, layer_options)
    os.mkdir(layer + "/upper")
    os.mkdir(layer + "/work")
    os.chown(layer + "/upper", int(opts["uid"]), int(opts["gid"]))


def _limit_layer(report: Reporter, opts: dict[str, str], layer: str) -> None:
    """Remount the tree's tmpfs ``layer`` at what it holds plus the writable limit
    (bytes, and as many inodes more as the limit's own tmpfs has)."""
    if not opts["writable"]:
        return
    used = os.statvfs(layer)
    size = (used.f_blocks - used.f_bfree) * used.f_frsize + int(opts["writable"])
    limits = dict(part.split("=", 1) for part in opts["layer"].split(","))
    inodes = used.f_files - used.f_ffree + int(limits["nr_inodes"])
    flags = MS_REMOUNT | MS_NOSUID | MS_NODEV
    mount(report, "none", layer, None, flags, f"size={size},nr_inodes={inodes}")


def execvpe(argv: list[str], env: dict[str, str]) -> None:
    """Run ``argv`` in the command's process (chrooted in the view) with ``os.execvpe``'s
    search (a program with a slash as it is, else each ``PATH`` folder in turn; the first
    error other than "not there", else the last), without its ``import warnings``: read
    from the view, it took ~0.2 ms between the run's arrival and the ``execve``, past the
    process's short slice.

    Raises:
        OSError: no folder's program could be executed.
    """
    errors: list[OSError] = []
    for folder in [""] if "/" in argv[0] else env.get("PATH", os.defpath).split(":"):
        try:
            os.execve(os.path.join(folder, argv[0]), argv, env)  # noqa: S606 - argv, no shell
        except OSError as e:
            errors.append(e)
    raise next(
        (e for e in errors if not isinstance(e, (FileNotFoundError, NotADirectoryError))),
        errors[-1],
    )
