"""Dynamic guard: forbidden events seen at run time, attributed to a guarded module.

Reading source cannot decide everything (``getattr`` through ``functools.reduce``,
reflection by computed strings, an unguarded ``__init__`` that hands a pure module
``os``). Python itself can: PEP 578 audit hooks see every ``open``, ``exec``, process
start, socket call and import as it happens. This module installs one and reports
every forbidden event whose Python stack passes through a module a rule covers.

Rules this module enforces:

- an event is forbidden for a rule when the name it stands for matches the rule's
  ``forbid-calls`` (``open`` -> ``builtins.open``; ``exec`` -> ``builtins.exec`` and
  ``builtins.eval``; ``compile`` -> ``builtins.compile``; a dotted event such as
  ``os.system``, ``subprocess.Popen``, ``socket.connect`` or ``os.listdir`` -> that
  name) or its module matches ``forbid-imports``; an ``import`` event is forbidden when
  the imported module (or its C twin's module) matches ``forbid-imports``;
- the event is attributed to the innermost frame on the stack whose module a rule
  covers, with that frame's line; a frame of the import system between them
  (``importlib._bootstrap``) means the event is a module being loaded, which the
  static import checks own, and it is not reported; ``exec``, ``compile``,
  ``import`` and ``sys._getframe`` count only when the guarded module's frame is the
  innermost Python frame (it does them itself: attrs generating methods with ``exec``
  is attrs' doing), while files, processes and sockets count through any library;
- an event raised inside a package the rule's ``allow-reach`` names (hypothesis reading
  its caches under `kernel.strategies`) is that package's, not the guarded module's;
- an ``import`` event outside ``allow-imports`` (when the rule has one) is forbidden,
  but for a package above an allowed module, which Python loads first;
- an ``import`` event is also forbidden when a ``layers`` rule puts the imported
  module in a higher layer than the importing one;
- what no event exists for (reading the clock, the environment,
  ``importlib.import_module``, which raises no ``import`` event) is the call watch's
  (`kernel.guard.watch`, started by `Tracer.install`): a CALL of a forbidden object
  in a covered module's code on 3.12+, the environment and ``import_module`` on 3.11;
  a call the watch and an audit event both see on one line is reported once, as the
  event; an import of a module already loaded, a ``sys.stderr`` write and (on 3.11) a
  C callable such as ``datetime.now`` are still not seen: the static guard is the
  check there;
- an event whose name no rule forbids (``builtins.id``, raised by every ``id()`` call
  on 3.12) is dismissed once per name, without walking the stack;
- the hook never raises into the traced program (a failure inside it is recorded as
  nothing) and records each (module, line, event, rule) once.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from types import CodeType, FrameType
from typing import Final

from kernel.guard.model import Policy, Rule, Violation, ViolationCode
from kernel.guard.patterns import CallMatcher, covers, module_set, twin_of
from kernel.guard.watch import Watch, module_code_name

__all__ = ["EventFinding", "Tracer", "event_names", "violations"]

EventFinding = tuple[str, str, int, str, str, str]
"""``(module, file, line, event, rule, what)``: ``what`` is the forbidden name."""

_IMPORT_SYSTEM: Final = frozenset(
    {"importlib._bootstrap", "importlib._bootstrap_external", "_frozen_importlib",
     "_frozen_importlib_external", "importlib"}
)  # fmt: skip
_LOADING: Final = frozenset(
    {"_find_and_load", "_find_and_load_unlocked", "_load_unlocked", "_load",
     "_call_with_frames_removed", "module_from_spec"}
)  # fmt: skip
"""Import-system functions that load a module (an event under them is the loaded
module's); other import-system frames (``loader.get_data``) are only the way through."""
_KINDS: Final = frozenset(
    {"code", "object", "function", "builtins", "sys", "cpython", "marshal", "gc"}
)
"""Event prefixes that name a kind of object or the interpreter, not a module."""
_DIRECT_ONLY: Final = frozenset({"exec", "compile", "import", "sys._getframe"})
"""Events reported only when the innermost Python frame is the guarded module's."""
_BUILTIN_EVENTS: Final = {
    "open": ("builtins.open", "io.open"),
    "exec": ("builtins.exec", "builtins.eval"),
    "compile": ("builtins.compile",),
    "builtins.input": ("builtins.input",),
    "builtins.breakpoint": ("builtins.breakpoint",),
}


def event_names(event: str, args: tuple[object, ...]) -> tuple[tuple[str, ...], str | None]:
    """``(qualified names the event stands for, module it imports or None)``."""
    if event == "import":
        module = args[0] if args and isinstance(args[0], str) else None
        return (), module
    known = _BUILTIN_EVENTS.get(event)
    if known is not None:
        return known, None
    if "." in event:
        return (event,), None
    return (), None


class Tracer:
    """The audit hook's state: the policy's rules and what has been recorded."""

    def __init__(self, policy: Policy) -> None:
        """Prepare matchers for every rule of ``policy``."""
        self.rules: tuple[Rule, ...] = tuple(
            r
            for r in policy.rules
            if r.forbid_calls or r.forbid_imports or r.allow_imports is not None or r.layers
        )
        self.matchers = {
            r.name: CallMatcher((r.name, p) for p in r.forbid_calls) for r in self.rules
        }
        self.findings: list[EventFinding] = []
        self._seen: set[tuple[str, int, str, str]] = set()
        self._covered: dict[str, tuple[Rule, ...]] = {}
        self._busy = threading.local()
        self.active = True
        self.watch: Watch | None = None
        self._events: dict[str, bool] = {}
        self._reaches: dict[tuple[str, int, str, str], int] = {}
        self._calls: dict[tuple[str, tuple[str, ...]], tuple[tuple[Rule, str], ...]] = {}

    def rules_for(self, module: str) -> tuple[Rule, ...]:
        """The rules covering ``module``."""
        return self._rules_for(module)

    def _rules_for(self, module: str) -> tuple[Rule, ...]:
        got = self._covered.get(module)
        if got is None:
            got = self._covered[module] = tuple(r for r in self.rules if covers(r.modules, module))
        return got

    def _forbidden(
        self, rule: Rule, names: Sequence[str], imported: str | None, importer: str
    ) -> str | None:
        banned = module_set(rule.forbid_imports)
        if imported is not None:
            if _higher_layer(rule, importer, imported):
                return imported
            for name in (imported, *twin_of(imported)):
                if banned.match(name) is not None:
                    return name
            if rule.allow_imports is not None and imported != "__future__":
                allowed = module_set(rule.allow_imports)
                if all(
                    allowed.match(n) is None for n in (imported, *twin_of(imported))
                ) and not _parent_of(imported, rule.allow_imports):
                    return imported
            return None
        matcher = self.matchers[rule.name]
        for name in names:
            for candidate in (name, *twin_of(name)):
                if matcher.match(candidate):
                    return candidate
                # By module only where the event's prefix is a module (`socket.connect`),
                # not an object kind (`code.__new__`, `object.__setattr__`).
                if candidate.split(".", 1)[0] not in _KINDS and banned.match(candidate):
                    return candidate
        return None

    @staticmethod
    def _reached_through(rule: Rule, passed: Sequence[str]) -> bool:
        """Was the event raised inside a package whose own effects ``rule`` accepts?"""
        if not rule.allow_reach:
            return False
        allowed = module_set(rule.allow_reach)
        return any(allowed.match(m) is not None for m in passed)

    def hook(self, event: str, args: tuple[object, ...]) -> None:
        """The audit hook (`sys.addaudithook`)."""
        if not self.active or getattr(self._busy, "on", False):
            return
        if event == "exec" and self.watch is not None:
            self._watch_module_code(args)
        names, imported = event_names(event, args)
        if not names and imported is None:
            return
        if imported is None and not self._may_forbid(event, names):
            return  # `builtins.id` (every id() call on 3.12) and its like: no stack walk
        self._busy.on = True
        try:
            self._attribute(event, names, imported, sys._getframe(1))
        except Exception:  # noqa: S110 - a hook must never break the traced program
            pass
        finally:
            self._busy.on = False

    def _may_forbid(self, event: str, names: Sequence[str]) -> bool:
        """Does any rule forbid what a (non-import) event stands for? Its answer does
        not depend on the module, so it is worked out once per event name."""
        known = self._events.get(event)
        if known is None:
            known = self._events[event] = any(
                self._forbidden(rule, names, None, "") is not None for rule in self.rules
            )
        return known

    def _attribute(
        self, event: str, names: Sequence[str], imported: str | None, frame: FrameType | None
    ) -> None:
        direct = event in _DIRECT_ONLY
        passed: list[str] = []  # modules of the frames between the event and here
        while frame is not None:
            module = frame.f_globals.get("__name__")
            if isinstance(module, str):
                if module in _IMPORT_SYSTEM:
                    if frame.f_code.co_name in _LOADING and event != "import":
                        return  # a module being loaded: the static import checks own this
                    frame = frame.f_back  # the import system is only the way through
                    continue
                if direct and not self._rules_for(module):
                    # Code evaluation, frames and imports count only when the guarded
                    # module does them itself: attrs and dataclasses `exec` the methods
                    # they generate, which is theirs, not the caller's.
                    return
                for rule in self._rules_for(module):
                    what = self._forbidden(rule, names, imported, module)
                    if what is not None and not self._reached_through(rule, passed):
                        self._record(module, frame, event, rule, what)
                if self._rules_for(module):
                    return  # the innermost guarded frame is the one responsible
                passed.append(module)
            frame = frame.f_back

    def _record(self, module: str, frame: FrameType, event: str, rule: Rule, what: str) -> None:
        line = frame.f_lineno
        key = (module, line, event, rule.name)
        if key in self._seen:
            return
        self._seen.add(key)
        finding = (module, frame.f_code.co_filename, line, event, rule.name, what)
        # One reach, two witnesses: the watch's CALL (first) and the callee's own audit
        # event (`open`, `os.system`) on the same line name the same thing; the audit
        # event, which says what happened, is the one kept.
        reach = (module, line, rule.name, what)
        index = self._reaches.get(reach)
        if index is None:
            self._reaches[reach] = len(self.findings)
            self.findings.append(finding)
        elif self.findings[index][3] == "call" and event != "call":
            self.findings[index] = finding

    def record_call(self, frame: FrameType, names: Sequence[str], imported: str | None) -> None:
        """A watched call (`kernel.guard.watch`) whose direct caller is ``frame``:
        recorded for each rule covering the caller's module that forbids it."""
        module = frame.f_globals.get("__name__")
        if not isinstance(module, str):
            return
        if imported is not None:
            verdicts = self._verdicts(module, names, imported)
        else:  # the same callee from the same module: worked out once
            key = (module, tuple(names))
            known = self._calls.get(key)
            if known is None:
                known = self._calls[key] = self._verdicts(module, names, None)
            verdicts = known
        for rule, what in verdicts:
            self._record(module, frame, "import" if imported else "call", rule, what)

    def _verdicts(
        self, module: str, names: Sequence[str], imported: str | None
    ) -> tuple[tuple[Rule, str], ...]:
        out = []
        for rule in self._rules_for(module):
            what = self._forbidden(rule, names, imported, module)
            if what is not None:
                out.append((rule, what))
        return tuple(out)

    def _watch_module_code(self, args: tuple[object, ...]) -> None:
        """At an ``exec`` event: a guarded module's code about to run gets its CALL
        events (3.12+), and patterns of modules loaded since are resolved."""
        watch = self.watch
        if watch is None or not self.active or getattr(self._busy, "on", False):
            return
        self._busy.on = True
        try:
            watch.refresh()
            code = args[0] if args else None
            if isinstance(code, CodeType) and code.co_name == "<module>":
                name = module_code_name(sys._getframe(2))
                if name is not None and self._rules_for(name) and watch.monitor is not None:
                    watch.monitor.watch_code(code)
        except Exception:  # noqa: S110 - a hook must never break the traced program
            pass
        finally:
            self._busy.on = False

    def install(self) -> Callable[[], None]:
        """Install the hook (for the rest of the process: audit hooks cannot be
        removed) and the call watch; returns a function that stops recording."""
        sys.addaudithook(self.hook)
        self.watch = Watch(self)
        self.watch.install()

        def stop() -> None:
            self.active = False
            if self.watch is not None:
                self.watch.stop()

        return stop


def _higher_layer(rule: Rule, importer: str, imported: str) -> bool:
    """Does ``importer`` import a module of a higher layer of ``rule`` (not one of its
    own packages, which Python loads first)?"""
    if not rule.layers or importer.startswith(imported + "."):
        return False
    mine, theirs = rule.layer_of(importer), rule.layer_of(imported)
    return mine is not None and theirs is not None and theirs < mine


def _parent_of(module: str, patterns: Sequence[str]) -> bool:
    """Is ``module`` a package above an allowed one? Python loads ``kernel.decide``
    (an ``import`` event of its own) before ``kernel.decide.decision``."""
    return any(p.startswith(module + ".") for p in patterns)


def violations(findings: Sequence[EventFinding], root: str) -> list[Violation]:
    """The findings as `Violation` records (KG013), paths relative to ``root``."""
    import os
    from pathlib import PurePath

    out = []
    for module, path, line, event, rule, what in findings:
        shown = path
        if os.path.isabs(path):
            rel = os.path.relpath(path, root)
            shown = PurePath(rel).as_posix() if not rel.startswith("..") else path
        out.append(
            Violation(
                path=shown,
                line=line,
                column=1,
                code=ViolationCode.RUNTIME_EVENT,
                rule=rule,
                message=(
                    f"run-time event {event!r} (forbidden {what.removeprefix('builtins.')!r}) "
                    f"with {module!r} on the stack"
                ),
            )
        )
    return sorted(set(out), key=Violation.sort_key)
