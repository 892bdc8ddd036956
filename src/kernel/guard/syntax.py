"""Syntax helpers of the guard's per-file scan (`kernel.guard.scan`): reading a file as
Python does, finding the lines that can matter, and the shapes of statements, scopes
and annotations the scan asks about. Pure functions of their arguments.

Rules this module enforces:

- a file is decoded exactly as Python decodes it (`prepare`: a BOM, a coding cookie on
  line 1, or on line 2 only after a blank or comment-only line 1), and the text the
  prefilters search is NFKC-folded as the parser folds identifiers;
- a name is found on a line as a whole word (`lines_of`): a superset of the lines
  where it is an identifier, never fewer;
- a string's value names what its text does not only through an escape or a join
  of string tokens with an identifier character on both sides (`seam_lines`): every
  escape's line and every such join's line is found, a superset;
- the strings of an annotation that typing evaluates (`forward_refs`) leave out
  ``Literal[...]`` arguments and ``Annotated`` metadata, under any import name;
- every syntax tree kernel builds is built one at a time (`parse_module`,
  `parse_expression`): CPython 3.11 keeps the tree builder's recursion count in
  state shared by all threads, so two threads building trees at once can fail with
  "AST constructor recursion depth mismatch" (CPython gh-106905), which a verifier
  screening several candidates in threads met.
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import threading
import tokenize
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final

__all__ = [
    "COMPREHENSIONS",
    "FunctionInfo",
    "Scope",
    "WORD",
    "child_bodies",
    "eager_nodes",
    "forward_refs",
    "is_text",
    "lines_of",
    "seam_lines",
    "literal_str",
    "module_deletes",
    "parse_expression",
    "parse_module",
    "prepare",
    "scope_name",
    "shallow_walk",
    "shallow_walk_body",
    "unconditional_names",
]

_FUNCS: Final = (ast.FunctionDef, ast.AsyncFunctionDef)


_BUILDING: Final = threading.Lock()


def parse_module(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse` of a module, one tree at a time in the process (see the module's
    rules); it raises what `ast.parse` raises."""
    with _BUILDING:
        return ast.parse(source, filename=filename)


def parse_expression(source: str) -> ast.Expression:
    """`ast.parse` of one expression (``mode="eval"``), one tree at a time."""
    with _BUILDING:
        return ast.parse(source, mode="eval")


