"""The HTML view of a run evidence report: one self-contained page (rules:
`kernel.views`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kernel.records.values import boundary, short_digest
from kernel.run.report import EvidenceState, ReportAttempt, RunEvidenceReport
from kernel.views.views import (
    DIFFER_TEXT,
    MAX_DIFF_LINES,
    MAX_OUTPUT_LINES,
    STATE_COLOURS,
    WARNING_TEXT,
    CheckOutputView,
    PatchView,
    TableSection,
    View,
    Workspace,
    authority_rows,
    bounded_lines,
    check_statuses,
    decision_headline,
    disagreement_text,
    html_text,
    isolation_section,
    policy_text,
    yes_no,
)

__all__ = ["render_html"]

_COLLAPSE_LINES: Final = 40


def _diff_class(line: str) -> str:
    if line.startswith(("diff --git", "+++ ", "--- ", "new file", "deleted file", "index ")):
        return "fh"
    if line.startswith("@@"):
        return "hk"
    if line.startswith("+"):
        return "ad"
    if line.startswith("-"):
        return "dl"
    return ""


def _html_pre(lines: Sequence[str], *, diff: bool) -> str:
    # One block per line (full-width colour bands); copying a <pre> of blocks keeps the
    # line breaks.
    body = []
    for line in lines:
        css = _diff_class(line) if diff else ""
        body.append(
            f'<span class="{css}">{html_text(line)}</span>'
            if css
            else f"<span>{html_text(line)}</span>"
        )
    return '<pre class="diff">' + "".join(body) + "</pre>"


def _collapsible(summary: str, inner: str, line_count: int) -> str:
    # Long blocks start collapsed so the page stays scannable; print expands them.
    state = "" if line_count > _COLLAPSE_LINES else " open"
    return f"<details{state}><summary>{summary}</summary>{inner}</details>"


def _html_patch(patch: PatchView, orders: dict[str, int]) -> list[str]:
    lines, omitted = bounded_lines(patch.text, MAX_DIFF_LINES, tail=False)
    attempts = ", ".join(
        f'<a href="#attempt-{orders[a]}">{html_text(a)}</a>' if a in orders else html_text(a)
        for a in patch.attempt_ids
    )
    link = f'<a href="{patch.href}" class="mono">{html_text(patch.href)}</a>'
    head = (
        f'<h3 id="patch-{patch.digest}">Candidate {_digest_html(patch.digest)}</h3>'
        f"<p>Attempts: {attempts}. File: {link}</p>"
    )
    if not lines:
        return [head, '<p class="muted">Empty patch: no change to the baseline.</p>']
    more = f'<p class="muted">{omitted} more lines in {link}.</p>' if omitted else ""
    files = sum(1 for line in lines if line.startswith("diff --git"))
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++ "))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("--- "))
    summary = f"Diff: {files} file(s), +{added} \u2212{removed}, {len(lines)} lines"
    return [head, _collapsible(summary, _html_pre(lines, diff=True), len(lines)) + more]


_CHECK_COLOURS: Final = {
    "passed": STATE_COLOURS[EvidenceState.SUPPORTED],
    "failed": STATE_COLOURS[EvidenceState.REJECTED],
    "error": STATE_COLOURS[EvidenceState.VERIFICATION_ERROR],
}


def _check_badge(status: str) -> str:
    fg, bg = _CHECK_COLOURS.get(status, STATE_COLOURS[EvidenceState.INCONCLUSIVE])
    return f'<span class="st" style="color:{fg};background:{bg}">{html_text(status)}</span>'


def _html_output(output: CheckOutputView, order: int, status: str | None) -> list[str]:
    """A check's output tail (with its status), or a worker's (``status`` None)."""
    lines, omitted = bounded_lines(output.text, MAX_OUTPUT_LINES, tail=True)
    link = f'<a href="{output.href}" class="mono">{html_text(output.href)}</a>'
    what = (
        "worker" if status is None else f"check {_html_id(output.check_id)} {_check_badge(status)}"
    )
    anchor = f"worker-{order}" if status is None else f"check-{order}-{output.digest[:16]}"
    head = (
        f'<h3 id="{anchor}">'
        f'<a href="#attempt-{order}">{_html_id(output.attempt_id)}</a>: {what}</h3>'
        f"<p>Output tail {_digest_html(output.digest)}: {link}"
        + (f" ({omitted} earlier lines not shown)" if omitted else "")
        + "</p>"
    )
    if not lines:
        return [head, '<p class="muted">No output.</p>']
    return [head, _html_pre(lines, diff=False)]


# Evidence classes (kernel.admission.EvidenceClass values) and how a refusal reads.
_CLASS_COLOURS: Final = {
    "verified": ("#0f5132", "#d1e7dd"),
    "corroborated_only": ("#664d03", "#fff3cd"),
}


_NOT_ADMITTED: Final = ("#41464b", "#e2e3e5")


def _class_badge(text: str) -> str:
    fg, bg = _CLASS_COLOURS.get(text, _NOT_ADMITTED)
    return f'<span class="st" style="color:{fg};background:{bg}">{html_text(text)}</span>'


def _html_section_body(section: TableSection) -> list[str]:
    head = "".join(f"<th>{html_text(h)}</th>" for h in section.headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td data-label="{html_text(h)}">'
            + (_class_badge(c) if i == section.badge_column else _html_tokens(c))
            + "</td>"
            for i, (h, c) in enumerate(zip(section.headers, row, strict=True))
        )
        + "</tr>"
        for row in section.rows
    )
    return [
        *(f"<p>{html_text(note)}</p>" for note in section.notes),
        f'<table class="extra stack"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>',
    ]


def _html_workspace(report: RunEvidenceReport, space: Workspace) -> _HtmlBlocks:
    orders = {a.attempt_id: a.order for a in report.attempts}
    status = check_statuses(report)
    workers = [
        line
        for o in space.worker_outputs
        for line in _html_output(o, orders.get(o.attempt_id, 0), None)
    ]
    return [
        (
            "candidates",
            "Candidates",
            [line for patch in space.patches for line in _html_patch(patch, orders)],
        ),
        (
            "check-outputs",
            "Check outputs",
            [
                line
                for o in space.outputs
                for line in _html_output(
                    o, orders.get(o.attempt_id, 0), status.get((o.attempt_id, o.check_id), "")
                )
            ],
        ),
        ("worker-outputs", "Worker outputs", workers),
    ]


def _digest_html(value: str) -> str:
    # The full value is in the title (hover) and in a visually clipped, selectable span.
    safe = html_text(value)
    return f'<abbr class="dg" title="{safe}">{html_text(short_digest(value))}</abbr>'


_CSS: Final = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:84rem;padding:0 1rem;color:#212529;background:#fff}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem}
h3{font-size:1rem;margin:1.2rem 0 .3rem}
p,h3,li{overflow-wrap:break-word}
h1 small{font-size:.9rem;font-weight:400;color:#495057;margin-left:.5rem}
.id{display:inline-block;max-width:100%;white-space:nowrap;overflow:hidden;
text-overflow:ellipsis;vertical-align:bottom}
td .id{max-width:12rem}
nav.toc{font-size:.9rem;margin:.5rem 0 1rem;display:flex;flex-wrap:wrap;gap:.2rem .9rem}
nav.toc a{white-space:nowrap}
.meta{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.15rem 1rem;
margin:1rem 0}
.meta dt{font-weight:600;color:#495057}.meta dd{margin:0;overflow-wrap:break-word;min-width:0}
.cards{display:flex;flex-wrap:wrap;gap:.6rem;margin:1rem 0}
.card{border-radius:.4rem;padding:.5rem .9rem;min-width:7rem}
.card b{display:block;font-size:1.4rem}
.banner{border-left:.35rem solid #b02a37;background:#f8d7da;color:#58151c;
padding:.7rem 1rem;margin:1rem 0;border-radius:.25rem}
.pending{border-left:.35rem solid #997404;background:#fff3cd;color:#664d03;
padding:.7rem 1rem;margin:1rem 0;border-radius:.25rem}
.note{border-left:.35rem solid #6c757d;background:#f1f3f5;color:#343a40;
padding:.7rem 1rem;margin:1rem 0;border-radius:.25rem}
.headline{font-size:1.15rem;font-weight:600;padding:.7rem 1rem;margin:.5rem 0 1rem;
border-radius:.25rem;border-left:.35rem solid}
.headline.go{color:#0f5132;background:#d1e7dd;border-color:#198754}
.headline.none{color:#41464b;background:#e2e3e5;border-color:#6c757d}
table{border-collapse:collapse;width:100%;font-size:.9rem}
.scroll{overflow-x:auto}
th,td{border:1px solid #dee2e6;padding:.35rem .5rem;text-align:left;vertical-align:top;
overflow-wrap:break-word}
th{background:#f1f3f5}tr:nth-child(even) td{background:#fcfcfd}
.st{display:inline-block;border-radius:1rem;padding:.05rem .6rem;font-weight:600;
white-space:nowrap}
abbr.dg{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;text-decoration:underline dotted;
cursor:help;white-space:nowrap}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace}
.err{color:#842029}.muted{color:#6c757d}
ul.checks{margin:0;padding-left:1rem}
.auth td.granted{font-weight:700;color:#842029}
pre.diff{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;background:#f8f9fa;
border:1px solid #dee2e6;border-radius:.25rem;padding:.5rem;margin:.3rem 0;
white-space:pre-wrap;overflow-wrap:anywhere;max-width:100%}
pre.diff span{display:block;min-height:1.4em}
pre.diff .fh{font-weight:700;color:#212529;background:#e9ecef}
pre.diff .hk{color:#6f42c1;background:#f3f0fa}
pre.diff .ad{color:#0f5132;background:#e6f4ea}
pre.diff .dl{color:#842029;background:#fbe9eb}
details summary{cursor:pointer;font-weight:600;margin:.2rem 0}
@media (max-width:800px){
body{margin:1rem auto}
table.stack thead{display:none}
table.stack,table.stack tbody,table.stack tr,table.stack td{display:block;width:auto}
table.stack tr{border:1px solid #dee2e6;border-radius:.4rem;margin:0 0 .8rem;
padding:.3rem .5rem}
table.stack td{border:0;padding:.2rem 0 .2rem 9.5rem;display:flow-root;
overflow-wrap:break-word}
table.stack td::before{content:attr(data-label);font-weight:600;color:#495057;
float:left;width:9rem;margin-left:-9.5rem}
table.stack td:empty{display:none}
table.stack tr:nth-child(even) td{background:none}
}
@media print{
nav.toc{display:none}
body{margin:0;max-width:none;font-size:11pt}
details::details-content{content-visibility:visible;display:contents}
pre.diff{break-inside:auto}
h2,h3{break-after:avoid}
a{color:inherit;text-decoration:none}
.card,.st,.banner,.pending,.note,.headline,pre.diff span{-webkit-print-color-adjust:exact;
print-color-adjust:exact}
}
"""


