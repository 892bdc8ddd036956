"""Per-file analysis: parse once with `ast`, resolve names, report rule breaks.

Rules this module enforces (each check's comment names its `ViolationCode`); each one
follows what Python itself does, not a list of examples:

- the file is decoded as Python decodes it (`tokenize.detect_encoding`: a coding cookie
  counts on line 1, or on line 2 only after a blank or comment-only line 1), and every
  text prefilter searches the NFKC-folded text, as the parser folds identifiers;
- imports are seen wherever they are: module level, inside functions, ``try``,
  ``with`` and class bodies; ``import x as y``, ``from x import y as z`` and relative
  imports (``from ..a import b``) resolve to absolute module names;
- ``if TYPE_CHECKING:`` marks imports typing-only when the name is `typing`'s or
  `typing_extensions`' constant (also under another name: ``import ... as TC``, or
  ``typing.TYPE_CHECKING``) bound once by its import, or a module constant bound only
  by ``TYPE_CHECKING = False``; any other binding of the name, or a store to an
  attribute ``TYPE_CHECKING`` (which fakes it for every module), is not trusted; a name
  bound only by typing-only imports is unbound at run time and resolves to nothing;
- a reference is resolved to a qualified name through import aliases, re-binding
  (``f = os.system``), ``getattr(mod, "literal")``, ``mod.__dict__["literal"]``,
  ``vars(mod)["literal"]``, ``__import__("literal")``, ``importlib.import_module("literal")``,
  ``builtins.open`` and ``__builtins__``, and through the import bindings of installed
  modules read from their source (``json.codecs`` is module `codecs`: a reach-through,
  checked like an import); every load of a name that resolves to a ``forbid-calls``
  pattern is a finding, so an alias is caught where it is made and where it is used;
- whether a builtin's name is the builtin follows Python's scopes: in a function,
  CPython's own symbol table (`symtable`) says whether the name is local or a closure
  variable (a ``del`` or a bare annotation there makes it local too; a binding only in a
  nested function or comprehension does not); an unconditional top-level binding
  shadows it for later top-level statements and for every function body wherever it
  is defined (unless a call into the module's own code precedes it), never when the
  name is deleted at module scope; a class body's earlier bindings shadow it in that
  body; a bare annotation binds nothing;
- annotations are checked as code even under ``from __future__ import annotations``
  (`typing.get_type_hints` evaluates them), string annotations are parsed and checked;
  so are strings typing evaluates outside annotations (``List["expr"]`` aliases,
  hand-written ``__annotations__``, ``ForwardRef("expr")``, ``TypeVar(bound="expr")``),
  their findings placed on the string and naming the route;
- for a rule with ``forbid-reflection``, reflection that no static reading can resolve
  is a finding of its own (KG008): ``__builtins__``, ``__loader__``, ``__spec__``, ``globals()``,
  ``locals()``, ``vars()``, frame and function internals, ``__subclasses__`` and the
  class graph, importer machinery, also as literal keys, ``.get`` keys, match keys;
- star imports, non-literal dynamic imports and non-literal ``getattr`` on a guarded
  name are findings in every guarded module, whatever the rule's lists;
- ``# kernel-guard: ignore[CODE] reason`` suppresses that code on its line (or, alone
  on a line, on the next); one without a reason, or suppressing nothing, is KG011;
- columns are reported in characters: `ast` gives UTF-8 byte offsets, converted per line.

Speed: the file is parsed once; a regular expression over the (folded) text finds the
lines that can matter (``import`` lines first, then lines naming an interesting alias or
a reflective name), and only statements spanning those lines are visited. Everything
else is never walked; the symbol table is built only for files where a guarded
builtin's name may be bound inside a function.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import collections
import contextlib
import io
import os
import re
import symtable
import sys
import tokenize
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from functools import cache, lru_cache
from typing import Final

from kernel.guard.model import Rule, ViolationCode
from kernel.guard.patterns import CallMatcher, module_set, twin_of

__all__ = ["FileScan", "ImportFact", "RawFinding", "module_file", "module_imports", "scan_source"]

ImportFact = tuple[str, str, int, int, str]
"""``(module, name, line, byte column, kind)``; ``name`` is ``""`` for ``import m`` and
for dynamic imports; ``kind`` is ``"runtime"``, ``"typing"`` or ``"dynamic"``."""

RawFinding = tuple[int, int, str, str, str]
"""``(line, character column (1-based), code, rule, message)``."""

FileScan = tuple[list[ImportFact], list[RawFinding]]

_BUILTIN_NAMES: Final = frozenset(dir(builtins))
_DYNAMIC_IMPORTERS: Final = frozenset(
    {"builtins.__import__", "importlib.import_module", "importlib.__import__"}
)
_GETATTR: Final = "builtins.getattr"
_VARS: Final = "builtins.vars"
_REFLECTIVE_ATTRS: Final = frozenset(
    {
        # the builtins and globals of a module, a function or a frame
        "__builtins__", "__globals__", "f_builtins", "f_globals", "f_locals",
        # frames reached from generators, coroutines, tracebacks and other frames
        "f_back", "gi_frame", "cr_frame", "ag_frame", "tb_frame", "_getframe", "currentframe",
        # objects one step from anything: bound self (``print.__self__`` is builtins)
        # and the class graph (``object.__subclasses__()`` lists every class)
        "__self__", "__subclasses__", "__bases__", "__base__", "__mro__",
        "__getattribute__",
        # importer machinery
        "__loader__", "__spec__", "meta_path", "path_hooks", "path_importer_cache",
    }
)  # fmt: skip
"""Attribute names (also as literal keys and match keys) that KG008 reports."""
_REFLECTIVE_NAMES: Final = frozenset({"__builtins__", "__loader__", "__spec__"})
"""Module globals that KG008 reports wherever they are named."""
_REFLECTIVE_CALLS: Final = frozenset(
    {"builtins.globals", "builtins.locals", "inspect.stack", "inspect.trace",
     "inspect.getouterframes", "inspect.getinnerframes"}
)  # fmt: skip
_ATTR_FUNCS: Final = frozenset(
    {_GETATTR, "builtins.setattr", "builtins.delattr", "builtins.hasattr"}
)
_TC_ATTR_RX: Final = re.compile(rb"\.[ \t\\]*TYPE_CHECKING|['\"]TYPE_CHECKING['\"]")
_TC_READ_RX: Final = re.compile(
    rb"[ \t]*(?:el)?if[ \t]+(?:not[ \t]+)?[\w.]+\.TYPE_CHECKING[ \t]*:[ \t]*(?:#.*)?$"
)
_SUPPRESS_RX: Final = re.compile(r"#\s*kernel-guard:\s*ignore\[([A-Z0-9, ]+)\](.*)$")
_MAPPING_READS: Final = frozenset({"get", "pop", "setdefault", "__getitem__"})
_ALWAYS: Final = frozenset(
    {
        "builtins",
        "importlib",
        "inspect",
        *_DYNAMIC_IMPORTERS,
        *_REFLECTIVE_CALLS,
        *_ATTR_FUNCS,
        _VARS,
    }
)
_TC_NAMES: Final = frozenset({"typing.TYPE_CHECKING", "typing_extensions.TYPE_CHECKING"})
_TYPING: Final = ("typing.", "typing_extensions.")
_GENERIC_BUILTINS: Final = frozenset(
    {"builtins.list", "builtins.dict", "builtins.tuple", "builtins.set", "builtins.frozenset",
     "builtins.type"}
)  # fmt: skip
"""Subscripted outside annotations, these keep a string argument that
`typing.get_type_hints` evaluates (``list["expr"]`` as ``ForwardRef``)."""
_FORWARD_REFS: Final = frozenset({"typing.ForwardRef", "typing_extensions.ForwardRef"})
_TYPE_VARS: Final = frozenset({"typing.TypeVar", "typing_extensions.TypeVar"})
_FUNCS: Final = (ast.FunctionDef, ast.AsyncFunctionDef)
_MAX_ROUNDS: Final = 8


def _literal_str(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _is_text(node: ast.expr) -> bool:
    """A string or f-string literal (text a library may evaluate as code)."""
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def _span(stmt: ast.stmt) -> tuple[int, int]:
    start = stmt.lineno
    decorators = getattr(stmt, "decorator_list", None)
    if decorators:
        start = min(start, decorators[0].lineno)
    return start, stmt.end_lineno or stmt.lineno


_BOUND_RX: dict[str, tuple[re.Pattern[bytes], ...]] = {}
_WORD: Final = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_RX_CACHE: dict[str, re.Pattern[bytes]] = {}
_BUILTINS_CACHE: dict[int, tuple[CallMatcher, frozenset[str]]] = {}


def _name_rx(name: str) -> re.Pattern[bytes]:
    # A leading literal lets `re` skip ahead with a fast substring search; the word
    # boundary before the name is checked by hand (``\bname`` would be 10x slower).
    rx = _RX_CACHE.get(name)
    if rx is None:
        if len(_RX_CACHE) > 4096:
            _RX_CACHE.clear()
        rx = _RX_CACHE[name] = re.compile(re.escape(name.encode("utf-8")) + rb"\b")
    return rx


def _lines_of(data: bytes, names: Iterable[str]) -> list[int]:
    """Sorted 1-based numbers of the lines where one of ``names`` occurs as a word.

    A superset is fine (a string or comment only costs a visit); a miss is not: any
    identifier that is one of ``names`` is found.
    """
    positions: list[int] = []
    word = _WORD
    for name in names:
        # `in` runs CPython's fast substring search; most names are absent from a file.
        if name.encode("utf-8") not in data:
            continue
        for m in _name_rx(name).finditer(data):
            start = m.start()
            if start == 0 or data[start - 1] not in word:
                positions.append(start)
    if not positions:
        return []
    positions.sort()
    out: list[int] = []
    line, pos = 1, 0
    for start in positions:
        line += data.count(b"\n", pos, start)
        pos = start
        if not out or out[-1] != line:
            out.append(line)
    return out


def _interesting_builtins(matcher: CallMatcher) -> frozenset[str]:
    """Builtin names worth searching for under ``matcher`` (memoised per matcher)."""
    entry = _BUILTINS_CACHE.get(id(matcher))
    if entry is None or entry[0] is not matcher:
        names = frozenset(
            n
            for n in _BUILTIN_NAMES
            if f"builtins.{n}" in _ALWAYS or matcher.interesting(f"builtins.{n}")
        )
        if len(_BUILTINS_CACHE) > 256:
            _BUILTINS_CACHE.clear()
        entry = _BUILTINS_CACHE[id(matcher)] = (matcher, names)
    return entry[1]


_COMPREHENSIONS: Final = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPE_NAMES: Final = {
    ast.Lambda: "lambda",
    ast.ListComp: "listcomp",
    ast.SetComp: "setcomp",
    ast.DictComp: "dictcomp",
    ast.GeneratorExp: "genexpr",
}


def _scope_name(node: ast.AST) -> str:
    """The name `symtable` gives the scope ``node`` opens."""
    if isinstance(node, (*_FUNCS, ast.ClassDef)):
        return node.name
    return _SCOPE_NAMES.get(type(node), "")


class _FunctionInfo:
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


_Scope = tuple[tuple[ast.AST, _FunctionInfo], ...]


class _Scanner:
    """State of one file's scan; see the module docstring for the rules."""

    def __init__(
        self,
        *,
        data: bytes,
        search: bytes,
        tree: ast.Module,
        module: str,
        is_package: bool,
        rules: Sequence[Rule],
        matcher: CallMatcher,
    ) -> None:
        self.data = data
        self.search = search
        self.tree = tree
        self.module = module
        self.is_package = is_package
        self.rules = rules
        self.guarded = ",".join(sorted(r.name for r in rules))
        self.reflection = ",".join(sorted(r.name for r in rules if r.forbid_reflection))
        effect_rules = [r for r in rules if r.effects and r.forbid_calls]
        self.effect_matcher = (
            CallMatcher((r.name, p) for r in effect_rules for p in r.forbid_calls)
            if effect_rules
            else None
        )
        self.matcher = matcher
        self.imports: list[ImportFact] = []
        self.findings: list[tuple[int, int, str, str, str]] = []  # byte columns until the end
        self.bindings: dict[str, str] = {}
        self.import_names: dict[str, str] = {}  # every import binding, typing-only too
        self.loaded: dict[str, list[str]] = {}  # `import a.b`: a -> [a.b]
        self.aliases: set[str] = set()  # names bound by assignment (re-binding)
        self.tc_guards: list[tuple[list[tuple[ast.expr, bool]], int]] = []
        self.future_annotations = False
        self.import_sites: dict[str, list[int]] = {}
        self.bound_objects: list[tuple[ast.stmt, str, int]] = []
        self.tc_stored: bool | None = None
        self.site_counts: collections.Counter[str] | None = None
        self.module_shadows: dict[str, int] = {}
        self.local_call: int | None = None
        self.class_bound: list[tuple[int, set[str]]] = []
        self.reflective_seen: set[int] = set()
        self.reach_seen: set[tuple[int, int, str]] = set()
        self.text_calls: set[int] = set()  # functions called with a string argument
        self.typed_strings: set[int] = set()  # strings checked as code typing evaluates
        self.in_annotation = False
        self.rules_key = tuple(rules)
        self.deleted: set[str] | None = None
        self.top_index = 1 << 30
        self.symtables: dict[tuple[str, int], list[symtable.SymbolTable]] | None = None
        self.lines: list[int] = []
        self.new_names = False
        self.functions: dict[int, _FunctionInfo] = {}
        self.assigned: dict[str, list[ast.expr | None]] = {}
        self.maybe_bound: dict[str, list[int]] = {}
        self.builtins_of_interest = _interesting_builtins(matcher)

    # ---------------------------------------------------------------- import pass
    def import_pass(self) -> None:
        self.lines = _lines_of(self.search, ("import",))
        if self.lines:
            self._imports(self.tree.body, [])

    def _hit(self, stmt: ast.stmt) -> bool:
        start, end = _span(stmt)
        i = bisect.bisect_left(self.lines, start)
        return i < len(self.lines) and self.lines[i] <= end

    def _tc_test(self, test: ast.expr) -> tuple[ast.expr, bool] | None:
        negated = False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        # Any name may be an alias (`from typing import TYPE_CHECKING as TC`): every
        # plain name or attribute test is a candidate, and `_is_tc` decides.
        if isinstance(test, (ast.Name, ast.Attribute)):
            return test, negated
        return None

    def _imports(self, body: Sequence[ast.stmt], guards: list[tuple[ast.expr, bool]]) -> None:
        for stmt in body:
            if not self._hit(stmt):
                continue
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    index = self._record_import(alias.name, "", stmt, guards)
                    if alias.asname:
                        self._bind_import(alias.asname, alias.name, index)
                    else:
                        head = alias.name.split(".", 1)[0]
                        self._bind_import(head, head, index)
                        if head != alias.name:
                            # `import email.utils` loads `email.utils`: what it binds
                            # is reached as `email.utils.x`, as with `from email import`.
                            self.loaded.setdefault(head, []).append(alias.name)
            elif isinstance(stmt, ast.ImportFrom):
                self._import_from(stmt, guards)
            elif isinstance(stmt, ast.If):
                tc = self._tc_test(stmt.test)
                if tc is None:
                    self._imports(stmt.body, guards)
                    self._imports(stmt.orelse, guards)
                else:
                    expr, negated = tc
                    self._imports(stmt.body, [*guards, (expr, negated)])
                    self._imports(stmt.orelse, [*guards, (expr, not negated)])
            else:
                for child in _child_bodies(stmt):
                    self._imports(child, guards)

    def _record_import(
        self, module: str, name: str, node: ast.stmt, guards: list[tuple[ast.expr, bool]]
    ) -> int:
        if guards:
            self.tc_guards.append((guards, len(self.imports)))
        self.imports.append((module, name, node.lineno, node.col_offset, "runtime"))
        return len(self.imports) - 1

    def _bind_import(self, name: str, qual: str, index: int) -> None:
        self.bindings[name] = qual
        self.import_names[name] = qual
        self.import_sites.setdefault(name, []).append(index)

    def _import_from(self, stmt: ast.ImportFrom, guards: list[tuple[ast.expr, bool]]) -> None:
        base = stmt.module or ""
        if stmt.level:
            parts = self.module.split(".")
            if not self.is_package:
                parts = parts[:-1]
            up = stmt.level - 1
            if up >= len(parts):
                # KG005: Python itself refuses this; nothing can be resolved.
                self._finding(
                    stmt,
                    ViolationCode.UNRESOLVABLE_DYNAMIC,
                    self.guarded,
                    f"relative import (level {stmt.level}) beyond the top-level package",
                )
                return
            prefix = ".".join(parts[: len(parts) - up])
            base = f"{prefix}.{base}" if prefix and base else (prefix or base)
        if base == "__future__":
            if any(a.name == "annotations" for a in stmt.names):
                self.future_annotations = True
            return
        for alias in stmt.names:
            if alias.name == "*":
                self._record_import(base, "", stmt, guards)
                if self.rules:
                    # KG003: a star import binds names nobody can see statically.
                    self._finding(
                        stmt,
                        ViolationCode.STAR_IMPORT,
                        self.guarded,
                        f"star import from {base!r} in a guarded module",
                    )
                continue
            index = self._record_import(base, alias.name, stmt, guards)
            qual = f"{base}.{alias.name}"
            self._bind_import(alias.asname or alias.name, qual, index)
            self.bound_objects.append((stmt, qual, index))

    def bound_object_rules(self) -> None:
        """KG004: binding a forbidden object by a runtime import is a reference to it.
        A typing-only import never runs, so it binds nothing (see `prune_typing`)."""
        for stmt, qual, index in self.bound_objects:
            if self.imports[index][4] == "typing":
                continue
            hits = self.matcher.match(qual) or [
                hit for twin in twin_of(qual) for hit in self.matcher.match(twin)
            ]
            for rule, pattern in hits:
                self._finding(
                    stmt,
                    ViolationCode.FORBIDDEN_CALL,
                    rule,
                    f"import of {qual!r} is forbidden (forbid-calls {pattern!r})",
                )

    def prune_typing(self) -> None:
        """A name bound only by typing-only imports is unbound at run time: a use of it
        raises NameError and reaches nothing, so it resolves to nothing."""
        for name, sites in self.import_sites.items():
            if all(self.imports[i][4] == "typing" for i in sites) and not self._other_sites(
                name, len(sites)
            ):
                self.bindings.pop(name, None)

    def resolve_typing(self) -> None:
        """Mark imports under a real TYPE_CHECKING guard as typing-only."""
        if not self.tc_guards:
            return
        trusted: dict[str, bool] = {}
        for guards, index in self.tc_guards:
            typing_only = False
            for expr, in_else in guards:
                key = ast.dump(expr)
                if key not in trusted:
                    trusted[key] = self._is_tc(expr)
                if trusted[key] and not in_else:
                    typing_only = True
                    break
            if typing_only:
                m, n, line, col, _ = self.imports[index]
                self.imports[index] = (m, n, line, col, "typing")

    def _is_tc(self, expr: ast.expr) -> bool:
        """Is ``expr`` a TYPE_CHECKING that is false at run time?

        Trusted, when the file stores no attribute named TYPE_CHECKING
        (``typing.TYPE_CHECKING = True`` fakes it for everyone): a name every binding of
        which is an import of `typing`'s or `typing_extensions`' constant (also under an
        alias) or ``= False``; or ``typing.TYPE_CHECKING`` with `typing` bound once, by
        its import. Any other binding of the name (a loop target, an import of something
        else, ``global``) makes the test an ordinary run-time condition.
        """
        q = self._resolve(expr, ())
        if q not in _TC_NAMES and not (isinstance(expr, ast.Name) and "TYPE_CHECKING" in expr.id):
            return False
        if self._tc_attribute_stored():
            return False
        base: ast.expr = expr
        while isinstance(base, ast.Attribute):
            base = base.value
        if not isinstance(base, ast.Name):
            return False
        imported = self.import_sites.get(base.id, [])
        if isinstance(expr, ast.Attribute):
            # `typing.TYPE_CHECKING`: the module name is bound once, by its import.
            return q in _TC_NAMES and len(imported) == 1 and not self._other_sites(base.id, 1)
        # A name: every binding is an import of the real constant or `= False` (the
        # import-free idiom, also as the fallback of a `try: from typing import ...`).
        assigned = self._assignments_to(base.id) if "TYPE_CHECKING" in base.id else []
        return (
            bool(imported or assigned)
            and all(f"{self.imports[i][0]}.{self.imports[i][1]}" in _TC_NAMES for i in imported)
            and all(isinstance(v, ast.Constant) and v.value is False for v in assigned)
            and not self._other_sites(base.id, len(imported) + len(assigned))
        )

    def _tc_attribute_stored(self) -> bool:
        if self.tc_stored is None and b"TYPE_CHECKING" not in self.search:
            self.tc_stored = False
        if self.tc_stored is None and not any(
            not _TC_READ_RX.match(self._line_at(m.start()))
            for m in _TC_ATTR_RX.finditer(self.search)
        ):
            # Every attribute mention is a plain `if x.TYPE_CHECKING:` test and the name
            # is never a string (no setattr): nothing stores it, no walk needed.
            self.tc_stored = False
        if self.tc_stored is None:
            self.tc_stored = any(
                (
                    isinstance(node, ast.Attribute)
                    and node.attr == "TYPE_CHECKING"
                    and not isinstance(node.ctx, ast.Load)
                )
                or (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in ("setattr", "delattr")
                    and len(node.args) >= 2
                    and _literal_str(node.args[1]) == "TYPE_CHECKING"
                )
                for node in ast.walk(self.tree)
            )
        return self.tc_stored

    def _line_at(self, pos: int) -> bytes:
        start = self.search.rfind(b"\n", 0, pos) + 1
        end = self.search.find(b"\n", pos)
        return self.search[start : end if end >= 0 else len(self.search)]

    def _other_sites(self, name: str, expected: int) -> bool:
        """Does ``name`` have more binding sites in the file than ``expected``?

        Counts every form that binds: import aliases, assignment and loop/with/except
        targets, walrus, ``del``, ``global``/``nonlocal``, parameters, definitions and
        match captures.
        """
        if self.site_counts is None:
            counts: collections.Counter[str] = collections.Counter()
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Name):
                    if not isinstance(node.ctx, ast.Load):
                        counts[node.id] += 1
                elif isinstance(node, ast.alias):
                    counts[node.asname or node.name.split(".", 1)[0]] += 1
                elif isinstance(node, (*_FUNCS, ast.ClassDef)):
                    counts[node.name] += 1
                elif isinstance(node, ast.arg):
                    counts[node.arg] += 1
                elif isinstance(node, (ast.Global, ast.Nonlocal)):
                    counts.update(node.names)
                elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
                    if node.name:
                        counts[node.name] += 1
                elif isinstance(node, ast.MatchMapping) and node.rest:
                    counts[node.rest] += 1
            self.site_counts = counts
        count = self.site_counts[name]
        return count > expected

    def _assignments_to(self, name: str) -> list[ast.expr | None]:
        cached = self.assigned.get(name)
        if cached is not None:
            return cached
        found: list[ast.expr | None] = []
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for sub in ast.walk(t):
                        if isinstance(sub, ast.Name) and sub.id == name:
                            value = None if isinstance(node, ast.AugAssign) else node.value
                            found.append(value)
            elif isinstance(node, (*_FUNCS, ast.ClassDef)) and node.name == name:
                found.append(None)
        self.assigned[name] = found
        return found

    # ------------------------------------------------------------- reference pass
    def module_level_shadows(self) -> None:
        """Builtin names the module binds unconditionally, with the first such statement.

        Only a statement directly in the module body binds for sure (one under ``if``,
        ``try``, ``for`` or ``with`` may not run); an annotation without a value binds
        nothing. A use in a later top-level statement sees the binding. A use inside a
        function body runs when the function is called, so it sees the module's own
        binding wherever that is defined (a DSL's ``compile`` below its first use, a
        recursive ``def eval``), provided no top-level statement before the binding
        calls one of the module's own functions or classes (which could run the body
        first: then only later top-level uses are shadowed). A name deleted at module
        scope (`_deleted`) is never shadowed.
        """
        for index, stmt in enumerate(self.tree.body):
            for name in _unconditional_names(stmt):
                if name in _BUILTIN_NAMES:
                    self.module_shadows.setdefault(name, index)

    def _first_local_call(self) -> int:
        """Index of the first top-level statement that calls (or decorates with) a
        function or class the module defines at top level; past the end when none."""
        defined = {s.name for s in self.tree.body if isinstance(s, (*_FUNCS, ast.ClassDef))}
        for index, stmt in enumerate(self.tree.body):
            if not defined:
                break
            for node in _eager_nodes(stmt):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in defined
                ):
                    return index
                if isinstance(node, (*_FUNCS, ast.ClassDef)) and any(
                    isinstance(d, ast.Name) and d.id in defined for d in node.decorator_list
                ):
                    return index
        return 1 << 30

    def _deleted(self, name: str) -> bool:
        """Is ``name`` deleted at module scope: by a ``del`` outside any function or
        class body, or in a function that declares it ``global``? A ``del`` of a
        function's own local of the same name deletes nothing of the module."""
        if self.deleted is None:
            self.deleted = (
                _module_deletes(self.tree.body, frozenset(), module=True)
                if _lines_of(self.search, ("del",))
                else set()
            )
        return name in self.deleted

    def _module_shadowed(self, name: str, scope: _Scope) -> bool:
        first = self.module_shadows.get(name)
        if first is None or self._deleted(name):
            return False
        if any(isinstance(node, (*_FUNCS, ast.Lambda)) for node, _i in scope):
            if self.local_call is None:
                self.local_call = self._first_local_call()
            if first < self.local_call:
                return True  # a function body: it runs after the module binds the name
        return first < self.top_index

    def interesting_names(self) -> set[str]:
        names = {n for n, q in self.bindings.items() if self._interesting(q)}
        names.update(n for n in _interesting_builtins(self.matcher) if n not in self.bindings)
        names.update(_REFLECTIVE_ATTRS)
        return names

    def _interesting(self, q: str) -> bool:
        return (
            any(self._interesting(sub) for sub in self.loaded.get(q, ()))
            or q in _ALWAYS
            or self.matcher.interesting(q)
            or any(self.matcher.interesting(t) for t in twin_of(q))
            or self._reaches(q)
            or self._installed(q)
        )

    def _reaches(self, q: str) -> bool:
        """Can something forbidden be reached through the attributes of module ``q``?

        Follows the modules that ``q`` (and what it imports, three levels deep) binds by
        import, read statically from their source: ``json.codecs`` is the module
        `codecs`, ``dataclasses.inspect.os`` is `os`. True when one of them breaks an
        import rule of this file or leads to a ``forbid-calls`` name.
        """
        if not self.rules:
            return False
        key = (q, self.rules_key)
        known = _REACHES.get(key)
        if known is None:
            known = False
            # `from json import codecs` binds a module through another one: start from
            # what the written name is (`codecs`), not only from the name itself.
            names, reached = _through(q) if "." in q else ((), ())
            for _written, module in reached:
                if self.matcher.interesting(module) or any(
                    _import_problem(r, (module,)) for r in self.rules
                ):
                    known = True
            seen = {q, *names}
            frontier = [q, *names]
            for _depth in range(3):
                following: list[str] = []
                for module in frontier:
                    for targets in _module_table(module).values():
                        for target in targets:
                            if target in seen:
                                continue
                            seen.add(target)
                            if self.matcher.interesting(target):
                                known = True
                            elif _module_file(target) is not None or target in _NO_SOURCE:
                                if any(_import_problem(r, (target,)) for r in self.rules):
                                    known = True
                                following.append(target)
                        if known:
                            break
                    if known:
                        break
                if known or not following:
                    break
                frontier = following
            if len(_REACHES) > 65536:
                _REACHES.clear()
            _REACHES[key] = known
        return known

    def reference_pass(self) -> None:
        searched: set[str] = set()
        imports_before = len(self.imports)
        findings_before = len(self.findings)
        for _ in range(_MAX_ROUNDS):
            names = self.interesting_names()
            if names <= searched:
                break
            searched = names
            del self.imports[imports_before:]
            del self.findings[findings_before:]
            self.reach_seen.clear()
            self.reflective_seen.clear()
            self.lines = _lines_of(self.search, names)
            if not self.lines:
                break
            self.new_names = False
            for index, stmt in enumerate(self.tree.body):
                if self._hit(stmt):
                    self.top_index = index
                    self._stmt(stmt, ())
            self.top_index = 1 << 30
            if not self.new_names:
                break

    def _stmts(self, body: Sequence[ast.stmt], scope: _Scope) -> None:
        for stmt in body:
            if self._hit(stmt):
                self._stmt(stmt, scope)

    def _stmt(self, stmt: ast.stmt, scope: _Scope) -> None:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            return  # handled by the import pass
        if isinstance(stmt, _FUNCS):
            for d in stmt.decorator_list:
                self._expr(d, scope)
            self._arguments(stmt.args, scope)
            if stmt.returns is not None:
                self._annotation(stmt.returns, scope)
            info = self.functions.get(id(stmt))
            if info is None:
                info = self.functions[id(stmt)] = _FunctionInfo(stmt)
            self._stmts(stmt.body, ((stmt, info), *scope))
        elif isinstance(stmt, ast.ClassDef):
            for e in (*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords)):
                self._expr(e, scope)
            # A subclass inherits its base's class methods: `class Stamp(datetime)`,
            # then `Stamp.now()` is `datetime.now()` (the first guarded base decides).
            for base in stmt.bases:
                q = self._resolve(base, scope)
                if q is not None and self._interesting(q):
                    if self.bindings.get(stmt.name) != q:
                        self.new_names = self.new_names or stmt.name not in self.bindings
                        self.bindings[stmt.name] = q
                        self.aliases.add(stmt.name)
                    break
            # A class body runs in its own namespace: a name it bound in an earlier
            # statement (an enum member `open = "open"`) is that value, not the builtin.
            bound: set[str] = set()
            self.class_bound.append((len(scope), bound))
            try:
                for sub in stmt.body:
                    if self._hit(sub):
                        self._stmt(sub, scope)
                    if isinstance(sub, ast.Delete):
                        bound.difference_update(
                            n.id
                            for t in sub.targets
                            for n in ast.walk(t)
                            if isinstance(n, ast.Name)
                        )
                    bound.update(_unconditional_names(sub))
            finally:
                self.class_bound.pop()
        elif isinstance(stmt, ast.If):
            tc = self._tc_test(stmt.test)
            if tc is not None and self._is_tc(tc[0]):
                # Typing-only branch: never executed, its imports were classified above.
                self._stmts(stmt.orelse if not tc[1] else stmt.body, scope)
                return
            self._expr(stmt.test, scope)
            self._stmts(stmt.body, scope)
            self._stmts(stmt.orelse, scope)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self._expr(stmt.target, scope)
            self._expr(stmt.iter, scope)
            self._stmts(stmt.body, scope)
            self._stmts(stmt.orelse, scope)
        elif isinstance(stmt, ast.While):
            self._expr(stmt.test, scope)
            self._stmts(stmt.body, scope)
            self._stmts(stmt.orelse, scope)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self._expr(item.context_expr, scope)
                if item.optional_vars is not None:
                    self._expr(item.optional_vars, scope)
            self._stmts(stmt.body, scope)
        elif isinstance(stmt, (ast.Try, ast.TryStar)):
            self._stmts(stmt.body, scope)
            for h in stmt.handlers:
                if h.type is not None:
                    self._expr(h.type, scope)
                self._stmts(h.body, scope)
            self._stmts(stmt.orelse, scope)
            self._stmts(stmt.finalbody, scope)
        elif isinstance(stmt, ast.Match):
            self._expr(stmt.subject, scope)
            for case in stmt.cases:
                self._pattern(case.pattern, scope)
                if case.guard is not None:
                    self._expr(case.guard, scope)
                self._stmts(case.body, scope)
        elif isinstance(stmt, ast.Assign):
            self._expr(stmt.value, scope)
            for t in stmt.targets:
                self._expr(t, scope)
            self._rebind(stmt.targets, stmt.value, scope)
            self._hand_annotations(stmt.targets, stmt.value, scope)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self._expr(stmt.value, scope)
                self._rebind([stmt.target], stmt.value, scope)
            self._annotation(stmt.annotation, scope)
            self._expr(stmt.target, scope)
        else:
            self._generic(stmt, scope)

    def _arguments(self, args: ast.arguments, scope: _Scope) -> None:
        for default in (*args.defaults, *(d for d in args.kw_defaults if d is not None)):
            self._expr(default, scope)
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if a is not None and a.annotation is not None:
                self._annotation(a.annotation, scope)

    def _annotation(self, node: ast.expr, scope: _Scope, depth: int = 0) -> None:
        """Annotations can run: without the future import they are evaluated with the
        definition; with it (or written as strings) `typing.get_type_hints` evaluates
        them. Either way they are checked as code, and a string in a forward-reference
        position is parsed and checked too, its findings placed on the string."""
        outer, self.in_annotation = self.in_annotation, True
        try:
            self._expr(node, scope)
        finally:
            self.in_annotation = outer
        if depth > 4:
            return
        for sub in _forward_refs(node, self.import_names):
            self._typed_string(sub, scope, None, depth)

    def _typing_subscript(self, node: ast.Subscript, scope: _Scope) -> None:
        """``List["expr"]`` outside an annotation (an alias): `typing.get_type_hints`
        evaluates its strings when the alias is used in an annotation."""
        head = self._resolve(node.value, scope)
        value = node.value
        if head is None and isinstance(value, ast.Name) and not self._bound_lines(value.id):
            head = f"builtins.{value.id}"  # a builtin no rule names resolves to None
        if head is not None and (head.startswith(_TYPING) or head in _GENERIC_BUILTINS):
            shown = head.rsplit(".", 1)[-1]
            for sub in _forward_refs(node, self.import_names):
                self._typed_string(sub, scope, f"an alias {shown}[...]")

    def _typed_string(
        self, sub: ast.expr | None, scope: _Scope, route: str | None, depth: int = 0
    ) -> None:
        """A string that `typing` evaluates as code: parsed and checked as code, its
        findings (and imports) placed on the string; outside an annotation they name
        the ``route``."""
        if not isinstance(sub, ast.Constant) or not isinstance(sub.value, str):
            return
        if id(sub) in self.typed_strings:
            return
        self.typed_strings.add(id(sub))
        try:
            parsed = ast.parse(sub.value.strip(), mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return  # not an expression: typing raises, nothing runs
        before, imported = len(self.findings), len(self.imports)
        self._annotation(parsed.body, scope, depth + 1)
        where = (sub.lineno, sub.col_offset)
        for i in range(before, len(self.findings)):
            _line, _col, code, rule, message = self.findings[i]
            if route is not None:
                message = f"{message}, in a string typing evaluates as code ({route})"
            self.findings[i] = (*where, code, rule, message)
        for i in range(imported, len(self.imports)):
            module, name, _line, _col, kind = self.imports[i]
            self.imports[i] = (module, name, *where, kind)

    def _hand_annotations(
        self, targets: Sequence[ast.expr], value: ast.expr, scope: _Scope
    ) -> None:
        """``f.__annotations__ = {"x": "expr"}`` (or one key of it): the strings are
        evaluated by `typing.get_type_hints`, as written annotations are."""
        for target in targets:
            holder = target.value if isinstance(target, ast.Subscript) else target
            name = holder.attr if isinstance(holder, ast.Attribute) else getattr(holder, "id", "")
            if name != "__annotations__":
                continue
            route = "hand-written __annotations__, evaluated by typing.get_type_hints"
            if isinstance(target, ast.Subscript):
                self._typed_string(value, scope, route)
            elif isinstance(value, ast.Dict):
                for item in value.values:
                    self._typed_string(item, scope, route)

    def _reflective(self, node: ast.AST, what: str, *, always: bool = False) -> None:
        rules = self.guarded if always else self.reflection
        if rules and id(node) not in self.reflective_seen:
            self.reflective_seen.add(id(node))
            # KG008: reflection a static reading cannot follow reaches anything (opted
            # into by a rule's forbid-reflection); a store to TYPE_CHECKING always is.
            self._finding(
                node,
                ViolationCode.REFLECTIVE_REACH,
                rules,
                f"reflective reach through {what} cannot be resolved statically",
            )

    def _reflective_chain(self, node: ast.expr, scope: _Scope) -> None:
        cur: ast.expr = node
        literal_key = False
        while True:
            if isinstance(cur, ast.Attribute):
                if cur.attr == "__dict__":
                    # `m.__dict__["name"]` is resolved like `m.name`; an object's own
                    # namespace (`cls.__dict__`) reaches nothing a guarded name does.
                    base = None if literal_key else self._resolve(cur.value, scope)
                    if base is not None and self._interesting(base):
                        self._reflective(cur, f"'{base}.__dict__'")
                elif cur.attr in _REFLECTIVE_ATTRS:
                    self._reflective(cur, f"'.{cur.attr}'")
                elif cur.attr == "TYPE_CHECKING" and not isinstance(cur.ctx, ast.Load):
                    self._reflective(cur, "a store to 'TYPE_CHECKING'", always=True)
                cur = cur.value
                literal_key = False
            elif isinstance(cur, ast.Subscript):
                key = _literal_str(cur.slice)
                if key in _REFLECTIVE_ATTRS:
                    self._reflective(cur, f"[{key!r}]")
                cur = cur.value
                literal_key = key is not None
                continue
            elif isinstance(cur, ast.Call):
                cur = cur.func
                literal_key = False
            else:
                break
        if isinstance(cur, ast.Name) and cur.id in _REFLECTIVE_NAMES:
            self._reflective(cur, repr(cur.id))

    def _pattern(self, pattern: ast.pattern, scope: _Scope) -> None:
        for sub in ast.walk(pattern):
            if isinstance(sub, ast.MatchMapping):
                for key in sub.keys:
                    literal = _literal_str(key)
                    if literal in _REFLECTIVE_ATTRS:
                        self._reflective(key, f"a match key {literal!r}")
            elif isinstance(sub, ast.MatchClass):
                for attr in sub.kwd_attrs:
                    if attr in _REFLECTIVE_ATTRS:
                        self._reflective(sub, f"a match attribute {attr!r}")
        self._generic(pattern, scope)

    def _generic(self, node: ast.AST, scope: _Scope) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._expr(child, scope)
            elif isinstance(child, ast.stmt):
                self._stmt(child, scope)
            else:
                self._generic(child, scope)

    def _rebind(self, targets: Sequence[ast.expr], value: ast.expr, scope: _Scope) -> None:
        pairs: list[tuple[ast.expr, ast.expr]] = []
        for t in targets:
            if isinstance(t, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
                pairs.extend(zip(t.elts, value.elts, strict=False))
            else:
                pairs.append((t, value))
        for target, val in pairs:
            if not isinstance(target, ast.Name):
                continue
            q = self._resolve(val, scope)
            if q is None and isinstance(val, ast.Call):
                # An instance of a known class reaches its class methods:
                # `EPOCH = datetime.datetime(2020, 1, 1)`, then `EPOCH.now()`.
                made = self._resolve(val.func, scope)
                q = made if made is not None and _is_class(made) else None
            if q is not None and self._interesting(q) and self.bindings.get(target.id) != q:
                if target.id not in self.bindings:
                    self.new_names = True
                self.bindings[target.id] = q
                self.aliases.add(target.id)

    def _expr(self, node: ast.expr, scope: _Scope) -> None:
        if isinstance(node, ast.Name):
            if node.id in _REFLECTIVE_NAMES:
                self._reflective(node, repr(node.id))
            if isinstance(node.ctx, ast.Load):
                q = self._name(node.id, scope)
                if q is not None:
                    self._use(q, node, node.id)
            return
        if isinstance(node, ast.Constant):
            return
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            if isinstance(node, ast.Subscript) and not self.in_annotation:
                self._typing_subscript(node, scope)
            self._reflective_chain(node, scope)
            q = self._resolve(node, scope)
            if q is not None and self._use(q, node, None):
                # Reported once for the whole chain; a dynamic import at its base is
                # still recorded (and flagged when not literal).
                base: ast.expr = node
                while isinstance(base, (ast.Attribute, ast.Subscript)):
                    base = base.value
                if isinstance(base, ast.Call):
                    self._call(base, scope)
                return
            self._generic(node, scope)
            return
        if isinstance(node, ast.Call):
            if any(_is_text(a) for a in (*node.args, *(k.value for k in node.keywords))):
                self.text_calls.add(id(node.func))
            self._call(node, scope)
            q = self._resolve(node, scope)
            if q is not None:
                self._use(q, node, None)
            self._generic(node, scope)
            return
        if isinstance(node, ast.Lambda):
            self._arguments(node.args, scope)
            self._expr(node.body, ((node, _FunctionInfo(node)), *scope))
            return
        if isinstance(node, _COMPREHENSIONS):
            # The first iterable is evaluated in the enclosing scope, the rest inside.
            inner = ((node, _FunctionInfo(node)), *scope)
            for i, gen in enumerate(node.generators):
                self._expr(gen.iter, scope if i == 0 else inner)
                self._expr(gen.target, inner)
                for cond in gen.ifs:
                    self._expr(cond, inner)
            if isinstance(node, ast.DictComp):
                self._expr(node.key, inner)
                self._expr(node.value, inner)
            else:
                self._expr(node.elt, inner)
            return
        if isinstance(node, ast.NamedExpr):
            self._expr(node.value, scope)
            self._rebind([node.target], node.value, scope)
            return
        self._generic(node, scope)

    def _call(self, node: ast.Call, scope: _Scope) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _MAPPING_READS and node.args:
            key = _literal_str(node.args[0])
            if key in _REFLECTIVE_ATTRS:
                self._reflective(node, f".{func.attr}({key!r})")
        fq = self._resolve(func, scope)
        if fq is None:
            return
        if fq in _REFLECTIVE_CALLS or (fq == _VARS and not node.args):
            self._reflective(node, f"{fq.removeprefix('builtins.')}()")
        elif fq in _ATTR_FUNCS and len(node.args) >= 2:
            key = _literal_str(node.args[1])
            faked = key == "TYPE_CHECKING" and fq != _GETATTR
            if key in _REFLECTIVE_ATTRS or faked:
                self._reflective(
                    node, f"{fq.removeprefix('builtins.')}(..., {key!r})", always=faked
                )
        first = node.args[0] if node.args else None
        if fq in _FORWARD_REFS:
            self._typed_string(first, scope, f"{fq}(...), evaluated by its _evaluate")
        elif fq in _TYPE_VARS:
            for k in node.keywords:
                if k.arg == "bound":
                    self._typed_string(k.value, scope, f"{fq}(bound=...)")
        if fq in _DYNAMIC_IMPORTERS:
            literal = _literal_str(first)
            if literal is None:
                name = next((k.value for k in node.keywords if k.arg == "name"), None)
                literal = _literal_str(name)
            target = literal
            if literal is not None and literal.startswith(".") and fq == "importlib.import_module":
                target = self._relative_literal(literal, node)
            if target is None or (
                literal is not None and literal.startswith(".") and target == literal
            ):
                if self.rules:
                    # KG005: a dynamic import whose target cannot be known statically.
                    self._finding(
                        node,
                        ViolationCode.UNRESOLVABLE_DYNAMIC,
                        self.guarded,
                        f"{fq.removeprefix('builtins.')}() with a non-literal module name",
                    )
                return
            self.imports.append((target, "", node.lineno, node.col_offset, "dynamic"))
        elif fq == _GETATTR and len(node.args) >= 2 and _literal_str(node.args[1]) is None:
            base = self._resolve(node.args[0], scope)
            if base is not None and self._interesting(base) and self.rules:
                # KG005: getattr on a guarded name with a computed attribute.
                self._finding(
                    node,
                    ViolationCode.UNRESOLVABLE_DYNAMIC,
                    self.guarded,
                    f"getattr() on {base.removeprefix('builtins.')!r} with a non-literal name",
                )

    def _relative_literal(self, literal: str, node: ast.Call) -> str:
        package = next((k.value for k in node.keywords if k.arg == "package"), None)
        if package is None and len(node.args) > 1:
            package = node.args[1]
        pkg = _literal_str(package)
        if pkg is None:
            return literal
        level = len(literal) - len(literal.lstrip("."))
        parts = pkg.split(".")
        if level - 1 >= len(parts):
            return literal
        prefix = ".".join(parts[: len(parts) - (level - 1)])
        rest = literal[level:]
        return f"{prefix}.{rest}" if rest else prefix

    def _name(self, name: str, scope: _Scope) -> str | None:
        for _fn, info in scope:
            if name in info.params:
                return None
        q = self.bindings.get(name)
        if q is not None:
            return q
        if name == "__builtins__":
            return "builtins"
        if name in _BUILTIN_NAMES:
            if name not in self.builtins_of_interest:
                # Nothing reached through an uninteresting builtin can break a rule.
                return None
            if scope and self._bound_in(name, scope[-1][0]):
                for node, _info in scope:
                    if isinstance(node, _COMPREHENSIONS):
                        # Its iteration targets are its own (3.12 inlines comprehensions
                        # and `symtable` no longer lists them; the scoping is unchanged).
                        if any(
                            isinstance(n, ast.Name) and n.id == name
                            for gen in node.generators
                            for n in ast.walk(gen.target)
                        ):
                            return None
                        continue
                    if self._local(name, node):
                        return None
                    break  # global in the innermost function: the module decides
            if (
                self.class_bound
                and self.class_bound[-1][0] == len(scope)
                and name in self.class_bound[-1][1]
            ):
                return None  # bound earlier in the class body being executed
            if self._module_shadowed(name, scope):
                return None
            return f"builtins.{name}"
        return None

    def _local(self, name: str, node: ast.AST) -> bool:
        """Is ``name`` local to (or a closure variable of) the function scope ``node``?

        Answered by CPython's own symbol table (`symtable`), built only for files where
        a guarded builtin's name may be bound inside a function: a parameter, an
        assignment, a ``del`` or an annotation in a function makes the name local for the
        whole function (never the builtin); a name bound only in a nested function or a
        comprehension is not local to the outer one. When the table cannot say (no
        unique match), the name is treated as the builtin (fail closed).
        """
        if self.symtables is None:
            self.symtables = {}
            try:
                top = symtable.symtable(self.data.decode("utf-8"), "<guard>", "exec")
            except (SyntaxError, ValueError, RecursionError):
                top = None
            stack = [top] if top is not None else []
            while stack:
                table = stack.pop()
                for child in table.get_children():
                    key = (child.get_name().strip("<>"), child.get_lineno())
                    self.symtables.setdefault(key, []).append(child)
                    stack.append(child)
        key = (_scope_name(node), getattr(node, "lineno", 0))
        tables = self.symtables.get(key)
        if not tables:
            return False
        for table in tables:
            try:
                sym = table.lookup(name)
            except KeyError:
                return False
            if not (sym.is_local() or sym.is_free()):
                return False
        return True

    def _bound_lines(self, name: str) -> list[int]:
        """Lines where ``name`` may be bound (cheap, conservative; sorted).

        Every binding form has the name followed by ``=``, ``:``, ``,``, ``)``, ``]``,
        ``;``, a comment, an augmented operator, ``in`` or the end of the line
        (assignment, annotation, parameter, tuple/``for``/``with``/``except``/``import``
        target, match capture), or preceded by ``def``/``class``. A function whose
        lines hold no such occurrence does not re-bind the builtin, and its precise
        walk is skipped.
        """
        known = self.maybe_bound.get(name)
        if known is None:
            rxs = _BOUND_RX.get(name)
            if rxs is None:
                n = re.escape(name.encode("utf-8"))
                rxs = _BOUND_RX[name] = (
                    re.compile(n + rb"\b[ \t]*(?:[=:,)\];#\n\r]|[-+*/%&|^@<>]+=|in\b|\Z)"),
                    re.compile(rb"def[ \t]+" + n + rb"\b"),
                    re.compile(rb"class[ \t]+" + n + rb"\b"),
                )
            positions = [
                m.start()
                for m in rxs[0].finditer(self.search)
                if not m.start()
                or (self.search[m.start() - 1] not in _WORD and self.search[m.start() - 1] != 0x2E)
            ]
            positions += [m.start() for rx in rxs[1:] for m in rx.finditer(self.search)]
            positions.sort()
            known = []
            line, pos = 1, 0
            for start in positions:
                line += self.search.count(b"\n", pos, start)
                pos = start
                known.append(line)
            self.maybe_bound[name] = known
        return known

    def _bound_in(self, name: str, fn: ast.AST) -> bool:
        lines = self._bound_lines(name)
        if not lines:
            return False
        start = getattr(fn, "lineno", 1)
        end = getattr(fn, "end_lineno", None) or start
        i = bisect.bisect_left(lines, start)
        return i < len(lines) and lines[i] <= end

    def _resolve(self, node: ast.expr, scope: _Scope) -> str | None:
        if isinstance(node, ast.Name):
            return self._name(node.id, scope)
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value, scope)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Subscript):
            key = _literal_str(node.slice)
            if key is None:
                return None
            v = node.value
            if isinstance(v, ast.Attribute) and v.attr == "__dict__":
                base = self._resolve(v.value, scope)
                return None if base is None else f"{base}.{key}"
            if (
                isinstance(v, ast.Call)
                and len(v.args) == 1
                and self._resolve(v.func, scope) == _VARS
            ):
                base = self._resolve(v.args[0], scope)
                return None if base is None else f"{base}.{key}"
            if isinstance(v, ast.Name) and self._name(v.id, scope) == "builtins":
                return f"builtins.{key}"
            return None
        if isinstance(node, ast.Call):
            if (
                isinstance(node.func, ast.Name)
                and node.func.id == "type"
                and "type" not in self.bindings
                and len(node.args) == 1
                and not node.keywords
            ):
                return self._resolve(node.args[0], scope)  # `type(EPOCH).now()`
            fq = self._resolve(node.func, scope)
            if fq == _GETATTR and len(node.args) >= 2:
                key = _literal_str(node.args[1])
                base = self._resolve(node.args[0], scope)
                return None if key is None or base is None else f"{base}.{key}"
            if fq in _DYNAMIC_IMPORTERS and node.args:
                literal = _literal_str(node.args[0])
                if literal is None or literal.startswith("."):
                    return None
                has_fromlist = len(node.args) >= 4 or any(
                    k.arg == "fromlist" for k in node.keywords
                )
                if fq == "importlib.import_module" or has_fromlist:
                    return literal
                return literal.split(".", 1)[0]
        return None

    def _use(self, q: str, node: ast.expr, via: str | None) -> bool:
        hits = self.matcher.match(q)
        if "." in q and not q.startswith("builtins."):
            names, reached = _through(q)
            for written, module in reached:
                key = (node.lineno, node.col_offset, module)
                if key not in self.reach_seen:
                    self.reach_seen.add(key)
                    self.imports.append(
                        (module, "", node.lineno, node.col_offset, f"reach:{written}")
                    )
            if not hits:
                for other in names:
                    hits = self.matcher.match(other)
                    if hits:
                        # Reported under the written name, with what it is.
                        return self._report(other, node, None, f" (that is {q!r})")
        if not hits:
            for twin in twin_of(q):
                if self.matcher.match(twin):
                    # `_io.open` is `open`, `posix.system` is `os.system`.
                    return self._report(twin, node, None, f" (as {q!r})")
            return self._effect(q, node)
        return self._report(q, node, via, "")

    def _installed(self, q: str) -> bool:
        """Is ``q`` in an installed module with source, outside this project's package
        (project modules are checked by their own rules and by ``transitive``)?"""
        top = q.split(".", 1)[0]
        return (
            self.effect_matcher is not None
            and top != self.module.split(".", 1)[0]
            and top not in _NO_EFFECT_MAP
            and _module_file(top) is not None
        )

    def _forbidden_name(self, name: str) -> bool:
        matcher = self.effect_matcher
        return matcher is not None and (
            bool(matcher.match(name)) or any(matcher.match(t) for t in twin_of(name))
        )

    def _effect(self, q: str, node: ast.expr) -> bool:
        """KG012: a use of installed code whose source reaches a forbid-calls name."""
        if "." not in q or not self._installed(q):
            return False
        from kernel.guard.effects import effect_chain

        text = id(node) in self.text_calls
        memo = _EFFECT_MEMO.setdefault((self.rules_key, text), {})
        chain = effect_chain(q, self._forbidden_name, memo, skip=_NO_EFFECT_MAP, text=text)
        if chain is None or self.effect_matcher is None:
            return False
        last = chain[-1]
        matcher = self.effect_matcher
        hits = matcher.match(last) or [h for t in twin_of(last) for h in matcher.match(t)]
        rules = {r.name: r for r in self.rules}
        for rule, pattern in hits:
            allowed = module_set(rules[rule].allow_reach) if rule in rules else None
            if allowed is not None and any(allowed.match(link) for link in chain):
                continue  # through a package whose own effects the rule accepts
            self._finding(
                node,
                ViolationCode.EFFECT_REACH,
                rule,
                f"use of {q!r} reaches forbidden {last.removeprefix('builtins.')!r} "
                f"(forbid-calls {pattern!r}) through {' -> '.join(chain)}",
            )
        return True

    def _report(self, q: str, node: ast.expr, via: str | None, note: str) -> bool:
        hits = self.matcher.match(q)
        shown = q.removeprefix("builtins.")
        if via is not None and via in self.aliases:
            note = f" (via alias {via!r})"
        elif via is not None and not note and via != shown and "." in q:
            note = f" (imported as {via!r})"
        for rule, pattern in hits:
            # KG004: a reference to a forbidden qualified name.
            self._finding(
                node,
                ViolationCode.FORBIDDEN_CALL,
                rule,
                f"use of {shown!r}{note} is forbidden (forbid-calls {pattern!r})",
            )
        return True

    def _finding(self, node: ast.AST, code: ViolationCode, rule: str, message: str) -> None:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        self.findings.append((line, col, code.value, rule, message))

    # ---------------------------------------------------------------- import rules
    def import_rules(self) -> None:
        for module, name, line, col, kind in self.imports:
            targets = (module, f"{module}.{name}") if name else (module,)
            shown = targets[-1]
            for rule in self.rules:
                problem = _import_problem(rule, targets)
                if problem is None:
                    continue
                code, pattern = problem
                if kind == "typing":
                    typing_ok = module_set(rule.allow_typing_imports)
                    if any(typing_ok.match(t) is not None for t in targets):
                        continue
                    # KG006: typing-only imports are reported apart from runtime ones.
                    detail = (
                        f"forbidden (forbid-imports {pattern!r})"
                        if code is ViolationCode.FORBIDDEN_IMPORT
                        else "not in allow-imports"
                    )
                    self.findings.append(
                        (
                            line,
                            col,
                            ViolationCode.TYPING_ONLY_IMPORT.value,
                            rule.name,
                            f"typing-only import of {shown!r} is {detail} "
                            "and not in allow-typing-imports",
                        )
                    )
                    continue
                how = "dynamic import" if kind == "dynamic" else "import"
                what = f"{how} of {shown!r}"
                if kind.startswith("reach:"):
                    what = f"reach-through {kind[6:]!r} (module {shown!r})"
                if code is ViolationCode.FORBIDDEN_IMPORT:
                    message = f"{what} is forbidden (forbid-imports {pattern!r})"
                else:
                    message = f"{what} is not in allow-imports"
                self.findings.append((line, col, code.value, rule.name, message))

    def raw_findings(self) -> list[RawFinding]:
        marks = self._suppressions() if b"kernel-guard:" in self.data else {}
        if not self.findings and not marks:
            return []
        lines = self.data.split(b"\n")
        out: list[RawFinding] = []
        used: set[tuple[int, str]] = set()
        for line, col, code, rule, message in _merged(self.findings):
            mark = marks.get(line)
            if mark is not None and code in mark[0] and mark[1]:
                used.add((line, code))
                continue  # suppressed, with the reason written next to it
            text = lines[line - 1] if 0 < line <= len(lines) else b""
            prefix = text[:col]
            chars = col if prefix.isascii() else len(prefix.decode("utf-8", "replace"))
            out.append((line, chars + 1, code, rule, message))
        for line, (codes, reason, col) in sorted(marks.items()):
            # KG011: a suppression must say why, and must still suppress something.
            if not reason:
                out.append(
                    (
                        line,
                        col,
                        ViolationCode.BAD_SUPPRESSION.value,
                        self.guarded,
                        "suppression without a reason (write one after the codes)",
                    )
                )
            for code in sorted(codes):
                if reason and (line, code) not in used:
                    out.append(
                        (
                            line,
                            col,
                            ViolationCode.BAD_SUPPRESSION.value,
                            self.guarded,
                            f"suppression of {code} matches no finding on this line",
                        )
                    )
        return out

    def _suppressions(self) -> dict[int, tuple[frozenset[str], str, int]]:
        """``# kernel-guard: ignore[KG008] reason`` comments: line -> (codes, reason,
        1-based column). Read from tokens, so the text inside a string is never one; at
        the end of a line it covers that line, alone on a line it covers the next."""
        if not self.rules:
            return {}
        out: dict[int, tuple[frozenset[str], str, int]] = {}
        lines = self.data.decode("utf-8", "replace").split("\n")
        inside: set[int] = set()  # lines of multi-line strings: their text is no comment
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Constant, ast.JoinedStr)) and node.end_lineno:
                inside.update(range(node.lineno + 1, node.end_lineno + 1))
        for number, text in enumerate(lines, start=1):
            if "kernel-guard:" not in text or number in inside:
                continue
            tokens: list[tokenize.TokenInfo] = []
            # A line closing a bracket ends in an error: the tokens before it still count.
            with contextlib.suppress(tokenize.TokenError, SyntaxError):
                tokens.extend(tokenize.generate_tokens(io.StringIO(text).readline))
            comments = [t for t in tokens if t.type == tokenize.COMMENT]
            for tok in comments:
                m = _SUPPRESS_RX.match(tok.string)
                if m is None:
                    continue
                codes = frozenset(c.strip() for c in m.group(1).split(",") if c.strip())
                codes -= {ViolationCode.BAD_SUPPRESSION.value}
                reason = m.group(2).strip(" -:\t")
                # On a line of its own, the comment speaks for the next line.
                alone = not text[: tok.start[1]].strip()
                out[number + alone] = (codes, reason, tok.start[1] + 1)
        return out


