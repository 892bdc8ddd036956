"""Effect map of installed code: which functions and classes reach a forbidden name.

A guarded module that calls ``logging.warning`` writes to standard error, one that
calls ``email.utils.formatdate()`` reads the clock, though neither names ``sys.stderr``
or ``time``. This module reads installed modules' source (never imports them) and
follows what their functions reference, so such a call is reported with the chain.

Rules this module enforces:

- a module's summary is computed once from its source, per file (keyed by path, size
  and mtime, and by content digest; `kernel.guard.cache` keeps it between runs): for
  every top-level function, class, method and module-level alias, the qualified
  names its body references, resolved through the module's own imports (``import
  a.b``, ``from a import b``, relative imports, every branch), its top-level
  definitions, assignments (``default_timer = time.perf_counter``),
  instances of its classes (``root = RootLogger(WARNING)``; a local ``tree =
  ElementTree()`` in a function), ``self``/``cls`` in methods and inherited methods
  (a method a class does not define is looked up in its bases, in order);
- a method's use of ``self`` builds nothing: ``self.x`` is what the class's methods
  store in ``x`` (the names the stored value is made of; a call in it ran when it was
  stored; a parameter stored as it is brings its default: ``formatter_class=
  HelpFormatter``), ``with self:`` is ``__enter__`` and ``__exit__``, and only an
  attribute that neither the class nor its bases define or store stands for the
  constructor's references; of a dotted name only the whole is a reference
  (``self.x.y`` is not also ``Class`` and ``Class.x``);
- a name used only as an operand of ``is``/``is not`` is compared, not run
  (``if self is random._inst``): it is not a reference;
- a branch taken only when the caller sets a bit flag (``if flags & SRE_FLAG_DEBUG:``
  on a parameter: `re`'s debug ``print``) depends on a value the map does not track:
  its references are not followed (a caller passing ``re.DEBUG`` is a miss);
- a read of the interpreter's table of loaded modules (``sys.modules.get(name)`` in
  `inspect`, `typing`, `dataclasses`) finds a module already loaded and changes nothing
  outside: inside installed code it ends a chain without a finding (a guarded module's
  own use is still KG004);
- a warning raised inside installed code (``warnings.warn``: `re` on a deprecated
  pattern) is the library's diagnostic of its caller's input, routed by the process's
  warning filters, which the shell sets: it ends a chain without a finding;
- code evaluation and loading inside installed code (``exec``, ``eval``, ``compile``,
  ``__import__``, ``importlib.import_module``: attrs and hypothesis generating their
  own functions) is the library's own, as the dynamic guard also holds, unless the
  guarded call hands the library text (a string or f-string argument:
  ``timeit.timeit("...")``, ``typing.get_type_hints`` of written annotations): then it
  is a route by which the caller's text runs;
- a name reaches a forbidden one when it is one (`is_forbidden`) or one of the names
  it references does, at most `MAX_DEPTH` hops deep and `MAX_NODES` names per query:
  past either limit the answer is "not shown" (what the dynamic guard is for);
- a module without Python source (builtin or extension) references nothing that can
  be read; its C twins are matched by name (`kernel.guard.patterns.twin_of`).
"""

from __future__ import annotations

import ast
import builtins
import os
from collections.abc import Callable, Iterator
from typing import Final

from kernel.guard.installed import module_file, module_imports
from kernel.guard.syntax import parse_module
from kernel.records.digest import sha256_bytes

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "Summary",
    "effect_chain",
    "export_summaries",
    "import_summaries",
    "is_class",
    "summary",
    "take_new",
]

MAX_DEPTH: Final = 12
MAX_NODES: Final = 4000
_ENDS: Final = ("sys.modules", "warnings.warn", "warnings.warn_explicit")
"""Reached inside installed code, these end a chain without a finding (module doc)."""
_CODE: Final = frozenset(
    {"builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__",
     "importlib.import_module", "importlib.__import__"}
)  # fmt: skip
"""Code evaluation: an effect of the guarded call only when it hands over text."""
_BUILTINS: Final = frozenset(dir(builtins))
_FUNCS: Final = (ast.FunctionDef, ast.AsyncFunctionDef)

