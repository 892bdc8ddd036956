"""No `assert` statement in the shipped code: `python -O` strips them, so a check
written as one silently disappears (house rule 12)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "kernel"


def test_no_assert_statement_in_src() -> None:
    """Every module under src/kernel parses without a single assert statement."""
    found = [
        f"{path.relative_to(SRC.parent)}:{node.lineno}"
        for path in sorted(SRC.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_bytes(), str(path)))
        if isinstance(node, ast.Assert)
    ]
    assert found == []
