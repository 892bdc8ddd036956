"""Render a `RunEvidenceReport`: canonical JSON, Markdown, one self-contained HTML page.

Pure functions (no I/O). Rules enforced:

- JSON is the canonical bytes of ``report.to_dict()`` plus one newline, so the file's
  canonical digest is ``report.digest``;
- every worker- or verifier-provided string (ids, adapters, messages, run id) is escaped
  before it reaches markup: `html_text` for HTML (``& < > " '``), `md_cell` for
  Markdown (HTML entities plus backslash escapes for Markdown syntax, ``|`` escaped and
  line breaks flattened, so a hostile attempt can neither inject markup nor break a
  table row);
- both first make invisible characters visible: control characters and Unicode format
  characters (bidi overrides and isolates, zero-width characters, BOM, soft hyphen)
  become U+FFFD, so a string can neither reorder the text after it nor pass for
  another id;
- the HTML page has no scripts and no external assets: inline CSS only; digests are
  shortened with the full value in a ``title`` (shown on hover) and kept selectable;
- the pending human decision and the all-false authority block are always shown;
- extra sections (`TableSection`, e.g. the evidence classes of a run's candidate
  groups) are plain text too: every title, note and cell is escaped here, never by
  the caller, so a section cannot carry markup.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from kernel.evidence_report import EvidenceState, ReportAttempt, ReportWarning, RunEvidenceReport
from kernel.identity import canonical_json

__all__ = [
    "WARNING_TEXT",
    "TableSection",
    "html_text",
    "md_cell",
    "render_html",
    "render_json",
    "render_markdown",
    "short_digest",
]

WARNING_TEXT: Final = {
    ReportWarning.DECISION_SUPPORT_ONLY: (
        "Generated evidence is decision support only; this report does not select, "
        "accept, merge, or integrate a candidate."
    ),
    ReportWarning.VERIFICATION_DISAGREEMENT: (
        "Independent verification recommendations disagree; the disagreement is preserved "
        "for human/governance review, not resolved by counting."
    ),
    ReportWarning.CONTROL_FAILURE: (
        "At least one attempt stopped on a worker, manifest or verifier failure; it is kept "
        "in the report and surviving evidence is retained."
    ),
    ReportWarning.WORKER_SUCCESS_NOT_VERIFIED: (
        "A worker reported success and its independent verifier rejected the candidate: "
        "worker success is not verified correctness."
    ),
    ReportWarning.RECOMMENDATION_CONTRADICTS_CHECKS: (
        "A verifier recommended acceptance although a required check did not pass; that "
        "attempt is shown as inconclusive."
    ),
    ReportWarning.NO_SUPPORTED_ATTEMPT: "No attempt is supported by independent evidence.",
}
"""Prose for each warning code (rendering only; never part of a document's identity)."""

_STATE_COLOURS: Final = {
    EvidenceState.SUPPORTED: ("#0f5132", "#d1e7dd"),
    EvidenceState.REJECTED: ("#842029", "#f8d7da"),
    EvidenceState.INCONCLUSIVE: ("#664d03", "#fff3cd"),
    EvidenceState.WORKER_ERROR: ("#41464b", "#e2e3e5"),
    EvidenceState.RESULT_MANIFEST_ERROR: ("#41464b", "#e2e3e5"),
    EvidenceState.VERIFICATION_ERROR: ("#432874", "#e2d9f3"),
}

# Inline Markdown syntax. Block syntax (``#``, ``-``, ``+``, ``1.``) only acts at the
# start of a line: escaped text follows a prefix, except section notes (`_md_paragraph`).
_MD_SPECIAL: Final = re.compile(r"([\\`*_{}\[\]()!|~])")
_MD_BLOCK_START: Final = re.compile(r"^(?:([#=+-])|(\d+)([.]))")
_LINE_BREAKS: Final = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")
# Control characters (C0 but tab and line breaks, DEL, C1) and every Unicode format
# character (category Cf: bidi embeddings, overrides, isolates and marks, zero-width
# space / joiners, word joiner, invisible operators, BOM, soft hyphen, tag characters).
_INVISIBLE: Final = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f"
    "\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)


@attrs.frozen(kw_only=True)
class TableSection:
    """An extra report section: a title, notes and one table, all plain text."""

    title: str
    """Section heading."""
    notes: tuple[str, ...]
    """Paragraphs shown before the table."""
    headers: tuple[str, ...]
    """Column headings."""
    rows: tuple[tuple[str, ...], ...]
    """Cells, one tuple per row, as many as ``headers``."""

    def __attrs_post_init__(self) -> None:
        if any(len(row) != len(self.headers) for row in self.rows):
            raise ValueError("every row has one cell per header")


def _markdown_section(section: TableSection) -> list[str]:
    lines = ["", f"## {md_cell(section.title)}", ""]
    for note in section.notes:
        lines += [_md_paragraph(note), ""]
    lines.append("| " + " | ".join(md_cell(h) for h in section.headers) + " |")
    lines.append("| " + " | ".join("---" for _ in section.headers) + " |")
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in section.rows]
    return lines


