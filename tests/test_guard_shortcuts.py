"""The per-file scan's shortcuts answer as the long way does (docs/guard.md, issue 21's
eighth round): the tree test before a symbol table, and what is built once per run."""

from __future__ import annotations

import ast
import symtable
import sys
from collections.abc import Sequence
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kernel.guard import Policy, Rule, check_source
from kernel.guard.model import ViolationCode
from kernel.guard.patterns import CallMatcher, ModuleSet, twin_of
from kernel.guard.problems import _find_import_problem
from kernel.guard.scan import _Scanner, scan_source
from kernel.guard.shadows import _binds
from kernel.guard.syntax import COMPREHENSIONS, scope_name

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, *COMPREHENSIONS)

# Every binding form Python has, in functions, nested functions, lambdas and
# comprehensions (a closure variable is bound in an enclosing function).
_FORMS = [
    "def f():\n    open = 1\n",
    "def f():\n    open += 1\n",
    "def f():\n    open: int\n",
    "def f():\n    open: int = 1\n",
    "def f():\n    (open := 1)\n",
    "def f():\n    del open\n",
    "def f():\n    for open in x: pass\n",
    "def f():\n    with x as open: pass\n",
    "def f():\n    with x as (a, [b, *open]): pass\n",
    "def f():\n    try: pass\n    except E as open: pass\n",
    "def f():\n    import open\n",
    "def f():\n    import open.path\n",
    "def f():\n    import x as open\n",
    "def f():\n    from x import open\n",
    "def f():\n    from x import y as open\n",
    "def f():\n    def open(): pass\n",
    "def f():\n    class open: pass\n",
    "def f(open): pass\n",
    "def f(*open): pass\n",
    "def f(**open): pass\n",
    "def f(a, /, open=1): pass\n",
    "def f(*, open): pass\n",
    "f = lambda open: open\n",
    "def f():\n    global open\n    open = 1\n",
    "def f():\n    global open\n",
    "def f():\n    open = 1\n    def g():\n        nonlocal open\n        open = 2\n",
    "def f():\n    open = 1\n    def g():\n        return open\n",
    "def f():\n    open = 1\n    return lambda: open\n",
    "def f():\n    open = 1\n    return [open for _ in x]\n",
    "def f():\n    return [open for open in x]\n",
    "def f():\n    return {open: 1 for open, _ in x}\n",
    "def f():\n    return [y for x in z if (open := x)]\n",
    "x = [lambda: open for open in y]\n",
    "def f():\n    match x:\n        case open: pass\n",
    "def f():\n    match x:\n        case [1, *open]: pass\n",
    "def f():\n    match x:\n        case {'k': 1, **open}: pass\n",
    "def f():\n    match x:\n        case C(a=open): pass\n",
    "def f():\n    match x:\n        case (1 | 2) as open: pass\n",
    "class C:\n    def f(self):\n        open = 1\n        def g():\n            return open\n",
    "def f():\n    class C:\n        open = 1\n        def g(self):\n            return open\n",
    "def f():\n    return open(x)\n",
    "def f():\n    g = open\n    return g\n",
    "def f():\n    return x.open\n",
    "def f():\n    x.open = 1\n    x[open] = 1\n",
    "def f():\n    return g(open=1)\n",
]
if sys.version_info >= (3, 12):
    _FORMS += [
        "def f[open](): return open\n",
        "def f():\n    def g[open](): return open\n",
        "def f():\n    type T[open] = open\n",
        "def f():\n    class C[open]:\n        def g(self): return open\n",
    ]


def _tables(table: symtable.SymbolTable) -> list[symtable.SymbolTable]:
    out = [table]
    for child in table.get_children():
        out += _tables(child)
    return out


def _outermost(tree: ast.AST) -> list[ast.AST]:
    """The scopes no function, lambda or comprehension encloses."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                out.append(child)
            else:
                stack.append(child)
    return out


def _tables_in(top: symtable.SymbolTable, node: ast.AST) -> list[symtable.SymbolTable]:
    """The symbol tables of ``node``'s scope and of every scope inside it."""
    start, end = getattr(node, "lineno", 0), getattr(node, "end_lineno", 0)
    for table in _tables(top):
        if table.get_type() != "module" and (
            table.get_name().strip("<>"),
            table.get_lineno(),
        ) == (scope_name(node), start):
            return [t for t in _tables(table) if start <= t.get_lineno() <= end]
    return []


_IMPLICIT = frozenset({"__class__", "__classdict__", "__classdictcell__"})
"""Cells the compiler makes itself (``super()``'s class, 3.12's class namespace): no
builtin's name, so never asked about."""


def _check(source: str) -> int:
    """Every name some scope in an outermost scope has local or free is one `_binds`
    finds in that scope's tree (but the compiler's own: ``.0``, `_IMPLICIT`); the number
    of names checked."""
    tree = ast.parse(source)
    top = symtable.symtable(source, "<test>", "exec")
    checked = 0
    for node in _outermost(tree):
        for table in _tables_in(top, node):
            for sym in table.get_symbols():
                name = sym.get_name()
                if (sym.is_local() or sym.is_free()) and name.isidentifier():
                    checked += 1
                    assert name in _IMPLICIT or _binds(node, name), (source, name)
    return checked


