"""Per-file analysis: parse once with `ast`, resolve names, report rule breaks.

Rules this module enforces (each check's comment names its `ViolationCode`):

- imports are seen wherever they are: module level, inside functions, ``try``,
  ``with`` and class bodies; ``import x as y``, ``from x import y as z`` and relative
  imports (``from ..a import b``) resolve to absolute module names;
- ``if TYPE_CHECKING:`` (and ``typing.TYPE_CHECKING``, ``typing_extensions``, a module
  constant ``TYPE_CHECKING = False``, ``if not TYPE_CHECKING: ... else:``) marks imports
  typing-only; a name ``TYPE_CHECKING`` assigned anything else is not trusted;
- a reference is resolved to a qualified name through import aliases, re-binding
  (``f = os.system``), ``getattr(mod, "literal")``, ``mod.__dict__["literal"]``,
  ``vars(mod)["literal"]``, ``__import__("literal")``, ``importlib.import_module("literal")``,
  ``builtins.open`` and ``__builtins__``; every load of a name that resolves to a
  ``forbid-calls`` pattern is a finding, so an alias is caught where it is made and
  where it is used;
- names bound by function parameters, and builtin names re-bound locally or at module
  level, are not the builtin (no false positive on ``def f(open): open()``);
- annotations are skipped under ``from __future__ import annotations`` (never evaluated);
- star imports, non-literal dynamic imports and non-literal ``getattr`` on a guarded
  name are findings in every guarded module, whatever the rule's lists;
- columns are reported in characters: `ast` gives UTF-8 byte offsets, converted per line.

Speed: the file is parsed once; a regular expression over the raw bytes finds the lines
that can matter (``import`` lines first, then lines naming an interesting alias), and
only statements spanning those lines are visited. Everything else is never walked.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import re
from collections.abc import Iterable, Sequence
from typing import Final

from kernel.guard.model import Rule, ViolationCode
from kernel.guard.patterns import CallMatcher, module_set

__all__ = ["FileScan", "ImportFact", "RawFinding", "scan_source"]

ImportFact = tuple[str, str, int, int, str]
"""``(module, name, line, byte column, kind)``; ``name`` is ``""`` for ``import m`` and
for dynamic imports; ``kind`` is ``"runtime"``, ``"typing"`` or ``"dynamic"``."""

RawFinding = tuple[int, int, str, str, str]
"""``(line, character column (1-based), code, rule, message)``."""

FileScan = tuple[list[ImportFact], list[RawFinding]]

_COOKIE_RX: Final = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)
_BUILTIN_NAMES: Final = frozenset(dir(builtins))
_DYNAMIC_IMPORTERS: Final = frozenset(
    {"builtins.__import__", "importlib.import_module", "importlib.__import__"}
)
_GETATTR: Final = "builtins.getattr"
_VARS: Final = "builtins.vars"
_ALWAYS: Final = frozenset({"builtins", "importlib", *_DYNAMIC_IMPORTERS, _GETATTR, _VARS})
_TC_NAMES: Final = frozenset({"typing.TYPE_CHECKING", "typing_extensions.TYPE_CHECKING"})
_FUNCS: Final = (ast.FunctionDef, ast.AsyncFunctionDef)
_MAX_ROUNDS: Final = 8


def _literal_str(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


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


class _FunctionInfo:
    __slots__ = ("params", "stores")

    def __init__(self, fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        a = fn.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
        if a.vararg:
            params.append(a.vararg)
        if a.kwarg:
            params.append(a.kwarg)
        self.params = frozenset(p.arg for p in params)
        self.stores: frozenset[str] | None = None
        if isinstance(fn, ast.Lambda):
            self.stores = frozenset()

    def local_stores(self, fn: ast.AST) -> frozenset[str]:
        if self.stores is None:
            found: set[str] = set()
            declared: set[str] = set()
            for node in ast.walk(fn):
                if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    found.add(node.id)
                elif isinstance(node, (*_FUNCS, ast.ClassDef)) and node is not fn:
                    found.add(node.name)
                elif isinstance(node, (ast.Global, ast.Nonlocal)):
                    declared.update(node.names)
            self.stores = frozenset(found - declared)
        return self.stores


_Scope = tuple[tuple[ast.AST, _FunctionInfo], ...]


class _Scanner:
    """State of one file's scan; see the module docstring for the rules."""

    def __init__(
        self,
        *,
        data: bytes,
        tree: ast.Module,
        module: str,
        is_package: bool,
        rules: Sequence[Rule],
        matcher: CallMatcher,
    ) -> None:
        self.data = data
        self.tree = tree
        self.module = module
        self.is_package = is_package
        self.rules = rules
        self.guarded = ",".join(sorted(r.name for r in rules))
        self.matcher = matcher
        self.imports: list[ImportFact] = []
        self.findings: list[tuple[int, int, str, str, str]] = []  # byte columns until the end
        self.bindings: dict[str, str] = {}
        self.aliases: set[str] = set()  # names bound by assignment (re-binding)
        self.tc_guards: list[tuple[list[tuple[ast.expr, bool]], int]] = []
        self.future_annotations = False
        self.module_shadows: set[str] = set()
        self.lines: list[int] = []
        self.new_names = False
        self.functions: dict[int, _FunctionInfo] = {}
        self.assigned: dict[str, list[ast.expr | None]] = {}
        self.maybe_bound: dict[str, list[int]] = {}
        self.builtins_of_interest = _interesting_builtins(matcher)

    # ---------------------------------------------------------------- import pass
    def import_pass(self) -> None:
        self.lines = _lines_of(self.data, ("import",))
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
        if (isinstance(test, ast.Name) and test.id.endswith("TYPE_CHECKING")) or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            return test, negated
        return None

    def _imports(self, body: Sequence[ast.stmt], guards: list[tuple[ast.expr, bool]]) -> None:
        for stmt in body:
            if not self._hit(stmt):
                continue
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    self._record_import(alias.name, "", stmt, guards)
                    if alias.asname:
                        self.bindings[alias.asname] = alias.name
                    else:
                        head = alias.name.split(".", 1)[0]
                        self.bindings[head] = head
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
    ) -> None:
        if guards:
            self.tc_guards.append((guards, len(self.imports)))
        self.imports.append((module, name, node.lineno, node.col_offset, "runtime"))

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
            self._record_import(base, alias.name, stmt, guards)
            qual = f"{base}.{alias.name}"
            self.bindings[alias.asname or alias.name] = qual
            # KG004: binding a forbidden object by import is a reference to it.
            for rule, pattern in self.matcher.match(qual):
                self._finding(
                    stmt,
                    ViolationCode.FORBIDDEN_CALL,
                    rule,
                    f"import of {qual!r} is forbidden (forbid-calls {pattern!r})",
                )

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
        q = self._resolve(expr, ())
        if isinstance(expr, ast.Name):
            assigned = self._assignments_to(expr.id)
            if q in _TC_NAMES:
                return not assigned
            # A module constant `TYPE_CHECKING = False` is the import-free idiom.
            return (
                expr.id in self.module_shadows
                and bool(assigned)
                and all(isinstance(v, ast.Constant) and v.value is False for v in assigned)
            )
        return q in _TC_NAMES

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
        """Builtin names that the module itself defines are not the builtin."""
        for stmt in self.tree.body:
            if isinstance(stmt, (*_FUNCS, ast.ClassDef)):
                self.module_shadows.add(stmt.name)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        self.module_shadows.add(t.id)

    def interesting_names(self) -> set[str]:
        names = {n for n, q in self.bindings.items() if self._interesting(q)}
        names.update(n for n in _interesting_builtins(self.matcher) if n not in self.bindings)
        names.add("__builtins__")
        return names

    def _interesting(self, q: str) -> bool:
        return q in _ALWAYS or self.matcher.interesting(q)

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
            self.lines = _lines_of(self.data, names)
            if not self.lines:
                break
            self.new_names = False
            self._stmts(self.tree.body, ())
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
            if stmt.returns is not None and not self.future_annotations:
                self._expr(stmt.returns, scope)
            info = self.functions.get(id(stmt))
            if info is None:
                info = self.functions[id(stmt)] = _FunctionInfo(stmt)
            self._stmts(stmt.body, ((stmt, info), *scope))
        elif isinstance(stmt, ast.ClassDef):
            for e in (*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords)):
                self._expr(e, scope)
            self._stmts(stmt.body, scope)
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
                self._generic(case.pattern, scope)
                if case.guard is not None:
                    self._expr(case.guard, scope)
                self._stmts(case.body, scope)
        elif isinstance(stmt, ast.Assign):
            self._expr(stmt.value, scope)
            for t in stmt.targets:
                self._expr(t, scope)
            self._rebind(stmt.targets, stmt.value, scope)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self._expr(stmt.value, scope)
                self._rebind([stmt.target], stmt.value, scope)
            if not self.future_annotations:
                self._expr(stmt.annotation, scope)
            self._expr(stmt.target, scope)
        else:
            self._generic(stmt, scope)

    def _arguments(self, args: ast.arguments, scope: _Scope) -> None:
        for default in (*args.defaults, *(d for d in args.kw_defaults if d is not None)):
            self._expr(default, scope)
        if not self.future_annotations:
            for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                if a is not None and a.annotation is not None:
                    self._expr(a.annotation, scope)

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
            if q is not None and self._interesting(q) and self.bindings.get(target.id) != q:
                if target.id not in self.bindings:
                    self.new_names = True
                self.bindings[target.id] = q
                self.aliases.add(target.id)

    def _expr(self, node: ast.expr, scope: _Scope) -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                q = self._name(node.id, scope)
                if q is not None:
                    self._use(q, node, node.id)
            return
        if isinstance(node, ast.Constant):
            return
        if isinstance(node, (ast.Attribute, ast.Subscript)):
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
        if isinstance(node, ast.NamedExpr):
            self._expr(node.value, scope)
            self._rebind([node.target], node.value, scope)
            return
        self._generic(node, scope)

    def _call(self, node: ast.Call, scope: _Scope) -> None:
        fq = self._resolve(node.func, scope)
        if fq is None:
            return
        first = node.args[0] if node.args else None
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
            if name not in self.builtins_of_interest or name in self.module_shadows:
                # Nothing reached through an uninteresting builtin can break a rule.
                return None
            for fn, info in scope:
                if self._bound_in(name, fn) and name in info.local_stores(fn):
                    return None
            return f"builtins.{name}"
        return None

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
                for m in rxs[0].finditer(self.data)
                if not m.start()
                or (self.data[m.start() - 1] not in _WORD and self.data[m.start() - 1] != 0x2E)
            ]
            positions += [m.start() for rx in rxs[1:] for m in rx.finditer(self.data)]
            positions.sort()
            known = []
            line, pos = 1, 0
            for start in positions:
                line += self.data.count(b"\n", pos, start)
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
        if not hits:
            return False
        shown = q.removeprefix("builtins.")
        note = f" (via alias {via!r})" if via is not None and via in self.aliases else ""
        if via is not None and not note and via != shown and "." in q:
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
                if code is ViolationCode.FORBIDDEN_IMPORT:
                    message = f"{how} of {shown!r} is forbidden (forbid-imports {pattern!r})"
                else:
                    message = f"{how} of {shown!r} is not in allow-imports"
                self.findings.append((line, col, code.value, rule.name, message))

    def raw_findings(self) -> list[RawFinding]:
        if not self.findings:
            return []
        lines = self.data.split(b"\n")
        out: list[RawFinding] = []
        for line, col, code, rule, message in self.findings:
            text = lines[line - 1] if 0 < line <= len(lines) else b""
            prefix = text[:col]
            chars = col if prefix.isascii() else len(prefix.decode("utf-8", "replace"))
            out.append((line, chars + 1, code, rule, message))
        return out


