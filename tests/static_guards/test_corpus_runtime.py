"""The evasion corpus's labels are true: each case is run, and Python itself says
whether it reaches the forbidden capability.

Every ``f*`` probe (one per evasion family) must reach one, and every ``c*`` probe (one
per false-positive family) must not. Each runs in a fresh interpreter with an audit
hook (`sys.addaudithook`) that records the reach and blocks it by raising, so a probe
that works opens nothing, runs nothing and imports nothing (CI runs as root).
The static verdicts on the same files are checked in test_corpus.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
EVASIONS = sorted((CORPUS / "probe").glob("f[0-9]*.py"))
CLEAN = sorted((CORPUS / "probe").glob("c[0-9]*.py"))

RUNNER = r"""
import importlib, json, sys

reached = []
TARGET = "guard-probe-target.txt"

def hook(event, args):
    what = None
    if event == "open" and args and isinstance(args[0], str) and args[0].endswith(TARGET):
        what = "open " + TARGET
    elif event in ("os.system", "subprocess.Popen", "os.exec", "os.posix_spawn"):
        what = event
    elif event == "import" and args and args[0] in ("socket", "_socket"):
        what = "import " + args[0]
    if what is not None:
        reached.append(what)
        raise PermissionError("blocked by the corpus runner: " + what)

sys.addaudithook(hook)
try:
    importlib.import_module(sys.argv[1])
except BaseException as e:  # the blocked reach surfaces here, or the probe's own error
    error = type(e).__name__
else:
    error = None
print(json.dumps({"reached": reached, "error": error}))
"""


def _run(probe: Path) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(CORPUS)!r})\n" + RUNNER,
         f"probe.{probe.stem}"],
        cwd=CORPUS,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    return result


def test_corpus_has_one_case_per_family() -> None:
    """At least the families of issue 12: lexical, shadowing, __builtins__, annotations,
    introspection, reach-through, faked TYPE_CHECKING; and two false-positive families."""
    assert len(EVASIONS) >= 20
    assert len(CLEAN) >= 2


@pytest.mark.parametrize("probe", EVASIONS, ids=[p.stem for p in EVASIONS])
def test_evasion_reaches_its_capability_at_run_time(probe: Path) -> None:
    """Run under the audit hook, the evasion does reach (and is stopped at) the capability."""
    result = _run(probe)
    assert result["reached"], result
    assert result["error"] == "PermissionError", result


@pytest.mark.parametrize("probe", CLEAN, ids=[p.stem for p in CLEAN])
def test_clean_case_reaches_nothing_at_run_time(probe: Path) -> None:
    """Run under the same hook, the look-alike runs to the end and reaches nothing."""
    assert _run(probe) == {"reached": [], "error": None}


NOT_RUN = {"e04_import_in_function", "e06_type_checking_import"}
"""Rows whose marked lines never run when the probe is imported: a function nobody
calls, an ``if TYPE_CHECKING:`` block. No run-time check can see what does not run."""

CLOCK_ROWS = {"e19_qualified_method"}
"""A C callable (``datetime.datetime.now``) raises no audit event and runs no Python
code: only `sys.monitoring` (3.12+) sees the call (`kernel.guard.watch`)."""


def test_dynamic_guard_catches_every_case_that_runs() -> None:
    """The dynamic guard (audit hook and call watch, `capability.dynamic`: each probe
    imported in a forked child) attributes an event to every evasion row whose marked
    lines run, among them the rows no audit event names (``import_module`` with a
    literal and a computed name, ``os.environ[...]`` and ``.get``, a layers rule's
    import, the clock on 3.12+), each on its marked lines; and to no clean row."""
    script = (
        f"import json, sys; sys.path.insert(0, {str(HERE)!r})\n"
        "import capability\n"
        "rows = capability.expectations()\n"
        "found = capability.dynamic([stem for stem, _t, _m in rows])\n"
        "print(json.dumps({stem: [sorted(marks), sorted(line for line, _c in found[stem])]"
        " for stem, _t, marks in rows}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    rows: dict[str, list[list[int]]] = json.loads(proc.stdout.splitlines()[-1])
    flagged = {stem for stem, (marks, lines) in rows.items() if lines and not marks}
    missed = {stem for stem, (marks, lines) in rows.items() if marks and not lines}
    unseen = NOT_RUN | (CLOCK_ROWS if sys.version_info < (3, 12) else set())
    assert flagged == set()
    assert missed == unseen
    for stem in ("e13_import_module_literal", "e14_import_module_dynamic", "e18_environ_read",
                 "e23_layers", *(CLOCK_ROWS - unseen)):  # fmt: skip
        marks, lines = rows[stem]
        assert marks == lines, stem