@pytest.mark.parametrize("source", _FORMS)
def test_every_binding_form_is_found_in_the_tree(source: str) -> None:
    _check(source)


def test_a_name_no_node_binds_is_not_found() -> None:
    tree = ast.parse("def f():\n    g = open\n    return g(x.open, y=open), x[open]\n")
    assert not _binds(tree.body[0], "open")


@pytest.mark.parametrize(
    "module", ["argparse", "dataclasses", "typing", "ast", "inspect", "email/_header_value_parser"]
)
def test_every_local_or_closure_name_of_the_stdlib_is_found(module: str) -> None:
    path = Path(ast.__file__).parent / f"{module}.py"
    assert _check(path.read_text(encoding="utf-8")) > 100


_EVAL = Policy(rules=(Rule(name="r", modules=("m",), forbid_calls=("eval",)),))


@pytest.mark.parametrize(
    ("src", "lines"),
    [
        # the text looks like a binding (`eval` ends a line), the tree has none
        ("def f():\n    g = eval\n    return g\n", [2, 3]),
        ("def f():\n    return eval, 1\n", [2]),
        # bound in an enclosing function: a closure variable, never the builtin
        ("def f():\n    eval = g\n    def h():\n        return eval(1)\n", []),
        ("def f():\n    eval = g\n    return lambda: eval(1)\n", []),
        ("class C:\n    def f(self, eval):\n        return eval(1)\n", []),
        ("def f():\n    global eval\n    eval = g\n    return eval(1)\n", [4]),
    ],
)
def test_a_builtin_in_a_function_is_the_builtin_unless_a_scope_binds_it(
    src: str, lines: list[int]
) -> None:
    assert [v.line for v in check_source(src, _EVAL, module="m")] == lines


def test_files_of_one_matcher_with_other_rules_get_their_own_findings() -> None:
    """What is built once per run is keyed by the rules and the matcher both."""
    src = b"import subprocess\nimport socket\nfrom os import system\n"
    matcher = CallMatcher([("a", "os.system")])
    first = Rule(
        name="a", modules=("m",), forbid_imports=("subprocess",), forbid_calls=("os.system",)
    )
    second = Rule(name="a", modules=("m",), forbid_imports=("socket",), forbid_calls=("os.system",))
    found = [
        sorted(
            (f[0], f[2]) for f in scan_source(src, module="m", rules=(rule,), matcher=matcher)[1]
        )
        for rule in (first, second, first)
    ]
    assert found == [
        [(1, "KG001"), (3, "KG004")],
        [(2, "KG001"), (3, "KG004")],
        [(1, "KG001"), (3, "KG004")],
    ]


_PARTS = st.sampled_from(["os", "io", "a", "b", "_io", "posix", "subprocess", "x_y", "builtins"])
_MODULES = st.lists(_PARTS, min_size=1, max_size=4).map(".".join)


@given(st.lists(_MODULES, max_size=4), _MODULES)
def test_a_package_no_pattern_is_under_matches_nothing(patterns: list[str], module: str) -> None:
    """`ModuleSet.may_match_under` rules a module out only when no pattern matches it."""
    compiled = ModuleSet(patterns)
    if not compiled.may_match_under(module.split(".", 1)[0]):
        assert compiled.match(module) is None


@given(
    st.lists(_MODULES, min_size=1, max_size=4),
    _MODULES,
    st.sampled_from(["", "run", "open", "system"]),
)
def test_an_import_problem_is_the_one_found_the_long_way(
    patterns: list[str], module: str, name: str
) -> None:
    """The shortcut of `_find_import_problem` (no pattern under the package, no C twin)
    answers as every target and twin matched one by one does."""
    rule = Rule(name="r", modules=("m",), forbid_imports=tuple(patterns))
    targets = (module, f"{module}.{name}") if name else (module,)
    forbidden = ModuleSet(patterns)
    expected = next(
        (
            (ViolationCode.FORBIDDEN_IMPORT, p)
            for t in (*targets, *(twin for n in targets for twin in twin_of(n)))
            if (p := forbidden.match(t)) is not None
        ),
        None,
    )
    assert _find_import_problem(rule, targets) == expected


_STATEMENTS = st.sampled_from(
    [
        "x = 1",
        "x = (\n    1)",
        "a = 1; b = 2",
        "@d\ndef f():\n    pass",
        "@d(\n    1)\n@e\nclass C:\n    x = 1\n    y = 2",
        "if x:\n    pass\nelse:\n    pass",
        '"""doc\ntext"""',
        "",
    ]
)


def _empty(
    rules: tuple[Rule, ...], patterns: list[str], *, tree: ast.Module | None = None
) -> _Scanner:
    """A scanner of an empty module ``m`` under ``rules`` and a matcher of rule ``r``'s
    ``patterns``: the per-name questions, asked without a file (or over ``tree``)."""
    return _Scanner(
        data=b"",
        search=b"",
        tree=ast.parse("") if tree is None else tree,
        module="m",
        is_package=False,
        rules=rules,
        matcher=CallMatcher(("r", p) for p in patterns),
    )