def _html_section(section: TableSection) -> list[str]:
    head = "".join(f"<th>{html_text(h)}</th>" for h in section.headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in row) + "</tr>" for row in section.rows
    )
    return [
        f"<h2>{html_text(section.title)}</h2>",
        *(f"<p>{html_text(note)}</p>" for note in section.notes),
        f'<table class="extra"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>',
    ]


def render_json(report: RunEvidenceReport) -> bytes:
    """Canonical JSON bytes of the report, plus one trailing newline."""
    return canonical_json(report.to_dict()) + b"\n"


def html_text(value: str) -> str:
    """Escape text for HTML element content and quoted attribute values."""
    return html.escape(_INVISIBLE.sub("\ufffd", value), quote=True)


def md_cell(value: str) -> str:
    """Escape untrusted text for a Markdown table cell (or any inline Markdown).

    Line breaks become spaces (a cell is one line), control and format characters
    become U+FFFD, ``& < >`` become HTML entities (no raw HTML), and Markdown syntax
    characters, including ``|``, are backslash-escaped.
    """
    flat = _INVISIBLE.sub("\ufffd", _LINE_BREAKS.sub(" ", value))
    entities = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", entities)


def _md_paragraph(value: str) -> str:
    """`md_cell` for text that starts its own line: no leading indentation (code block)
    and an escaped heading, list, rule or setext marker."""
    cell = md_cell(value).lstrip(" \t")
    return _MD_BLOCK_START.sub(lambda m: "\\" + m[1] if m[1] else m[2] + "\\" + m[3], cell, count=1)


def short_digest(value: str, size: int = 12) -> str:
    """The first ``size`` hex characters of a digest, with an ellipsis."""
    return value if len(value) <= size else value[:size] + "\u2026"


