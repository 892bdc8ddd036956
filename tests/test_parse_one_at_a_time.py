"""Every syntax tree kernel builds goes through `kernel.guard.syntax`'s one-at-a-time
builders. CPython 3.11 shares the tree builder's recursion count between threads, so two
threads building trees at once can fail with "AST constructor recursion depth mismatch"
(gh-106905); a verifier screening candidates in threads met it. A direct `ast.parse`
anywhere else in the package would bring that back, so none may exist."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import kernel
from kernel.guard.syntax import parse_expression, parse_module

PACKAGE = Path(kernel.__file__).parent
BUILDERS = PACKAGE / "guard" / "syntax.py"


def _tree_builds(path: Path) -> list[int]:
    """Lines of ``path`` that build a tree directly: ``ast.parse`` or ``compile`` with
    ``PyCF_ONLY_AST``."""
    found = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "parse":
            if isinstance(func.value, ast.Name) and func.value.id == "ast":
                found.append(node.lineno)
        elif isinstance(func, ast.Name) and func.id == "compile":
            named = [n for n in ast.walk(node) if isinstance(n, ast.Attribute | ast.Name)]
            if any(getattr(n, "attr", getattr(n, "id", "")) == "PyCF_ONLY_AST" for n in named):
                found.append(node.lineno)
    return found


def test_no_module_builds_a_tree_but_the_builders() -> None:
    direct = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != BUILDERS and (lines := _tree_builds(path))
    }
    assert direct == {}
    assert _tree_builds(BUILDERS)  # the check sees a direct build where there is one


def test_trees_built_in_threads_are_the_trees_built_alone() -> None:
    """Many threads building at once get exactly the trees one thread builds."""
    sources = [f"def f{n}(x):\n    return [x + {n} for _ in range({n})]\n" * 40 for n in range(8)]
    alone = [ast.dump(parse_module(text)) for text in sources]
    built: dict[int, list[str]] = {}

    def build(index: int) -> None:
        built[index] = [ast.dump(parse_module(text)) for text in sources * 5]

    threads = [threading.Thread(target=build, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(trees == alone * 5 for trees in built.values())
    assert ast.dump(parse_expression("a[b]")) == ast.dump(
        ast.Expression(
            ast.Subscript(ast.Name("a", ast.Load()), ast.Name("b", ast.Load()), ast.Load())
        )
    )
