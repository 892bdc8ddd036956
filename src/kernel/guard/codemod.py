"""Adopting the guard on an existing codebase: a suppression, with its reason, at each
current finding (``kernel guard --add-suppressions --reason "..."``, as ruff's
``--add-noqa``).

Rules this module enforces:

- the source is edited through libcst, which keeps every byte it does not change
  (comments, layout, quotes): only the lines of findings change, and only by the
  comment added at their end;
- a finding's line gets ``# kernel-guard: ignore[CODES] reason`` at its end when the
  line ends a statement or a bracketed line (libcst's trailing whitespace); a line
  that already ends with a ``kernel-guard`` comment gets the codes merged into it;
  when the end of the line cannot hold a comment (another comment is there, or the
  line continues a string or a backslash), the comment goes on its own line above a
  statement that starts on that line, which speaks for the next line;
- a line where neither is possible is returned, never silently skipped;
- the reason is required and is one line (a comment cannot hold a newline).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import libcst as cst

__all__ = ["add_suppressions"]

_S = TypeVar("_S", bound="cst.BaseStatement")

_OURS = re.compile(r"#\s*kernel-guard:\s*ignore\[([A-Z0-9, ]+)\](.*)$")


def _comment(codes: Set[str], reason: str) -> str:
    return f"# kernel-guard: ignore[{','.join(sorted(codes))}] {reason}"


def add_suppressions(
    source: str, lines: Mapping[int, Set[str]], reason: str
) -> tuple[str, list[int]]:
    """``source`` with a suppression of ``lines[n]``'s codes at each line ``n``, and
    the lines that could not take one.

    Raises:
        ValueError: the reason is empty or spans lines; the source does not parse.
    """
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    reason = reason.strip()
    if not reason or "\n" in reason or "\r" in reason:
        raise ValueError("--reason: one non-empty line")
    try:
        wrapper = MetadataWrapper(cst.parse_module(source))
    except cst.ParserSyntaxError as e:
        raise ValueError(f"cannot parse: {e.message}") from e
    positions = wrapper.resolve(PositionProvider)
    wanted = {line: set(codes) for line, codes in lines.items() if codes}
    done: set[int] = set()

    class Adder(cst.CSTTransformer):
        def leave_TrailingWhitespace(
            self, original: cst.TrailingWhitespace, updated: cst.TrailingWhitespace
        ) -> cst.TrailingWhitespace:
            line = positions[original].start.line
            codes = wanted.get(line)
            if codes is None or line in done:
                return updated
            if updated.comment is None:
                done.add(line)
                return updated.with_changes(
                    whitespace=cst.SimpleWhitespace("  "),
                    comment=cst.Comment(_comment(codes, reason)),
                )
            m = _OURS.match(updated.comment.value)
            if m is None:
                return updated  # another comment ends the line: a line above instead
            done.add(line)
            merged = codes | {c.strip() for c in m.group(1).split(",") if c.strip()}
            said = m.group(2).strip() or reason
            return updated.with_changes(comment=cst.Comment(_comment(merged, said)))

        def _above(self, original: _S, updated: _S) -> _S:
            line = positions[original].start.line
            codes = wanted.get(line)
            if codes is None or line in done:
                return updated
            done.add(line)
            note = cst.EmptyLine(comment=cst.Comment(_comment(codes, reason)))
            leading = [*getattr(updated, "leading_lines", ()), note]
            return updated.with_changes(leading_lines=leading)

        def leave_SimpleStatementLine(
            self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
        ) -> cst.SimpleStatementLine:
            return self._above(original, updated)

        def leave_FunctionDef(
            self, original: cst.FunctionDef, updated: cst.FunctionDef
        ) -> cst.FunctionDef:
            return self._above(original, updated)

        def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
            return self._above(original, updated)

        def leave_If(self, original: cst.If, updated: cst.If) -> cst.If:
            return self._above(original, updated)

        def leave_For(self, original: cst.For, updated: cst.For) -> cst.For:
            return self._above(original, updated)

        def leave_With(self, original: cst.With, updated: cst.With) -> cst.With:
            return self._above(original, updated)

    changed = wrapper.module.visit(Adder())
    return changed.code, sorted(set(wanted) - done)