def literal_str(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def is_text(node: ast.expr) -> bool:
    """A string or f-string literal (text a library may evaluate as code)."""
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


WORD: Final = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_TOKENS: Final = bytes(c if c >= 0x80 or c in WORD else 0x20 for c in range(256))
"""Every byte that cannot be part of an identifier, as a space: outside strings and
comments a non-ASCII character can only be part of one (else the file does not
parse), so each identifier of the file is one token of the translated text."""
_ASKED: list[tuple[set[bytes], set[str]]] = [(set(), set())]
"""Every name `lines_of` was asked about in this run, as UTF-8 and as itself (the
UTF-8 added first): a text's tokens are looked up in them once, for all of them (the
passes of one file, and the next files, ask the same few dozen names; a name not yet
asked is searched for in the text on its own). Forgotten past 4096 by a new pair,
so a scan holding the old pair keeps both sides in step."""
_LOOKED: list[tuple[set[str], frozenset[str]]] = [(set(), frozenset())]
"""The last copy of `_ASKED`'s names (`_looked`), with the set it copies."""


def _looked(asked: set[str]) -> frozenset[str]:
    """A copy of ``asked`` (a set of `_ASKED`, which only grows), shared by the texts
    while no name is added to it (after the first files, few are): a copy per text,
    made and freed, cost 1.5 ms over Django. A text marks as looked up only the names
    asked before its look."""
    owner, copy = _LOOKED[0]
    if owner is not asked or len(copy) != len(asked):
        copy = frozenset(asked)
        _LOOKED[0] = (asked, copy)
    return copy


class _Text:
    """One search text and the words found in it, kept while the passes of its file's
    scan ask about it (the same few names, in each pass and round)."""

    __slots__ = ("checked", "data", "found", "present")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.checked: frozenset[str] = frozenset()
        self.present: dict[str, bytes] = {}
        self.found: dict[bytes, list[int]] = {}

    def words(self, names: Iterable[str]) -> list[bytes]:
        """The UTF-8 of those of ``names`` that are tokens of the text, or may be: a
        name asked after the text's tokens were looked up is a word of it (`starts`),
        a superset (a non-ASCII neighbour bounds it too), equal in an ASCII text.

        Names are compared as they are given, encoded only when first asked: a pass
        asks the same few dozen each round, most of them known absent."""
        wanted = names if isinstance(names, (set, frozenset)) else set(names)
        if not self.checked.issuperset(wanted):
            self._look(wanted - self.checked)
        present = self.present
        return [present[name] for name in wanted & present.keys()] if present else []

    def _look(self, unchecked: set[str] | frozenset[str]) -> None:
        """Find which of ``unchecked`` are words of the text: the first time, every
        name asked in the run so far, by the text's tokens; later, each on its own."""
        raws, asked = _ASKED[0]
        if len(asked) > 4096:
            raws, asked = _ASKED[0] = set(), set()
        if self.checked:
            # A few names a pass asks late (a file's own bindings): a substring
            # search each, in C, not another look at every token of the text. A
            # name holding a byte no token holds is no token, as before.
            for name in unchecked:
                raw = name.encode()
                if raw and b" " not in raw.translate(_TOKENS) and self.starts(raw):
                    self.present[name] = raw
                raws.add(raw)
                asked.add(name)
            self.checked = self.checked.union(unchecked)
            return
        for name in unchecked - asked:
            raws.add(name.encode())
            asked.add(name)
        # What is marked checked is what is looked up: a copy of the names first
        # (`_looked`), as another thread's scan may add to them meanwhile (each with
        # its UTF-8 first). Each token is hashed once (its hash is kept) and looked up
        # in a small set; a set of all the file's tokens cost a third more.
        looked = _looked(asked)
        for raw in raws.intersection(self.data.translate(_TOKENS).split()):
            self.present[raw.decode()] = raw
        self.checked = looked

    def starts(self, raw: bytes) -> list[int]:
        """Where the word ``raw`` starts in the text, in order: not after a `WORD`
        byte, not before one (a non-ASCII neighbour bounds it too, a superset)."""
        got = self.found.get(raw)
        if got is None and len(raw) <= 2 and raw.replace(b"_", b"x").isalnum():
            # A short name is inside many words (``re``: 178 of its 8,102 places in
            # Django are words): each place tested in C, by a pattern made once per
            # name in the run (a word of word bytes cannot start inside another).
            finder = _SHORT_WORDS.get(raw)
            if finder is None:
                word = re.escape(raw)
                finder = _SHORT_WORDS[raw] = re.compile(
                    word + rb"(?<![0-9A-Za-z_]" + word + rb")(?![0-9A-Za-z_])"
                ).finditer
            got = self.found[raw] = [m.start() for m in finder(self.data)]
        elif got is None:
            got = []  # kept once complete: a scan in another thread may ask too
            data, size, end = self.data, len(self.data), len(raw)
            # A substring search in C; a pattern per name (``name\b``) cost its
            # compilation in every process, and its ``\b`` never held after a
            # non-ASCII letter before a space (``é.system()`` was missed).
            at = data.find(raw)
            while at >= 0:
                if (not at or data[at - 1] not in WORD) and (
                    at + end == size or data[at + end] not in WORD
                ):
                    got.append(at)
                at = data.find(raw, at + 1)
            self.found[raw] = got
        return got


_SHORT_WORDS: dict[bytes, Callable[[bytes], Iterator[re.Match[bytes]]]] = {}
"""The word search of each short name `_Text.starts` was asked about in this run."""
_TEXTS: list[_Text] = []


def _text(data: bytes) -> _Text:
    """The `_Text` of ``data``, made once per text (the last one is kept)."""
    if _TEXTS and _TEXTS[0].data is data:
        return _TEXTS[0]
    text = _Text(data)
    _TEXTS[:] = [text]
    return text


_CALL_AFTER: Final = re.compile(rb"[ \t]*\(")


def lines_of(
    data: bytes,
    names: Iterable[str],
    uncalled: Iterable[str] = (),
    dotted: Iterable[str] = (),
    quiet: Callable[[str, str], bool] | None = None,
) -> list[int]:
    """Sorted 1-based numbers of the lines where one of ``names`` occurs as a word, one
    of ``uncalled`` as a word not directly followed by ``(`` (spaces and tabs between:
    any other spelling of a call, ``getattr\\`` newline ``(`` or ``(getattr)(``, is
    found), or one of ``dotted`` not directly followed by ``.attr`` where
    ``quiet(name, attr)`` (the whole attribute word; a newline or comment before it
    is found; ``quiet`` answers the same for the same words during the call).

    A superset is fine (a string or comment only costs a visit); a miss is not: any
    identifier that is one of ``names`` is found.
    """
    positions: list[int] = []
    # Most names are absent from a file: which are present is known from its tokens,
    # in C; the words present are searched once per text, whichever pass asks.
    text = _text(data)
    for raw in text.words(names):
        positions += text.starts(raw)
    call = _CALL_AFTER.match
    for raw in text.words(uncalled) if uncalled else ():
        positions += [at for at in text.starts(raw) if not call(data, at + len(raw))]
    for raw in text.words(dotted) if dotted else ():
        positions += _loud(data, text.starts(raw), raw, quiet)
    positions.sort()
    return _line_numbers(positions, data)


_ATTR_AFTER: Final = re.compile(rb"[ \t]*\.[ \t]*([A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_\x80-\xff])")


def _loud(
    data: bytes, starts: list[int], raw: bytes, quiet: Callable[[str, str], bool] | None
) -> list[int]:
    """Which of ``starts`` of the word ``raw`` are not followed by an attribute
    ``quiet`` accepts (asked once per attribute: a module's ``os.path`` recurs)."""
    out: list[int] = []
    name = raw.decode()
    said: dict[bytes, bool] = {}
    for start in starts:
        attr = _ATTR_AFTER.match(data, start + len(raw))
        if attr is None or quiet is None:
            out.append(start)
            continue
        word = attr.group(1)
        hushed = said.get(word)
        if hushed is None:
            hushed = said[word] = quiet(name, word.decode())
        if not hushed:
            out.append(start)
    return out


def _line_numbers(positions: list[int], data: bytes) -> list[int]:
    """The distinct 1-based line numbers of sorted byte ``positions`` in ``data``."""
    out: list[int] = []
    line, pos = 1, 0
    for start in positions:
        line += data.count(b"\n", pos, start)
        pos = start
        if not out or out[-1] != line:
            out.append(line)
    return out


_SEAM_ALTERNATIVES: Final = (
    rb"\\[xuUN0-7\n]|\\[ntrabfv][A-Za-z_]"
    rb"|[\"'](?:[ \t\f\n]++|\\\n|#[^\n]*+)*+[rRbBuUfF]{0,2}[\"']"
)
"""Where a string's value can name what its text does not: an escape that makes a
letter (``\\x6f``, ``\\N{...}``, octal, a backslash-newline), an escape whose letter
hides the word boundary of the name after it (``"\\nopen(1)"``), and two string
tokens joined (``"op" "en(1)"``, also across lines and comments); a superset. The
separators are taken possessively: a quote before a long run of ``#`` would otherwise
backtrack through every way to split the run into comments."""
_ESCAPE: Final = re.compile(rb"\\(?:[xuUN0-7\n]|[ntrabfv][A-Za-z_])")
"""The escapes of `_SEAM_ALTERNATIVES`, every one (a literal backslash first: `re`
skips ahead to the next one)."""
_JOIN_START: Final = rb"(?=[ \t\f\n\\#rRbBuUfF\"'])"
_JOIN_REST: Final = rb"(?=([\"']|(?:[ \t\f\n]++|\\\n|#[^\n]*+)*+[rRbBuUfF]{0,2}[\"']))"


def _join_at(quote: bytes) -> re.Pattern[bytes]:
    """The joins at ``quote`` but a docstring's: the quote and the next one both in a
    run of exactly three (seen from just past the quote: the run's second and third
    quotes after it, or its first before it and its third after)."""
    q = re.escape(quote)
    triple = rb"(?!(?<!%s)(?<=%s)%s(?!%s)|(?<!%s)%s(?!%s))" % (q * 3, q * 2, q, q, q * 2, q * 2, q)
    return re.compile(q + _JOIN_START + _JOIN_REST + triple)


_JOINS: Final = (_join_at(b'"'), _join_at(b"'"))
"""The joins of `_SEAM_ALTERNATIVES` at every quote, overlapping (group 1 ends where
the match would), but the two quote pairs of each docstring's run of three quotes:
a match of the plain alternation can take the closing quote of a string made of
prefix letters (``("b"\\n  "c")``: ``"b"`` is one), and the join after it is then
found at no quote of its own.

One pattern per quote byte: a literal first byte lets `re` skip to the next quote at
the speed of a byte compare (a class of two quotes is tested byte by byte, and was
two thirds of the seam search). The first lookahead only fails fast where no join
can start (most quotes are followed by ``)``, ``,``, ``:`` or a letter), and a quote
right after the quote ends the join as the separators' empty match would. A
docstring's pairs were most of a file's joins, each made a match and a span only to
be dropped in Python (`seam_lines`): the pattern drops them, last (the lookarounds
are atomic, so their order changes no match): most quotes that pass the first byte
fail the rest (a string that ends a line), a docstring's pass it at once."""
_QUOTE_BYTES: Final = frozenset(b"\"'")
_IDENTIFIER_BYTES: Final = WORD | frozenset(range(0x80, 0x100))


def _joins(data: bytes) -> list[tuple[int, int]]:
    """The spans of `_JOINS`' matches in ``data`` (the quote, the end of group 1), in
    order of their start: every join but a docstring's quote pairs."""
    # Each search starts at its quote's first place (`bytes.find`, at memchr speed,
    # where `re` tests byte by byte); its lookbehinds still see the text before it.
    first = data.find(b'"')
    spans = [(m.start(), m.end(1)) for m in _JOINS[0].finditer(data, first)] if first >= 0 else []
    first = data.find(b"'")
    if first >= 0:
        more = [(m.start(), m.end(1)) for m in _JOINS[1].finditer(data, first)]
        if more:
            spans += more
            spans.sort()
    return spans


def seam_lines(data: bytes) -> list[int]:
    """Sorted 1-based numbers of the lines where a string's value may name something
    its text does not: code parsed from a string (what `typing` evaluates) is reached
    only through a visited line, so such a string's line is one.

    Every escape of `_ESCAPE` counts. A join of `_JOINS` counts only when the joined
    value can have an identifier character on both sides of it (`_identifier_next`):
    else no word of the value spans it, and a word on one side of it is a word of the
    text, found as any name is. An escape that makes a letter next to a join is a
    seam of its own, in the same string.

    A docstring's ``\"\"\"`` (a run of exactly three quotes) is no seam: it opens or closes
    one string, and a string joined to it is joined across a separator or a longer run.
    """
    first = data.find(b"\\")  # most files have no backslash at all
    positions = [m.start() for m in _ESCAPE.finditer(data, first)] if first >= 0 else []
    spans = _joins(data)  # a docstring's quote pairs are left out by the patterns
    longest = -1  # computed when a join's neighbour is no identifier byte (few are)
    size = len(data)
    ident = _IDENTIFIER_BYTES
    for index, (start, end) in enumerate(spans):
        if start and data[start - 1] in ident:
            # The side before answers yes at once, as `_identifier_next` would on its
            # first step; so does the side after on an identifier byte.
            if end < size and data[end] in ident:
                positions.append(start)
                continue
            if longest < 0:
                longest = max(e - s for s, e in spans)
            if _no_identifier_after(data, spans, longest, index) or not _identifier_next(
                data, spans, longest, end, 1
            ):
                continue
            positions.append(start)
            continue
        if longest < 0:
            # A docstring's pairs, left out, are two bytes long: no join is shorter.
            longest = max(e - s for s, e in spans)
        # Most of the rest answer no at once, as `_identifier_next` would: the byte
        # before the join is no quote and no identifier byte, and no join starts in
        # the `longest` bytes before it (the one before this join is the last that
        # may), nor can a docstring's pairs there alone pass the budget.
        if (
            start
            and longest <= _SHORT_JOINS
            and data[start - 1] not in _QUOTE_BYTES
            and (not index or start - 1 - spans[index - 1][0] >= longest)
        ):
            continue
        if _identifier_next(data, spans, longest, start, -1) and _identifier_next(
            data, spans, longest, end, 1
        ):
            positions.append(start)
    positions.sort()
    return _line_numbers(positions, data)


def _no_identifier_after(
    data: bytes, spans: list[tuple[int, int]], longest: int, index: int
) -> bool:
    """Does `_identifier_next` surely answer no after join ``index`` (``step`` 1)? Yes
    at the text's end, and where the byte after the join is no quote and no identifier
    byte, no other join starts in the `longest` bytes up to it (this one, the only
    one there, ends at it: not followed, one step), and joins are at most
    `_SHORT_JOINS` - 2 long: a docstring's quote pairs in the ``longest - 1`` bytes
    before that byte are then at most 31 (`_SHORT_JOINS`' count with 47 bytes:
    1 + 2 * ((47 - 2) // 3) or 2 * (47 // 3)), not past the budget left.

    Most joins past an identifier byte end before ``%``, a space or a bracket (the
    pieces of a message split over lines): this answers them without the follower."""
    end = spans[index][1]
    if end >= len(data):
        return True
    return (
        longest <= _SHORT_JOINS - 2
        and data[end] not in _IDENTIFIER_BYTES
        and data[end] not in _QUOTE_BYTES
        and (index + 1 == len(spans) or spans[index + 1][0] > end)
        and (not index or end - spans[index - 1][0] >= longest)
    )


_FOLLOW_BUDGET: Final = 32
"""Steps `_identifier_next` takes (quotes skipped, joins looked at) before it answers
yes: a superset only costs a visit, and joins can overlap without end (a comment of
quote pairs), which an unbounded search followed in quadratic time and by recursion."""


_SHORT_JOINS: Final = 50
"""The longest join length up to which a docstring's quote pairs in the ``longest - 1``
bytes before a byte can never pass `_FOLLOW_BUDGET` alone: at most 32 start there
(runs of three quotes of alternating kinds, the first cut, two pairs every three
bytes: 1 + 2 * ((49 - 2) // 3) = 31 or 2 * (49 // 3) = 32; with 50 bytes, 33)."""


def _identifier_next(
    data: bytes, spans: list[tuple[int, int]], longest: int, at: int, step: int
) -> bool:
    """Is there an identifier byte next to offset ``at``, before it (``step`` -1) or
    after it (1), past quotes, and past the joins that hold the byte reached (an empty
    string between two joins: ``"o" "" "o"``)? A superset: every join that holds it is
    followed, and past `_FOLLOW_BUDGET` steps the answer is yes. ``spans`` are the
    joins in order, none longer than ``longest``. A docstring's quote pairs, left out
    of them, hold no byte reached (they hold quotes) but are steps as they were when
    they were joins (`_docstring_pairs`): counted only where the answer would be no
    without them, as the steps only ever turn a no into a yes."""
    size = len(data)
    pending = [at]
    seen: set[int] = set()
    windows: list[int] = []
    steps = 0
    while pending:
        at = pending.pop()
        if at in seen:
            continue
        seen.add(at)
        if step < 0:
            while at and data[at - 1] in _QUOTE_BYTES and steps <= _FOLLOW_BUDGET:
                at -= 1
                steps += 1
            byte = at - 1
        else:
            while at < size and data[at] in _QUOTE_BYTES and steps <= _FOLLOW_BUDGET:
                at += 1
                steps += 1
            byte = at
        if steps > _FOLLOW_BUDGET:
            return True
        if not 0 <= byte < size:
            continue
        if data[byte] in _IDENTIFIER_BYTES:
            return True
        windows.append(byte)
        # The joins holding it start at most `longest` bytes before it.
        k = bisect.bisect_right(spans, (byte, size))
        while k and byte - spans[k - 1][0] < longest:
            k -= 1
            steps += 1
            if steps > _FOLLOW_BUDGET:
                return True  # a long join with many inside it: each would be looked at
            if spans[k][1] > byte:
                pending.append(spans[k][0] if step < 0 else spans[k][1])
    # Every join was followed and none reached an identifier byte: the answer is no
    # unless the docstring pairs the windows also held pass the budget.
    return _docstring_pairs(data, windows, longest, _FOLLOW_BUDGET - steps) > _FOLLOW_BUDGET - steps


def _docstring_pairs(data: bytes, windows: list[int], longest: int, limit: int) -> int:
    """How many quote pairs of a docstring's run of three quotes start in the
    ``longest`` bytes before each byte of ``windows`` (no quote), counted up to one
    past ``limit``. Each other pair there is a join (a step already counted, fewer
    than `_FOLLOW_BUDGET`), so few pairs are looked at whatever the text."""
    count = 0
    size = len(data)
    for hi in windows:
        lo = max(0, hi - longest + 1)
        for pair in (b'""', b"''"):
            at = data.find(pair, lo, hi)
            while at >= 0 and count <= limit:
                quote = data[at]
                before = at > 0 and data[at - 1] == quote
                if before != (at + 2 < size and data[at + 2] == quote) and (
                    (at < 2 or data[at - 2] != quote)
                    if before
                    else (at + 3 >= size or data[at + 3] != quote)
                ):
                    count += 1
                at = data.find(pair, at + 1, hi)
    return count


COMPREHENSIONS: Final = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPE_NAMES: Final = {
    ast.Lambda: "lambda",
    ast.ListComp: "listcomp",
    ast.SetComp: "setcomp",
    ast.DictComp: "dictcomp",
    ast.GeneratorExp: "genexpr",
}


def scope_name(node: ast.AST) -> str:
    """The name `symtable` gives the scope ``node`` opens."""
    if isinstance(node, (*_FUNCS, ast.ClassDef)):
        return node.name
    return _SCOPE_NAMES.get(type(node), "")


class FunctionInfo:
    __slots__ = ("params",)

    def __init__(
        self,
        fn: ast.FunctionDef
        | ast.AsyncFunctionDef
        | ast.Lambda
        | ast.ListComp
        | ast.SetComp
        | ast.DictComp
        | ast.GeneratorExp,
    ) -> None:
        if not isinstance(fn, (*_FUNCS, ast.Lambda)):
            self.params: frozenset[str] = frozenset()
            return
        a = fn.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
        if a.vararg:
            params.append(a.vararg)
        if a.kwarg:
            params.append(a.kwarg)
        self.params = frozenset(p.arg for p in params)


Scope = tuple[tuple[ast.AST, FunctionInfo], ...]


def forward_refs(node: ast.expr, bindings: dict[str, str]) -> Iterator[ast.Constant]:
    """String constants of an annotation that `typing` evaluates as forward references
    (not the arguments of ``Literal[...]`` nor ``Annotated`` metadata, also when
    imported under another name: ``from typing import Literal as L``)."""
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, ast.Constant) and isinstance(cur.value, str):
            yield cur
        elif isinstance(cur, ast.Subscript):
            head = cur.value
            name = head.attr if isinstance(head, ast.Attribute) else getattr(head, "id", "")
            if isinstance(head, ast.Name):
                name = bindings.get(name, name).rsplit(".", 1)[-1]
            if name == "Literal":
                continue
            stack.append(head)
            items = cur.slice.elts if isinstance(cur.slice, ast.Tuple) else [cur.slice]
            stack.extend(items[:1] if name == "Annotated" else items)
        else:
            stack.extend(c for c in ast.iter_child_nodes(cur) if isinstance(c, ast.expr))