Summary = tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]], dict[str, str]]
"""``(refs, bases, instances)`` of a module: local dotted path (``f``, ``C``, ``C.m``)
-> referenced qualified names; class -> qualified bases; name -> qualified class."""

_SUMMARIES: dict[str, tuple[tuple[int, int], str, str, Summary]] = {}
"""path -> ``((size, mtime_ns), content sha256, module, summary)``; kept on disk by
`kernel.guard.cache.EffectCache` between runs."""
_NEW: set[str] = set()


def summary(module: str) -> Summary | None:
    """The summary of an installed module with Python source, or None.

    Reused while the file's size and mtime are those it was read with, or its content
    digest is (a summary loaded from disk whose mtime was within the racy window of
    the writing is checked by digest), else read again.
    """
    path = module_file(module)
    if path is None:
        return None
    try:
        st = os.stat(path)
        key = (st.st_size, st.st_mtime_ns)
        known = _SUMMARIES.get(path)
        if known is not None and known[0] == key and known[2] == module:
            return known[3]
        with open(path, "rb") as fh:
            data = fh.read()
        digest = sha256_bytes(data)
        if known is not None and known[1] == digest and known[2] == module:
            _SUMMARIES[path] = (key, digest, module, known[3])
            _NEW.add(path)
            return known[3]
        tree = parse_module(data)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    made = _Reader(module, package, tree).read()
    _SUMMARIES[path] = (key, digest, module, made)
    _NEW.add(path)
    return made


def export_summaries() -> dict[str, tuple[tuple[int, int], str, str, Summary]]:
    """Every summary this process holds, for the cache to write."""
    return dict(_SUMMARIES)


def import_summaries(
    entries: dict[object, object], *, trusted_before_ns: int, new: bool = False
) -> None:
    """Take summaries read from the cache or computed by a worker process.

    A summary whose file's mtime is not older than ``trusted_before_ns`` (the racy
    window of the writing) is reused only if its content digest still matches; entries
    of the wrong shape are dropped. ``new`` marks them for `take_new`.
    """
    for path, entry in entries.items():
        if not (
            isinstance(path, str)
            and isinstance(entry, tuple)
            and len(entry) == 4
            and isinstance(entry[0], tuple)
            and len(entry[0]) == 2
            and isinstance(entry[0][1], int)
            and isinstance(entry[3], tuple)
            and len(entry[3]) == 3
        ):
            continue
        # A stat that cannot match makes `summary` compare the content digest.
        key = (-1, -1) if entry[0][1] >= trusted_before_ns else entry[0]
        _SUMMARIES[path] = (key, entry[1], entry[2], entry[3])
        if new:
            _NEW.add(path)


def take_new() -> dict[str, tuple[tuple[int, int], str, str, Summary]]:
    """The summaries computed (or re-validated) since the last call."""
    out = {path: _SUMMARIES[path] for path in _NEW if path in _SUMMARIES}
    _NEW.clear()
    return out


def is_class(q: str) -> bool:
    """Is ``q`` a class defined in an installed module's source?"""
    found = _split(q)
    if found is None:
        return False
    module, rest = found
    got = summary(module)
    return got is not None and len(rest) == 1 and rest[0] in got[1]