_NAMED_RX: Final = re.compile(r"((?:typing-only |dynamic )?import of )'([^']*)'( .*)")


def _merged(
    findings: Iterable[tuple[int, int, str, str, str]],
) -> list[tuple[int, int, str, str, str]]:
    """One finding per statement, code and target: ``from subprocess import run, PIPE``
    is one "import of 'subprocess.PIPE', 'subprocess.run' is forbidden", not two lines
    that differ only in the name; the same finding of two rules names both rules."""
    out: list[tuple[int, int, str, str, str]] = []
    groups: dict[tuple[int, int, str, str, str, str], list[str]] = {}
    for line, col, code, rule, message in findings:
        m = _NAMED_RX.fullmatch(message)
        if m is None:
            out.append((line, col, code, rule, message))
            continue
        key = (line, col, code, rule, m.group(1), m.group(3))
        names = groups.setdefault(key, [])
        if m.group(2) not in names:
            names.append(m.group(2))
    for (line, col, code, rule, head, tail), names in groups.items():
        listed = ", ".join(repr(n) for n in sorted(names))
        out.append((line, col, code, rule, f"{head}{listed}{tail}"))
    # The same finding under two rules is one finding naming both.
    rules: dict[tuple[int, int, str, str], set[str]] = {}
    for line, col, code, rule, message in out:
        rules.setdefault((line, col, code, message), set()).update(rule.split(","))
    return [
        (line, col, code, ",".join(sorted(r for r in names if r)), message)
        for (line, col, code, message), names in rules.items()
    ]


