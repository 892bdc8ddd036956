"""Tests for kernel.views: canonical JSON, Markdown and HTML views, escaping."""

from __future__ import annotations

import hashlib
import html.parser
import re
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings

from kernel.effects.orchestrate import run_config
from kernel.errors import FieldError
from kernel.records.identity import canonical_json
from kernel.run.report import RunEvidenceReport, build_evidence_report
from kernel.strategies import identifiers
from kernel.views import (
    MAX_DIFF_LINES,
    MAX_OUTPUT_LINES,
    CheckOutputView,
    PatchView,
    TableSection,
    Workspace,
    html_text,
    md_cell,
    render_html,
    render_json,
    render_markdown,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "orchestration"
# In-page fragments and the run's own artifact files, named by digest: nothing else.
_LOCAL_HREF = re.compile(r"#[a-z0-9-]+|patches/[0-9a-f]{64}\.patch|checks/[0-9a-f]{64}\.txt")


def _report(name: str) -> RunEvidenceReport:
    report = build_evidence_report(run_config(FIXTURES / f"{name}.json"))
    assert isinstance(report, RunEvidenceReport)
    return report


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)


def _parse(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    return parser


def test_json_view_is_the_canonical_document() -> None:
    """The JSON view is canonical bytes of to_dict() plus a newline."""
    report = _report("two-attempt-good-vs-bad")
    assert render_json(report) == canonical_json(report.to_dict()) + b"\n"


def test_html_has_no_scripts_and_no_external_assets() -> None:
    """The page is self-contained: no script, link, img, iframe, and no URLs."""
    page = render_html(_report("nine-attempt-all-states"))
    tags = _parse(page)
    assert not {"script", "link", "img", "iframe", "object", "embed"} & set(tags.tags)
    assert not any(name == "src" or name.startswith("on") for name, _ in tags.attrs)
    hrefs = [value or "" for name, value in tags.attrs if name == "href"]
    assert hrefs
    assert all(_LOCAL_HREF.fullmatch(h) for h in hrefs), hrefs
    assert "http://" not in page
    assert "https://" not in page


def test_html_shows_states_note_digests_decision_authority() -> None:
    """Coloured states, the (neutral) note that recommendations differ across candidates,
    hover digests, the pending decision, and the authority table (every "no" plain)."""
    report = _report("two-attempt-good-vs-bad")
    page = render_html(report)
    assert 'class="banner"' not in page  # different candidates: not a disagreement
    assert '<div class="note"><strong>Recommendations differ across candidates</strong>' in page
    assert ">supported</span>" in page
    assert ">rejected</span>" in page
    assert f'title="{report.source_run_digest}"' in page
    assert f">{report.source_run_digest[:12]}\u2026</abbr>" in page
    assert "Human decision: pending." in page
    assert page.count("<td>no</td>") == 4


def test_no_banner_or_note_when_recommendations_agree() -> None:
    """Neither the red banner nor the neutral note appears when nothing differs."""
    page = render_html(_report("two-attempt-worker-failure"))
    assert 'class="banner"' not in page
    assert 'class="note"' not in page


def test_hostile_strings_cannot_inject_markup() -> None:
    """Worker-provided markup is escaped in HTML and Markdown."""
    report = _report("hostile-strings")
    page = render_html(report)
    tags = _parse(page)
    assert "script" not in tags.tags
    assert "i" not in tags.tags
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "hostile-&lt;b&gt;strings&lt;/b&gt;" in page
    markdown = render_markdown(report)
    assert "<script>" not in markdown
    assert "<i>" not in markdown


def _table_rows(markdown: str) -> list[str]:
    lines = markdown.split("\n")
    start = lines.index("## Attempts") + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def _cells(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row)) - 1


def test_hostile_strings_cannot_break_the_markdown_table() -> None:
    """Every attempt row has exactly the header's number of cells."""
    rows = _table_rows(render_markdown(_report("hostile-strings")))
    assert len(rows) == 4  # header, rule, two attempts
    assert {_cells(row) for row in rows} == {11}


