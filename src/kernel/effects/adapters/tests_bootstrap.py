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
  module of the plan (the same imports for every test, controls included), checks that
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

import _thread
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
from typing import Any

__all__ = ["main"]

_WRITE = os.write
_DUMPS = json.dumps
_GETFRAME = sys._getframe
_TREE = os.path.realpath(os.getcwd())
_SELF = os.path.realpath(__file__)
_CHILD_CAP = 1 << 20
_MESSAGE_LIMIT = 2000
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
_SWAP_ATTRS = frozenset(
    {"__code__", "__class__", "__defaults__", "__kwdefaults__", "__globals__", "__closure__"}
)
_ALWAYS = frozenset(
    {
        "sys.settrace",
        "sys.setprofile",
        "sys._current_frames",
        "sys.addaudithook",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "code.__new__",
        "function.__new__",
    }
)
_FROM_TREE = frozenset({"sys._getframe", "marshal.loads", "marshal.load"})
_PROC_FILES = frozenset(
    {"mem", "fd", "fdinfo", "environ", "cmdline", "maps", "map_files", "root", "cwd", "exe"}
)
_WATCHED_MODULES = ("traceback", "json", "json.encoder", "os", "posix", "select", "io")
_STATE: dict[str, Any] = {"fd": -1, "seq": 0, "mac": None}
_BUSY: set[int] = set()
_SOURCES: dict[str, bytes] = {}
# Functions and constants the sealed copy of this module checks identities against (set
# by `_seal`; the hook runs only there).
_GLOBALS = globals
_IDENT = _thread.get_ident
_AUDIT = sys.audit
_KEYED = hashlib.blake2b  # kernel-guard: ignore[KG004] a keyed event tag, not an id
_SHA256 = hashlib.sha256  # kernel-guard: ignore[KG004] sandbox has no kernel.identity
_GETPPID = os.getppid
_GETCWD = os.getcwd
_GETPID = os.getpid
_URANDOM = os.urandom
_EXIT = os._exit
_READLINK = os.readlink
_ENCODE = json.encoder.c_make_encoder  # type: ignore[attr-defined]  # the C encoder
_MAC_SIZE = 16
_EMIT_CODE: types.CodeType | None = None
_CHILD_CODE: types.CodeType | None = None
# Helpers of the standard library that ask for a frame on behalf of their caller and keep
# it (a module name for namedtuple, a caller's file and line for logging, a formatted
# stack): a frame asked for through one of them, with tree code on the stack, is honest.
# Helpers that hand frames back (``traceback.walk_stack``, ``walk_tb``,
# ``StackSummary.extract``, ``inspect``) are not listed: through them tree code holds
# the runner's frames, their locals and their globals.
_FRAME_KEEPERS = (
    ("/collections/__init__.py", frozenset({"namedtuple"})),
    ("/typing.py", frozenset({"_caller"})),
    ("/enum.py", None),
    ("/warnings.py", None),
    ("/dataclasses.py", None),
    ("/unittest/case.py", None),
    ("/unittest/result.py", None),
    ("/logging/__init__.py", frozenset({"Logger.findCaller"})),
    ("/asyncio/coroutines.py", frozenset({"_format_coroutine"})),
    (
        "/traceback.py",
        frozenset(
            {
                "format_exc",
                "print_exc",
                "format_exception",
                "print_exception",
                "format_tb",
                "print_tb",
                "extract_tb",
                "format_stack",
                "print_stack",
                "extract_stack",
                "print_last",
                "clear_frames",
                "TracebackException.__init__",
            }
        ),
    ),
)


def _emit(event: dict[str, object]) -> None:
    """Hand one event of this test process to the audit hook, which signs and writes it
    (a no-op outside a test process). The hook accepts it only from this function
    running in the sealed namespace (`_seal`), and a test's start, outcome and closing
    mark only when `_child` asked."""
    _AUDIT("kernel.verifier.emit", event)


def _report(what: object) -> None:
    """A finding from code tree code can reach (the loader, the ``_ShouldStop`` guard):
    any code may report a finding, it only ever makes the check tampered."""
    sys.audit("kernel.verifier.finding", what)


