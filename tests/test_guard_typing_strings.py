"""Strings that `typing` evaluates as code outside annotations (issue 21 item 2):
``List["expr"]`` aliases, hand-written ``__annotations__``, ``ForwardRef("expr")`` and
``TypeVar(bound="expr")`` are checked as code, with the route in the finding; ordinary
forward references are not findings. Run-time proofs: the corpus rows f33-f35, c09."""

from __future__ import annotations

import ast
import bisect
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.guard import Policy, Rule, ViolationCode, check_source

POLICY = Policy(
    rules=(
        Rule(name="r", modules=("m",), forbid_imports=("os",), forbid_calls=("open", "os.system")),
    )
)

_SEAM_PIECES = (
    b"\\", b'"', b"'", b"x", b"n", b"N", b"u", b"0", b"7", b"t", b"_", b"r", b"b", b"f",
    b"F", b"U", b" ", b"\t", b"\f", b"\n", b"#", b"(", b"=", b"op", b"\xc3\xa9",
)  # fmt: skip
"""Bytes every alternative of the seam search starts with, continues with or stops at."""


def _found(src: str) -> list[tuple[int, int, str, str]]:
    return [
        (v.line, v.column, v.code.value, v.message) for v in check_source(src, POLICY, module="m")
    ]


def test_each_route_is_a_reach_naming_it() -> None:
    routes = {
        'from typing import List\nA = List["open(1)"]\n': "an alias List[...]",
        'import typing\nA = typing.Dict[str, "open(1)"]\n': "an alias Dict[...]",
        'A = list["open(1)"]\n': "an alias list[...]",
        "def f(x): pass\nf.__annotations__ = {'x': \"open(1)\"}\n": (
            "hand-written __annotations__, evaluated by typing.get_type_hints"
        ),
        "def f(x): pass\nf.__annotations__['x'] = \"open(1)\"\n": (
            "hand-written __annotations__, evaluated by typing.get_type_hints"
        ),
        'import typing\nR = typing.ForwardRef("open(1)")\n': (
            "typing.ForwardRef(...), evaluated by its _evaluate"
        ),
        'from typing import TypeVar\nT = TypeVar("T", bound="open(1)")\n': (
            "typing.TypeVar(bound=...)"
        ),
    }
    for src, route in routes.items():
        found = _found(src)
        assert len(found) == 1, (src, found)
        line, _col, code, message = found[0]
        assert (line, code) == (src.count("\n"), ViolationCode.FORBIDDEN_CALL.value), src
        assert message == (
            "use of 'open' is forbidden (forbid-calls 'open'), "
            f"in a string typing evaluates as code ({route})"
        )


def test_findings_and_imports_are_placed_on_the_string() -> None:
    """A dynamic import inside the string is reported where the string is."""
    src = "from typing import List\nA = List[int, \"__import__('os').system(1)\"]\n"
    assert [(line, col, code) for line, col, code, _m in _found(src)] == [
        (2, 15, "KG001"),
        (2, 15, "KG004"),
    ]


def test_ordinary_strings_are_not_reaches() -> None:
    """Forward references to names, Literal values, dictionary keys, metadata of
    Annotated, a subscript of a local named like a builtin and an unparsable string
    are not findings; a written annotation's string keeps its plain message."""
    src = (
        "import typing\nfrom typing import Annotated, Dict, List, Literal, Optional\n"
        'class Node:\n    children: List["Node"]\n    parent: "Optional[Node]"\n'
        'Tree = Dict[str, "Node"]\nMode = Literal["open"]\nMeta = Annotated[int, "open(1)"]\n'
        'LATER = typing.ForwardRef("Node")\nd = {}\nd["open(1)"]\n'
        'f = lambda x: x\nf.__annotations__ = {"x": "Node", "y": "open("}\n'
        'list = dict\nlist["open(1)"]\nlist2 = list["not an expression ("]\n'
    )
    assert _found(src) == []
    plain = _found('from typing import List\ny: List["open(1)"]\n')
    assert plain == [(2, 9, "KG004", "use of 'open' is forbidden (forbid-calls 'open')")]


def test_a_string_is_checked_whole_whatever_its_own_line_numbers() -> None:
    """Code parsed from a string numbers its lines from 1: the scan's walk, which skips
    expressions on lines naming nothing of interest, must not skip the string's code
    because line 1 of the file (here a docstring) names nothing."""
    src = '"""A module."""\n\nx = 1\nA = list["open(1)"]\nB = list["""(x,\nopen(2))"""]\n'
    assert [(line, code) for line, _col, code, _m in _found(src)] == [
        (4, ViolationCode.FORBIDDEN_CALL.value),
        (5, ViolationCode.FORBIDDEN_CALL.value),
    ]


