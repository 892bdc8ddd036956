"""The effect map's precision (issue 21 item 1): what honest library code does is not
a reach, what reaches a capability is, and `allow-reach` accepts one package's effects.

Each library is written into the test's own temporary folder and read from source
(the guard never imports it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernel.errors import ConfigError
from kernel.guard import Policy, Rule, ViolationCode, check_source, load_policy

HONEST = """\
import random
import sys
import warnings
DEBUG = 128
def group(open=""):
    return open + "("
def same(x):
    return x is random._inst
def compile_pattern(p, flags=0):
    if flags & DEBUG:
        print(p)
    return p
def lookup(name):
    return sys.modules.get(name)
def checked(x):
    if x < 0:
        warnings.warn("negative")
    return x
def generated(n):
    exec(f"def f(): return {n}")
def run_text(stmt):
    exec(stmt)
def reads(path):
    with open(path) as fh:
        return fh.read()
"""

HONEST_CALLS = """\
import effects_lib_kg as lib
lib.group("(")
lib.same(1)
lib.compile_pattern("a", 2)
lib.lookup("x")
lib.checked(1)
lib.generated(3)
lib.run_text("x = 1")
lib.run_text(f"x = {1}")
lib.reads(name)
"""

FORBID = ("open", "print", "random.*", "sys.modules", "exec", "warnings.*", "os.*")


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    (site / "effects_lib_kg").mkdir(parents=True)
    (site / "effects_lib_kg" / "__init__.py").write_text(HONEST, encoding="utf-8")
    (site / "effects_drv_kg.py").write_text(
        "import effects_lib_kg\ndef load(p):\n    return effects_lib_kg.reads(p)\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(site))
    return site


def _policy(**kw: object) -> Policy:
    fields: dict[str, object] = {"name": "r", "modules": ("m",), "effects": True}
    fields.update(kw)
    return Policy(rules=(Rule(**fields),))  # type: ignore[arg-type]


@pytest.mark.usefixtures("library")
def test_honest_library_code_is_not_a_reach() -> None:
    """A parameter named `open`, an `is` comparison with `random._inst`, a debug branch
    on a caller's bit flag, a `sys.modules` lookup, a library's warning and code the
    library generates itself are not reaches; text handed to `exec` and a file read are."""
    found = check_source(HONEST_CALLS, _policy(forbid_calls=FORBID), module="m")
    assert [(v.line, v.code) for v in found] == [
        (8, ViolationCode.EFFECT_REACH),
        (9, ViolationCode.EFFECT_REACH),
        (10, ViolationCode.EFFECT_REACH),
    ]
    assert found[0].message == (
        "use of 'effects_lib_kg.run_text' reaches forbidden 'exec' (forbid-calls 'exec') "
        "through effects_lib_kg.run_text -> builtins.exec"
    )
    assert "effects_lib_kg.reads -> builtins.open" in found[2].message


@pytest.mark.usefixtures("library")
def test_allow_reach_accepts_one_package_effects_only() -> None:
    """`allow-reach` hides chains through the named package (also from another
    library), never the module's own forbidden names nor another package's reach."""
    src = (
        "import effects_lib_kg, effects_drv_kg, codecs\n"
        "effects_lib_kg.reads('p')\neffects_drv_kg.load('p')\ncodecs.open('p')\nopen('p')\n"
    )
    policy = _policy(forbid_calls=("open",), allow_reach=("effects_lib_kg",))
    found = check_source(src, policy, module="m")
    assert [(v.line, v.code) for v in found] == [
        (4, ViolationCode.EFFECT_REACH),
        (5, ViolationCode.FORBIDDEN_CALL),
    ]
    without = check_source(src, _policy(forbid_calls=("open",)), module="m")
    assert [v.line for v in without] == [2, 3, 4, 5]


INSTANCES = """\
import time
def _read_config():
    with open("cfg") as fh:
        return fh.read()
class Formatter:
    def __init__(self):
        self.text = open("fmt").read()