@given(st.lists(_STATEMENTS, max_size=12), st.lists(st.integers(1, 40), max_size=6))
def test_the_statements_found_span_a_marked_line(parts: list[str], marked: list[int]) -> None:
    """`ImportPass._hits` (bisection over the statements' ends) finds every statement
    whose lines, decorators included, hold a marked line, and no other."""
    tree = ast.parse("\n".join(parts))
    scanner = _empty((), [], tree=tree)
    lines = sorted(set(marked))
    expected = [
        i
        for i, stmt in enumerate(tree.body)
        if any(
            min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
            <= line
            <= (stmt.end_lineno or stmt.lineno)
            for line in lines
        )
    ]
    assert scanner._hits(tree.body, lines) == expected


_RULES = (
    Rule(
        name="r",
        modules=("m",),
        forbid_imports=("subprocess",),
        forbid_calls=("eval", "os.system", "datetime.datetime.now"),
        forbid_reflection=True,
    ),
)
_MATCHER = CallMatcher((r.name, p) for r in _RULES for p in r.forbid_calls)


def _long_way(data: bytes) -> tuple[list[object], list[object]]:
    """`scan_source`'s passes, every one of them run, whatever the file holds."""
    from kernel.guard.syntax import parse_module, prepare

    data, search, source = prepare(data)
    scanner = _Scanner(
        data=data,
        search=search,
        tree=parse_module(source),
        module="m",
        is_package=False,
        rules=_RULES,
        matcher=_MATCHER,
    )
    scanner.import_pass()
    scanner.resolve_typing()
    scanner.prune_typing()
    scanner.bound_object_rules()
    with mock.patch("kernel.guard.shadows._inert", return_value=False):
        scanner.reference_pass()
    scanner.import_rules()
    return list(scanner.imports), list(scanner.raw_findings())


# Statements the reference pass may skip (the first five) and ones it must visit.
_BODY = st.sampled_from(
    [
        "import os",
        "from subprocess import run",
        "from os import system as s, path",
        '"""doc eval os.system __builtins__"""',
        "pass",
        "# kernel-guard: ignore[KG004] a reason",
        "",
        "os.system('x')",
        "eval",
        "x = __builtins__",
        "s()",
        "f'{eval(1)}'",
        "x: 'os.system' = 1",
        "import datetime\nv = datetime.datetime(1, 1, 1)\nv.now()",
        "x = 1  # kernel-guard: ignore[KG004] reason",
    ]
)


@given(st.lists(_BODY, max_size=6))
def test_a_file_of_imports_and_docstrings_scans_as_the_long_way(parts: list[str]) -> None:
    """The reference pass is skipped when every statement is an import, ``pass`` or a
    constant (`shadows._inert`), and the scan when there is no statement and no
    suppression comment: the same imports and findings as every pass run."""
    data = "\n".join(parts).encode()
    got = scan_source(data, module="m", rules=_RULES, matcher=_MATCHER)
    assert (list(got[0]), list(got[1])) == _long_way(data)


@pytest.mark.parametrize(
    ("src", "codes"),
    [
        ("", []),
        ("# only a comment\n\n", []),
        ("# kernel-guard: ignore[KG004] why\n", ["KG011"]),
        ("import os\n'doc'\npass\n", []),
        ("from subprocess import run\n", ["KG001"]),
        ("import os\n'doc'\nos.system('x')\n", ["KG004"]),
        ("'doc'\n__builtins__\n", ["KG008"]),
    ],
)
def test_files_with_no_statement_to_visit_still_report(src: str, codes: list[str]) -> None:
    found = scan_source(src.encode(), module="m", rules=_RULES, matcher=_MATCHER)[1]
    assert [f[2] for f in found] == codes


_QUALS = st.sampled_from(["a", "a.b", "a.b.c", "os", "os.path", "x.y", "builtins.eval"])


@given(
    st.dictionaries(st.sampled_from(["a", "b", "c", "os", "e"]), _QUALS, max_size=5),
    st.dictionaries(
        st.sampled_from(["a", "os", "x"]),
        st.lists(st.sampled_from(["b", "b.c", "path", "y"]), min_size=1, max_size=2),
        max_size=3,
    ),
    st.dictionaries(_QUALS, st.booleans(), max_size=5),
)
def test_the_interesting_names_are_the_ones_asked_one_by_one(
    bindings: dict[str, str], under: dict[str, list[str]], memo: dict[str, bool]
) -> None:
    """`interesting_names` reads the run-wide memo itself but for a name `loaded`
    holds (``import a.b`` bound ``a``: this file's own answer): it finds what asking
    `_interesting` about every binding finds, whatever the memo already says."""

    loaded = {head: [f"{head}.{sub}" for sub in subs] for head, subs in under.items()}

    def scanner() -> _Scanner:
        made = _empty((), ["a.b.c"])
        made.bindings, made.loaded, made.interesting_memo = dict(bindings), loaded, dict(memo)
        return made

    long_way = scanner()
    expected = {n for n, q in bindings.items() if long_way._interesting(q)}
    assert scanner().interesting_names() & bindings.keys() == expected


