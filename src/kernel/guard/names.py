"""The import pass of the guard's per-file scan (`kernel.guard.scan`): what each name of
a module is bound to by its imports, which imports are typing-only, and the import
rules; the state every later pass of the scan shares.

The rules it enforces are listed in `kernel.guard.scan`'s docstring (imports wherever
they are, ``TYPE_CHECKING`` trusted only by its bindings, suppressions with a reason).
"""

from __future__ import annotations

import ast
import bisect
import builtins
import collections
import contextlib
import io
import operator
import re
import symtable
import tokenize
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

from kernel.guard.model import Rule, ViolationCode
from kernel.guard.patterns import TWIN_HEADS, CallMatcher, module_set, twin_of
from kernel.guard.problems import _import_problem, _ruled_under
from kernel.guard.syntax import (
    FunctionInfo,
    Scope,
    child_bodies,
    lines_of,
    literal_str,
)

__all__ = ["FileScan", "ImportFact", "ImportPass", "RawFinding"]

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
_END_LINE: Final = operator.attrgetter("end_lineno")  # set on every parsed statement
_NAMED_RX: Final = re.compile(r"((?:typing-only |dynamic )?import of )'([^']*)'( .*)")


_BUILTINS_CACHE: dict[int, tuple[CallMatcher, frozenset[str]]] = {}


class Run:
    """What every file scanned with the same rules and matcher shares: built once per
    run (`run_for`), where building it per file cost more than some files' scan."""

    __slots__ = (
        "bound_heads",
        "bound_hits",
        "builtins",
        "dead_heads",
        "effect_matcher",
        "guarded",
        "import_findings",
        "interesting",
        "matcher",
        "reaches",
        "reflection",
        "ruled_modules",
        "rules",
        "rules_key",
        "uncalled",
    )

    def __init__(self, rules: tuple[Rule, ...], matcher: CallMatcher) -> None:
        self.rules = rules
        self.matcher = matcher
        self.rules_key = rules
        self.guarded = ",".join(sorted(r.name for r in rules))
        self.reflection = ",".join(sorted(r.name for r in rules if r.forbid_reflection))
        effect_rules = [r for r in rules if r.effects and r.forbid_calls]
        self.effect_matcher = (
            CallMatcher((r.name, p) for r in effect_rules for p in r.forbid_calls)
            if effect_rules
            else None
        )
        self.builtins = _interesting_builtins(matcher)
        # (module, name, kind) -> the import rules' findings of such an import, but
        # its place (`ImportPass.import_rules`).
        self.import_findings: dict[tuple[str, str, str], tuple[tuple[str, str, str], ...]] = {}
        # Module -> can an import of it or under it break an import rule (`_ruled_under`).
        self.ruled_modules: dict[str, bool] = {}
        # A name bound by ``from m import name``: the forbid-calls patterns it breaks.
        self.bound_hits: dict[str, tuple[tuple[str, str], ...]] = {}
        # Top-level name -> may a name under it break a forbid-calls pattern (`_import_from`).
        self.bound_heads: dict[str, bool] = {}
        # Per top package of the file scanned: is a qualified name of interest
        # (`ShadowPass._interesting`, but a name `loaded` holds).
        self.interesting: dict[str, dict[str, bool]] = {}
        # Top-level name -> is no name under it of interest (`ShadowPass._dead`).
        self.dead_heads: dict[str, bool] = {}
        # Can a module name reach something forbidden (`ShadowPass._reaches`).
        self.reaches: dict[str, bool] = {}
        # The `_CALLED_ONLY` builtins `ShadowPass._marks` may search as ``name(``.
        self.uncalled: tuple[str, ...] | None = None


_RUNS: dict[tuple[int, ...], Run] = {}


def run_for(rules: Sequence[Rule], matcher: CallMatcher) -> Run:
    """The `Run` of ``rules`` and ``matcher``, by identity: the engine hands every file
    of a check the same matcher and equal rules (a tuple built per file, of the same
    records). The entry keeps them alive, so an identity is never reused."""
    key = (id(matcher), *map(id, rules))
    run = _RUNS.get(key)
    if run is None or run.matcher is not matcher or len(run.rules) != len(rules):
        if len(_RUNS) > 64:
            _RUNS.clear()
        run = _RUNS[key] = Run(tuple(rules), matcher)
    return run


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


