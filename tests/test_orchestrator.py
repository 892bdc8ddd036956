"""An orchestrator drives kernel as a library, never through a CLI module:
``docs/examples/orchestrator.py`` runs the whole pipeline and records a decision, and
loads nothing from `kernel.effects.commands`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernel import DecisionVerified, HumanDecisionRecord, verify_decision
from kernel.effects.documents import load_report

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "orchestrator.py"

# Runs the example as `python orchestrator.py ...` would, then reports which kernel
# modules it loaded: a CLI module imported anywhere on the way shows up here.
_DRIVER = """
import json, runpy, sys
sys.argv = [sys.argv[1], *sys.argv[2:]]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as e:
    code = e.code
loaded = sorted(m for m in sys.modules if m.startswith("kernel"))
print(json.dumps({"code": code, "modules": loaded}))
"""


@pytest.mark.slow
def test_orchestrator_runs_the_pipeline_and_decides_from_python(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    config = ROOT / "fixtures" / "demo" / "config.json"
    args = [str(EXAMPLE), str(config), str(out), str(tmp_path), "you@example.com"]
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    *printed, last = proc.stdout.splitlines()
    ran = json.loads(last)
    assert ran["code"] == 0, proc.stdout + proc.stderr
    assert "kernel.effects.pipeline" in ran["modules"]
    assert not [m for m in ran["modules"] if m.startswith("kernel.effects.commands")]
    assert printed[-1].startswith("accepted 8e7ada4e6bdc (attempt-1)")
    # What it wrote is a decision that checks against the report beside it.
    report = load_report(out / "evidence.json")
    decision = HumanDecisionRecord.from_dict(json.loads((out / "decision.json").read_text()))
    assert isinstance(verify_decision(decision, report), DecisionVerified)
    assert decision.selected_attempt_id == "attempt-1"
