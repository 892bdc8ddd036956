"""Render branches the main render tests do not reach: empty patches and outputs, the
Markdown bound on long diffs, imported runs, and malformed extra sections."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel.effects.orchestrate import run_config
from kernel.errors import FieldError
from kernel.importers.idkmesh import run_record_from_idkmesh
from kernel.run.report import RunEvidenceReport, build_evidence_report
from kernel.views import (
    MAX_DIFF_LINES,
    CheckOutputView,
    PatchView,
    TableSection,
    Workspace,
    render_html,
    render_markdown,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _report() -> RunEvidenceReport:
    report = build_evidence_report(
        run_config(FIXTURES / "orchestration/two-attempt-good-vs-bad.json")
    )
    assert isinstance(report, RunEvidenceReport)
    return report


def test_an_empty_patch_and_an_empty_output_say_so() -> None:
    report = _report()
    first = report.attempts[0].attempt_id
    space = Workspace(
        patches=(PatchView.of(b"", [first]),),
        outputs=(CheckOutputView.of(first, "artifact-digest", b""),),
    )
    page = render_html(report, (), space)
    assert '<p class="muted">Empty patch: no change to the baseline.</p>' in page
    assert '<p class="muted">No output.</p>' in page
    markdown = render_markdown(report, (), space)
    assert "Empty patch: no change to the baseline." in markdown
    assert "```diff" not in markdown


def test_markdown_bounds_a_long_diff_and_links_the_rest() -> None:
    report = _report()
    big = b"".join(b"+line %d\n" % i for i in range(MAX_DIFF_LINES + 25))
    patch = PatchView.of(big, [report.attempts[0].attempt_id])
    markdown = render_markdown(report, (), Workspace(patches=(patch,)))
    assert f"+line {MAX_DIFF_LINES - 1}\n" in markdown
    assert f"+line {MAX_DIFF_LINES}\n" not in markdown
    assert f"25 more lines in [{patch.href}]({patch.href})." in markdown


def test_an_imported_run_names_its_source_in_both_views() -> None:
    run = run_record_from_idkmesh(json.loads((FIXTURES / "idkmesh/demo.run.json").read_text()))
    report = build_evidence_report(run)
    assert isinstance(report, RunEvidenceReport)
    assert report.imported_from is not None
    digest = report.imported_from.digest
    assert f"- **Imported from:** idkmesh-two-attempt-run {digest}" in render_markdown(report)
    page = render_html(report)
    assert "Imported from" in page
    assert digest in page
    native = render_markdown(_report())
    assert "Imported from" not in native


def test_a_section_row_with_a_missing_cell_is_refused() -> None:
    with pytest.raises(FieldError, match=r"TableSection\.rows: every row has one cell per header"):
        TableSection(title="t", notes=(), headers=("a", "b"), rows=(("1",),))