def _in_tree(filename: str) -> bool:
    if filename.startswith("<frozen "):
        return False  # the interpreter's own frozen modules (importlib)
    if not filename.startswith("/"):
        return True  # code compiled from a string: only the tree's code does that here
    return filename.startswith(_TREE + "/") and filename != _SELF


def _where(frame: types.FrameType | None) -> str | None:
    """The tree frame that asked for an audited operation (inspect's frames skipped)."""
    while frame is not None and frame.f_code.co_filename.endswith("/inspect.py"):
        frame = frame.f_back
    if frame is None or not _in_tree(frame.f_code.co_filename):
        return None
    name = frame.f_code.co_filename
    if name.startswith(_TREE + "/"):
        name = name[len(_TREE) + 1 :]
    return f"{name}:{frame.f_lineno}"


def _kept(code: types.CodeType) -> bool:
    """The code is a standard-library helper that keeps the frames it asks for."""
    for suffix, names in _FRAME_KEEPERS:
        if code.co_filename.endswith(suffix) and (names is None or code.co_qualname in names):
            return True
    return False


def _frame_asker(frame: types.FrameType | None) -> str | None:
    """Where tree code asked for a frame (None: nobody in the tree did).

    Directly (the asking frame is tree code, inspect's frames skipped), or through
    helpers of the standard library of which none keeps the frame (`_FRAME_KEEPERS`):
    ``traceback.walk_stack`` called from the tree walks every frame of the runner."""
    direct = _where(frame)
    if direct is not None:
        return direct
    keeper = False
    while frame is not None and not _in_tree(frame.f_code.co_filename):
        if frame.f_code.co_filename == _SELF:
            return None  # the runner asked (before any tree frame on the stack)
        keeper = keeper or _kept(frame.f_code)
        frame = frame.f_back
    if frame is None or keeper:
        return None
    return _where(frame)


def _resolved(path: str) -> str:
    """``path`` made absolute with every link followed (as the kernel would), so that
    no link made at run time, ``/dev/fd`` or ``..`` after one hides a ``/proc`` file. A
    relative path is taken from the working directory (an open relative to a
    descriptor, ``dir_fd``, is not seen: the audit event does not carry it)."""
    if not path.startswith("/"):
        path = _GETCWD() + "/" + path
    pending = path.split("/")[::-1]
    parts: list[str] = []
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            parts = parts[:-1]
            continue
        parts.append(part)
        try:
            target = _READLINK("/" + "/".join(parts))
        except OSError:
            continue  # not a link, or absent
        hops += 1
        if hops > 40:
            return "/proc"  # a loop of links: judged as the worst case
        parts.pop()
        if target.startswith("/"):
            parts = []
        pending.extend(target.split("/")[::-1])
    return "/" + "/".join(parts)


def _proc_target(path: object) -> bool:
    """A ``/proc`` path other than a plain file of the system (``/proc/cpuinfo``) or of
    this process (``/proc/self/status``): another process, a descriptor, memory, a
    folder a relative open could start from. A path of another type than ``str`` or
    ``bytes`` is not looked into (reading it would run its code in the hook)."""
    if type(path) is bytes:
        path = path.decode("utf-8", "surrogateescape")
    if type(path) is not str:
        return False
    parts = _resolved(path).split("/")[1:]
    if parts[0] != "proc":
        return False
    if len(parts) == 2:
        return parts[1].isdigit() or parts[1] in ("self", "thread-self")
    if len(parts) == 3 and parts[1] == str(_GETPID()):
        return parts[2] in _PROC_FILES or parts[2] == "task"
    return True


