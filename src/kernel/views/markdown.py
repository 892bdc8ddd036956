"""The Markdown view of a run evidence report (rules: `kernel.views`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from kernel.records.values import boundary, short_digest
from kernel.run.report import ReportAttempt, RunEvidenceReport
from kernel.views.views import (
    DIFFER_TEXT,
    INVISIBLE,
    LINE_BREAKS,
    MAX_DIFF_LINES,
    MAX_OUTPUT_LINES,
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
    isolation_section,
    policy_text,
    yes_no,
)

__all__ = ["md_cell", "render_markdown"]

# Inline Markdown syntax. Block syntax (``#``, ``-``, ``+``, ``1.``) only acts at the
# start of a line: escaped text follows a prefix, except section notes (`_md_paragraph`).
_MD_SPECIAL: Final = re.compile(r"([\\`*_{}\[\]()!|~])")


_MD_BLOCK_START: Final = re.compile(r"^(?:([#=+-])|(\d+)([.]))")


def _md_fence(text: str) -> str:
    """A backtick fence longer than any backtick run in ``text`` (CommonMark: a shorter
    run cannot close it, so the text stays inside the code block)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _md_code(lines: Sequence[str], info: str) -> list[str]:
    body = "\n".join(INVISIBLE.sub("\ufffd", LINE_BREAKS.sub(" ", line)) for line in lines)
    fence = _md_fence(body)
    return [fence + info, body, fence] if body else [fence + info, fence]


def _md_patch(patch: PatchView) -> list[str]:
    diff, omitted = bounded_lines(patch.text, MAX_DIFF_LINES, tail=False)
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
    tail, omitted = bounded_lines(output.text, MAX_OUTPUT_LINES, tail=True)
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
    status = check_statuses(report)
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


def md_cell(value: str) -> str:
    """Escape untrusted text for a Markdown table cell (or any inline Markdown).

    Line breaks become spaces (a cell is one line), control and format characters
    become U+FFFD, ``& < >`` become HTML entities (no raw HTML), and Markdown syntax
    characters, including ``|``, are backslash-escaped.
    """
    flat = INVISIBLE.sub("\ufffd", LINE_BREAKS.sub(" ", value))
    entities = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", entities)


def _md_paragraph(value: str) -> str:
    """`md_cell` for text that starts its own line: no leading indentation (code block)
    and an escaped heading, list, rule or setext marker."""
    cell = md_cell(value).lstrip(" \t")
    return _MD_BLOCK_START.sub(lambda m: "\\" + m[1] if m[1] else m[2] + "\\" + m[3], cell, count=1)


def _checks_text(attempt: ReportAttempt) -> str:
    if attempt.verification is None:
        return ""
    return ", ".join(
        f"{c.id}={c.status}" + ("" if c.required else " (optional)")
        for c in attempt.verification.checks
    )


def _md_decision(view: View) -> list[str]:
    report, s = view.report, view.report.summary
    lines = [f"**{md_cell(decision_headline(report, view.sections))}**", ""]
    for found in view.disagreements:
        lines += [
            f"> **Same candidate judged differently:** {md_cell(disagreement_text(found))}",
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
        f"- **Recommendations differ across candidates:** {yes_no(s.verification_disagreement)}"
        + (
            f" ({', '.join(s.recommendations)}): {DIFFER_TEXT}"
            if s.verification_disagreement and not view.disagreements
            else ""
        ),
        f"- **Same candidate judged differently:** {yes_no(bool(view.disagreements))}",
        "- **Human integration decision:** **pending** (no attempt selected; record one with"
        " `kernel decision record`, it binds to this report's canonical digest)",
    ]
    return lines


def _md_attempts(view: View) -> list[str]:
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


def _md_isolation(view: View) -> list[str]:
    section = isolation_section(view)
    return [] if section is None else _md_section_body(section)


def _md_run(view: View) -> list[str]:
    report = view.report
    lines = [
        f"- **Run:** {md_cell(report.run_id)}",
        f"- **Work unit:** {md_cell(report.work_unit.id)} v{report.work_unit.version}"
        f" (digest {report.work_unit.digest})",
        f"- **Source run:** {md_cell(report.source_run_kind)} {report.source_run_digest}",
        f"- **Config digest:** {report.source_config_digest}",
        f"- **Verifier policy digest:** {report.verifier_policy_digest}",
        f"- **Isolation accepted:** {policy_text(report)}",
        f"- **Report digest:** {report.digest}",
    ]
    if report.imported_from is not None:
        lines.append(
            f"- **Imported from:** {md_cell(report.imported_from.kind)}"
            f" {report.imported_from.digest}"
        )
    return lines


def _md_authority(view: View) -> list[str]:
    return [
        "| Authority | Granted |",
        "| --- | --- |",
        *(f"| {name} | {yes_no(value)} |" for name, value in authority_rows(view.report)),
        "",
        "This report is a read-only aggregation of worker and verifier evidence. It selects"
        " no candidate and cannot approve, merge, push, or modify canonical project state.",
    ]


_MdBlocks = list[tuple[str, list[str]]]
"""(title, lines) of each Markdown section, in page order; empty lines: no section."""


def _md_blocks(view: View) -> _MdBlocks:
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
        ParameterTypeError: an argument is not of its annotated type.
    """
    blocks = [(t, body) for t, body in _md_blocks(View.of(report, sections, workspace)) if body]
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
