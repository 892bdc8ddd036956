"""Checking a source tree: modules by path, coverage (fail closed), the caches, reach.

Rules this module enforces:

- the modules are those `kernel.guard.discover` finds under the import root;
- a file is scanned in full when a rule covers its module, for imports only when a
  ``transitive`` or ``layers`` rule needs the import graph, and not at all otherwise;
- per-file results (findings, and imports when a ``transitive`` or ``layers`` rule
  reads the import graph) are cached by SHA-256 of the file's content
  (`kernel.records.digest.sha256_bytes`) in a cache file keyed by a digest of the policy's
  rules and the tool version (a hash of the guard's own source); a file whose size, mtime and inode
  are unchanged since an entry older than the racy window is not re-read, as git does
  (`kernel.guard.cache`, which also keeps the effect map of installed code);
- files the cache cannot serve are parsed once each, in this process or split over
  forked ones (`kernel.guard.pool`), with the same report either way;
- whole-tree findings (transitive reach, KG007; layers, KG009) come from
  `kernel.guard.graph` and are cached by every file's digest;
- an empty source tree, a rule that matches no module, a module that no rule covers
  and an import root none of whose modules any rule matches are refused with
  `ConfigError` (never a vacuous pass; see `check_coverage`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from kernel.errors import ConfigError
from kernel.guard.cache import RACY_NS, EffectCache, FileCache, Fingerprint, gc_paused
from kernel.guard.discover import discover_modules
from kernel.guard.model import GuardReport, Policy, Rule, Violation, ViolationCode
from kernel.guard.patterns import CallMatcher, covers, module_matches
from kernel.guard.pool import PARALLEL_MIN_FILES, Job, scan_all
from kernel.guard.scan import ImportFact, RawFinding, scan_source
from kernel.records.digest import sha256_bytes

if TYPE_CHECKING:  # paths are strings at run time (no `pathlib` on a cold run's way)
    from pathlib import Path

__all__ = [
    "DEFAULT_CACHE_DIR",
    "GUARD_VERSION",
    "PARALLEL_MIN_FILES",
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

_Results = dict[str, tuple[list[ImportFact], list[RawFinding]]]
Seen = dict[str, tuple[int, int, int]]
"""Path -> ``(size, mtime_ns, inode)`` as the run read it (`check_tree`'s ``seen``)."""


@lru_cache(maxsize=1)
def tool_version() -> str:
    """``GUARD_VERSION`` plus a hash of the guard package's own source files."""
    here = os.path.dirname(__file__)
    parts = []
    for name in sorted(n for n in os.listdir(here) if n.endswith(".py")):
        with open(os.path.join(here, name), "rb") as fh:
            parts.append(fh.read())
    return f"{GUARD_VERSION}+{sha256_bytes(b''.join(parts))[:16]}"


class _Context:
    """Per-policy precomputation shared by every file of one check."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.transitive = tuple(r for r in policy.rules if r.transitive)
        # Whether a `transitive` or `layers` rule reads the import graph: else no file's
        # imports are ever read, and none is kept (in the results or the cache).
        self.graph = bool(self.transitive) or any(r.layers for r in policy.rules)
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


@lru_cache(maxsize=64)
def _policy_key(policy: Policy) -> str:
    # The digest of the rules' text form, not `policy_hash` (canonical JSON, orjson: a
    # cold run would import a JSON encoder for one key). `repr` of the policy's dict of
    # strings, lists and booleans is one string per policy and tells any two apart.
    return sha256_bytes(repr(policy.to_dict()).encode("utf-8", "backslashreplace"))[:24]


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
    seen: Seen | None = None,
) -> GuardReport:
    """Check ``(path, module, is_package)`` files against ``policy``.

    Args:
        files: the modules of the project (see `discover_modules`).
        policy: the rules.
        cache_dir: where to keep the per-file cache and the effect map of installed
            code; ``None`` disables both.
        display: optional path -> displayed path mapping for findings.
        jobs: processes that parse the files the cache cannot serve (``None``: one per
            available core; forked only for `PARALLEL_MIN_FILES` files or more).
        excluded: module names (or packages) left out by ``--exclude`` or
            ``.gitignore`` (see `check_coverage`).
        seen: receives ``(size, mtime_ns, inode)`` of each file checked, from the
            open file it was read from (or the stat the cache was served by).

    Raises:
        ConfigError: ``files`` is empty, or the policy does not cover them
            (`check_coverage`).
    """
    if not files:
        raise ConfigError("no Python files to check")
    check_coverage(files, policy, excluded=excluded)
    ctx = _Context(policy)
    directory = None if cache_dir is None else os.fspath(cache_dir)
    version = tool_version().replace("+", "-")
    cache = FileCache(directory, f"{_policy_key(policy)}-{version}-{_environment_key()}")
    effect_cache = EffectCache(directory, version)
    show = display or {}
    with gc_paused():
        # One job needs no sizes (they split the files between processes): a file the
        # cache holds nothing for is not stat-checked before it is read.
        sized = jobs is None or jobs > 1
        results, modules, todo, checked, cached = _plan(
            files, ctx, cache, show, seen=seen, sized=sized
        )
        done = scan_all(todo, ctx.matcher_for, jobs, imports=ctx.graph)
        cached += _merge(todo, done, cache, show, results, seen=seen)
    keys = [show.get(path, path) for path in results]
    derived = _whole_tree(ctx, files, results, modules=modules, show=show, cache=cache, keys=keys)
    cache.save(set(keys))
    effect_cache.save()
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
    return GuardReport(violations=tuple(violations), files_checked=checked, files_cached=cached)


def _plan(
    files: Sequence[tuple[str, str, bool]],
    ctx: _Context,
    cache: FileCache,
    show: dict[str, str],
    *,
    seen: Seen | None,
    sized: bool,
) -> tuple[_Results, dict[str, str], list[Job], int, int]:
    """What the cache serves by stat alone, and the jobs for the rest:
    ``(results, module -> path, jobs, files checked, files served)``."""
    now_ok = cache.saved_ns - RACY_NS
    results: _Results = {}
    modules: dict[str, str] = {}
    todo: list[Job] = []
    cached = checked = 0
    for path, module, is_package in files:
        modules.setdefault(module, path)
        rules = ctx.rules_for(module)
        if not rules and not ctx.graph:
            continue
        checked += 1
        # Keyed by the displayed (project-relative) path: the same from any folder.
        entry = cache.entries.get(show.get(path, path))
        if entry is None and not sized:
            todo.append((path, module, is_package, rules, "", 0))
            continue
        try:
            st = os.stat(path)
        except OSError as e:
            results[path] = ([], [(1, 1, ViolationCode.UNPARSEABLE.value, "", f"cannot read: {e}")])
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
            if seen is not None:
                seen[path] = (st.st_size, st.st_mtime_ns, st.st_ino)
            continue
        known = entry[3] if entry is not None else ""
        todo.append((path, module, is_package, rules, known, st.st_size))
    return results, modules, todo, checked, cached


def _merge(
    todo: list[Job],
    done: list[tuple[str, tuple[int, int, int] | None, list[ImportFact], list[RawFinding]]],
    cache: FileCache,
    show: dict[str, str],
    results: _Results,
    *,
    seen: Seen | None,
) -> int:
    """Put the parsed files' results into ``results`` and the cache; returns how many
    turned out unchanged (same digest), served from the cache after all."""
    cached = 0
    for job, (digest, stat, scanned, found) in zip(todo, done, strict=True):
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
            if seen is not None:
                seen[path] = stat
        results[path] = (imports, findings)
    return cached


def _whole_tree(
    ctx: _Context,
    files: Sequence[tuple[str, str, bool]],
    results: _Results,
    *,
    modules: dict[str, str],
    show: dict[str, str],
    cache: FileCache,
    keys: list[str],
) -> list[Violation]:
    """Transitive reach and layers, from the cache while no file's digest changed;
    none (and no fingerprint) when no rule reads the import graph."""
    if not ctx.graph:
        return []
    # Imported here: a check under a policy with no transitive or layers rule never
    # loads the graph.
    from kernel.guard.graph import from_cached, layer_breaks, to_cached, transitive

    fingerprint: Fingerprint = (
        tuple((key, cache.entries[key][3] if key in cache.entries else "") for key in keys),
        tuple(sorted(show.items())),
    )
    if cache.derived[0] == fingerprint:
        return [from_cached(item) for item in cache.derived[1]]
    # Transitive reach and layers depend on every file: recomputed when any changed.
    derived = transitive(ctx.transitive, files, results, modules, show) if ctx.transitive else []
    for rule in ctx.policy.rules:
        if rule.layers:
            derived.extend(layer_breaks(rule, files, results, show))
    cache.derived = (fingerprint, [to_cached(v) for v in derived])
    cache.dirty = True
    return derived


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
    seen: Seen | None = None,
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
        seen: receives ``(size, mtime_ns, inode)`` of each folder walked and each
            file checked, as they were when read (see `discover_modules`,
            `check_paths`): what a recorded run must find unchanged
            (`kernel.guard.fastpath.record`).

    Raises:
        ConfigError: ``src`` is not a directory or holds no Python file.
    """
    if not os.path.isdir(src):
        raise ConfigError(f"--src {src}: not a directory")
    excluded: list[str] = []
    files = discover_modules(
        src,
        exclude=exclude,
        gitignore_from=gitignore_from,
        visited=visited,
        excluded=excluded,
        seen=seen,
    )
    if not files:
        raise ConfigError(f"--src {src}: no Python files found")
    if visited is not None:
        visited += [path for path, _m, _k in files]
    display = _displayed(os.fspath(src), [path for path, _m, _k in files], root)
    report = check_paths(
        files,
        policy,
        cache_dir=cache_dir,
        jobs=jobs,
        display=display,
        excluded=excluded,
        seen=seen,
    )
    if only is None:
        return report
    from pathlib import Path  # only for a report limited to some files

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


def _displayed(top: str, paths: list[str], root: Path | str | None) -> dict[str, str]:
    """Each of ``paths`` (found under ``top``) relative to ``root`` (default the
    working directory), POSIX separators: ``top``'s relative path is computed once
    and each file's path below it is joined on (the same as `os.path.relpath` of every
    file, which is purely lexical, at a fraction of the cost)."""
    base = os.path.abspath(root if root is not None else os.curdir)
    head = os.path.relpath(os.path.abspath(top), base)
    below = os.path.join(top, "")
    strip = len(below)
    out: dict[str, str] = {}
    # The walk builds a path as ``below`` plus listed names (never ``.`` or ``..``)
    # joined by one separator each: below ``top`` it is normal already, as ``head``
    # (from `os.path.relpath`) is, and joining them needs no `os.path.normpath`.
    for path in paths:
        if path.startswith(below):
            rest = path[strip:]
            shown = rest if head == os.curdir else f"{head}{os.sep}{rest}"
        else:  # not found by walking ``top``: the long way
            shown = os.path.relpath(os.path.abspath(path), base)
        # `PurePath(shown).as_posix()`, without building a path object per file.
        out[path] = shown if os.sep == "/" else shown.replace(os.sep, "/")
    return out


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
