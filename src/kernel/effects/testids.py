"""Which declared test ids name nothing a baseline defines, found statically.

A wrong test id is a config error when it can be told before anything runs (issue 19):

- a unittest id ``package.module.Class.test`` whose module file exists but defines no
  such class or method;
- a pytest node id ``path/test_x.py::Class::test`` whose file does not exist in the
  baseline (pytest collects only files of the tree), or defines no such function, class
  or method; a parametrized id ``test_x[...]`` when ``test_x`` is not defined.

Read with `ast`, never imported. Undecidable cases are left to calibration, which names
the id it could not run: a unittest module file that is not found (it may be generated
or installed), a class with a base class from elsewhere or a decorator (the method may
be inherited or added), a name bound only by an import, inside a compound statement or
by code (``globals()``, ``setattr``, ``exec``, a star import), a syntax error, and the
parameter part of a parametrized id (which needs collection).
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable, Sequence
from typing import Final

from kernel.guard.syntax import parse_module

__all__ = ["unknown_test_ids"]

_TESTCASE_BASES: Final = frozenset({"TestCase", "unittest.TestCase", "object"})


_DYNAMIC: Final = frozenset({"globals", "locals", "setattr", "exec", "eval", "vars"})


def _maybe_bound(scope: Sequence[ast.stmt], name: str) -> bool:
    """Whether ``name`` could be bound in ``scope`` otherwise than by a plain definition
    at its top level: by an import, inside a compound statement, or by code."""
    for node in (n for stmt in scope for n in ast.walk(stmt)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            if any(a.name == "*" or (a.asname or a.name).split(".")[0] == name for a in node.names):
                return True
        elif isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.Name) and (node.id == name or node.id in _DYNAMIC):
            return True
    return False


def _names(scope: Sequence[ast.stmt]) -> dict[str, ast.stmt]:
    """The names a module or class body binds to definitions or assignments."""
    found: dict[str, ast.stmt] = {}
    for node in scope:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign):
            found.update({t.id: node for t in node.targets if isinstance(t, ast.Name)})
    return found


def _test_defined(source: str, names: Sequence[str]) -> bool | None:
    """Whether ``names`` (class, method) are defined in the module ``source``; None when
    it cannot be told statically (a base class from elsewhere, a syntax error)."""
    try:
        # Old code warns (invalid escape sequences): a warning is not a test id problem,
        # and must not become an error where warnings are errors.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scope: Sequence[ast.stmt] = parse_module(source).body
    except (SyntaxError, ValueError):
        return None
    for name in names:
        node = _names(scope).get(name)
        if node is None:
            return None if _maybe_bound(scope, name) else False
        if not isinstance(node, ast.ClassDef):
            return None if name != names[-1] else True
        inherited = {ast.unparse(b) for b in node.bases} - _TESTCASE_BASES
        opaque = inherited or node.decorator_list or node.keywords
        if opaque and name != names[-1] and names[-1] not in _names(node.body):
            return None
        scope = node.body
    return True


def unknown_test_ids(test_ids: Sequence[str], read: Callable[[str], str | None]) -> tuple[str, ...]:
    """The ids of ``test_ids`` that the files ``read`` gives (relative path -> text, or
    None when absent) statically do not define, in order."""
    unknown: list[str] = []
    for test in test_ids:
        if "::" in test:
            if _pytest_unknown(test, read):
                unknown.append(test)
            continue
        parts = test.split(".")
        if "/" in test or len(parts) < 2:
            continue
        for cut in range(len(parts) - 1, 0, -1):
            source = read("/".join(parts[:cut]) + ".py")
            if source is not None:
                if _test_defined(source, parts[cut:]) is False:
                    unknown.append(test)
                break
    return tuple(unknown)


def _pytest_unknown(node_id: str, read: Callable[[str], str | None]) -> bool:
    """Whether the pytest node id ``path.py::Name::...[params]`` surely names nothing:
    its file is absent, or the file statically does not define the names (the parameter
    part is left to calibration)."""
    path, _, rest = node_id.partition("::")
    source = read(path)
    if source is None:
        return True
    names = rest.split("::")
    names[-1] = names[-1].split("[", 1)[0]
    return _test_defined(source, names) is False
