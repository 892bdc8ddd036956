"""The public API, derived by walking it (trio's test_exports is the model).

What ``kernel.__all__`` must hold is not a hand-copied list: every kernel type that a
public signature (or a public record's field) mentions must be exported, and the three
``kernel/__init__.py``'s one table (`_EXPORTS`) is what type checkers see (its generated stub).
"""

from __future__ import annotations

import ast
import enum
import importlib
import importlib.metadata
import importlib.resources
import inspect
import pkgutil
import re
import subprocess
import sys
import typing
import warnings
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import kernel
from kernel.effects import api_stub
from kernel.records.values import Refusal

INIT = Path(kernel.__file__)


def _types_in(hint: object) -> Iterator[type]:
    """Every class named by a type hint, through unions and generic arguments."""
    if isinstance(hint, type):
        yield hint
    for arg in typing.get_args(hint):
        if arg is not Ellipsis and not isinstance(arg, str | int | bool | enum.Enum):
            yield from _types_in(arg)


def _signature_types(obj: object) -> Iterator[type]:
    """Types in a function's signature, or in a class's fields and public methods."""
    if inspect.isfunction(obj):
        for hint in typing.get_type_hints(obj).values():
            yield from _types_in(hint)
        return
    if not isinstance(obj, type):
        return
    if attrs.has(obj):
        for hint in typing.get_type_hints(obj).values():
            yield from _types_in(hint)
    for name, member in vars(obj).items():
        if name.startswith("_"):
            continue
        function = getattr(member, "__func__", member)
        if isinstance(member, property):
            function = member.fget
        if inspect.isfunction(function):
            for hint in typing.get_type_hints(function).values():
                yield from _types_in(hint)
    yield from obj.__mro__[1:]


def _reachable_kernel_types() -> set[type]:
    """Kernel-defined types reachable from the exports, transitively."""
    found: set[type] = set()
    todo = [getattr(kernel, name) for name in kernel.__all__]
    seen: set[int] = set()
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        for kind in _signature_types(obj):
            if kind.__module__.startswith("kernel.") and kind not in found:
                found.add(kind)
                todo.append(kind)
    return found


def test_every_type_in_a_public_signature_is_exported() -> None:
    """A caller can name every type the API hands out or asks for (no hidden types)."""
    exported = {getattr(kernel, name) for name in kernel.__all__}
    missing = sorted(
        f"{kind.__module__}.{kind.__qualname__}"
        for kind in _reachable_kernel_types()
        if kind not in exported
    )
    assert missing == []


def test_every_export_resolves_to_its_home_module() -> None:
    """Each name in `_EXPORTS` is the object its module defines, and `__all__` lists them all."""
    homes = kernel._EXPORTS
    assert sorted(kernel.__all__) == sorted(name for names in homes.values() for name in names)
    assert len(set(kernel.__all__)) == len(kernel.__all__)
    for module_name, names in homes.items():
        module = importlib.import_module(module_name)
        for name in names:
            assert name in module.__all__, f"{module_name}.{name}"
            assert getattr(kernel, name) is getattr(module, name), name


def test_type_checkers_see_exactly_the_table() -> None:
    """The stub type checkers read is generated from `_EXPORTS` and current, and
    ``__init__.py`` itself holds no other list of names (no type-checking imports, no
    deprecated aliases)."""
    assert api_stub.generate() == INIT.with_suffix(".pyi").read_bytes()
    assert api_stub.main(["--check", "--root", str(INIT.parents[2])]) == 0
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    assert not [n for n in tree.body if isinstance(n, ast.Import)]
    modules = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert modules <= {"__future__", "types", "typing"}
    assert not [n for n in tree.body if isinstance(n, ast.If)]


