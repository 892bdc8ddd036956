"""The dynamic guard's second half: forbidden calls that raise no audit event.

The audit hook (`kernel.guard.trace`) sees files, processes, sockets and imports of
modules not yet loaded. Reading the clock (``datetime.datetime.now()``), the
environment (``os.environ["HOME"]``) or importing through ``importlib.import_module``
raises no event at all. This module watches those calls, and only where they matter:

- the forbidden objects are resolved once from the policy's ``forbid-calls``
  (``time.*`` -> every member of ``time``; ``os.environ`` -> the mapping, watched
  through its own class's methods; a builtin's bare name -> ``builtins.<name>``),
  from the modules already loaded, and again whenever more have loaded (resolving
  never imports anything: an import done here would hide the traced program's own
  import event);
- on Python 3.12+ (`sys.monitoring`), CALL events are enabled only on the code
  objects of modules a rule covers (each module's code as it is executed, found by the
  audit hook's ``exec`` event, and its nested functions): unguarded code runs without
  them. A call is forbidden when its callee *is* a forbidden object, compared by
  identity (a bound builtin method by its object and name, so ``dt.now`` with
  ``from datetime import datetime as dt`` is ``datetime.datetime.now``; a subclass's
  inherited class method or constructor counts as the base's). PY_START events are
  enabled only on the forbidden Python functions' own code objects (and the watched
  mapping's methods), so a call made on the guarded module's behalf by C code
  (``map(os.getenv, ...)``, a subscript ``os.environ[k]``) is seen too;
- on Python 3.11 (no `sys.monitoring`; a profile hook would slow every call of the
  whole process, about 2x CPU), only the Python-level reaches are watched: the watched
  mapping's class methods (``os._Environ.__getitem__``, ...) and
  ``importlib.import_module`` are replaced by forwarding wrappers for as long as the
  watch runs. A C callable (``datetime.now``, ``time.time``) and a forbidden Python
  function other than ``import_module`` are left to the static guard there, as is an
  ``import_module`` bound by name before the watch started;
- a watched call is the guarded module's when it is its *direct* caller: frames of the
  callee's own module, of ``collections.abc`` and of the import system are only the
  way through (``os.getenv`` -> ``Mapping.get`` -> ``_Environ.__getitem__``); a library
  that reads the environment for itself is the library's, as with ``exec`` in
  `kernel.guard.trace`;
- ``importlib.import_module(name)`` and ``__import__(name)`` are checked as imports of
  ``name`` (``forbid-imports``, ``allow-imports``, layers), whether the module is
  loaded already or not.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from types import BuiltinFunctionType, CodeType, FrameType, FunctionType, MethodType, ModuleType
from typing import TYPE_CHECKING, Final

from kernel.guard.patterns import twin_of

if TYPE_CHECKING:
    from kernel.guard.trace import Tracer

__all__ = ["Watch", "call_key", "resolve"]

_THROUGH: Final = frozenset(
    {"_collections_abc", "collections.abc", "importlib", "importlib._bootstrap",
     "importlib._bootstrap_external", "_frozen_importlib", "_frozen_importlib_external"}
)  # fmt: skip
"""Modules whose frames are only the way from a guarded caller to a watched callee."""
_IMPORTERS: Final = ("importlib.import_module", "builtins.__import__")
_MISSING: Final = object()


def call_key(obj: object) -> object:
    """A key equal for every access to the same callable: a bound method is a new
    object on each attribute read, so it is keyed by what it binds. (Never `id`:
    on 3.12 every `id()` call is an audit event of its own.)"""
    kind = type(obj)
    if kind is BuiltinFunctionType:
        return ("builtin", obj.__self__, obj.__name__)  # type: ignore[attr-defined]
    if kind is MethodType:
        return ("method", obj.__self__, obj.__func__)  # type: ignore[attr-defined]
    return obj


def _base_keys(obj: object) -> Iterator[object]:
    """Keys of what a subclass inherits: ``Stamp.now`` is ``datetime.now`` bound to a
    subclass, ``Stamp()`` constructs a ``datetime``."""
    if isinstance(obj, type):
        yield from obj.__mro__[1:]
        return
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, type):
        kind = type(obj)
        for base in owner.__mro__[1:]:
            if kind is BuiltinFunctionType:
                yield ("builtin", base, getattr(obj, "__name__", None))
            elif kind is MethodType:
                yield ("method", base, getattr(obj, "__func__", None))


def _loaded(name: str) -> ModuleType | None:
    """A module already imported and done executing (never imports it)."""
    module = sys.modules.get(name)
    if not isinstance(module, ModuleType):
        return None
    spec = getattr(module, "__spec__", None)
    if getattr(spec, "_initializing", False):
        return None  # still executing: its names are not all bound yet
    return module


def _defined_in(value: object, module: str, attr: str) -> bool:
    """Is a member of ``module`` its own (or its C twin's), not a name it imported?
    ``uuid`` imports ``Enum``: ``uuid.*`` does not ban ``enum.Enum``."""
    owner = getattr(value, "__module__", None)
    if not isinstance(owner, str) or owner == module or owner.startswith(module + "."):
        return True
    return any(t.startswith(module + ".") for t in twin_of(f"{owner}.{attr}"))


def resolve(pattern: str) -> tuple[bool, list[tuple[str, object]]]:
    """``(settled, [(qualified name, object)])`` for a ``forbid-calls`` pattern, from
    the loaded modules. ``settled`` is False while its module is not loaded yet."""
    name = pattern if "." in pattern else "builtins." + pattern
    if name.endswith(".*") and not any(c in name[:-2] for c in "*?["):
        module = _loaded(name[:-2])
        if module is None:
            return False, []
        return True, [
            (f"{name[:-2]}.{attr}", value)
            for attr, value in list(vars(module).items())
            if not attr.startswith("__") and _defined_in(value, name[:-2], attr)
        ]
    if any(c in name for c in "*?["):
        return True, []  # other globs name no object: the static guard reads them
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = _loaded(".".join(parts[:cut]))
        if module is None:
            continue
        # The module's own dict, not getattr: a module `__getattr__` (a lazy package)
        # would import from inside the hook. Past the module, attributes of its objects.
        obj: object = vars(module).get(parts[cut], _MISSING)
        for attr in parts[cut + 1 :]:
            if obj is _MISSING:
                break
            obj = getattr(obj, attr, _MISSING)
        if obj is _MISSING:
            return True, []
        return True, [(name, obj)]
    return False, []


class Watch:
    """The forbidden-call watch of one `Tracer` (see the module's docstring)."""

    def __init__(self, tracer: Tracer) -> None:
        """Collect the patterns of every rule; nothing is resolved or watched yet."""
        self.tracer = tracer
        self.pending: set[str] = {p for r in tracer.rules for p in r.forbid_calls}
        self.pending.update(_IMPORTERS)
        self.calls: dict[object, list[str]] = {}
        """Call key -> the qualified names it stands for."""
        self.starts: dict[CodeType, tuple[str, object | None, list[str]]] = {}
        """Watched code -> (its module, the instance it must be bound to or None, names)."""
        self.direct: dict[object, list[str]] = {}
        """Each forbidden object as resolved -> its names (the CALL fast path)."""
        self.clean: set[type] = set()
        """Classes called in guarded code that inherit from no forbidden class."""
        self.modules_seen = -1
        self.monitor: Monitor | None = None
        self.patched: list[tuple[object, str, object]] = []

    def install(self) -> None:
        """Resolve what is loaded, then start watching (3.12+: events; 3.11: wrappers)."""
        self.monitor = Monitor.start(self)
        self.refresh()
        if self.monitor is not None:
            for name, module in list(sys.modules.items()):
                if isinstance(module, ModuleType) and self.tracer.rules_for(name):
                    try:
                        self.monitor.watch_module(module, name)
                    except Exception:  # noqa: S112 - an odd namespace must not stop the run
                        continue

    def stop(self) -> None:
        """Stop watching: wrappers put back, events off."""
        for owner, attr, original in reversed(self.patched):
            setattr(owner, attr, original)
        self.patched.clear()
        if self.monitor is not None:
            self.monitor.close()
            self.monitor = None

    def refresh(self) -> None:
        """Resolve the patterns whose modules have loaded since the last look."""
        if len(sys.modules) == self.modules_seen:
            return
        self.modules_seen = len(sys.modules)
        for pattern in sorted(self.pending):
            settled, found = resolve(pattern)
            if settled:
                self.pending.discard(pattern)
            for name, obj in found:
                self._add(name, obj)

    def _add(self, name: str, obj: object) -> None:
        if isinstance(obj, Mapping) and not callable(obj) and type(obj).__module__ != "builtins":
            self._watch_instance(name, obj)
            return
        if isinstance(obj, FunctionType):
            self._watch_start(obj, obj.__module__ or "", None, name)
        elif not callable(obj) or isinstance(obj, ModuleType):
            return
        key = call_key(obj)
        names = self.calls.setdefault(key, [])
        if name not in names:
            names.append(name)
            self.direct[obj] = names
            self.clean.clear()  # a class's inherited verdict may change

    def _watch_instance(self, name: str, obj: object) -> None:
        """A forbidden mapping (``os.environ``): its own class's Python methods."""
        cls = type(obj)
        for attr, value in list(vars(cls).items()):
            if isinstance(value, FunctionType):
                self._watch_start(value, cls.__module__, obj, name, (cls, attr))

    def _watch_start(
        self,
        func: FunctionType,
        module: str,
        instance: object | None,
        name: str,
        owner: tuple[type, str] | None = None,
    ) -> None:
        code = func.__code__
        known = self.starts.get(code)
        if known is not None:
            if name not in known[2]:
                known[2].append(name)
            return
        self.starts[code] = (module, instance, [name])
        if self.monitor is not None:
            self.monitor.watch_start(code)
            return
        # 3.11: a forwarding wrapper where the callee is reached by attribute.
        if owner is not None:
            self._wrap(owner[0], owner[1], func, code)
        elif name == "importlib.import_module":
            importlib = _loaded("importlib")
            if importlib is not None and getattr(importlib, "import_module", None) is func:
                self._wrap(importlib, "import_module", func, code)

    def _wrap(self, owner: object, attr: str, func: FunctionType, code: CodeType) -> None:
        watch = self

        def wrapper(*args: object, **kwargs: object) -> object:
            if watch.tracer.active:
                with contextlib.suppress(Exception):  # the watch never breaks the program
                    watch.started(code, sys._getframe(1), args, kwargs)
            return func(*args, **kwargs)

        wrapper.__name__ = func.__name__
        wrapper.__qualname__ = func.__qualname__
        wrapper.__doc__ = func.__doc__
        self.patched.append((owner, attr, func))
        setattr(owner, attr, wrapper)

    def started(
        self,
        code: CodeType,
        caller: FrameType | None,
        args: tuple[object, ...],
        kwargs: Mapping[str, object],
    ) -> None:
        """A watched callee started; ``caller`` is the frame below it."""
        module, instance, names = self.starts[code]
        if instance is not None and not (args and args[0] is instance):
            return  # the same class's method on another object (``os.environb``)
        frame = caller
        while frame is not None and frame.f_globals.get("__name__") in (module, *_THROUGH):
            frame = frame.f_back
        if frame is None:
            return
        imported = _imported(names, args, kwargs)
        self.tracer.record_call(frame, () if imported else tuple(names), imported)

    def lookup(self, callee: object) -> list[str] | None:
        """The forbidden names ``callee`` stands for, if any (the CALL event's slow path:
        a method bound to a class or an instance, or a class, which may inherit)."""
        try:
            names = self.calls.get(call_key(callee))
            if names is None and isinstance(callee, type):
                names = self._inherited(callee)
                if names is None:
                    self.clean.add(callee)
            elif names is None:
                names = self._inherited(callee)
        except Exception:  # an unhashable key part or a raising __hash__: not in the table
            return None
        return names

    def _inherited(self, callee: object) -> list[str] | None:
        for key in _base_keys(callee):
            names = self.calls.get(key)
            if names is not None:
                return names
        return None

    def called(self, frame: FrameType, names: list[str], first: object) -> None:
        """A forbidden callee called in a guarded code object (3.12+ CALL event)."""
        imported = _imported(names, (first,), {})
        self.tracer.record_call(frame, () if imported else tuple(names), imported)


def _imported(
    names: list[str], args: tuple[object, ...], kwargs: Mapping[str, object]
) -> str | None:
    """The module an importer call names (``import_module(".x", "pkg")`` -> ``pkg.x``)."""
    if not any(n in _IMPORTERS for n in names):
        return None
    target = args[0] if args else kwargs.get("name")
    if not isinstance(target, str):
        return None
    if target.startswith("."):
        package = args[1] if len(args) > 1 else kwargs.get("package")
        if not isinstance(package, str):
            return None
        dots = len(target) - len(target.lstrip("."))
        base = package.rsplit(".", dots - 1)[0] if dots > 1 else package
        return f"{base}.{target.lstrip('.')}" if target.lstrip(".") else base
    return target


if sys.version_info >= (3, 12):

    class Monitor:
        """`sys.monitoring` events on guarded code (CALL) and watched callees (PY_START)."""

        def __init__(self, watch: Watch, tool: int) -> None:
            self.watch = watch
            self.tool = tool
            self.events: dict[CodeType, int] = {}

        @classmethod
        def start(cls, watch: Watch) -> Monitor | None:
            """Claim a free tool id (None: every id is taken; the audit hook remains)."""
            mon = sys.monitoring
            for tool in (4, 3, 5, 2):
                if mon.get_tool(tool) is None:
                    mon.use_tool_id(tool, "kernel guard")
                    monitor = cls(watch, tool)
                    mon.register_callback(tool, mon.events.CALL, _on_call(watch))
                    mon.register_callback(tool, mon.events.PY_START, monitor.on_start)
                    return monitor
            return None

        def close(self) -> None:
            """Turn every event off and give the tool id back."""
            mon = sys.monitoring
            for code in self.events:
                mon.set_local_events(self.tool, code, 0)
            mon.register_callback(self.tool, mon.events.CALL, None)
            mon.register_callback(self.tool, mon.events.PY_START, None)
            mon.free_tool_id(self.tool)

        def _enable(self, code: CodeType, event: int) -> None:
            events = self.events.get(code, 0) | event
            self.events[code] = events
            sys.monitoring.set_local_events(self.tool, code, events)

        def watch_start(self, code: CodeType) -> None:
            """PY_START on a watched callee's own code."""
            self._enable(code, sys.monitoring.events.PY_START)

        def watch_code(self, code: CodeType) -> None:
            """CALL on a guarded code object and the functions nested in it."""
            stack = [code]
            while stack:
                current = stack.pop()
                if current in self.events and self.events[current] & sys.monitoring.events.CALL:
                    continue
                self._enable(current, sys.monitoring.events.CALL)
                stack.extend(c for c in current.co_consts if isinstance(c, CodeType))

        def watch_module(self, module: ModuleType, name: str) -> None:
            """A guarded module loaded before the watch: its functions and methods."""
            for func in module_functions(module, name):
                self.watch_code(func.__code__)

        def on_start(self, code: CodeType, offset: int) -> None:
            if not self.watch.tracer.active or code not in self.watch.starts:
                return
            frame = sys._getframe(1)
            try:
                args = tuple(frame.f_locals.get(v) for v in code.co_varnames[: code.co_argcount])
                self.watch.started(code, frame.f_back, args, {})
            except Exception:  # noqa: S110 - the watch never breaks the traced program
                pass

else:

    class Monitor:
        """No `sys.monitoring` before 3.12: `Watch` falls back to wrappers."""

        @classmethod
        def start(cls, watch: Watch) -> Monitor | None:
            """Never started on this version."""
            del watch
            return None

        def close(self) -> None:
            """Nothing to close."""

        def watch_start(self, code: CodeType) -> None:
            """Not reached on this version."""

        def watch_code(self, code: CodeType) -> None:
            """Not reached on this version."""

        def watch_module(self, module: ModuleType, name: str) -> None:
            """Not reached on this version."""


def _on_call(watch: Watch) -> Callable[[CodeType, int, object, object], None]:
    """The CALL callback: every call in guarded code comes here, so its common case (a
    function, a builtin of a module, an unbound method: no forbidden object) is one
    dict lookup, with everything it reads bound to locals of this closure."""
    direct_get, clean, modules, getframe = watch.direct.get, watch.clean, sys.modules, sys._getframe
    builtin, method, module_type = BuiltinFunctionType, MethodType, ModuleType

    def on_call(code: CodeType, offset: int, callee: object, first: object) -> None:
        if len(modules) != watch.modules_seen:
            watch.refresh()
        try:
            names = direct_get(callee)
            if names is None:
                kind = type(callee)
                if kind is builtin or kind is method:
                    if type(callee.__self__) is module_type:  # type: ignore[attr-defined]
                        return  # a module's function is one object: `direct` has it
                elif not isinstance(callee, type) or callee in clean:
                    return
                names = watch.lookup(callee)
                if names is None:
                    return
        except Exception:  # a callee's own __hash__ may raise: never into the program
            return
        if watch.tracer.active:
            watch.called(getframe(1), names, first)

    return on_call


def module_functions(module: ModuleType, name: str) -> Iterator[FunctionType]:
    """The functions a module's own source defines, as its namespace holds them after
    it ran: top-level functions, its classes' methods (static, class, properties;
    nested classes too), and what a decorator wrapped (``__wrapped__``): the wrapper
    ``functools.wraps`` made is the decorator's code, not the module's."""
    source = getattr(module, "__file__", None)
    seen: set[object] = set()
    stack = list(vars(module).values())
    while stack:
        value = stack.pop()
        if isinstance(value, type):
            if value.__module__ == name and value not in seen:
                seen.add(value)
                stack.extend(vars(value).values())
            continue
        for start in (
            value,
            getattr(value, "__func__", None),
            getattr(value, "fget", None),
            getattr(value, "fset", None),
        ):
            member = start
            for _ in range(32):  # a `__wrapped__` chain, bounded against a cycle
                if not isinstance(member, FunctionType) or member in seen:
                    break
                seen.add(member)
                if member.__module__ == name and (
                    source is None or member.__code__.co_filename == source
                ):
                    yield member
                member = getattr(member, "__wrapped__", None)


def module_code_name(frame: FrameType | None) -> str | None:
    """At an ``exec`` audit event of the import system, the name of the module whose
    code runs (the loader's ``_call_with_frames_removed(exec, code, module.__dict__)``)."""
    if frame is None or frame.f_code.co_name != "_call_with_frames_removed":
        return None
    args = frame.f_locals.get("args")
    if isinstance(args, tuple) and len(args) == 2 and isinstance(args[1], dict):
        name = args[1].get("__name__")
        return name if isinstance(name, str) else None
    return None
