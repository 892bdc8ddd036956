"""The text prefilters of `kernel.guard.syntax`: `lines_of` searches each word of a
text once, whichever pass asks and in whatever form (a word, a word not called, a
word not followed by a quiet attribute), and finds the lines the search it replaces
found (docs/guard.md, issue 21's eighth round)."""

from __future__ import annotations

import re
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.guard import Policy, Rule, check_source, syntax
from kernel.guard.syntax import _TOKENS, _line_numbers, _Text, lines_of, prepare


def _word_starts(data: bytes, raw: bytes) -> list[int]:
    """Every start of ``raw`` with no `WORD` byte either side, by a pattern."""
    return [
        m.start()
        for m in re.finditer(rb"(?<![A-Za-z0-9_])(?=%s(?![A-Za-z0-9_]))" % re.escape(raw), data)
    ]


def _lines_of_before(
    data: bytes,
    names: list[str],
    uncalled: list[str],
    dotted: list[str],
    quiet: Callable[[str, str], bool],
    *,
    tokens: bool = True,
) -> list[int]:
    """`lines_of` as it was before the eighth round, per call: the file's tokens, then
    a search per name present (with the word boundary after a name that ends in a
    non-ASCII letter fixed: see below); with ``tokens`` false, a search per name."""
    every = [*names, *uncalled, *dotted]
    words = frozenset(data.translate(_TOKENS).split() if tokens else map(str.encode, every))
    positions: list[int] = []
    for raw in words.intersection(map(str.encode, names)):
        positions += _word_starts(data, raw)
    for raw in words.intersection(map(str.encode, uncalled)):
        positions += [
            at
            for at in _word_starts(data, raw)
            if not re.match(rb"[ \t]*\(", data[at + len(raw) :])
        ]
    attr_after = re.compile(rb"[ \t]*\.[ \t]*([A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_\x80-\xff])")
    for raw in words.intersection(map(str.encode, dotted)):
        for at in _word_starts(data, raw):
            attr = attr_after.match(data, at + len(raw))
            if attr is None or not quiet(raw.decode(), attr.group(1).decode()):
                positions.append(at)
    positions.sort()
    return _line_numbers(positions, data)


_NAMES = ("os", "open", "getattr", "import", "re", "é")
_PIECES = (
    *_NAMES, "pos", "os_", "xos", "éos", "osé", "getattr (", "getattr\t(", "(getattr)(",
    "re.sub", "re . compile", "re.\n", "re.x", ".", " ", "\t", "\n", "#", "'", "(", ")",
    "=", "9", "_", "\uff4f\uff53", " \\\n",  # `os` in fullwidth letters: NFKC folds it
)  # fmt: skip
"""Each name, words that hold it, the spellings of a call and of an attribute after it."""
_TEXT = st.lists(
    st.lists(st.one_of(st.sampled_from(_NAMES), st.sampled_from(_PIECES)), max_size=5).map("".join),
    max_size=8,
).map("\n".join)
"""Lines of a few pieces, a name in every other one: a word found on the wrong line,
or under the wrong name, shows."""
_CALL = st.tuples(
    st.lists(st.sampled_from(_NAMES), max_size=3),
    st.lists(st.sampled_from(_NAMES), max_size=2),
    st.lists(st.sampled_from(_NAMES), max_size=2),
)


def _quiet(name: str, attr: str) -> bool:
    return attr != "x"  # `re.x` marks its line, `re.sub` does not


@settings(max_examples=400, deadline=None)
@given(
    _TEXT,
    st.lists(_CALL, min_size=1, max_size=4),
)
def test_the_words_of_a_text_are_searched_once_and_found_as_before(
    text: str, calls: list[tuple[list[str], list[str], list[str]]]
) -> None:
    """Whatever the order of the calls on one text and the form each asks a name in,
    the lines are those the per-call search found (which finds every identifier that
    is one of the names: tests/test_guard_engine.py), or more where a name asked late
    is next to a non-ASCII letter (never more than a search per name finds)."""
    _data, search, _source = prepare(text.encode("utf-8"))
    for names, uncalled, dotted in calls:
        expected = _lines_of_before(search, names, uncalled, dotted, _quiet)
        found = lines_of(search, names, uncalled, dotted, _quiet)
        if search.isascii():
            assert found == expected, (text, calls)
        assert set(expected) <= set(found), (text, calls)
        every = _lines_of_before(search, names, uncalled, dotted, _quiet, tokens=False)
        assert set(found) <= set(every), (text, calls)


def test_a_text_equal_to_the_last_one_is_searched_as_its_own() -> None:
    """The words found are kept for the text object the passes share: another text,
    equal or not, is searched again."""
    first = b"import os\nx = 1\n"
    assert lines_of(first, ["os"]) == [1]
    assert lines_of(b"x = 1\nimport os\n", ["os"]) == [2]
    assert lines_of(bytes(bytearray(first)), ["os"]) == [1]
    assert lines_of(first, [], ["os"]) == [1]
    assert lines_of(first, [], [], ["os"], lambda name, attr: True) == [1]


