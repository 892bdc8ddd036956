"""Matching of dotted module and qualified-name patterns.

Rules this module enforces:

- a module pattern ``a.b`` matches ``a.b`` and every submodule ``a.b.*``; ``*`` globs
  (``kernel.effects.*``) match any characters, dots included;
- in a rule's ``modules`` list a ``!pattern`` excludes, and the last matching entry wins;
- a ``forbid-calls`` pattern names a qualified object: ``os.environ`` matches
  ``os.environ`` and everything reached through it (``os.environ.get``); ``time.*``
  matches every member of ``time`` but not a bare ``import time`` (that is what
  ``forbid-imports`` is for); a dot-less name of a builtin (``open``, ``eval``) means
  ``builtins.<name>``, so ``open`` and ``builtins.open`` are the same pattern.
"""

from __future__ import annotations

import builtins
import fnmatch
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

__all__ = [
    "CallMatcher",
    "ModuleSet",
    "module_set",
    "PATTERN_RE",
    "TWIN_HEADS",
    "covers",
    "module_matches",
    "normalize_call",
    "twin_of",
]

PATTERN_RE = re.compile(r"!?[A-Za-z_*?\[\]][\w*?\[\]!]*(\.[\w*?\[\]!]+)*(\.\*)?")
"""Syntax of every pattern (identifiers, dots, glob characters, optional ``!``)."""

_BUILTIN_NAMES = frozenset(dir(builtins))


def _has_glob(pattern: str) -> bool:
    # Three substring tests run in C; a generator over the characters cost 10x more.
    return "*" in pattern or "?" in pattern or "[" in pattern


def module_matches(pattern: str, module: str) -> bool:
    """True if ``module`` is ``pattern``, a submodule of it, or matches it as a glob."""
    if _has_glob(pattern):
        if fnmatch.fnmatchcase(module, pattern):
            return True
        return any(
            fnmatch.fnmatchcase(module[:i], pattern) for i in range(len(module)) if module[i] == "."
        )
    return module == pattern or module.startswith(pattern + ".")


class ModuleSet:
    """A list of module patterns, compiled: exact names in a set, globs apart."""

    __slots__ = ("_exact", "_globs", "_heads")

    def __init__(self, patterns: Sequence[str]) -> None:
        """``patterns`` as in ``forbid-imports`` (first match reported)."""
        self._exact: dict[str, str] = {}
        self._globs: list[str] = []
        for p in patterns:
            if _has_glob(p):
                self._globs.append(p)
            else:
                self._exact.setdefault(p, p)
        self._heads = frozenset(p.split(".", 1)[0] for p in self._exact)

    def may_match_under(self, head: str) -> bool:
        """Can a module whose top-level package is ``head`` match? No when every
        pattern is exact and none is under ``head`` (a match is the name or a parent)."""
        return bool(self._globs) or head in self._heads

    def match(self, module: str) -> str | None:
        """The first pattern covering ``module`` (itself or a parent package), or None."""
        exact = self._exact
        if exact:
            if module in exact:
                return exact[module]
            end = module.find(".")
            while end > 0:
                hit = exact.get(module[:end])
                if hit is not None:
                    return hit
                end = module.find(".", end + 1)
        for pattern in self._globs:
            if module_matches(pattern, module):
                return pattern
        return None


@lru_cache(maxsize=4096)
def module_set(patterns: tuple[str, ...]) -> ModuleSet:
    """Compiled `ModuleSet` for a pattern tuple (memoised)."""
    return ModuleSet(patterns)


@lru_cache(maxsize=4096)
def _compiled_modules(
    patterns: tuple[str, ...],
) -> tuple[tuple[bool, str, re.Pattern[str] | None], ...]:
    out = []
    for pattern in reversed(patterns):
        positive = not pattern.startswith("!")
        body = pattern if positive else pattern[1:]
        rx = re.compile(fnmatch.translate(body)) if _has_glob(body) else None
        out.append((positive, body, rx))
    return tuple(out)