_DEFINITIONS: Final = (*_FUNCS, ast.ClassDef)


def unconditional_names(stmt: ast.stmt) -> list[str]:
    """Names a statement of a module or class body binds whenever it runs: definitions,
    assignments (not a bare annotation), imports."""
    names: list[str] = []
    if isinstance(stmt, _DEFINITIONS):
        names.append(stmt.name)
    elif isinstance(stmt, ast.Assign):
        for t in stmt.targets:
            if isinstance(t, ast.Name):  # the common case, without a walk
                names.append(t.id)
            else:
                names.extend(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        if isinstance(stmt.target, ast.Name):
            names.append(stmt.target.id)
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        for alias in stmt.names:
            if alias.name != "*":
                names.append(alias.asname or alias.name.split(".", 1)[0])
    return names


def module_deletes(body: Sequence[ast.stmt], globals_: frozenset[str], *, module: bool) -> set[str]:
    """Names a ``del`` removes from the module namespace in ``body``: at module level
    (``module``) every deleted name, inside a function only the names it declares
    ``global`` (``globals_``); class bodies delete from their own namespace."""
    out: set[str] = set()
    for stmt in body:
        for node in shallow_walk(stmt):
            if isinstance(node, ast.Delete):
                for t in node.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name) and (module or n.id in globals_):
                            out.add(n.id)
            elif isinstance(node, _FUNCS):
                declared = frozenset(
                    name
                    for sub in shallow_walk_body(node.body)
                    if isinstance(sub, ast.Global)
                    for name in sub.names
                )
                if declared:
                    out |= module_deletes(node.body, declared, module=False)
            elif isinstance(node, ast.ClassDef):
                out |= module_deletes(node.body, frozenset(), module=False)
    return out