def test_a_name_first_asked_after_a_text_was_looked_at_is_looked_for() -> None:
    """A text's tokens are looked up once for every name asked in the run so far; a
    name no pass had asked about yet (a file's own binding) costs another look, and
    is found."""
    text = b"import json\nzq_first_asked_here = json\n"
    assert lines_of(text, ["json"]) == [1, 2]
    assert lines_of(text, ["zq_first_asked_here"]) == [2]
    assert lines_of(text, [], ["zq_first_asked_here"]) == [2]


def test_a_name_ending_in_a_non_ascii_letter_is_found() -> None:
    """The search per name was ``name\\b``: after a non-ASCII letter ``\\b`` holds only
    before an ASCII letter or digit, so ``é`` was never found before a space or a dot
    and its uses were not visited (regression: no KG004 for ``é.system(1)``)."""
    assert lines_of("é = 1\nx = é.y\nfé = 2\n".encode(), ["é"]) == [1, 2]
    policy = Policy(rules=(Rule(name="r", modules=("m",), forbid_calls=("os.system",)),))
    for src in ("import os as é\né.system(1)\n", "import os as oé\ndef f():\n    oé.system(1)\n"):
        found = [(v.line, v.code.value) for v in check_source(src, policy, module="m")]
        assert found == [(src.count("\n"), "KG004")], src


_WORD_PIECES = ("o", "s", "os", "_", "9", "é", "\uff4f", ".", " ", "\n", "(", "'", "#")
"""Letters, digits, a non-ASCII letter, a fullwidth one (NFKC folds it) and separators:
names are made of the same pieces (a dot too: no token holds one), so most are found
somewhere, next to anything."""
_NAME = st.lists(st.sampled_from(_WORD_PIECES[:8]), min_size=1, max_size=4).map("".join)


@settings(max_examples=600, deadline=None)
@given(
    st.lists(st.sampled_from(_WORD_PIECES), max_size=40).map("".join),
    st.lists(st.lists(_NAME, max_size=4), min_size=1, max_size=4),
)
def test_the_words_of_a_text_are_its_tokens_or_more_never_fewer(
    text: str, calls: list[list[str]]
) -> None:
    """Whichever names were asked before, a text's words hold every name that is a
    token of it (no miss), and in an ASCII text only those: a name first asked after
    the tokens were looked up is searched for on its own, where a non-ASCII neighbour
    bounds a word (a visit too many, never one too few). The run's names are
    forgotten first (a cache), so later calls ask names the tokens were not looked up
    for."""
    syntax._ASKED[0] = (set(), set())
    _data, search, _source = prepare(text.encode("utf-8"))
    tokens = set(search.translate(_TOKENS).split())
    words = _Text(search)
    for names in calls:
        raws = set(map(str.encode, names))
        found = set(words.words(names))
        assert raws & tokens <= found <= raws, (search, calls)
        if search.isascii():
            assert found == raws & tokens, (search, calls)
        for raw in found - tokens:  # more only where a word of it is next to non-ASCII
            assert words.starts(raw), (search, raw)


def test_a_text_marks_as_looked_up_only_the_names_its_tokens_were_looked_up_for() -> None:
    """The run's names a text's tokens were looked up for are a copy, shared by the
    texts while no name is added: a name another text adds later (asked late there)
    is looked for in an earlier text too, never taken as looked up; and a copy of the
    names before they were forgotten (past 4096) is never another text's."""
    syntax._ASKED[0] = (set(), set())
    first = _Text(b"zt_a zt_b\n")
    assert first.words(["zt_a"]) == [b"zt_a"]
    second = _Text(b"zt_b zt_c\n")
    assert second.words(["zt_a"]) == []
    assert second.checked is first.checked  # nothing added: one copy
    assert second.words(["zt_b"]) == [b"zt_b"]  # late: added to the run's names
    assert first.words(["zt_b"]) == [b"zt_b"]
    third = _Text(b"zt_b\n")
    assert third.words(["zt_a"]) == []
    assert "zt_b" in third.checked
    syntax._ASKED[0] = (set(), set())  # forgotten: as many names again, others
    fourth = _Text(b"zt_r zt_a zt_b\n")
    assert fourth.words(["zt_r", "zt_s"]) == [b"zt_r"]
    assert set(fourth.words(["zt_a", "zt_b"])) == {b"zt_a", b"zt_b"}


def test_a_name_first_asked_late_is_found_by_its_own_search() -> None:
    """A text's tokens are looked up once; a name asked after that is searched for in
    the text: found as a word (as a token is), not inside a longer word, and next to a
    non-ASCII letter too (which a token would hold: a superset)."""
    text = "import json\nzq_late_a = json\nzq_late_bb = 1\nézq_late_c = 2\n".encode()
    words = _Text(text)
    assert words.words(["json"]) == [b"json"]
    late = set(words.words(["zq_late_a", "zq_late_b", "zq_late_c"]))
    assert late == {b"zq_late_a", b"zq_late_c"}
    again = text.replace(b"zq_", b"zr_")  # names no pass has asked yet
    assert lines_of(again, ["json"]) == [1, 2]
    assert lines_of(again, ["zr_late_a", "zr_late_b", "zr_late_c"]) == [2, 4]
    assert lines_of(again, ["zr_late_bb."]) == []  # no token holds a dot, as before