def _state_badge(state: EvidenceState) -> str:
    fg, bg = STATE_COLOURS[state]
    return f'<span class="st" style="color:{fg};background:{bg}">{html_text(state)}</span>'


def _html_id(value: str) -> str:
    """An id kept on one line (clipped with an ellipsis when longer than its cell; the
    full value in the title and in the selectable text)."""
    safe = html_text(value)
    return f'<span class="id" title="{safe}">{safe}</span>'


def _html_tokens(value: str) -> str:
    """Plain cell text whose words never break inside (ids such as ``attempt-1``)."""
    return " ".join(_html_id(word) for word in value.split(" ") if word)


def _html_checks(a: ReportAttempt, space: Workspace) -> str:
    v = a.verification
    if v is None:
        return '<span class="muted">none</span>'
    items = []
    for c in v.checks:
        output = space.output_of(a.attempt_id, c.id)
        label = _html_id(c.id)
        if output is not None:
            label = f'<a href="#check-{a.order}-{output.digest[:16]}">{label}</a>'
        items.append(
            f"<li>{label}: {html_text(c.status)}"
            + ("" if c.required else ' <span class="muted">(optional)</span>')
            + "</li>"
        )
    return (
        f"{_html_id(v.verifier_id)}<br>{_digest_html(v.semantic_digest)}"
        f'<ul class="checks">{"".join(items)}</ul>'
        f'Recommends <span class="mono">{html_text(v.recommendation)}</span>'
    )


