"""A git patch read as a structured list of file changes.

`parse_patch` reads the bytes ``git diff`` writes (the sandbox's pinned
``git diff --no-index``, or ``git diff`` in a repository, with or without renames and
copies) and returns one `FileChange` per file section, or a `PatchRefusal` naming why
the bytes are not such a patch. The protected-paths check reads its paths from here:
every path a change names, old and new, whatever the kind of change.

Rules enforced (each refusal is one `PatchReason`):

- every line belongs to a section that starts with ``diff --git``: text before the
  first section, after a hunk, or an unknown header line is refused
  (``unexpected_line``); hunks are read by their line counts, so a hunk line that
  looks like a header (``--- a/x`` as removed text) is never taken for one, and a
  hunk that ends early is refused (``truncated_hunk``);
- paths come from the ``diff --git`` line, ``---``/``+++``, ``rename from/to`` and
  ``copy from/to``, quoted (git's C quoting) or not; each must be relative, without
  ``..``, ``.`` or empty components and without NUL (``unsafe_path``); header paths
  carry the ``a/`` or ``b/`` prefix (``bad_prefix``);
- the names of one section must agree: ``---`` with the old name, ``+++`` with the new
  one, ``rename``/``copy`` lines with both; old and new differ only for a rename or a
  copy (``inconsistent_paths``); a ``diff --git`` line that cannot be split into two
  names, and no other line names them, is refused (``ambiguous_header``);
- empty bytes are no change; any other bytes need at least one section (their first
  line is otherwise ``unexpected_line``).
"""

from __future__ import annotations

import enum
import fnmatch
import posixpath
import re
from collections.abc import Callable
from typing import Final

import attrs

from kernel.run.verification import CheckReason

__all__ = [
    "HYGIENE_RULES",
    "ChangeKind",
    "FileChange",
    "Hunk",
    "PatchReason",
    "PatchRefusal",
    "apply_change",
    "changed_paths",
    "hygiene_findings",
    "parse_patch",
]


class ChangeKind(enum.StrEnum):
    """What a patch section does to its file."""

    ADD = "add"
    DELETE = "delete"
    MODIFY = "modify"
    RENAME = "rename"
    COPY = "copy"


class PatchReason(enum.StrEnum):
    """Why bytes are not read as a patch (each produced by one rule of the module)."""

    UNEXPECTED_LINE = "unexpected_line"
    TRUNCATED_HUNK = "truncated_hunk"
    UNSAFE_PATH = "unsafe_path"
    BAD_PREFIX = "bad_prefix"
    INCONSISTENT_PATHS = "inconsistent_paths"
    AMBIGUOUS_HEADER = "ambiguous_header"


@attrs.frozen(kw_only=True)
class Hunk:
    """One ``@@`` hunk of a text change: where it applies and its body lines."""

    old_start: int
    """1-based first line in the old file (0 for an empty old side)."""
    old_count: int
    """Lines of the old file it covers."""
    lines: tuple[str, ...]
    """Body lines as written (`` ``, ``-``, ``+`` or ``\\`` first), without newlines."""