def test_what_a_run_keeps_is_its_own_rules_and_matchers() -> None:
    """`Run` keeps `_marks`' uncalled builtins, `_interesting`'s and `_reaches`'
    answers: a run whose rule forbids ``getattr`` itself still finds its direct calls
    after a run that searched ``getattr(`` only where it is not called."""
    src = b"import os\nx = getattr(o, 'sep')\ny = os.system\n"
    plain = Rule(name="r", modules=("m",), forbid_calls=("os.system",))
    strict = Rule(name="r", modules=("m",), forbid_calls=("os.system", "getattr"))
    found = [
        sorted(
            (f[0], f[2])
            for f in scan_source(
                src,
                module="m",
                rules=(rule,),
                matcher=CallMatcher((rule.name, p) for p in rule.forbid_calls),
            )[1]
        )
        for rule in (plain, strict, plain)
    ]
    assert found == [[(3, "KG004")], [(2, "KG004"), (3, "KG004")], [(3, "KG004")]]


_CALL_PATTERNS = st.sampled_from(
    [
        "os.system",
        "eval",
        "os.environ",
        "time.*",
        "os.sys*",
        "o*.path",
        "*.loads",
        "j?on.dumps",
        "[ab].c",
        "io.open",
        "zz.y",
    ]
)
_HEADS = ["os", "io", "_io", "json", "builtins", "importlib", "inspect", "a", "b", "zz", "m"]
_NAMES = st.tuples(
    st.sampled_from(_HEADS),
    st.lists(st.sampled_from(["system", "path", "loads", "dumps", "c", "open", "x"]), max_size=2),
).map(lambda parts: ".".join((parts[0], *parts[1])))


def _oracle(patterns: list[str], q: str) -> list[tuple[str, str]]:
    """Which patterns match ``q``, one by one (`module_matches` for globs)."""
    from kernel.guard.patterns import module_matches, normalize_call

    found = []
    for raw in patterns:
        p = normalize_call(raw)
        if p.endswith(".*") and "*" not in p[:-2]:
            hit = q.startswith(p[:-1])
        elif any(c in p for c in "*?["):
            hit = module_matches(p, q)
        else:
            hit = q == p or q.startswith(f"{p}.")
        if hit:
            found.append(("r", raw))
    return found


@given(st.lists(_CALL_PATTERNS, max_size=4), _NAMES)
@example(["o*.path"], "os.path")
@example(["*.loads"], "json.loads")
@example(["[ab].c"], "b.c")
def test_a_name_under_no_pattern_head_matches_nothing(patterns: list[str], q: str) -> None:
    """`CallMatcher.may_match_under` rules a top-level name out (and `_match` stops
    there) only when no pattern, glob or not, matches or makes interesting a name
    under it."""
    matcher = CallMatcher(("r", p) for p in patterns)
    assert sorted(matcher.match(q)) == sorted(_oracle(patterns, q))
    if not matcher.may_match_under(q.split(".", 1)[0]):
        assert not matcher.interesting(q)


@given(st.lists(_CALL_PATTERNS, min_size=1, max_size=3), _NAMES)
def test_a_name_under_a_dead_head_is_the_one_found_the_long_way(
    patterns: list[str], q: str
) -> None:
    """`ShadowPass._interesting_name` answers no for every name under a top-level name
    `_dead` rules out (no pattern, twin, `_ALWAYS` name or source under it) only when
    asking the long way (`_interest_of`) answers no too."""

    rule = Rule(name="r", modules=("m",), forbid_calls=tuple(patterns), forbid_imports=("socket",))
    scanner = _empty((rule,), patterns)
    assert scanner._interesting_name(q) == scanner._interest_of(q)
    # Nothing installed: only the patterns, the twins and `_ALWAYS` names decide.
    bare = _empty((rule,), patterns)
    with mock.patch("kernel.guard.shadows.module_file", return_value=None):
        assert bare._interesting_name(q) == bare._interest_of(q)


_IMPORT_PATTERNS = st.sampled_from(["subprocess", "os.path", "io", "o*", "*.c", "a.b", "s?cket"])


@given(
    st.lists(_IMPORT_PATTERNS, max_size=3),
    st.none() | st.lists(_IMPORT_PATTERNS, max_size=2),
    _MODULES,
    st.sampled_from(["", "run", "c"]),
    st.sampled_from(["runtime", "typing", "dynamic", "reach:x.y"]),
)
@example(["os.path"], None, "posix.path", "", "runtime")
@example(["io"], None, "_io", "open", "typing")
def test_an_import_under_no_ruled_head_breaks_no_rule(
    forbid: list[str], allow: list[str] | None, module: str, name: str, kind: str
) -> None:
    """`problems._ruled_under` rules a top-level name out (`import_rules` then skips
    `_import_findings`) only when the long way finds nothing either."""
    from kernel.guard.problems import _ruled_under

    rule = Rule(
        name="r",
        modules=("m",),
        forbid_imports=tuple(forbid),
        allow_imports=None if allow is None else tuple(allow),
        forbid_calls=("eval",),
    )
    scanner = _empty((rule,), ["eval"])
    if not _ruled_under((rule,), module.split(".", 1)[0]):
        assert scanner._import_findings(module, name, kind) == ()