def test_a_string_inside_a_visited_statement_but_on_no_found_line_is_checked() -> None:
    """The expression pruning skips sub-expressions on no line naming anything of
    interest; a typing string whose value names ``open`` while its text does not (two
    tokens joined, an escape) is still reached, as the full walk reached it."""
    for src in (
        'import os\nA = (list["op"\n  "en(2)"],\n  os)\n',
        'import os\nfrom typing import TypeVar\nA = (TypeVar("T", bound="op"\n  "en(2)"),\n os)\n',
        'import os\nA = (list["\\x6fpen(2)"],\n  os)\n',
        'import os\ndef f(x=list["op"\n  "en(2)"]):\n  os\n',
        'import os\ndef f():\n  A = (list["op"\n  "en(2)"],\n  os)\n',
    ):
        found = [(code, message) for _line, _col, code, message in _found(src)]
        assert (
            ViolationCode.FORBIDDEN_CALL.value,
            "use of 'open' is forbidden (forbid-calls 'open'), "
            "in a string typing evaluates as code (an alias list[...])"
            if "list" in src
            else "use of 'open' is forbidden (forbid-calls 'open'), "
            "in a string typing evaluates as code (typing.TypeVar(bound=...))",
        ) in found, src


def test_a_string_whose_value_names_what_its_text_does_not_is_checked() -> None:
    """Escapes that make or hide a letter, and string tokens joined on a line, across
    lines, across a comment or a backslash, with a prefix or a longer quote run."""
    for piece in (
        '"x", "\\n\\nopen(2)"',
        '"\\x6fpen(2)"',
        '"\\N{LATIN SMALL LETTER O}pen(2)"',
        '"\\157pen(2)"',
        '"\\u006fpen(2)"',
        '"op\\\nen(2)"',
        '"op" "en(2)"',
        '"op""en(2)"',
        '"op"  # a comment\n  "en(2)"',
        '"op" \\\n "en(2)"',
        '"""op""""en(2)"',
        '"""op""" "en(2)"',
        '"op" r"en(2)"',
        '"op"""\'en(2)\'',
    ):
        src = f"A = list[{piece}]\n"
        found = [code for _line, _col, code, _m in _found(src)]
        assert found == [ViolationCode.FORBIDDEN_CALL.value], src


def test_a_docstring_alone_is_no_seam() -> None:
    from kernel.guard.syntax import seam_lines

    assert seam_lines(b'def f():\n    """Doc.\n\n    More."""\n    return "x", "y"\n') == []
    assert seam_lines(b'x = "a"\ny = ("b"\n  "c")\nz = "\\x41"\n') == [2, 4]
    # A quote before a long run of `#`: the separators never backtrack through it.
    assert seam_lines(b'("a"' + b"#" * 400 + b'\n"x")\n') == [1]


def test_a_join_with_no_identifier_on_one_side_is_no_seam() -> None:
    """No word of the joined value spans such a join: each side's words are the
    text's own (``"Enter a value. " "Please"``), found as any name is."""
    from kernel.guard.syntax import seam_lines

    assert seam_lines(b'A = ("a value. "\n  "Please" \'\')\nB = "x" \' \'\n') == []
    assert seam_lines(b'A = ("a value"\n  "Please")\nB = "x" """y"""\n') == [1, 3]
    assert seam_lines(b'A = ("x" "\\nopen" "")\n') == [1]


def test_joins_overlapping_without_end_are_followed_a_bounded_way() -> None:
    """A comment of quote pairs makes joins that overlap without end: the search
    for an identifier past them stops at a budget and says yes (a visit too many),
    instead of recursing once per pair (a RecursionError lost every finding of the
    run) or taking quadratic time; a file of them is checked as any other."""
    from kernel.guard.syntax import seam_lines

    comment = '" ' * 3000
    src = f'import os\nos.system("x")\nx = (".."  # {comment}\n  "..")\n'
    assert seam_lines(src.encode()) == [3]
    assert [(line, code) for line, _col, code, _m in _found(src)] == [
        (1, ViolationCode.FORBIDDEN_IMPORT.value),
        (2, ViolationCode.FORBIDDEN_CALL.value),
    ]
    assert seam_lines(f"x = 1  # {comment}\n".encode()) == [1]
    # A run of quotes is looked at two quotes either side: no run of 3 is made of it.
    assert seam_lines(b'x = ("' + b'"' * 5000 + b'")\n') == [1]