def _attempt_cells(a: ReportAttempt, space: Workspace) -> tuple[tuple[str, str], ...]:
    """(column, cell markup) of one attempt row: the one place that lists the columns."""
    m = a.manifest
    worker = (
        f'{_html_id(m.worker_id)}<br><span class="muted">{html_text(m.worker_status)}</span>'
        if m
        else '<span class="muted">none</span>'
    )
    tail = space.worker_output_of(a.attempt_id)
    if tail is not None:
        worker += f'<br><a href="#worker-{a.order}">output</a>'
    manifest = f"{_html_id(m.id)}<br>{_digest_html(m.digest)}" if m else ""
    patch = space.patch_of(a.attempt_id)
    if patch is not None:
        manifest += f'<br><a href="#patch-{patch.digest}">diff</a>'
    error = (
        f'<span class="err"><span class="mono">{html_text(a.error.code)}</span>: '
        f"{html_text(a.error.message)}</span>"
        if a.error
        else ""
    )
    adapter = f"{a.adapter} {a.adapter_version}" if a.adapter_version else a.adapter
    return (
        ("#", str(a.order)),
        ("Attempt", f'{_html_id(a.attempt_id)}<br><span class="muted">{_html_id(adapter)}</span>'),
        ("Worker", worker),
        ("Manifest", manifest),
        ("Verifier and checks", _html_checks(a, space)),
        ("Evidence state", _state_badge(a.evidence_state)),
        (
            "Isolation",
            f'<a href="#isolation">{html_text(a.weakest_isolation)}</a>'
            if a.weakest_isolation
            else '<span class="muted">not sandboxed</span>',
        ),
        ("Error", error),
    )