def _checks_text(attempt: ReportAttempt) -> str:
    if attempt.verification is None:
        return ""
    return ", ".join(
        f"{c.id}={c.status}" + ("" if c.required else " (optional)")
        for c in attempt.verification.checks
    )


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def render_markdown(report: RunEvidenceReport, sections: Sequence[TableSection] = ()) -> str:
    """A Markdown view of the report (GitHub-flavoured tables), then ``sections``."""
    s = report.summary
    lines = [
        "# Run Evidence Report",
        "",
        f"- **Run:** {md_cell(report.run_id)}",
        f"- **Work unit:** {md_cell(report.work_unit.id)} v{report.work_unit.version}"
        f" (digest {report.work_unit.digest})",
        f"- **Source run:** {md_cell(report.source_run_kind)} {report.source_run_digest}",
        f"- **Config digest:** {report.source_config_digest}",
        f"- **Verifier policy digest:** {report.verifier_policy_digest}",
    ]
    if report.imported_from is not None:
        lines.append(
            f"- **Imported from:** {md_cell(report.imported_from.kind)}"
            f" {report.imported_from.digest}"
        )
    lines += [
        f"- **Attempts:** {s.attempt_count}",
        f"- **Supported / rejected / inconclusive:** {s.supported} / {s.rejected} /"
        f" {s.inconclusive}",
        f"- **Control errors:** {s.control_errors} (worker {s.worker_errors}, manifest"
        f" {s.result_manifest_errors}, verification {s.verification_errors})",
        f"- **Verification disagreement:** {_yes(s.verification_disagreement)}",
        "- **Human integration decision:** **pending** (no attempt selected)",
        "",
    ]
    if s.verification_disagreement:
        recommendations = ", ".join(str(r) for r in s.recommendations)
        lines += [
            f"> **Verifiers disagree** ({recommendations}). Both histories are kept; "
            "nothing here counts votes or picks a winner.",
            "",
        ]
    lines += [
        "## Attempts",
        "",
        "| # | Attempt | Adapter | Worker (status) | Manifest | Verifier | Recommendation |"
        " Evidence state | Checks | Error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for a in report.attempts:
        m, v = a.manifest, a.verification
        worker = f"{md_cell(m.worker_id)} ({m.worker_status})" if m else ""
        manifest = f"{md_cell(m.id)} {short_digest(m.digest)}" if m else ""
        error = f"{a.error.code}: {md_cell(a.error.message)}" if a.error else ""
        cells = [
            str(a.order),
            md_cell(a.attempt_id),
            md_cell(a.adapter),
            worker,
            manifest,
            md_cell(v.verifier_id) if v else "",
            str(v.recommendation) if v else "",
            f"**{a.evidence_state}**",
            md_cell(_checks_text(a)),
            error,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    for section in sections:
        lines += _markdown_section(section)
    lines += ["", "## Warnings", ""]
    lines += [f"- {WARNING_TEXT[w]} (`{w}`)" for w in report.warnings]
    lines += [
        "",
        "## Human decision",
        "",
        f"Status: **{report.human_decision.status}**. Selected attempt: none. Integration"
        " authority: external human or governance body. Record a decision with"
        " `kernel decision record`; it binds to this report's canonical digest.",
        "",
        "## Authority boundary",
        "",
        "| Authority | Granted |",
        "| --- | --- |",
    ]
    lines += [f"| {name} | {_yes(value)} |" for name, value in _authority(report)]
    lines += [
        "",
        "This report is a read-only aggregation of worker and verifier evidence. It selects"
        " no candidate and cannot approve, merge, push, or modify canonical project state.",
        "",
    ]
    return "\n".join(lines)


def _authority(report: RunEvidenceReport) -> Iterable[tuple[str, bool]]:
    return report.authority.to_dict().items()


def _digest_html(value: str) -> str:
    # The full value is in the title (hover) and in a visually clipped, selectable span.
    safe = html_text(value)
    return f'<abbr class="dg" title="{safe}">{html_text(short_digest(value))}</abbr>'


_CSS: Final = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:78rem;padding:0 1rem;color:#212529;background:#fff}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem}
.meta{display:grid;grid-template-columns:max-content 1fr;gap:.15rem 1rem;margin:1rem 0}
.meta dt{font-weight:600;color:#495057}.meta dd{margin:0}
.cards{display:flex;flex-wrap:wrap;gap:.6rem;margin:1rem 0}
.card{border-radius:.4rem;padding:.5rem .9rem;min-width:7rem}
.card b{display:block;font-size:1.4rem}
.banner{border-left:.35rem solid #b02a37;background:#f8d7da;color:#58151c;
padding:.7rem 1rem;margin:1rem 0;border-radius:.25rem}
.pending{border-left:.35rem solid #997404;background:#fff3cd;color:#664d03;
padding:.7rem 1rem;margin:1rem 0;border-radius:.25rem}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{border:1px solid #dee2e6;padding:.35rem .5rem;text-align:left;vertical-align:top;
overflow-wrap:break-word}
th{background:#f1f3f5}tr:nth-child(even) td{background:#fcfcfd}
.st{display:inline-block;border-radius:1rem;padding:.05rem .6rem;font-weight:600;
white-space:nowrap}
abbr.dg{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;text-decoration:underline dotted;
cursor:help}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace}
.err{color:#842029}.muted{color:#6c757d}
ul.checks{margin:0;padding-left:1rem}
.auth td:last-child{font-weight:600;color:#0f5132}
"""


def _state_badge(state: EvidenceState) -> str:
    fg, bg = _STATE_COLOURS[state]
    return f'<span class="st" style="color:{fg};background:{bg}">{html_text(state)}</span>'


def _attempt_row(a: ReportAttempt) -> str:
    m, v = a.manifest, a.verification
    worker = (
        f'{html_text(m.worker_id)}<br><span class="muted">{html_text(m.worker_status)}</span>'
        if m
        else '<span class="muted">none</span>'
    )
    manifest = f"{html_text(m.id)}<br>{_digest_html(m.digest)}" if m else ""
    if v:
        checks = "".join(
            f"<li>{html_text(c.id)}: {html_text(c.status)}"
            + ("" if c.required else ' <span class="muted">(optional)</span>')
            + "</li>"
            for c in v.checks
        )
        verifier = (
            f"{html_text(v.verifier_id)}<br>{_digest_html(v.semantic_digest)}"
            f'<ul class="checks">{checks}</ul>'
        )
        recommendation = f'<span class="mono">{html_text(v.recommendation)}</span>'
    else:
        verifier = recommendation = '<span class="muted">none</span>'
    error = (
        f'<span class="err"><span class="mono">{html_text(a.error.code)}</span>: '
        f"{html_text(a.error.message)}</span>"
        if a.error
        else ""
    )
    version = f" {html_text(a.adapter_version)}" if a.adapter_version else ""
    return (
        f"<tr><td>{a.order}</td><td>{html_text(a.attempt_id)}</td>"
        f"<td>{html_text(a.adapter)}{version}</td><td>{worker}</td><td>{manifest}</td>"
        f"<td>{verifier}</td><td>{recommendation}</td><td>{_state_badge(a.evidence_state)}</td>"
        f"<td>{error}</td></tr>"
    )


def render_html(report: RunEvidenceReport, sections: Sequence[TableSection] = ()) -> str:
    """One self-contained HTML page (inline CSS, no scripts, no external assets).

    ``sections`` follow the attempt table; their text is escaped like everything else.
    """
    s = report.summary
    meta = [
        ("Run", html_text(report.run_id)),
        (
            "Work unit",
            f"{html_text(report.work_unit.id)} v{report.work_unit.version} "
            f"{_digest_html(report.work_unit.digest)}",
        ),
        (
            "Source run",
            f"{html_text(report.source_run_kind)} {_digest_html(report.source_run_digest)}",
        ),
        ("Config", _digest_html(report.source_config_digest)),
        ("Verifier policy", _digest_html(report.verifier_policy_digest)),
        ("Orchestrator", html_text(report.orchestrator)),
    ]
    if report.imported_from is not None:
        meta.append(
            (
                "Imported from",
                f"{html_text(report.imported_from.kind)} "
                f"{_digest_html(report.imported_from.digest)}",
            )
        )
    cards = [
        ("attempts", s.attempt_count, ("#212529", "#f1f3f5")),
        ("supported", s.supported, _STATE_COLOURS[EvidenceState.SUPPORTED]),
        ("rejected", s.rejected, _STATE_COLOURS[EvidenceState.REJECTED]),
        ("inconclusive", s.inconclusive, _STATE_COLOURS[EvidenceState.INCONCLUSIVE]),
        ("control errors", s.control_errors, _STATE_COLOURS[EvidenceState.WORKER_ERROR]),
    ]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">",
        f"<title>Run evidence report: {html_text(report.run_id)}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Run evidence report</h1>",
        '<dl class="meta">',
        *(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in meta),
        "</dl>",
        '<div class="cards">',
        *(
            f'<div class="card" style="color:{fg};background:{bg}"><b>{n}</b>{label}</div>'
            for label, n, (fg, bg) in cards
        ),
        "</div>",
    ]
    if s.verification_disagreement:
        recommendations = ", ".join(html_text(r) for r in s.recommendations)
        parts.append(
            '<div class="banner" role="alert"><strong>Verifiers disagree</strong> '
            f"({recommendations}). Every history is kept; nothing here counts votes or "
            "picks a winner.</div>"
        )
    parts.append(
        '<div class="pending"><strong>Human decision: pending.</strong> No attempt is '
        "selected. Integration authority: an external human or governance body "
        "(<code>kernel decision record</code> binds a decision to this report's digest)."
        "</div>"
    )
    parts += [
        "<h2>Attempts</h2>",
        "<table><thead><tr><th>#</th><th>Attempt</th><th>Adapter</th><th>Worker</th>"
        "<th>Manifest</th><th>Verifier and checks</th><th>Recommendation</th>"
        "<th>Evidence state</th><th>Error</th></tr></thead><tbody>",
        *(_attempt_row(a) for a in report.attempts),
        "</tbody></table>",
        *(line for section in sections for line in _html_section(section)),
        "<h2>Warnings</h2><ul>",
        *(
            f'<li>{html_text(WARNING_TEXT[w])} <span class="mono muted">{html_text(w)}</span></li>'
            for w in report.warnings
        ),
        "</ul>",
        '<h2>Authority</h2><table class="auth"><thead><tr><th>Authority</th><th>Granted</th>'
        "</tr></thead><tbody>",
        *(
            f'<tr><td class="mono">{html_text(name)}</td><td>{_yes(value)}</td></tr>'
            for name, value in _authority(report)
        ),
        "</tbody></table>",
        '<p class="muted">This report is a read-only aggregation of worker and verifier '
        "evidence. It selects no candidate and cannot approve, merge, push, or modify "
        "canonical project state.</p>",
        "</body></html>",
        "",
    ]
    return "\n".join(parts)
