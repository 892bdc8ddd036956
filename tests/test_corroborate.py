"""Tests for the `kernel corroborate` verb: report fields, exit codes, bad input."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from kernel.corroboration.consensus import CorroborationReport
from kernel.effects.cli import main


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the CLI from a fresh directory (so results/ lands there)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "f.txt").write_text("v1\n")
    return tmp_path


def load(path: Path) -> dict[str, Any]:
    """Read a report and check it is canonical JSON and a valid record."""
    raw = path.read_bytes()
    document: dict[str, Any] = json.loads(raw)
    canonical = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert raw == canonical.encode() + b"\n"
    CorroborationReport.from_dict(document)
    return document


def test_consensus_exit_0_with_every_named_field(work: Path) -> None:
    """Consensus exits 0 and the report holds every field the issue names."""
    (work / "cand.txt").write_bytes(b"42\n")
    code = main(
        ["corroborate", "-n", "3", "--candidate", "cand.txt", "--output", "results/r.json",
         "--majority-output", "results/m.txt", "--", "echo", "42"]
    )  # fmt: skip
    assert code == 0
    report = load(work / "results" / "r.json")
    assert report["consensus"] is True
    assert report["agreement_count"] == 3
    assert report["runs_launched"] == 3
    digest = hashlib.sha256(b"42\n").hexdigest()
    assert report["majority_digest"] == digest
    assert report["groups"] == [{"digest": digest, "run_indexes": [0, 1, 2], "size": 3}]
    for index, run in enumerate(report["runs"]):
        assert {"index", "status", "exit_code", "output_digest", "output_size", "isolation"} <= set(
            run
        )
        assert run["index"] == index
        assert run["status"] == "ok"
        assert run["isolation"] == "overlay"
    assert report["candidate_digest"] == digest
    assert report["candidate_matches_majority"] is True
    assert (work / "results" / "m.txt").read_bytes() == b"42\n"


def test_no_consensus_exit_3(work: Path) -> None:
    """No strict majority exits 3 and still writes the report with every group."""
    code = main(
        ["corroborate", "-n", "2", "--output", "results/r.json", "--",
         "sh", "-c", "echo $KERNEL_RUN_INDEX"]
    )  # fmt: skip
    assert code == 3
    report = load(work / "results" / "r.json")
    assert report["consensus"] is False
    assert report["agreement_count"] is None
    assert report["majority_digest"] is None
    assert len(report["groups"]) == 2
    assert report["candidate_digest"] is None


def test_patch_mode_over_a_baseline(work: Path) -> None:
    """--capture patch --baseline corroborates a change; the baseline is untouched."""
    code = main(
        ["corroborate", "-n", "3", "--baseline", "base", "--capture", "patch", "--vary",
         "tz,umask", "--timeout", "20", "--output", "results/r.json", "--majority-output",
         "results/m.patch", "--", "sh", "-c", "echo v2 > f.txt"]
    )  # fmt: skip
    assert code == 0
    assert b"+v2" in (work / "results" / "m.patch").read_bytes()
    assert (work / "base" / "f.txt").read_text() == "v1\n"
    report = load(work / "results" / "r.json")
    assert report["capture_mode"] == "patch"
    assert report["timeout_ms"] == 20000
    assert ["TZ", "UTC"] in report["runs"][0]["variation"]


def test_report_to_stdout_when_no_output(
    work: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """Without --output the canonical report goes to stdout and nothing is written."""
    assert main(["corroborate", "-n", "1", "--", "echo", "hi"]) == 0
    document = json.loads(capsysbinary.readouterr().out)
    assert document["consensus"] is True
    assert not (work / "results").exists()


BAD_INPUT = [
    ("n-zero", ["-n", "0", "--", "true"]),
    ("n-negative", ["-n", "-2", "--", "true"]),
    ("missing-baseline", ["-n", "1", "--baseline", "nope", "--", "true"]),
    ("unreadable-baseline-output", ["-n", "1", "--baseline-output", "nope.txt", "--", "true"]),
    ("missing-candidate", ["-n", "1", "--candidate", "nope.txt", "--", "true"]),
    ("command-cannot-start", ["-n", "2", "--", "kernel-no-such-program"]),
    ("relative-command-missing-in-baseline", ["-n", "2", "--baseline", "base", "--", "./nope.sh"]),
    ("no-command", ["-n", "1"]),
    ("unknown-variation", ["-n", "1", "--vary", "moon", "--", "true"]),
    ("output-outside-root", ["-n", "1", "--output", "../escape.json", "--", "true"]),
    ("bad-timeout", ["-n", "1", "--timeout", "0", "--", "true"]),
    ("bad-capture", ["-n", "1", "--capture", "files", "--", "true"]),
    ("timeout-nan", ["-n", "1", "--timeout", "nan", "--", "true"]),
    ("timeout-inf", ["-n", "1", "--timeout", "inf", "--", "true"]),
    ("timeout-absurd", ["-n", "1", "--timeout", "1e308", "--", "true"]),
    ("timeout-negative", ["-n", "1", "--timeout", "-5", "--", "true"]),
    ("n-absurd", ["-n", "1000000000", "--", "true"]),
    ("n-fraction", ["-n", "2.5", "--", "true"]),
    ("limit-unknown", ["-n", "1", "--limit", "moon=1", "--", "true"]),
    ("limit-nan", ["-n", "1", "--limit", "memory=nan", "--", "true"]),
    ("limit-negative", ["-n", "1", "--limit", "cpu=-1", "--", "true"]),
    ("limit-absurd", ["-n", "1", "--limit", "memory=99999999999G", "--", "true"]),
    ("env-unset", ["-n", "1", "--env", "KERNEL_SURELY_UNSET_NAME", "--", "true"]),
    ("candidate-is-a-directory", ["-n", "1", "--candidate", "base", "--", "true"]),
    ("candidate-is-a-device", ["-n", "1", "--candidate", "/dev/null", "--", "true"]),
]


@pytest.mark.parametrize(("name", "argv"), BAD_INPUT)
def test_bad_input_exits_2_and_writes_nothing(
    name: str, argv: list[str], work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Usage errors exit 2 with one error line and leave no report behind."""
    try:
        code = main(["corroborate", *argv])
    except SystemExit as e:  # argparse's own usage errors
        code = int(str(e.code))
    assert code == 2, name
    err = capsys.readouterr().err
    assert "error" in err
    assert len(err.strip().splitlines()) <= 2, err  # argparse adds its usage line
    assert not (work / "results").exists()
    assert not (work.parent / "escape.json").exists()


@pytest.mark.parametrize("option", ["--candidate", "--baseline-output"])
def test_fifo_input_exits_2_without_blocking(
    option: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO as an input is refused at once (exit 2, one line), never read."""
    fifo = work / "pipe"
    os.mkfifo(fifo)
    code = main(["corroborate", "-n", "1", option, str(fifo), "--", "true"])
    err = capsys.readouterr().err
    assert code == 2
    assert "FIFO" in err
    assert len(err.strip().splitlines()) == 1
    assert not (work / "results").exists()


def test_limits_reach_every_run(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--limit values are applied to the runs (here: a tiny output limit cuts them)."""
    code = main(
        ["corroborate", "-n", "2", "--limit", "output=100", "--output", "results/r.json",
         "--", "head", "-c", "1000", "/dev/zero"]
    )  # fmt: skip
    capsys.readouterr()
    assert code == 3
    document = load(work / "results" / "r.json")
    assert {run["status"] for run in document["runs"]} == {"limit_exceeded"}