class ImportPass:
    """State of one file's scan, its import pass and its import rules."""

    # Slots: past 30 attributes an instance dictionary shares no keys (each read a lookup,
    # each store a resize), and the passes read these thousands of times per file.
    __slots__ = (
        "aliases", "assigned", "bindings", "binds_memo", "body_lines", "bound_objects",
        "builtins_of_interest", "class_bound", "data", "deleted", "dotted",
        "effect_matcher", "findings", "functions", "future_annotations", "generic_open",
        "guarded", "import_names", "import_sites", "imports", "in_annotation", "in_text",
        "interesting_memo", "is_package", "lines", "loaded", "local_call", "marks",
        "matcher", "maybe_bound", "module", "module_shadows", "new_names", "parsed_texts",
        "reach_seen", "reflection", "reflective_seen", "restart", "round_lines", "rules",
        "rules_key", "run", "seams", "search", "shadowable", "site_counts", "symtables",
        "tc_guards", "tc_stored", "text_calls", "top_index", "tree", "typed_strings",
        "typing_only", "uncalled", "whole", "widened",
    )  # fmt: skip

    if TYPE_CHECKING:
        # The reference pass (`kernel.guard.scan`) defines it.
        def _resolve(self, node: ast.expr, scope: Scope) -> str | None: ...

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
        run = self.run = run_for(rules, matcher)
        self.guarded = run.guarded
        self.reflection = run.reflection
        self.effect_matcher = run.effect_matcher
        self.matcher = matcher
        self.imports: list[ImportFact] = []
        self.findings: list[tuple[int, int, str, str, str]] = []  # byte columns until the end
        self.bindings: dict[str, str] = {}
        self.import_names: dict[str, str] = {}  # every import binding, typing-only too
        self.loaded: dict[str, list[str]] = {}  # `import a.b`: a -> [a.b]
        self.aliases: set[str] = set()  # names bound by assignment (re-binding)
        self.tc_guards: list[tuple[list[tuple[ast.expr, bool]], int]] = []
        self.import_sites: dict[str, list[int]] = {}
        self.bound_objects: list[tuple[ast.stmt, str, int]] = []
        self.class_bound: list[tuple[int, set[str]]] = []
        self.reflective_seen: set[int] = set()
        self.reach_seen: set[tuple[int, int, str]] = set()
        self.text_calls: set[int] = set()  # functions called with a string argument
        self.typed_strings: set[int] = set()  # strings checked as code typing evaluates
        self.parsed_texts: list[ast.AST] = []  # what they parsed to (`_typed_string`)
        self.rules_key = run.rules_key
        self.lines: list[int] = []
        self.binds_memo: dict[tuple[str, ast.AST], bool] = {}  # `ShadowPass._bound_in`
        self.uncalled: list[str] = []  # `_marks`: builtins searched where not called
        self.dotted: dict[str, str] = {}  # `_marks`: names searched as name.module
        self.widened: set[str] = set()  # of those, bound to an interesting module
        self.whole: set[str] = set()  # never searched as name.module (`_rebound`)
        self.functions: dict[int, FunctionInfo] = {}
        self.assigned: dict[str, list[ast.expr | None]] = {}
        self.maybe_bound: dict[str, list[int]] = {}
        self.builtins_of_interest = run.builtins
        # `in_text`: visiting code parsed from a string (its lines are its own).
        self.future_annotations = self.typing_only = self.in_annotation = False
        self.in_text = self.new_names = self.restart = False
        self.tc_stored: bool | None = None
        self.site_counts: collections.Counter[str] | None = None
        self.module_shadows: dict[str, int] | None = None  # `module_level_shadows`
        self.local_call: int | None = None
        self.interesting_memo: dict[str, bool] | None = None
        self.deleted: set[str] | None = None  # `ShadowPass._deleted`
        self.symtables: dict[tuple[str, int], list[symtable.SymbolTable]] | None = None
        self.top_index = 1 << 30
        self.generic_open = 0  # classes (or type aliases) with type parameters being visited

    # ---------------------------------------------------------------- import pass
    def import_pass(self) -> None:
        self.lines = lines_of(self.search, ("import",))
        if self.lines:
            self._imports(self.tree.body, [])

    def _hits(self, body: Sequence[ast.stmt], marked: list[int] | None = None) -> list[int]:
        """Indexes of the statements of ``body`` that span a marked line (``marked``,
        by default `lines`).

        A body's statements follow each other (a statement's decorators come after the
        one before it ends), so the marked lines are walked beside them: the statements
        that end before the next marked line are skipped by bisection on their ends,
        and once no marked line is left the rest of the body is not looked at.
        """
        lines = self.lines if marked is None else marked
        if not lines:
            return []
        count, size = len(lines), len(body)
        k = i = 0
        nxt = lines[0]  # every marked line before it lies before the current statement
        out: list[int] = []
        while i < size:
            stmt = body[i]
            end = stmt.end_lineno or stmt.lineno
            if end < nxt:
                # The statements' ends ascend: the next one reaching the marked line
                # is found by bisection (a class of 200 methods, one of them marked).
                i = bisect.bisect_left(body, nxt, i + 1, size, key=_END_LINE)
                if i == size:
                    break
                stmt = body[i]
                end = stmt.end_lineno or stmt.lineno
            start = stmt.lineno
            if nxt < start:
                decorators = getattr(stmt, "decorator_list", None)
                if decorators:
                    start = min(start, decorators[0].lineno)
                if nxt < start:
                    k = bisect.bisect_left(lines, start, k)
                    if k == count:
                        break
                    nxt = lines[k]
                    if end < nxt:
                        i += 1
                        continue
            out.append(i)
            i += 1
        return out

    def _relative_literal(self, literal: str, node: ast.Call) -> str:
        package = next((k.value for k in node.keywords if k.arg == "package"), None)
        if package is None and len(node.args) > 1:
            package = node.args[1]
        pkg = literal_str(package)
        if pkg is None:
            return literal
        level = len(literal) - len(literal.lstrip("."))
        parts = pkg.split(".")
        if level - 1 >= len(parts):
            return literal
        prefix = ".".join(parts[: len(parts) - (level - 1)])
        rest = literal[level:]
        return f"{prefix}.{rest}" if rest else prefix

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
        for at in self._hits(body):
            stmt = body[at]
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
                for child in child_bodies(stmt):
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
        # `_record_import` and `_bind_import` inlined: a project's files bind thousands
        # of names this way, and the calls cost as much as the work.
        imports, sites, line, col = self.imports, self.import_sites, stmt.lineno, stmt.col_offset
        # Only a name under a package a pattern can match under (or a C twin's) can
        # break a forbid-calls pattern (`bound_object_rules`): asked once per package.
        head = base.split(".", 1)[0]
        live = self.run.bound_heads.get(head)
        if live is None:
            live = head in TWIN_HEADS or self.matcher.may_match_under(head)
            self.run.bound_heads[head] = live
        for alias in stmt.names:
            name = alias.name
            if name == "*":
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
            index = len(imports)
            if guards:
                self.tc_guards.append((guards, index))
            imports.append((base, name, line, col, "runtime"))
            qual = f"{base}.{name}"
            bound = alias.asname or name
            self.bindings[bound] = self.import_names[bound] = qual
            at = sites.get(bound)
            if at is None:
                sites[bound] = [index]
            else:
                at.append(index)
            if live:
                self.bound_objects.append((stmt, qual, index))

    def bound_object_rules(self) -> None:
        """KG004: binding a forbidden object by a runtime import is a reference to it.
        A typing-only import never runs, so it binds nothing (see `prune_typing`). Only
        names a pattern may match under, or a C twin's, are kept (`_import_from`)."""
        memo, matcher = self.run.bound_hits, self.matcher
        for stmt, qual, index in self.bound_objects:
            hits = memo.get(qual)
            if hits is None:
                if len(memo) > 65536:
                    memo.clear()
                hits = memo[qual] = tuple(
                    matcher.match(qual)
                    or [hit for twin in twin_of(qual) for hit in matcher.match(twin)]
                )
            if not hits or self.imports[index][4] == "typing":
                continue
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
        if not self.typing_only:
            return  # no import is typing-only (`resolve_typing`)
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
                self.typing_only = True
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
                    and literal_str(node.args[1]) == "TYPE_CHECKING"
                )
                for node in ast.walk(self.tree)
            )
        return self.tc_stored

    def _finding(self, node: ast.AST, code: ViolationCode, rule: str, message: str) -> None:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        self.findings.append((line, col, code.value, rule, message))

    # ---------------------------------------------------------------- import rules
    def import_rules(self) -> None:
        # A project imports the same names in many files: their findings are worked out
        # once per run, and only placed per import.
        # Most are under a package no rule can rule on: passed over by the module alone.
        memo, ruled_modules = self.run.import_findings, self.run.ruled_modules
        for module, name, line, col, kind in self.imports:
            ruled = ruled_modules.get(module)
            if ruled is None:
                ruled = _ruled_under(self.rules, module.split(".", 1)[0])
                ruled_modules[module] = ruled
            if not ruled:
                continue
            key = (module, name, kind)
            found = memo.get(key)
            if found is None:
                if len(memo) > 65536:
                    memo.clear()
                found = memo[key] = self._import_findings(module, name, kind)
            for code, rule, message in found:
                self.findings.append((line, col, code, rule, message))

    def _import_findings(
        self, module: str, name: str, kind: str
    ) -> tuple[tuple[str, str, str], ...]:
        """``(code, rule, message)`` of every import rule an import breaks."""
        out: list[tuple[str, str, str]] = []
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
                out.append(
                    (
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
            out.append((code.value, rule.name, message))
        return tuple(out)

    def raw_findings(self) -> list[RawFinding]:
        marks = self._suppressions() if b"kernel-guard:" in self.data else {}
        if not self.findings and not marks:
            return []
        # Byte columns are character columns on an ASCII line: the file's lines are
        # split only when one may not be.
        lines = [] if self.data.isascii() else self.data.split(b"\n")
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
