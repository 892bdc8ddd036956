"""Checking a source tree: file discovery, module names, the cache, transitive reach.

Rules this module enforces:

- every ``*.py`` file under the import root is a module named by its path
  (``a/b/__init__.py`` is ``a.b``); hidden directories and ``__pycache__`` are skipped;
- a file is scanned in full when a rule covers its module, for imports only when a
  ``transitive`` or ``layers`` rule needs the import graph, and not at all otherwise;
- per-file results (imports and findings) are cached by SHA-256 of the file's content
  (`kernel.identity.sha256_bytes`) in a cache file keyed by the policy hash and the
  tool version (a hash of the guard's own source); a file whose size, mtime and inode
  are unchanged since an entry older than the racy window is not re-read, as git does;
- layers (KG009) report direct imports of a higher layer and chains through modules
  that no layer names;
- transitive reach (`ViolationCode.TRANSITIVE_IMPORT`) follows runtime and literal
  dynamic imports (never typing-only ones) through the project's own modules,
  including package ``__init__`` re-exports, and reports the shortest chain to each
  forbidden module with the line of every hop;
- an empty source tree, a rule that matches no module, a module that no rule covers
  and an import root none of whose modules any rule matches are refused with
  `ConfigError` (never a vacuous pass; see `check_coverage`).
"""

from __future__ import annotations

import collections
import contextlib
import gc
import marshal
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path, PurePath

import attrs

from kernel.errors import ConfigError
from kernel.guard.model import ChainLink, GuardReport, Policy, Rule, Violation, ViolationCode
from kernel.guard.patterns import CallMatcher, covers, module_matches, module_set, twin_of
from kernel.guard.policy import policy_hash
from kernel.guard.scan import ImportFact, RawFinding, scan_source
from kernel.identity import sha256_bytes

__all__ = [
    "DEFAULT_CACHE_DIR",
    "GUARD_VERSION",
    "check_coverage",
    "check_paths",
    "check_source",
    "check_tree",
    "discover_modules",
    "tool_version",
]

GUARD_VERSION = "1.0"
"""Version of the guard's findings format; the cache key adds a hash of the source."""

DEFAULT_CACHE_DIR = ".kernel-guard-cache"
"""Cache directory, relative to the working directory, used by the ``kernel guard`` verb."""

_RACY_NS = 2_000_000_000
_CACHE_MAGIC = "kernel-guard-cache/2"
_KEEP_CACHE_FILES = 8

_Entry = tuple[int, int, int, str, list[ImportFact], list[RawFinding]]
"""``(size, mtime_ns, inode, content sha256, imports, findings)``."""


@lru_cache(maxsize=1)
def tool_version() -> str:
    """``GUARD_VERSION`` plus a hash of the guard package's own source files."""
    here = Path(__file__).parent
    blob = b"".join(p.read_bytes() for p in sorted(here.glob("*.py")))
    return f"{GUARD_VERSION}+{sha256_bytes(blob)[:16]}"


def _module_name(rel: Sequence[str]) -> tuple[str, bool]:
    parts = list(rel)
    last = parts[-1][:-3]
    if last == "__init__":
        return ".".join(parts[:-1]), True
    parts[-1] = last
    return ".".join(parts), False