def test_a_stale_stub_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--check`` fails on a missing or edited stub and says how to regenerate it."""
    assert api_stub.main(["--check", "--root", str(tmp_path)]) == 1
    assert "python -m kernel.effects.api_stub" in capsys.readouterr().err
    assert api_stub.main(["--root", str(tmp_path)]) == 0
    assert api_stub.main(["--check", "--root", str(tmp_path)]) == 0


def test_unknown_attribute_is_an_attribute_error() -> None:
    """`kernel.<typo>` raises AttributeError naming it (so hasattr works)."""
    with pytest.raises(AttributeError, match="no attribute 'sael'"):
        _ = kernel.sael  # type: ignore[attr-defined]
    assert not hasattr(kernel, "binding_refusal")


def test_import_kernel_loads_no_submodule() -> None:
    """`import kernel` is cheap: submodules load on first use, not at import."""
    code = (
        "import sys, kernel\n"
        "print(sorted(m for m in sys.modules if m.startswith('kernel.')))\n"
        "kernel.seal\n"
        "print('kernel.records.codec' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["[]", "True"]


def test_dir_lists_the_public_api() -> None:
    """`dir(kernel)` shows every export even before it is loaded."""
    assert set(kernel.__all__) <= set(dir(kernel))


def test_every_module_declares_all() -> None:
    """Every importable kernel module sets __all__, and each listed name exists."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for info in pkgutil.walk_packages(kernel.__path__, "kernel."):
            module = importlib.import_module(info.name)
            assert hasattr(module, "__all__"), info.name
            for name in module.__all__:
                assert hasattr(module, name), f"{info.name}.{name}"


def test_version_is_written_once() -> None:
    """`kernel.__version__` is the one place: pyproject reads it, the installed
    distribution reports it."""
    pyproject = INIT.parents[2] / "pyproject.toml"
    if pyproject.is_file():
        text = pyproject.read_text(encoding="utf-8")
        assert 'dynamic = ["version"]' in text
        assert 'version = {attr = "kernel.__version__"}' in text
        assert not re.search(r'(?m)^version = "', text)
    assert importlib.metadata.version("evidence-kernel") == kernel.__version__


def test_py_typed_ships() -> None:
    """The package carries its py.typed marker."""
    assert importlib.resources.files("kernel").joinpath("py.typed").is_file()


def _exported_enums() -> list[type[enum.Enum]]:
    return sorted(
        (
            kind
            for kind in _reachable_kernel_types() | {getattr(kernel, n) for n in kernel.__all__}
            if isinstance(kind, type) and issubclass(kind, enum.Enum)
        ),
        key=lambda kind: kind.__name__,
    )


SNAKE = r"[a-z0-9]+(_[a-z0-9]+)*"


def test_every_code_is_lowercase_snake_case() -> None:
    """One spelling (ADR-0001 section 4): every value of every exported enum."""
    bad = [
        f"{kind.__name__}.{member.name} = {member.value!r}"
        for kind in _exported_enums()
        for member in kind
        if not (
            isinstance(member.value, str) and re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*", member.value)
        )
    ]
    assert bad == []


def _reason_enums() -> list[type[enum.Enum]]:
    """Enums whose members a refusal carries (a refusal's reason_codes), and every
    exported ``*Reason`` enum."""
    found: set[type[enum.Enum]] = {
        kind for kind in _exported_enums() if kind.__name__.endswith("Reason")
    }
    for kind in _reachable_kernel_types():
        if isinstance(kind, type) and issubclass(kind, Refusal) and kind is not Refusal:
            hint = typing.get_type_hints(kind)["reason_codes"]
            found.update(typing.get_args(hint)[:1])
    return sorted(found, key=lambda kind: kind.__name__)


@pytest.mark.parametrize("kind", _reason_enums(), ids=lambda kind: kind.__name__)
def test_every_reason_code_documents_its_check(kind: type[enum.Enum]) -> None:
    """Each reason code has a docstring (the check that produces it), and each is named
    by the code that produces it somewhere in the package (no dead code)."""
    source = inspect.getsource(sys.modules[kind.__module__])
    tree = ast.parse(source)
    body = next(
        n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == kind.__name__
    )
    documented: set[str] = set()
    for first, second in zip(body.body, body.body[1:], strict=False):
        if (
            isinstance(first, ast.Assign)
            and isinstance(second, ast.Expr)
            and isinstance(second.value, ast.Constant)
            and isinstance(second.value.value, str)
            and second.value.value.strip()
        ):
            documented.update(t.id for t in first.targets if isinstance(t, ast.Name))
    members = {member.name for member in kind}
    listed = inspect.getdoc(kind) or ""  # or named in the class docstring, by value
    documented.update(m.name for m in kind if f"``{m.value}``" in listed)
    assert members - documented == set(), kind.__name__
    package = "".join(path.read_text(encoding="utf-8") for path in INIT.parent.rglob("*.py"))
    unused = {
        name
        for name in members
        if f"{kind.__name__}.{name}" not in package and f"R.{name}" not in package
    }
    assert unused == set(), kind.__name__
