"""Which declared test ids name nothing a baseline defines, found statically.

A wrong test id is a config error when it can be told before anything runs (issue 19):
a unittest id ``package.module.Class.test`` whose module file exists but defines no
such class or method. Read with `ast`, never imported. Undecidable cases are left to
calibration: a module file that is not found (it may be generated or installed), a
class with a base class from elsewhere (the method may be inherited), a syntax error,
pytest node ids (``path::name``).
"""

from __future__ import annotations

import ast
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Final

__all__ = ["unknown_test_ids"]

_PARSING: Final = threading.Lock()

_TESTCASE_BASES: Final = frozenset({"TestCase", "unittest.TestCase", "object"})


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
        # and must not become an error where warnings are errors. One parse at a time:
        # CPython 3.11's parser is not thread-safe ("AST constructor recursion depth
        # mismatch" when a suite's instance threads parse at once).
        with _PARSING, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scope: Sequence[ast.stmt] = ast.parse(source).body
    except (SyntaxError, ValueError):
        return None
    for name in names:
        node = _names(scope).get(name)
        if node is None:
            return False
        if not isinstance(node, ast.ClassDef):
            return None if name != names[-1] else True
        inherited = {ast.unparse(b) for b in node.bases} - _TESTCASE_BASES
        if inherited and name != names[-1] and names[-1] not in _names(node.body):
            return None
        scope = node.body
    return True


def unknown_test_ids(test_ids: Sequence[str], read: Callable[[str], str | None]) -> tuple[str, ...]:
    """The ids of ``test_ids`` that the files ``read`` gives (relative path -> text, or
    None when absent) statically do not define, in order."""
    unknown: list[str] = []
    for test in test_ids:
        parts = test.split(".")
        if "::" in test or "/" in test or len(parts) < 2:
            continue
        for cut in range(len(parts) - 1, 0, -1):
            source = read("/".join(parts[:cut]) + ".py")
            if source is not None:
                if _test_defined(source, parts[cut:]) is False:
                    unknown.append(test)
                break
    return tuple(unknown)
