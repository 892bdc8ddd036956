"""The dynamic guard (kernel.guard.trace): forbidden run-time events attributed to the
guarded module on the stack, through `kernel guard --trace` and the pytest plugin.

Every probe runs in a child process (an audit hook cannot be removed once installed)
and aims only at names in the test's own temporary folder: an `open` of a file that
does not exist there, `os.system("true")`, an import of `socket`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

POLICY = """\
[tool.kernel.guard]
[[tool.kernel.guard.rules]]
name = "pure"
modules = ["pkg", "pkg.*"]
forbid-imports = ["socket"]
forbid-calls = ["open", "os.system", "exec", "eval", "compile"]
"""

SNEAKY = """\
import codecs
import collections
import functools
import sys


def run(path):
    modules = functools.reduce(getattr, ["mod" + "ules"], sys)
    opener = getattr(modules["builtins"], "op" + "en")
    try:
        opener(path)
    except OSError:
        pass
    __import__("".join(["so", "cket"]))
    try:
        codecs.open(path)
    except OSError:
        pass
    collections.namedtuple("Point", "x y")
    return "ran"
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(POLICY, encoding="utf-8")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "src" / "pkg" / "sneaky.py").write_text(SNEAKY, encoding="utf-8")
    (tmp_path / "main.py").write_text(
        "import sys\nsys.path.insert(0, 'src')\nfrom pkg import sneaky\n"
        "print(sneaky.run(sys.argv[1]))\n",
        encoding="utf-8",
    )
    return tmp_path


def _kernel(root: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernel", "guard", *words],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_trace_reports_what_reading_cannot_decide(tmp_path: Path) -> None:
    """open through reflection, a computed __import__ and an open inside codecs are
    reported on the guarded module's lines; namedtuple's own exec is not the module's."""
    root = _project(tmp_path)
    missing = str(tmp_path / "absent" / "guard-probe-target.txt")
    proc = _kernel(root, "--trace", "--", sys.executable, "main.py", missing)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "KG013" in line]
    assert lines == [
        "src/pkg/sneaky.py:11:1: KG013 run-time event 'open' (forbidden 'open') "
        "with 'pkg.sneaky' on the stack [pure]",
        "src/pkg/sneaky.py:14:1: KG013 run-time event 'import' (forbidden 'socket') "
        "with 'pkg.sneaky' on the stack [pure]",
        "src/pkg/sneaky.py:16:1: KG013 run-time event 'open' (forbidden 'open') "
        "with 'pkg.sneaky' on the stack [pure]",
    ]
    assert "ran" in proc.stdout  # the program itself ran to the end


def test_trace_exit_codes(tmp_path: Path) -> None:
    """A clean program exits with its own code; no command or a bad policy is exit 2."""
    root = _project(tmp_path)
    clean = _kernel(root, "--trace", "--", sys.executable, "-c", "import json")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    failing = _kernel(root, "--trace", "--", sys.executable, "-c", "raise SystemExit(3)")
    assert failing.returncode == 3
    assert _kernel(root, "--trace").returncode == 2
    missing = _kernel(root, "--trace", "--", str(tmp_path / "no-such-program"))
    assert missing.returncode == 2
    assert "cannot run" in missing.stderr


