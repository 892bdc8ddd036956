"""Every exception a public function raises is named in its docstring (issue 11).

"Nothing a caller passes to a public function escapes as anything but a refusal or a
`KernelError`/``TypeError`` named in its docstring." Derived by walking the API, not
from a hand-copied list: every function of ``kernel.__all__`` and the public functions
of `kernel.records.codec`, `kernel.records.values` and `kernel.records.identity`. A function
wrapped by `kernel.records.values.boundary` names `ParameterTypeError`; a function whose own
body says ``raise X(...)`` names ``X``. The pure core raises no bare builtin ``ValueError`` or
``KeyError``: misuse with well-typed arguments is an `ParameterValueError`.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
import re
import textwrap
import typing
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import kernel
from kernel.errors import FieldError, KernelError, ParameterTypeError, ParameterValueError
from kernel.records import values
from kernel.records.values import Kind, boundary
from kernel.run.verification import Isolation, weakest_isolation
from kernel.strategies.values import of_kind


def _sample(x: int) -> int:
    return x


BOUNDARY_CODE = boundary(_sample).__code__
"""Every wrapper `boundary` makes runs this one code object."""


PURE = Path(kernel.__file__).parent
IMPURE = ("effects", "guard", "__main__")
"""Where effects and the CLI live; everything else is the pure core."""


def _pure_module_names() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.walk_packages([str(PURE)], "kernel.")
        if info.name.split(".")[1] not in IMPURE
    )


def _public_functions() -> dict[str, Callable[..., object]]:
    """``kernel.__all__``'s functions and those of every pure module's ``__all__``."""
    found: dict[str, Callable[..., object]] = {}
    for name in kernel.__all__:
        obj = getattr(kernel, name)
        if inspect.isfunction(obj):
            found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    for module_name in _pure_module_names():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.isfunction(obj) and obj.__module__ == module.__name__:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


FUNCTIONS = _public_functions()


def _is_attrs_validator(function: Callable[..., object]) -> bool:
    """An attrs field validator ``(instance, attribute, value)``: attrs calls it while a
    record is built, so what it raises is what building a record raises."""
    # Read the annotation as written: ``attrs.Attribute[Any]`` is not subscriptable
    # at run time, so `typing.get_type_hints` cannot evaluate it.
    parameters = list(inspect.signature(function).parameters.values())
    return (
        len(parameters) == 3
        and parameters[1].name == "attribute"
        and str(parameters[1].annotation).startswith("attrs.Attribute")
    )


def documented_raises(doc: str | None) -> set[str]:
    """Exception names listed in a Google-style ``Raises:`` section (last dotted part)."""
    names: set[str] = set()
    lines = textwrap.dedent(doc or "").splitlines()
    # The first line of a docstring is not indented; dedent the rest on its own.
    lines = [lines[0], *textwrap.dedent("\n".join(lines[1:])).splitlines()] if lines else []
    inside = False
    for line in lines:
        if line.strip() == "Raises:":
            inside = True
            continue
        if not inside:
            continue
        if line and not line.startswith(" "):
            inside = False
            continue
        entry = re.fullmatch(r" {4}([A-Za-z_][\w.]*):.*", line)
        if entry:
            names.add(entry.group(1).rsplit(".", 1)[-1])
    return names


def _resolve(node: ast.expr, scope: dict[str, object]) -> type[BaseException] | None:
    """The exception class ``raise node`` raises, for ``Name(...)`` of a class or of a
    helper annotated to return one (``field_error(...) -> FieldError``); else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    target = scope.get(node.func.id, getattr(builtins, node.func.id, None))
    if isinstance(target, type) and issubclass(target, BaseException):
        return target
    if inspect.isfunction(target):
        returned = typing.get_type_hints(target).get("return")
        if isinstance(returned, type) and issubclass(returned, BaseException):
            return returned
    return None


def raised_in_body(function: Callable[..., object]) -> set[type[BaseException]]:
    """Exception classes raised by the function's own statements (not nested functions,
    nor a block whose first line says ``pragma: no cover``: declared unreachable)."""
    inner = inspect.unwrap(function)
    source = textwrap.dedent(inspect.getsource(inner))
    source_lines = source.splitlines()
    tree = ast.parse(source)
    scope = inner.__globals__
    found: set[type[BaseException]] = set()

    def unreachable(node: ast.AST) -> bool:
        # coverage.py excludes the whole block a ``pragma: no cover`` line opens.
        return isinstance(node, ast.stmt) and "pragma: no cover" in source_lines[node.lineno - 1]

    def walk(node: ast.AST) -> Iterator[ast.Raise]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            if isinstance(child, ast.ClassDef) or unreachable(child):
                continue
            if isinstance(child, ast.Raise):
                yield child
            yield from walk(child)

    (definition,) = tree.body
    for statement in walk(definition):
        if statement.exc is None:
            continue
        kind = _resolve(statement.exc, scope)
        if kind is not None:
            found.add(kind)
    return found