def _html_attempts(view: View) -> list[str]:
    rows = [(a.order, _attempt_cells(a, view.space)) for a in view.report.attempts]
    head = "".join(f"<th>{label}</th>" for label, _ in rows[0][1]) if rows else ""
    return [
        # A hostile id can only widen the table inside its own scroll box, never the page.
        f'<div class="scroll"><table class="stack"><thead><tr>{head}</tr></thead><tbody>',
        *(
            f'<tr id="attempt-{order}">'
            + "".join(f'<td data-label="{label}">{value}</td>' for label, value in cells)
            + "</tr>"
            for order, cells in rows
        ),
        "</tbody></table></div>",
    ]


def _html_decision(view: View) -> list[str]:
    report, s = view.report, view.report.summary
    accept = any(a.evidence_state is EvidenceState.SUPPORTED for a in report.attempts)
    parts = [
        f'<p class="headline {"go" if accept else "none"}">'
        f"{_html_tokens(decision_headline(report, view.sections))}</p>"
    ]
    parts += [
        '<div class="banner" role="alert"><strong>Same candidate judged differently:</strong> '
        f"{html_text(disagreement_text(found))}</div>"
        for found in view.disagreements
    ]
    for section in view.lead:
        parts += [f"<h3>{html_text(section.title)}</h3>", *_html_section_body(section)]
    cards = [
        ("attempts", s.attempt_count, ("#212529", "#f1f3f5")),
        ("supported", s.supported, STATE_COLOURS[EvidenceState.SUPPORTED]),
        ("rejected", s.rejected, STATE_COLOURS[EvidenceState.REJECTED]),
        ("inconclusive", s.inconclusive, STATE_COLOURS[EvidenceState.INCONCLUSIVE]),
        ("control errors", s.control_errors, STATE_COLOURS[EvidenceState.WORKER_ERROR]),
    ]
    parts += [
        '<div class="cards">',
        *(
            f'<div class="card" style="color:{fg};background:{bg}"><b>{n}</b>{label}</div>'
            for label, n, (fg, bg) in cards
        ),
        "</div>",
    ]
    if s.verification_disagreement and not view.disagreements:
        recommendations = ", ".join(html_text(r) for r in s.recommendations)
        parts.append(
            '<div class="note"><strong>Recommendations differ across candidates</strong> '
            f"({recommendations}): {html_text(DIFFER_TEXT)}</div>"
        )
    parts.append(
        '<div class="pending"><strong>Human decision: pending.</strong> No attempt is '
        "selected. Integration authority: an external human or governance body "
        "(<code>kernel decision record</code> binds a decision to this report's digest)."
        "</div>"
    )
    return parts


