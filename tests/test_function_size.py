"""Functions a reader can hold: no function over 80 lines, no module over 800.

The offenders left to split are listed with their size when the limit was set (drop
an entry when you split one; both lists are empty since the codec's split, issue 20);
nothing new joins them. Listed ones are not capped at
that size while several people are splitting and editing them (issue 20 follow-up:
cap them once the splitting is done). Ruff's statement
and branch limits (pyproject ``[tool.ruff.lint.pylint]``) hold the same line inside.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kernel

SRC = Path(kernel.__file__).parents[1]
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 800

# "module path:function" -> its length when the limit was set (issue 20).
LONG_FUNCTIONS: dict[str, int] = {}
# module path -> its length when the limit was set.
LONG_MODULES: dict[str, int] = {}


def _sizes() -> tuple[dict[str, int], dict[str, int]]:
    functions: dict[str, int] = {}
    modules: dict[str, int] = {}
    for path in sorted((SRC / "kernel").rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        text = path.read_text(encoding="utf-8")
        modules[name] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                key = f"{name}:{node.name}"
                functions[key] = max(functions.get(key, 0), node.end_lineno - node.lineno + 1)
    return functions, modules


def _over(sizes: dict[str, int], limit: int, listed: dict[str, int]) -> list[str]:
    problems = []
    for name, size in sorted(sizes.items()):
        if size > limit and name not in listed:
            problems.append(f"{name}: {size} lines (limit {limit})")
    return problems


def test_no_function_over_80_lines_but_the_listed_ones() -> None:
    functions, _ = _sizes()
    assert _over(functions, MAX_FUNCTION_LINES, LONG_FUNCTIONS) == []


def test_no_module_over_800_lines_but_the_listed_ones() -> None:
    _, modules = _sizes()
    assert _over(modules, MAX_MODULE_LINES, LONG_MODULES) == []


def test_the_measure_sees_every_module_and_refuses_an_oversized_one() -> None:
    # With empty lists the two tests above hold only if the walk finds the package's
    # modules and functions, and `_over` names an offender.
    functions, modules = _sizes()
    assert {"kernel/records/codec.py", "kernel/records/rules.py"} <= modules.keys()
    assert "kernel/records/codec.py:seal" in functions
    assert _over({"m.py": MAX_MODULE_LINES + 1}, MAX_MODULE_LINES, {}) == [
        f"m.py: {MAX_MODULE_LINES + 1} lines (limit {MAX_MODULE_LINES})"
    ]
    assert _over({"m.py": MAX_MODULE_LINES + 1}, MAX_MODULE_LINES, {"m.py": 900}) == []


def test_a_listed_offender_is_still_over_the_limit() -> None:
    # An entry whose module or function was split must leave its list.
    functions, modules = _sizes()
    stale = [name for name in LONG_FUNCTIONS if functions.get(name, 0) <= MAX_FUNCTION_LINES]
    stale += [name for name in LONG_MODULES if modules.get(name, 0) <= MAX_MODULE_LINES]
    assert stale == []
