"""The in-sandbox half of a declared-tests check: runs each test in its own process.

Run by the verifier as ``python3 -I -B <this file> PLAN`` from the kernel installation
(the sandbox shows it read-only). Standard library only: the sandbox's interpreter is
not the kernel's environment. It holds nothing a verdict depends on: no nonce, no
expected outcome, no knowledge of which named test is a kernel control. It only reports
what it observes to the trusted collector (`kernel.effects.adapters.declared_tests`),
which runs in the kernel's own process and judges.

Rules enforced (in this order, before any code of the tree runs):

- the plan (``PLAN``, a file the kernel placed in the tree: runner, modules, tests in
  run order) is read and deleted, so no test process can read which tests run;
- imports from the tree are source only: a tree folder gets a finder whose only loader
  compiles ``.py`` source (``__pycache__``, ``*.pyc`` and extension modules in the tree
  are never loaded; ``-B``: nothing is written); the tree goes on ``sys.path`` after the
  standard library and site packages, so it shadows neither;
- the test framework is imported, the process is made non-dumpable (a test process can
  neither read this one's memory nor open its descriptors through ``/proc``) and a
  child subreaper, and the identities of the framework's, this module's and
  ``builtins``' namespaces are noted;
- a PEP 578 audit hook (it cannot be removed) is installed; in a test process it streams
  each finding as it happens and vetoes it: ``__code__``/``__class__``/``__defaults__``
  swaps, ``sys.settrace``/``setprofile``, frame walks from tree code, ``gc`` walks,
  ``ctypes``, code objects built at run time, new audit hooks, signals to this process,
  ``/proc`` memory, descriptor and environment files;
- each named test runs in a fresh process forked from that state: it imports every
  module of the plan (the same imports for every test, controls included; a module that
  fails to import makes only its own tests an error at the ``import`` stage, naming the
  missing module, ``ModuleNotFoundError.name``), checks that
  the modules in ``sys.modules`` are the ones the source loader executed and that the
  test's method was compiled from a tree source file, runs the test, compares the noted
  namespaces, and ends its stream with a closing mark; whatever it leaves behind is
  killed before the next test starts;
- the channel is this process's stdout (the verifier's capture, in a folder no sandbox
  sees); a test process's stdout goes to stderr; this process frames each test
  process's stream with its index and exit status (``S``, ``D``, ``X``) and closes the
  whole stream with ``E``. A stream without its closing mark is tampering.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import gc
import hashlib  # kernel-guard: ignore[KG001] sandbox has no kernel.records.identity; not an id
import importlib
import importlib.machinery
import json
import os
import select
import signal
import sys
import traceback
import types
import unittest
from operator import is_ as _IS
from typing import TYPE_CHECKING, Any

__all__ = ["main"]

_WRITE = os.write
_DUMPS = json.dumps
_CHILD_CAP = 1 << 20
_MESSAGE_LIMIT = 2000
_WATCHED_MODULES = ("traceback", "json", "json.encoder", "os", "posix", "select", "io")
_KEYED = hashlib.blake2b  # kernel-guard: ignore[KG004] a keyed event tag, not an id
_URANDOM = os.urandom
_EXIT = os._exit
_MAC_SIZE = 16


def _sibling(name: str) -> dict[str, object]:
    """The names of the runner's module ``name`` beside this file, run from its source
    (the sandbox's interpreter has no kernel on its path)."""
    path = os.path.join(os.path.dirname(os.path.realpath(__file__)), name)
    with open(path, "rb") as handle:
        source = handle.read()
    namespace: dict[str, object] = {"__name__": "kernel_" + name[:-3], "__file__": path}
    exec(compile(source, path, "exec", dont_inherit=True), namespace)  # noqa: S102 - kernel's own file
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


if TYPE_CHECKING:
    from kernel.effects.adapters.tests_audit import (
        _SOURCES,
        _STATE,
        _TREE,
        _emit,
        _hook,
        _in_tree,
        _report,
        _seal,
    )
else:
    globals().update(_sibling("tests_audit.py"))


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Loads a tree module from its source, never from bytecode, and notes the module."""

    executed: dict[str, types.ModuleType] = {}  # noqa: RUF012 - one per process

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        real = os.path.realpath(path)
        if not real.startswith(_TREE + "/"):
            # A tree name whose file lies elsewhere (a symlink out of the tree).
            _report(f"module file leaves the tree: {fullname}")
            raise ImportError(f"kernel verifier: {fullname} is not a file of the tree")
        # The audit hook sees the compile and streams the source's digest (the collector
        # compares what each process compiled: a test file rewritten between two test
        # processes, a control edited on disk).
        return compile(self.get_data(path), path, "exec", dont_inherit=True)

    def exec_module(self, module: types.ModuleType) -> None:
        super().exec_module(module)
        _SourceOnlyLoader.executed[module.__name__] = module


def _install_finder() -> None:
    """Source-only imports for tree folders; the tree after everything else on the path."""
    tree_hook = importlib.machinery.FileFinder.path_hook(
        (_SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES)
    )
    index = next(
        i for i, h in enumerate(sys.path_hooks) if "FileFinder" in getattr(h, "__qualname__", "")
    )
    default = sys.path_hooks[index]

    def hook(path: str) -> Any:
        real = os.path.realpath(path or ".")
        if real == _TREE or real.startswith(_TREE + "/"):
            return tree_hook(path)
        return default(path)

    sys.path_hooks[index] = hook
    sys.path_importer_cache.clear()
    sys.path.append(_TREE)


def _guard_should_stop() -> None:
    """``unittest.case._ShouldStop`` silently ends a test as a pass; the runner never
    asks for it (no failfast), so creating one, or a subclass, is a finding."""
    stop: type = vars(unittest.case)["_ShouldStop"]

    def new(cls: type, /, *args: object, **kwargs: object) -> object:
        _report("unittest.case._ShouldStop raised")
        return Exception.__new__(cls, *args)

    def subclass(cls: type, /, **kwargs: object) -> None:
        _report("unittest.case._ShouldStop subclassed")

    stop.__new__ = new  # type: ignore[assignment]
    stop.__init_subclass__ = classmethod(subclass)  # type: ignore[assignment]


def _genuine(value: object) -> bool:
    """A class or function a standard-library module really defines, bound in a test
    module under its own name (``from datetime import time``): a name that happens to
    match a module's, not that module rebound. The owner must be a standard-library
    module loaded from outside the tree, never tree code (`_SourceOnlyLoader`)."""
    owner, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(owner, str) or not isinstance(qualname, str):
        return False
    module = sys.modules.get(owner)
    if owner.split(".")[0] not in sys.stdlib_module_names or module is None:
        return False
    where = getattr(module, "__file__", None)
    outside = where is None or not os.path.realpath(str(where)).startswith(_TREE + "/")
    tree_code = owner in _SourceOnlyLoader.executed
    return outside and not tree_code and getattr(module, qualname, None) is value


def _rebound(noted_modules: dict[str, object], modules: list[str]) -> list[str]:
    """Names that no longer mean what they meant before any tree code ran: a module of
    that time replaced in ``sys.modules``, or a test module's global that names one
    bound to something else (the test module's ``unittest`` rebound). Compared by
    identity with the objects themselves (`_watched`)."""
    found = [n for n, m in noted_modules.items() if sys.modules.get(n) is not m]
    for name in modules:
        module = _SourceOnlyLoader.executed.get(name)
        for key, value in list(vars(module).items()) if module is not None else ():
            named = isinstance(value, types.ModuleType) or (
                getattr(value, "__name__", None) == key and not _genuine(value)
            )
            if key in noted_modules and named and value is not noted_modules[key]:
                found.append(f"{name}.{key}")
    return found


_SPACE = object()  # a namespace's start, in `_watched`'s member slot (members are strings)


def _watched() -> list[object]:
    """Every name of the watched namespaces (and their classes' names), and the import
    hooks, with the object each binds, flat in walk order: ``space, key, member, object``.

    The objects themselves, not their ``id()``: ``id`` raises an audit event per name
    (``builtins.id``), which cost a test process most of its checking time; identity is
    compared in C (`_compare`), and holding the objects rules out a reused address."""
    spaces: dict[str, dict[str, object]] = {"builtins": vars(builtins), "bootstrap": globals()}
    module = sys.modules.get(__name__)
    if module is not None and vars(module) is not globals():
        spaces["bootstrap-module"] = vars(module)  # what the loader and path hook read
    for name, module in list(sys.modules.items()):
        if name in _WATCHED_MODULES or name.split(".")[0] in ("unittest", "_pytest", "pytest"):
            spaces[name] = vars(module)
    flat: list[object] = []
    for space, namespace in spaces.items():
        flat += (space, None, _SPACE, None)
        for key, value in list(namespace.items()):
            if isinstance(value, types.ModuleType):
                continue  # a submodule imported later is bound here; sys.modules is checked
            flat += (space, key, None, value)
            if isinstance(value, type) and value.__module__ == namespace.get("__name__"):
                for attr, member in list(vars(value).items()):
                    flat += (space, key, attr, member)
    for key, hooks in (("meta_path", sys.meta_path), ("path_hooks", sys.path_hooks)):
        flat += [part for at, hook in enumerate(hooks) for part in ("sys", key, at, hook)]
    return flat


def _by_name(flat: list[object]) -> dict[tuple[object, ...], object]:
    return {tuple(flat[i : i + 3]): flat[i + 3] for i in range(0, len(flat), 4)}


def _label(key: tuple[object, ...]) -> str:
    """``space.key[.member]``, ``sys.meta_path.<index>``, or ``@space`` (a namespace)."""
    if key[2] is _SPACE:
        return f"@{key[0]}"
    return ".".join(str(part) for part in key if part is not None)


def _compare(noted: list[object], stage: str) -> None:
    watched = _watched()
    if len(noted) == len(watched) and all(map(_IS, noted, watched)):
        return  # the same objects in the same order: nothing changed
    before, after = _by_name(noted), _by_name(watched)
    # A namespace first imported in this process (a plugin the framework loads lazily)
    # has nothing to compare with; every namespace noted before is compared whole.
    spaces = {k[0] for k in before if k[2] is _SPACE}
    changed = sorted(
        _label(k)
        for k in before.keys() | after.keys()
        if before.get(k, _SPACE) is not after.get(k, _SPACE) and (k in before or k[0] in spaces)
    )
    if changed:
        _emit({"e": "finding", "what": "namespace changed", "stage": stage, "names": changed[:20]})


def _text(err: object) -> str:
    if isinstance(err, tuple) and len(err) == 3:
        text = "".join(traceback.format_exception_only(err[0], err[1]))
    else:
        text = str(err)
    return text[-_MESSAGE_LIMIT:]


class _Result(unittest.TestResult):
    """Outcomes of the one test of this process."""

    def __init__(self) -> None:
        unittest.TestResult.__init__(self)  # no super(): the class is rebuilt by `_seal`
        self.outcomes: list[tuple[str, str]] = []

    def addSuccess(self, test: unittest.TestCase) -> None:
        self.outcomes.append(("passed", ""))

    def addFailure(self, test: unittest.TestCase, err: object) -> None:
        self.outcomes.append(("failure", _text(err)))

    def addError(self, test: unittest.TestCase, err: object) -> None:
        self.outcomes.append(("error", _text(err)))

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        self.outcomes.append(("skipped", reason))

    def addExpectedFailure(self, test: unittest.TestCase, err: object) -> None:
        self.outcomes.append(("skipped", "expected failure"))

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:
        self.outcomes.append(("failure", "unexpected success"))

    def addSubTest(self, test: unittest.TestCase, subtest: object, err: object) -> None:
        if err is not None:
            self.outcomes.append(("failure", _text(err)))


_WORST = ("error", "failure", "skipped", "passed")


_EXPECTED: dict[str, str] = {}
"""Each unittest plan module's file, found on the path before any tree code ran
(`_expected_files`; set in the sealed namespace only)."""


def _expected_files(modules: list[str]) -> dict[str, str]:
    """The tree file each module name resolves to on ``sys.path``, as the import system
    would find a regular module or package (a name found outside the tree, or not at all,
    is left out): read from the file system alone, before any tree code runs."""
    found: dict[str, str] = {}
    for name in modules:
        for entry in sys.path:
            base = os.path.join(os.path.realpath(entry or "."), *name.split("."))
            path = next(
                (p for p in (base + ".py", os.path.join(base, "__init__.py")) if os.path.isfile(p)),
                None,
            )
            if path is not None:
                if path.startswith(_TREE + "/"):
                    found[name] = path
                break
    return found


def _split(test_id: str) -> tuple[types.ModuleType, str] | None:
    """The executed module a unittest id starts with, and the rest of the id.

    The loader's record of executed modules is a class attribute tree code can reach:
    a module recorded under a plan module's name whose file is not the one that name
    resolved to before any tree code ran is a finding, and no test of it runs."""
    parts = test_id.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:cut])
        module = _SourceOnlyLoader.executed.get(name)
        if module is not None:
            where = getattr(module, "__file__", None) if type(module) is types.ModuleType else 0
            if name in _EXPECTED and (type(where) is not str or where != _EXPECTED[name]):
                _emit(
                    {"e": "finding", "what": "test module not loaded from its file", "module": name}
                )
                return None
            return module, ".".join(parts[cut:])
    return None


def _source_code(module_name: str, qualname: str) -> types.CodeType | None:
    """The code object its module's source (as the loader read it) defines for ``qualname``."""
    module = _SourceOnlyLoader.executed.get(module_name)
    source = _SOURCES.get(getattr(module, "__file__", None) or "")
    if module is None or source is None:
        return None
    stack = [compile(source, module.__file__ or "", "exec", dont_inherit=True)]
    while stack:
        code = stack.pop()
        if code.co_qualname == qualname:
            return code
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return None


def _method_origin(test: unittest.TestCase) -> str | None:
    """Why the test's method is not the one its module's source defines (None: it is)."""
    name = getattr(test, "_testMethodName", "")
    owner = next((k for k in type(test).__mro__ if name in vars(k)), None)
    if owner is None:
        return f"{name} is not defined by a class"
    return _function_origin(vars(owner)[name], owner.__module__, f"{owner.__qualname__}.{name}")


def _foreign_member(cls: type) -> str | None:
    """A function of a tree test class (or a tree base of it) that other tree code put
    there (a lenient ``assertEqual`` set on the declared test's class): only its own
    module's code, or code from outside the tree, may define a test class's members."""
    for klass in cls.__mro__:
        module = _SourceOnlyLoader.executed.get(klass.__module__)
        if module is None:
            continue  # the framework's classes: their namespaces are noted and compared
        for name, value in list(vars(klass).items()):
            inner = getattr(value, "__func__", value)
            if type(inner) is types.FunctionType:
                filename = inner.__code__.co_filename
                if _in_tree(filename) and filename != module.__file__:
                    return f"{klass.__qualname__}.{name} comes from {filename!r}"
    return None


def _function_origin(function: object, module_name: str, qualname: str) -> str | None:
    """Why ``function`` is not the one its module's source defines for ``qualname``.

    Wrappers are allowed from outside the tree (``unittest.skip``) or from the test
    module itself (its own decorators); a wrapper from anywhere else in the tree (the
    module under test wrapping a test) is a finding."""
    expected = _source_code(module_name, qualname)
    module_file = getattr(_SourceOnlyLoader.executed.get(module_name), "__file__", None)
    chain: list[types.FunctionType] = []
    while type(function) is types.FunctionType and len(chain) < 16:
        chain.append(function)
        function = vars(function).get("__wrapped__")
    found = next((i for i, f in enumerate(chain) if f.__code__ == expected), None)
    if expected is None or found is None:
        return f"{qualname} is not the function its module's source defines"
    for wrapper in chain[:found]:
        filename = wrapper.__code__.co_filename
        if _in_tree(filename) and filename != module_file:
            return f"{qualname} is wrapped by code from {filename!r}"
    return None


def _run_unittest(test_id: str) -> tuple[str, str]:
    found = _split(test_id)
    if found is None:
        return "error", "no module of the plan starts this id"
    module, rest = found
    suite = unittest.TestLoader().loadTestsFromName(rest, module)
    tests = list(_flatten(suite))
    if len(tests) != 1 or not isinstance(tests[0], unittest.TestCase):
        return "error", "does not name exactly one test"
    if isinstance(tests[0], vars(unittest.loader)["_FailedTest"]):
        return "error", _text(tests[0]._exception)
    origin = _method_origin(tests[0]) or _foreign_member(type(tests[0]))
    if origin is not None:
        _emit({"e": "finding", "what": "test method replaced", "detail": origin})
    result = _Result()
    suite.run(result)
    if not result.outcomes:
        return "error", "the test reported no outcome"
    return min(result.outcomes, key=lambda o: _WORST.index(o[0]))


def _flatten(suite: object) -> list[object]:
    if isinstance(suite, unittest.TestSuite):
        return [t for s in suite for t in _flatten(s)]
    return [suite]


_PYTEST_ARGS = (
    "-q",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:stepwise",
    "--assert=plain",
    "--import-mode=append",
    "--continue-on-collection-errors",
    "-o",
    "addopts=",
)
"""Assertion rewriting off (it reads cached bytecode of the tree); the tree after the
standard library; no cache written; the project's ``addopts`` cannot select tests; a
file that fails to collect leaves the other files' tests to run."""


class _PytestRecorder:
    """A pytest plugin: keeps only the named item and records its reports."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.items: list[Any] = []
        self.reports: list[tuple[str, str, str]] = []
        self.broken: list[tuple[str, str]] = []
        self.missing: dict[str, str | None] = {}
        self.conftest: tuple[str, str | None] | None = None
        """A conftest pytest loads before collecting (the root's, a test folder's) that
        failed to import: its error and the missing module, if one is why."""

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.broken.append((report.nodeid, str(report.longrepr)[-_MESSAGE_LIMIT:]))

    def pytest_exception_interact(self, node: Any, call: Any, report: Any) -> None:
        if call.when == "collect":
            self.missing[node.nodeid] = _missing_name(call.excinfo.value)

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        items[:] = [i for i in items if i.nodeid == self.nodeid]
        self.items = list(items)

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.nodeid == self.nodeid:
            skipped = report.outcome == "skipped" or hasattr(report, "wasxfail")
            text = str(report.longrepr or "")[-_MESSAGE_LIMIT:]
            self.reports.append((report.when, "skipped" if skipped else report.outcome, text))


def _run_pytest(test_id: str, files: list[str]) -> tuple[str, str, str, str | None]:
    """The named node's outcome, message, stage and missing module, from a pytest
    session over every test file of the plan (the same imports in every test process).

    A conftest loaded before collection (the root's) that failed to import, or a file or
    package of the node that failed to collect (its module did not import), is an error
    at ``import`` stage naming the missing module; another file's failure does not stop
    this test; a failure of the node's own class or parameters is an error of
    the test."""
    import pytest

    recorder = _PytestRecorder(test_id)

    def pytest_load_initial_conftests(early_config: Any) -> Any:
        # pytest reports a conftest that fails to import before any collection (it
        # prints and returns): kept here, so that it is one import error of every test
        # naming the missing module, as a test module that cannot import is.
        outcome = yield
        error = outcome.excinfo[1] if outcome.excinfo is not None else None
        if error is not None:
            recorder.conftest = (_text((type(error), error, None)), _missing_name(error))

    marked = pytest.hookimpl(hookwrapper=True)(pytest_load_initial_conftests)
    watch = types.SimpleNamespace(pytest_load_initial_conftests=marked)
    pytest.main([*_PYTEST_ARGS, "--rootdir", _TREE, *files], plugins=[recorder, watch])
    if recorder.conftest is not None:
        text, missing = recorder.conftest
        return "error", text, "import", missing
    for nodeid, text in recorder.broken:
        if test_id.startswith(nodeid + "/") or test_id.startswith(nodeid + "::"):
            imported = "::" not in nodeid and nodeid != ""
            stage = "import" if imported else "test"
            return "error", text, stage, recorder.missing.get(nodeid) if imported else None
    if len(recorder.items) != 1:
        return "error", "does not name exactly one test", "test", None
    item = recorder.items[0]
    function = getattr(item, "obj", None)
    if isinstance(function, types.MethodType):
        function = function.__func__  # a test class's method, bound to its instance
    module = getattr(function, "__module__", "") or ""
    origin = _function_origin(function, module, getattr(function, "__qualname__", ""))
    if origin is not None:
        _emit({"e": "finding", "what": "test function replaced", "detail": origin})
    stages = {when: (outcome, text) for when, outcome, text in recorder.reports}
    for when, failed in (("setup", "error"), ("call", "failure"), ("teardown", "error")):
        outcome, text = stages.get(when, ("passed", ""))
        if outcome == "failed":
            return failed, text, "test", None
        if outcome == "skipped":
            return "skipped", text, "test", None
    if "call" not in stages:
        return "error", "the test reported no outcome", "test", None
    return "passed", "", "test", None


def _test_modules(plan: dict[str, object]) -> list[str]:
    """The names the test modules of the plan were executed under."""
    if plan.get("runner") != "pytest":
        return [str(m) for m in plan["modules"]]  # type: ignore[attr-defined]
    files = {os.path.join(_TREE, str(f)) for f in plan["files"]}  # type: ignore[attr-defined]
    return [n for n, m in _SourceOnlyLoader.executed.items() if m.__file__ in files]


def _check_modules(noted_modules: dict[str, object], modules: list[str]) -> None:
    """Stream a test module replaced in ``sys.modules`` and names rebound (`_rebound`)."""
    for name in modules:
        if sys.modules.get(name) is not _SourceOnlyLoader.executed.get(name):
            _emit({"e": "finding", "what": "test module replaced", "module": name})
    rebound = _rebound(noted_modules, modules)
    if rebound:
        _emit({"e": "finding", "what": "names rebound", "names": rebound[:20]})


def _child(
    test_id: str,
    plan: dict[str, object],
    noted: list[object],
    noted_modules: dict[str, object],
    fd: int,
    *,
    key: bytearray,
) -> None:
    """One test process: never returns.

    Its events are signed by the audit hook with ``key`` (the bootstrap sends it to the
    collector; here it lives only inside a keyed hash in the sealed namespace, and the
    bytes are wiped before any tree code runs) and numbered: a forged line, a line
    taken away or a stream cut short is tampering."""
    os.setpgid(0, 0)
    os.dup2(2, 1)
    tag = _KEYED  # kernel-guard: ignore[KG004] a keyed event tag, not an id
    _STATE["mac"] = tag(key=bytes(key), digest_size=_MAC_SIZE)  # kernel-guard: ignore[KG004] tag
    key[:] = bytes(len(key))
    _STATE["fd"] = fd
    _emit({"e": "start", "test": test_id})
    missing: str | None = None
    try:
        if plan.get("runner") == "pytest":
            files = [str(f) for f in plan["files"]]  # type: ignore[attr-defined]
            outcome, message, stage, missing = _run_pytest(test_id, files)
        else:
            outcome, message, stage, missing = _import_and_run(test_id, plan, noted, noted_modules)
    except BaseException as e:
        outcome, message, stage = "error", _text((type(e), e, None)), "import"
    ran: dict[str, object] = {
        "e": "ran",
        "test": test_id,
        "outcome": outcome,
        "message": message,
        "stage": stage,
    }
    _emit({**ran, "missing": missing} if missing is not None else ran)
    _check_modules(noted_modules, _test_modules(plan))
    _compare(noted, "test")
    _emit({"e": "end"})
    _EXIT(0)


def _missing_name(error: BaseException | None) -> str | None:
    """The module whose absence caused ``error`` (``ModuleNotFoundError.name``, through
    the chain of causes a framework wraps it in), or None."""
    seen = 0
    while error is not None and seen < 16:
        if isinstance(error, ModuleNotFoundError) and isinstance(error.name, str):
            return error.name
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


def _import_and_run(
    test_id: str, plan: dict[str, object], noted: list[object], noted_modules: dict[str, object]
) -> tuple[str, str, str, str | None]:
    """Import every module of the plan (the same imports in every test process), then
    run the unittest id: an error at ``import`` stage, naming the missing module, when
    the module of the id is one that failed to import (another module's failure does not
    stop this test)."""
    failed: dict[str, Exception] = {}
    for name in _test_modules(plan):
        try:
            importlib.import_module(name)  # kernel-guard: ignore[KG005] the plan's modules
        except Exception as e:  # reported for the tests of that module alone
            failed[name] = e
    _check_modules(noted_modules, _test_modules(plan))
    _compare(noted, "import")
    own = max((n for n in _test_modules(plan) if test_id.startswith(n + ".")), key=len, default="")
    if own in failed:
        error = failed[own]
        return "error", _text((type(error), error, None)), "import", _missing_name(error)
    outcome, message = _run_unittest(test_id)
    return outcome, message, "test", None


def _out(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[_WRITE(1, view) :]


def _relay(index: int, read_fd: int, pid: int) -> int:
    """Frame a test process's stream onto the channel; its wait status when it ended."""
    os.set_blocking(read_fd, False)
    sent, status, open_ = 0, None, True
    while open_:
        ready = select.select([read_fd], [], [], 0.05)[0]
        while ready:
            try:
                chunk = os.read(read_fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                open_ = False
                break
            if sent < _CHILD_CAP:
                chunk = chunk[: _CHILD_CAP - sent]
                sent += len(chunk)
                _out(b"D %d %d\n" % (index, len(chunk)) + chunk)
        if status is None:
            done, wait = os.waitpid(pid, os.WNOHANG)
            if done:
                status = wait
                ready = [read_fd]
                open_ = False
                while True:  # what it wrote before it ended
                    try:
                        chunk = os.read(read_fd, 65536)
                    except BlockingIOError:
                        break
                    if not chunk or sent >= _CHILD_CAP:
                        break
                    chunk = chunk[: _CHILD_CAP - sent]
                    sent += len(chunk)
                    _out(b"D %d %d\n" % (index, len(chunk)) + chunk)
    os.close(read_fd)
    if status is None:
        status = os.waitpid(pid, 0)[1]
    _sweep(pid)
    return os.waitstatus_to_exitcode(status)


def _sweep(pgid: int) -> None:
    """Kill whatever the last test process left behind (its group, then orphans)."""
    with contextlib.suppress(OSError):  # the group may be gone
        os.killpg(pgid, signal.SIGKILL)
    for _round in range(2):
        while True:  # reap what ended; stop at the first live child
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                return  # no process of the test is left (the common case: no /proc scan)
        _kill_orphans()


def _kill_orphans() -> None:
    """Kill every process reparented to this one (a test's daemon that left its group)."""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if fields[1].decode() == me:
                with contextlib.suppress(OSError):
                    os.kill(int(entry), signal.SIGKILL)


def _import_pytest() -> bool:
    """pytest and its default plugins, imported before any tree code (False: absent)."""
    try:
        import pytest
        from _pytest.config import default_plugins
    except ImportError:
        return False
    for name in default_plugins:
        with contextlib.suppress(ImportError):
            importlib.import_module(f"_pytest.{name}")  # kernel-guard: ignore[KG005] pytest's own
    # One session outside the tree sets what pytest initialises lazily (its own caches
    # and flags), so that a test process's namespaces compare with a settled state.
    import tempfile

    with tempfile.TemporaryDirectory() as warm:
        with open(os.path.join(warm, "test_warm.py"), "w") as handle:
            handle.write(
                "import pytest\n\n\n@pytest.fixture\ndef f():\n    return 1\n\n\n"
                "def test_warm(f):\n    assert f == 1\n"
            )
        pytest.main([*_PYTEST_ARGS, "--rootdir", warm, warm], plugins=[])
        sys.modules.pop("test_warm", None)
    return True


def _harden() -> bool:
    """Non-dumpable (no /proc access to this process) and a subreaper of orphans."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        dumpable = libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
        reaper = libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER 1
    except (OSError, AttributeError):
        return False  # reported in the hello line: the collector records it
    return bool(dumpable == 0 and reaper == 0)


def main(argv: list[str]) -> int:
    """Run the plan named by ``argv[0]`` in the sealed copy of this module (`_seal`)."""
    main_: Any = _seal(globals())["_main"]
    return int(main_(argv))


def _main(argv: list[str]) -> int:
    """Run the plan named by ``argv[0]``; frame every test process's stream on stdout."""
    if len(argv) != 1:
        print("tests_bootstrap: expected one plan file", file=sys.stderr)
        return 2
    # The channel is fd 1, written with os.write only: what Python code prints goes to
    # stderr, in this process and in every test process.
    sys.stdout = sys.stderr
    with open(argv[0], "rb") as handle:
        plan = json.loads(handle.read())
    os.unlink(argv[0])
    _install_finder()
    if plan.get("runner") == "pytest" and not _import_pytest():
        _out(b"H " + _DUMPS({"error": "pytest is not importable"}).encode() + b"\n")
        return 3
    hardened = _harden()
    sys.stdout.flush()
    _guard_should_stop()
    noted = _watched()
    noted_modules: dict[str, object] = dict(sys.modules)
    if plan.get("runner") != "pytest":
        _EXPECTED.update(_expected_files([str(m) for m in plan["modules"]]))
    sys.addaudithook(_hook)
    tests = [str(t) for t in plan["tests"]]
    hello = {"python": list(sys.version_info[:3]), "tests": len(tests), "hardened": hardened}
    _out(b"H " + _DUMPS(hello, sort_keys=True).encode())
    _out(b"\n")
    # Objects of the pre-import state move out of the collector's reach: a test process
    # then copies no page of them on its first collection (the per-test cost).
    gc.freeze()
    for index, test_id in enumerate(tests):
        read_fd, write_fd = os.pipe()
        key = bytearray(_URANDOM(32))
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            try:
                _child(test_id, plan, noted, noted_modules, write_fd, key=key)
            finally:
                _EXIT(70)
        os.close(write_fd)
        _out(b"S %d %s\n" % (index, key.hex().encode()))
        status = _relay(index, read_fd, pid)
        _out(b"X %d %d\n" % (index, status))
    _out(b"E\n")
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    # Everything is written (os.write): skip the interpreter's teardown of the modules.
    os._exit(code)
