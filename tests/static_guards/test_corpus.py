"""(e) The evasion corpus: every marked evasion caught, clean snippets pass.

Each probe module under corpus/probe marks the lines where findings are expected with
``# expect: CODE ...``; the guard must report exactly those (code, line) pairs, and
nothing in clean modules. The capability table in docs/guard.md must be current.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kernel.guard import ViolationCode, check_tree, load_policy

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
HELPERS = {"__init__", "secret", "chain_mid", "reexport", "layer_top", "injector"}
EXPECT = re.compile(r"#\s*expect:\s*((?:KG\d{3}\s*)+)$")
PROBES = sorted(p for p in (CORPUS / "probe").glob("*.py") if p.stem not in HELPERS)


def _expected(path: Path) -> Counter[tuple[int, str]]:
    out: Counter[tuple[int, str]] = Counter()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        m = EXPECT.search(line)
        if m:
            for code in m.group(1).split():
                out[(number, code)] += 1
    return out


@pytest.fixture(scope="module")
def found() -> dict[str, Counter[tuple[int, str]]]:
    report = check_tree(CORPUS, load_policy([CORPUS / "guard.md"]))
    out: dict[str, Counter[tuple[int, str]]] = {}
    for v in report.violations:
        out.setdefault(Path(v.path).stem, Counter())[(v.line, v.code.value)] += 1
    return out


@pytest.mark.parametrize("probe", PROBES, ids=[p.stem for p in PROBES])
def test_probe_findings_match_markers(
    probe: Path, found: dict[str, Counter[tuple[int, str]]]
) -> None:
    """Each probe yields exactly its marked (line, code) findings: no miss, no extra."""
    assert found.get(probe.stem, Counter()) == _expected(probe)


def test_corpus_covers_every_evasion_form() -> None:
    """The corpus exercises every code the scanner produces on evasions."""
    codes = {code for p in PROBES for _line, code in _expected(p)}
    # KG013 comes from running code, not reading it: tests/test_guard_trace.py.
    unprobed = {
        ViolationCode.UNPARSEABLE.value,
        ViolationCode.BAD_SUPPRESSION.value,
        ViolationCode.RUNTIME_EVENT.value,
    }
    assert codes >= {c.value for c in ViolationCode} - unprobed
    clean = [p for p in PROBES if not _expected(p)]
    assert len(clean) >= 3


def test_helpers_are_not_reported(found: dict[str, Counter[tuple[int, str]]]) -> None:
    """Modules excluded by `!pattern` are not checked (the last matching entry wins)."""
    assert not set(found) & HELPERS


@pytest.mark.processes
def test_capability_table_is_current() -> None:
    """docs/guard.md's table equals a fresh run of all three tools (ruff, import-linter)."""
    proc = subprocess.run(
        [sys.executable, str(HERE / "capability.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
