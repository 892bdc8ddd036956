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
import re
from typing import Final

import attrs

__all__ = [
    "ChangeKind",
    "FileChange",
    "PatchReason",
    "PatchRefusal",
    "changed_paths",
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

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path this change names (old and new), without repeats."""
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p is not None))

    @property
    def symlink(self) -> bool:
        """A side of the change is a symbolic link."""
        return "120000" in (self.old_mode, self.new_mode)


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
_HUNK: Final = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
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
                index = _skip_hunk(lines, index)
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


def _skip_hunk(lines: list[str], index: int) -> int:
    """The index after the hunk whose ``@@`` line is at ``index``."""
    match = _HUNK.match(lines[index])
    if match is None:
        raise _Refused(PatchReason.UNEXPECTED_LINE)
    old = 1 if match.group(1) is None else int(match.group(1))
    new = 1 if match.group(2) is None else int(match.group(2))
    index += 1
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
    return index


def changed_paths(changes: tuple[FileChange, ...]) -> tuple[str, ...]:
    """Every path the changes name (old and new sides), sorted, without repeats."""
    return tuple(sorted({p for change in changes for p in change.paths}))
