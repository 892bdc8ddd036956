"""Finding a source tree's modules: file discovery, module names, ``.gitignore``.

Rules this module enforces:

- every ``*.py`` file under the import root is a module named by its path
  (``a/b/__init__.py`` is ``a.b``); hidden directories, ``__pycache__`` and virtual
  environments are skipped;
- ``.gitignore`` rules from the repository down and ``--exclude`` globs leave paths out,
  and what they leave out is reported (coverage must know it was deliberate).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # paths are strings at run time (no `pathlib` on a cold run's way)
    from pathlib import Path

__all__ = ["discover_modules", "module_name", "pure_path"]


def pure_path(path: Path | str) -> str:
    """``str(Path(path))`` (repeated and trailing separators and ``.`` parts dropped,
    ``..`` kept), without importing `pathlib` on POSIX: paths given on the command line
    are shown in messages, rule sources and findings as the library always wrote them."""
    raw = os.fspath(path)
    if os.sep != "/":  # pragma: no cover - POSIX here
        from pathlib import Path

        return str(Path(raw))
    lead = ""
    if raw.startswith("/"):  # POSIX keeps exactly two leading separators
        lead = "//" if raw.startswith("//") and not raw.startswith("///") else "/"
    return lead + "/".join(p for p in raw.split("/") if p and p != ".") or "."


def module_name(rel: Sequence[str]) -> tuple[str, bool]:
    """The module a ``*.py`` file's path (relative to the import root, as its names)
    names, and whether it is a package (``a/b/__init__.py`` is ``a.b``)."""
    return _module_of(".".join(rel[:-1]), rel[-1])


def _module_of(dotted: str, name: str) -> tuple[str, bool]:
    """`module_name` of the file ``name`` in the folder whose names, joined by dots,
    are ``dotted`` (built once per folder, not once per file)."""
    stem = name[:-3]
    if stem == "__init__":
        return dotted, True
    return (f"{dotted}.{stem}" if dotted else stem), False


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

    @property
    def active(self) -> bool:
        """Whether any rule or pattern was given: else nothing is ignored (most trees),
        and the walk builds no relative path to match."""
        return bool(self.rules or self.exclude)

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
    seen: dict[str, tuple[int, int, int]] | None = None,
) -> list[tuple[str, str, bool]]:
    """``(file path, module name, is package)`` for every ``*.py`` under ``root``, sorted.

    Skipped: hidden folders, ``__pycache__``, any folder holding a ``pyvenv.cfg`` (a
    virtual environment, whether ignored or not), paths matching ``exclude`` (globs on
    the path relative to ``root`` or on one name), and what the ``.gitignore`` files say
    from ``gitignore_from`` (a folder at or above ``root``, usually the repository) down.
    ``visited`` receives every folder walked, every virtual environment's folder left
    out, every ``.gitignore`` in them and every one looked for above ``root`` (what a
    warm replay must find unchanged, `kernel.guard.fastpath`); ``excluded`` the dotted
    names of the folders and modules left out by ``exclude`` or ``.gitignore``;
    ``seen`` the ``(size, mtime_ns, inode)`` of each folder walked, taken just before it
    was listed (an entry added later changes its mtime from the one kept).
    """
    top = os.fspath(root)
    ignore = _Ignore(exclude)
    if gitignore_from is not None:
        chain = []
        here = os.path.realpath(top)  # `Path.resolve`, without `pathlib`
        stop = os.path.realpath(gitignore_from)
        while True:
            chain.append(here)
            parent = os.path.dirname(here)
            if here in (stop, parent):
                break
            here = parent
        if stop in chain:
            for above in reversed(chain[1:]):
                ignore.read(above)
                if visited is not None:
                    visited.append(os.path.join(above, ".gitignore"))
    out: list[tuple[str, str, bool]] = []
    # Each folder with its path relative to the top ("a/b"; "" for the top itself).
    stack = [(top, "")]
    while stack:
        folder, rel = stack.pop()
        listed = _list(folder, seen)
        if listed is None:
            continue
        dirs, modules, links, marks = listed
        if visited is not None:
            visited.append(folder)
        if not (dirs or modules or marks):
            continue  # nothing to walk, match or read (most of a tree's data folders)
        # `os.path.join(folder, name)` is `base + name` for a name read from a listing
        # (only the top may end with a separator already).
        base = folder + os.sep if rel else os.path.join(folder, "")
        if marks and _venv_or_ignore(
            folder, base, rel, marks, ignore=ignore, visited=visited, gitignore_from=gitignore_from
        ):
            continue
        kept = _kept(base, rel, dirs, ignore=ignore, visited=visited, excluded=excluded)
        if modules:
            _modules(base, rel, modules, ignore=ignore, out=out, excluded=excluded)
        if kept:
            # Pushed last first: the first folder's whole tree is walked before the second.
            stack += [
                (base + name, f"{rel}/{name}" if rel else name)
                for name in reversed(kept)
                if name not in links
            ]
    return out


def _venv_or_ignore(
    folder: str,
    base: str,
    rel: str,
    marks: list[str],
    *,
    ignore: _Ignore,
    visited: list[str] | None,
    gitignore_from: Path | str | None,
) -> bool:
    """Whether the folder below the top is a virtual environment (not walked); else
    reads its ``.gitignore`` if it holds one."""
    if rel and "pyvenv.cfg" in marks and os.path.isfile(base + "pyvenv.cfg"):
        # A virtual environment, found in its own listing (a stat of `pyvenv.cfg`
        # in every folder from its parent cost more than the rest of the walk).
        # Not walked, but a warm replay must see `pyvenv.cfg` go: then the folder's
        # modules count (its mtime changes; its parent's does not).
        return True
    # A `.gitignore` added later changes the folder's mtime: only one that exists
    # is read, and stat-checked by a warm replay.
    if ".gitignore" in marks:
        if visited is not None:
            visited.append(base + ".gitignore")
        if gitignore_from is not None:
            ignore.read(folder)
    return False


def _modules(
    base: str,
    rel: str,
    names: list[str],
    *,
    ignore: _Ignore,
    out: list[tuple[str, str, bool]],
    excluded: list[str] | None,
) -> None:
    """Add the modules ``names`` (``*.py`` files of the folder ``base``, whose path
    relative to the top is ``rel``) to ``out``, sorted, less what is ignored."""
    dotted = rel.replace("/", ".")
    for name in sorted(names):
        module, is_package = _module_of(dotted, name)
        # Nothing to match when no rule or pattern was given (most trees).
        if ignore.active and ignore.ignored(
            base + name, f"{rel}/{name}" if rel else name, is_dir=False
        ):
            if excluded is not None:
                excluded.append(module)
            continue
        if module:
            out.append((base + name, module, is_package))


def _kept(
    base: str,
    rel: str,
    dirs: list[str],
    *,
    ignore: _Ignore,
    visited: list[str] | None,
    excluded: list[str] | None,
) -> list[str]:
    """The sub-folders of the folder ``base`` to walk, sorted (see `discover_modules`)."""
    keep: list[str] = []
    if not dirs:
        return keep
    active = ignore.active
    for d in sorted(dirs):
        if d == "__pycache__" or d.startswith("."):
            continue
        if active:
            path = base + d
            sub = f"{rel}/{d}" if rel else d
            if ignore.ignored(path, sub, is_dir=True):
                if os.path.isfile(os.path.join(path, "pyvenv.cfg")):
                    # A virtual environment is one before it is ignored, as the walk
                    # finds one it keeps (`discover_modules`).
                    if visited is not None:
                        visited.append(path)
                    continue
                if excluded is not None:
                    excluded.append(sub.replace("/", "."))
                continue
        keep.append(d)
    return keep


_MARKS = frozenset({"pyvenv.cfg", ".gitignore"})


def _list(
    folder: str, seen: dict[str, tuple[int, int, int]] | None
) -> tuple[list[str], list[str], list[str], list[str]] | None:
    """``folder``'s listing as ``(sub-folders, *.py files, sub-folders that are links,
    which of pyvenv.cfg and .gitignore it holds as files)``, or None when it cannot be
    read (skipped, as `os.walk` skips it). One ``scandir`` and no other system call
    (`os.walk` also runs ``lstat`` on every folder), but a ``stat`` of the folder before
    it is listed when ``seen`` is given. A link to a folder is listed as a folder and
    not walked."""
    dirs: list[str] = []
    modules: list[str] = []
    links: list[str] = []  # lists, not sets: most folders have none
    marks: list[str] = []
    try:
        if seen is not None:
            st = os.stat(folder)
            seen[folder] = (st.st_size, st.st_mtime_ns, st.st_ino)
        with os.scandir(folder) as entries:
            for entry in entries:
                name = entry.name
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                if is_dir:
                    dirs.append(name)
                    if entry.is_symlink():
                        links.append(name)
                elif name.endswith(".py"):
                    modules.append(name)
                elif name in _MARKS:
                    marks.append(name)
    except OSError:
        return None
    return dirs, modules, links, marks