@given(st.lists(_CALL_PATTERNS, min_size=1, max_size=3), _NAMES)
@example(["os.system"], "json.codecs")
@example(["os.system"], "zz.os.system")
def test_a_use_under_a_dead_head_is_the_long_way_s(patterns: list[str], q: str) -> None:
    """`_Scanner._use` stops at once for a name under a `_dead` top-level name only
    where the long way reports nothing and records no reach-through either."""
    rule = Rule(
        name="r",
        modules=("m",),
        forbid_calls=tuple(patterns),
        forbid_imports=("socket",),
        effects=True,
    )
    node = ast.parse("x", mode="eval").body

    def use() -> tuple[bool, Sequence[object], Sequence[object]]:
        scanner = _empty((rule,), patterns)
        return scanner._use(q, node, None), scanner.findings, scanner.imports

    short = use()
    with mock.patch.object(_Scanner, "_dead_name", return_value=False):
        assert short == use()


_MODULE_USES = st.sampled_from(
    [
        "import os",
        "import datetime",
        "import shutil",
        "import posix",
        "import os.path",
        "import datetime as dt",
        "os.path.join(p)",
        "os . path . join(p)",
        "f = (os\n    .environ)",
        "os.environ['X']",
        "os.system('ls')",
        "os.getcwd()",
        "x = os",
        "x.system(1)",
        "datetime.timedelta(1)",
        "datetime.datetime.now()",
        "dt.datetime.now()",
        "d = datetime.datetime(1, 1, 1)\nd.now()",
        "class C(datetime.datetime):\n    pass\nC.now()",
        "getattr(os, 'system')('ls')",
        "os.__dict__['system']",
        "posix.system('ls')",
        "shutil.os.system(1)",
        "datetime = os\ndatetime.path.x",
        "def f():\n    return os.path.sep, os.system",
        "os.TYPE_CHECKING = True",
        "x: 'os.environ' = 1",
        "n = os",
        "n = datetime",
        "n.system('ls')",
        "os = datetime.datetime",
        "os.now()",
        "class os(datetime.datetime):\n    pass",
        "def g():\n    os.now(), n.now(), n.system(1)",
    ]
)


def _interesting_module_only_through_imports(scanner: object, q: str) -> bool:
    """`ShadowPass._module_name` before the seventh round: a module interesting only
    through what it imports (`shutil`), not one interesting itself (`os`)."""
    from kernel.guard.names import _ALWAYS

    assert isinstance(scanner, _Scanner)
    return (
        "." not in q
        and q not in scanner.loaded
        and q not in _ALWAYS
        and not scanner.matcher.interesting(q)
        and not any(scanner.matcher.interesting(t) for t in twin_of(q))
    )


@given(st.lists(_MODULE_USES, max_size=6))
@example(["import os, datetime", "n = os", "n.system('ls')", "n = datetime"])
@example(["import os, datetime", "class os(datetime.datetime):\n    pass", "os.now()"])
def test_a_module_searched_as_name_module_finds_what_the_whole_name_finds(
    parts: list[str],
) -> None:
    """A name bound to a top-level module is searched where no quiet attribute follows
    it (`ShadowPass._module_name`, `_quiet`), and the pass starts over with it searched
    whole when a walk binds it to something else (`_rebound`): the same findings and
    imports as searching a module interesting itself whole, on every line."""
    rule = Rule(
        name="r",
        modules=("m",),
        forbid_imports=("subprocess",),
        forbid_calls=("os.system", "os.environ", "datetime.datetime.now"),
    )
    matcher = CallMatcher((rule.name, p) for p in rule.forbid_calls)
    data = "\n".join(parts).encode()
    got = scan_source(data, module="m", rules=(rule,), matcher=matcher)
    with mock.patch.object(_Scanner, "_module_name", _interesting_module_only_through_imports):
        assert scan_source(data, module="m", rules=(rule,), matcher=matcher) == got


_ATTR_CALLS = st.sampled_from(
    [
        "import typing",
        "import os",
        "setattr(typing, 'TYPE_CHECKING', True)",
        "setattr(typing, 'TYPE_' 'CHECKING', True)",
        "setattr(typing, 'TYPE\\x5fCHECKING', True)",
        "setattr(\n    typing, 'TYPE_CHECKING', 1)",
        "delattr(typing, 'TYPE_CHECKING')",
        "setattr(o, k, v)",
        "setattr(os, 'system', f)",
        "setattr(o, '__dict__', v)",
        "delattr(o, '__class__')",
        "s = setattr\ns(typing, 'TYPE_CHECKING', 1)",
        "(setattr)(typing, 'TYPE_CHECKING', 1)",
        "hasattr(typing, 'TYPE_CHECKING')",
        "getattr(os, 'system')('ls')",
        "def f(n):\n    setattr(n, 'x', getattr(os, n))",
        "__import__('subprocess')",
        "vars(os)['system']('ls')",
    ]
)


