"""Tests for `kernel run`: bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kernel.effects.cli import main
from kernel.effects.sandbox import private_tempdir

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo"


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A scratch project holding a demo copy (sandboxes see it read-only)."""
    base = Path(tempfile.mkdtemp(prefix="kernel-test-", dir="/var/tmp"))
    try:
        shutil.copytree(DEMO, base / "demo")
        monkeypatch.chdir(base)
        yield base
    finally:
        shutil.rmtree(base)


def _edit(work: Path, change: Callable[[dict[str, Any]], None]) -> str:
    document = json.loads((DEMO / "config.json").read_text())
    change(document)
    path = work / "demo" / "bad.json"
    path.write_text(json.dumps(document))
    return "demo/bad.json"


def _unknown_worker(d: dict[str, Any]) -> None:
    d["attempts"][0]["adapter"] = "telepathy"


def _unknown_verifier(d: dict[str, Any]) -> None:
    d["verifier"]["adapter"] = "vibes"


def _missing_command(d: dict[str, Any]) -> None:
    del d["attempts"][1]["command"]


def _command_not_found(d: dict[str, Any]) -> None:
    d["attempts"][1]["command"] = ["workers/does-not-exist.sh"]


def _program_not_on_path(d: dict[str, Any]) -> None:
    d["verifier"]["checks"][0]["python"] = "no-such-program-kernel-test"


def _check_without_tests(d: dict[str, Any]) -> None:
    d["verifier"]["checks"][0]["tests"] = {"fail_to_pass": [], "pass_to_pass": []}


def _check_with_bad_test_id(d: dict[str, Any]) -> None:
    d["verifier"]["checks"][0]["tests"]["pass_to_pass"].append("--help")


def _check_with_both_forms(d: dict[str, Any]) -> None:
    d["verifier"]["checks"][0]["command"] = ["python3"]


def _baseline_not_a_directory(d: dict[str, Any]) -> None:
    d["attempts"][0]["baseline"] = "repo/stats.py"


def _verifier_no_checks(d: dict[str, Any]) -> None:
    d["verifier"]["checks"] = []


def _bad_replay(d: dict[str, Any]) -> None:
    d["replay"] = "sometimes"


def _program_in_sandbox_scratch(d: dict[str, Any]) -> None:
    d["attempts"][0]["command"] = ["scratch-link/stats.py"]


BAD_CONFIGS = {
    "unknown-worker-adapter": (_unknown_worker, "unknown worker adapter"),
    "unknown-verifier-adapter": (_unknown_verifier, "unknown verifier adapter"),
    "missing-command": (_missing_command, ".command: missing field"),
    "command-not-found": (_command_not_found, "not an executable file"),
    "program-not-on-path": (_program_not_on_path, "command not found"),
    "check-without-tests": (_check_without_tests, "no tests: name at least one test"),
    "check-with-bad-test-id": (_check_with_bad_test_id, "expected an array of test ids"),
    "check-with-both-forms": (_check_with_both_forms, "exactly one of command, tests or oracle"),
    "baseline-not-a-directory": (_baseline_not_a_directory, "is not a directory"),
    "verifier-without-checks": (_verifier_no_checks, "an empty verifier is not verification"),
    "unknown-replay-declaration": (_bad_replay, "$.replay"),
    "program-in-sandbox-scratch": (_program_in_sandbox_scratch, "a sandboxed command sees empty"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_is_one_line_exit_2_nothing_written(
    work: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each bad config: exit 2, one stderr line naming the problem, no results folder."""
    change, expected = BAD_CONFIGS[case]
    config = _edit(work, change)
    # A folder every sandbox sees empty (under the scratch root, not /tmp: /tmp is seen).
    with private_tempdir("test") as private:
        program = private / "stats.py"
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
        (work / "demo" / "scratch-link").symlink_to(private)
        code = main(["run", "--config", config, "--output-dir", "results/demo"])
    assert code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert expected in lines[0]
    assert lines[0].startswith("kernel run: error: ")
    assert not (work / "results").exists()


def test_output_outside_the_root_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An output folder outside results/ is refused before anything runs."""
    assert main(["run", "--config", "demo/config.json", "--output-dir", "elsewhere"]) == 2
    assert "output root" in capsys.readouterr().err
    assert not (work / "elsewhere").exists()
    assert not (work / "results").exists()


def test_missing_config_and_bad_reruns(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing config file and --reruns -1 are usage errors with nothing written
    (--reruns 0 is allowed: it skips corroboration)."""
    assert main(["run", "--config", "demo/nope.json"]) == 2
    assert "not found" in capsys.readouterr().err
    # Parsed as a bounded integer: argparse's one-line usage error, exit 2.
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--config", "demo/config.json", "--reruns", "-1"])
    assert exit_info.value.code == 2
    assert "--reruns" in capsys.readouterr().err
    assert not (work / "results").exists()


def test_a_patch_path_that_cannot_be_written_is_refused_before_any_write(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder squatting on a patch's file name stops the run before run.json is written.

    Regression: patch paths were confined only as a probe, so the pipeline wrote the
    run record and reports, then failed on the patch (a partial set of outputs).
    """
    correct_fix = "8e7ada4e6bdc3c894b19a9453d81250f50d606d4a7f9bb97457db51ab5dab54a"
    squat = work / "results" / "demo" / "patches" / f"{correct_fix}.patch"
    squat.mkdir(parents=True)
    code = main(["run", "--config", "demo/config.json", "--output-dir", "results/demo",
                 "--reruns", "1"])  # fmt: skip
    assert code == 2
    assert "is a directory" in capsys.readouterr().err
    assert sorted(p.name for p in (work / "results" / "demo").iterdir()) == ["patches"]


def _hard_link_output(work: Path, target: str) -> list[str]:
    folder = work / "results" / "demo"
    folder.mkdir(parents=True)
    (folder / "evidence.md").hardlink_to(work / "demo" / target)
    return ["--output-dir", "results/demo"]


def _root_in_baseline(work: Path, _target: str) -> list[str]:
    return ["--results-root", "demo/repo", "--output-dir", "demo/repo/out"]


def _root_linked_into_baseline(work: Path, _target: str) -> list[str]:
    (work / "results").symlink_to(work / "demo" / "repo")
    return ["--output-dir", "results/out"]


OUTPUT_ON_INPUT = {
    "hard-link-to-worker-program": (_hard_link_output, "workers/correct_fix.sh", "input"),
    "hard-link-to-work-unit": (_hard_link_output, "work-unit.json", "input"),
    "root-inside-the-baseline": (_root_in_baseline, "repo/stats.py", "input"),
    "root-linked-into-the-baseline": (_root_linked_into_baseline, "repo/stats.py", "symlink"),
}


@pytest.mark.parametrize("case", sorted(OUTPUT_ON_INPUT))
def test_no_output_lands_on_an_input(
    work: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Outputs are compared with every input (path, inode, folder): exit 2, nothing written."""
    arrange, watched, expected = OUTPUT_ON_INPUT[case]
    before = (work / "demo" / watched).read_bytes()
    args = arrange(work, watched)
    listing = sorted(str(p.relative_to(work)) for p in work.rglob("*"))
    code = main(["run", "--config", "demo/config.json", "--reruns", "1", *args])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert expected in lines[0]
    assert (work / "demo" / watched).read_bytes() == before
    assert sorted(str(p.relative_to(work)) for p in work.rglob("*")) == listing