def _import_problem(rule: Rule, targets: tuple[str, ...]) -> tuple[ViolationCode, str] | None:
    forbidden = module_set(rule.forbid_imports)
    # A C twin or real name (`_socket`, `posix`) is the module it implements.
    for t in (*targets, *(twin for name in targets for twin in twin_of(name))):
        pattern = forbidden.match(t)
        if pattern is not None:
            return ViolationCode.FORBIDDEN_IMPORT, pattern
    if rule.allow_imports is not None:
        allowed = module_set(rule.allow_imports)
        if all(allowed.match(t) is None for t in targets):
            return ViolationCode.IMPORT_NOT_ALLOWED, ""
    return None


_REACHES: dict[tuple[str, tuple[Rule, ...]], bool] = {}
_EFFECT_MEMO: dict[tuple[tuple[Rule, ...], bool], dict[str, tuple[str, ...] | None]] = {}
_NO_EFFECT_MAP: Final = frozenset({"builtins", "typing", "typing_extensions"})
"""Not followed by the effect map: ``typing``'s subscription compiles a string argument
(``List["expr"]``) but not ``List[int]``, and no reading of ``typing``'s source tells
which: evaluation of strings is left to the annotation check and the dynamic guard."""
_NO_SOURCE: Final = frozenset(sys.builtin_module_names)
_ALIAS_SUBMODULES: Final = frozenset({"os.path"})
"""Attributes that Python also registers as importable submodules (`sys.modules`)."""
_IMPORT_NOISE: Final = re.compile(r"[()\\\n\r\t ]+")
_IMPORT_PLAIN: Final = re.compile(r"import ([\w., ]+)")
_IMPORT_FROM: Final = re.compile(r"from (\.*)([\w.]*) import ([\w., *]+)")
_IMPORT_ITEM: Final = re.compile(r"([A-Za-z_][\w.]*)(?: as ([A-Za-z_]\w*))?")
_IMPORT_WORD_RX: Final = re.compile(rb"import\b")
_IMPORT_HEAD_RX: Final = re.compile(rb"(?:.*[:;])?[ \t]*((?:from[ \t]+\.*[\w.]*[ \t]+)?)")
"""What may precede the word ``import`` on its line (group 1: the statement's start)."""


