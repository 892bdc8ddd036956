"""Unusable CLI input on any verb: a non-regular input file or an absurd number is exit 2
with one line, never a block or a traceback (issue 10 item 6, inputs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KERNEL = [sys.executable, "-m", "kernel.effects.cli"]


def kernel(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``kernel argv`` in a child; a FIFO that blocked would hit the timeout."""
    return subprocess.run(
        [*KERNEL, *argv], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A FIFO nobody writes to: opening it for reading in blocking mode never returns."""
    path = tmp_path / "input.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--config", "{fifo}"],
        ["report", "generate", "--run", "{fifo}", "--output", "results/r.json"],
        ["corroborate", "-n", "1", "--candidate", "{fifo}", "--", "true"],
        ["corroborate", "-n", "1", "--baseline-output", "{fifo}", "--", "true"],
        ["bind", "--run", "{fifo}", "--operator-result", "{fifo}"],
    ],
    ids=["run-config", "report-run", "corroborate-candidate", "corroborate-baseline", "bind"],
)
def test_fifo_input_is_exit_2_and_one_line(tmp_path: Path, fifo: Path, argv: list[str]) -> None:
    """A FIFO given as an input is refused at once, with one error line."""
    result = kernel(tmp_path, *(a.replace("{fifo}", str(fifo)) for a in argv))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["corroborate", "-n", "1", "--timeout", "nan", "--", "true"],
        ["corroborate", "-n", "1", "--timeout", "inf", "--", "true"],
        ["corroborate", "-n", "1", "--timeout", "1e308", "--", "true"],
        ["corroborate", "-n", "1", "--timeout", "-1", "--", "true"],
        ["corroborate", "-n", "1e9", "--", "true"],
        ["corroborate", "-n", "99999999999999999999", "--", "true"],
        ["run", "--config", "c.json", "--reruns", "nan"],
        ["run", "--config", "c.json", "--reruns", "99999999999999999999"],
        ["run", "--config", "c.json", "--reruns", "-3"],
    ],
)
def test_absurd_numbers_are_exit_2_and_one_line(tmp_path: Path, argv: list[str]) -> None:
    """NaN, infinities, absurd and negative numbers are usage errors."""
    result = kernel(tmp_path, *argv)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    # argparse prints its usage line before the one error line.
    assert result.stderr.strip().splitlines()[-1].startswith("kernel ")
    assert "error" in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "results").exists()