def _finding(event: str, args: tuple[object, ...]) -> str | None:
    """What an audit event shows, when it is a finding (None: an ordinary event).

    Arguments are looked into only when they are exactly of a built-in type: a subclass
    would run its own code inside the hook."""
    if event in _ALWAYS or event.startswith("ctypes."):
        return event
    name = args[1] if len(args) > 1 else None
    if event in ("object.__setattr__", "object.__delattr__", "object.__getattr__"):
        if type(name) is not str:
            return f"{event} with a name that is not a str"
        frames = _FRAME_ATTRS if event == "object.__getattr__" else _SWAP_ATTRS
        # Frameworks set __defaults__ and the like themselves; the tree may not.
        return f"{event} {name}" if name in frames and _frame_asker(_GETFRAME(2)) else None
    if event == "sys._getframe":
        return event if _frame_asker(_GETFRAME(2)) else None
    if event in _FROM_TREE:
        return event if _where(_GETFRAME(2)) else None
    if event in ("open", "os.listdir", "os.scandir", "os.symlink") and args:
        # os.symlink's first argument is the link's target.
        target = args[0]
        return f"{event} {str(target)[:200]}" if _proc_target(target) else None
    if event in ("os.kill", "os.killpg") and args and type(args[0]) is int:
        parent = _GETPPID()
        return event if args[0] in (parent, 1, 0, -1, -parent) else None
    return None


def _write(data: bytes) -> None:
    """Sign ``data`` (one event) with this process's key and its sequence number, and
    write it to the test process's stream."""
    seq = _STATE["seq"]
    _STATE["seq"] = seq + 1
    mac = _STATE["mac"].copy()
    mac.update(seq.to_bytes(8, "big") + data)
    view = memoryview(mac.hexdigest().encode() + b" " + data + b"\n")
    try:
        while view:
            view = view[_WRITE(_STATE["fd"], view) :]
    except OSError:
        pass  # the descriptor was taken away: the stream then lacks its closing mark


def _accepted(event: object, caller: types.FrameType) -> dict[str, object] | None:
    """The event `_emit` handed over, when the sealed runner emitted it (None: forged)."""
    if type(event) is not dict or caller.f_code is not _EMIT_CODE:
        return None
    if caller.f_globals is not _GLOBALS():
        return None  # the module's own `_emit`, whose names tree code can rebind
    asker = caller.f_back
    if event.get("e") in ("start", "ran", "end") and (
        asker is None or asker.f_code is not _CHILD_CODE or asker.f_globals is not _GLOBALS()
    ):
        return None
    return event


def _source(args: tuple[object, ...]) -> dict[str, object] | None:
    """A ``compile`` of a tree file: the source's digest (the collector compares them
    between processes and with the controls the kernel wrote). The hook notes the first
    source compiled per file for `_source_code`, out of tree code's reach."""
    if len(args) < 2 or type(args[1]) is not str or not args[1].startswith(_TREE + "/"):
        return None
    source = args[0]
    if type(source) is str:
        source = source.encode("utf-8", "surrogatepass")
    if type(source) is not bytes:
        return {"e": "finding", "what": "a tree file compiled from an object", "path": args[1]}
    _SOURCES.setdefault(args[1], source)
    digest = _SHA256(source).hexdigest()  # kernel-guard: ignore[KG004] no identity
    return {"e": "source", "path": args[1][len(_TREE) + 1 :], "sha256": digest}


def _hook(event: str, args: tuple[object, ...]) -> None:
    """The audit hook: in a test process, sign and write the runner's events, and
    stream and veto each finding. It runs only in the sealed namespace (`_seal`), and
    per thread (another thread's events are judged while this one is in the hook)."""
    if _STATE["fd"] < 0 or type(event) is not str:
        return
    thread = _IDENT()
    if thread in _BUSY:
        return
    _BUSY.add(thread)
    found = None
    try:
        record: dict[str, object] | None = None
        if event == "kernel.verifier.emit":
            record = _accepted(args[0] if args else None, _GETFRAME(1))
            if record is None:
                found = "an event not from the runner"
        elif event == "kernel.verifier.finding":
            what = args[0] if args and type(args[0]) is str else "a finding of another type"
            record = {"e": "finding", "what": what[:400]}
        elif event == "compile":
            record = _source(args)
        else:
            found = _finding(event, args)
        if found is not None:
            record = {"e": "audit", "what": found, "where": _frame_asker(_GETFRAME(1)) or ""}
        if record is not None:
            _write("".join(_STATE["encode"](record, 0)).encode())
    finally:
        _BUSY.discard(thread)
    if found is not None:
        raise RuntimeError(f"kernel verifier: {found} is not allowed in a test process")