@cache
def _listing(directory: str) -> dict[str, str]:
    """Module names directly in ``directory`` -> file (``.py``) or folder (packages)."""
    out: dict[str, str] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return out
    for entry in entries:
        name = entry.name
        if name.endswith(".py"):
            out.setdefault(name[:-3], entry.path)
        elif "." not in name and entry.is_dir():
            out.setdefault(name, entry.path)
    return out


@cache
def _module_file(module: str) -> str | None:
    """The source file of an installed module, found without importing anything.

    Searched like the path finder does, in the directories of `sys.path` (one listing
    per directory, memoised): a package is a folder with ``__init__.py``.
    """
    if module.split(".", 1)[0] in sys.builtin_module_names:
        return None
    directories = [d or "." for d in sys.path]
    parts = module.split(".")
    for i, part in enumerate(parts):
        found = None
        for directory in directories:
            candidate = _listing(directory).get(part)
            if candidate is not None and (
                candidate.endswith(".py") or os.path.isfile(os.path.join(candidate, "__init__.py"))
            ):
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


@cache
def _module_table(module: str) -> dict[str, tuple[str, ...]]:
    """Names an installed module binds by import -> what they are bound to.

    Read from its source (import statements anywhere in the file, every branch: a name
    bound to ``posixpath`` on one platform and ``ntpath`` on another has both). A module
    without Python source (builtin, extension) binds nothing that can be read.
    """
    path = _module_file(module)
    if path is None:
        return {}
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return {}
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    table: dict[str, tuple[str, ...]] = {}
    snippets: list[str] = []
    seen_starts: set[int] = set()
    for hit in _IMPORT_WORD_RX.finditer(data):
        # Every import statement holds the word `import`: found with a literal search,
        # then the statement is read from its line (`import x`, `from x import y`, also
        # after `:` or `;` as in `if x: import y`).
        pos = hit.start()
        line_start = data.rfind(b"\n", 0, pos) + 1
        head = _IMPORT_HEAD_RX.fullmatch(data, line_start, pos)
        if head is None:
            continue
        start = head.start(1)
        if start in seen_starts:
            continue
        seen_starts.add(start)
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        line = data[start:end]
        if line.count(b"(") > line.count(b")"):
            close = data.find(b")", end)
            end = len(data) if close < 0 else close + 1
        while data[start:end].rstrip().endswith(b"\\"):
            nxt = data.find(b"\n", end + 1)
            end = len(data) if nxt < 0 else nxt
        text = data[start:end].strip().decode("utf-8", "replace")
        snippets.extend(part.strip() for part in text.split(";"))
    for snippet in snippets:
        # Import statements have a tiny grammar: read without `compile` (this runs for
        # every installed module a guarded file reaches). A line that does not fit it
        # is not an import statement (a docstring's example): skipped.
        pairs: list[tuple[str, str]] = []
        text = _IMPORT_NOISE.sub(" ", snippet.split("#", 1)[0] if "(" not in snippet else
                                 re.sub(r"#[^\n]*", "", snippet)).strip()  # fmt: skip
        plain = _IMPORT_PLAIN.fullmatch(text)
        if plain is not None:
            for item in plain.group(1).split(","):
                got = _IMPORT_ITEM.fullmatch(item.strip())
                if got is None:
                    pairs = []
                    break
                name, alias = got.group(1), got.group(2)
                first = name.split(".", 1)[0]
                pairs.append((alias, name) if alias else (first, first))
        else:
            frm = _IMPORT_FROM.fullmatch(text)
            if frm is None:
                continue
            dots, base, items = len(frm.group(1)), frm.group(2), frm.group(3)
            if dots:
                parts = package.split(".")
                keep = len(parts) - (dots - 1)
                if keep <= 0:
                    continue
                prefix = ".".join(parts[:keep])
                base = f"{prefix}.{base}" if base else prefix
            for item in items.split(","):
                got = _IMPORT_ITEM.fullmatch(item.strip())
                if got is None or "." in got.group(1):
                    if item.strip() not in ("", "*"):
                        pairs = []
                        break
                    continue
                pairs.append((got.group(2) or got.group(1), f"{base}.{got.group(1)}"))
        for name, target in pairs:
            if target not in table.get(name, ()):
                table[name] = (*table.get(name, ()), target)
    return table


