"""Per-file analysis: parse once with `ast`, resolve names, report rule breaks.

This module is the reference pass; the import pass and import rules are
`kernel.guard.names`, shadowing is `kernel.guard.shadows`, the syntax helpers
`kernel.guard.syntax` and installed modules' import bindings `kernel.guard.installed`.
The rules below hold for the whole scan.

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
a reflective name), and only statements and expressions spanning those lines are
visited (code parsed from a string, which has lines of its own, is visited whole).
Everything else is never walked; the symbol table is built only for
functions whose tree binds a guarded builtin's name.
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Sequence
from typing import Final

from kernel.guard.installed import module_file, module_imports, through
from kernel.guard.model import Rule, ViolationCode
from kernel.guard.names import (
    _ATTR_FUNCS,
    _DYNAMIC_IMPORTERS,
    _FORWARD_REFS,
    _FUNCS,
    _GENERIC_BUILTINS,
    _GETATTR,
    _MAPPING_READS,
    _REFLECTIVE_ATTRS,
    _REFLECTIVE_CALLS,
    _REFLECTIVE_NAMES,
    _TYPE_VARS,
    _TYPING,
    _VARS,
    FileScan,
    ImportFact,
    RawFinding,
)
from kernel.guard.patterns import CallMatcher, module_set, twin_of
from kernel.guard.shadows import ShadowPass
from kernel.guard.syntax import (
    COMPREHENSIONS,
    FunctionInfo,
    Scope,
    forward_refs,
    is_text,
    literal_str,
    parse_expression,
    parse_module,
    prepare,
    unconditional_names,
)

__all__ = ["FileScan", "ImportFact", "RawFinding", "module_file", "module_imports", "scan_source"]


_LEAF_FIELDS: Final = frozenset(
    {"ctx", "op", "ops", "id", "attr", "arg", "name", "names", "module", "asname", "level",
     "conversion", "kind", "is_async", "simple", "type_comment", "rest", "kwd_attrs"}
)  # fmt: skip
"""Fields that never hold a node a rule can see, in any node type: a name, a number,
or an operator or context node (no fields of its own)."""
_GENERIC: Final = (*_FUNCS, ast.ClassDef, ast.TypeAlias) if hasattr(ast, "TypeAlias") else ()
"""What has type parameters (3.12+; nothing before)."""
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
"""Per node type, its fields but `_LEAF_FIELDS`, in order (`_Scanner._generic`)."""


class _Scanner(ShadowPass):
    """The reference pass of one file's scan; see the module docstring for the rules."""

    __slots__ = ()

    def _stmts(self, body: Sequence[ast.stmt], scope: Scope) -> None:
        for index in self._hits(body) if body else ():
            self._stmt(body[index], scope)

    def _stmt(self, stmt: ast.stmt, scope: Scope) -> None:
        if _GENERIC and isinstance(stmt, _GENERIC) and getattr(stmt, "type_params", None):
            # 3.12+: its type parameters are a scope around it (`_bound_in`).
            self.generic_open += 1
            try:
                self._statement(stmt, scope)
            finally:
                self.generic_open -= 1
        else:
            self._statement(stmt, scope)

    def _statement(self, stmt: ast.stmt, scope: Scope) -> None:
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
                info = self.functions[id(stmt)] = FunctionInfo(stmt)
            inner, lines = ((stmt, info), *scope), self.lines
            self.lines = self._body_lines(inner)
            try:
                self._stmts(stmt.body, inner)
            finally:
                self.lines = lines
        elif isinstance(stmt, ast.ClassDef):
            self._class(stmt, scope)
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

    def _class(self, stmt: ast.ClassDef, scope: Scope) -> None:
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
                    self._rebound(stmt.name)
                    self.aliases.add(stmt.name)
                break
        # A class body runs in its own namespace: a name it bound in an earlier
        # statement (an enum member `open = "open"`) is that value, not the builtin.
        # Only a builtin's name this pass searches for is ever looked up here, and a
        # statement binding (or deleting) it names it: one on no line found is skipped.
        bound: set[str] = set()
        self.class_bound.append((len(scope), bound))
        try:
            for index in self._hits(stmt.body):
                sub = stmt.body[index]
                self._stmt(sub, scope)
                if isinstance(sub, ast.Delete):
                    bound.difference_update(
                        n.id for t in sub.targets for n in ast.walk(t) if isinstance(n, ast.Name)
                    )
                bound.update(unconditional_names(sub))
        finally:
            self.class_bound.pop()

    def _arguments(self, args: ast.arguments, scope: Scope) -> None:
        for default in (*args.defaults, *(d for d in args.kw_defaults if d is not None)):
            self._expr(default, scope)
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if a is not None and a.annotation is not None:
                self._annotation(a.annotation, scope)

    def _annotation(self, node: ast.expr, scope: Scope, depth: int = 0) -> None:
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
        for sub in forward_refs(node, self.import_names):
            self._typed_string(sub, scope, None, depth)

    def _typing_subscript(self, node: ast.Subscript, scope: Scope) -> None:
        """``List["expr"]`` outside an annotation (an alias): `typing.get_type_hints`
        evaluates its strings when the alias is used in an annotation."""
        head = self._resolve(node.value, scope)
        value = node.value
        if head is None and isinstance(value, ast.Name) and not self._bound_lines(value.id):
            head = f"builtins.{value.id}"  # a builtin no rule names resolves to None
        if head is not None and (head.startswith(_TYPING) or head in _GENERIC_BUILTINS):
            shown = head.rsplit(".", 1)[-1]
            for sub in forward_refs(node, self.import_names):
                self._typed_string(sub, scope, f"an alias {shown}[...]")

    def _typed_string(
        self, sub: ast.expr | None, scope: Scope, route: str | None, depth: int = 0
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
            parsed = parse_expression(sub.value.strip())
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return  # not an expression: typing raises, nothing runs
        # Kept for the scan: its nodes are known by `id` (`reflective_seen`,
        # `typed_strings`, `text_calls`), and a freed node's id is reused by the next
        # string's, which was then taken as seen (a KG008 or a string inside it lost).
        self.parsed_texts.append(parsed)
        before, imported = len(self.findings), len(self.imports)
        in_text, self.in_text = self.in_text, True
        try:
            self._annotation(parsed.body, scope, depth + 1)
        finally:
            self.in_text = in_text
        where = (sub.lineno, sub.col_offset)
        for i in range(before, len(self.findings)):
            _line, _col, code, rule, message = self.findings[i]
            if route is not None:
                message = f"{message}, in a string typing evaluates as code ({route})"
            self.findings[i] = (*where, code, rule, message)
        for i in range(imported, len(self.imports)):
            module, name, _line, _col, kind = self.imports[i]
            self.imports[i] = (module, name, *where, kind)

    def _hand_annotations(self, targets: Sequence[ast.expr], value: ast.expr, scope: Scope) -> None:
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

    def _reflective_chain(self, node: ast.expr, scope: Scope) -> None:
        if not self.reflection:
            # Only a store to TYPE_CHECKING is reported then: a target visited whole.
            stored = isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load)
            if stored and getattr(node, "attr", "") == "TYPE_CHECKING":
                self._reflective(node, "a store to 'TYPE_CHECKING'", always=True)
            return
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
                key = literal_str(cur.slice)
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

    def _pattern(self, pattern: ast.pattern, scope: Scope) -> None:
        for sub in ast.walk(pattern):
            if isinstance(sub, ast.MatchMapping):
                for key in sub.keys:
                    literal = literal_str(key)
                    if literal in _REFLECTIVE_ATTRS:
                        self._reflective(key, f"a match key {literal!r}")
            elif isinstance(sub, ast.MatchClass):
                for attr in sub.kwd_attrs:
                    if attr in _REFLECTIVE_ATTRS:
                        self._reflective(sub, f"a match attribute {attr!r}")
        self._generic(pattern, scope)

    def _generic(self, node: ast.AST, scope: Scope) -> None:
        # `ast.iter_child_nodes`, inlined (same order): two generators per node cost
        # more than the visit itself on the nodes this reaches.
        fields = _CHILD_FIELDS.get(type(node))
        if fields is None:
            fields = _CHILD_FIELDS[type(node)] = tuple(
                f for f in node._fields if f not in _LEAF_FIELDS
            )
        for field in fields:
            value = getattr(node, field, None)
            for child in value if isinstance(value, list) else (value,):
                if isinstance(child, ast.expr):
                    self._expr(child, scope)
                elif isinstance(child, ast.stmt):
                    self._stmt(child, scope)
                elif isinstance(child, ast.AST):
                    self._generic(child, scope)

    def _rebind(self, targets: Sequence[ast.expr], value: ast.expr, scope: Scope) -> None:
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
                # Of interest first: most classes made are the project's own.
                q = (
                    made
                    if made is not None and self._interesting(made) and _is_class(made)
                    else None
                )
            old = self.bindings.get(target.id)
            if q is not None and self._interesting(q) and old != q:
                # What is searched for may change: its uses on lines not yet visited
                # matter now (`x = os` after `import foo as x`, then `x.system()`).
                self.new_names = True
                self.bindings[target.id] = q
                self._rebound(target.id)
                self.aliases.add(target.id)

    def _expr(self, node: ast.expr, scope: Scope) -> None:
        if isinstance(node, ast.Constant):
            return
        if not self.in_text:
            # As for statements (`_hits`): an expression on none of the lines that name
            # something of interest reaches nothing a rule asks about (a visited
            # function's defaults, a loop's iterable, most of a long literal).
            lines = self.lines
            i = bisect.bisect_left(lines, node.lineno)
            if i == len(lines) or lines[i] > (node.end_lineno or node.lineno):
                return
        if isinstance(node, ast.Name):
            if node.id in _REFLECTIVE_NAMES:
                self._reflective(node, repr(node.id))
            if isinstance(node.ctx, ast.Load):
                q = self._name(node.id, scope)
                if q is not None:
                    self._use(q, node, node.id)
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
            if self.effect_matcher is not None and any(
                is_text(a) for a in (*node.args, *(k.value for k in node.keywords))
            ):
                self.text_calls.add(id(node.func))  # only the effect map asks (`_effect`)
            # No function resolved: neither does the call, but as `type(x)` (`_resolve`).
            typed = isinstance(node.func, ast.Name) and node.func.id == "type"
            q = self._resolve(node, scope) if self._call(node, scope) or typed else None
            if q is not None:
                self._use(q, node, None)
            self._generic(node, scope)
            return
        if isinstance(node, ast.Lambda):
            self._arguments(node.args, scope)
            self._expr(node.body, ((node, FunctionInfo(node)), *scope))
            return
        if isinstance(node, COMPREHENSIONS):
            # The first iterable is evaluated in the enclosing scope, the rest inside.
            inner = ((node, FunctionInfo(node)), *scope)
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

    def _call(self, node: ast.Call, scope: Scope) -> str | None:
        """A call's own checks; what its function resolves to."""
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _MAPPING_READS and node.args:
            key = literal_str(node.args[0])
            if key in _REFLECTIVE_ATTRS:
                self._reflective(node, f".{func.attr}({key!r})")
        fq = self._resolve(func, scope)
        if fq is None:
            return None
        if fq in _REFLECTIVE_CALLS or (fq == _VARS and not node.args):
            self._reflective(node, f"{fq.removeprefix('builtins.')}()")
        elif fq in _ATTR_FUNCS and len(node.args) >= 2:
            key = literal_str(node.args[1])
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
            literal = literal_str(first)
            if literal is None:
                name = next((k.value for k in node.keywords if k.arg == "name"), None)
                literal = literal_str(name)
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
                return fq
            self.imports.append((target, "", node.lineno, node.col_offset, "dynamic"))
        elif fq == _GETATTR and len(node.args) >= 2 and literal_str(node.args[1]) is None:
            base = self._resolve(node.args[0], scope)
            if base is not None and self._interesting(base) and self.rules:
                # KG005: getattr on a guarded name with a computed attribute.
                self._finding(
                    node,
                    ViolationCode.UNRESOLVABLE_DYNAMIC,
                    self.guarded,
                    f"getattr() on {base.removeprefix('builtins.')!r} with a non-literal name",
                )
        return fq

    def _resolve(self, node: ast.expr, scope: Scope) -> str | None:
        if isinstance(node, ast.Name):
            return self._name(node.id, scope)
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value, scope)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Subscript):
            key = literal_str(node.slice)
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
                key = literal_str(node.args[1])
                base = self._resolve(node.args[0], scope)
                return None if key is None or base is None else f"{base}.{key}"
            if fq in _DYNAMIC_IMPORTERS and node.args:
                literal = literal_str(node.args[0])
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
        if self._dead_name(q):
            # No pattern, twin or source under its package: it matches nothing, reaches
            # through nothing (no import binding can be read) and is not installed.
            return False
        hits = self.matcher.match(q)
        if "." in q and not q.startswith("builtins."):
            names, reached = through(q)
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
            and module_file(top) is not None
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


_EFFECT_MEMO: dict[tuple[tuple[Rule, ...], bool], dict[str, tuple[str, ...] | None]] = {}
_NO_EFFECT_MAP: Final = frozenset({"builtins", "typing", "typing_extensions"})
"""Not followed by the effect map: ``typing``'s subscription compiles a string argument
(``List["expr"]``) but not ``List[int]``, and no reading of ``typing``'s source tells
which: evaluation of strings is left to the annotation check and the dynamic guard."""


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
        data, search, source = prepare(data)
        tree = parse_module(source, filename=filename)
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
    if not tree.body and b"kernel-guard:" not in data:
        return [], []  # no statement (88 of Django's files): no import, nothing to find
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
    scanner.reference_pass()
    if rules:
        scanner.import_rules()
    return scanner.imports, scanner.raw_findings()


def _is_class(q: str) -> bool:
    from kernel.guard.effects import is_class

    return is_class(q)
