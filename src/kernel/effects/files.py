"""File effects: read JSON documents, write atomically, confine outputs to a root.

Rules enforced:

- every write is atomic: an unnamed file (``O_TMPFILE``) in the destination folder,
  written, fsynced, linked under a temporary name and renamed over the target, then
  the folder fsynced; a reader sees the old file or the new one, never a half-written
  one, also when the writer is killed;
- temporary files never outlive their writer: while written they have no name (a
  killed writer leaves nothing), they are named only between link and rename, are
  removed on every exception (``KeyboardInterrupt`` included), and one left by a dead
  writer (its pid is in the name) is swept by the next write to that folder; where
  ``O_TMPFILE`` is unsupported a named ``O_EXCL | O_NOFOLLOW`` file is used instead;
- inputs are regular files: a FIFO, device or socket is refused before it is read
  (opened non-blocking, checked with ``fstat``), so an input never blocks (the readers
  live in `kernel.effects.inputs`, which imports no `pathlib`, and are re-exported here);
- outputs are confined to an output root (``results/`` by default): a path that
  escapes it through ``..``, an absolute path elsewhere, or a symlink anywhere on the
  way is refused before anything is written, and so is a path the filesystem cannot
  hold (a folder on the way that is a file, a name too long) and one that names a
  FIFO, device or socket;
- an output may never overwrite one of the command's inputs;
- a document with a duplicate object key is refused (I-JSON, RFC 7493 §2.3): parsers
  disagree on which value wins, so the file would mean two different documents;
- every failure is a `kernel.errors.EffectError` (or `ConfigError` for unusable
  content) whose message names the file; nothing escapes as a raw OSError.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from collections.abc import Iterable
from pathlib import Path

from kernel.effects.inputs import KINDS as _KINDS
from kernel.effects.inputs import check_input, open_input, read_input
from kernel.errors import ConfigError, EffectError, KernelError

# The JSON reader and writer (orjson, json, `kernel.records.identity`) are imported by the
# functions that use them: the guard reads its policy through `read_input` and would
# otherwise load a JSON encoder it never calls (orjson alone is 3-4 ms of a cold run).

__all__ = [
    "DEFAULT_OUTPUT_ROOT",
    "OutputRoot",
    "atomic_write_bytes",
    "check_input",
    "load_json",
    "open_input",
    "read_input",
    "refuse_outputs_on_inputs",
    "sweep_temporaries",
    "write_canonical_json",
]

DEFAULT_OUTPUT_ROOT = Path("results")

# The temporary file's name has a fixed length, so any target name the filesystem
# accepts also has a temporary name it accepts (checked before the first write):
# ".kernel-<pid, 10 digits>-<8 hex>.tmp". The pid lets the next writer sweep it.
_TMP_PREFIX = ".kernel-"
_TMP_SUFFIX = ".tmp"
_TMP_NAME = re.compile(r"\.kernel-(\d{10})-[0-9a-f]{8}\.tmp")
_LEGACY_TMP_NAME = re.compile(r"\.kernel-[A-Za-z0-9_]{8}\.tmp")
_LEGACY_STALE_S = 3600.0


def load_json(path: Path | str, *, what: str = "JSON document") -> object:
    """Read and decode one JSON document.

    Raises:
        EffectError: the file is missing, unreadable or not a regular file (message
            names it).
        ConfigError: the bytes are not JSON (message names file and position), or an
            object repeats a key.
    """
    import orjson

    path = Path(path)
    data = read_input(path, what=what)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e})") from e
    _refuse_duplicate_keys(path, data, value)
    return value


def _refuse_duplicate_keys(path: Path, data: bytes, value: object) -> None:
    """orjson keeps the last of two equal keys silently; refuse such a document."""
    import json

    from kernel.records.identity import canonical_json

    if not isinstance(value, dict | list):
        return
    # Fast path: a canonical document (what kernel writes) has no duplicate key.
    try:
        if canonical_json(value) == data.strip(b" \t\r\n"):
            return
    except KernelError:
        pass  # not canonically encodable (e.g. a float): the strict parse below decides

    def unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys):
            repeated = next(k for i, k in enumerate(keys) if k in keys[:i])
            raise ConfigError(f"{path}: not valid JSON (duplicate key {repeated!r})")
        return dict(pairs)

    try:
        json.loads(data, object_pairs_hook=unique)
    except RecursionError as e:
        raise ConfigError(f"{path}: not valid JSON (nested too deeply)") from e


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (unnamed temp file + fsync + link + rename
    + dir fsync).

    Raises:
        EffectError: the write failed; the previous file (if any) is untouched and
            no temporary file is left behind.
    """
    path = Path(path)
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EffectError(f"{path}: cannot create a file in {folder}: {e.strerror}") from e
    sweep_temporaries(folder)
    # os.urandom is what `secrets.token_hex` reads; importing `secrets` (and hmac with
    # it) cost every cold CLI start about 3 ms for these 8 hex digits.
    tmp_name = folder / f"{_TMP_PREFIX}{os.getpid():010d}-{os.urandom(4).hex()}{_TMP_SUFFIX}"
    named = False
    try:
        try:
            # Mode 0666 so the umask applies, as for any file a tool writes (0644
            # under 022); mkstemp would force 0600.
            fd = os.open(folder, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o666)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            # No O_TMPFILE on this filesystem: a named file from the start.
            flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp_name, flags, 0o666)
            named = True
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            if not named:
                # linkat(AT_SYMLINK_FOLLOW) of the /proc magic link names the unnamed
                # file (os.link uses plain link(2), which would not follow it, unless
                # a dir fd is passed).
                folder_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    os.link(
                        f"/proc/self/fd/{handle.fileno()}",
                        tmp_name.name,
                        dst_dir_fd=folder_fd,
                        follow_symlinks=True,
                    )
                finally:
                    os.close(folder_fd)
                named = True
        os.replace(tmp_name, path)
    except BaseException as e:
        if named:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
        if isinstance(e, OSError):
            raise EffectError(f"{path}: write failed: {e.strerror}") from e
        raise
    _fsync_dir(folder)