class Thing:
    def __init__(self, clock=None, formatter_class=Formatter):
        self.clock = clock or time.time
        self.cfg = _read_config()
        self.formatter_class = formatter_class
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return None
    def stamp(self):
        return self.clock()
    def config(self):
        return self.cfg
    def plain(self):
        with self:
            return len(self.cfg)
    def formatted(self):
        return self.formatter_class()
    def anything(self):
        return self.unknown()
"""


def test_an_instance_attribute_is_what_was_stored_not_the_constructor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A method using ``self`` does not build the instance again: reading an attribute
    a call filled (``self.cfg = _read_config()``) opens nothing, ``with self`` runs
    only ``__enter__``/``__exit__``; a stored reference is followed
    (``self.clock = clock or time.time``, then ``self.clock()``), so is a parameter's
    default stored as it is (``formatter_class=Formatter``); an attribute no method
    stores still stands for the constructor."""
    from kernel.guard import effects

    (tmp_path / "kg_instances_lib.py").write_text(INSTANCES, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))

    def forbidden(name: str) -> bool:
        return name in ("builtins.open", "time.time")

    def chain(member: str) -> tuple[str, ...] | None:
        return effects.effect_chain(f"kg_instances_lib.Thing.{member}", forbidden, {})

    assert chain("config") is None
    assert chain("plain") is None
    assert chain("stamp") == (
        "kg_instances_lib.Thing.stamp",
        "kg_instances_lib.Thing.clock",
        "time.time",
    )
    formatted = chain("formatted")
    assert formatted is not None
    assert formatted[-3:] == (
        "kg_instances_lib.Formatter",
        "kg_instances_lib.Formatter.__init__",
        "builtins.open",
    )
    anything = chain("anything")
    assert anything is not None
    assert "kg_instances_lib.Thing.__init__" in anything  # through the constructor


def test_allow_reach_is_a_list_of_module_patterns(tmp_path: Path) -> None:
    md = tmp_path / "p.md"
    head = '```guard\n[[rules]]\nname="r"\nmodules=["m"]\nforbid-calls=["open"]\n'
    md.write_text(head + 'allow-reach="hypothesis"\n```\n', "utf-8")
    with pytest.raises(ConfigError, match="allow-reach: expected a list of strings"):
        load_policy([md])
    md.write_text(head + 'allow-reach=["hypothesis"]\n```\n', "utf-8")
    assert load_policy([md]).rules[0].to_dict()["allow-reach"] == ["hypothesis"]


@pytest.mark.processes
def test_trace_leaves_events_inside_an_allowed_package(tmp_path: Path) -> None:
    """The dynamic guard: an `open` inside the allowed package under a guarded module is
    the package's; the same `open` through another library is the module's."""
    (tmp_path / "pyproject.toml").write_text(
        "[tool.kernel.guard]\n[[tool.kernel.guard.rules]]\n"
        'name = "pure"\nmodules = ["pkg", "pkg.*"]\nforbid-calls = ["open"]\n'
        'allow-reach = ["engine_kg"]\n',
        encoding="utf-8",
    )
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "src" / "pkg" / "use.py").write_text(
        "import codecs\nimport engine_kg\n\n\ndef run(path):\n"
        "    engine_kg.load(path)\n    try:\n        codecs.open(path)\n"
        "    except OSError:\n        pass\n",
        encoding="utf-8",
    )
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "engine_kg.py").write_text(
        "def load(path):\n    try:\n        open(path)\n    except OSError:\n        pass\n",
        encoding="utf-8",
    )
    (tmp_path / "main.py").write_text(
        "import sys\nsys.path[:0] = ['src', 'lib']\nfrom pkg import use\nuse.run(sys.argv[1])\n",
        encoding="utf-8",
    )
    missing = str(tmp_path / "absent" / "guard-probe-target.txt")
    proc = subprocess.run(
        [sys.executable, "-m", "kernel", "guard", "--trace", "--", sys.executable, "main.py",
         missing],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if "KG013" in line]
    assert len(lines) == 1, proc.stdout + proc.stderr
    assert lines[0].startswith("src/pkg/use.py:8:")
    assert proc.returncode == 1