def test_pytest_trace_mode_fails_a_green_suite_on_an_event(tmp_path: Path) -> None:
    """kernel_guard_trace = true: the suite's tests pass, but the forbidden event in
    the pure module makes the run fail, with the line; a clean suite stays green."""
    root = _project(tmp_path)
    (root / "pyproject.toml").write_text(
        POLICY + '\n[tool.pytest.ini_options]\nkernel_guard_trace = true\npythonpath = ["src"]\n',
        encoding="utf-8",
    )
    (root / "tests").mkdir()
    missing = str(tmp_path / "absent" / "guard-probe-target.txt")
    (root / "tests" / "test_x.py").write_text(
        f"from pkg import sneaky\n\ndef test_x():\n    assert sneaky.run({missing!r}) == 'ran'\n",
        encoding="utf-8",
    )
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    proc = subprocess.run(args, cwd=root, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    assert "src/pkg/sneaky.py:11:1: KG013 run-time event 'open'" in proc.stdout
    (root / "tests" / "test_x.py").write_text("def test_x():\n    pass\n", encoding="utf-8")
    proc = subprocess.run(args, cwd=root, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no forbidden run-time event" in proc.stdout


def test_tracer_attribution_in_process() -> None:
    """The hook's decisions, called directly (no hook is installed in this process):
    an event from a covered module's frame is recorded once with its line; exec counts
    only as the module's own; an event with no covered frame, an unmapped event and an
    import the rule allows are not recorded."""
    from kernel.guard.model import Policy, Rule
    from kernel.guard.trace import Tracer, event_names, violations

    policy = Policy(
        rules=(
            Rule(
                name="pure",
                modules=("pkg", "pkg.*"),
                forbid_imports=("socket",),
                forbid_calls=("open", "exec", "os.system"),
            ),
            Rule(name="only", modules=("pkg.allow",), allow_imports=("json",)),
        )
    )
    tracer = Tracer(policy)
    code = (
        "def emit(hook, event, args):\n"
        "    hook(event, args)\n"
        "def through(hook, event, args):\n"
        "    return helper(hook, event, args)\n"
    )
    guarded: dict[str, object] = {"__name__": "pkg.mod"}
    exec(compile(code, "/proj/src/pkg/mod.py", "exec"), guarded)  # a module of the test
    library: dict[str, object] = {"__name__": "somelib"}
    exec(compile(code, "/site/somelib.py", "exec"), library)  # a module of the test
    guarded["helper"] = library["emit"]
    emit, through = guarded["emit"], guarded["through"]
    assert callable(emit)
    assert callable(through)
    emit(tracer.hook, "open", ("x",))
    emit(tracer.hook, "open", ("x",))  # the same line again: recorded once
    through(tracer.hook, "open", ("y",))  # through a library: still the module's
    through(tracer.hook, "exec", (None,))  # a library's exec is the library's
    emit(tracer.hook, "socket.connect", (None,))
    emit(tracer.hook, "import", ("socket", None))
    emit(tracer.hook, "object.__setattr__", (None,))  # not mapped
    emit(tracer.hook, "code.__new__", (None,))  # an object kind, not the module `code`
    library_emit = library["emit"]
    assert callable(library_emit)
    library_emit(tracer.hook, "open", ("z",))  # no covered frame
    allow: dict[str, object] = {"__name__": "pkg.allow"}
    exec(compile(code, "/proj/src/pkg/allow.py", "exec"), allow)  # a module of the test
    allow_emit = allow["emit"]
    assert callable(allow_emit)
    allow_emit(tracer.hook, "import", ("json", None))
    allow_emit(tracer.hook, "import", ("pickle", None))
    found = [
        (module, line, event, rule, what) for module, _p, line, event, rule, what in tracer.findings
    ]
    assert found == [
        ("pkg.mod", 2, "open", "pure", "builtins.open"),
        ("pkg.mod", 4, "open", "pure", "builtins.open"),
        ("pkg.mod", 2, "socket.connect", "pure", "socket.connect"),
        ("pkg.mod", 2, "import", "pure", "socket"),
        ("pkg.allow", 2, "import", "only", "pickle"),
    ]
    assert event_names("compile", ()) == (("builtins.compile",), None)
    shown = violations(tracer.findings, "/proj")
    assert shown[0].path == "src/pkg/allow.py"
    assert {v.code.value for v in shown} == {"KG013"}
    tracer.active = False
    emit(tracer.hook, "open", ("late",))
    assert len(tracer.findings) == 5


def test_tracer_accepts_the_packages_above_an_allowed_import() -> None:
    """`from kernel.decide.decision import X` loads `kernel.decide` first (an `import`
    event of its own): under allow-imports naming the submodule it is not forbidden;
    a sibling package is."""
    from kernel.guard.model import Policy, Rule
    from kernel.guard.trace import Tracer

    rule = Rule(name="only", modules=("pkg.mod",), allow_imports=("lib.sub.leaf",))
    code = "def emit(hook, m):\n    hook('import', (m, None))\n"
    guarded: dict[str, object] = {"__name__": "pkg.mod"}
    exec(compile(code, "/p/mod.py", "exec"), guarded)  # a module of the test
    emit = guarded["emit"]
    assert callable(emit)
    forbidden = []
    for module in ("lib", "lib.sub", "lib.sub.leaf", "lib.other", "lib.subx"):
        tracer = Tracer(Policy(rules=(rule,)))  # one per import: one finding per line
        emit(tracer.hook, module)
        forbidden += [f[5] for f in tracer.findings]
    assert forbidden == ["lib.other", "lib.subx"]


WATCHED = """\
import importlib
import os


def env():
    return os.environ.get("PATH"), "KERNEL_GUARD_ABSENT" in os.environ


def imp(name):
    return importlib.import_module(name)


def here():
    import sys

    return sys._getframe()
"""


def test_watch_attributes_environ_and_import_module_to_the_direct_caller() -> None:
    """The call watch (`kernel.guard.watch`) in this process: an environment read
    through `os.environ.get` and `in` (both end in `_Environ.__getitem__`) and an
    `import_module` of a forbidden module are the covered module's, on its lines; the
    same calls from a library are not; stopping puts every wrapper back."""
    import os

    from kernel.guard.model import Policy, Rule
    from kernel.guard.trace import Tracer
    from kernel.guard.watch import Watch

    rule = Rule(
        name="pure",
        modules=("pkg", "pkg.*"),
        forbid_imports=("socket",),
        forbid_calls=("os.environ", "datetime.datetime.now", "builtins.__import__"),
    )
    tracer = Tracer(Policy(rules=(rule,)))
    guarded: dict[str, object] = {"__name__": "pkg.mod"}
    exec(compile(WATCHED, "/proj/src/pkg/mod.py", "exec"), guarded)  # a module of the test
    library: dict[str, object] = {"__name__": "somelib"}
    exec(compile(WATCHED, "/site/somelib.py", "exec"), library)  # a module of the test
    before = dict(vars(type(os.environ)))
    watch = tracer.watch = Watch(tracer)
    watch.install()
    try:
        for namespace in (guarded, library):
            env, imp = namespace["env"], namespace["imp"]
            assert callable(env)
            assert callable(imp)
            env()
            imp("socket")
            imp("json")
        here = guarded["here"]
        assert callable(here)
        frame = here()
        watch.called(frame, ["builtins.__import__"], "socket")  # as a CALL event reports
        watch.called(frame, ["datetime.datetime.now"], None)
        watch.called(frame, ["datetime.datetime.now"], None)  # the same line: once
    finally:
        watch.stop()
    assert dict(vars(type(os.environ))) == before
    found = [(m, line, event, what) for m, _p, line, event, _r, what in tracer.findings]
    assert found == [
        ("pkg.mod", 6, "call", "os.environ"),
        ("pkg.mod", 10, "import", "socket"),
        ("pkg.mod", 16, "import", "socket"),
        ("pkg.mod", 16, "call", "datetime.datetime.now"),
    ]


def test_watch_resolves_the_policy_from_loaded_modules_only() -> None:
    """Patterns name objects of loaded modules (never importing one); a glob names
    a module's own members, not what it imported; keys survive re-binding; a subclass
    of a forbidden class, and its inherited class method, count as the base's."""
    import datetime
    import io
    import sys
    import uuid

    from kernel.guard.model import Policy, Rule
    from kernel.guard.trace import Tracer
    from kernel.guard.watch import Watch, call_key, module_code_name, resolve

    assert uuid.uuid4 in dict(resolve("uuid.*")[1]).values()
    assert "uuid.Enum" not in dict(resolve("uuid.*")[1])  # uuid imports enum.Enum
    assert resolve("open") == (True, [("builtins.open", open)])
    assert resolve("os.no_such_name") == (True, [])
    assert resolve("os.pa*h") == (True, [])
    assert resolve("kernel_guard_absent_module.f") == (False, [])
    assert resolve("kernel_guard_absent_module.*") == (False, [])
    assert call_key(datetime.datetime.now) == call_key(datetime.datetime.now)

    class Stamp(datetime.datetime):
        pass

    class Raw(io.FileIO):
        pass

    tracer = Tracer(
        Policy(
            rules=(
                Rule(
                    name="r",
                    modules=("pkg",),
                    forbid_calls=("datetime.datetime.now", "io.FileIO", "kernel_guard_absent.f"),
                ),
            )
        )
    )
    watch = Watch(tracer)
    watch.refresh()
    assert watch.pending == {"kernel_guard_absent.f"}  # looked for again as modules load
    assert watch.lookup(Stamp.now) == ["datetime.datetime.now"]
    assert watch.lookup(Raw) == ["io.FileIO"]
    assert watch.lookup(int) is None
    assert int in watch.clean
    assert watch.lookup([].append) is None  # bound to an unhashable list

    class Odd:
        def __hash__(self) -> int:
            raise ValueError("no hash")

        def method(self) -> None:
            """Bound, it is keyed by its instance, whose hash raises."""

    assert watch.lookup(Odd().method) is None  # nothing raised into the program

    runner: dict[str, object] = {}
    exec("def _call_with_frames_removed(f, *args, **kwds):\n    return f(*args)\n", runner)
    call = runner["_call_with_frames_removed"]
    assert callable(call)

    def loading(code: object, namespace: object) -> str | None:
        return module_code_name(sys._getframe(1))

    assert call(loading, compile("", "<x>", "exec"), {"__name__": "pkg.x"}) == "pkg.x"
    assert module_code_name(sys._getframe()) is None


DECORATED = """\
import functools

from json import dumps


def deco(func):
    @functools.wraps(func)
    def wrapper(*args):
        return func(*args)

    return wrapper


@deco
def wrapped():
    return 1


class Outer:
    def method(self):
        return 2

    @staticmethod
    def static():
        return 3

    @classmethod
    def klass(cls):
        return 4

    @property
    def prop(self):
        return 5

    class Inner:
        def inner(self):
            return 6
"""


def test_module_functions_are_the_modules_own_code() -> None:
    """What a guarded module loaded before the watch gets its CALL events on (3.12+):
    its functions, its classes' methods of every kind, nested classes', and the
    function a decorator wrapped; not the wrapper (the decorator's code, shared by
    everything it decorates elsewhere) and not an imported function."""
    import types

    from kernel.guard.watch import module_functions

    library = types.ModuleType("lib.decorators")
    library.__file__ = "/site/lib/decorators.py"
    exec(compile(DECORATED, library.__file__, "exec"), vars(library))  # a module of the test
    module = types.ModuleType("pkg.mod")
    module.__file__ = "/proj/src/pkg/mod.py"
    source = DECORATED.replace("def deco(func):", "def unused(func):")
    source = source.replace("@deco\n", "")
    vars(module)["deco"] = vars(library)["deco"]
    exec(compile("@deco\ndef wrapped_here():\n    return 7\n" + source, module.__file__, "exec"),
         vars(module))  # fmt: skip
    found = sorted(f.__qualname__ for f in module_functions(module, "pkg.mod"))
    assert found == [
        "Outer.Inner.inner",
        "Outer.klass",
        "Outer.method",
        "Outer.prop",
        "Outer.static",
        "unused",
        "wrapped",
        "wrapped_here",
    ]
