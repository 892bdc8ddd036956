"""Installed modules read from their source, never imported: where a module's file is
and which names it binds by import (`kernel.guard.scan`'s reach-through and the effect
map, `kernel.guard.effects`, share these).

Rules this module enforces:

- a module's file is found as the path finder finds it, in the folders of `sys.path`
  (one listing per folder, memoised; a package is a folder with ``__init__.py``); a
  builtin module has no file;
- a module's import bindings are read from every import statement of its source, in
  every branch, without compiling it (import statements have a tiny grammar); a line
  that does not fit the grammar (a docstring's example) binds nothing;
- ``json.codecs.open`` is also ``codecs.open`` (`through`), at most eight spellings
  per step; a documented alias submodule (``os.path``) is not a reach;
- a module's import table is kept between runs beside the effect map
  (`kernel.guard.cache.EffectCache`: `export_tables`, `import_tables`) and reused while
  its file has the size and mtime it was read with; one loaded from a file whose mtime
  falls in the racy window of the writing is read again.
"""

from __future__ import annotations

import os
import re
import sys
from functools import cache, lru_cache
from typing import Final

__all__ = [
    "NO_SOURCE",
    "export_tables",
    "import_tables",
    "module_file",
    "module_imports",
    "take_new_tables",
    "through",
]

NO_SOURCE: Final = frozenset(sys.builtin_module_names)
_ALIAS_SUBMODULES: Final = frozenset({"os.path"})
"""Attributes that Python also registers as importable submodules (`sys.modules`)."""
_IMPORT_NOISE: Final = re.compile(r"[()\\\n\r\t ]+")
_IMPORT_PLAIN: Final = re.compile(r"import ([\w., ]+)")
_IMPORT_FROM: Final = re.compile(r"from (\.*)([\w.]*) import ([\w., *]+)")
_IMPORT_ITEM: Final = re.compile(r"([A-Za-z_][\w.]*)(?: as ([A-Za-z_]\w*))?")
_IMPORT_WORD_RX: Final = re.compile(rb"import\b")
_IMPORT_HEAD_RX: Final = re.compile(rb"(?:.*[:;])?[ \t]*((?:from[ \t]+\.*[\w.]*[ \t]+)?)")
"""What may precede the word ``import`` on its line (group 1: the statement's start)."""


@cache
def _listing(directory: str) -> dict[str, str]:
    """Module names directly in ``directory`` -> file (``.py``) or folder (packages)."""
    out: dict[str, str] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return out
    for entry in entries:
        name = entry.name
        if name.endswith(".py"):
            out.setdefault(name[:-3], entry.path)
        elif "." not in name and entry.is_dir():
            out.setdefault(name, entry.path)
    return out


@cache
def _is_package(folder: str) -> bool:
    """Does ``folder`` hold an ``__init__.py`` file? Asked once per folder, as its
    listing is (`module_file` asks again for each name under a package)."""
    return os.path.isfile(os.path.join(folder, "__init__.py"))


@cache
def _top_level(name: str) -> str | None:
    """Where the top-level module ``name`` is: the first ``.py`` file or package folder
    of that name in the directories of `sys.path`; None for a builtin module. Asked
    once per name: `module_file` is asked about many names under the same few."""
    if name in NO_SOURCE:
        return None
    for directory in sys.path:
        candidate = _listing(directory or ".").get(name)
        if candidate is not None and (candidate.endswith(".py") or _is_package(candidate)):
            return candidate
    return None


@cache
def module_file(module: str) -> str | None:
    """The source file of an installed module, found without importing anything.

    Searched like the path finder does, in the directories of `sys.path` (one listing
    per directory, memoised): a package is a folder with ``__init__.py``.
    """
    parts = module.split(".")
    found = _top_level(parts[0])
    last = len(parts) - 1
    for i in range(last + 1):
        if found is None:
            return None
        if found.endswith(".py"):
            return found if i == last else None
        if i == last:
            return os.path.join(found, "__init__.py")
        candidate = _listing(found).get(parts[i + 1])
        found = (
            candidate
            if candidate is not None and (candidate.endswith(".py") or _is_package(candidate))
            else None
        )
    return None


def _import_statements(data: bytes) -> list[str]:
    """The text of every import statement in a module's source, one per item."""
    snippets: list[str] = []
    seen_starts: set[int] = set()
    for hit in _IMPORT_WORD_RX.finditer(data):
        # Every import statement holds the word `import`: found with a literal search,
        # then the statement is read from its line (`import x`, `from x import y`, also
        # after `:` or `;` as in `if x: import y`).
        pos = hit.start()
        line_start = data.rfind(b"\n", 0, pos) + 1
        head = _IMPORT_HEAD_RX.fullmatch(data, line_start, pos)
        if head is None:
            continue
        start = head.start(1)
        if start in seen_starts:
            continue
        seen_starts.add(start)
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        line = data[start:end]
        if line.count(b"(") > line.count(b")"):
            close = data.find(b")", end)
            end = len(data) if close < 0 else close + 1
        while data[start:end].rstrip().endswith(b"\\"):
            nxt = data.find(b"\n", end + 1)
            end = len(data) if nxt < 0 else nxt
        text = data[start:end].strip().decode("utf-8", "replace")
        snippets.extend(part.strip() for part in text.split(";"))
    return snippets


