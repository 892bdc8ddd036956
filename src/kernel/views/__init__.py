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
  of sections (`html._html_blocks`, `markdown._md_blocks`), so a new section is one more entry;
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

from kernel.views.html import render_html
from kernel.views.markdown import md_cell, render_markdown
from kernel.views.views import (
    MAX_DIFF_LINES,
    MAX_OUTPUT_LINES,
    WARNING_TEXT,
    CheckOutputView,
    PatchView,
    TableSection,
    Workspace,
    decision_headline,
    html_text,
    render_json,
)

__all__ = [
    "MAX_DIFF_LINES",
    "MAX_OUTPUT_LINES",
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
]