@given(st.lists(_ATTR_CALLS, max_size=5), st.booleans())
def test_a_direct_attribute_call_searched_as_name_paren_finds_the_same(
    parts: list[str], forbid_setattr: bool
) -> None:
    """`_CALLED_ONLY` builtins are searched where not directly called (``setattr(``):
    the same findings as searching every use of them."""
    calls = ("os.system", "setattr") if forbid_setattr else ("os.system",)
    rule = Rule(name="r", modules=("m",), forbid_calls=calls)
    data = "\n".join(parts).encode()

    def scan() -> object:
        matcher = CallMatcher((rule.name, p) for p in rule.forbid_calls)
        return scan_source(data, module="m", rules=(rule,), matcher=matcher)

    got = scan()
    with mock.patch("kernel.guard.shadows._CALLED_ONLY", ()):
        assert scan() == got


@pytest.mark.parametrize(
    ("source", "patterns", "line"),
    [
        # A glob past a module's first part: its attribute is no quiet one.
        ("import os\nos.path.join(a)\n", ("os.pa?h.join",), 2),
        ("import os as zz\nzz.path.join(a)\n", ("os.pa?h.join",), 2),
        ("import datetime\ndatetime.datetime.now()\n", ("datetime.*.now",), 2),
        ("import os\nimport shutil\nshutil.copy(os.path.join(a), b)\n", ("o?.path.join",), 3),
        # Under a glob, a name is interesting as far as the text before the glob goes
        # (`CallMatcher.interesting`): bound by `from`, or a glob in the first part.
        ("from os import path\npath.join(a)\n", ("os.pa?h.join",), 2),
        ("from datetime import datetime\ndatetime.now()\n", ("datetime.*.now",), 2),
        ("import os\nos.system(1)\n", ("*.system",), 2),
        ("import os\nx = os.environ\n", ("[o]s.environ",), 2),
        # Searched whole in the first round (`import os.path` loads `os`), then bound to
        # another module by assignment: its use before that line is still `os.system`.
        ("import os.path\nimport datetime\nos.system(1)\nos = datetime\n", ("os.system",), 3),
        ("import datetime\nos.system(1)\nos = datetime\nimport os.path\n", ("os.system",), 2),
    ],
)
def test_a_module_name_searched_as_name_module_misses_no_use(
    source: str, patterns: tuple[str, ...], line: int
) -> None:
    """The differential review's cases against the `name.module` search (0752a6b), each a
    finding before it and none after, and the same gap under a glob before it: what a
    glob can match under is interesting, and a name bound by assignment is searched
    whole."""
    policy = Policy(rules=(Rule(name="r", modules=("*",), forbid_calls=patterns),))
    found = check_source(source, policy, module="m")
    assert [(v.line, v.code) for v in found] == [(line, ViolationCode.FORBIDDEN_CALL)]


_FROM_IMPORTS = st.tuples(
    st.sampled_from(["os", "posix", "_io", "io", "json", "a.b", "zz", "builtins", "_datetime"]),
    st.sampled_from(["system", "open", "loads", "c", "datetime", "environ", "path"]),
)


@given(st.lists(_CALL_PATTERNS, min_size=1, max_size=3), st.lists(_FROM_IMPORTS, max_size=4))
@example(["os.system"], [("posix", "system")])
@example(["eval", "io.open"], [("_io", "open"), ("builtins", "open")])
def test_a_name_bound_by_from_import_is_reported_as_the_long_way_does(
    patterns: list[str], pairs: list[tuple[str, str]]
) -> None:
    """`_import_from` keeps a bound name for `bound_object_rules` only under a package a
    pattern may match under, or a C twin's: the findings are those of keeping every one."""
    rule = Rule(name="r", modules=("m",), forbid_calls=tuple(patterns))
    data = "\n".join(f"from {m} import {n}" for m, n in pairs).encode()

    def scan() -> object:
        matcher = CallMatcher((rule.name, p) for p in rule.forbid_calls)
        return scan_source(data, module="m", rules=(rule,), matcher=matcher)

    got = scan()
    with mock.patch.object(CallMatcher, "may_match_under", return_value=True):
        assert scan() == got


def _module_file_long_way(module: str) -> str | None:
    """`installed.module_file` before its top-level name was kept apart: every part
    searched in the folders of `sys.path`, then in the package found."""
    import os

    from kernel.guard.installed import _is_package, _listing

    if module.split(".", 1)[0] in sys.builtin_module_names:
        return None
    directories = [d or "." for d in sys.path]
    parts = module.split(".")
    for i, part in enumerate(parts):
        found = None
        for directory in directories:
            candidate = _listing(directory).get(part)
            if candidate is not None and (candidate.endswith(".py") or _is_package(candidate)):
                found = candidate
                break
        if found is None:
            return None
        if found.endswith(".py"):
            return found if i == len(parts) - 1 else None
        if i == len(parts) - 1:
            return os.path.join(found, "__init__.py")
        directories = [found]
    return None


