"""Parsing the files the cache cannot serve: in this process, or split over forked ones.

Rules this module enforces:

- with one job, fewer than `PARALLEL_MIN_FILES` files, or other threads running in
  this process (forking a threaded process can deadlock the child), every file is
  parsed here;
- otherwise the files are split by size into one share per job (largest first, each
  to the lightest share: parsing time follows size); a child process is forked for
  every share but the first before this process parses that one, and each child
  sends its results back through a pipe (marshal), with the effect-map summaries and
  installed modules' import tables it computed; results are put back at their file's
  index, so the report is the one a single job gives whatever order the children
  finish in;
- a child that fails (killed, crashed, damaged output) has its share parsed here: a
  file is never lost and a failing child is never an error;
- a file's imports are returned only when the check reads the import graph (a
  ``transitive`` or ``layers`` rule): else nothing reads them, and they are neither
  sent back by a child nor kept in the results and the cache.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import os
from collections.abc import Callable, Sequence

from kernel.guard import effects, installed
from kernel.guard.cache import gc_paused
from kernel.guard.fastpath import threads_running
from kernel.guard.model import Rule, ViolationCode
from kernel.guard.patterns import CallMatcher
from kernel.guard.scan import ImportFact, RawFinding, scan_source
from kernel.records.digest import sha256_bytes

__all__ = ["PARALLEL_MIN_FILES", "Done", "Job", "scan_all", "split_by_size"]

PARALLEL_MIN_FILES = 64
"""Below this many files to parse, forking costs more than it saves."""

Job = tuple[str, str, bool, tuple[Rule, ...], str, int]
"""``(path, module, is_package, rules, cached digest or "", size)``."""
Done = tuple[str, tuple[int, int, int] | None, list[ImportFact], list[RawFinding]]
"""``(digest, (size, mtime_ns, inode) or None if unreadable, imports, findings)``."""
MatcherFor = Callable[[tuple[Rule, ...]], CallMatcher]

_TRUST = 1 << 62  # a worker's summaries were read just now: trusted as this process's


def _scan_one(job: Job, matcher: CallMatcher | None, keep_imports: bool) -> Done:
    path, module, is_package, rules, known, _size = job
    try:
        data, st = _read(path)
    except OSError as e:
        return "", None, [], [(1, 1, ViolationCode.UNPARSEABLE.value, "", f"cannot read: {e}")]
    digest = sha256_bytes(data)
    stat = (st.st_size, st.st_mtime_ns, st.st_ino)
    if digest == known:
        return digest, stat, [], []  # the caller serves the cached result
    imports, findings = scan_source(
        data, module=module, is_package=is_package, rules=rules, matcher=matcher, filename=path
    )
    return digest, stat, imports if keep_imports else [], findings


def _read(path: str) -> tuple[bytes, os.stat_result]:
    """The file's bytes and its stat, taken from the open file (one path lookup and
    no buffered reader: a cold run reads every file of the project once).

    Raises:
        OSError: the file cannot be opened or read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        size = st.st_size
        data = os.read(fd, size + 1)
        if len(data) != size:
            # It grew since the stat, or a read returned less than asked for: on until
            # the end of the file. Exactly the stat's size, one byte less than asked
            # for, is the whole file as stat'ed (no second read to see the end: one
            # system call less per file of a cold run).
            chunks = [data]
            while chunk := os.read(fd, size + 1):
                chunks.append(chunk)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    return data, st


def split_by_size(sizes: Sequence[int], shares: int) -> list[list[int]]:
    """Indexes of ``sizes`` in ``shares`` groups of near-equal total size (largest
    first to the lightest group), each group in index order."""
    groups: list[list[int]] = [[] for _ in range(shares)]
    totals = [0] * shares
    for index in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        lightest = totals.index(min(totals))
        groups[lightest].append(index)
        totals[lightest] += sizes[index]
    return [sorted(group) for group in groups]


def scan_all(
    todo: Sequence[Job], matcher_for: MatcherFor, jobs: int | None, *, imports: bool = True
) -> list[Done]:
    """The result of every job of ``todo``, in order (see the module's rules); without
    ``imports`` (no rule reads the import graph) each file's imports are left out."""
    workers = jobs if jobs is not None else len(os.sched_getaffinity(0))
    if workers <= 1 or len(todo) < PARALLEL_MIN_FILES or threads_running():
        with gc_paused():
            return [_scan_one(job, matcher_for(job[3]), imports) for job in todo]
    shares = split_by_size([job[5] for job in todo], workers)
    children = [_fork(todo, share, matcher_for, imports) for share in shares[1:]]
    out: list[Done | None] = [None] * len(todo)
    with gc_paused():
        for index in shares[0]:
            out[index] = _scan_one(todo[index], matcher_for(todo[index][3]), imports)
    for share, (pid, reader) in zip(shares[1:], children, strict=True):
        got = _collect(pid, reader, len(share))
        if got is None:  # the child failed: its share is parsed here
            with gc_paused():
                got = [_scan_one(todo[i], matcher_for(todo[i][3]), imports) for i in share]
        for index, done in zip(share, got, strict=True):
            out[index] = done
    return [done for done in out if done is not None]


def _fork(
    todo: Sequence[Job], share: list[int], matcher_for: MatcherFor, imports: bool
) -> tuple[int, int]:
    """Start a child that parses ``share`` and writes its results to a pipe."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid:
        os.close(writer)
        return pid, reader
    code = 1
    try:  # the child: never returns into the caller's code
        os.close(reader)
        gc.disable()
        done = [_scan_one(todo[i], matcher_for(todo[i][3]), imports) for i in share]
        with os.fdopen(writer, "wb") as fh:
            marshal.dump((done, effects.take_new(), installed.take_new_tables()), fh)
        code = 0
    finally:
        os._exit(code)


def _collect(pid: int, reader: int, count: int) -> list[Done] | None:
    """A child's results, or None if it failed."""
    with os.fdopen(reader, "rb") as fh:
        blob = fh.read()
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    try:
        # Written by the child this process forked, read back from its own pipe.
        done, summaries, tables = marshal.loads(blob)  # noqa: S302
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(done, list) or len(done) != count or not isinstance(summaries, dict):
        return None
    effects.import_summaries(summaries, trusted_before_ns=_TRUST, new=True)
    installed.import_tables(tables, trusted_before_ns=_TRUST, new=True)
    return done
