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
  the caller, so a section cannot carry markup;
- a `Workspace` (optional) adds what a reviewer needs to act: each candidate's diff
  inline (HTML: file headers and +/- colouring, collapsed when long; Markdown: a fence
  longer than any backtick run in the diff, so the diff cannot close it) and each
  check's output tail, both bounded, escaped, and linked to the artifact file whose
  digest is shown (``patches/<digest>.patch``, ``checks/<digest>.txt``): the links are
  built here from validated digests, never taken from the caller;
- the HTML page reads at 700 px (tables become stacked cards) and in print (the table
  of contents is hidden, collapsed diffs are expanded).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from kernel.codec import Record
from kernel.errors import FieldError
from kernel.evidence_report import EvidenceState, ReportAttempt, ReportWarning, RunEvidenceReport
from kernel.identity import canonical_json, sha256_bytes
from kernel.values import Digest, boundary

__all__ = [
    "WARNING_TEXT",
    "CheckOutputView",
    "PatchView",
    "TableSection",
    "Workspace",
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
    badge_column: int | None = None
    """Index of a column whose cells are shown as evidence-class badges (HTML)."""

    def __attrs_post_init__(self) -> None:
        if any(len(row) != len(self.headers) for row in self.rows):
            raise FieldError("rows", "every row has one cell per header", "TableSection")
        if self.badge_column is not None and not 0 <= self.badge_column < len(self.headers):
            raise FieldError("badge_column", "badge_column names no column", "TableSection")

    @property
    def anchor(self) -> str:
        """A fragment id derived from the title (letters, digits and hyphens only)."""
        slug = re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")
        return "s-" + (slug or "section")


MAX_DIFF_LINES: Final = 400
"""Diff lines shown inline; the rest is in the linked patch file."""
MAX_OUTPUT_LINES: Final = 60
"""Check output lines shown inline (the last ones)."""
_MAX_LINE_CHARS: Final = 500
_COLLAPSE_LINES: Final = 40


@attrs.frozen(kw_only=True)
class PatchView(Record):
    """One distinct candidate patch, as the run wrote it to ``patches/<digest>.patch``."""

    digest: Digest
    """SHA-256 of the patch bytes (the file name)."""
    attempt_ids: tuple[str, ...]
    """Attempts that produced exactly these bytes."""
    text: str
    """The patch, decoded (undecodable bytes replaced); escaped when rendered."""

    @classmethod
    def of(cls, data: bytes, attempt_ids: Sequence[str]) -> PatchView:
        """The view of ``data`` (digest computed here, never trusted from the caller)."""
        return cls(
            digest=sha256_bytes(data),
            attempt_ids=tuple(attempt_ids),
            text=data.decode("utf-8", "replace"),
        )

    @property
    def href(self) -> str:
        """Relative link to the patch file."""
        return f"patches/{self.digest}.patch"


@attrs.frozen(kw_only=True)
class CheckOutputView(Record):
    """The tail of one check's output, as the run wrote it to ``checks/<digest>.txt``."""

    attempt_id: str
    """The attempt whose candidate was checked."""
    check_id: str
    """The verifier check."""
    digest: Digest
    """SHA-256 of the tail bytes (the file name)."""
    text: str
    """The tail, decoded; escaped when rendered."""

    @classmethod
    def of(cls, attempt_id: str, check_id: str, data: bytes) -> CheckOutputView:
        """The view of ``data`` (digest computed here)."""
        return cls(
            attempt_id=attempt_id,
            check_id=check_id,
            digest=sha256_bytes(data),
            text=data.decode("utf-8", "replace"),
        )

    @property
    def href(self) -> str:
        """Relative link to the output file."""
        return f"checks/{self.digest}.txt"


@attrs.frozen(kw_only=True)
class Workspace:
    """What a reviewer reads beside the report: the diffs and the check outputs."""

    patches: tuple[PatchView, ...] = ()
    """Distinct candidate patches."""
    outputs: tuple[CheckOutputView, ...] = ()
    """Check output tails."""

    def patch_of(self, attempt_id: str) -> PatchView | None:
        """The patch ``attempt_id`` produced, if any."""
        return next((p for p in self.patches if attempt_id in p.attempt_ids), None)

    def output_of(self, attempt_id: str, check_id: str) -> CheckOutputView | None:
        """The output tail of one check of one attempt, if kept."""
        return next(
            (o for o in self.outputs if o.attempt_id == attempt_id and o.check_id == check_id),
            None,
        )


def _bounded_lines(text: str, limit: int, *, tail: bool) -> tuple[list[str], int]:
    """At most ``limit`` lines (the first or the last), each cut to a sane width, and
    how many lines were left out."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    omitted = max(0, len(lines) - limit)
    kept = lines[-limit:] if tail else lines[:limit]
    return [
        line if len(line) <= _MAX_LINE_CHARS else line[:_MAX_LINE_CHARS] + "\u2026" for line in kept
    ], omitted


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
    lines, omitted = _bounded_lines(patch.text, MAX_DIFF_LINES, tail=False)
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
    "passed": _STATE_COLOURS[EvidenceState.SUPPORTED],
    "failed": _STATE_COLOURS[EvidenceState.REJECTED],
    "error": _STATE_COLOURS[EvidenceState.VERIFICATION_ERROR],
}


def _check_badge(status: str) -> str:
    fg, bg = _CHECK_COLOURS.get(status, _STATE_COLOURS[EvidenceState.INCONCLUSIVE])
    return f'<span class="st" style="color:{fg};background:{bg}">{html_text(status)}</span>'


def _html_output(output: CheckOutputView, order: int, status: str) -> list[str]:
    lines, omitted = _bounded_lines(output.text, MAX_OUTPUT_LINES, tail=True)
    link = f'<a href="{output.href}" class="mono">{html_text(output.href)}</a>'
    head = (
        f'<h3 id="check-{order}-{output.digest[:16]}">'
        f'<a href="#attempt-{order}">{html_text(output.attempt_id)}</a>: check '
        f"{html_text(output.check_id)} {_check_badge(status)}</h3>"
        f"<p>Output tail {_digest_html(output.digest)}: {link}"
        + (f" ({omitted} earlier lines not shown)" if omitted else "")
        + "</p>"
    )
    if not lines:
        return [head, '<p class="muted">No output.</p>']
    return [head, _html_pre(lines, diff=False)]


def _md_fence(text: str) -> str:
    """A backtick fence longer than any backtick run in ``text`` (CommonMark: a shorter
    run cannot close it, so the text stays inside the code block)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _md_code(lines: Sequence[str], info: str) -> list[str]:
    body = "\n".join(_INVISIBLE.sub("\ufffd", _LINE_BREAKS.sub(" ", line)) for line in lines)
    fence = _md_fence(body)
    return [fence + info, body, fence] if body else [fence + info, fence]


def _md_workspace(report: RunEvidenceReport, workspace: Workspace) -> list[str]:
    lines: list[str] = []
    if workspace.patches:
        lines += ["", "## Candidates", ""]
        for patch in workspace.patches:
            diff, omitted = _bounded_lines(patch.text, MAX_DIFF_LINES, tail=False)
            attempts = ", ".join(md_cell(a) for a in patch.attempt_ids)
            lines += [
                f"### Candidate {patch.digest[:12]}",
                "",
                f"Attempts: {attempts}. File: [{patch.href}]({patch.href}) (sha256 {patch.digest})",
                "",
            ]
            if not diff:
                lines += ["Empty patch: no change to the baseline.", ""]
                continue
            lines += [*_md_code(diff, "diff"), ""]
            if omitted:
                lines += [f"{omitted} more lines in [{patch.href}]({patch.href}).", ""]
    if workspace.outputs:
        lines += ["", "## Check outputs", ""]
        status = _check_statuses(report)
        for output in workspace.outputs:
            tail, omitted = _bounded_lines(output.text, MAX_OUTPUT_LINES, tail=True)
            state = status.get((output.attempt_id, output.check_id), "")
            lines += [
                f"### {md_cell(output.attempt_id)}: check {md_cell(output.check_id)} {state}",
                "",
                f"Output tail: [{output.href}]({output.href}) (sha256 {output.digest})"
                + (f", {omitted} earlier lines not shown" if omitted else ""),
                "",
                *(_md_code(tail, "text") if tail else ["No output."]),
                "",
            ]
    return lines


def _check_statuses(report: RunEvidenceReport) -> dict[tuple[str, str], str]:
    return {
        (a.attempt_id, c.id): str(c.status)
        for a in report.attempts
        if a.verification is not None
        for c in a.verification.checks
    }


def _markdown_section(section: TableSection) -> list[str]:
    lines = ["", f"## {md_cell(section.title)}", ""]
    for note in section.notes:
        lines += [_md_paragraph(note), ""]
    lines.append("| " + " | ".join(md_cell(h) for h in section.headers) + " |")
    lines.append("| " + " | ".join("---" for _ in section.headers) + " |")
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in section.rows]
    return lines


