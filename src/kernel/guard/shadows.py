"""Shadowing in the guard's per-file scan (`kernel.guard.scan`): whether a name where it
is read is the builtin or module binding the rules ask about, or a local, a parameter,
a class-body or module-level definition that shadows it (CPython's `symtable` decides
inside functions); and which qualified names can matter to a rule.

The rules it enforces are listed in `kernel.guard.scan`'s docstring (Python's scopes,
module-level shadowing unless a call into the module's own code runs first).
"""

from __future__ import annotations

import ast
import bisect
import re
import symtable
from typing import TYPE_CHECKING, Final

from kernel.guard.installed import NO_SOURCE, module_file, module_imports, through
from kernel.guard.names import (
    _ALWAYS,
    _BUILTIN_NAMES,
    _FUNCS,
    _MAX_ROUNDS,
    _REFLECTIVE_ATTRS,
    ImportPass,
)
from kernel.guard.patterns import TWIN_HEADS, twin_of
from kernel.guard.problems import _import_problem
from kernel.guard.syntax import (
    COMPREHENSIONS,
    Scope,
    _text,
    eager_nodes,
    lines_of,
    module_deletes,
    scope_name,
    seam_lines,
    unconditional_names,
)

__all__ = ["ShadowPass"]

_CALLED_ONLY: Final = ("getattr", "hasattr", "setattr", "delattr")
"""Builtins whose direct call, with no forbid-reflection rule and no forbid-calls
pattern naming the builtin, changes the output only through what its arguments name:
``getattr(obj, "key")`` resolves, and its computed key is KG005, only when ``obj``
resolves to an interesting name (whose word marks the line); ``hasattr``, ``setattr``
and ``delattr`` only fake ``TYPE_CHECKING`` (a literal key: the word, or a seam line
when an escape or a join spells it; a reflective key is KG008 only under
forbid-reflection). Any other use (``g = getattr``) is marked."""

_ALWAYS_HEADS: Final = frozenset(n.split(".", 1)[0] for n in _ALWAYS)
_BOUND_AFTER: Final = re.compile(rb"\b[ \t]*(?:[=:,)\];#\n\r]|[-+*/%&|^@<>]+=|in\b|\Z)")
"""What follows a name where it may be bound (`ShadowPass._bound_lines`)."""


def _binding_positions(search: bytes, name: bytes) -> list[int]:
    """Sorted offsets where ``name`` may be bound: followed by `_BOUND_AFTER` (not
    after a dot), or preceded by ``def``/``class`` and blanks.

    Only where ``name`` is a word (`_Text.starts`, kept per text: the line search has
    most often found it already), which both forms are: `_BOUND_AFTER` starts with
    the word's end, and blanks before it are no word byte.
    """
    positions: list[int] = []
    size = len(name)
    for at in _text(search).starts(name):
        if _BOUND_AFTER.match(search, at + size) and (not at or search[at - 1] != 0x2E):
            positions.append(at)
        head = at
        while head and search[head - 1] in b" \t":
            head -= 1
        if head < at and search.endswith((b"def", b"class"), 0, head):
            positions.append(head)  # on the name's line: no line break between
    positions.sort()
    return positions


