"""One run, one output folder: a lock while the run writes, a staging folder moved into
place at the end, and the sweep of what killed runs left.

Rules enforced:

- a run holds an exclusive ``flock`` on ``<parent>/.<name>.lock`` (opened without
  following symlinks) from before its first output until it has published: a second
  run into the same folder is refused at once (`RunFolderBusy`, exit 2) naming the
  holder's pid and host, which the holder writes into the lock file; the lock dies
  with its process, so a killed run never blocks the next one;
- every output is written into ``<parent>/.<name>.staging-<pid>-<random>`` (same
  filesystem, locked by its writer) and the folder is published by renames: the old
  folder (if any) is renamed aside, the staging folder renamed to the output folder,
  then the old one is removed; so the output folder is a whole run or absent, never a
  mix of two runs nor a run cut short. Entries of the old folder that are not a run's
  own (a decision recorded beside the report, a screenshot) are carried over into the
  new folder before it is published, so publishing never destroys a user's file;
- a verb that writes into an existing run folder (``kernel decision record`` beside the
  report) takes the same lock (`holding_run_folder`): while a run is writing or
  publishing the folder it is refused naming the run, so its file is never lost in
  the swap;
- a staging or set-aside folder whose writer is dead (its pid names no process and its
  lock is free) is removed by the next run into the same parent folder; a live run's
  folder is never touched, nor a folder owned by another user.

Nothing here decides what a run writes: the pipeline asks for staged paths
(`RunFolder.staged`) and calls `RunFolder.publish` once everything is written.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Final

from kernel.effects.sandbox.scratch import remove_tree
from kernel.errors import EffectError, RunFolderBusy

__all__ = ["RunFolder", "holding_run_folder", "sweep_run_folders"]

_NOFOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC
_TEMPORARY: Final = re.compile(r"\.(?P<name>.+)\.(?P<kind>staging|old)-(?P<pid>\d+)-[0-9a-f]{8}")
_LOCK_NAME: Final = ".lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's live process
    return True


def _lock_is_free(folder: Path) -> bool:
    """True when nobody holds the ``.lock`` inside ``folder`` (none there: free)."""
    try:
        fd = os.open(folder / _LOCK_NAME, os.O_RDWR | _NOFOLLOW)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def sweep_run_folders(parent: Path | str) -> list[Path]:
    """Remove the staging and set-aside folders of dead runs from ``parent``.

    A folder is removed only when it is a real folder (not a symlink) owned by this
    user, the pid in its name names no process, and its lock (if any) is free.
    Returns the folders removed (best effort: one that cannot be removed is left).
    """
    removed: list[Path] = []
    try:
        names = [n for n in os.listdir(parent) if n.startswith(".")]
    except OSError:
        return removed
    for name in names:
        match = _TEMPORARY.fullmatch(name)
        if match is None or _alive(int(match["pid"])):
            continue
        entry = Path(parent) / name
        try:
            info = entry.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        if not _lock_is_free(entry):
            continue
        remove_tree(entry)
        if not os.path.lexists(entry):
            removed.append(entry)
    return removed


class RunFolder:
    """The output folder of one run: locked, staged, published whole (module rules).

    Use as a context manager; leaving it without `publish` removes the staging folder
    and leaves the output folder as it was.
    """

    def __init__(self, target: Path | str, *, owned: Iterable[str] = ()) -> None:
        """``owned``: the top-level names a run writes (its files and folders); every
        other entry of an existing output folder is carried over when publishing."""
        self.target = Path(os.path.abspath(target))
        self.owned = frozenset(owned)
        self.parent = self.target.parent
        self.lock_path = self.parent / f".{self.target.name}.lock"
        self.staging = self.parent / self._temporary_name("staging")
        self.published = False
        self._lock_fd: int | None = None
        self._staging_lock: int | None = None

    def _temporary_name(self, kind: str) -> str:
        return f".{self.target.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}"

    def __enter__(self) -> RunFolder:
        try:
            self.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_CREAT | os.O_RDWR | _NOFOLLOW, 0o644)
        except OSError as e:
            raise EffectError(f"{self.lock_path}: cannot open the run lock: {e.strerror}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _read_holder(fd)
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise EffectError(f"{self.lock_path}: cannot lock: {e.strerror}") from e
            raise RunFolderBusy(
                f"{self.target}: another run is writing this output folder ({holder});"
                " wait for it or choose another --output-dir"
            ) from e
        self._lock_fd = fd
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} host {os.uname().nodename}\n".encode(), 0)
            sweep_run_folders(self.parent)
            os.mkdir(self.staging, 0o755)
            self._staging_lock = os.open(
                self.staging / _LOCK_NAME, os.O_CREAT | os.O_RDWR | _NOFOLLOW, 0o600
            )
            fcntl.flock(self._staging_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            self._release()
            raise EffectError(
                f"{self.staging}: cannot create the staging folder: {e.strerror}"
            ) from e
        return self

    def staged(self, final: Path | str) -> Path:
        """Where to write the output that belongs at ``final`` (inside the target)."""
        relative = Path(os.path.abspath(final)).relative_to(self.target)
        return self.staging / relative

    def publish(self) -> None:
        """Move the staging folder into place (module rules); then it is the output folder.

        Raises:
            EffectError: a rename failed; the output folder is then the old one or
                absent, never partial.
        """
        old = self.parent / self._temporary_name("old")
        try:
            if self._staging_lock is not None:
                os.unlink(self.staging / _LOCK_NAME)
            if os.path.lexists(self.target):
                self._carry_over()
                os.rename(self.target, old)
            os.rename(self.staging, self.target)
        except OSError as e:
            raise EffectError(f"{self.target}: cannot publish the run: {e.strerror}") from e
        self.published = True
        _fsync_dir(self.parent)
        if os.path.lexists(old):
            remove_tree(old)

    def _carry_over(self) -> None:
        """Move the old folder's entries this run did not write into the staging folder."""
        for name in os.listdir(self.target):
            if name in self.owned or os.path.lexists(self.staging / name):
                continue
            os.rename(self.target / name, self.staging / name)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            if not self.published and os.path.lexists(self.staging):
                remove_tree(self.staging)
        finally:
            self._release()

    def _release(self) -> None:
        for fd in (self._staging_lock, self._lock_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._staging_lock = self._lock_fd = None


@contextlib.contextmanager
def holding_run_folder(path: Path | str) -> Iterator[None]:
    """Hold the run lock of the folder ``path`` lies in, if it is a run folder (its
    lock file exists); any other folder needs no lock.

    Raises:
        RunFolderBusy: a run holds the folder (the message names its pid and host).
        EffectError: the lock file cannot be opened.
    """
    folder = Path(os.path.abspath(path)).parent
    lock_path = folder.parent / f".{folder.name}.lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | _NOFOLLOW)
    except FileNotFoundError:
        yield
        return
    except OSError as e:
        raise EffectError(f"{lock_path}: cannot open the run lock: {e.strerror}") from e
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            raise RunFolderBusy(
                f"{folder}: a run is writing this folder ({_read_holder(fd)}); write "
                "here once it has finished"
            ) from e
        yield
    finally:
        os.close(fd)


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "holder unknown"


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
