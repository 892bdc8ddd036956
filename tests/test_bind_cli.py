"""Tests for `kernel bind` and `kernel bind verify`: outputs, exit codes, error lines."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kernel.effects.cli import main

ROOT = Path(__file__).resolve().parents[1]
CHAIN = json.loads((ROOT / "fixtures/binding/reference-chain.json").read_text())


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding the reference run and operator result."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps(CHAIN["geometric_search_run"]))
    (tmp_path / "res.json").write_text(json.dumps(CHAIN["candidate_operator_result"]))
    return tmp_path


def canonical(value: object) -> bytes:
    """The stdlib canonical form plus the trailing newline the CLI writes."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def test_bind_prints_the_reference_binding(
    workdir: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """Exit 0 and the reference binding as canonical JSON on stdout."""
    assert main(["bind", "--run", "run.json", "--operator-result", "res.json"]) == 0
    assert capsysbinary.readouterr().out == canonical(CHAIN["binding"])


def test_bind_writes_atomically_inside_results_and_verifies(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--output writes the binding under results/; `bind verify` then exits 0."""
    argv = ["bind", "--run", "run.json", "--operator-result", "res.json"]
    assert main([*argv, "--output", "results/b.json"]) == 0
    written = (workdir / "results/b.json").read_bytes()
    assert written == canonical(CHAIN["binding"])
    assert not [p for p in (workdir / "results").iterdir() if p.name.endswith(".tmp")]
    capsys.readouterr()
    assert main(["bind", "verify", "--binding", "results/b.json", *argv[1:]]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["input_digest"] == CHAIN["binding"]["input_digest"]


def test_bind_refusal_exits_1_with_the_refusal_record(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A refused binding prints the refusal and exits 1 (here: unsorted schema versions)."""
    argv = ["bind", "--run", "run.json", "--operator-result", "res.json"]
    code = main([*argv, "--schema-version", "b=1", "--schema-version", "a=1"])
    assert code == 1
    assert json.loads(capsys.readouterr().out)["reason_codes"] == ["unsupported_schema_version"]


def test_bind_reference_refusal_needs_no_verify_ids(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An edited (unsealed) result is a malformed input (2) unless --no-verify-ids (1)."""
    edited: dict[str, Any] = copy.deepcopy(CHAIN["candidate_operator_result"])
    edited["geometric_search_run_id"] = "0" * 64
    (workdir / "edited.json").write_text(json.dumps(edited))
    argv = ["bind", "--run", "run.json", "--operator-result", "edited.json"]
    assert main(argv) == 2
    assert "operator_result_id" in capsys.readouterr().err
    assert main([*argv, "--no-verify-ids"]) == 1
    refusal = json.loads(capsys.readouterr().out)
    expected = CHAIN["refusal_case"]["refusal"]
    # The prose adds what was expected and found to the reference's sentence.
    assert refusal["explanation"].startswith(expected["explanation"] + " ")
    assert {**refusal, "explanation": ""} == {**expected, "explanation": ""}


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{", "not valid JSON"),
        ("{}", "run: budget_consumed: missing field"),
        (json.dumps({**CHAIN["geometric_search_run"], "rank": 1}), "run: rank: unknown field"),
    ],
)
def test_bind_malformed_input_is_one_line_exit_2(
    workdir: Path, capsys: pytest.CaptureFixture[str], content: str, fragment: str
) -> None:
    """Unreadable or malformed input: exit 2, one stderr line naming file and field."""
    (workdir / "bad.json").write_text(content)
    assert main(["bind", "--run", "bad.json", "--operator-result", "res.json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "bad.json" in err
    assert fragment in err


@pytest.mark.parametrize(
    "extra",
    [
        ["--output", "../escape.json"],
        ["--output", "/tmp/elsewhere.json"],
        ["--binding", "x.json"],
        ["--schema-version", "no-equals-sign"],
    ],
)
def test_bind_usage_errors_exit_2(workdir: Path, extra: list[str]) -> None:
    """Outputs outside results/, verify-only flags and bad NAME=VERSION exit 2."""
    argv = ["bind", "--run", "run.json", "--operator-result", "res.json", *extra]
    assert main(argv) == 2


def test_bind_verify_refuses_a_tampered_binding(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A binding whose fields were edited exits 1 with binding_id_mismatch."""
    tampered = {**CHAIN["binding"], "depth": 2}
    (workdir / "b.json").write_text(json.dumps(tampered))
    argv = ["bind", "verify", "--binding", "b.json", "--run", "run.json"]
    assert main([*argv, "--operator-result", "res.json"]) == 1
    assert json.loads(capsys.readouterr().out)["reason_codes"] == ["binding_id_mismatch"]
    assert main([*argv, "--operator-result", "res.json", "--output", "results/x.json"]) == 2
    assert main(["bind", "verify", "--run", "run.json", "--operator-result", "res.json"]) == 2
