"""`make check` runs the pure core's tests under the dynamic guard (`make trace`):
the recipe, with this project's own ADR policy, fails on a reach planted in a pure
module and passes without it.

The planted module is loaded under a pure-core name (`kernel.planted_trace_probe`) from
the test's temporary folder, and its `open` aims at a file that does not exist there.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PLANTED = """\
def run(path):
    try:
        open(path)
    except OSError:
        pass
    return "ran"
"""

LOADER = """\
import importlib.util
import sys


def test_planted():
    spec = importlib.util.spec_from_file_location("kernel.planted_trace_probe", {module!r})
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    assert mod.run({target!r}) == "ran"
"""


CONFTEST = """\
import importlib.util

# The project's hypothesis profiles (tests/conftest.py), which the recipe names.
spec = importlib.util.spec_from_file_location("project_conftest", {conftest!r})
assert spec is not None and spec.loader is not None
spec.loader.exec_module(importlib.util.module_from_spec(spec))
"""


def _recipe() -> tuple[list[str], list[str]]:
    """The `trace` target's pytest options and its test files, read from the Makefile."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    lines = text.splitlines()
    files = next(line for line in lines if line.startswith("PURE_TESTS :="))
    command = lines[lines.index("trace: install") + 1].strip()
    words = shlex.split(command)
    assert words[0] == "$(BIN)/pytest", command
    assert words[-1] == "$(PURE_TESTS)", command
    return words[1:-1], shlex.split(files.partition(":=")[2])


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "planted.py").write_text(body, encoding="utf-8")
    test = tmp_path / "test_planted.py"
    target = str(tmp_path / "absent" / "guard-probe-target.txt")
    test.write_text(
        LOADER.format(module=str(tmp_path / "planted.py"), target=target), encoding="utf-8"
    )
    conftest = str(ROOT / "tests" / "conftest.py")
    (tmp_path / "conftest.py").write_text(CONFTEST.format(conftest=conftest), encoding="utf-8")
    options, _files = _recipe()
    # The project's own configuration and policy (docs/adr), as `make trace` has them;
    # the plugin is named because the planted test is outside tests/ (whose conftest
    # loads it); its hypothesis profiles are registered by the folder's conftest.
    return subprocess.run(
        [sys.executable, "-m", "pytest", *options, "--rootdir", str(ROOT),
         "-c", str(ROOT / "pyproject.toml"), "-p", "kernel.guard.pytest_plugin", str(test)],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip


def test_make_check_runs_the_trace() -> None:
    """`check` depends on `trace`, and every test file it traces exists."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    check = next(line for line in text.splitlines() if line.startswith("check:"))
    assert "trace" in check.split()
    options, files = _recipe()
    assert "--kernel-guard-trace" in options
    assert files
    assert [f for f in files if not (ROOT / f).is_file()] == []


def test_trace_fails_on_a_planted_reach(tmp_path: Path) -> None:
    """An `open` in a pure module fails the traced run although the test passes."""
    proc = _run(tmp_path, PLANTED)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    assert (
        f"{tmp_path / 'planted.py'}:3:1: KG013 run-time event 'open' (forbidden 'open') "
        "with 'kernel.planted_trace_probe' on the stack [pure-core]"
    ) in proc.stdout


def test_trace_passes_without_the_reach(tmp_path: Path) -> None:
    proc = _run(tmp_path, "def run(path):\n    return 'ran'\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no forbidden run-time event" in proc.stdout