_MODULE_PARTS = st.lists(
    st.sampled_from(
        ["os", "path", "json", "decoder", "email", "mime", "text", "xml", "etree",
         "ElementTree", "importlib", "metadata", "sys", "_io", "posix", "hypothesis",
         "strategies", "kernel", "guard", "scan", "__init__", "nope", "x"]
    ),
    min_size=1,
    max_size=4,
)  # fmt: skip


@given(_MODULE_PARTS)
@example(["email", "mime", "text"])
@example(["sys", "path"])
@example(["json", "decoder", "x"])
def test_a_module_file_is_the_one_found_the_long_way(parts: list[str]) -> None:
    """`module_file` finds a module's top-level name once (`_top_level`) and the rest
    in the package found: the file the path finder's order gives, part by part."""
    from kernel.guard.installed import module_file

    name = ".".join(parts)
    assert module_file(name) == _module_file_long_way(name)


_IMPORT_LINES = st.sampled_from(
    [
        "import os",
        "import os.path as p",
        "import subprocess",
        "import _socket",
        "from socket import socket",
        "from a.b import c",
        "from . import x",
        "from .io import y",
        "import json.codecs",
        "json.codecs.open(f)",
        "__import__('subprocess')",
        "import importlib\nimportlib.import_module('socket')",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import io",
    ]
)


@given(
    st.lists(_IMPORT_LINES, max_size=5),
    st.lists(_IMPORT_PATTERNS, max_size=3),
    st.none() | st.lists(_IMPORT_PATTERNS, max_size=2),
)
@example(["import _socket"], ["s?cket"], None)
@example(["import json.codecs", "json.codecs.open(f)"], ["codecs"], None)
def test_imports_no_rule_can_rule_on_are_passed_over_as_the_long_way_does(
    lines: list[str], forbid: list[str], allow: list[str] | None
) -> None:
    """`import_rules` passes over an import whose module's top-level name no rule can
    rule on (`_ruled_under`, asked once per module): the findings of asking every one."""
    rule = Rule(
        name="r",
        modules=("m",),
        forbid_imports=tuple(forbid),
        allow_imports=None if allow is None else tuple(allow),
        forbid_calls=("os.system",),
    )
    data = "\n".join(lines).encode()

    def scan() -> object:
        matcher = CallMatcher((rule.name, p) for p in rule.forbid_calls)
        return scan_source(data, module="m.n", is_package=True, rules=(rule,), matcher=matcher)

    got = scan()
    with mock.patch("kernel.guard.names._ruled_under", return_value=True):
        assert scan() == got


_BOUND_ATTR_USES = st.sampled_from(
    [
        "import warnings",
        "import json",
        "import pickle",
        "import shutil",
        "warnings.warn('x')",
        "w = warnings.warn\nw('x')",
        "warnings.warn.x",
        "json.JSONDecodeError(m, d, 1)",
        "class E(json.JSONDecodeError):\n    pass\nE.x()",
        "json.codecs.open(f)",
        "pickle.dumps(x)",
        "d = pickle.dumps(x)\nd.now()",
        "shutil.os.system(1)",
    ]
)
_BOUND_ATTR_PATTERNS = st.sampled_from(
    [
        "_warnings.warn",
        "_warnings.*",
        "*.warn",
        "json.decoder.JSONDecodeError",
        "json.decoder.*",
        "_pickle.dumps",
        "pickle.dumps",
        "os.system",
        "codecs.open",
    ]
)


def _quiet_before(self: _Scanner, q: str, attr: str) -> bool:
    """`ShadowPass._quiet` before an attribute bound by import could be quiet: only one
    bound to nothing (no other name, no module reached)."""
    from kernel.guard.installed import module_file, through
    from kernel.guard.names import _REFLECTIVE_ATTRS

    if attr.startswith("__") or attr == "TYPE_CHECKING" or attr in _REFLECTIVE_ATTRS:
        return False
    qa = f"{q}.{attr}"
    return through(qa) == ((), ()) and module_file(qa) is None and not self._interesting(qa)


@given(st.lists(_BOUND_ATTR_USES, max_size=5), st.lists(_BOUND_ATTR_PATTERNS, max_size=3))
@example(["import warnings", "warnings.warn('x')"], ["_warnings.warn"])
@example(["import warnings", "w = warnings.warn\nw('x')"], ["*.warn"])
@example(["import json", "json.JSONDecodeError(m, d, 1)"], ["json.decoder.*"])
def test_an_attribute_bound_by_import_is_quiet_only_where_a_visit_finds_nothing(
    parts: list[str], patterns: list[str]
) -> None:
    """`_quiet` leaves out ``warnings.warn`` (an import binds it to ``_warnings.warn``)
    only where neither name is interesting and no module is reached: the findings and
    imports of visiting every such attribute."""
    rule = Rule(
        name="r",
        modules=("m",),
        forbid_imports=("subprocess",),
        forbid_calls=("os.environ", *patterns),
    )
    data = "\n".join(parts).encode()

    def scan() -> object:
        matcher = CallMatcher((rule.name, p) for p in rule.forbid_calls)
        return scan_source(data, module="m", rules=(rule,), matcher=matcher)

    got = scan()
    with mock.patch.object(_Scanner, "_quiet", _quiet_before):
        assert scan() == got