def covers(patterns: Sequence[str], module: str) -> bool:
    """Whether a rule's ``modules`` list covers ``module`` (globs; last ``!`` wins)."""
    return _covers(tuple(patterns), module)


@lru_cache(maxsize=65536)
def _covers(patterns: tuple[str, ...], module: str) -> bool:
    for positive, body, rx in _compiled_modules(patterns):
        if (rx.match(module) is not None) if rx is not None else body == module:
            return positive
    return False


def normalize_call(pattern: str) -> str:
    """``open`` -> ``builtins.open``; every other pattern is returned unchanged."""
    head = pattern.split(".", 1)[0]
    if "." not in pattern and head in _BUILTIN_NAMES:
        return f"builtins.{pattern}"
    if pattern == "__builtins__" or pattern.startswith("__builtins__."):
        return "builtins" + pattern[len("__builtins__") :]
    return pattern


class CallMatcher:
    """Answers "which (rule, pattern) pairs does qualified name ``q`` break?" quickly.

    Exact patterns are looked up by every dotted prefix of ``q``; ``x.*`` patterns by
    every strict prefix; glob patterns fall back to `fnmatch`.
    """

    __slots__ = (
        "_any_head",
        "_exact",
        "_glob_literals",
        "_globs",
        "_heads",
        "_interesting",
        "_memo",
        "_star",
    )

    def __init__(self, entries: Iterable[tuple[str, str]]) -> None:
        """``entries`` are ``(rule name, forbid-calls pattern)`` pairs."""
        self._exact: dict[str, list[tuple[str, str]]] = {}
        self._star: dict[str, list[tuple[str, str]]] = {}
        self._globs: list[tuple[str, str, str]] = []
        # Each glob pattern's text before its first glob character (`interesting`).
        self._glob_literals: list[str] = []
        self._interesting: set[str] = set()
        # A file names the same few qualified names again and again, and so do the
        # files of one check: each is matched once per matcher.
        self._memo: dict[str, tuple[tuple[str, str], ...]] = {}
        # The top-level names a match can be under (`may_match_under`): a glob's
        # first part when it has no glob character, else any.
        self._heads: set[str] = set()
        self._any_head = False
        for rule, raw in entries:
            pattern = normalize_call(raw)
            head = pattern.split(".", 1)[0]
            if _has_glob(head):
                self._any_head = True
            self._heads.add(head)
            if pattern.endswith(".*") and not _has_glob(pattern[:-2]):
                base = pattern[:-2]
                self._star.setdefault(base, []).append((rule, raw))
            elif _has_glob(pattern):
                self._globs.append((rule, raw, pattern))
                self._glob_literals.append(re.split(r"[*?\[]", pattern, maxsplit=1)[0])
                literal = self._glob_literals[-1].rstrip(".")
                base = literal.rsplit(".", 1)[0] if "." in literal else literal
            else:
                base = pattern
                self._exact.setdefault(base, []).append((rule, raw))
            parts = base.split(".")
            for i in range(1, len(parts) + 1):
                self._interesting.add(".".join(parts[:i]))

    def __bool__(self) -> bool:
        return bool(self._exact or self._star or self._globs)

    def may_match_under(self, head: str) -> bool:
        """Can a name whose first part is ``head`` match, or be `interesting`? No when
        no pattern starts with ``head`` and no glob is in a pattern's first part (a match
        is the name or a prefix of it, and a glob's literal first part must be its own)."""
        return self._any_head or head in self._heads

    def interesting(self, qualname: str) -> bool:
        """Could ``qualname`` or something reached through it break a pattern? For a
        glob, a superset: yes when the pattern's text before its first glob character
        and ``qualname`` agree as far as both go (``os.pa?h.join``: ``os``, ``os.path``,
        ``os.pathlib``; ``*.system``: every name), whatever the glob matches there."""
        if qualname in self._interesting:
            return True
        for literal in self._glob_literals:
            if qualname.startswith(literal) or literal.startswith(qualname):
                return True
        return bool(self.match(qualname))

    def match(self, qualname: str) -> list[tuple[str, str]]:
        """The ``(rule, pattern)`` pairs broken by a reference to ``qualname``."""
        known = self._memo.get(qualname)
        if known is None:
            known = self._memo[qualname] = tuple(self._match(qualname))
        return list(known)

    def _match(self, qualname: str) -> list[tuple[str, str]]:
        if not self._any_head and qualname.split(".", 1)[0] not in self._heads:
            return []  # most names of a project: no pattern under their package
        found: list[tuple[str, str]] = []
        end = -1
        while True:
            end = qualname.find(".", end + 1)
            prefix = qualname if end < 0 else qualname[:end]
            hit = self._exact.get(prefix)
            if hit:
                found.extend(hit)
            if end >= 0:
                hit = self._star.get(prefix)
                if hit:
                    found.extend(hit)
            else:
                break
        for rule, raw, pattern in self._globs:
            if module_matches(pattern, qualname):
                found.append((rule, raw))
        return found