def _html_isolation(view: View) -> list[str]:
    section = isolation_section(view)
    return [] if section is None else _html_section_body(section)


def _html_run(view: View) -> list[str]:
    report = view.report
    meta = [
        ("Run", _html_id(report.run_id)),
        (
            "Work unit",
            f"{_html_id(report.work_unit.id)} v{report.work_unit.version} "
            f"{_digest_html(report.work_unit.digest)}",
        ),
        (
            "Source run",
            f"{html_text(report.source_run_kind)} {_digest_html(report.source_run_digest)}",
        ),
        ("Config", _digest_html(report.source_config_digest)),
        ("Verifier policy", _digest_html(report.verifier_policy_digest)),
        ("Isolation accepted", html_text(policy_text(report))),
        ("Orchestrator", html_text(report.orchestrator)),
        ("Report digest", _digest_html(report.digest)),
    ]
    if report.imported_from is not None:
        meta.append(
            (
                "Imported from",
                f"{html_text(report.imported_from.kind)} "
                f"{_digest_html(report.imported_from.digest)}",
            )
        )
    return ['<dl class="meta">', *(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in meta), "</dl>"]


def _html_warnings(view: View) -> list[str]:
    return [
        "<ul>",
        *(
            f'<li>{html_text(WARNING_TEXT[w])} <span class="mono muted">{html_text(w)}</span></li>'
            for w in view.report.warnings
        ),
        "</ul>",
    ]


def _html_authority(view: View) -> list[str]:
    # "no" is the expected answer: plain text; a "yes" would be a fault, shown in red.
    return [
        '<table class="auth"><thead><tr><th>Authority</th><th>Granted</th></tr></thead><tbody>',
        *(
            f'<tr><td class="mono">{html_text(name)}</td>'
            f"<td{' class=granted' if value else ''}>{yes_no(value)}</td></tr>"
            for name, value in authority_rows(view.report)
        ),
        "</tbody></table>",
        '<p class="muted">This report is a read-only aggregation of worker and verifier '
        "evidence. It selects no candidate and cannot approve, merge, push, or modify "
        "canonical project state.</p>",
    ]


_HtmlBlocks = list[tuple[str, str, list[str]]]
"""(anchor, title markup, body lines) of each HTML section, in page order; an empty
body: no section."""


def _html_blocks(view: View) -> _HtmlBlocks:
    # Decision first, then the candidates (attempts, diffs, outputs), then the details.
    return [
        ("decision", "Decision", _html_decision(view)),
        ("attempts", "Attempts", _html_attempts(view)),
        *_html_workspace(view.report, view.space),
        *(
            (section.anchor, html_text(section.title), _html_section_body(section))
            for section in view.details
        ),
        ("isolation", "Isolation and limits", _html_isolation(view)),
        ("run", "Run", _html_run(view)),
        ("warnings", "Warnings", _html_warnings(view)),
        ("authority", "Authority", _html_authority(view)),
    ]


@boundary
def render_html(
    report: RunEvidenceReport,
    sections: Sequence[TableSection] = (),
    workspace: Workspace | None = None,
) -> str:
    """One self-contained HTML page (inline CSS, no scripts, no external assets).

    The decision first (a ``headline`` section's headline and table, real disagreement
    in red, counts, the pending human decision), then the attempts and the
    ``workspace`` (diffs, check and worker outputs), then the details (other
    ``sections``, the run's identities, warnings, authority); all text is escaped.
    Links are fragment links within the page and relative links to the artifact files
    named by digest.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    blocks = [b for b in _html_blocks(View.of(report, sections, workspace)) if b[2]]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            "style-src 'unsafe-inline'\">",
            f"<title>Run evidence report: {html_text(report.run_id)}</title>",
            f"<style>{_CSS}</style></head><body>",
            f"<h1>Run evidence report <small>{_html_id(report.run_id)}</small></h1>",
            '<nav class="toc" aria-label="Contents">'
            + "".join(f'<a href="#{anchor}">{title}</a>' for anchor, title, _ in blocks)
            + "</nav>",
            *(
                line
                for anchor, title, body in blocks
                for line in (f'<h2 id="{anchor}">{title}</h2>', *body)
            ),
            "</body></html>",
            "",
        ]
    )