def _binding_positions_long_way(search: bytes, name: bytes) -> list[int]:
    """`shadows._binding_positions` before it asked the word starts: every occurrence
    of ``name`` found by substring search, tested in place."""
    import re

    from kernel.guard.shadows import _BOUND_AFTER
    from kernel.guard.syntax import WORD

    positions: list[int] = []
    size = len(name)
    at = search.find(name)
    while at >= 0:
        got = _BOUND_AFTER.match(search, at + size)
        if got is not None and (not at or (search[at - 1] not in WORD and search[at - 1] != 0x2E)):
            positions.append(at)
        at = search.find(name, got.end() if got is not None else at + 1)
    at = search.find(name)
    while at >= 0:
        if re.compile(rb"\b").match(search, at + size):
            head = at
            while head and search[head - 1] in b" \t":
                head -= 1
            if head < at and search.endswith((b"def", b"class"), 0, head):
                positions.append(head)
        at = search.find(name, at + 1)
    positions.sort()
    return positions


_TEXT_PIECES = st.sampled_from(
    [b"vars", b"int", b"id", b" ", b"\t", b"=", b".", b"def", b"class", b"x", b"in", b"\xc3\xa9",
     b"\n", b"(", b")", b":", b",", b"#", b"+=", b"_", b"]", b";", b"undef", b"=="]
)  # fmt: skip


@given(st.lists(_TEXT_PIECES, max_size=24), st.sampled_from([b"vars", b"int", b"id"]))
@example([b"def", b" ", b"vars", b"(", b")"], b"vars")
@example([b"x", b".", b"vars", b" ", b"="], b"vars")
@example([b"for", b" ", b"int", b" ", b"in", b" ", b"int", b":"], b"int")
def test_binding_positions_are_those_of_a_search_of_every_occurrence(
    pieces: list[bytes], name: bytes
) -> None:
    """`_binding_positions` looks only where the name is a word (`_Text.starts`): the
    places a substring search of every occurrence finds."""
    from kernel.guard.shadows import _binding_positions

    text = b"".join(pieces)
    assert _binding_positions(text, name) == _binding_positions_long_way(text, name)


_PARAM_USES = st.sampled_from(
    [
        "import os, datetime",
        "value = datetime.datetime(1, 1, 1)",
        "def f(value):\n    return value.now()",
        "def f(self, value):\n    x = value\n    x.now()\n    os.system(value)",
        "def f(value):\n    def g():\n        return value.now()\n    return g",
        "def f(value):\n    def g(value=value.now()):\n        return value\n    return g",
        "def f(value=value.now()):\n    return value",
        "def f(os):\n    os.system(1)\n    return os.environ",
        "def f(getattr):\n    getattr(os, 'system')",
        "def f(getattr):\n    g = getattr\n    g(os, 'system')",
        "def f(vars):\n    vars()['x']",
        "def f(value):\n    value.f_globals\n    value.__dict__['x']",
        "def f(value):\n    value.TYPE_CHECKING = True",
        "def f(value):\n    return [value.now() for value in x]",
        "def f(value):\n    global now\n    now = value",
        "def f(value):\n    return lambda: value.now()",
        "def f(value: 'os.environ'):\n    return value",
        "def f(value):\n    return '\\x76alue'",
        "class C:\n    def m(self, value):\n        return value.now()\n    x = value.now()",
        "value.now()",
        "now = value",
        "def h():\n    return value.now()",
        "def h(x):\n    y = now\n    return now.now(), y.now()",
    ]
)


@given(st.lists(_PARAM_USES, max_size=6))
@example(
    [
        "import os, datetime",
        "value = datetime.datetime(1, 1, 1)",
        "def f(value):\n    return value.now()",
        "value.now()",
    ]
)
@example(["import os", "def f(os):\n    os.system(1)\n    return os.environ"])
@example(
    ["import datetime", "value = datetime.datetime(1, 1, 1)", "def h():\n    return value.now()"]
)
@example(
    [
        "import datetime",
        "value = datetime.datetime(1, 1, 1)",
        "now = value",
        "def h(x):\n    y = now\n    return now.now(), y.now()",
    ]
)
def test_a_line_marked_only_by_a_parameter_s_name_is_left_as_the_long_way_finds(
    parts: list[str],
) -> None:
    """`_body_lines` leaves out of a function body the lines marked only by names one
    of its scopes takes as parameters (`_name` resolves them to nothing): the findings
    and imports of visiting every marked line."""
    rule = Rule(
        name="r",
        modules=("m",),
        forbid_imports=("subprocess",),
        forbid_calls=("os.system", "os.environ", "datetime.datetime.now", "getattr"),
        forbid_reflection=False,
    )
    data = "\n".join(parts).encode()

    def scan() -> object:
        matcher = CallMatcher((rule.name, p) for p in rule.forbid_calls)
        return scan_source(data, module="m", rules=(rule,), matcher=matcher)

    got = scan()
    with mock.patch.object(_Scanner, "_body_lines", lambda self, scope: self.round_lines):
        assert scan() == got