@attrs.frozen(kw_only=True)
class FileChange:
    """One file section of a patch."""

    kind: ChangeKind
    """Add, delete, modify (content and/or mode), rename or copy."""
    old_path: str | None
    """The path before (None for an added file)."""
    new_path: str | None
    """The path after (None for a deleted file)."""
    old_mode: str | None
    """The mode before when the patch states it (``100644``, ``100755``, ``120000``)."""
    new_mode: str | None
    """The mode after when the patch states it."""
    binary: bool
    """The content change is binary (``GIT binary patch`` or ``Binary files``)."""
    hunks: tuple[Hunk, ...] = ()
    """The text hunks, in patch order (empty for a binary or a pure mode/rename change)."""

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path this change names (old and new), without repeats."""
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p is not None))

    @property
    def symlink(self) -> bool:
        """A side of the change is a symbolic link."""
        return "120000" in (self.old_mode, self.new_mode)

    @property
    def link_target(self) -> str | None:
        """The target of the symbolic link this change leaves at ``new_path`` (None: the
        new side is no link, or its target is not in the patch as text)."""
        if self.new_path is None or self.new_mode != "120000" or self.binary:
            return None
        added = [line[1:] for hunk in self.hunks for line in hunk.lines if line[:1] == "+"]
        return added[0] if len(added) == 1 else None


@attrs.frozen(kw_only=True)
class PatchRefusal:
    """The bytes are not read as a patch."""

    reason: PatchReason
    """Which rule refused them."""
    line: int
    """1-based line number where it was refused (0: the whole patch)."""


_ESCAPES: Final = {
    "n": 10,
    "t": 9,
    '"': 34,
    "\\": 92,
    "a": 7,
    "b": 8,
    "f": 12,
    "r": 13,
    "v": 11,
}
_HUNK: Final = re.compile(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_MODE: Final = re.compile(r"[0-7]{6}")


class _Refused(Exception):
    def __init__(self, reason: PatchReason) -> None:
        super().__init__(reason)
        self.reason = reason


def _unquote(text: str) -> tuple[str, str]:
    """One C-quoted git name at the start of ``text``: (name, rest after it)."""
    data = text.encode("utf-8", "surrogateescape")
    out = bytearray()
    i = 1
    while i < len(data):
        ch = data[i]
        if ch == 0x22:
            return out.decode("utf-8", "surrogateescape"), data[i + 1 :].decode(
                "utf-8", "surrogateescape"
            )
        if ch == 0x5C:
            nxt = chr(data[i + 1]) if i + 1 < len(data) else ""
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            digits = data[i + 1 : i + 4].decode("ascii", "replace")
            if len(digits) == 3 and all(c in "01234567" for c in digits) and int(digits, 8) < 256:
                out.append(int(digits, 8))
                i += 4
                continue
            raise _Refused(PatchReason.UNEXPECTED_LINE)
        out.append(ch)
        i += 1
    raise _Refused(PatchReason.UNEXPECTED_LINE)


def _name(text: str) -> str:
    """A whole-line name (quoted, or raw with git's trailing tab for names with spaces)."""
    if text.startswith('"'):
        name, rest = _unquote(text)
        if rest not in ("", "\t"):
            raise _Refused(PatchReason.UNEXPECTED_LINE)
        return name
    return text.removesuffix("\t") if " " in text else text


def _safe(path: str) -> str:
    parts = path.split("/")
    if not path or "\0" in path or any(p in ("", ".", "..") for p in parts):
        raise _Refused(PatchReason.UNSAFE_PATH)
    return path


def _strip_prefix(name: str) -> str:
    prefix, sep, path = name.partition("/")
    if not sep or prefix not in ("a", "b"):
        raise _Refused(PatchReason.BAD_PREFIX)
    return _safe(path)


def _header_names(rest: str) -> tuple[str, str] | None:
    """The two names of a ``diff --git`` line, or None when they cannot be told apart."""
    if rest.startswith('"'):
        first, tail = _unquote(rest)
        if not tail.startswith(" "):
            raise _Refused(PatchReason.UNEXPECTED_LINE)
        tail = tail[1:]
        second = _unquote(tail)[0] if tail.startswith('"') else tail
        if tail.startswith('"') and _unquote(tail)[1]:
            raise _Refused(PatchReason.UNEXPECTED_LINE)
        return first, second
    if rest.endswith('"'):
        split = rest.find(' "')
        if split < 0:
            raise _Refused(PatchReason.UNEXPECTED_LINE)
        second, tail = _unquote(rest[split + 1 :])
        if tail:
            raise _Refused(PatchReason.UNEXPECTED_LINE)
        return rest[:split], second
    # Unquoted: "P1 P2" where git wrote the same path twice (prefixes aside) unless the
    # section renames or copies; only then are the two halves known without guessing.
    if (len(rest) - 1) % 2 == 0:
        half = (len(rest) - 1) // 2
        first, second = rest[:half], rest[half + 1 :]
        if rest[half] == " " and first[2:] == second[2:]:
            return first, second
    return None


@attrs.define
class _Section:
    header: tuple[str, str] | None
    line: int
    minus: str | None = None
    plus: str | None = None
    moved_from: str | None = None
    moved_to: str | None = None
    moved: str | None = None
    old_mode: str | None = None
    new_mode: str | None = None
    added: bool = False
    deleted: bool = False
    binary: bool = False
    hunks: list[Hunk] = attrs.field(factory=list)
    seen: set[str] = attrs.field(factory=set)

    def change(self) -> FileChange:
        header = self.header
        old = new = None
        if header is not None:
            old, new = _strip_prefix(header[0]), _strip_prefix(header[1])
        if self.moved is not None:
            if self.moved_from is None or self.moved_to is None:
                raise _Refused(PatchReason.INCONSISTENT_PATHS)
            if header is not None and (old, new) != (self.moved_from, self.moved_to):
                raise _Refused(PatchReason.INCONSISTENT_PATHS)
            old, new = self.moved_from, self.moved_to
        elif old is None or new is None:
            # Without rename/copy lines, ---/+++ may name the file unambiguously.
            named = [_strip_prefix(n) for n in (self.minus, self.plus) if n is not None]
            if not named:
                raise _Refused(PatchReason.AMBIGUOUS_HEADER)
            old = new = named[0]
        if self.moved is None and old != new:
            raise _Refused(PatchReason.INCONSISTENT_PATHS)
        if self.minus is not None and _strip_prefix(self.minus) != old:
            raise _Refused(PatchReason.INCONSISTENT_PATHS)
        if self.plus is not None and _strip_prefix(self.plus) != new:
            raise _Refused(PatchReason.INCONSISTENT_PATHS)
        if self.added and self.deleted:
            raise _Refused(PatchReason.INCONSISTENT_PATHS)
        if (self.added or self.deleted) and self.moved is not None:
            raise _Refused(PatchReason.INCONSISTENT_PATHS)
        if self.added:
            kind, old = ChangeKind.ADD, None
        elif self.deleted:
            kind, new = ChangeKind.DELETE, None
        elif self.moved is not None:
            kind = ChangeKind(self.moved)
        else:
            kind = ChangeKind.MODIFY
        return FileChange(
            kind=kind,
            old_path=old,
            new_path=new,
            old_mode=self.old_mode,
            new_mode=self.new_mode,
            binary=self.binary,
            hunks=tuple(self.hunks),
        )


def _mode(value: str) -> str:
    if not _MODE.fullmatch(value):
        raise _Refused(PatchReason.UNEXPECTED_LINE)
    return value


def _header_line(section: _Section, line: str) -> None:
    """Read one extended header line of ``section`` (each kind at most once)."""
    key = next(
        (
            k
            for k in (
                "old mode ",
                "new mode ",
                "deleted file mode ",
                "new file mode ",
                "rename from ",
                "rename to ",
                "copy from ",
                "copy to ",
                "similarity index ",
                "dissimilarity index ",
                "index ",
                "--- ",
                "+++ ",
            )
            if line.startswith(k)
        ),
        None,
    )
    if key is None:
        if line.startswith("Binary files ") and line.endswith(" differ"):
            key = "Binary files "
        else:
            raise _Refused(PatchReason.UNEXPECTED_LINE)
    if key in section.seen:
        raise _Refused(PatchReason.UNEXPECTED_LINE)
    section.seen.add(key)
    value = line[len(key) :]
    if key in ("old mode ", "deleted file mode "):
        section.old_mode = _mode(value)
        section.deleted |= key == "deleted file mode "
    elif key in ("new mode ", "new file mode "):
        section.new_mode = _mode(value)
        section.added |= key == "new file mode "
    elif key in ("rename from ", "copy from ", "rename to ", "copy to "):
        verb, _, end = key.partition(" ")
        if section.moved not in (None, verb):
            raise _Refused(PatchReason.INCONSISTENT_PATHS)
        section.moved = verb
        path = _safe(_name(value))
        if end == "from ":
            section.moved_from = path
        else:
            section.moved_to = path
    elif key == "--- ":
        section.minus = None if value == "/dev/null" else _name(value)
    elif key == "+++ ":
        section.plus = None if value == "/dev/null" else _name(value)
    elif key == "Binary files ":
        section.binary = True


def parse_patch(data: bytes) -> tuple[FileChange, ...] | PatchRefusal:
    """Read ``data`` as a git patch: its file changes in patch order, or a refusal.

    Never raises on bad bytes: every way the bytes can fail is a `PatchRefusal`.
    """
    text = data.decode("utf-8", "surrogateescape")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    changes: list[FileChange] = []
    section: _Section | None = None
    number = 0
    try:
        index = 0
        while index < len(lines):
            line = lines[index]
            number = index + 1
            if line.startswith("diff --git "):
                if section is not None:
                    changes.append(section.change())
                section = _Section(header=_header_names(line[len("diff --git ") :]), line=number)
                index += 1
            elif section is None:
                raise _Refused(PatchReason.UNEXPECTED_LINE)
            elif line == "GIT binary patch":
                section.binary = True
                index += 1
                # Base85 lines and blank separators: they never start with "diff --git ".
                while index < len(lines) and not lines[index].startswith("diff --git "):
                    index += 1
            elif line.startswith("@@ "):
                section.seen.add("@@ ")
                index, hunk = _read_hunk(lines, index)
                section.hunks.append(hunk)
            elif "@@ " in section.seen or ("--- " in section.seen and "+++ " in section.seen):
                # After ---/+++ only hunks may follow.
                raise _Refused(PatchReason.UNEXPECTED_LINE)
            else:
                _header_line(section, line)
                index += 1
        if section is not None:
            number = section.line
            changes.append(section.change())
    except _Refused as refused:
        return PatchRefusal(reason=refused.reason, line=number)
    return tuple(changes)


def _read_hunk(lines: list[str], index: int) -> tuple[int, Hunk]:
    """The hunk whose ``@@`` line is at ``index``, and the index after it."""
    match = _HUNK.match(lines[index])
    if match is None:
        raise _Refused(PatchReason.UNEXPECTED_LINE)
    old = 1 if match.group(2) is None else int(match.group(2))
    new = 1 if match.group(3) is None else int(match.group(3))
    old_start, old_count = int(match.group(1)), old
    index += 1
    first = index
    while old > 0 or new > 0:
        if index >= len(lines):
            raise _Refused(PatchReason.TRUNCATED_HUNK)
        body = lines[index]
        if body.startswith(" ") or body == "":
            # git writes an empty context line as " "; some tools strip it to "".
            old, new = old - 1, new - 1
        elif body.startswith("-"):
            old -= 1
        elif body.startswith("+"):
            new -= 1
        elif not body.startswith("\\"):
            raise _Refused(PatchReason.TRUNCATED_HUNK)
        if old < 0 or new < 0:
            raise _Refused(PatchReason.TRUNCATED_HUNK)
        index += 1
    while index < len(lines) and lines[index].startswith("\\"):
        index += 1
    return index, Hunk(old_start=old_start, old_count=old_count, lines=tuple(lines[first:index]))


def changed_paths(changes: tuple[FileChange, ...]) -> tuple[str, ...]:
    """Every path the changes name (old and new sides), sorted, without repeats."""
    return tuple(sorted({p for change in changes for p in change.paths}))


def apply_change(change: FileChange, old: bytes | None) -> bytes | None:
    """The bytes ``change`` leaves at its new path, given the old file's bytes.

    Exact application (no offsets, no fuzz: a patch written by ``git diff`` against this
    baseline applies exactly). None when the change leaves no text file (a deletion, a
    binary change) or does not apply to ``old``: a caller that needs the text fails closed.
    """
    if change.new_path is None or change.binary:
        return None
    old_lines = b"" if old is None else old
    text = old_lines.decode("utf-8", "surrogateescape").split("\n")
    old_eol = text[-1] == ""
    if old_eol:
        text.pop()
    out: list[str] = []
    pos = 0
    new_eol = True
    for hunk in change.hunks:
        start = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        if start < pos or start > len(text):
            return None
        out += text[pos:start]
        pos = start
        last = ""
        for line in hunk.lines:
            tag, body = line[:1], line[1:]
            if tag == "\\":
                # "No newline at end of file" after a line of the new side.
                new_eol = new_eol and last == "-"
                continue
            last = tag
            if tag in (" ", "", "-"):
                if pos >= len(text) or text[pos] != body:
                    return None
                pos += 1
            if tag != "-":
                out.append(body)
    if pos < len(text):
        out += text[pos:]
        new_eol = old_eol
    data = "\n".join(out) + ("\n" if out and new_eol else "")
    return data.encode("utf-8", "surrogateescape")


def _matches(path: str, globs: tuple[str, ...]) -> bool:
    name = posixpath.basename(path)
    return any(fnmatch.fnmatchcase(path, g) or fnmatch.fnmatchcase(name, g) for g in globs)


def _protected(change: FileChange, protected: tuple[str, ...]) -> str | None:
    return next((p for p in change.paths if _matches(p, protected)), None)


_BYTECODE: Final = (".pyc", ".pyo")
# Extension modules the import system loads by name (``m.so``, ``m.cpython-311-x86_64-
# linux-gnu.so``, ``m.pyd``): code the verifier cannot read. Plain ``.dll``/``.dylib``
# are not importable by name; loading them needs ctypes, which the screen flags.
_SOURCELESS: Final = (".so", ".pyd")
_IMPORTABLE: Final = (".py", ".pyw", *_BYTECODE, *_SOURCELESS)
_GIT_METADATA: Final = frozenset({".git", ".gitattributes", ".gitmodules"})


def _bytecode(change: FileChange, _protected: tuple[str, ...]) -> str | None:
    path = change.new_path
    if path is None:
        return None
    return path if path.endswith(_BYTECODE) or "__pycache__" in path.split("/") else None


def _sourceless(change: FileChange, _protected: tuple[str, ...]) -> str | None:
    path = change.new_path
    return path if path is not None and path.endswith(_SOURCELESS) else None


def _shadows(change: FileChange, protected: tuple[str, ...]) -> str | None:
    """A new path whose import name is a protected module's: a package folder
    (``test_stats/__init__.py``, any file under ``test_stats/``) or a module of another
    kind (``test_stats.pyc``, ``test_stats.cpython-311.so``) beside ``test_stats.py``."""
    path = change.new_path
    if path is None or not protected:
        return None
    parts = path.split("/")
    folders = ["/".join(parts[:i]) + ".py" for i in range(1, len(parts))]
    module = "/".join([*parts[:-1], parts[-1].split(".")[0] + ".py"])
    same = [module] if module != path and path.endswith(_IMPORTABLE) else []
    return path if any(_matches(m, protected) for m in [*folders, *same]) else None


def _symlink_escapes(change: FileChange, _protected: tuple[str, ...]) -> str | None:
    path = change.new_path
    if path is None or change.new_mode != "120000":
        return None
    target = change.link_target
    # An unknown target, an absolute one or one that climbs out of the tree leaves it.
    if target is None or target.startswith("/") or "\0" in target:
        return path
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    return path if resolved == ".." or resolved.startswith("../") else None


def _symlink(change: FileChange, protected: tuple[str, ...]) -> str | None:
    if _symlink_escapes(change, protected) is not None:
        return None
    return change.new_path if change.new_mode == "120000" else None


def _git_metadata(change: FileChange, _protected: tuple[str, ...]) -> str | None:
    return next((p for p in change.paths if _GIT_METADATA & set(p.split("/"))), None)


HYGIENE_RULES: Final[
    tuple[tuple[CheckReason, Callable[[FileChange, tuple[str, ...]], str | None]], ...]
] = (
    (CheckReason.PROTECTED_PATH_TOUCHED, _protected),
    (CheckReason.BYTECODE_ADDED, _bytecode),
    (CheckReason.SOURCELESS_MODULE, _sourceless),
    (CheckReason.SHADOWS_PROTECTED_MODULE, _shadows),
    (CheckReason.SYMLINK_ESCAPES_TREE, _symlink_escapes),
    (CheckReason.SYMLINK_IN_TREE, _symlink),
    (CheckReason.GIT_METADATA, _git_metadata),
)
"""The patch rules of the built-in ``protected-paths`` check, in reporting order: each
maps a change (and the verifier's protected globs) to the path it refuses, or None."""


def hygiene_findings(
    changes: tuple[FileChange, ...], protected: tuple[str, ...]
) -> tuple[tuple[CheckReason, str], ...]:
    """Every (reason, path) the rules of `HYGIENE_RULES` find, in rule then patch order."""
    return tuple(
        (reason, path)
        for reason, rule in HYGIENE_RULES
        for change in changes
        if (path := rule(change, protected)) is not None
    )