def _import_pairs(snippet: str, package: str) -> list[tuple[str, str]]:
    """``(bound name, qualified target)`` of one import statement, or nothing.

    Import statements have a tiny grammar: read without `compile` (this runs for every
    installed module a guarded file reaches). A line that does not fit it is not an
    import statement (a docstring's example): nothing.
    """
    pairs: list[tuple[str, str]] = []
    text = _IMPORT_NOISE.sub(" ", snippet.split("#", 1)[0] if "(" not in snippet else
                             re.sub(r"#[^\n]*", "", snippet)).strip()  # fmt: skip
    plain = _IMPORT_PLAIN.fullmatch(text)
    if plain is not None:
        for item in plain.group(1).split(","):
            got = _IMPORT_ITEM.fullmatch(item.strip())
            if got is None:
                return []
            name, alias = got.group(1), got.group(2)
            first = name.split(".", 1)[0]
            pairs.append((alias, name) if alias else (first, first))
        return pairs
    frm = _IMPORT_FROM.fullmatch(text)
    if frm is None:
        return []
    dots, base, items = len(frm.group(1)), frm.group(2), frm.group(3)
    if dots:
        parts = package.split(".")
        keep = len(parts) - (dots - 1)
        if keep <= 0:
            return []
        prefix = ".".join(parts[:keep])
        base = f"{prefix}.{base}" if base else prefix
    for item in items.split(","):
        got = _IMPORT_ITEM.fullmatch(item.strip())
        if got is None or "." in got.group(1):
            if item.strip() not in ("", "*"):
                return []
            continue
        pairs.append((got.group(2) or got.group(1), f"{base}.{got.group(1)}"))
    return pairs


ImportTable = dict[str, tuple[str, ...]]
_TABLES: dict[str, tuple[tuple[int, int], str, ImportTable]] = {}
"""path -> ``((size, mtime_ns), module, import table)``: what `module_imports` read,
kept on disk between runs (a cold run read the same few hundred installed files again,
about 0.02 s over Django)."""
_NEW_TABLES: set[str] = set()


@cache
def module_imports(module: str) -> ImportTable:
    """Names an installed module binds by import -> what they are bound to.

    Read from its source (import statements anywhere in the file, every branch: a name
    bound to ``posixpath`` on one platform and ``ntpath`` on another has both). A module
    without Python source (builtin, extension) binds nothing that can be read.
    """
    path = module_file(module)
    if path is None:
        return {}
    try:
        st = os.stat(path)  # before the read: a change after it is a change next time
        key = (st.st_size, st.st_mtime_ns)
        known = _TABLES.get(path)
        if known is not None and known[0] == key and known[1] == module:
            return known[2]
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return {}
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    table: ImportTable = {}
    for snippet in _import_statements(data):
        for name, target in _import_pairs(snippet, package):
            if target not in table.get(name, ()):
                table[name] = (*table.get(name, ()), target)
    _TABLES[path] = (key, module, table)
    _NEW_TABLES.add(path)
    return table


def export_tables() -> dict[str, tuple[tuple[int, int], str, ImportTable]]:
    """Every import table this process holds, for the cache to write."""
    return dict(_TABLES)


def import_tables(entries: object, *, trusted_before_ns: int, new: bool = False) -> None:
    """Take import tables read from the cache or computed by a worker process.

    One whose file's mtime is not older than ``trusted_before_ns`` (the racy window
    of the writing) is dropped, as is any entry of the wrong shape; ``new`` marks the
    rest for `take_new_tables`.
    """
    if not isinstance(entries, dict):
        return
    for path, entry in entries.items():
        if not (
            isinstance(path, str)
            and isinstance(entry, tuple)
            and len(entry) == 3
            and isinstance(entry[0], tuple)
            and len(entry[0]) == 2
            and all(isinstance(n, int) for n in entry[0])
            and entry[0][1] < trusted_before_ns
            and isinstance(entry[1], str)
            and _is_table(entry[2])
        ):
            continue
        _TABLES[path] = entry
        if new:
            _NEW_TABLES.add(path)


def _is_table(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(name, str)
        and isinstance(targets, tuple)
        and all(isinstance(t, str) for t in targets)
        for name, targets in value.items()
    )


def take_new_tables() -> dict[str, tuple[tuple[int, int], str, ImportTable]]:
    """The import tables read since the last call."""
    out = {path: _TABLES[path] for path in _NEW_TABLES if path in _TABLES}
    _NEW_TABLES.clear()
    return out


@lru_cache(maxsize=65536)
def through(q: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Other names of ``q`` through modules' import bindings, and the modules reached.

    ``json.codecs.open`` is also ``codecs.open`` (and reaches module `codecs` as
    ``json.codecs``). A documented alias submodule (``os.path``) is not a reach.
    """
    parts = q.split(".")
    current = {parts[0]}
    reached: list[tuple[str, str]] = []
    for part in parts[1:]:
        following: set[str] = set()
        for cur in current:
            written = f"{cur}.{part}"
            targets = module_imports(cur).get(part, ()) if written not in _ALIAS_SUBMODULES else ()
            if not targets:
                following.add(written)
                continue
            for target in targets:
                following.add(target)
                if module_file(target) is not None or target in NO_SOURCE:
                    reached.append((written, target))
        current = set(sorted(following)[:8])
    names = tuple(sorted(current - {q}))
    return names, tuple(reached)