class _Reader:
    """Builds one module's `Summary`."""

    def __init__(self, module: str, package: str, tree: ast.Module) -> None:
        self.module = module
        self.package = package
        self.tree = tree
        self.imports: dict[str, str] = {}
        self.local: set[str] = set()
        self.refs: dict[str, tuple[str, ...]] = {}
        self.bases: dict[str, tuple[str, ...]] = {}
        self.instances: dict[str, str] = {}
        self.attributes: dict[str, dict[str, None]] = {}  # ``Class.attr`` -> refs

    def read(self) -> Summary:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.asname or alias.name.split(".", 1)[0]
                    self.imports.setdefault(name, alias.name if alias.asname else name)
            elif isinstance(node, ast.ImportFrom):
                base = self._absolute(node)
                for alias in node.names:
                    if base is not None and alias.name != "*":
                        self.imports.setdefault(alias.asname or alias.name, f"{base}.{alias.name}")
        top = list(_top_statements(self.tree.body))
        for stmt in top:
            if isinstance(stmt, (*_FUNCS, ast.ClassDef)):
                self.local.add(stmt.name)
            elif isinstance(stmt, ast.Assign):
                self.local.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        for stmt in top:
            if isinstance(stmt, _FUNCS):
                self.refs[stmt.name] = self._body_refs(stmt, None)
            elif isinstance(stmt, ast.ClassDef):
                self._class(stmt)
            elif isinstance(stmt, ast.Assign):
                self._assign(stmt.targets, stmt.value, "")
        return self.refs, self.bases, self.instances

    def _absolute(self, node: ast.ImportFrom) -> str | None:
        if not node.level:
            return node.module
        parts = self.package.split(".")
        keep = len(parts) - (node.level - 1)
        if keep <= 0:
            return None
        prefix = ".".join(parts[:keep])
        return f"{prefix}.{node.module}" if node.module else prefix

    def _class(self, stmt: ast.ClassDef) -> None:
        bases = [self._resolve(b, None, {}) for b in stmt.bases]
        self.bases[stmt.name] = tuple(b for b in bases if b is not None)
        own = f"{self.module}.{stmt.name}"
        self.refs[stmt.name] = (f"{own}.__init__", f"{own}.__new__")
        self.attributes.clear()
        for sub in stmt.body:
            if isinstance(sub, _FUNCS):
                self.refs[f"{stmt.name}.{sub.name}"] = self._body_refs(sub, stmt.name)
            elif isinstance(sub, ast.Assign):
                self._assign(sub.targets, sub.value, f"{stmt.name}.")
        # An attribute a method stores on ``self`` is what was stored (``self.clock =
        # clock or datetime.now``), not the constructor: an attribute no method stores
        # still stands for the constructor's references (`_expand`).
        for member, refs in self.attributes.items():
            self.refs.setdefault(member, tuple(refs))

    def _assign(self, targets: list[ast.expr], value: ast.expr, prefix: str) -> None:
        for target in targets:
            if not isinstance(target, ast.Name):
                continue
            if isinstance(value, ast.Call):
                # Built once, when the module is imported: naming it later runs none of
                # that again; its methods are those of its class.
                made = self._resolve(value.func, None, {})
                if made is not None and not prefix:
                    self.instances[target.id] = made
                self.refs[prefix + target.id] = ()
            else:
                self.refs[prefix + target.id] = tuple(self._refs_in(value, None, {}))

    def _body_refs(
        self, fn: ast.FunctionDef | ast.AsyncFunctionDef, cls: str | None
    ) -> tuple[str, ...]:
        local_types: dict[str, str] = {}
        args = fn.args
        params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        own = params | {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        declared: set[str] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                declared.update(node.names)
        # A parameter or local named like a builtin (``def group(self, open="")``) is
        # that value, not the builtin; a ``self``/``cls`` stays the class.
        hidden = own - declared - {"self", "cls"}
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                made = self._resolve(node.value.func, cls, {})
                if made is not None:
                    local_types[node.targets[0].id] = made
        for name in hidden - local_types.keys():
            local_types[name] = ""
        skipped = {
            id(sub)
            for node in ast.walk(fn)
            if isinstance(node, ast.If) and _flag_test(node.test, params)
            for stmt in node.body
            for sub in ast.walk(stmt)
        }
        out: dict[str, None] = {}
        for part in (*fn.decorator_list, *fn.args.defaults, *fn.body):
            for ref in self._refs_in(part, cls, local_types, skipped):
                out[ref] = None
        if cls is not None:
            self._stored(fn, cls, local_types, skipped)
        return tuple(out)

    def _stored(
        self,
        fn: ast.FunctionDef | ast.AsyncFunctionDef,
        cls: str,
        local_types: dict[str, str],
        skipped: set[int],
    ) -> None:
        """What the method stores on ``self`` (``self.x = value``), by attribute: the
        names the stored value is made of (``clock or datetime.now``), and for a
        parameter stored as it is, its default (``formatter_class=HelpFormatter``)."""
        defaults = _param_defaults(fn.args)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    found = self.attributes.setdefault(f"{cls}.{target.attr}", {})
                    # A call in the value ran when it was stored; reading the attribute
                    # later runs none of it (``self.jupyter = _is_jupyter()``).
                    ran = {
                        id(n)
                        for c in ast.walk(value)
                        if isinstance(c, ast.Call)
                        for n in ast.walk(c)
                    }
                    for ref in self._refs_in(value, cls, local_types, skipped | ran):
                        found[ref] = None
                    for name in ast.walk(value):
                        if (
                            isinstance(name, ast.Name)
                            and name.id in defaults
                            and id(name) not in ran
                        ):
                            for ref in self._refs_in(defaults[name.id], None, {}):
                                found[ref] = None

    def _refs_in(
        self,
        node: ast.AST,
        cls: str | None,
        local_types: dict[str, str],
        skipped: set[int] | None = None,
    ) -> Iterator[str]:
        skip = set(skipped or ())
        inner: set[int] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Compare) and all(
                isinstance(op, (ast.Is, ast.IsNot)) for op in sub.ops
            ):
                skip.update(id(n) for side in (sub.left, *sub.comparators) for n in _chain(side))
            if id(sub) in skip:
                continue
            if isinstance(sub, ast.Attribute):
                # ``self.x.y`` references ``Class.x.y``, not ``Class`` (its constructor)
                # nor ``Class.x`` on their own: the walk meets the inner names next.
                inner.update(id(n) for n in _chain(sub.value))
            elif isinstance(sub, (ast.With, ast.AsyncWith)):
                # ``with self:`` runs the instance's __enter__ and __exit__.
                for item in sub.items:
                    q = self._resolve(item.context_expr, cls, local_types)
                    if q is not None and isinstance(item.context_expr, (ast.Name, ast.Attribute)):
                        yield f"{q}.__enter__"
                        yield f"{q}.__exit__"
            if (
                isinstance(sub, (ast.Name, ast.Attribute))
                and isinstance(sub.ctx, ast.Load)
                and id(sub) not in inner
                # The instance itself (``with self``, ``f(self)``) builds nothing.
                and not (isinstance(sub, ast.Name) and sub.id == "self" and cls is not None)
            ):
                q = self._resolve(sub, cls, local_types)
                if q is not None:
                    yield q

    def _resolve(self, node: ast.expr, cls: str | None, local_types: dict[str, str]) -> str | None:
        if isinstance(node, ast.Name):
            name = node.id
            if cls is not None and name in ("self", "cls"):
                return f"{self.module}.{cls}"
            if name in local_types:
                return local_types[name] or None
            if name in self.local:
                return f"{self.module}.{name}"
            if name in self.imports:
                return self.imports[name]
            if name in _BUILTINS:
                return f"builtins.{name}"
            return None
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value, cls, local_types)
            return None if base is None else f"{base}.{node.attr}"
        if (
            isinstance(node, ast.Call)
            and cls is not None
            and isinstance(node.func, ast.Name)
            and node.func.id == "super"
        ):
            return f"{self.module}.{cls}.__super__"
        return None