# Evidence classes (kernel.admission.EvidenceClass values) and how a refusal reads.
_CLASS_COLOURS: Final = {
    "verified": ("#0f5132", "#d1e7dd"),
    "corroborated_only": ("#664d03", "#fff3cd"),
}
_NOT_ADMITTED: Final = ("#41464b", "#e2e3e5")


def _class_badge(text: str) -> str:
    fg, bg = _CLASS_COLOURS.get(text, _NOT_ADMITTED)
    return f'<span class="st" style="color:{fg};background:{bg}">{html_text(text)}</span>'


def _html_section(section: TableSection) -> list[str]:
    head = "".join(f"<th>{html_text(h)}</th>" for h in section.headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td data-label="{html_text(h)}">'
            + (_class_badge(c) if i == section.badge_column else html_text(c))
            + "</td>"
            for i, (h, c) in enumerate(zip(section.headers, row, strict=True))
        )
        + "</tr>"
        for row in section.rows
    )
    return [
        f'<h2 id="{section.anchor}">{html_text(section.title)}</h2>',
        *(f"<p>{html_text(note)}</p>" for note in section.notes),
        f'<table class="extra stack"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>',
    ]


@boundary
def render_json(report: RunEvidenceReport) -> bytes:
    """Canonical JSON bytes of the report, plus one trailing newline.

    Raises:
        ArgumentTypeError: an argument is not of its annotated type.
    """
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


