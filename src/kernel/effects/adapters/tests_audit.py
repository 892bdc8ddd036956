"""The audit hook of the declared-tests bootstrap and the sealed namespace it runs in.

Loaded by `kernel.effects.adapters.tests_bootstrap` from its own folder (by path: the
sandbox's interpreter has no kernel on its path; standard library only) and copied into
its namespace before any tree code runs. In a test process the hook (PEP 578: it cannot
be removed) signs and numbers every event of the runner with the process's key and
writes it to the process's stream, and streams and vetoes each finding. What a verdict
depends on runs from `_seal`'s private copy of the bootstrap's namespace, which tree
code can reach only through frames (audited: `_frame_asker`).
"""

from __future__ import annotations

import _thread
import builtins
import hashlib  # kernel-guard: ignore[KG001] sandbox has no kernel.records.identity; not an id
import json
import json.encoder
import os
import sys
import types
from typing import Any

__all__: list[str] = []  # the bootstrap copies every name; nothing here is public
_GETFRAME = sys._getframe
_TREE = os.path.realpath(os.getcwd())
_SELF = os.path.realpath(__file__)
_RUNNER = frozenset({_SELF, os.path.join(os.path.dirname(_SELF), "tests_bootstrap.py")})
"""The runner's files (this one and the bootstrap): their frames are not the tree's."""
_WRITE = os.write
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
# `types.coroutine` marks a generator function as a coroutine by giving it its own code
# with one more flag (asyncio does so at import, so does whatever imports asyncio, such
# as unittest.mock): the code is the function's own, only a flag differs. Compared by
# identity, taken before any tree code runs.
_COROUTINE_CODE = types.coroutine.__code__
_PROC_FILES = frozenset(
    {"mem", "fd", "fdinfo", "environ", "cmdline", "maps", "map_files", "root", "cwd", "exe"}
)
_STATE: dict[str, Any] = {"fd": -1, "seq": 0, "mac": None}
_BUSY: set[int] = set()
_SOURCES: dict[str, bytes] = {}
# Functions and constants the sealed copy of this module checks identities against (set
# by `_seal`; the hook runs only there).
_GLOBALS = globals
_IDENT = _thread.get_ident
_AUDIT = sys.audit
_SHA256 = hashlib.sha256  # kernel-guard: ignore[KG004] sandbox has no kernel.identity
_GETPPID = os.getppid
_GETCWD = os.getcwd
_GETPID = os.getpid
_READLINK = os.readlink
_ENCODE = json.encoder.c_make_encoder  # type: ignore[attr-defined]  # the C encoder
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
    return filename.startswith(_TREE + "/") and filename not in _RUNNER


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
        if frame.f_code.co_filename in _RUNNER:
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


def _flags_a_coroutine(event: str, args: tuple[object, ...], frame: types.FrameType) -> bool:
    """`types.coroutine` giving a real function (its true type, not what ``__class__``
    says) a copy of its own code with the coroutine flag, and setting it on that very
    function: anything else through that frame (an object posing as a function, whose
    ``__setattr__`` is another object's) stays a finding."""
    if frame.f_code is not _COROUTINE_CODE:
        return False
    func = frame.f_locals.get("func")
    if type(func) is not types.FunctionType:
        return False
    if event == "object.__setattr__":
        return args[0] is func and type(args[2]) is types.CodeType
    code = func.__code__
    # code.__new__'s arguments: bytecode, filename, name, ..., flags (the ninth).
    return (
        len(args) == 9
        and args[1] == code.co_filename
        and args[2] == code.co_name
        and args[8] == code.co_flags | 0x100
        and args[0] == code.co_code
    )


def _finding(event: str, args: tuple[object, ...]) -> str | None:
    """What an audit event shows, when it is a finding (None: an ordinary event).

    Arguments are looked into only when they are exactly of a built-in type: a subclass
    would run its own code inside the hook."""
    name = args[1] if len(args) > 1 else None
    swap = event == "code.__new__" or (event == "object.__setattr__" and name == "__code__")
    if swap and _flags_a_coroutine(event, args, _GETFRAME(2)):
        return None
    if event in _ALWAYS or event.startswith("ctypes."):
        return event
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
    """A private copy of the bootstrap's namespace (this module's names included), for
    the code that runs, judges and reports a test.

    Tree code reaches this module's globals without an audited operation (the loader of
    every tree module is a class of this module: its methods' ``__globals__``), so a
    test process's runner must not read them once tree code has run: a rebound
    ``_run_unittest`` or a cleared veto would decide the outcome. Every function here
    (and the methods of the classes the runner instantiates) is rebuilt over a copy,
    with a copy of ``builtins``; the copy is reachable only from the audit hook (the
    interpreter keeps it) and from frames on the stack, which are audited."""
    private = dict(namespace)
    private["__builtins__"] = dict(vars(builtins))
    own = globals()  # this module's functions, copied into the bootstrap's namespace
    for name, value in namespace.items():
        if (
            type(value) is types.FunctionType
            and (value.__globals__ is namespace or value.__globals__ is own)
            and name not in _EXPOSED
        ):
            private[name] = _rebuilt(value, private)
        elif type(value) in (dict, list, set):
            # A container of the module's globals would be shared with tree code.
            private[name] = type(value)(value)
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