@lru_cache(maxsize=65536)
def _through(q: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Other names of ``q`` through modules' import bindings, and the modules reached.

    ``json.codecs.open`` is also ``codecs.open`` (and reaches module `codecs` as
    ``json.codecs``). A documented alias submodule (``os.path``) is not a reach.
    """
    parts = q.split(".")
    current = {parts[0]}
    reached: list[tuple[str, str]] = []
    for part in parts[1:]:
        following: set[str] = set()
        for cur in current:
            written = f"{cur}.{part}"
            targets = _module_table(cur).get(part, ()) if written not in _ALIAS_SUBMODULES else ()
            if not targets:
                following.add(written)
                continue
            for target in targets:
                following.add(target)
                if _module_file(target) is not None or target in _NO_SOURCE:
                    reached.append((written, target))
        current = set(sorted(following)[:8])
    names = tuple(sorted(current - {q}))
    return names, tuple(reached)


def _forward_refs(node: ast.expr, bindings: dict[str, str]) -> Iterator[ast.Constant]:
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


def _unconditional_names(stmt: ast.stmt) -> list[str]:
    """Names a statement of a module or class body binds whenever it runs: definitions,
    assignments (not a bare annotation), imports."""
    names: list[str] = []
    if isinstance(stmt, (*_FUNCS, ast.ClassDef)):
        names.append(stmt.name)
    elif isinstance(stmt, ast.Assign):
        for t in stmt.targets:
            names.extend(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        if isinstance(stmt.target, ast.Name):
            names.append(stmt.target.id)
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        for alias in stmt.names:
            if alias.name != "*":
                names.append(alias.asname or alias.name.split(".", 1)[0])
    return names


def _module_deletes(
    body: Sequence[ast.stmt], globals_: frozenset[str], *, module: bool
) -> set[str]:
    """Names a ``del`` removes from the module namespace in ``body``: at module level
    (``module``) every deleted name, inside a function only the names it declares
    ``global`` (``globals_``); class bodies delete from their own namespace."""
    out: set[str] = set()
    for stmt in body:
        for node in _shallow_walk(stmt):
            if isinstance(node, ast.Delete):
                for t in node.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name) and (module or n.id in globals_):
                            out.add(n.id)
            elif isinstance(node, _FUNCS):
                declared = frozenset(
                    name
                    for sub in _shallow_walk_body(node.body)
                    if isinstance(sub, ast.Global)
                    for name in sub.names
                )
                if declared:
                    out |= _module_deletes(node.body, declared, module=False)
            elif isinstance(node, ast.ClassDef):
                out |= _module_deletes(node.body, frozenset(), module=False)
    return out


def _shallow_walk(stmt: ast.stmt) -> Iterator[ast.AST]:
    """``stmt`` and what it holds, not descending into function, lambda or class
    bodies (a definition itself is yielded)."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (*_FUNCS, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _shallow_walk_body(body: Sequence[ast.stmt]) -> Iterator[ast.AST]:
    for stmt in body:
        yield from _shallow_walk(stmt)


def _eager_nodes(stmt: ast.stmt) -> Iterator[ast.AST]:
    """What runs when ``stmt`` runs: a definition's decorators, defaults and (for a
    class) bases and body, never a function's body."""
    for node in _shallow_walk(stmt):
        yield node
        if isinstance(node, (*_FUNCS, ast.ClassDef)):
            eager: list[ast.AST] = [*node.decorator_list]
            if isinstance(node, ast.ClassDef):
                eager += [*node.bases, *(k.value for k in node.keywords), *node.body]
            else:
                eager += [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
            for sub in eager:
                if isinstance(sub, ast.stmt):
                    yield from _eager_nodes(sub)
                else:
                    yield from ast.walk(sub)  # a lambda here is not called here either


def _child_bodies(stmt: ast.stmt) -> Iterable[Sequence[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        value = getattr(stmt, field, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield value
    for handler in getattr(stmt, "handlers", ()):
        yield handler.body
    for case in getattr(stmt, "cases", ()):
        yield case.body


def _prepare(data: bytes) -> tuple[bytes, bytes, str | bytes]:
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
    search = data
    if not data.isascii():
        search = unicodedata.normalize("NFKC", data.decode("utf-8", "replace")).encode("utf-8")
    return data, search, source


def scan_source(
    data: bytes,
    *,
    module: str,
    is_package: bool = False,
    rules: Sequence[Rule] = (),
    matcher: CallMatcher | None = None,
    filename: str = "<source>",
) -> FileScan:
    """Scan one file's bytes: its imports and the findings of ``rules`` (which cover it).

    With no ``rules`` only imports are collected (static ones and literal dynamic ones),
    for transitive reach. Never raises on bad input: unreadable or unparseable source
    is one `ViolationCode.UNPARSEABLE` finding.
    """
    try:
        data, search, source = _prepare(data)
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        # KG010: report, never skip silently and never crash.
        line = e.lineno or 1
        return [], [
            (
                line,
                max(e.offset or 1, 1),
                ViolationCode.UNPARSEABLE.value,
                "",
                f"cannot parse: {e.msg}",
            )
        ]
    except (RecursionError, MemoryError) as e:
        # KG010: nesting deeper than the parser (or this process) can follow.
        return [], [(1, 1, ViolationCode.UNPARSEABLE.value, "", f"cannot parse: {e!r}")]
    except (ValueError, LookupError) as e:
        # KG010: undecodable bytes, unknown coding cookie, NUL bytes.
        return [], [(1, 1, ViolationCode.UNPARSEABLE.value, "", f"cannot parse: {e}")]
    if matcher is None:
        matcher = CallMatcher((r.name, p) for r in rules for p in r.forbid_calls)
    scanner = _Scanner(
        data=data,
        search=search,
        tree=tree,
        module=module,
        is_package=is_package,
        rules=rules,
        matcher=matcher,
    )
    scanner.import_pass()
    scanner.resolve_typing()
    scanner.prune_typing()
    scanner.bound_object_rules()
    scanner.module_level_shadows()
    scanner.reference_pass()
    if rules:
        scanner.import_rules()
    return scanner.imports, scanner.raw_findings()


module_file = _module_file
"""The source file of an installed module (found without importing), or None."""


def _is_class(q: str) -> bool:
    from kernel.guard.effects import is_class

    return is_class(q)


module_imports = _module_table
"""Names an installed module binds by import -> the qualified names bound."""
