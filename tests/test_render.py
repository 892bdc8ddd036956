"""Tests for kernel.render: canonical JSON, Markdown and HTML views, escaping."""

from __future__ import annotations

import html.parser
import re
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings

from kernel.effects.orchestrate import run_config
from kernel.evidence_report import RunEvidenceReport, build_evidence_report
from kernel.identity import canonical_json
from kernel.render import (
    TableSection,
    html_text,
    md_cell,
    render_html,
    render_json,
    render_markdown,
)
from kernel.strategies import identifiers

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "orchestration"


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
    assert not any(name in {"src", "href"} or name.startswith("on") for name, _ in tags.attrs)
    assert "http://" not in page
    assert "https://" not in page


def test_html_shows_states_banner_digests_decision_authority() -> None:
    """Coloured states, the disagreement banner, hover digests, pending decision, authority."""
    report = _report("two-attempt-good-vs-bad")
    page = render_html(report)
    assert 'class="banner"' in page
    assert ">supported</span>" in page
    assert ">rejected</span>" in page
    assert f'title="{report.source_run_digest}"' in page
    assert f">{report.source_run_digest[:12]}\u2026</abbr>" in page
    assert "Human decision: pending." in page
    assert page.count("<td>no</td>") == 4


def test_no_banner_without_disagreement() -> None:
    """The disagreement banner only appears when verifiers disagree."""
    assert 'class="banner"' not in render_html(_report("two-attempt-worker-failure"))


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
    assert {_cells(row) for row in rows} == {10}


@settings(max_examples=100, deadline=None)
@given(identifiers)
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
