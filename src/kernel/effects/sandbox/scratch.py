"""Private scratch folders: the sandboxes' trees and the runner's own spill folders.

Rules enforced:

- the scratch root is per user (``$TMPDIR/kernel-sandboxes-<uid>``), created ``0700``
  and verified before every use through a descriptor opened without following
  symlinks: a directory, owned by this user, no access for group or others; one
  that fails is refused (`UnsafeScratchError`) and nothing is written through it
  (a local user who pre-creates it, or plants symlinks in it, gains nothing);
- every scratch folder is ``<kind>-<pid>-<random>``, locked by its owner with
  ``flock`` on a ``.lock`` file opened without following symlinks, and removed on
  close, also on failure;
- a folder whose owner process is gone is swept by the next scratch folder created
  (at once when the pid in its name is dead, after `_STALE_AFTER_S` otherwise, so a
  folder is never swept between its creation and its lock).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from kernel.errors import EffectError, UnsafeScratchError

__all__ = ["MOUNT_POINTS", "checked_root", "mount_points", "private_tempdir", "scratch_root"]

_STALE_AFTER_S: Final = 30.0
_NOFOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC


def scratch_root() -> Path:
    """Parent of every sandbox scratch directory (``$TMPDIR/kernel-sandboxes-<uid>``).

    Namespace sandboxes mount an empty read-only tmpfs over it: nothing below it is
    visible to a sandboxed command.
    """
    return Path(tempfile.gettempdir()) / f"kernel-sandboxes-{os.geteuid()}"


def checked_root() -> Path:
    """`scratch_root`, created ``0700`` if missing, verified private to this user.

    Raises:
        UnsafeScratchError: it is a symlink or not a directory, is owned by another
            user, or grants any access to group or others.
        EffectError: it cannot be created or opened.
    """
    root = scratch_root()
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(root, 0o700)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
    except OSError as e:
        if os.path.islink(root):
            raise UnsafeScratchError(f"{root}: scratch root is a symlink; refused") from e
        raise EffectError(f"{root}: cannot create the scratch root: {e.strerror}") from e
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    if info.st_uid != os.geteuid():
        raise UnsafeScratchError(
            f"{root}: scratch root is owned by uid {info.st_uid}, not {os.geteuid()}; refused"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise UnsafeScratchError(
            f"{root}: scratch root has mode {stat.S_IMODE(info.st_mode):04o}, not 0700; refused"
        )
    return root


@contextlib.contextmanager
def private_tempdir(kind: str) -> Iterator[Path]:
    """A new folder under `scratch_root`, hidden from every namespace sandbox.

    For the runner's own scratch and spill folders. Named ``<kind>-<pid>-<random>``,
    locked by this process while in use (a ``.lock`` file inside) and removed on
    exit, also on failure; one left by a killed process is swept.

    Raises:
        UnsafeScratchError: the scratch root is not private to this user.
        EffectError: the folder cannot be created.
        ValueError: ``kind`` is not alphanumeric.
    """
    if not kind.isalnum():
        raise ValueError(f"scratch kind must be alphanumeric, got {kind!r}")
    scratch = Scratch(kind)
    try:
        yield scratch.path
    finally:
        scratch.close()


MOUNT_POINTS: Final = "ns-mount-points"
"""The scratch root's one kept folder: each namespaced run mounts its tmpfs of mount
points on it, inside its own mount namespace (never a folder of the run: removing a
folder that was a mount point in a namespace being torn down took 3-20 ms, on the run's
critical path). Never swept: it has no lock."""


def mount_points(root: Path) -> tuple[str, str]:
    """`MOUNT_POINTS` of the (checked) scratch ``root``, made on first use, and which
    folder it is (``<dev>:<inode>``). A sandbox prepared on a folder since removed (a
    temp cleaner's work) can take no run: a request names the folder it found, and a
    prepared sandbox is taken only by a request that agrees with it (`WARM_KEY`). The
    folder is held open so its inode is not reused by the one made after it.

    Raises:
        EffectError: it is not a folder of this user.
    """
    points = root / MOUNT_POINTS
    with contextlib.suppress(FileExistsError):
        points.mkdir(mode=0o700)
    info = points.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise EffectError(f"{points}: not a folder of this user")
    which = f"{info.st_dev}:{info.st_ino}"
    with _HELD_LOCK:
        held = _HELD_POINTS.get(str(points))
        if held is None or held[1] != which:
            try:
                fd = os.open(points, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
            except OSError as e:
                raise EffectError(f"{points}: cannot open: {e.strerror}") from e
            if held is not None:
                os.close(held[0])
            _HELD_POINTS[str(points)] = (fd, which)
    return str(points), which


_HELD_POINTS: dict[str, tuple[int, str]] = {}
"""The mount points folders in use, by path: an open descriptor and ``<dev>:<inode>``."""
_HELD_LOCK = threading.Lock()


def _new_lock_in_fork() -> None:
    """A forked child's own lock: another thread of the parent may have held it."""
    global _HELD_LOCK  # noqa: PLW0603 - the child's own lock, made once at the fork
    _HELD_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_fork)


class Scratch:
    """A locked scratch directory: removed on close; swept if its owner died.

    ``folder=False`` (an overlay run: everything of it lives in its namespaces) sweeps
    the root as well but makes no folder: ``path`` is a name only. Making and removing
    a folder and its lock file cost ~4 ms a run on a filesystem mounted ``discard``
    (each removal trims synchronously), on the run's critical path."""

    def __init__(self, kind: str = "sbx", *, folder: bool = True) -> None:
        root = checked_root()
        self._lock = -1
        try:
            _sweep(root)
            if not folder:
                self.path = root / f"{kind}-{os.getpid()}-{os.urandom(6).hex()}"
                return
            self.path = Path(tempfile.mkdtemp(prefix=f"{kind}-{os.getpid()}-", dir=root))
            self._lock = os.open(self.path / ".lock", os.O_CREAT | os.O_RDWR | _NOFOLLOW, 0o600)
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            raise EffectError(f"{root}: cannot create a sandbox scratch dir: {e.strerror}") from e

    def close(self) -> None:
        """Remove the directory, then release its lock."""
        if self._lock >= 0:
            remove_tree(self.path)
            os.close(self._lock)


def _owner_gone(name: str) -> bool:
    """True when the pid in ``<kind>-<pid>-<random>`` names no live process."""
    parts = name.split("-")
    if len(parts) < 3 or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, another user's
    return False


def _sweep(root: Path) -> None:
    """Remove scratch dirs whose owner is gone (lock free, and dead or not brand new)."""
    now = time.time()
    for entry in root.iterdir():
        try:
            info = entry.lstat()
            if not stat.S_ISDIR(info.st_mode):
                continue
            if now - info.st_mtime < _STALE_AFTER_S and not _owner_gone(entry.name):
                continue
            fd = os.open(entry / ".lock", os.O_RDWR | _NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        remove_tree(entry)
        os.close(fd)


def remove_tree(path: Path) -> None:
    """Remove ``path`` (never following symlinks), unlocking mode-000 overlay work dirs."""

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
    else:  # pragma: no cover - version dependent
        shutil.rmtree(path, onerror=lambda f, p, e: unlock(f, p, e[1]))


def copy_tree(source: Path | None, target: Path, *, link: bool = False) -> None:
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