_PIECE = st.tuples(
    st.sampled_from(["", "r", "u", "R"]),
    st.sampled_from(['"', "'", '"""', "'''"]),
    st.lists(
        st.sampled_from(["o", "p", "en", "b", "R", "_", "9", " ", ".", "\\n", "\\x6f"]), max_size=4
    ),
)
_SEPARATOR = st.sampled_from(["", " ", "\n  ", "  # it's\n  ", " \\\n "])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_PIECE, _SEPARATOR), min_size=1, max_size=5))
def test_every_word_a_joined_value_makes_is_on_a_seam_line(
    pieces: list[tuple[tuple[str, str, list[str]], str]],
) -> None:
    """A word of a string's value that is no word of its text is made by an escape or
    a join: the string spans a seam line."""
    from kernel.guard.syntax import _TOKENS, seam_lines

    text = "".join(f"{pre}{quote}{''.join(body)}{quote}{sep}" for (pre, quote, body), sep in pieces)
    src = f"A = (\n{text}\n)\n".encode()
    try:
        value = ast.parse(src).body[0].value  # type: ignore[attr-defined]
    except SyntaxError:
        return  # `\\x6f` in a raw string next to a plain one, and the like
    assert isinstance(value, ast.Constant)
    assert isinstance(value.value, str)
    words = {w for w in re.findall(r"\w+", value.value) if not w[0].isdigit()}  # names
    made = words - set(src.translate(_TOKENS).decode().split())
    if made:
        seams = seam_lines(src)
        assert any(value.lineno <= line <= (value.end_lineno or 0) for line in seams), src


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(list(_SEAM_PIECES)), max_size=24).map(b"".join))
def test_the_seam_search_finds_every_match_of_its_alternatives(text: bytes) -> None:
    """`_ESCAPE` and `_joins` (at every quote) find each match of the plain alternation
    `_SEAM_ALTERNATIVES`, with the same end, but a docstring's quote pairs (no seam):
    the candidates are a superset."""
    from kernel.guard.syntax import _ESCAPE, _SEAM_ALTERNATIVES, _joins

    found = {m.span() for m in _ESCAPE.finditer(text)}
    found |= set(_joins(text))
    for m in re.finditer(_SEAM_ALTERNATIVES, text):
        assert m.span() in found or _docstring_pair(text, *m.span()), (m.span(), text)


_JOIN_AT_EVERY_QUOTE = re.compile(
    rb"[\"'](?=((?:[ \t\f\n]++|\\\n|#[^\n]*+)*+[rRbBuUfF]{0,2}[\"']))"
)
"""The join search before issue 21's eighth round: one pattern tried at every quote
of either kind, the lookahead in full."""


def _triple(data: bytes, start: int) -> bool:
    """The docstring test before the eighth round: a run of exactly three quotes,
    looking at most two quotes either side."""
    quote = data[start]
    before = 0
    while before < 2 and start - before > 0 and data[start - before - 1] == quote:
        before += 1
    after = 0
    while after < 2 and start + 2 + after < len(data) and data[start + 2 + after] == quote:
        after += 1
    return before + after == 1


_IDENTIFIER = frozenset(
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_" + bytes(range(0x80, 0x100))
)


def _docstring_pair(data: bytes, start: int, end: int) -> bool:
    """Is the join ``data[start:end]`` two quotes of a docstring's run of three?"""
    return end - start == 2 and data[start] == data[start + 1] and _triple(data, start)


def _identifier_next_before(
    data: bytes, spans: list[tuple[int, int]], longest: int, at: int, step: int
) -> bool:
    """`kernel.guard.syntax._identifier_next` as it was at c4b49af, when the joins it
    followed held a docstring's quote pairs: every join starting in the ``longest``
    bytes before a byte reached is a step, a docstring's pairs too."""
    size = len(data)
    pending = [at]
    seen: set[int] = set()
    steps = 0
    while pending:
        at = pending.pop()
        if at in seen:
            continue
        seen.add(at)
        if step < 0:
            while at and data[at - 1] in b"\"'" and steps <= 32:
                at -= 1
                steps += 1
            byte = at - 1
        else:
            while at < size and data[at] in b"\"'" and steps <= 32:
                at += 1
                steps += 1
            byte = at
        if steps > 32:
            return True
        if not 0 <= byte < size:
            continue
        if data[byte] in _IDENTIFIER:
            return True
        # The joins holding it start at most `longest` bytes before it.
        k = bisect.bisect_right(spans, (byte, size))
        while k and byte - spans[k - 1][0] < longest:
            k -= 1
            steps += 1
            if steps > 32:
                return True  # a long join with many inside it: each would be looked at
            if spans[k][1] > byte:
                pending.append(spans[k][0] if step < 0 else spans[k][1])
    return False