_TWINS: dict[str, str] = {
    # C modules and platform modules behind a public one: the same capability under
    # another import name (`_socket.socket` is `socket.socket`, `posixpath` is the
    # `os.path` of POSIX, `posix.system` is `os.system`).
    "_io": "io", "_socket": "socket", "_pickle": "pickle", "_posixsubprocess": "subprocess",
    "posixpath": "os.path", "ntpath": "os.path", "posix": "os", "nt": "os",
    "_thread": "threading", "_datetime": "datetime", "_random": "random", "_ssl": "ssl",
    "_sqlite3": "sqlite3", "_ctypes": "ctypes", "_signal": "signal",
    "_multiprocessing": "multiprocessing", "_posixshmem": "multiprocessing",
    "_queue": "queue", "_asyncio": "asyncio", "_uuid": "uuid", "_locale": "locale",
    "_json": "json", "_hashlib": "hashlib", "_sha256": "hashlib", "_sha2": "hashlib",
    "_md5": "hashlib", "_sha1": "hashlib", "_blake2": "hashlib", "_sha3": "hashlib",
    "_imp": "importlib", "_frozen_importlib": "importlib._bootstrap",
    "_frozen_importlib_external": "importlib._bootstrap_external",
    "_winapi": "subprocess", "_overlapped": "asyncio", "_bz2": "bz2", "_lzma": "lzma",
    "_zoneinfo": "zoneinfo", "_tracemalloc": "tracemalloc", "_dbm": "dbm", "_gdbm": "dbm",
    "_curses": "curses", "_tkinter": "tkinter",
}  # fmt: skip
_SAME_OBJECT: dict[str, str] = {
    # One object under two public names: io.open *is* the builtin open.
    "io.open": "builtins.open",
    "builtins.open": "io.open",
}


TWIN_HEADS: frozenset[str] = frozenset({*_TWINS, *(name.split(".", 1)[0] for name in _SAME_OBJECT)})
"""The top-level names `twin_of` has an answer under: any other name has no twin."""


@lru_cache(maxsize=65536)
def twin_of(name: str) -> tuple[str, ...]:
    """The other names of what ``name`` is, when it is a C twin or a real name of a
    public module's object (``_io.open`` -> ``io.open``, ``builtins.open``;
    ``posixpath.exists`` -> ``os.path.exists``; ``io.open`` -> ``builtins.open``)."""
    out: list[str] = []
    head, dot, rest = name.partition(".")
    public = _TWINS.get(head)
    if public is not None:
        out.append(f"{public}{dot}{rest}")
    for known in (name, *out):
        same = _SAME_OBJECT.get(known)
        if same is not None and same != name and same not in out:
            out.append(same)
    return tuple(out)
