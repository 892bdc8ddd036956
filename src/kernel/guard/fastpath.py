"""Warm runs of ``kernel guard`` that replay the last result when nothing it read changed.

A user runs ``kernel guard`` again and again on a tree that barely changes. The full
run (policy parsing, discovery, the per-file cache) costs far more than the check that
nothing changed, so the verb records, next to its per-file cache, what one invocation
read and printed; the next identical invocation stats the same things and, if all is
unchanged, prints the recorded output without loading the rest of the guard.

Rules this module enforces:

- a record is keyed by the exact command words, the working directory, the Python
  version and `sys.path` (reach-through reads installed modules);
- each path's stat is the one taken when the run read it (a module's from the open
  file it was parsed from, a folder's just before it was listed), when the run kept
  one: a file changed after it was read, or an entry added to a folder after it was
  listed, must not be recorded as what was read (a later stat would record the
  changed file as checked);
- it is replayed only when every file it depends on (each module, each policy file,
  each ``.gitignore``, the baseline, the guard's own source) has the same size, mtime
  and inode, every folder walked has the same mtime (an added, removed or renamed entry
  changes it), and every one of those mtimes is older than the racy window before the
  run started (git's racy-clean rule, from before the first read: a policy file or a
  ``.gitignore`` edited while a long run went on, stat-checked only when it records,
  or a module written again within its mtime's tick after it was read, is dated
  inside it); a marker that matters only by existing
  (``.git`` on the way to the project root) exists still, or is still absent;
- anything unexpected (no record, a damaged file, an unreadable path) means a full run,
  never an error; this module imports nothing beyond `os`, `sys`, `gc`, `time` and
  `marshal`.
"""

from __future__ import annotations

import gc
import marshal
import os
import sys
import time

__all__ = [
    "RECORD_NAME",
    "cache_dirs_of",
    "now_ns",
    "record",
    "replay",
    "replay_cli",
    "run_key",
    "take_words",
    "threads_running",
]

RECORD_NAME = "last-runs.marshal"
_MAGIC = "kernel-guard-runs/2"
_RACY_NS = 2_000_000_000
_KEEP = 16

_PRESENT = -2
_SPLIT_MIN = 1024
"""Below this many stats, forking a child to check half of them costs more than it saves."""

Stat = tuple[str, int, int, int]
"""``(path, size, mtime_ns, inode)``; size -1 stands for "did not exist", `_PRESENT`
for "existed" (anything else about it may change)."""


def run_key(words: list[str], cwd: str) -> tuple[str, ...]:
    """What makes two invocations the same one."""
    return (*words, "\0", cwd, sys.version, *sys.path)


def _stat(path: str) -> Stat:
    try:
        st = os.stat(path)
    except OSError:
        return (path, -1, 0, 0)
    return (path, st.st_size, st.st_mtime_ns, st.st_ino)


def _load(cache_dir: str) -> dict[tuple[str, ...], bytes]:
    """The recorded runs by key, each still marshalled: a replay decodes only its own
    (up to `_KEEP` runs of other command words share the file)."""
    try:
        with open(os.path.join(cache_dir, RECORD_NAME), "rb") as fh:
            # Written by this module into the project's own cache folder; the shape is
            # checked below and any damage means a full run.
            magic, entries = marshal.loads(fh.read())  # noqa: S302
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if magic != _MAGIC or not isinstance(entries, dict):
        return {}
    return entries


def _decode(blob: object) -> object:
    """One recorded run, or None if it is damaged."""
    if not isinstance(blob, bytes):
        return None
    # Thousands of tuples, none of them in a cycle: the collector would only walk them.
    paused = gc.isenabled()
    gc.disable()
    try:
        return marshal.loads(blob)  # noqa: S302 (see _load)
    except (EOFError, ValueError, TypeError):
        return None
    finally:
        if paused:
            gc.enable()


def replay(cache_dir: str, key: tuple[str, ...]) -> tuple[str, int] | None:
    """``(output, exit code)`` of the recorded run, if nothing it read has changed."""
    entry = _decode(_load(cache_dir).get(key))
    if not isinstance(entry, tuple) or len(entry) != 4:
        return None
    saved_ns, stats, output, code = entry
    if (
        not isinstance(saved_ns, int)
        or not isinstance(stats, list)
        or not isinstance(output, str)
        or not isinstance(code, int)
    ):
        return None
    if not _unchanged_split(stats, saved_ns - _RACY_NS):
        return None
    return output, code


def _unchanged(stats: list[object], limit: int) -> bool:
    """Whether every recorded stat is as recorded (and older than ``limit``). The loop
    is the replay's whole cost past the interpreter's start: one `os.stat` per entry
    and nothing else."""
    stat = os.stat
    for item in stats:
        if type(item) is not tuple or len(item) != 4 or type(item[0]) is not str:
            return False
        path, size, mtime, inode = item
        try:
            now = stat(path)
        except (OSError, ValueError):
            if size != -1:
                return False
            continue
        if size == _PRESENT:
            continue
        if mtime >= limit or now.st_mtime_ns != mtime or now.st_size != size or now.st_ino != inode:
            return False
    return True