class _Ignore:
    """The ``.gitignore`` rules met on the way down, and ``--exclude`` patterns.

    Supported gitignore syntax: comments, blank lines, ``!`` negation, a trailing ``/``
    for directories only, a ``/`` inside or at the start to anchor at the file's folder,
    ``*``, ``?``, ``[...]`` and ``**``; the last matching rule wins. ``--exclude``
    patterns match a path relative to the import root, or any one folder or file name.
    """

    def __init__(self, exclude: Iterable[str]) -> None:
        self.rules: list[tuple[str, re.Pattern[str], bool, bool]] = []
        self.exclude = [_glob_rx(p.rstrip("/"), anchored="/" in p.rstrip("/")) for p in exclude]

    def read(self, folder: str) -> None:
        try:
            with open(os.path.join(folder, ".gitignore"), encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except (OSError, UnicodeDecodeError):
            return
        for raw in lines:
            line = raw.rstrip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            line = line[1:] if negated else line
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            self.rules.append(
                (folder, _glob_rx(line.lstrip("/"), anchored=anchored), negated, dir_only)
            )

    def ignored(self, path: str, rel: str, *, is_dir: bool) -> bool:
        if any(rx.fullmatch(rel) for rx in self.exclude):
            return True
        verdict = False
        for base, rx, negated, dir_only in self.rules:
            if dir_only and not is_dir:
                continue
            inner = os.path.relpath(path, base).replace(os.sep, "/")
            if inner.startswith("../"):
                continue
            if rx.fullmatch(inner):
                verdict = not negated
        return verdict


def _glob_rx(pattern: str, *, anchored: bool) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
            continue
        if c == "*":
            out.append(".*" if pattern.startswith("**", i) else "[^/]*")
            i += 2 if pattern.startswith("**", i) else 1
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                out.append(f"[{'^' + body[1:] if body.startswith('!') else body}]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    body = "".join(out)
    return re.compile(body if anchored else f"(?:.*/)?{body}")


def discover_modules(
    root: Path | str,
    *,
    exclude: Iterable[str] = (),
    gitignore_from: Path | str | None = None,
    visited: list[str] | None = None,
    excluded: list[str] | None = None,
) -> list[tuple[str, str, bool]]:
    """``(file path, module name, is package)`` for every ``*.py`` under ``root``, sorted.

    Skipped: hidden folders, ``__pycache__``, any folder holding a ``pyvenv.cfg`` (a
    virtual environment, whether ignored or not), paths matching ``exclude`` (globs on
    the path relative to ``root`` or on one name), and what the ``.gitignore`` files say
    from ``gitignore_from`` (a folder at or above ``root``, usually the repository) down.
    ``visited`` receives every folder walked and every ``.gitignore`` consulted (what a
    warm replay must find unchanged, `kernel.guard.fastpath`); ``excluded`` the
    dotted names of the folders and modules left out by ``exclude`` or ``.gitignore``.
    """
    top = os.fspath(root)
    ignore = _Ignore(exclude)
    if gitignore_from is not None:
        chain = []
        here = Path(top).resolve()
        stop = Path(gitignore_from).resolve()
        while True:
            chain.append(here)
            if here in (stop, here.parent):
                break
            here = here.parent
        if stop in chain:
            for above in reversed(chain[1:]):
                ignore.read(str(above))
                if visited is not None:
                    visited.append(os.path.join(above, ".gitignore"))
    out: list[tuple[str, str, bool]] = []
    for folder, dirs, files in os.walk(top):
        if visited is not None:
            visited += [folder, os.path.join(folder, ".gitignore")]
        if gitignore_from is not None:
            ignore.read(folder)
        rel = os.path.relpath(folder, top)
        prefix = [] if rel == "." else rel.split(os.sep)
        keep = []
        for d in sorted(dirs):
            path = os.path.join(folder, d)
            if (
                d == "__pycache__"
                or d.startswith(".")
                or os.path.isfile(os.path.join(path, "pyvenv.cfg"))
            ):
                continue
            if ignore.ignored(path, "/".join([*prefix, d]), is_dir=True):
                if excluded is not None:
                    excluded.append(".".join([*prefix, d]))
                continue
            keep.append(d)
        dirs[:] = keep
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                if ignore.ignored(path, "/".join([*prefix, name]), is_dir=False):
                    if excluded is not None:
                        excluded.append(_module_name([*prefix, name])[0])
                    continue
                module, is_package = _module_name([*prefix, name])
                if module:
                    out.append((path, module, is_package))
    return out


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    # Syntax trees hold no reference cycles and are dropped file by file: the cyclic
    # collector would only re-traverse them while they are built, so it is paused.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Cache:
    """One marshal file per (policy hash, tool version): path -> `_Entry`."""

    def __init__(self, directory: Path | None, key: str) -> None:
        self.file = None if directory is None else directory / f"{key}.marshal"
        self.entries: dict[str, _Entry] = {}
        self.derived: tuple[_Fingerprint, list[_Derived]] = (((), ()), [])
        self.saved_ns = 0
        self.dirty = False
        if self.file is None:
            return
        try:
            with open(self.file, "rb") as fh, _gc_paused():
                # The cache is written by this tool into the project's own ignored
                # directory; its shape is checked and any damage means a cold run.
                # (Loading builds many small containers: the cyclic collector would
                # traverse them again and again while they arrive, so it is paused.)
                magic, saved_ns, entries, derived = marshal.loads(fh.read())  # noqa: S302
            if magic == _CACHE_MAGIC and isinstance(entries, dict):
                self.entries, self.saved_ns, self.derived = entries, saved_ns, derived
        except (OSError, EOFError, ValueError, TypeError):
            self.entries = {}  # a missing or damaged cache is a cold run, never an error

    def save(self, keep: set[str]) -> None:
        if self.file is None or not (self.dirty or set(self.entries) - keep):
            return
        entries = {k: v for k, v in self.entries.items() if k in keep}
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            marker = self.file.parent / ".gitignore"
            if not marker.exists():
                # The cache ignores itself, as ruff's and pytest's do.
                marker.write_text("# created by kernel guard\n*\n", encoding="utf-8")
            tmp = self.file.with_name(f"{self.file.name}.{os.getpid()}.tmp")
            with open(tmp, "wb") as fh:
                marshal.dump((_CACHE_MAGIC, time.time_ns(), entries, self.derived), fh)
            os.replace(tmp, self.file)
            # One file per policy and tool version: keep the most recent few.
            older = sorted(
                (p for p in self.file.parent.glob("*.marshal") if p.name != "last-runs.marshal"),
                key=lambda p: p.stat().st_mtime_ns,
            )
            for stale in older[:-_KEEP_CACHE_FILES]:
                stale.unlink(missing_ok=True)
        except OSError:
            pass  # the cache is an optimisation; failing to write it changes no result


class _Context:
    """Per-policy precomputation shared by every file of one check."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.transitive = tuple(r for r in policy.rules if r.transitive)
        self._matchers: dict[tuple[Rule, ...], CallMatcher] = {}

    def rules_for(self, module: str) -> tuple[Rule, ...]:
        return tuple(r for r in self.policy.rules if covers(r.modules, module))

    def matcher_for(self, rules: tuple[Rule, ...]) -> CallMatcher:
        # Built only when a file is actually scanned: a warm run never needs one.
        matcher = self._matchers.get(rules)
        if matcher is None:
            matcher = CallMatcher((r.name, p) for r in rules for p in r.forbid_calls)
            self._matchers[rules] = matcher
        return matcher


PARALLEL_MIN_FILES = 64
"""Below this many files to parse, a process pool costs more than it saves."""

_Job = tuple[str, str, bool, tuple[Rule, ...], str]
"""``(path, module, is_package, rules, cached digest or "")``."""
_Done = tuple[str, tuple[int, int, int] | None, list[ImportFact], list[RawFinding]]
"""``(digest, (size, mtime_ns, inode) or None if unreadable, imports, findings)``."""


def _scan_one(job: _Job, matcher: CallMatcher | None) -> _Done:
    path, module, is_package, rules, known = job
    try:
        st = os.stat(path)
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        return "", None, [], [(1, 1, ViolationCode.UNPARSEABLE.value, "", f"cannot read: {e}")]
    digest = sha256_bytes(data)
    stat = (st.st_size, st.st_mtime_ns, st.st_ino)
    if digest == known:
        return digest, stat, [], []  # the caller serves the cached result
    imports, findings = scan_source(
        data, module=module, is_package=is_package, rules=rules, matcher=matcher, filename=path
    )
    return digest, stat, imports, findings


_WORKER_MATCHERS: dict[tuple[Rule, ...], CallMatcher] = {}


def _scan_chunk(chunk: list[_Job]) -> list[_Done]:
    """One worker's share (a top-level function: the pool pickles it by name)."""
    out = []
    with _gc_paused():
        for job in chunk:
            matcher = _WORKER_MATCHERS.get(job[3])
            if matcher is None:
                matcher = CallMatcher((r.name, p) for r in job[3] for p in r.forbid_calls)
                _WORKER_MATCHERS[job[3]] = matcher
            out.append(_scan_one(job, matcher))
    return out


def _scan_all(todo: list[_Job], ctx: _Context, jobs: int | None) -> list[_Done]:
    """Scan ``todo`` in this process, or in a pool of processes when it pays.

    Workers are forked when this process runs a single thread (cheap, and safe then),
    otherwise started fresh (``forkserver``); each takes contiguous chunks, several per
    worker so that a slow chunk does not hold the others.
    """
    workers = jobs if jobs is not None else len(os.sched_getaffinity(0))
    if workers <= 1 or len(todo) < PARALLEL_MIN_FILES:
        return [_scan_one(job, ctx.matcher_for(job[3])) for job in todo]
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if threading.active_count() == 1 else "forkserver"
    size = max(1, len(todo) // (workers * 4))
    chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        return [done for part in pool.map(_scan_chunk, chunks) for done in part]


@lru_cache(maxsize=64)
def _policy_key(policy: Policy) -> str:
    return policy_hash(policy)[:24]


def _environment_key() -> str:
    # Reach-through reads installed modules: the interpreter and its search path are
    # part of what a cached result depends on.
    return _environment_digest(sys.version, tuple(sys.path))


@lru_cache(maxsize=8)
def _environment_digest(version: str, path: tuple[str, ...]) -> str:
    return sha256_bytes("\0".join([version, *path]).encode("utf-8", "replace"))[:8]


def check_paths(
    files: Sequence[tuple[str, str, bool]],
    policy: Policy,
    *,
    cache_dir: Path | str | None = None,
    display: dict[str, str] | None = None,
    jobs: int | None = None,
    excluded: Sequence[str] = (),
) -> GuardReport:
    """Check ``(path, module, is_package)`` files against ``policy``.

    Args:
        files: the modules of the project (see `discover_modules`).
        policy: the rules.
        cache_dir: where to keep the per-file cache; ``None`` disables it.
        display: optional path -> displayed path mapping for findings.
        jobs: processes that parse the files the cache cannot serve (``None``: one per
            available core; a pool starts only for `PARALLEL_MIN_FILES` files or more).
        excluded: module names (or packages) left out by ``--exclude`` or
            ``.gitignore`` (see `check_coverage`).

    Raises:
        ConfigError: ``files`` is empty, or the policy does not cover them
            (`check_coverage`).
    """
    if not files:
        raise ConfigError("no Python files to check")
    check_coverage(files, policy, excluded=excluded)
    ctx = _Context(policy)
    key = f"{_policy_key(policy)}-{tool_version().replace('+', '-')}-{_environment_key()}"
    cache = _Cache(None if cache_dir is None else Path(cache_dir), key)
    now_ok = cache.saved_ns - _RACY_NS
    results: dict[str, tuple[list[ImportFact], list[RawFinding]]] = {}
    modules: dict[str, str] = {}
    cached = checked = 0
    need_graph = bool(ctx.transitive) or any(r.layers for r in policy.rules)
    todo: list[_Job] = []
    show = display or {}
    with _gc_paused():
        for path, module, is_package in files:
            modules.setdefault(module, path)
            rules = ctx.rules_for(module)
            if not rules and not need_graph:
                continue
            checked += 1
            # Keyed by the displayed (project-relative) path: the same from any folder.
            entry = cache.entries.get(show.get(path, path))
            try:
                st = os.stat(path)
            except OSError as e:
                results[path] = (
                    [],
                    [(1, 1, ViolationCode.UNPARSEABLE.value, "", f"cannot read: {e}")],
                )
                continue
            if (
                entry is not None
                and entry[0] == st.st_size
                and entry[1] == st.st_mtime_ns
                and entry[2] == st.st_ino
                and st.st_mtime_ns < now_ok
            ):
                results[path] = (entry[4], entry[5])
                cached += 1
                continue
            known = entry[3] if entry is not None else ""
            todo.append((path, module, is_package, rules, known))
        for job, (digest, stat, scanned, found) in zip(
            todo, _scan_all(todo, ctx, jobs), strict=True
        ):
            path = job[0]
            key = show.get(path, path)
            entry = cache.entries.get(key)
            imports, findings = scanned, found
            if digest and entry is not None and entry[3] == digest:
                cached += 1
                imports, findings = entry[4], entry[5]
            if stat is not None:
                cache.entries[key] = (*stat, digest, imports, findings)
                cache.dirty = True
            results[path] = (imports, findings)
    keys = [show.get(path, path) for path in results]
    fingerprint: _Fingerprint = (
        tuple((key, cache.entries[key][3] if key in cache.entries else "") for key in keys),
        tuple(sorted(show.items())),
    )
    if cache.derived[0] == fingerprint:
        derived = [_violation(item) for item in cache.derived[1]]
    else:
        # Transitive reach and layers depend on every file: recomputed when any changed.
        derived = _transitive(ctx, files, results, modules, show) if ctx.transitive else []
        for rule in policy.rules:
            if rule.layers:
                derived.extend(_layer_breaks(rule, files, results, show))
        cache.derived = (fingerprint, [_derived(v) for v in derived])
        cache.dirty = True
    cache.save(set(keys))
    violations = [
        Violation(
            path=show.get(path, path),
            line=line,
            column=col,
            code=ViolationCode(code),
            rule=rule,
            message=message,
        )
        for path, (_imports, findings) in results.items()
        for line, col, code, rule, message in findings
    ]
    violations.extend(derived)
    violations.sort(key=Violation.sort_key)
    return GuardReport(
        violations=tuple(violations),
        files_checked=checked,
        files_cached=cached,
    )


_Fingerprint = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]
"""Every file's content digest and the display mapping: what whole-tree findings read."""
_Derived = tuple[str, int, int, str, str, str, tuple[tuple[str, str, int, str], ...]]
"""A whole-tree finding (transitive, layers) as the cache stores it."""


def _derived(v: Violation) -> _Derived:
    chain = tuple((c.module, c.path, c.line, c.imports) for c in v.chain)
    return (v.path, v.line, v.column, v.code.value, v.rule, v.message, chain)


def _violation(item: _Derived) -> Violation:
    path, line, column, code, rule, message, chain = item
    return Violation(
        path=path,
        line=line,
        column=column,
        code=ViolationCode(code),
        rule=rule,
        message=message,
        chain=tuple(ChainLink(module=m, path=p, line=n, imports=i) for m, p, n, i in chain),
    )


def _where(policy: Policy, pattern: str) -> str:
    index = policy.unguarded.index(pattern)
    sources = policy.unguarded_sources
    return sources[index] if index < len(sources) else f"unguarded[{index}]"


def _left_out(pattern: str, excluded: Sequence[str]) -> bool:
    """Does ``pattern`` name a module (or a package's submodule) that was left out?"""
    return any(
        covers((pattern,), name)
        or covers((pattern,), f"{name}._")
        or pattern.startswith(f"{name}.")
        for name in excluded
    )


def check_coverage(
    files: Sequence[tuple[str, str, bool]], policy: Policy, *, excluded: Sequence[str] = ()
) -> None:
    """Refuse a policy that would check nothing, or not everything, of ``files``.

    A green run must mean "every module was checked by the rules meant for it": a rule
    whose ``modules`` match no file (a typo, a renamed module), a module that no rule
    covers, and an import root whose module names no rule can match (run from the wrong
    directory) all make a pass meaningless.

    Raises:
        ConfigError: naming the rule (with the file it was read from) or the module.
    """
    covered_by: dict[str, int] = {r.name: 0 for r in policy.rules}
    skipped = dict.fromkeys(policy.unguarded, 0)
    uncovered: list[tuple[str, str]] = []
    for path, module, _pkg in files:
        hit = False
        for rule in policy.rules:
            if covers(rule.modules, module):
                covered_by[rule.name] += 1
                hit = True
        for pattern in skipped:
            if covers((pattern,), module):
                if hit:
                    raise ConfigError(
                        f"{_where(policy, pattern)}: module {module!r} is both covered by a "
                        f"rule and unguarded ({pattern!r})"
                    )
                skipped[pattern] += 1
                hit = True
        if not hit:
            uncovered.append((module, path))
    for pattern, count in skipped.items():
        # `--exclude tests` and `unguarded = ["tests"]` say the same thing twice: fine.
        if not count and not _left_out(pattern, excluded):
            raise ConfigError(
                f"{_where(policy, pattern)}: {pattern!r} matches no module under the import root"
            )
    if not any(covered_by.values()):
        sample = ", ".join(repr(m) for _p, m, _k in files[:3])
        names = ", ".join(repr(r.name) for r in policy.rules)
        raise ConfigError(
            f"no rule covers any module found here: rule {names} match none of the module "
            f"names {sample}, ... (is --src the import root?)"
        )
    for rule in policy.rules:
        if not covered_by[rule.name] and not any(
            _left_out(p, excluded) for p in rule.modules if not p.startswith("!")
        ):
            where = f"{rule.source}: " if rule.source else ""
            raise ConfigError(
                f"{where}rule {rule.name!r}: modules {list(rule.modules)} match no module "
                "under the import root (a typo, a renamed module, or the wrong --src)"
            )
    for rule in policy.rules:
        for index, group in enumerate(rule.layers):
            for pattern in group:
                if not any(module_matches(pattern, m) for _p, m, _k in files):
                    raise ConfigError(
                        f"{rule.source}: rule {rule.name!r}: layers[{index}] {pattern!r} "
                        "matches no module under the import root"
                    )
    if uncovered:
        module, path = uncovered[0]
        more = f" (and {len(uncovered) - 1} more)" if len(uncovered) > 1 else ""
        raise ConfigError(
            f"module {module!r} ({path}) is covered by no rule{more}: add it to a rule's "
            "modules, list it in the policy's unguarded, or leave it out with --exclude"
        )


def _layer_breaks(
    rule: Rule,
    files: Sequence[tuple[str, str, bool]],
    results: dict[str, tuple[list[ImportFact], list[RawFinding]]],
    show: dict[str, str],
) -> list[Violation]:
    """KG009: every import (runtime, dynamic or typing-only: each is a dependency) of a
    higher layer by a module of the rule. An ancestor package is not a target: Python
    runs it for any submodule import, so ``from kernel import errors`` depends on
    ``kernel.errors``, not on ``kernel``'s re-exports."""
    out: list[Violation] = []
    for path, module, _pkg in files:
        if not covers(rule.modules, module):
            continue
        own = rule.layer_of(module)
        got = results.get(path)
        if own is None or got is None:
            continue
        for target_module, name, line, col, _kind in got[0]:
            targets = [target_module, f"{target_module}.{name}"] if name else [target_module]
            for target in targets:
                if module.startswith(target + ".") or target == module:
                    continue
                level = rule.layer_of(target)
                if level is not None and level < own:
                    out.append(
                        Violation(
                            path=show.get(path, path),
                            line=line,
                            column=col + 1,
                            code=ViolationCode.LAYER_VIOLATION,
                            rule=rule.name,
                            message=(
                                f"{module!r} (layer {own}: {', '.join(rule.layers[own])}) "
                                f"imports {target!r} of higher layer {level} "
                                f"({', '.join(rule.layers[level])})"
                            ),
                            chain=(
                                ChainLink(
                                    module=module,
                                    path=show.get(path, path),
                                    line=line,
                                    imports=target,
                                ),
                            ),
                        )
                    )
                    break
    out.extend(_layer_chains(rule, files, results, show))
    return out


def _layer_chains(
    rule: Rule,
    files: Sequence[tuple[str, str, bool]],
    results: dict[str, tuple[list[ImportFact], list[RawFinding]]],
    show: dict[str, str],
) -> list[Violation]:
    """KG009 through modules outside the layers (as import-linter reports chains): a
    layered module that reaches a higher layer only through project modules no layer
    names; the shortest chain per higher module, every hop with its line."""
    where = {module: path for path, module, _k in files}
    graph = {
        module: _edges(results[path][0]) if path in results else []
        for module, path in where.items()
    }
    out: list[Violation] = []
    for path, module, _pkg in files:
        own = rule.layer_of(module) if covers(rule.modules, module) else None
        if own is None:
            continue
        parent: dict[str, tuple[str, int]] = {module: ("", 0)}
        queue = collections.deque([module])
        reported: set[str] = set()
        while queue:
            current = queue.popleft()
            for target, line, _col in graph.get(current, ()):
                if target not in where or target in parent:
                    continue
                level = rule.layer_of(target)
                if level is None:
                    parent[target] = (current, line)
                    queue.append(target)
                    continue
                if current == module or level >= own or target in reported:
                    continue  # direct edges are reported above; lower layers are fine
                reported.add(target)
                hops = [ChainLink(module=current, path=show.get(where[current], where[current]),
                                  line=line, imports=target)]  # fmt: skip
                node = current
                while node != module:
                    prev, pline = parent[node]
                    hops.append(ChainLink(module=prev, path=show.get(where[prev], where[prev]),
                                          line=pline, imports=node))  # fmt: skip
                    node = prev
                hops.reverse()
                trail = " -> ".join(f"{h.module}:{h.line}" for h in hops)
                out.append(
                    Violation(
                        path=show.get(path, path),
                        line=hops[0].line,
                        column=1,
                        code=ViolationCode.LAYER_VIOLATION,
                        rule=rule.name,
                        message=(
                            f"{module!r} (layer {own}) reaches {target!r} of higher layer "
                            f"{level} through {trail} -> {target}"
                        ),
                        chain=tuple(hops),
                    )
                )
    return out


def _edges(imports: Sequence[ImportFact]) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    for module, name, line, col, kind in imports:
        if kind == "typing":
            continue
        out.append((module, line, col))
        if name:
            out.append((f"{module}.{name}", line, col))
    return out


def _transitive(
    ctx: _Context,
    files: Sequence[tuple[str, str, bool]],
    results: dict[str, tuple[list[ImportFact], list[RawFinding]]],
    modules: dict[str, str],
    show: dict[str, str],
) -> list[Violation]:
    graph: dict[str, list[tuple[str, int, int]]] = {}
    for module, path in modules.items():
        got = results.get(path)
        graph[module] = _edges(got[0]) if got else []
    out: list[Violation] = []
    for rule in ctx.transitive:
        memo: dict[str, str | None] = {}
        # One finding per (module that imports the forbidden one, forbidden module):
        # the fix is there, so every guarded module reaching it through that import is
        # one group, shown by its shortest chain (on Django most findings were the same
        # few imports reached from hundreds of modules).
        groups: dict[tuple[str, str], list[Violation]] = {}
        for _path, module, _pkg in files:
            if not covers(rule.modules, module):
                continue
            for v in _reach(rule, module, graph, modules, show, memo=memo):
                groups.setdefault((v.chain[-1].module, v.chain[-1].imports), []).append(v)
        for (last, _target), found in groups.items():
            best = min(found, key=lambda v: (len(v.chain), v.path, v.line))
            if len(found) > 1:
                others = len(found) - 1
                best = attrs.evolve(
                    best,
                    message=f"{best.message} ({others} other module"
                    f"{'s reach' if others > 1 else ' reaches'} it through {last!r} too)",
                )
            out.append(best)
    return out


def _reach(
    rule: Rule,
    /,
    start: str,
    graph: dict[str, list[tuple[str, int, int]]],
    modules: dict[str, str],
    show: dict[str, str],
    *,
    memo: dict[str, str | None],
) -> list[Violation]:
    """BFS from ``start`` through project modules; shortest chain per broken pattern.

    The search does not continue through a forbidden module: the first forbidden hop
    is the finding, what lies behind it is noise.
    """
    parent: dict[str, tuple[str, int, int]] = {start: ("", 0, 0)}
    queue = collections.deque([start])
    found: dict[str, tuple[str, str, int]] = {}  # pattern -> (last module, target, line)
    while queue:
        current = queue.popleft()
        for target, line, col in graph.get(current, ()):
            if target in memo:
                pattern = memo[target]
            else:
                forbidden = module_set(rule.forbid_imports)
                pattern = memo[target] = next(
                    (
                        hit
                        for name in (target, *twin_of(target))
                        if (hit := forbidden.match(name)) is not None
                    ),
                    None,
                )
            if pattern is not None:
                if current != start and pattern not in found:
                    found[pattern] = (current, target, line)
                continue
            if target in modules and target not in parent:
                parent[target] = (current, line, col)
                queue.append(target)
    violations: list[Violation] = []
    for pattern, (last, target, line) in sorted(found.items()):
        hops = [
            ChainLink(
                module=last, path=show.get(modules[last], modules[last]), line=line, imports=target
            )
        ]
        node = last
        while node != start:
            prev, pline, _pcol = parent[node]
            hops.append(
                ChainLink(
                    module=prev,
                    path=show.get(modules[prev], modules[prev]),
                    line=pline,
                    imports=node,
                )
            )
            node = prev
        hops.reverse()
        first = hops[0]
        # The chain has at least two hops (direct imports are KG001, not KG007).
        first_col = parent[hops[1].module][2]
        trail = " -> ".join(f"{h.module}:{h.line}" for h in hops)
        violations.append(
            Violation(
                path=first.path,
                line=first.line,
                column=first_col + 1,
                code=ViolationCode.TRANSITIVE_IMPORT,
                rule=rule.name,
                message=(
                    f"reaches forbidden {target!r} (forbid-imports {pattern!r}) "
                    f"through {trail} -> {target}"
                ),
                chain=tuple(hops),
            )
        )
    return violations


def check_tree(
    src: Path | str,
    policy: Policy,
    *,
    cache_dir: Path | str | None = None,
    exclude: Iterable[str] = (),
    gitignore_from: Path | str | None = None,
    only: Iterable[Path | str] | None = None,
    visited: list[str] | None = None,
    jobs: int | None = None,
    root: Path | str | None = None,
) -> GuardReport:
    """Check every module under the import root ``src`` against ``policy``.

    Args:
        exclude, gitignore_from, visited: see `discover_modules` (``visited`` also
            receives every module file).
        jobs: see `check_paths`.
        only: report findings of these files (or of files under these folders) only,
            as pre-commit passes the files it checks; the whole tree is still
            discovered, so coverage and transitive reach see every module.
        root: the project root (`kernel.guard.policy.find_project_root`): every path in
            findings, chains and the cache is relative to it (POSIX separators), so a
            baseline written in one folder holds in another; default the working
            directory.

    Raises:
        ConfigError: ``src`` is not a directory or holds no Python file.
    """
    if not Path(src).is_dir():
        raise ConfigError(f"--src {src}: not a directory")
    excluded: list[str] = []
    files = discover_modules(
        src, exclude=exclude, gitignore_from=gitignore_from, visited=visited, excluded=excluded
    )
    if not files:
        raise ConfigError(f"--src {src}: no Python files found")
    if visited is not None:
        visited += [path for path, _m, _k in files]
    base = os.path.abspath(root if root is not None else os.curdir)
    display = {
        path: PurePath(os.path.relpath(os.path.abspath(path), base)).as_posix()
        for path, _m, _k in files
    }
    report = check_paths(
        files, policy, cache_dir=cache_dir, jobs=jobs, display=display, excluded=excluded
    )
    if only is None:
        return report
    wanted = [Path(p).resolve() for p in only]
    selected = {
        display[path]
        for path, _m, _k in files
        if any(Path(path).resolve() == w or w in Path(path).resolve().parents for w in wanted)
    }
    kept = tuple(
        v
        for v in report.violations
        if v.path in selected or any(link.path in selected for link in v.chain)
    )
    return GuardReport(
        violations=kept, files_checked=len(selected), files_cached=report.files_cached
    )


def check_source(
    source: str | bytes,
    policy: Policy,
    *,
    module: str,
    is_package: bool = False,
    path: str = "<source>",
) -> tuple[Violation, ...]:
    """Findings of ``policy`` for one module's source (no cache, no transitive reach)."""
    rules = tuple(r for r in policy.rules if covers(r.modules, module))
    data = source.encode("utf-8") if isinstance(source, str) else source
    _imports, findings = scan_source(
        data, module=module, is_package=is_package, rules=rules, filename=path
    )
    out = [
        Violation(
            path=path, line=line, column=col, code=ViolationCode(code), rule=rule, message=message
        )
        for line, col, code, rule, message in findings
    ]
    return tuple(sorted(out, key=Violation.sort_key))
