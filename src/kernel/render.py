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
- the decision comes first (a section's ``headline``: the candidate to accept or why
  none, its table, real disagreement in red, the counts, the pending human decision),
  then the candidates (attempts, diffs, outputs), then the details; each view is a list
  of sections (`_html_blocks`, `_md_blocks`), so a new section is one more entry;
- red means a fault: one candidate judged two ways (`candidate_disagreements`) is a red
  alert, recommendations that differ across candidates (IDKMesh's flag) a grey note, and
  an authority "no" is plain text; ids never wrap inside (kept on one line, clipped
  with an ellipsis when too long, the full value in the title);
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
from kernel.evidence_report import (
    CandidateDisagreement,
    EvidenceState,
    ReportAttempt,
    ReportWarning,
    RunEvidenceReport,
    candidate_disagreements,
)
from kernel.identity import canonical_json, sha256_bytes
from kernel.runrecord import SandboxRun
from kernel.values import Digest, boundary

__all__ = [
    "WARNING_TEXT",
    "CheckOutputView",
    "PatchView",
    "TableSection",
    "Workspace",
    "decision_headline",
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
        "Recommendations differ across candidates (IDKMesh's verification_disagreement); "
        "every recommendation is preserved for human/governance review, not resolved by "
        "counting."
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
    headline: str | None = None
    """The answer this section gives (e.g. the candidate to accept, or why none): a
    section with a headline is a decision section, shown first with its headline on top."""

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
    worker_outputs: tuple[CheckOutputView, ...] = ()
    """Worker output tails (``check_id`` is ``worker``), a crashed worker's included."""

    def patch_of(self, attempt_id: str) -> PatchView | None:
        """The patch ``attempt_id`` produced, if any."""
        return next((p for p in self.patches if attempt_id in p.attempt_ids), None)

    def output_of(self, attempt_id: str, check_id: str) -> CheckOutputView | None:
        """The output tail of one check of one attempt, if kept."""
        return next(
            (o for o in self.outputs if o.attempt_id == attempt_id and o.check_id == check_id),
            None,
        )

    def worker_output_of(self, attempt_id: str) -> CheckOutputView | None:
        """The output tail of ``attempt_id``'s worker, if kept."""
        return next((o for o in self.worker_outputs if o.attempt_id == attempt_id), None)


@attrs.frozen(kw_only=True)
class _View:
    """What one rendering reads: the report, its sections split into the decision ones
    (with a headline) and the details, the workspace, and real disagreement."""

    report: RunEvidenceReport
    lead: tuple[TableSection, ...]
    details: tuple[TableSection, ...]
    space: Workspace
    disagreements: tuple[CandidateDisagreement, ...]

    @property
    def sections(self) -> tuple[TableSection, ...]:
        return (*self.lead, *self.details)

    @classmethod
    def of(
        cls, report: RunEvidenceReport, sections: Sequence[TableSection], space: Workspace | None
    ) -> _View:
        return cls(
            report=report,
            lead=tuple(s for s in sections if s.headline is not None),
            details=tuple(s for s in sections if s.headline is None),
            space=space or Workspace(),
            disagreements=candidate_disagreements(report),
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


def _html_output(output: CheckOutputView, order: int, status: str | None) -> list[str]:
    """A check's output tail (with its status), or a worker's (``status`` None)."""
    lines, omitted = _bounded_lines(output.text, MAX_OUTPUT_LINES, tail=True)
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


def _md_fence(text: str) -> str:
    """A backtick fence longer than any backtick run in ``text`` (CommonMark: a shorter
    run cannot close it, so the text stays inside the code block)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _md_code(lines: Sequence[str], info: str) -> list[str]:
    body = "\n".join(_INVISIBLE.sub("\ufffd", _LINE_BREAKS.sub(" ", line)) for line in lines)
    fence = _md_fence(body)
    return [fence + info, body, fence] if body else [fence + info, fence]


def _md_patch(patch: PatchView) -> list[str]:
    diff, omitted = _bounded_lines(patch.text, MAX_DIFF_LINES, tail=False)
    attempts = ", ".join(md_cell(a) for a in patch.attempt_ids)
    lines = [
        f"### Candidate {patch.digest[:12]}",
        "",
        f"Attempts: {attempts}. File: [{patch.href}]({patch.href}) (sha256 {patch.digest})",
        "",
    ]
    if not diff:
        return [*lines, "Empty patch: no change to the baseline.", ""]
    lines += [*_md_code(diff, "diff"), ""]
    if omitted:
        lines += [f"{omitted} more lines in [{patch.href}]({patch.href}).", ""]
    return lines


def _md_output(output: CheckOutputView, heading: str) -> list[str]:
    tail, omitted = _bounded_lines(output.text, MAX_OUTPUT_LINES, tail=True)
    return [
        f"### {heading}",
        "",
        f"Output tail: [{output.href}]({output.href}) (sha256 {output.digest})"
        + (f", {omitted} earlier lines not shown" if omitted else ""),
        "",
        *(_md_code(tail, "text") if tail else ["No output."]),
        "",
    ]


def _md_workspace(report: RunEvidenceReport, workspace: Workspace) -> _MdBlocks:
    status = _check_statuses(report)
    return [
        ("Candidates", [line for patch in workspace.patches for line in _md_patch(patch)]),
        (
            "Check outputs",
            [
                line
                for o in workspace.outputs
                for line in _md_output(
                    o,
                    f"{md_cell(o.attempt_id)}: check {md_cell(o.check_id)}"
                    f" {status.get((o.attempt_id, o.check_id), '')}",
                )
            ],
        ),
        (
            "Worker outputs",
            [
                line
                for o in workspace.worker_outputs
                for line in _md_output(o, f"{md_cell(o.attempt_id)}: worker")
            ],
        ),
    ]


def _check_statuses(report: RunEvidenceReport) -> dict[tuple[str, str], str]:
    return {
        (a.attempt_id, c.id): str(c.status)
        for a in report.attempts
        if a.verification is not None
        for c in a.verification.checks
    }


def _markdown_section(section: TableSection, level: str = "##") -> list[str]:
    return ["", f"{level} {md_cell(section.title)}", "", *_md_section_body(section)]


def _md_section_body(section: TableSection) -> list[str]:
    lines = []
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
    status = _check_statuses(report)
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


# --- what both views say: the decision, real disagreement, isolation and limits ---------

_BYTES_LIMITS: Final = frozenset({"memory", "output", "writable", "tmp"})
_UNITS: Final = ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def _limit_value(kind: str, value: int | None) -> str:
    if value is None:
        return "none"
    if kind == "cpu":
        return f"{value} s"
    if kind in _BYTES_LIMITS:
        return next(
            (f"{value // size} {unit}" for size, unit in _UNITS if value % size == 0), f"{value} B"
        )
    return str(value)


def _sandbox_text(sandbox: SandboxRun) -> str:
    limits = ", ".join(
        f"{limit.kind} {_limit_value(limit.kind, limit.value)} ({limit.mechanism})"
        for limit in sandbox.limits
    )
    return f"{sandbox.isolation}; {limits}" if limits else f"{sandbox.isolation}; no limits"


def _isolation_rows(report: RunEvidenceReport) -> list[tuple[str, str]]:
    """``(isolation and limits, runs)`` rows: every sandboxed run of the report (each
    attempt's worker and checks), runs isolated and limited alike on one row."""
    grouped: dict[str, dict[str, list[str]]] = {}
    for a in report.attempts:
        runs = [("worker", a.worker_sandbox)] if a.worker_sandbox else []
        runs += [(f"check {r.check_id}", r.sandbox) for r in a.check_runs if r.sandbox]
        for who, sandbox in runs:
            grouped.setdefault(_sandbox_text(sandbox), {}).setdefault(a.attempt_id, []).append(who)
    return [
        (how, "; ".join(f"{aid}: {', '.join(who)}" for aid, who in by_attempt.items()))
        for how, by_attempt in grouped.items()
    ]


def _policy_text(report: RunEvidenceReport) -> str:
    policy = report.isolation_policy
    if policy is None:
        return "not recorded"
    below = (
        "accepted as grounds for verified"
        if policy.accept_below_overlay
        else "never grounds for verified"
    )
    return f"minimum {policy.minimum}; evidence below overlay {below}"


def decision_headline(report: RunEvidenceReport, sections: Sequence[TableSection] = ()) -> str:
    """The answer first: a decision section's headline (the candidate to accept, or why
    none), else what the report alone says (the supported attempts, or that none is)."""
    lead = next((s.headline for s in sections if s.headline is not None), None)
    if lead is not None:
        return lead
    supported = [
        a.attempt_id for a in report.attempts if a.evidence_state is EvidenceState.SUPPORTED
    ]
    if supported:
        return (
            f"Supported by independent evidence: {', '.join(supported)}. A human decides;"
            " nothing here selects."
        )
    return "Nothing to accept: no attempt is supported by independent evidence."


def _disagreement_text(found: CandidateDisagreement) -> str:
    parts = []
    if len(found.recommendations) > 1:
        parts.append("recommendations " + ", ".join(found.recommendations))
    if found.checks:
        parts.append("status of check(s) " + ", ".join(found.checks))
    return (
        f"candidate {short_digest(found.candidate_digest)} was judged differently by"
        f" {', '.join(found.attempt_ids)} ({'; '.join(parts)}). Every judgment is kept;"
        " nothing here counts votes."
    )


_DIFFER_TEXT: Final = (
    "different candidates got different recommendations, as a wrong and a right candidate"
    " do; no candidate was judged two ways (IDKMesh's verification_disagreement)."
)


def _md_decision(view: _View) -> list[str]:
    report, s = view.report, view.report.summary
    lines = [f"**{md_cell(decision_headline(report, view.sections))}**", ""]
    for found in view.disagreements:
        lines += [
            f"> **Same candidate judged differently:** {md_cell(_disagreement_text(found))}",
            "",
        ]
    for section in view.lead:
        lines += _markdown_section(section, level="###")
    lines += [
        "",
        f"- **Attempts:** {s.attempt_count}: supported {s.supported}, rejected {s.rejected},"
        f" inconclusive {s.inconclusive}, control errors {s.control_errors} (worker"
        f" {s.worker_errors}, manifest {s.result_manifest_errors}, verification"
        f" {s.verification_errors})",
        f"- **Recommendations differ across candidates:** {_yes(s.verification_disagreement)}"
        + (
            f" ({', '.join(s.recommendations)}): {_DIFFER_TEXT}"
            if s.verification_disagreement and not view.disagreements
            else ""
        ),
        f"- **Same candidate judged differently:** {_yes(bool(view.disagreements))}",
        "- **Human integration decision:** **pending** (no attempt selected; record one with"
        " `kernel decision record`, it binds to this report's canonical digest)",
    ]
    return lines


def _md_attempts(view: _View) -> list[str]:
    lines = [
        "| # | Attempt | Adapter | Worker (status) | Manifest | Verifier | Recommendation |"
        " Evidence state | Checks | Isolation | Error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for a in view.report.attempts:
        m, v = a.manifest, a.verification
        cells = [
            str(a.order),
            md_cell(a.attempt_id),
            md_cell(a.adapter),
            f"{md_cell(m.worker_id)} ({m.worker_status})" if m else "",
            f"{md_cell(m.id)} {short_digest(m.digest)}" if m else "",
            md_cell(v.verifier_id) if v else "",
            str(v.recommendation) if v else "",
            f"**{a.evidence_state}**",
            md_cell(_checks_text(a)),
            str(a.weakest_isolation or "not sandboxed"),
            f"{a.error.code}: {md_cell(a.error.message)}" if a.error else "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _isolation_section(view: _View) -> TableSection | None:
    rows = _isolation_rows(view.report)
    if not rows:
        return None
    return TableSection(
        title="Isolation and limits",
        notes=(
            "How each sandboxed run was isolated and limited (limit, value, enforcing"
            f" mechanism). Isolation accepted by the run: {_policy_text(view.report)}.",
        ),
        headers=("Isolation and limits", "Runs"),
        rows=tuple(rows),
    )


def _md_isolation(view: _View) -> list[str]:
    section = _isolation_section(view)
    return [] if section is None else _md_section_body(section)


def _md_run(view: _View) -> list[str]:
    report = view.report
    lines = [
        f"- **Run:** {md_cell(report.run_id)}",
        f"- **Work unit:** {md_cell(report.work_unit.id)} v{report.work_unit.version}"
        f" (digest {report.work_unit.digest})",
        f"- **Source run:** {md_cell(report.source_run_kind)} {report.source_run_digest}",
        f"- **Config digest:** {report.source_config_digest}",
        f"- **Verifier policy digest:** {report.verifier_policy_digest}",
        f"- **Isolation accepted:** {_policy_text(report)}",
        f"- **Report digest:** {report.digest}",
    ]
    if report.imported_from is not None:
        lines.append(
            f"- **Imported from:** {md_cell(report.imported_from.kind)}"
            f" {report.imported_from.digest}"
        )
    return lines


def _md_authority(view: _View) -> list[str]:
    return [
        "| Authority | Granted |",
        "| --- | --- |",
        *(f"| {name} | {_yes(value)} |" for name, value in _authority(view.report)),
        "",
        "This report is a read-only aggregation of worker and verifier evidence. It selects"
        " no candidate and cannot approve, merge, push, or modify canonical project state.",
    ]


_MdBlocks = list[tuple[str, list[str]]]
"""(title, lines) of each Markdown section, in page order; empty lines: no section."""


def _md_blocks(view: _View) -> _MdBlocks:
    # Decision first, then the candidates (attempts, diffs), then the details.
    return [
        ("Decision", _md_decision(view)),
        ("Attempts", _md_attempts(view)),
        *_md_workspace(view.report, view.space),
        *((section.title, _md_section_body(section)) for section in view.details),
        ("Isolation and limits", _md_isolation(view)),
        ("Run", _md_run(view)),
        ("Warnings", [f"- {WARNING_TEXT[w]} (`{w}`)" for w in view.report.warnings]),
        ("Authority boundary", _md_authority(view)),
    ]


@boundary
def render_markdown(
    report: RunEvidenceReport,
    sections: Sequence[TableSection] = (),
    workspace: Workspace | None = None,
) -> str:
    """A Markdown view of the report: the decision first (a ``headline`` section's
    headline and table, real disagreement, counts, the pending human decision), then the
    attempts and the ``workspace`` (diffs, check and worker outputs), then the details
    (other ``sections``, the run's identities, warnings, authority).

    Raises:
        ArgumentTypeError: an argument is not of its annotated type.
    """
    blocks = [(t, body) for t, body in _md_blocks(_View.of(report, sections, workspace)) if body]
    lines = [
        "# Run Evidence Report",
        "",
        "Contents: " + " \u00b7 ".join(f"[{md_cell(t)}](#{_gfm_slug(t)})" for t, _ in blocks),
    ]
    for title, body in blocks:
        lines += ["", f"## {md_cell(title)}", "", *body]
    return "\n".join([*lines, ""])


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
    fg, bg = _STATE_COLOURS[state]
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


def _html_attempts(view: _View) -> list[str]:
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


def _html_decision(view: _View) -> list[str]:
    report, s = view.report, view.report.summary
    accept = any(a.evidence_state is EvidenceState.SUPPORTED for a in report.attempts)
    parts = [
        f'<p class="headline {"go" if accept else "none"}">'
        f"{_html_tokens(decision_headline(report, view.sections))}</p>"
    ]
    parts += [
        '<div class="banner" role="alert"><strong>Same candidate judged differently:</strong> '
        f"{html_text(_disagreement_text(found))}</div>"
        for found in view.disagreements
    ]
    for section in view.lead:
        parts += [f"<h3>{html_text(section.title)}</h3>", *_html_section_body(section)]
    cards = [
        ("attempts", s.attempt_count, ("#212529", "#f1f3f5")),
        ("supported", s.supported, _STATE_COLOURS[EvidenceState.SUPPORTED]),
        ("rejected", s.rejected, _STATE_COLOURS[EvidenceState.REJECTED]),
        ("inconclusive", s.inconclusive, _STATE_COLOURS[EvidenceState.INCONCLUSIVE]),
        ("control errors", s.control_errors, _STATE_COLOURS[EvidenceState.WORKER_ERROR]),
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
            f"({recommendations}): {html_text(_DIFFER_TEXT)}</div>"
        )
    parts.append(
        '<div class="pending"><strong>Human decision: pending.</strong> No attempt is '
        "selected. Integration authority: an external human or governance body "
        "(<code>kernel decision record</code> binds a decision to this report's digest)."
        "</div>"
    )
    return parts


def _html_isolation(view: _View) -> list[str]:
    section = _isolation_section(view)
    return [] if section is None else _html_section_body(section)


def _html_run(view: _View) -> list[str]:
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
        ("Isolation accepted", html_text(_policy_text(report))),
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


def _html_warnings(view: _View) -> list[str]:
    return [
        "<ul>",
        *(
            f'<li>{html_text(WARNING_TEXT[w])} <span class="mono muted">{html_text(w)}</span></li>'
            for w in view.report.warnings
        ),
        "</ul>",
    ]


def _html_authority(view: _View) -> list[str]:
    # "no" is the expected answer: plain text; a "yes" would be a fault, shown in red.
    return [
        '<table class="auth"><thead><tr><th>Authority</th><th>Granted</th></tr></thead><tbody>',
        *(
            f'<tr><td class="mono">{html_text(name)}</td>'
            f"<td{' class=granted' if value else ''}>{_yes(value)}</td></tr>"
            for name, value in _authority(view.report)
        ),
        "</tbody></table>",
        '<p class="muted">This report is a read-only aggregation of worker and verifier '
        "evidence. It selects no candidate and cannot approve, merge, push, or modify "
        "canonical project state.</p>",
    ]


_HtmlBlocks = list[tuple[str, str, list[str]]]
"""(anchor, title markup, body lines) of each HTML section, in page order; an empty
body: no section."""


def _html_blocks(view: _View) -> _HtmlBlocks:
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
        ArgumentTypeError: an argument is not of its annotated type.
    """
    blocks = [b for b in _html_blocks(_View.of(report, sections, workspace)) if b[2]]
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