def threads_running() -> bool:
    """Whether another thread is alive (forking then could deadlock the child on a
    lock that thread held); `threading` is not imported to find out."""
    threading = sys.modules.get("threading")
    return threading is not None and threading.active_count() > 1


def _unchanged_split(stats: list[object], limit: int) -> bool:
    """`_unchanged`, with the second half checked by a forked child when a second core
    is there: the stats are system calls (about 5 us each; Django's tree needs 3,363),
    and a child that answers by its exit status costs about a millisecond."""
    if len(stats) < _SPLIT_MIN or len(os.sched_getaffinity(0)) < 2 or threads_running():
        return _unchanged(stats, limit)
    half = len(stats) // 2
    try:
        pid = os.fork()
    except OSError:
        return _unchanged(stats, limit)
    if not pid:  # the child: answers by its exit status, never returns into the caller
        ok = False
        try:
            ok = _unchanged(stats[half:], limit)
        finally:
            os._exit(0 if ok else 1)
    ok = _unchanged(stats[:half], limit)
    try:
        _pid, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return False
    return ok and os.waitstatus_to_exitcode(status) == 0


def now_ns() -> int:
    """The wall clock the racy window is measured on (file times are wall times)."""
    return time.time_ns()


def record(
    cache_dir: str,
    key: tuple[str, ...],
    paths: list[str],
    output: str,
    code: int,
    *,
    present: list[str] | None = None,
    seen: dict[str, tuple[int, int, int]] | None = None,
    started_ns: int | None = None,
) -> None:
    """Remember this invocation's output and the stats of everything it read, and
    whether each of ``present`` exists (what it holds does not matter: ``.git``).
    ``seen`` holds ``(size, mtime_ns, inode)`` of paths as they were read; the
    others are stat-checked now. ``started_ns`` (`now_ns` before the run read
    anything) dates the record for the racy window; default now."""
    entries = _load(cache_dir)
    entries.pop(key, None)
    while len(entries) >= _KEEP:
        entries.pop(next(iter(entries)))
    known = seen or {}
    stats: list[Stat] = []
    for path in dict.fromkeys(paths):
        got = known.get(path)
        stats.append(_stat(path) if got is None else (path, got[0], got[1], got[2]))
    for path in dict.fromkeys(present or ()):
        stats.append((path, _PRESENT if os.path.lexists(path) else -1, 0, 0))
    when = now_ns() if started_ns is None else started_ns
    entries[key] = marshal.dumps((when, stats, output, code))
    try:
        os.makedirs(cache_dir, exist_ok=True)
        tmp = os.path.join(cache_dir, f"{RECORD_NAME}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            marshal.dump((_MAGIC, entries), fh)
        os.replace(tmp, os.path.join(cache_dir, RECORD_NAME))
    except OSError:
        pass  # an optimisation only: failing to record changes no result


def cache_dirs_of(words: list[str]) -> list[str] | None:
    """The cache folders a record of these words may be in: ``--cache-dir`` as given,
    else the ``.kernel-guard-cache`` of every folder from here up (the project root
    holds it); None when the run uses no cache."""
    if any(w in ("--no-cache", "-h", "--help") or w.startswith("--write-baseline") for w in words):
        return None
    for i, word in enumerate(words):
        if word == "--cache-dir" and i + 1 < len(words):
            return [words[i + 1]]
        if word.startswith("--cache-dir="):
            return [word.split("=", 1)[1]]
    here = os.getcwd()
    found = []
    while True:
        folder = os.path.join(here, ".kernel-guard-cache")
        if os.path.isdir(folder):
            found.append(folder)
        parent = os.path.dirname(here)
        if parent == here:
            return found
        here = parent


def replay_cli(words: list[str]) -> int | None:
    """Print the recorded output of an unchanged warm run; None means run in full
    (at once when these words already missed in this process: the console script
    asks before `kernel.effects.cli.main` does)."""
    if _PENDING and _PENDING[-1] == words:
        return None
    folders = cache_dirs_of(words)
    if folders is None:
        return None
    key = run_key(words, os.getcwd())
    for folder in folders:
        hit = replay(folder, key)
        if hit is not None:
            sys.stdout.write(hit[0])
            return hit[1]
    _PENDING[:] = [words]  # the full run records itself under these words
    return None


_PENDING: list[list[str]] = []


def take_words() -> list[str] | None:
    """The command words of a run that `replay_cli` could not replay (once)."""
    return _PENDING.pop() if _PENDING else None