@settings(max_examples=100, deadline=None)
@given(identifiers())
def test_md_cell_is_one_cell_without_raw_markup(value: str) -> None:
    """md_cell output has no unescaped pipe, no line break and no raw < or >."""
    cell = md_cell(value)
    assert "|" not in cell.replace("\\\\", "").replace("\\|", "")
    assert "\n" not in cell
    assert "\r" not in cell
    assert "<" not in cell
    assert ">" not in cell


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [("<a href='x'>", "&lt;a href=&#x27;x&#x27;&gt;"), ('"&', "&quot;&amp;")],
)
def test_html_text_escapes_attribute_and_content_characters(raw: str, escaped: str) -> None:
    """html_text escapes & < > " and '."""
    assert html_text(raw) == escaped


_INVISIBLE = (
    "\u202e\u202a\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u200b\u200c\u200d\u2060\ufeff\u00ad"
)


@pytest.mark.parametrize("char", list(_INVISIBLE))
def test_bidi_and_invisible_format_characters_are_made_visible(char: str) -> None:
    """Regression: a bidi override (U+202E, isolates) or a zero-width character in a
    worker string passed through raw, so it could reorder the rest of a Markdown row or
    make two different ids look identical; both escapers now replace it."""
    value = f"attempt{char}-001"
    assert char not in md_cell(value)
    assert char not in html_text(value)
    assert md_cell(value) != md_cell("attempt-001")


def test_section_notes_cannot_start_markdown_blocks() -> None:
    """Regression: a `TableSection` note starts its own Markdown line, so a note such as
    ``# Accepted`` or ``1. merged`` became a heading or a list (the module promises
    sections are plain text, escaped here)."""
    notes = ("# Accepted", "1. merged", "- item", "+ item", "    code", "===", "---", "2) x")
    section = TableSection(title="t", notes=notes, headers=("h",), rows=())
    lines = render_markdown(_report("two-attempt-good-vs-bad"), [section]).split("\n")
    start = lines.index("## t")
    rendered = [line for line in lines[start + 1 : start + 1 + 2 * len(notes)] if line]
    assert len(rendered) == len(notes)
    for line in rendered:
        assert not re.match(r"( {4}|#|[-+*=]|\d+[.)])", line), line


