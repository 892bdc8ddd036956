"""The README's API tour runs: its ``pycon`` blocks are doctests over the fixtures."""

from __future__ import annotations

import doctest
import os
import re
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


def test_adr_index_lists_every_adr_with_its_title_and_dates() -> None:
    """docs/adr/README.md has one row per ADR file: its link, its title, and the dates
    it was accepted and last changed (a new ADR joins the index); each ADR's header
    says the same dates and its status."""
    adr = ROOT / "docs" / "adr"
    index = (adr / "README.md").read_text(encoding="utf-8")
    for path in sorted(adr.glob("ADR-*.md")):
        title = path.read_text(encoding="utf-8").splitlines()[0].split(": ", 1)[1]
        row = next((line for line in index.splitlines() if f"]({path.name})" in line), "")
        assert title in row, path.name
        dates = re.search(r"\| (\d{4}-\d\d-\d\d) \| (\d{4}-\d\d-\d\d) \|$", row)
        assert dates, path.name
        # Each ADR carries its own dates and status in its header, the same as the index.
        header = path.read_text(encoding="utf-8").splitlines()[2:4]
        assert header[0] == f"Date: accepted {dates[1]}, last changed {dates[2]}.", path.name
        assert header[1].startswith("Status: "), path.name
