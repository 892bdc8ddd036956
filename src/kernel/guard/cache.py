"""The guard's caches: per-file results and the effect map of installed code.

Rules this module enforces:

- per-file results (imports and findings) live in one marshal file per (policy hash,
  tool version, environment), keyed by the project-relative path, with the file's
  size, mtime, inode and content SHA-256; the most recent `KEEP_CACHE_FILES` are kept;
  of the effect maps (one per tool version), the most recent `KEEP_EFFECT_MAPS`;
- the effect map of installed code (`kernel.guard.effects`) lives in one marshal file
  per tool version, shared by every policy: a summary is reused when its file's stat
  is unchanged and older than the racy window, else when its content digest is;
- the cache folder ignores itself (its own ``.gitignore`` of ``*``);
- a missing, damaged or unwritable cache is a cold run, never an error: the caches
  are an optimisation and change no result.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kernel.guard import effects, installed
from kernel.guard.scan import ImportFact, RawFinding

if TYPE_CHECKING:  # `kernel.guard.graph` is loaded only by a check that reads the graph
    from kernel.guard.graph import Derived

__all__ = [
    "KEEP_CACHE_FILES",
    "KEEP_EFFECT_MAPS",
    "RACY_NS",
    "EffectCache",
    "FileCache",
    "gc_paused",
]

RACY_NS = 2_000_000_000
"""A file whose mtime is this close to the cache's writing may have changed unseen."""
KEEP_CACHE_FILES = 8
KEEP_EFFECT_MAPS = 2
_CACHE_MAGIC = "kernel-guard-cache/2"
_EFFECTS_MAGIC = "kernel-guard-effects/2"
_RUNS_FILE = "last-runs.marshal"  # `kernel.guard.fastpath`'s, never pruned here

Entry = tuple[int, int, int, str, list[ImportFact], list[RawFinding]]
"""``(size, mtime_ns, inode, content sha256, imports, findings)``."""
Fingerprint = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]
"""Every file's content digest and the display mapping: what whole-tree findings read."""


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector: syntax trees and loaded caches hold no reference
    cycles and arrive in many small containers, which it would traverse again and
    again while they are built."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _load(file: str | None, magic: str) -> tuple[object, ...] | None:
    if file is None:
        return None
    try:
        with open(file, "rb") as fh, gc_paused():
            # Written by this tool into the project's own ignored folder; the shape is
            # checked by the caller and any damage means a cold run.
            got = marshal.loads(fh.read())  # noqa: S302
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not isinstance(got, tuple) or not got or got[0] != magic:
        return None
    return got


def _store(file: str, payload: Any) -> None:
    # Paths as strings and `os` calls: a cold run never imports `pathlib` (with
    # `urllib.parse` and `ipaddress`, about 3 ms).
    try:
        folder = os.path.dirname(file)
        os.makedirs(folder, exist_ok=True)
        marker = os.path.join(folder, ".gitignore")
        if not os.path.exists(marker):
            # The cache ignores itself, as ruff's and pytest's do.
            with open(marker, "w", encoding="utf-8") as fh:
                fh.write("# created by kernel guard\n*\n")
        tmp = f"{file}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            marshal.dump(payload, fh)
        os.replace(tmp, file)
    except OSError:
        pass  # the cache is an optimisation; failing to write it changes no result


class FileCache:
    """One marshal file per (policy hash, tool version, environment): path -> `Entry`."""

    def __init__(self, directory: str | None, key: str) -> None:
        self.file = None if directory is None else os.path.join(directory, f"{key}.marshal")
        self.entries: dict[str, Entry] = {}
        self.derived: tuple[Fingerprint, list[Derived]] = (((), ()), [])
        self.saved_ns = 0
        self.dirty = False
        got = _load(self.file, _CACHE_MAGIC)
        if got is not None and len(got) == 4 and isinstance(got[2], dict):
            self.saved_ns, self.entries, self.derived = got[1], got[2], got[3]  # type: ignore[assignment]

    def save(self, keep: set[str]) -> None:
        """Write the entries of ``keep`` (the files of this run) if anything changed."""
        if self.file is None or not (self.dirty or set(self.entries) - keep):
            return
        entries = {k: v for k, v in self.entries.items() if k in keep}
        _store(self.file, (_CACHE_MAGIC, time.time_ns(), entries, self.derived))
        _prune(os.path.dirname(self.file), False, KEEP_CACHE_FILES)


class EffectCache:
    """The effect map's summaries of installed modules (`kernel.guard.effects`) and
    their import tables (`kernel.guard.installed`), loaded at the start of a check and
    written back if either grew."""

    def __init__(self, directory: str | None, version: str) -> None:
        self.file = (
            None if directory is None else os.path.join(directory, f"effects-{version}.marshal")
        )
        got = _load(self.file, _EFFECTS_MAGIC)
        if got is not None and len(got) == 4 and isinstance(got[1], int):
            saved = got[2] if isinstance(got[2], dict) else {}
            effects.import_summaries(saved, trusted_before_ns=got[1] - RACY_NS)
            installed.import_tables(got[3], trusted_before_ns=got[1] - RACY_NS)
        # What was just loaded is not new.
        effects.take_new()
        installed.take_new_tables()

    def save(self) -> None:
        """Write the summaries and import tables if this process read any (or received
        them from the workers that parsed)."""
        grew = bool(effects.take_new())
        grew = bool(installed.take_new_tables()) or grew  # both marks are taken
        if self.file is not None and grew:
            saved = (effects.export_summaries(), installed.export_tables())
            _store(self.file, (_EFFECTS_MAGIC, time.time_ns(), *saved))
            _prune(os.path.dirname(self.file), True, KEEP_EFFECT_MAPS)


def _prune(folder: str, effect_maps: bool, keep: int) -> None:
    """Remove all but the ``keep`` most recent effect maps, or per-file caches (each
    tool version writes its own: an edited guard leaves the old ones behind)."""
    with contextlib.suppress(OSError):
        with os.scandir(folder) as entries:
            found = [
                (entry.stat().st_mtime_ns, entry.path)
                for entry in entries
                if entry.name.endswith(".marshal")
                and entry.name != _RUNS_FILE
                and entry.name.startswith("effects-") == effect_maps
            ]
        # Oldest first (ties by name, as the listing order is no order).
        for _mtime, stale in sorted(found)[:-keep]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)