@boundary
def render_markdown(
    report: RunEvidenceReport,
    sections: Sequence[TableSection] = (),
    workspace: Workspace | None = None,
) -> str:
    """A Markdown view of the report: summary first, then the run's identities, the
    attempt table, the ``workspace`` (diffs and check outputs) and ``sections``.

    Raises:
        ArgumentTypeError: an argument is not of its annotated type.
    """
    s = report.summary
    space = workspace or Workspace()
    contents = [("Summary", "summary"), ("Run", "run"), ("Attempts", "attempts")]
    if space.patches:
        contents.append(("Candidates", "candidates"))
    if space.outputs:
        contents.append(("Check outputs", "check-outputs"))
    contents += [(section.title, _gfm_slug(section.title)) for section in sections]
    contents += [("Warnings", "warnings"), ("Human decision", "human-decision")]
    contents.append(("Authority boundary", "authority-boundary"))
    lines = [
        "# Run Evidence Report",
        "",
        "Contents: " + " \u00b7 ".join(f"[{md_cell(t)}](#{a})" for t, a in contents),
        "",
        "## Summary",
        "",
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
        "## Run",
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
        "",
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
    lines += _md_workspace(report, space)
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


def _gfm_slug(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


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
h3{font-size:1rem;margin:1.2rem 0 .3rem}
p,h3,li{overflow-wrap:anywhere}
nav.toc{font-size:.9rem;margin:.5rem 0 1rem;display:flex;flex-wrap:wrap;gap:.2rem .9rem}
nav.toc a{white-space:nowrap}
.meta{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.15rem 1rem;
margin:1rem 0}
.meta dt{font-weight:600;color:#495057}.meta dd{margin:0;overflow-wrap:anywhere}
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
td.w{overflow-wrap:anywhere}
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
overflow-wrap:anywhere}
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
.card,.st,.banner,.pending,pre.diff span{-webkit-print-color-adjust:exact;print-color-adjust:exact}
}
"""


def _state_badge(state: EvidenceState) -> str:
    fg, bg = _STATE_COLOURS[state]
    return f'<span class="st" style="color:{fg};background:{bg}">{html_text(state)}</span>'


def _attempt_row(a: ReportAttempt, space: Workspace) -> str:
    m, v = a.manifest, a.verification
    worker = (
        f'{html_text(m.worker_id)}<br><span class="muted">{html_text(m.worker_status)}</span>'
        if m
        else '<span class="muted">none</span>'
    )
    manifest = f"{html_text(m.id)}<br>{_digest_html(m.digest)}" if m else ""
    patch = space.patch_of(a.attempt_id)
    if patch is not None:
        manifest += f'<br><a href="#patch-{patch.digest}">diff</a>'
    if v:
        items = []
        for c in v.checks:
            output = space.output_of(a.attempt_id, c.id)
            label = html_text(c.id)
            if output is not None:
                label = f'<a href="#check-{a.order}-{output.digest[:16]}">{label}</a>'
            items.append(
                f"<li>{label}: {html_text(c.status)}"
                + ("" if c.required else ' <span class="muted">(optional)</span>')
                + "</li>"
            )
        verifier = (
            f"{html_text(v.verifier_id)}<br>{_digest_html(v.semantic_digest)}"
            f'<ul class="checks">{"".join(items)}</ul>'
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
    cells = (
        ("#", str(a.order)),
        ("Attempt", html_text(a.attempt_id)),
        ("Adapter", f"{html_text(a.adapter)}{version}"),
        ("Worker", worker),
        ("Manifest", manifest),
        ("Verifier and checks", verifier),
        ("Recommendation", recommendation),
        ("Evidence state", _state_badge(a.evidence_state)),
        ("Error", error),
    )
    # Untrusted ids may be one long token: those cells may break anywhere, the others
    # keep whole words (so a hostile id cannot push the state column off screen).
    return (
        f'<tr id="attempt-{a.order}">'
        + "".join(
            f'<td data-label="{label}"{_WRAP if label in _FREE_TEXT else ""}>{value}</td>'
            for label, value in cells
        )
        + "</tr>"
    )


_WRAP: Final = ' class="w"'
_FREE_TEXT: Final = frozenset({"Attempt", "Worker", "Manifest", "Verifier and checks", "Error"})


def _html_workspace(report: RunEvidenceReport, space: Workspace) -> list[str]:
    orders = {a.attempt_id: a.order for a in report.attempts}
    parts: list[str] = []
    if space.patches:
        parts.append('<h2 id="candidates">Candidates</h2>')
        for patch in space.patches:
            parts += _html_patch(patch, orders)
    if space.outputs:
        status = _check_statuses(report)
        parts.append('<h2 id="check-outputs">Check outputs</h2>')
        for output in space.outputs:
            key = (output.attempt_id, output.check_id)
            parts += _html_output(output, orders.get(output.attempt_id, 0), status.get(key, ""))
    return parts


@boundary
def render_html(
    report: RunEvidenceReport,
    sections: Sequence[TableSection] = (),
    workspace: Workspace | None = None,
) -> str:
    """One self-contained HTML page (inline CSS, no scripts, no external assets).

    Summary first, then the run's identities, the attempt table, the ``workspace``
    (diffs, check outputs) and ``sections``; their text is escaped like everything else.
    Links are fragment links within the page and relative links to the artifact files
    named by digest.

    Raises:
        ArgumentTypeError: an argument is not of its annotated type.
    """
    s = report.summary
    space = workspace or Workspace()
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
    cards = [
        ("attempts", s.attempt_count, ("#212529", "#f1f3f5")),
        ("supported", s.supported, _STATE_COLOURS[EvidenceState.SUPPORTED]),
        ("rejected", s.rejected, _STATE_COLOURS[EvidenceState.REJECTED]),
        ("inconclusive", s.inconclusive, _STATE_COLOURS[EvidenceState.INCONCLUSIVE]),
        ("control errors", s.control_errors, _STATE_COLOURS[EvidenceState.WORKER_ERROR]),
    ]
    contents = [("summary", "Summary"), ("run", "Run"), ("attempts", "Attempts")]
    if space.patches:
        contents.append(("candidates", "Candidates"))
    if space.outputs:
        contents.append(("check-outputs", "Check outputs"))
    contents += [(section.anchor, html_text(section.title)) for section in sections]
    contents += [("warnings", "Warnings"), ("authority", "Authority")]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">",
        f"<title>Run evidence report: {html_text(report.run_id)}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Run evidence report</h1>",
        '<nav class="toc" aria-label="Contents">'
        + "".join(f'<a href="#{anchor}">{title}</a>' for anchor, title in contents)
        + "</nav>",
        '<section id="summary">',
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
        "</div></section>"
    )
    parts += [
        '<h2 id="run">Run</h2>',
        '<dl class="meta">',
        *(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in meta),
        "</dl>",
        '<h2 id="attempts">Attempts</h2>',
        '<table class="stack"><thead><tr><th>#</th><th>Attempt</th><th>Adapter</th>'
        "<th>Worker</th><th>Manifest</th><th>Verifier and checks</th><th>Recommendation</th>"
        "<th>Evidence state</th><th>Error</th></tr></thead><tbody>",
        *(_attempt_row(a, space) for a in report.attempts),
        "</tbody></table>",
        *_html_workspace(report, space),
        *(line for section in sections for line in _html_section(section)),
        '<h2 id="warnings">Warnings</h2><ul>',
        *(
            f'<li>{html_text(WARNING_TEXT[w])} <span class="mono muted">{html_text(w)}</span></li>'
            for w in report.warnings
        ),
        "</ul>",
        '<h2 id="authority">Authority</h2><table class="auth"><thead><tr><th>Authority</th>'
        "<th>Granted</th></tr></thead><tbody>",
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
