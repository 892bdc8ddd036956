"""`ExitStatus` is the only source of the `kernel` command's exit codes: no verb returns
or exits with a bare integer, and `kernel --help` describes every status a verb ends with."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernel.effects import cli
from kernel.effects.exit_status import ExitStatus

EFFECTS = Path(cli.__file__).parent
SOURCES = sorted([EFFECTS / "cli.py", *(EFFECTS / "commands").glob("*.py")])


def _bare_statuses(path: Path) -> list[str]:
    """``return 1``, ``return 0 if ok else 1``, ``sys.exit(2)``, ``SystemExit(2)``,
    ``parser.exit(2, ...)``: an integer literal where an exit status is made."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Return) and node.value is not None:
            values = [node.value]
            if isinstance(node.value, ast.IfExp):
                values = [node.value.body, node.value.orelse]
        elif isinstance(node, ast.Call) and (
            getattr(node.func, "attr", None) == "exit"
            or getattr(node.func, "id", None) in {"exit", "SystemExit"}
        ):
            values = node.args[:1]
        else:
            continue
        for value in values:
            if isinstance(value, ast.Constant) and type(value.value) is int:
                found.append(f"{path.name}:{node.lineno}")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_verb_makes_a_bare_exit_status(path: Path) -> None:
    """Every status comes from `ExitStatus` (so one table says what each code means)."""
    assert _bare_statuses(path) == []


def test_the_check_finds_a_bare_status(tmp_path: Path) -> None:
    """The walk above does catch each form it forbids."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def a():\n    return 1\n"
        "def b(ok):\n    return 0 if ok else ExitStatus.REFUSED\n"
        "def c():\n    raise SystemExit(2)\n"
        "def d(p):\n    p.exit(2, 'x')\n"
        "def e():\n    return ExitStatus.OK\n",
        encoding="utf-8",
    )
    assert _bare_statuses(sample) == [f"sample.py:{n}" for n in (2, 4, 6, 8)]


def test_help_describes_every_status_a_verb_ends_with() -> None:
    """`kernel --help`'s epilog names each status but the interrupt's (the shell's own)."""
    for status in ExitStatus:
        listed = f"\n  {status.value}  " in cli.EXIT_CODES
        assert listed is (status is not ExitStatus.INTERRUPTED), status
