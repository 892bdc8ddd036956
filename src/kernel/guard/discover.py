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
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

__all__ = ["discover_modules", "module_name"]


def module_name(rel: Sequence[str]) -> tuple[str, bool]:
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
    for folder, prefix, dirs, files in _walk(top, [], seen):
        if prefix and "pyvenv.cfg" in files and os.path.isfile(os.path.join(folder, "pyvenv.cfg")):
            # A virtual environment, found in its own listing (a stat of `pyvenv.cfg`
            # in every folder from its parent cost more than the rest of the walk).
            # Not walked, but a warm replay must see `pyvenv.cfg` go: then the folder's
            # modules count (its mtime changes; its parent's does not).
            if visited is not None:
                visited.append(folder)
            dirs[:] = []
            continue
        # A `.gitignore` added later changes the folder's mtime: only one that exists
        # is read, and stat-checked by a warm replay.
        here_ignore = ".gitignore" in files
        if visited is not None:
            visited.append(folder)
            if here_ignore:
                visited.append(os.path.join(folder, ".gitignore"))
        if gitignore_from is not None and here_ignore:
            ignore.read(folder)
        dirs[:] = _kept(folder, prefix, dirs, ignore=ignore, visited=visited, excluded=excluded)
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                if ignore.ignored(path, "/".join([*prefix, name]), is_dir=False):
                    if excluded is not None:
                        excluded.append(module_name([*prefix, name])[0])
                    continue
                module, is_package = module_name([*prefix, name])
                if module:
                    out.append((path, module, is_package))
    return out


def _kept(
    folder: str,
    prefix: list[str],
    dirs: list[str],
    *,
    ignore: _Ignore,
    visited: list[str] | None,
    excluded: list[str] | None,
) -> list[str]:
    """The sub-folders of ``folder`` to walk, sorted (see `discover_modules`)."""
    keep = []
    for d in sorted(dirs):
        if d == "__pycache__" or d.startswith("."):
            continue
        path = os.path.join(folder, d)
        if ignore.ignored(path, "/".join([*prefix, d]), is_dir=True):
            if os.path.isfile(os.path.join(path, "pyvenv.cfg")):
                # A virtual environment is one before it is ignored, as the walk finds
                # one it keeps (`discover_modules`).
                if visited is not None:
                    visited.append(path)
                continue
            if excluded is not None:
                excluded.append(".".join([*prefix, d]))
            continue
        keep.append(d)
    return keep


def _walk(
    folder: str, prefix: list[str], seen: dict[str, tuple[int, int, int]] | None = None
) -> Iterator[tuple[str, list[str], list[str], list[str]]]:
    """`os.walk` from the top down, without following links, with each folder's path
    relative to the top as a list of names: ``(folder, prefix, dirs, files)``; the
    caller prunes ``dirs`` in place. One ``scandir`` per folder and no other system
    call (`os.walk` also runs ``lstat`` on every folder), but a ``stat`` of the folder
    before it is listed when ``seen`` is given; an unreadable folder is skipped, as
    `os.walk` does."""
    # An explicit stack, not recursion: a `yield from` chain passes every folder up
    # through each level above it (Django's locale tree is eight deep).
    stack = [(folder, prefix)]
    while stack:
        here, names = stack.pop()
        dirs: list[str] = []
        files: list[str] = []
        links: set[str] = set()
        try:
            if seen is not None:
                st = os.stat(here)
                seen[here] = (st.st_size, st.st_mtime_ns, st.st_ino)
            with os.scandir(here) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    if is_dir:
                        dirs.append(entry.name)
                        if entry.is_symlink():
                            links.add(entry.name)
                    else:
                        files.append(entry.name)
        except OSError:
            continue
        yield here, names, dirs, files
        # Pushed last first: the first folder's whole tree is walked before the second.
        stack.extend(
            (os.path.join(here, name), [*names, name])
            for name in reversed(dirs)
            if name not in links
        )