def _seam_lines_before(data: bytes) -> list[int]:
    """`seam_lines` before the eighth round, step by step (every join, a docstring's
    pairs too, followed by `_identifier_next_before`, no shortcut)."""
    from kernel.guard.syntax import _ESCAPE, _line_numbers

    positions = [m.start() for m in _ESCAPE.finditer(data)]
    spans = [(m.start(), m.end(1)) for m in _JOIN_AT_EVERY_QUOTE.finditer(data)]
    longest = max((e - s for s, e in spans), default=0)
    for start, end in spans:
        if (
            not _docstring_pair(data, start, end)
            and _identifier_next_before(data, spans, longest, start, -1)
            and _identifier_next_before(data, spans, longest, end, 1)
        ):
            positions.append(start)
    positions.sort()
    return _line_numbers(positions, data)


_SEAM_TEXT_PIECES = (
    b'"', b"'", b'"""', b"'''", b" ", b"\t", b"\f", b"\n", b"\\\n", b"# c'\"\n", b"#",
    b"r", b"b", b"u", b"f", b"R", b"B", b"U", b"F", b"o", b"x", b"_", b"9", b"\xc3\xa9",
    b"\\", b"\\x", b"(", b")", b",", b'"" ', b"'' ", b'"o" ', b"# '' '' ''\n",
)  # fmt: skip
"""Quotes, separators (a backslash-newline, comments), prefixes and other letters;
empty strings and comments of them make joins overlap, up to the budget."""


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_SEAM_TEXT_PIECES), max_size=120).map(b"".join))
def test_the_seam_search_finds_the_lines_it_found_step_by_step(text: bytes) -> None:
    """The seam search's shortcuts (a pattern per quote byte, a join's first byte
    tested first, a docstring's quote pairs left out by the pattern, an identifier
    byte next to a join answering at once) find the same joins and the same lines as
    the search they replace, budget and all."""
    from kernel.guard.syntax import _joins, seam_lines

    assert _joins(text) == [
        (m.start(), m.end(1))
        for m in _JOIN_AT_EVERY_QUOTE.finditer(text)
        if not _docstring_pair(text, m.start(), m.end(1))
    ]
    assert seam_lines(text) == _seam_lines_before(text), text


_NEAR_DOCSTRINGS = (
    b'"""o"""', b'"""', b"'''o'''", b'""', b"''", b'"" ', b'"o" ', b"o", b" ", b"\n", b"(",
    b'"  # ' + b"." * 60 + b'\n  "', b"'  # " + b'"""' * 12 + b"\n  '", b'"' * 4, b"\\\n",
)  # fmt: skip
"""Docstrings' runs of three quotes within a long join's length of other joins (a
comment makes one): the follower of joins counts each of their quote pairs it passes
as a step, and the budget can be passed by them alone."""


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_NEAR_DOCSTRINGS), max_size=60).map(b"".join))
def test_a_docstrings_quote_pairs_count_as_the_joins_they_were(text: bytes) -> None:
    """A docstring's quote pairs, left out of the joins, count toward the budget of
    the joins' follower as they did when they were joins: the same seam lines."""
    from kernel.guard.syntax import seam_lines

    assert seam_lines(text) == _seam_lines_before(text), text


def test_the_seam_search_finds_the_lines_it_found_on_long_runs() -> None:
    """The same on runs of quotes and joins long enough to reach the budget."""
    from kernel.guard.syntax import seam_lines

    for text in (
        b'x = ("' + b'"' * 5000 + b'")\n',
        b"x = 1  # " + b'" ' * 3000 + b"\n",
        b'x = ("o"  # ' + b"'' " * 300 + b'\n  "o")\n',
        b'x = ("o" ' + b'"" ' * 100 + b'"o")\n',
        b'x = ("o" ' + b"''' " * 40 + b'"o" """a""" """""" r"" ' + b'"' * 7 + b")\n",
        b"x = ('o' " + b"'" * 4 + b' "o" ' + b'"' * 3 + b"o" + b"'" * 6 + b")\n",
        # A docstring's pairs in a long join's length before a join: with four
        # docstrings the budget is not passed, with eight their pairs pass it.
        b"(" + b'"""o"""\n' * 4 + b'"  # ' + b"." * 200 + b'\n  "")\n',
        b"(" + b'"""o"""\n' * 8 + b'"  # ' + b"." * 200 + b'\n  "")\n',
    ):
        assert seam_lines(text) == _seam_lines_before(text), text