def shallow_walk(stmt: ast.stmt) -> Iterator[ast.AST]:
    """``stmt`` and what it holds, not descending into function, lambda or class
    bodies (a definition itself is yielded)."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (*_FUNCS, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def shallow_walk_body(body: Sequence[ast.stmt]) -> Iterator[ast.AST]:
    for stmt in body:
        yield from shallow_walk(stmt)


def eager_nodes(stmt: ast.stmt) -> Iterator[ast.AST]:
    """What runs when ``stmt`` runs: a definition's decorators, defaults and (for a
    class) bases and body, never a function's body."""
    for node in shallow_walk(stmt):
        yield node
        if isinstance(node, (*_FUNCS, ast.ClassDef)):
            eager: list[ast.AST] = [*node.decorator_list]
            if isinstance(node, ast.ClassDef):
                eager += [*node.bases, *(k.value for k in node.keywords), *node.body]
            else:
                eager += [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
            for sub in eager:
                if isinstance(sub, ast.stmt):
                    yield from eager_nodes(sub)
                else:
                    yield from ast.walk(sub)  # a lambda here is not called here either


def child_bodies(stmt: ast.stmt) -> Iterable[Sequence[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        value = getattr(stmt, field, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield value
    for handler in getattr(stmt, "handlers", ()):
        yield handler.body
    for case in getattr(stmt, "cases", ()):
        yield case.body


def prepare(data: bytes) -> tuple[bytes, bytes, str | bytes]:
    """UTF-8 bytes with ``\\n`` newlines (for columns), the same text NFKC-folded (for
    the prefilters) and the source to hand to `ast.parse`.

    The file is decoded exactly as Python decodes it: `tokenize.detect_encoding` honours
    a BOM and a coding cookie on line 1, or on line 2 only when line 1 is blank or a
    comment; a cookie anywhere else is an ordinary comment. Identifiers are NFKC-folded
    by the parser (``open`` in fullwidth letters is ``open``), so the text the
    prefilters search is folded the same way; folding never adds or removes a newline,
    so line numbers agree.

    Raises:
        SyntaxError: an unknown or contradictory encoding declaration.
        ValueError: bytes that do not decode.
    """
    first = data.find(b"\n")
    second = data.find(b"\n", first + 1) if first >= 0 else -1
    head = data if second < 0 else data[: second + 1]
    source: str | bytes = data
    if data.startswith(b"\xef\xbb\xbf") or b"coding" in head:
        encoding, _lines = tokenize.detect_encoding(io.BytesIO(data).readline)
        if encoding == "utf-8-sig":
            data = data[3:]
            source = data
        elif encoding != "utf-8":
            text = data.decode(encoding)
            source = text
            data = text.encode("utf-8")
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if isinstance(source, bytes):
            source = data
    return data, data if data.isascii() else _folded(data), source


_NON_ASCII: Final = re.compile(rb"[\x80-\xff]")
_ASCII_RUN: Final = 512
"""The bytes `_non_ascii_lines` tests at a time with `bytes.isascii` (a word at a
time, in C) before `_NON_ASCII` looks for the byte (one at a time, a class test each)."""


def _folded(data: bytes) -> bytes:
    """``data`` decoded (an undecodable byte as U+FFFD), NFKC-folded and encoded.

    Folded a line at a time, only the lines with a non-ASCII byte: a newline is never
    part of a decomposition, a composition or a reordering, so the text's folding is
    its lines' (and a newline byte is never inside a UTF-8 sequence, so a byte no
    UTF-8 text holds is on such a line). Most of a file with a non-ASCII letter is
    ASCII (Django: 1 to 60 such lines in a file, most of them folded already): a whole
    file folded cost 4 ms of Django's 6 ms of `prepare`, and a whole file decoded and
    quick-checked 2 ms of the 3 ms left. A text already folded is the bytes themselves."""
    pieces: list[bytes] = []
    done = 0
    try:
        for start, end in _non_ascii_lines(data):
            line = data[start:end].decode("utf-8")
            if not unicodedata.is_normalized("NFKC", line):
                pieces += (data[done:start], unicodedata.normalize("NFKC", line).encode("utf-8"))
                done = end
    except UnicodeDecodeError:
        return unicodedata.normalize("NFKC", data.decode("utf-8", "replace")).encode("utf-8")
    if not pieces:
        return data
    pieces.append(data[done:])
    return b"".join(pieces)


def _non_ascii_lines(data: bytes) -> Iterator[tuple[int, int]]:
    """The spans of the lines of ``data`` (no newline) that hold a non-ASCII byte, in
    order."""
    size = len(data)
    at = 0
    while at < size:
        ahead = at + _ASCII_RUN
        if data[at:ahead].isascii():
            at = ahead
            continue
        found = _NON_ASCII.search(data, at)  # in the slice: it is not ASCII
        if found is None:
            break
        start = data.rfind(b"\n", 0, found.start()) + 1
        end = data.find(b"\n", found.end())
        end = size if end < 0 else end
        yield start, end
        at = end
