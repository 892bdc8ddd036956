"""`kernel self-test`: every built-in check runs, passes here, and a failure is exit 1."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import pytest

from kernel.effects.cli import main
from kernel.effects.commands import bind_selftest, selftest

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
    """A check raising AssertionError prints FAIL with its message; the others still run."""

    def broken() -> None:
        raise AssertionError("saw something else")

    monkeypatch.setattr(
        selftest, "CHECK_GROUPS", [[("broken check", broken)], *selftest.CHECK_GROUPS]
    )
    assert main(["self-test"]) == 1
    out = capsys.readouterr().out
    assert "FAIL broken check: saw something else" in out
    assert "ok   binding: the ADR-0232 reference chain binds" in out
    assert out.splitlines()[-1] == "self-test: 1 failed"


def test_packaged_reference_chain_is_the_fixture() -> None:
    """The chain shipped for the self-test is byte-identical to fixtures/binding's."""
    packaged = importlib.resources.files(bind_selftest.__package__).joinpath(
        bind_selftest.REFERENCE_CHAIN
    )
    fixture = ROOT / "fixtures" / "binding" / "reference-chain.json"
    assert packaged.read_bytes() == fixture.read_bytes()
