"""A suite summary as Markdown and as one self-contained HTML page (`kernel.run.suite`
builds the record): three plain-text tables, every cell escaped here."""

from __future__ import annotations

from collections.abc import Sequence

from kernel.run.record import Calibration
from kernel.run.suite import ModelCounts, SuiteSummary
from kernel.views.markdown import md_cell
from kernel.views.views import html_text

__all__ = ["render_suite_html", "render_suite_markdown"]


def _rate(counts: ModelCounts) -> str:
    if not counts.predictions:
        return "-"
    tenths = (counts.resolved * 1000 + counts.predictions // 2) // counts.predictions
    return f"{tenths // 10}.{tenths % 10}%"


def _validity(calibration: Calibration) -> str:
    """``valid``, or ``invalid: <the instance's reasons>``."""
    return "invalid: " + ", ".join(calibration.reasons) if calibration.reasons else "valid"


def _tables(
    summary: SuiteSummary,
) -> list[tuple[str, tuple[str, ...], Sequence[tuple[str, ...]]]]:
    """The summary's three tables: title, headers, rows (plain text)."""
    models: list[tuple[str, ...]] = [
        (
            c.model,
            str(c.predictions),
            str(c.resolved),
            _rate(c),
            str(c.unresolved),
            str(c.error),
            str(c.empty_patch),
        )
        for c in summary.models
    ]
    predictions = [
        (
            p.instance_id,
            p.model,
            str(p.status),
            str(p.resolution or "-"),
            str(p.evidence_class or "-"),
            ", ".join(p.failing_tests) or "-",
            p.error or "",
        )
        for r in summary.instances
        for p in r.predictions
    ]
    calibration: list[tuple[str, ...]] = [
        (
            r.instance_id,
            _validity(r.calibration),
            t.test_id,
            str(t.kind),
            str(t.baseline),
            str(t.reference or "-"),
            t.blame or "-",
        )
        for r in summary.instances
        for t in r.calibration.tests
    ]
    calibration += [
        (r.instance_id, _validity(r.calibration), "-", "-", "-", "-", "-")
        for r in summary.instances
        if not r.calibration.tests
    ]
    return [
        (
            "Resolved per model",
            ("model", "predictions", "resolved", "rate", "unresolved", "error", "empty patch"),
            models,
        ),
        (
            "Predictions",
            ("instance", "model", "status", "tests", "evidence class", "failing tests", "error"),
            predictions,
        ),
        (
            "Calibration",
            ("instance", "instance status", "test", "list", "baseline", "reference", "reason"),
            calibration,
        ),
    ]


def render_suite_markdown(summary: SuiteSummary) -> str:
    """The summary as Markdown (every cell escaped with `kernel.views.md_cell`)."""
    lines = [f"# Suite summary `{summary.digest[:12]}`", ""]
    for title, headers, rows in _tables(summary):
        lines += [f"## {title}", "", "| " + " | ".join(headers) + " |"]
        lines.append("|" + "---|" * len(headers))
        lines += ["| " + " | ".join(md_cell(cell) for cell in row) + " |" for row in rows]
        lines.append("")
    return "\n".join(lines)


def render_suite_html(summary: SuiteSummary) -> str:
    """The summary as one self-contained HTML page (no scripts; every cell escaped)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Suite summary {summary.digest[:12]}</title>",
        "<style>body{font-family:sans-serif;margin:1rem}table{border-collapse:collapse}"
        "td,th{border:1px solid #999;padding:.2rem .4rem;text-align:left}</style>",
        "</head><body>",
        f"<h1>Suite summary <code>{summary.digest[:12]}</code></h1>",
    ]
    for title, headers, rows in _tables(summary):
        parts.append(f"<h2>{html_text(title)}</h2><table><thead><tr>")
        parts += [f"<th>{html_text(h)}</th>" for h in headers]
        parts.append("</tr></thead><tbody>")
        for row in rows:
            parts.append("<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in row) + "</tr>")
        parts.append("</tbody></table>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