def _rebuilt(function: types.FunctionType, namespace: dict[str, Any]) -> types.FunctionType:
    copy = types.FunctionType(
        function.__code__,
        namespace,
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__qualname__ = function.__qualname__
    return copy


# Built by tree-reachable objects (the loader of every tree module, the path hook, the
# ``_ShouldStop`` guard): they keep this module's namespace, never the sealed one.
_EXPOSED = frozenset({"_install_finder", "_guard_should_stop", "_report", "main"})
_SEALED_CLASSES = frozenset({"_Result", "_PytestRecorder"})


def _seal(namespace: dict[str, Any]) -> dict[str, Any]:
    """A private copy of this module's namespace, for the code that runs, judges and
    reports a test.

    Tree code reaches this module's globals without an audited operation (the loader of
    every tree module is a class of this module: its methods' ``__globals__``), so a
    test process's runner must not read them once tree code has run: a rebound
    ``_run_unittest`` or a cleared veto would decide the outcome. Every function here
    (and the methods of the classes the runner instantiates) is rebuilt over a copy,
    with a copy of ``builtins``; the copy is reachable only from the audit hook (the
    interpreter keeps it) and from frames on the stack, which are audited."""
    private = dict(namespace)
    private["__builtins__"] = dict(vars(builtins))
    for name, value in namespace.items():
        if (
            type(value) is types.FunctionType
            and value.__globals__ is namespace
            and name not in _EXPOSED
        ):
            private[name] = _rebuilt(value, private)
        elif name in _SEALED_CLASSES:
            members = {
                k: _rebuilt(v, private) if type(v) is types.FunctionType else v
                for k, v in vars(value).items()
                if k not in ("__dict__", "__weakref__")
            }
            private[name] = type(value.__name__, value.__bases__, members)
    encoder = namespace["_ENCODE"]
    private["_STATE"] = {
        "fd": -1,
        "seq": 0,
        "mac": None,
        "encode": encoder(
            None, None, json.encoder.encode_basestring_ascii, None, ": ", ", ", True, False, True
        ),
    }
    private["_BUSY"] = set()
    private["_SOURCES"] = {}
    private["_EMIT_CODE"] = namespace["_emit"].__code__
    private["_CHILD_CODE"] = namespace["_child"].__code__
    return private


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


def _rebound(noted_modules: dict[str, int], modules: list[str]) -> list[str]:
    """Names that no longer mean what they meant before any tree code ran: a module of
    that time replaced in ``sys.modules``, or a test module's global that names one
    bound to something else (the test module's ``unittest`` rebound)."""
    found = [n for n, i in noted_modules.items() if id(sys.modules.get(n)) != i]
    for name in modules:
        module = _SourceOnlyLoader.executed.get(name)
        for key, value in list(vars(module).items()) if module is not None else ():
            named = isinstance(value, types.ModuleType) or (
                getattr(value, "__name__", None) == key and not _genuine(value)
            )
            if key in noted_modules and named and id(value) != noted_modules[key]:
                found.append(f"{name}.{key}")
    return found


def _namespaces() -> dict[str, int]:
    """Identities of every name in the watched namespaces (and their classes' names)."""
    spaces: dict[str, dict[str, object]] = {"builtins": vars(builtins), "bootstrap": globals()}
    module = sys.modules.get(__name__)
    if module is not None and vars(module) is not globals():
        spaces["bootstrap-module"] = vars(module)  # what the loader and path hook read
    for name, module in list(sys.modules.items()):
        if name in _WATCHED_MODULES or name.split(".")[0] in ("unittest", "_pytest", "pytest"):
            spaces[name] = vars(module)
    noted: dict[str, int] = {}
    for space, namespace in spaces.items():
        noted["@" + space] = 0
        for key, value in list(namespace.items()):
            if isinstance(value, types.ModuleType):
                continue  # a submodule imported later is bound here; sys.modules is checked
            noted[f"{space}.{key}"] = id(value)
            if isinstance(value, type) and value.__module__ == namespace.get("__name__"):
                for attr, member in list(vars(value).items()):
                    noted[f"{space}.{key}.{attr}"] = id(member)
    noted["sys.meta_path"] = hash(tuple(id(f) for f in sys.meta_path))
    noted["sys.path_hooks"] = hash(tuple(id(h) for h in sys.path_hooks))
    return noted


def _compare(before: dict[str, int], stage: str) -> None:
    after = _namespaces()
    # A namespace first imported in this process (a plugin the framework loads lazily)
    # has nothing to compare with; every namespace noted before is compared whole.
    noted = {k for k in before if k.startswith("@")}
    spaces = sorted({k[1:] for k in noted | after.keys() if k.startswith("@")}, key=len)

    def space_of(key: str) -> str:
        return next((s for s in reversed(spaces) if key.startswith(s + ".")), "")

    changed = sorted(
        k
        for k in before.keys() | after.keys()
        if before.get(k) != after.get(k) and (k in before or "@" + space_of(k) in noted)
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


def _split(test_id: str) -> tuple[types.ModuleType, str] | None:
    """The executed module a unittest id starts with, and the rest of the id."""
    parts = test_id.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = _SourceOnlyLoader.executed.get(".".join(parts[:cut]))
        if module is not None:
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
    "-o",
    "addopts=",
)
"""Assertion rewriting off (it reads cached bytecode of the tree); the tree after the
standard library; no cache written; the project's ``addopts`` cannot select tests."""


class _PytestRecorder:
    """A pytest plugin: keeps only the named item and records its reports."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.items: list[Any] = []
        self.reports: list[tuple[str, str, str]] = []
        self.broken: list[str] = []

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.broken.append(str(report.longrepr)[-_MESSAGE_LIMIT:])

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        items[:] = [i for i in items if i.nodeid == self.nodeid]
        self.items = list(items)

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.nodeid == self.nodeid:
            skipped = report.outcome == "skipped" or hasattr(report, "wasxfail")
            text = str(report.longrepr or "")[-_MESSAGE_LIMIT:]
            self.reports.append((report.when, "skipped" if skipped else report.outcome, text))


def _run_pytest(test_id: str, files: list[str]) -> tuple[str, str, str]:
    """The named node's outcome, message and stage, from a pytest session over every
    test file of the plan (the same imports in every test process)."""
    import pytest

    recorder = _PytestRecorder(test_id)
    pytest.main([*_PYTEST_ARGS, "--rootdir", _TREE, *files], plugins=[recorder])
    if recorder.broken:
        return "error", recorder.broken[0], "import"
    if len(recorder.items) != 1:
        return "error", "does not name exactly one test", "test"
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
            return failed, text, "test"
        if outcome == "skipped":
            return "skipped", text, "test"
    if "call" not in stages:
        return "error", "the test reported no outcome", "test"
    return "passed", "", "test"


def _test_modules(plan: dict[str, object]) -> list[str]:
    """The names the test modules of the plan were executed under."""
    if plan.get("runner") != "pytest":
        return [str(m) for m in plan["modules"]]  # type: ignore[attr-defined]
    files = {os.path.join(_TREE, str(f)) for f in plan["files"]}  # type: ignore[attr-defined]
    return [n for n, m in _SourceOnlyLoader.executed.items() if m.__file__ in files]


def _check_modules(noted_modules: dict[str, int], modules: list[str]) -> None:
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
    noted: dict[str, int],
    noted_modules: dict[str, int],
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
    try:
        if plan.get("runner") == "pytest":
            files = [str(f) for f in plan["files"]]  # type: ignore[attr-defined]
            outcome, message, stage = _run_pytest(test_id, files)
        else:
            for name in _test_modules(plan):
                importlib.import_module(name)  # kernel-guard: ignore[KG005] the plan's modules
            _check_modules(noted_modules, _test_modules(plan))
            _compare(noted, "import")
            outcome, message = _run_unittest(test_id)
            stage = "test"
    except BaseException as e:
        outcome, message, stage = "error", _text((type(e), e, None)), "import"
    _emit({"e": "ran", "test": test_id, "outcome": outcome, "message": message, "stage": stage})
    _check_modules(noted_modules, _test_modules(plan))
    _compare(noted, "test")
    _emit({"e": "end"})
    _EXIT(0)


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
    noted = _namespaces()
    noted_modules = {name: id(module) for name, module in sys.modules.items()}
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