def test_a_join_with_no_join_nor_identifier_before_it_answers_as_the_follower() -> None:
    """A join whose byte before is no quote and no identifier byte, with no join in
    the longest join's length before that byte, answers no at once where a docstring's
    pairs there cannot pass the budget (joins up to `_SHORT_JOINS` long): the same
    lines as the follower's, with runs of three quotes packed before such a join and
    the longest join's length on both sides of the bound."""
    from kernel.guard.syntax import _SHORT_JOINS, _joins, seam_lines

    for length in range(_SHORT_JOINS - 8, _SHORT_JOINS + 20):
        comment = b'x = ("o"  # ' + b"." * (length - 8) + b'\n "o")\n'
        assert max(e - s for s, e in _joins(comment)) == length, length
        for runs in (b'"""x', b"'''x", b"\"\"\"x'''x", b"\"\"\"'''x"):
            for cut in range(4):
                text = comment + b"(" + (runs * 40)[cut:] + b' "")\n'
                assert seam_lines(text) == _seam_lines_before(text), text


def test_a_join_after_an_identifier_and_before_none_answers_as_the_follower() -> None:
    """A join with an identifier byte before it and none after it (no quote either),
    no other join in the longest join's length before that byte, answers no at once
    where a docstring's pairs there cannot pass the budget (joins up to `_SHORT_JOINS`
    - 2 long): the same lines as the follower's, with runs of three quotes packed
    before the join and the longest join's length on both sides of the bound; at the
    text's end, before a quote or an identifier byte, or with a join next to it, the
    follower answers."""
    from kernel.guard.syntax import _SHORT_JOINS, _joins, seam_lines

    for length in range(_SHORT_JOINS - 12, _SHORT_JOINS + 24):
        comment = b'x = ("o"  # ' + b"." * (length - 8) + b'\n "o")\n'
        assert max(e - s for s, e in _joins(comment)) == length, length
        for runs in (b'"""x', b"'''x", b"\"\"\"x'''x", b"\"\"\"'''x", b"'''"):
            for cut in range(4):
                for join, after in (
                    (b'o" "', b"%"),
                    (b'o"\n  "', b")"),
                    (b"o' '", b""),
                    (b'o" "', b"'"),
                    (b'o" "', b"p"),
                    (b'o" ""', b" "),
                ):
                    text = comment + b"(" + (runs * 40)[cut:] + join + after
                    assert seam_lines(text) == _seam_lines_before(text), text


def test_strings_are_checked_again_in_a_later_round() -> None:
    """A re-binding of a module (`x = os`) starts another round of the scan, which
    drops the first round's findings: a typing string must be parsed again."""
    for src in (
        'import os\nx = os\ny: "open(1)" = 1\n',
        'import os\nx = os\nA = list["open(1)"]\n',
    ):
        assert ViolationCode.FORBIDDEN_CALL.value in [c for _l, _c, c, _m in _found(src)], src


def test_every_string_typing_evaluates_is_checked_however_many_there_are() -> None:
    """The nodes of a string parsed as code are known by their ids while the scan runs:
    they are kept, so a later string's nodes never take a freed id and pass for seen
    (3 of 30 ``globals()`` aliases and 7 of 30 nested strings were found before)."""
    calls = ["globals()", "locals()", "vars()"]
    src = "from typing import List\n" + "".join(
        f'A{i} = List["{calls[i % 3]}"]\n' for i in range(30)
    )
    rule = Rule(name="r", modules=("m",), forbid_reflection=True)
    found = check_source(src, Policy(rules=(rule,)), module="m")
    assert sorted(v.line for v in found if v.code is ViolationCode.REFLECTIVE_REACH) == list(
        range(2, 32)
    )
    nested = "from typing import List\n" + "".join(
        f"A{i} = List[\"List['{('open', 'eval')[i % 2]}(1)']\"]\n" for i in range(30)
    )
    rule = Rule(name="r", modules=("m",), forbid_calls=("open", "eval"))
    found = check_source(nested, Policy(rules=(rule,)), module="m")
    assert sorted(v.line for v in found if v.code is ViolationCode.FORBIDDEN_CALL) == list(
        range(2, 32)
    )
