"""The README's API tour runs: its ``pycon`` blocks are doctests over the fixtures."""

from __future__ import annotations

import doctest
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_api_tour_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every example in README.md runs and prints what the README says it prints."""
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(
        str(ROOT / "README.md"),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        verbose=False,
    )
    assert result.attempted >= 20
    assert result.failed == 0
    assert os.getcwd() == str(ROOT)