def _param_defaults(args: ast.arguments) -> dict[str, ast.expr]:
    """Each parameter with a default -> the default's expression."""
    positional = [*args.posonlyargs, *args.args]
    with_default = positional[len(positional) - len(args.defaults) :]
    out = {a.arg: d for a, d in zip(with_default, args.defaults, strict=True)}
    out.update(
        (a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
    )
    return out


def _flag_test(test: ast.expr, params: set[str]) -> bool:
    """Is ``test`` a bit-flag test of a parameter (``flags & DEBUG``, either side)?"""
    return (
        isinstance(test, ast.BinOp)
        and isinstance(test.op, ast.BitAnd)
        and any(
            isinstance(side, ast.Name) and side.id in params for side in (test.left, test.right)
        )
    )


def _chain(node: ast.expr) -> Iterator[ast.expr]:
    """A dotted name's nodes (``a.b.c``: the attributes and ``a``); nothing for others."""
    while isinstance(node, ast.Attribute):
        yield node
        node = node.value
    if isinstance(node, ast.Name):
        yield node


def _top_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, also inside ``if``/``try``/``with`` (platform and
    fallback definitions), never inside a function or class body."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try, ast.With, ast.TryStar)):
            for field in ("body", "orelse", "finalbody"):
                yield from _top_statements(getattr(stmt, field, []))
            for handler in getattr(stmt, "handlers", ()):
                yield from _top_statements(handler.body)


def _split(q: str) -> tuple[str, list[str]] | None:
    """``(module with source, remaining attribute path)`` for a qualified name."""
    parts = q.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        if module_file(module) is not None:
            return module, parts[i:]
    return None


def _expand(q: str) -> tuple[str, ...]:
    """The names ``q`` references (one hop), read from its module's summary."""
    found = _split(q)
    if found is None:
        return ()
    module, rest = found
    got = summary(module)
    if not rest or got is None:
        return ()
    refs, bases, instances = got
    head, tail = rest[0], rest[1:]
    if head not in refs and head not in bases:
        # Not defined here: a name bound by import (a re-export) is its target.
        return tuple(".".join([t, *tail]) for t in module_imports(module).get(head, ()))
    if not tail:
        return refs.get(head, ())
    if head in instances and head not in bases:
        return (".".join([instances[head], *tail]),)
    member = f"{head}.{tail[0]}"
    if tail[0] == "__super__":
        return tuple(".".join([b, *tail[1:]]) for b in bases.get(head, ()))
    if member in refs:
        return refs[member]
    if bases.get(head):
        return tuple(".".join([b, *tail]) for b in bases[head])
    # An attribute neither the class nor its bases define or store (set by `setattr`,
    # by a caller): whatever the constructor references may be behind it.
    return refs.get(head, ())


def effect_chain(
    q: str,
    is_forbidden: Callable[[str], bool],
    memo: dict[str, tuple[str, ...] | None],
    *,
    skip: frozenset[str] = frozenset(),
    text: bool = False,
) -> tuple[str, ...] | None:
    """The shortest-found chain from ``q`` to a forbidden name (``q`` first), or None.

    ``memo`` is shared between queries of one policy and one ``text`` (a rule set's
    answers); names in a top-level package of ``skip`` are matched but never followed;
    ``text``: the guarded call hands the library a string, so code evaluation counts.
    """
    if q in memo:
        return memo[q]
    budget = [MAX_NODES]
    parent: dict[str, str] = {q: ""}
    frontier = [q]
    result: tuple[str, ...] | None = None
    for _depth in range(MAX_DEPTH):
        following: list[str] = []
        for name in frontier:
            for ref in _expand(name):
                if ref in parent:
                    continue
                parent[ref] = name
                budget[0] -= 1
                if any(ref == end or ref.startswith(end + ".") for end in _ENDS):
                    continue
                if ref in _CODE and not text:
                    continue  # the library evaluates its own code
                if is_forbidden(ref):
                    chain = [ref]
                    while parent[chain[-1]]:
                        chain.append(parent[chain[-1]])
                    result = tuple(reversed(chain))
                    break
                if ref.split(".", 1)[0] not in skip:
                    following.append(ref)
            if result is not None or budget[0] <= 0:
                break
        if result is not None or budget[0] <= 0 or not following:
            break
        frontier = following
    memo[q] = result
    return result