def test_the_walk_finds_the_api() -> None:
    """The walk is not vacuous: it sees boundary-wrapped functions and raise statements."""
    wrapped = {name for name, f in FUNCTIONS.items() if f.__code__ is BOUNDARY_CODE}
    assert "kernel.run.report.build_evidence_report" in wrapped
    assert "kernel.corroboration.consensus.build_corroboration_report" in wrapped
    assert "kernel.search.binding.verify_binding" not in wrapped  # ADR-0232: refuses instead
    assert ParameterValueError in raised_in_body(kernel.build_run_admission)
    assert FieldError in raised_in_body(values.digest)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_boundary_functions_name_argument_type_error(name: str) -> None:
    """A function whose wrapper checks argument types documents what it raises then."""
    function = FUNCTIONS[name]
    if function.__code__ is not BOUNDARY_CODE:
        return
    named = documented_raises(function.__doc__)
    assert named & {"ParameterTypeError", "TypeError"}, f"{name}: Raises: {sorted(named)}"


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_raise_statement_is_documented(name: str) -> None:
    """``raise X(...)`` in a public function's own body means X is in its Raises section."""
    function = FUNCTIONS[name]
    named = documented_raises(function.__doc__)
    for kind in raised_in_body(function):
        assert kind.__name__ in named, f"{name} raises {kind.__name__}; Raises: {sorted(named)}"


@pytest.mark.parametrize("name", sorted(n for n, f in FUNCTIONS.items() if _is_attrs_validator(f)))
def test_attrs_validators_raise_only_field_errors(name: str) -> None:
    """Field validators raise `FieldError` and nothing else (what a record build raises)."""
    assert raised_in_body(FUNCTIONS[name]) <= {FieldError}


def test_documented_errors_are_kernel_errors_or_type_errors() -> None:
    """Every name in a Raises section of the API is exported or a builtin TypeError."""
    allowed = {
        name
        for name in kernel.__all__
        if isinstance(getattr(kernel, name), type)
        and issubclass(getattr(kernel, name), KernelError)
    } | {"TypeError"}
    strays = {
        name: sorted(documented_raises(f.__doc__) - allowed)
        for name, f in FUNCTIONS.items()
        if documented_raises(f.__doc__) - allowed
    }
    assert strays == {}


def _pure_modules() -> Iterator[Path]:
    for name in _pure_module_names():
        origin = importlib.import_module(name).__file__
        if origin is not None:
            yield Path(origin)
    yield PURE / "__init__.py"


def test_pure_core_raises_no_bare_builtin_value_or_key_error() -> None:
    """Misuse in the pure core is a KernelError (or TypeError), never a bare builtin one."""
    banned = {"ValueError", "KeyError", "IndexError", "LookupError", "RuntimeError"}
    found = []
    for path in _pure_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Raise)
                and isinstance(node.exc, ast.Call)
                and isinstance(node.exc.func, ast.Name)
                and node.exc.func.id in banned
            ):
                found.append(f"{path.name}:{node.lineno} {node.exc.func.id}")
    assert found == []


def test_argument_value_error_is_a_value_error_naming_the_argument() -> None:
    """Callers that caught the bare ValueError keep working; the message names the call."""
    error = ParameterValueError("f", "items[1]", "a known id", "'nope'")
    assert isinstance(error, ValueError)
    assert isinstance(error, KernelError)
    assert not isinstance(error, ParameterTypeError)
    assert str(error) == "f(): items[1]: expected a known id, got 'nope'"
    assert (error.function, error.path, error.expected, error.found) == (
        "f",
        "items[1]",
        "a known id",
        "'nope'",
    )


def test_documented_raises_reads_google_sections() -> None:
    doc = """Summary.

    Args:
        x: not an error.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
        kernel.errors.RecordError: a document does not parse,
            continued: not an entry.

    Returns:
        Nothing: not an error.
    """
    assert documented_raises(doc) == {"ParameterTypeError", "RecordError"}
    assert documented_raises(None) == set()
    assert documented_raises("One line.") == set()


def test_no_isolation_level_is_an_argument_value_error() -> None:
    """The weakest of no level is misuse, named (was the bare ValueError of ``max``)."""
    with pytest.raises(ParameterValueError, match=r"weakest_isolation\(\): levels: "):
        weakest_isolation(iter(()))
    levels = iter((Isolation.OVERLAY, Isolation.COPY, Isolation.NAMESPACE_COPY))
    assert weakest_isolation(levels) is Isolation.COPY


def test_an_unknown_kind_has_no_strategy() -> None:
    """`of_kind` names a kind it does not know (was a bare KeyError)."""
    unknown = Kind(name="no such kind", description="", schema=())
    with pytest.raises(ParameterValueError, match=r"of_kind\(\): kind: .*'no such kind'"):
        of_kind(unknown)
