"""One exception contract: every exception kernel raises is in `kernel.errors`, under
`KernelError`, named apart from the standard library's, and survives a pickle round
trip (an executor such as Dask carries exceptions between processes)."""

from __future__ import annotations

import builtins
import importlib
import inspect
import pickle
import pkgutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernel
from kernel import errors
from kernel.corroboration.commit_admission import Branch, VerifierOutcome, admit_to_commit
from kernel.errors import KernelError

# Standard-library modules a kernel user is likely to import next to kernel: an
# exception name shared with one of them reads ambiguously in an `except` clause.
_STDLIB = (
    "argparse", "asyncio", "concurrent.futures", "configparser", "email.errors", "http.client",
    "json", "pickle", "shutil", "socket", "sqlite3", "ssl", "subprocess", "tarfile",
    "unittest", "urllib.error", "xml.parsers.expat", "zipfile",
)  # fmt: skip

_REFUSAL = admit_to_commit(Branch(branch_id="b", drafts=(), verifier=VerifierOutcome.NONE))


def _exception_classes() -> list[type[KernelError]]:
    return [getattr(errors, name) for name in errors.__all__]


def test_every_public_exception_of_kernel_lives_in_errors() -> None:
    """No module but `kernel.errors` defines a public exception class (private ones,
    ``_Refused``-style control flow, never leave their module)."""
    elsewhere = []
    for info in pkgutil.walk_packages(kernel.__path__, "kernel."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not name.startswith("_")
                and info.name != "kernel.errors"
            ):
                elsewhere.append(f"{info.name}.{name}")
    assert elsewhere == []


def test_every_exception_is_a_kernel_error_and_exported() -> None:
    """`except kernel.KernelError` catches everything kernel raises on purpose; none of
    them is an AssertionError (``python -O`` must not change what fails)."""
    for kind in _exception_classes():
        assert issubclass(kind, KernelError), kind
        assert not issubclass(kind, AssertionError), kind
        assert getattr(kernel, kind.__name__) is kind


def test_no_exception_name_is_a_standard_library_one() -> None:
    """`ParameterTypeError`, not argparse's `ArgumentTypeError`: a name never shadows a
    builtin or a common standard-library exception."""
    taken = set(dir(builtins))
    for module_name in _STDLIB:
        module = importlib.import_module(module_name)
        taken |= {n for n, v in vars(module).items() if isinstance(v, type)}
    assert {kind.__name__ for kind in _exception_classes()} & taken == set()


def _build(kind: type[KernelError], text: str) -> KernelError:
    """An instance of ``kind`` through its own ``__init__``: ``text`` for every string
    parameter, a real refusal record where one is carried; a message otherwise."""
    own = next((c for c in kind.__mro__ if "__init__" in vars(c)), Exception)
    if not issubclass(own, KernelError):
        return kind(f"message: {text}")
    values: dict[str, object] = {}
    for name in list(inspect.signature(own.__init__).parameters)[1:]:
        values[name] = _REFUSAL if name == "refusal" else f"{name}: {text}"
    return kind(**values)


@pytest.mark.parametrize("kind", _exception_classes(), ids=lambda kind: kind.__name__)
@given(text=st.text(max_size=40))
def test_every_exception_pickles_and_unpickles_equal(kind: type[KernelError], text: str) -> None:
    """Type, message, ``args`` and every attribute survive `pickle` (all protocols)."""
    error = _build(kind, text)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(error, protocol=protocol))
        assert type(back) is type(error)
        assert str(back) == str(error)
        assert back.args == error.args
        assert vars(back) == vars(error)
        assert back.diagnostics() == error.diagnostics()