def test_every_format_and_control_character_is_made_visible() -> None:
    """The escapers' list of invisible characters covers every Unicode format (Cf) and
    control (Cc) character this Python knows (tab and line breaks are handled apart)."""
    kept = set("\t\n\r\x0b\x0c\x85")
    invisible = [
        chr(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in {"Cf", "Cc"} and chr(c) not in kept
    ]
    assert [c for c in invisible if c in html_text(c) or c in md_cell(c)] == []


_PATCH = (
    b"diff --git a/stats.py b/stats.py\n--- a/stats.py\n+++ b/stats.py\n"
    b"@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n"
)
_HOSTILE = "</pre><script>alert(1)</script><img src=x onerror=alert(2)>\u202e```\n````"


def _workspace(report: RunEvidenceReport, patch: bytes = _PATCH, tail: str = "") -> Workspace:
    first = report.attempts[0].attempt_id
    outputs: tuple[CheckOutputView, ...] = ()
    if tail:
        outputs = (CheckOutputView.of(first, "artifact-digest", tail.encode()),)
    return Workspace(patches=(PatchView.of(patch, [first]),), outputs=outputs)


def test_workspace_shows_the_diff_coloured_and_linked() -> None:
    """The HTML shows the diff inline with file headers and +/- classes, linked to the
    patch file by digest and from the attempt row; Markdown fences it and links it."""
    report = _report("two-attempt-good-vs-bad")
    space = _workspace(report, tail="FAIL: test_x\nAssertionError: 1 != 2\n")
    page = render_html(report, (), space)
    digest = space.patches[0].digest
    assert f'href="patches/{digest}.patch"' in page
    assert f'id="patch-{digest}"' in page
    assert f'href="#patch-{digest}"' in page
    assert '<span class="fh">diff --git a/stats.py b/stats.py</span>' in page
    assert '<span class="ad">+    return 2</span>' in page
    assert '<span class="dl">-    return 1</span>' in page
    assert '<span class="hk">@@ -1,2 +1,2 @@</span>' in page
    assert "AssertionError: 1 != 2" in page
    assert f'href="checks/{space.outputs[0].digest}.txt"' in page
    markdown = render_markdown(report, (), space)
    assert f"[patches/{digest}.patch](patches/{digest}.patch)" in markdown
    assert "```diff\n" + _PATCH.decode().rstrip("\n") + "\n```" in markdown
    assert "AssertionError: 1 != 2" in markdown


def test_workspace_views_hash_what_they_show() -> None:
    """The digests come from the bytes (never from the caller), so a reader can check the
    linked file against the digest the report prints."""
    view = PatchView.of(_PATCH, ["a"])
    assert view.digest == hashlib.sha256(_PATCH).hexdigest()
    with pytest.raises(ValueError, match="digest"):
        PatchView(digest="../../etc/passwd", attempt_ids=("a",), text="")
    with pytest.raises(ValueError, match="digest"):
        CheckOutputView(attempt_id="a", check_id="c", digest="x" * 64, text="")


def test_hostile_diff_and_output_stay_inert() -> None:
    """A diff or check output carrying markup, a bidi override or backtick fences can
    neither inject HTML nor close the Markdown code block."""
    report = _report("two-attempt-good-vs-bad")
    space = _workspace(report, patch=_HOSTILE.encode(), tail=_HOSTILE)
    page = render_html(report, (), space)
    tags = _parse(page)
    assert not {"script", "img"} & set(tags.tags)
    assert "\u202e" not in page
    assert page.count("&lt;/pre&gt;&lt;script&gt;") == 2
    markdown = render_markdown(report, (), space)
    # Content lines of four backticks sit inside five-backtick fences: they cannot close.
    lines = markdown.split("\n")
    opened = [i for i, line in enumerate(lines) if line in {"`````diff", "`````text"}]
    assert len(opened) == 2
    for start in opened:
        end = lines.index("`````", start + 1)
        assert "````" in lines[start + 1 : end]
        assert "<script>" in "\n".join(lines[start + 1 : end])  # literal, inside the block
    outside = [line for i, line in enumerate(lines) if not any(s <= i for s in opened)]
    assert not any("<script" in line for line in outside)
    assert "\u202e" not in markdown


def test_long_diffs_are_bounded_and_collapsed() -> None:
    """A diff longer than the bound shows its first lines, says how many are left out,
    and starts collapsed; a check output shows its last lines."""
    report = _report("two-attempt-good-vs-bad")
    big = b"".join(b"+line %d\n" % i for i in range(MAX_DIFF_LINES + 25))
    tail = "".join(f"out {i}\n" for i in range(MAX_OUTPUT_LINES + 7))
    page = render_html(report, (), _workspace(report, patch=big, tail=tail))
    assert "<details><summary>" in page
    assert f"+line {MAX_DIFF_LINES - 1}<" in page
    assert f"+line {MAX_DIFF_LINES}<" not in page
    assert "25 more lines" in page
    assert "out 6<" not in page
    assert f"out {MAX_OUTPUT_LINES + 6}<" in page
    assert "7 earlier lines not shown" in page
    short = render_html(report, (), _workspace(report))
    assert "<details open><summary>" in short


def test_page_has_contents_anchors_badges_and_print_styles() -> None:
    """A table of contents links to every section anchor; attempts have anchors;
    evidence classes are badges; the stylesheet stacks tables at 700 px and has print
    rules."""
    report = _report("two-attempt-good-vs-bad")
    section = TableSection(
        title="Evidence classes",
        notes=(),
        headers=("c", "Class"),
        rows=(("x", "verified"), ("y", "corroborated_only")),
        badge_column=1,
    )
    page = render_html(report, [section])
    tags = _parse(page)
    ids = {value for name, value in tags.attrs if name == "id"}
    links = {value[1:] for name, value in tags.attrs if name == "href" and value}
    assert links <= ids
    assert {"decision", "attempts", "warnings", section.anchor, "attempt-1"} <= ids
    # Decision first, then the candidates, then the details.
    assert page.index('id="decision"') < page.index('id="attempts"') < page.index('id="run"')
    assert '">verified</span>' in page
    assert "@media (max-width:800px)" in page
    assert "@media print" in page
    assert 'data-label="Evidence state"' in page
    with pytest.raises(FieldError, match=r"TableSection\.badge_column: "):
        TableSection(title="t", notes=(), headers=("a",), rows=(), badge_column=1)