def _import_problem(rule: Rule, targets: tuple[str, ...]) -> tuple[ViolationCode, str] | None:
    forbidden = module_set(rule.forbid_imports)
    for t in targets:
        pattern = forbidden.match(t)
        if pattern is not None:
            return ViolationCode.FORBIDDEN_IMPORT, pattern
    if rule.allow_imports is not None:
        allowed = module_set(rule.allow_imports)
        if all(allowed.match(t) is None for t in targets):
            return ViolationCode.IMPORT_NOT_ALLOWED, ""
    return None


def _child_bodies(stmt: ast.stmt) -> Iterable[Sequence[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        value = getattr(stmt, field, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield value
    for handler in getattr(stmt, "handlers", ()):
        yield handler.body
    for case in getattr(stmt, "cases", ()):
        yield case.body


def _prepare(data: bytes) -> tuple[bytes, str | bytes]:
    """Bytes to search (UTF-8, ``\\n`` newlines) and the source to hand to `ast.parse`."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    source: str | bytes = data
    head = data[: data.find(b"\n", data.find(b"\n") + 1) + 1] if b"\n" in data else data
    cookie = _COOKIE_RX.search(head)
    if cookie and cookie.group(1).lower().replace(b"_", b"-") not in (b"utf-8", b"utf8"):
        text = data.decode(cookie.group(1).decode("ascii"))
        source = text
        data = text.encode("utf-8")
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if isinstance(source, bytes):
            source = data
    return data, source


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
        data, source = _prepare(data)
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
    except (ValueError, LookupError) as e:
        # KG010: undecodable bytes, unknown coding cookie, NUL bytes.
        return [], [(1, 1, ViolationCode.UNPARSEABLE.value, "", f"cannot parse: {e}")]
    if matcher is None:
        matcher = CallMatcher((r.name, p) for r in rules for p in r.forbid_calls)
    scanner = _Scanner(
        data=data, tree=tree, module=module, is_package=is_package, rules=rules, matcher=matcher
    )
    scanner.import_pass()
    scanner.module_level_shadows()
    scanner.reference_pass()
    scanner.resolve_typing()
    if rules:
        scanner.import_rules()
    return scanner.imports, scanner.raw_findings()