_FOLD_PIECES = (
    "a", "e", "\u0301", "\u0327", "é", "e\u0301", "\n\u0301", "\uff4f", "\xa0", "\u2026",
    "\ufb00", "\xbd", "\u1100", "\u1161", "\u11a8", "\uac00", "\u2028", "\r", "\n", " ",
    "#", '"', "\U0001d400", "\ufffd",
)  # fmt: skip
"""ASCII, letters that compose with a combining mark after them (also after a newline,
where they may not), compatibility characters (fullwidth, no-break space, ellipsis,
ligature, fraction, a mathematical letter), Hangul jamo that compose, line breaks."""
_BAD_BYTES = (b"", b"", b"", b"\xff", b"\xc3", b"\xe2\x80", b"\xed\xa0\x80", b"\x80")
"""Mostly none, else bytes no UTF-8 text holds (a lone lead or continuation byte, a cut
sequence, a surrogate): each is folded as U+FFFD."""


@settings(max_examples=800, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(_FOLD_PIECES), st.text(max_size=3)), max_size=30),
    st.sampled_from(_BAD_BYTES),
    st.integers(0, 30),
)
def test_the_search_text_is_the_file_nfkc_folded_whole(
    pieces: list[str], bad: bytes, at: int
) -> None:
    """The text the prefilters search is the file decoded and NFKC-folded as a whole
    (what the parser does to identifiers), however it is folded: line by line, only
    the lines that are not ASCII, or not at all when it is already folded."""
    import unicodedata

    raw = b"".join([*map(str.encode, pieces[:at]), bad, *map(str.encode, pieces[at:])])
    data, search, _source = prepare(raw)
    folded = unicodedata.normalize("NFKC", data.decode("utf-8", "replace")).encode("utf-8")
    assert search == folded, raw
    assert search.count(b"\n") == data.count(b"\n"), raw


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_FOLD_PIECES),
            st.integers(0, 1100).map("x".__mul__),
            st.integers(0, 600).map("ab\n".__mul__),
        ),
        max_size=12,
    ),
    st.sampled_from(_BAD_BYTES),
    st.integers(0, 12),
)
def test_every_line_of_a_long_text_is_folded_wherever_its_letter_is(
    pieces: list[str], bad: bytes, at: int
) -> None:
    """The lines to fold are found a run of ASCII at a time (`syntax._ASCII_RUN` bytes,
    then a search in the run that is not ASCII): a non-ASCII letter or a bad byte at
    any place of a long text, at a run's first or last byte, on a long line or on one
    after many, is folded as the whole text is."""
    import unicodedata

    raw = b"".join([*map(str.encode, pieces[:at]), bad, *map(str.encode, pieces[at:])])
    edges = [b"x" * offset + letter for offset in (syntax._ASCII_RUN - 1, 2 * syntax._ASCII_RUN - 1)
             for letter in ("\ufb00\n".encode(), b"\xff\n")]  # fmt: skip
    for text in (raw, *(edge + raw for edge in edges)):
        data, search, _source = prepare(text)
        folded = unicodedata.normalize("NFKC", data.decode("utf-8", "replace")).encode("utf-8")
        assert search == folded, text


def test_a_quiet_attribute_is_asked_about_once_per_search() -> None:
    """``quiet`` is asked once per attribute word in a search (a module's ``os.path``
    recurs), and each use is kept or dropped by its own attribute's answer."""
    asked: list[tuple[str, str]] = []

    def quiet(name: str, attr: str) -> bool:
        asked.append((name, attr))
        return attr == "path"

    text = b"zs_os.path\nzs_os.system\nzs_os.path.join\nzs_os . path\nzs_os.pathx\nzs_os\n"
    assert lines_of(text, [], [], ["zs_os"], quiet) == [2, 5, 6]
    assert sorted(asked) == [("zs_os", "path"), ("zs_os", "pathx"), ("zs_os", "system")]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(("re", "r", "e", "_", "9", "é", "ré", " ", ".", "\n")), max_size=30),
    st.sampled_from(("re", "r", "e", "_", "9", "e9", "_r", "é", "ré")),
)
def test_a_words_starts_are_found_whatever_its_length(pieces: list[str], name: str) -> None:
    """A word is found where it starts with no word byte either side (a non-ASCII
    neighbour bounds it), a short name by a pattern, a longer one by a search: both
    as the pattern of `_word_starts` finds them, overlapping places too."""
    data = "".join(pieces).encode()
    raw = name.encode()
    assert _Text(data).starts(raw) == _word_starts(data, raw), (data, raw)
