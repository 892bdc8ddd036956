"""`kernel self-test`: every built-in check runs, passes here, and a failure is exit 1."""

from __future__ import annotations

import ast
import importlib.resources
import subprocess
import sys
from pathlib import Path

import pytest

import kernel
from kernel.effects.cli import main
from kernel.effects.commands import bind_selftest, selftest
from kernel.errors import SelfTestFailure

ROOT = Path(__file__).resolve().parents[1]


def test_every_check_passes(capsys: pytest.CaptureFixture[str]) -> None:
    """All groups run (identity, report, decision, binding, corroboration, admission)."""
    assert main(["self-test"]) == 0
    lines = capsys.readouterr().out.splitlines()
    checks = sum(len(group) for group in selftest.CHECK_GROUPS)
    assert sum(line.startswith("ok   ") for line in lines) == checks
    for prefix in ("report:", "decision:", "binding:", "corroboration:", "admission:"):
        assert any(line.startswith(f"ok   {prefix}") for line in lines), prefix
    assert lines[-1] == "self-test: all checks passed"


def test_a_failing_check_is_reported_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A check raising SelfTestFailure prints FAIL with what it saw; any other exception
    (an ``assert`` included) prints FAIL with its type; the others still run."""

    def broken() -> None:
        raise SelfTestFailure("saw something else")

    def asserting() -> None:
        raise AssertionError("an assert")

    checks = [("broken check", broken), ("asserting check", asserting)]
    monkeypatch.setattr(selftest, "CHECK_GROUPS", [checks, *selftest.CHECK_GROUPS])
    assert main(["self-test"]) == 1
    out = capsys.readouterr().out
    assert "FAIL broken check: saw something else" in out
    assert "FAIL asserting check: AssertionError: an assert" in out
    assert "ok   binding: the ADR-0232 reference chain binds" in out
    assert out.splitlines()[-1] == "self-test: 2 failed"


def test_packaged_reference_chain_is_the_fixture() -> None:
    """The chain shipped for the self-test is byte-identical to fixtures/binding's."""
    packaged = importlib.resources.files(bind_selftest.__package__).joinpath(
        bind_selftest.REFERENCE_CHAIN
    )
    fixture = ROOT / "fixtures" / "binding" / "reference-chain.json"
    assert packaged.read_bytes() == fixture.read_bytes()


BROKEN_CORE = """
import sys
from kernel.effects.commands import report_selftest, selftest

if sys.flags.optimize < 1:
    raise SystemExit("not run under -O")
# A broken report module: its consistency check accepts everything, and canonical
# JSON writes keys unsorted. Under -O a bare assert would let both pass.
report_selftest.check_evidence_report = lambda *args, **kwargs: None
selftest.canonical_json = lambda value: b"{}"
raise SystemExit(selftest.run(None))
"""


def test_a_broken_core_fails_the_self_test_under_python_O() -> None:
    """Checks fail explicitly: `python -O` (which strips assert) still catches a broken core."""
    done = subprocess.run(
        [sys.executable, "-O", "-c", BROKEN_CORE], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("FAIL canonical JSON matches") for line in lines), lines
    assert any(
        line.startswith("FAIL decision: a relabelled report is refused") for line in lines
    ), lines
    assert lines[-1] == "self-test: 3 failed"  # both identity checks and the report check


def test_a_check_raising_anything_fails_rather_than_crashing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken core that raises (not a failed expectation) is a FAIL line, not a traceback."""

    def crashing() -> None:
        raise KeyError("attempts")

    monkeypatch.setattr(selftest, "CHECK_GROUPS", [[("crashing check", crashing)]])
    assert main(["self-test"]) == 1
    assert "FAIL crashing check: KeyError: 'attempts'" in capsys.readouterr().out


def test_no_self_test_check_uses_assert() -> None:
    """`python -O` strips assert: every self-test module tests and raises explicitly."""
    commands = ROOT / "src" / "kernel" / "effects" / "commands"
    for path in sorted(commands.glob("*selftest*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)]
        assert found == [], f"{path.name}: assert at lines {found}"


@pytest.mark.parametrize("command", [["kernel"], [sys.executable, "-m", "kernel"]])
def test_version_and_module_entry_point(command: list[str]) -> None:
    """`kernel --version` and `python -m kernel --version` print the package version."""
    executable = Path(sys.executable).with_name("kernel")
    argv = [str(executable)] if command == ["kernel"] else command
    done = subprocess.run([*argv, "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"kernel {kernel.__version__}"
