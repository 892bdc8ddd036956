"""File effects: read JSON documents, write atomically, confine outputs to a root.

Rules enforced:

- every write is atomic: a temporary file in the destination folder, flushed and
  fsynced, then renamed over the target, then the folder fsynced; a reader sees the
  old file or the new one, never a half-written one, also when the writer is killed;
- outputs are confined to an output root (``results/`` by default): a path that
  escapes it through ``..``, an absolute path elsewhere, or a symlink anywhere on the
  way is refused before anything is written;
- an output may never overwrite one of the command's inputs;
- every failure is a `kernel.errors.EffectError` (or `ConfigError` for unusable
  content) whose message names the file; nothing escapes as a raw OSError.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import orjson

from kernel.errors import ConfigError, EffectError
from kernel.identity import canonical_json

__all__ = [
    "DEFAULT_OUTPUT_ROOT",
    "OutputRoot",
    "atomic_write_bytes",
    "load_json",
    "write_canonical_json",
]

DEFAULT_OUTPUT_ROOT = Path("results")


def load_json(path: Path | str, *, what: str = "JSON document") -> object:
    """Read and decode one JSON document.

    Raises:
        EffectError: the file is missing or unreadable (message names it).
        ConfigError: the bytes are not JSON (message names file and position).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as e:
        raise EffectError(f"{path}: {what} not found") from e
    except IsADirectoryError as e:
        raise EffectError(f"{path}: {what} is a directory, not a file") from e
    except OSError as e:
        raise EffectError(f"{path}: cannot read {what}: {e.strerror}") from e
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e})") from e


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file + fsync + rename + dir fsync).

    Raises:
        EffectError: the write failed; the previous file (if any) is untouched and
            no temporary file is left behind.
    """
    path = Path(path)
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise EffectError(f"{path}: cannot create a file in {folder}: {e.strerror}") from e
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if isinstance(e, OSError):
            raise EffectError(f"{path}: write failed: {e.strerror}") from e
        raise
    _fsync_dir(folder)


def write_canonical_json(path: Path | str, value: object) -> None:
    """Atomically write ``value`` as canonical JSON followed by one newline."""
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
                symlink on the way), is the root itself, or names an input.
        """
        requested = Path(requested)
        root = Path(os.path.abspath(self.root))
        target = Path(os.path.abspath(requested))
        if ".." in requested.parts:
            raise EffectError(f"{requested}: output path may not contain '..'")
        if target == root or not target.is_relative_to(root):
            raise EffectError(f"{requested}: output must be inside the output root {self.root}/")
        # No component from the root down may be a symlink: it could point anywhere.
        probe = root
        for part in ("", *target.relative_to(root).parts):
            probe = probe / part if part else probe
            if probe.is_symlink():
                raise EffectError(
                    f"{requested}: {probe} is a symlink; refusing to write through it"
                )
        if target.is_dir():
            raise EffectError(f"{requested}: is a directory")
        for source in inputs:
            source_path = Path(source)
            if source_path.exists() and target.exists() and source_path.samefile(target):
                raise EffectError(f"{requested}: output would overwrite the input {source}")
            if Path(os.path.abspath(source_path)) == target:
                raise EffectError(f"{requested}: output would overwrite the input {source}")
        return target