def sweep_temporaries(folder: Path | str) -> None:
    """Remove temporary files of dead writers from ``folder`` (best effort).

    A temporary name carries its writer's pid: the file is removed when no process
    has that pid. Names of the earlier, pid-less form are removed once an hour old.
    """
    try:
        names = [n for n in os.listdir(folder) if n.startswith(_TMP_PREFIX)]
    except OSError:
        return
    now = time.time()
    for name in names:
        entry = os.path.join(folder, name)
        if (match := _TMP_NAME.fullmatch(name)) is not None:
            if _alive(int(match.group(1))):
                continue
        elif _LEGACY_TMP_NAME.fullmatch(name) is None:
            continue
        try:
            info = os.lstat(entry)
            if not stat.S_ISREG(info.st_mode):
                continue
            if match is None and now - info.st_mtime < _LEGACY_STALE_S:
                continue
            os.unlink(entry)
        except OSError:
            continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's live process
    return True


def write_canonical_json(path: Path | str, value: object) -> None:
    """Atomically write ``value`` as canonical JSON followed by one newline."""
    from kernel.records.identity import canonical_json

    atomic_write_bytes(path, canonical_json(value) + b"\n")


def _fsync_dir(folder: Path) -> None:
    # The rename is durable only once the directory entry is; some filesystems
    # refuse O_RDONLY fsync on directories, which is harmless to skip.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def refuse_outputs_on_inputs(outputs: Iterable[Path], inputs: Iterable[Path]) -> None:
    """Refuse any output that would land on a file the run reads, before the first write.

    Each output is compared with each input by resolved path (symlinks followed) and by
    ``(st_dev, st_ino)`` when both exist (a hard link or a bind mount is the same file);
    an input folder (a baseline, a candidate folder) covers every file under it.

    Raises:
        EffectError: an output names an input (the message names both).
    """
    sources = [(Path(i), Path(os.path.realpath(i)), _identity(Path(i))) for i in inputs]
    for output in outputs:
        real = Path(os.path.realpath(output))
        identity = _identity(output)
        for source, source_real, source_identity in sources:
            inside = source_real.is_dir() and real.is_relative_to(source_real)
            same = real == source_real or (identity is not None and identity == source_identity)
            if inside or same:
                raise EffectError(f"{output}: output would land on the input {source}")


class OutputRoot:
    """A folder that a command may write into, and nothing outside it.

    ``resolve`` checks a requested output path *before* anything is written.
    """

    def __init__(self, root: Path | str = DEFAULT_OUTPUT_ROOT) -> None:
        self.root = Path(root)

    def resolve(self, requested: Path | str, *, inputs: Iterable[Path | str] = ()) -> Path:
        """Return the absolute output path for ``requested``, or refuse it.

        A relative path is taken relative to the current directory (as a user
        typed it), and must land inside the root.

        Raises:
            EffectError: the path escapes the root (``..``, absolute elsewhere, a
                symlink on the way), is the root itself or a folder, cannot be a file
                (a file on the way, a name too long), or lands on an input (the
                same file, or under an input folder: `refuse_outputs_on_inputs`).
        """
        requested = Path(requested)
        root = Path(os.path.abspath(self.root))
        target = Path(os.path.abspath(requested))
        if ".." in requested.parts:
            raise EffectError(f"{requested}: output path may not contain '..'")
        if target == root or not target.is_relative_to(root):
            raise EffectError(f"{requested}: output must be inside the output root {self.root}/")
        try:
            self._check_way(requested, root, target)
            refuse_outputs_on_inputs([target], [Path(source) for source in inputs])
        except EffectError:
            raise
        except OSError as e:
            # e.g. a name longer than the filesystem allows: refused before any write.
            raise EffectError(f"{requested}: unusable output path: {e.strerror}") from e
        return target

    @staticmethod
    def _check_way(requested: Path, root: Path, target: Path) -> None:
        """Refuse a symlink on the way, a folder on the way that is not a folder, and a
        target that is a folder; ``lstat`` raises for names the filesystem refuses."""
        probe = root
        for part in ("", *target.relative_to(root).parts):
            probe = probe / part if part else probe
            try:
                mode = probe.lstat().st_mode
            except FileNotFoundError:
                # Nothing from here on exists: only the names' lengths can be checked.
                _check_names(requested, probe.parent, target)
                return
            # No component from the root down may be a symlink: it could point anywhere.
            if stat.S_ISLNK(mode):
                raise EffectError(
                    f"{requested}: {probe} is a symlink; refusing to write through it"
                )
            if probe != target and not stat.S_ISDIR(mode):
                raise EffectError(f"{requested}: {probe} is not a folder")
        if stat.S_ISDIR(mode):
            raise EffectError(f"{requested}: is a directory")
        # A FIFO, device or socket where the output goes: renaming over it would replace
        # a special file, writing into it could block; refuse like an input.
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise EffectError(f"{requested}: is {kind}, not a regular file")


def _check_names(requested: Path, existing: Path, target: Path) -> None:
    """Refuse a name below the folder ``existing`` that the filesystem would not accept,
    so that writing it never fails after other outputs were written."""
    try:
        limit = os.pathconf(existing, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    for part in target.relative_to(existing).parts:
        if len(os.fsencode(part)) > limit:
            raise EffectError(f"{requested}: the name {part[:32]}... is longer than {limit} bytes")