def _binds(fn: ast.AST, name: str) -> bool:
    """Does a node of ``fn``'s tree bind ``name``, by any form Python has? A store or
    ``del``, a parameter, an import, a definition, ``global``/``nonlocal``, an except
    or match capture, a type parameter (a superset: a keyword argument counts too).

    When none does, no scope of the tree has it local or free (what `symtable` says,
    without building the file's table: 7 ms for a 2,600-line file), except through a
    type parameter scope around ``fn`` (which the caller rules out)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            if node.id == name and not isinstance(node.ctx, ast.Load):
                return True
        elif isinstance(node, ast.alias):
            if (node.asname or node.name.split(".", 1)[0]) == name:
                return True
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            if name in node.names:
                return True
        elif name in (
            getattr(node, "name", None),
            getattr(node, "arg", None),
            getattr(node, "rest", None),
        ):
            return True
    return False


def _inert(stmt: ast.stmt) -> bool:
    """Does the reference pass find nothing in ``stmt``, whatever the rules? An import
    (the import pass's), ``pass``, a constant expression statement (a docstring): no
    name, attribute or string typing evaluates is in them."""
    return isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)) or (
        isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
    )


class ShadowPass(ImportPass):
    """Shadowing and interest: which names resolve to what, where."""

    __slots__ = ()
    # Set by each round (`_rounds`): its marks, seam lines and marked lines, the names a
    # parameter can shadow, and the lines left in a function body (`_body_lines`).
    marks: set[str]
    seams: list[int]
    round_lines: list[int]
    shadowable: set[str]
    body_lines: dict[frozenset[str], list[int]]

    if TYPE_CHECKING:
        # The reference pass (`kernel.guard.scan`) defines it.
        def _installed(self, q: str) -> bool: ...
        def _stmt(self, stmt: ast.stmt, scope: Scope) -> None: ...

    # ------------------------------------------------------------- reference pass
    def reference_pass(self) -> None:
        """Visit the statements on the lines naming something of interest, again while
        a visit binds a name to something interesting (at most `_MAX_ROUNDS`)."""
        body = self.tree.body
        if not body or (_inert(body[-1]) and all(map(_inert, body))):
            return  # nothing it would visit (a package's `__init__`: imports, a docstring)
        imports_before = len(self.imports)
        findings_before = len(self.findings)
        # A string typing evaluates is parsed only where it is visited: the lines where
        # its value may name what its text does not are visited whatever is searched.
        seams = seam_lines(self.search)
        bound = dict(self.bindings)
        self._rounds(body, seams, imports_before, findings_before)
        while self.restart:
            # A walk bound a name searched as `name.module` to something else: over
            # again from the import pass's bindings, that name searched whole
            # (`_rebound`). Each time one more name is: it ends.
            self.restart = False
            self.bindings.clear()
            self.bindings.update(bound)
            self.aliases.clear()
            self._rounds(body, seams, imports_before, findings_before)

    def _rounds(
        self, body: list[ast.stmt], seams: list[int], imports_before: int, findings_before: int
    ) -> None:
        searched: set[str] = set()
        for _ in range(_MAX_ROUNDS):
            interesting = self.interesting_names()
            names = self._marks(interesting)
            if names <= searched:
                break
            searched = names
            del self.imports[imports_before:]
            del self.findings[findings_before:]
            self.reach_seen.clear()
            self.reflective_seen.clear()
            self.typed_strings.clear()  # a string parsed last round is checked again
            self.lines = self._marked_lines(names)
            if seams:
                self.lines = sorted({*self.lines, *seams})
            if not self.lines:
                break
            self.marks, self.seams, self.round_lines = names, seams, self.lines
            self.shadowable = interesting - _REFLECTIVE_ATTRS - {"TYPE_CHECKING"}
            self.body_lines = {}
            self.new_names = False
            for index in self._hits(body):
                self.top_index = index
                self._stmt(body[index], ())
            self.top_index = 1 << 30
            if not self.new_names:
                break

    def _body_lines(self, scope: Scope) -> list[int]:
        """The marked lines to visit in the body of the function ``scope`` opens: a
        name it or a scope around it takes as a parameter resolves to nothing there
        (`_name`), so a line marked only by such names (a method's ``value`` after
        ``value = datetime.datetime(...)`` elsewhere) holds nothing to visit. Reflective
        names and ``TYPE_CHECKING`` are never left out (an attribute is one whatever
        its base), nor seam lines."""
        shadowed: frozenset[str] = frozenset()
        for _fn, info in scope:
            if info.params:
                shadowed |= info.params & self.shadowable
        if not shadowed:
            return self.round_lines
        lines = self.body_lines.get(shadowed)
        if lines is None:
            dotted = {n: q for n, q in self.dotted.items() if n not in shadowed}
            gone = {*shadowed, *(f"{n}(" for n in shadowed)}
            gone.update(f"{n}.{q}" for n, q in self.dotted.items() if n in shadowed)
            lines = lines_of(
                self.search,
                self.marks - gone,
                [n for n in self.uncalled if n not in shadowed],
                dotted,
                lambda n, attr: self._quiet(dotted[n], attr),
            )
            if self.seams:
                lines = sorted({*lines, *self.seams})
            self.body_lines[shadowed] = lines
        return lines

    def module_level_shadows(self) -> dict[str, int]:
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

        Only the builtins this scan asks about are recorded (`_name` asks about no
        other), and a statement binding one names it: only the statements on the lines
        naming one are read (most files name none). Worked out when `_module_shadowed`
        first asks (most files never use such a builtin on a line the pass visits).
        Returns them (also kept as `module_shadows`).
        """
        shadows: dict[str, int] = {}
        wanted = self.builtins_of_interest
        marked = lines_of(self.search, wanted)
        body = self.tree.body
        for index in self._hits(body, marked):
            for name in unconditional_names(body[index]):
                if name in wanted:
                    shadows.setdefault(name, index)
        self.module_shadows = shadows
        return shadows

    def _first_local_call(self) -> int:
        """Index of the first top-level statement that calls (or decorates with) a
        function or class the module defines at top level; past the end when none."""
        defined = {s.name for s in self.tree.body if isinstance(s, (*_FUNCS, ast.ClassDef))}
        for index, stmt in enumerate(self.tree.body):
            if not defined:
                break
            for node in eager_nodes(stmt):
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
                module_deletes(self.tree.body, frozenset(), module=True)
                if lines_of(self.search, ("del",))
                else set()
            )
        return name in self.deleted

    def _module_shadowed(self, name: str, scope: Scope) -> bool:
        shadows = self.module_shadows
        if shadows is None:
            shadows = self.module_level_shadows()
        first = shadows.get(name)
        if first is None or self._deleted(name):
            return False
        if any(isinstance(node, (*_FUNCS, ast.Lambda)) for node, _i in scope):
            if self.local_call is None:
                self.local_call = self._first_local_call()
            if first < self.local_call:
                return True  # a function body: it runs after the module binds the name
        return first < self.top_index

    def interesting_names(self) -> set[str]:
        """The names bound to something interesting, the guarded builtins' names left
        unbound, and the reflective names, under every rule: a visited line is read
        whole, so a reflective name on it also gets the other uses there resolved
        (a reach-through recorded for the import graph, a name `_interesting` does not
        see through: ``from io import open as h`` then ``h(m.__loader__)`` is
        ``_io.open``), and the output must not depend on whether a rule forbids
        reflection."""
        # `_interesting` inlined for a name it has answered and `loaded` does not hold
        # (most bindings): this runs for every binding of every file, in every round.
        get, loaded, interesting = self._interest_memo().get, self.loaded, self._interesting
        names = set()
        for n, q in self.bindings.items():
            known = None if q in loaded else get(q)
            if known is None:
                known = interesting(q)
            if known:
                names.add(n)
        names.update(self.builtins_of_interest.difference(self.bindings))
        names.update(_REFLECTIVE_ATTRS)
        return names

    def _marks(self, names: set[str]) -> set[str]:
        """What to search for: ``names`` and ``TYPE_CHECKING`` (a store to it, or
        ``hasattr(x, "TYPE_CHECKING")``, fakes it: KG008 under every rule); a
        `_CALLED_ONLY` builtin as ``name(``, searched for where it is not directly
        called, and a name bound to a top-level module (``import os``, ``import
        datetime``: interesting itself or only through what it imports) as
        ``name.module``, searched for where no quiet attribute follows it (docs/guard.md,
        "sixth round": ``os.path.join(p)`` or ``datetime.timedelta(1)`` can change
        nothing). A round that binds such a name to something else (``getattr =
        os.system``) searches it whole."""
        marks = {*names, "TYPE_CHECKING"}
        self.uncalled, self.dotted = [], {}
        if self.reflection or self.effect_matcher is not None:
            return marks
        bindings = self.bindings
        uncalled = self.run.uncalled
        if uncalled is None:
            # A rule forbidding the builtin itself reports its every direct call.
            uncalled = self.run.uncalled = tuple(
                n for n in _CALLED_ONLY if not self.matcher.interesting(f"builtins.{n}")
            )
        for n in uncalled:
            if n in names and n not in bindings:
                marks.remove(n)
                marks.add(f"{n}(")
                self.uncalled.append(n)
        # Only a bound name can be marked `name.module`: the rest (the builtins and
        # reflective names every file searches for) are not looked at one by one.
        for n in names.intersection(bindings):
            q = bindings[n]
            # A name bound by assignment (``os = datetime`` after ``import os.path``) is
            # searched whole: its uses before that line are another module's, whose
            # attributes are not the quiet ones.
            if self._module_name(q) and n not in self.whole and n not in self.aliases:
                if self.matcher.interesting(q) or any(
                    self.matcher.interesting(t) for t in twin_of(q)
                ):
                    self.widened.add(n)  # interesting itself (`_rebound`)
                marks.remove(n)
                marks.add(f"{n}.{q}")
                self.dotted[n] = q
        return marks

    def _rebound(self, name: str) -> None:
        """`_rebind` or `_class` changed what ``name`` is bound to. A name of a module
        interesting itself was searched whole before the module's quiet attributes
        were left out (and the output must not change): when such a name searched as
        ``name.module`` is bound to something else, whatever that round's walk
        visited with its new binding, the reference pass starts over with it searched
        whole. One never bound again (most) needs no more."""
        if name in self.widened and name not in self.whole:
            self.whole.add(name)
            self.restart = True

    def _module_name(self, q: str) -> bool:
        """Is a name bound to ``q`` searched as ``name.q`` (`_marks`)? A top-level name
        (what ``import q`` binds) not loaded with a submodule (``import os.path``: its
        attributes are this file's own) nor one of `_ALWAYS` (reflection, importers). A
        name bound to one of its attributes (``from os import path``) is searched whole."""
        return "." not in q and q not in self.loaded and q not in _ALWAYS

    def _quiet(self, q: str, attr: str) -> bool:
        """Can visiting ``name.attr`` (``name`` bound to module ``q``, marked
        ``name.q``) change nothing? Yes when the attribute is no submodule of the module
        and reaches no module through its import bindings (no reach-through), is not
        interesting itself (no pattern is it or under it, nor its twin's: ``os.path``,
        not ``os.environ``, nor under ``os.pa?h.join``), nor is what an import binds it
        to (``warnings.warn`` is ``_warnings.warn``: `_Scanner._use` matches those
        names too; one with no source reaches nothing more), and is no reflective name."""
        if attr.startswith("__") or attr == "TYPE_CHECKING" or attr in _REFLECTIVE_ATTRS:
            return False
        qa = f"{q}.{attr}"
        names, reached = through(qa)
        return (
            not reached
            and module_file(qa) is None
            and not self._interesting(qa)
            and not any(map(self.matcher.interesting, names))
        )

    def _marked_lines(self, marks: set[str]) -> list[int]:
        """The lines of ``marks``, as `_marks` made them (its `uncalled` and `dotted`).

        A ``name(`` or ``name.module`` mark is handed over with the words too: no word
        of a file holds a ``(`` or a ``.``, so it finds nothing there (and sorting out
        the words one by one cost more than a file's search)."""
        dotted = self.dotted
        return lines_of(
            self.search,
            marks,
            self.uncalled,
            dotted,
            lambda n, attr: self._quiet(dotted[n], attr),
        )

    def _interesting(self, q: str) -> bool:
        loaded = self.loaded.get(q)
        if loaded is not None and any(self._interesting(sub) for sub in loaded):
            return True  # `import a.b` bound `a`: this file's own, never memoised
        memo = self.interesting_memo
        if memo is None:
            memo = self._interest_memo()
        known = memo.get(q)
        if known is None:
            known = memo[q] = self._interesting_name(q)
        return known

    def _interest_memo(self) -> dict[str, bool]:
        """`_interesting`'s answers but `loaded`'s: they depend on the rules (the
        matchers are made from them) and on the project's top package only, the same in
        every file of a run."""
        memo = self.interesting_memo
        if memo is None:
            top = self.module.split(".", 1)[0]
            memo = self.interesting_memo = self.run.interesting.setdefault(top, {})
        return memo

    def _interesting_name(self, q: str) -> bool:
        return not self._dead_name(q) and self._interest_of(q)

    def _dead_name(self, q: str) -> bool:
        """Is ``q`` under a `_dead` top-level name (asked once per name per run)?"""
        head = q.split(".", 1)[0]
        dead = self.run.dead_heads.get(head)
        if dead is None:
            dead = self.run.dead_heads[head] = self._dead(head)
        return dead

    def _dead(self, head: str) -> bool:
        """Is no name under the top-level name ``head`` of interest (`_interest_of`)?
        Yes when it is no `_ALWAYS` name's, no pattern can match under it, it has no C
        twin and no source to reach anything through (a project's own package, as
        `_reaches` and `_installed` see it: not installed)."""
        return (
            head not in _ALWAYS_HEADS
            and head not in TWIN_HEADS
            and not self.matcher.may_match_under(head)
            and module_file(head) is None
        )

    def _interest_of(self, q: str) -> bool:
        return (
            q in _ALWAYS
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
        memo = self.run.reaches
        known = memo.get(q)
        if known is None and module_file(q.split(".", 1)[0]) is None:
            # No source for its top package (the project's own, a builtin module): no
            # import binding of it can be read, so nothing is reached through it.
            known = memo[q] = False
        if known is None:
            known = False
            # `from json import codecs` binds a module through another one: start from
            # what the written name is (`codecs`), not only from the name itself.
            names, reached = through(q) if "." in q else ((), ())
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
                    for targets in module_imports(module).values():
                        for target in targets:
                            if target in seen:
                                continue
                            seen.add(target)
                            if self.matcher.interesting(target):
                                known = True
                            elif module_file(target) is not None or target in NO_SOURCE:
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
            if len(memo) > 65536:
                memo.clear()
            memo[q] = known
        return known

    def _name(self, name: str, scope: Scope) -> str | None:
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
                    if isinstance(node, COMPREHENSIONS):
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
        key = (scope_name(node), getattr(node, "lineno", 0))
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
            positions = _binding_positions(self.search, name.encode("utf-8"))
            known = []
            line, pos = 1, 0
            for start in positions:
                line += self.search.count(b"\n", pos, start)
                pos = start
                known.append(line)
            self.maybe_bound[name] = known
        return known

    def _bound_in(self, name: str, fn: ast.AST) -> bool:
        """May ``name`` be bound in the scope ``fn`` opens or in one it holds (then
        `_local` asks the symbol table)? A text test first, then the tree's."""
        lines = self._bound_lines(name)
        if not lines:
            return False
        start = getattr(fn, "lineno", 1)
        end = getattr(fn, "end_lineno", None) or start
        i = bisect.bisect_left(lines, start)
        if i == len(lines) or lines[i] > end:
            return False
        if self.generic_open:
            return True  # a type parameter scope around `fn` binds names of its own
        key = (name, fn)  # the node itself: an id can be reused once a parsed string is gone
        known = self.binds_memo.get(key)
        if known is None:
            known = self.binds_memo[key] = _binds(fn, name)
        return known
