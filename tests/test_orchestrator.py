"""An orchestrator drives kernel as a library, never through a CLI module:
``docs/examples/orchestrator.py`` runs the whole pipeline, records and signs a
decision and promotes the candidate, and loads nothing from `kernel.effects.commands`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=repo, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def _promotion_inputs(tmp_path: Path, decider: str) -> list[str]:
    """A git copy of the demo repository (one commit on main), the decider's key and an
    allowed_signers file listing it, and a ledger path."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "fixtures" / "demo" / "repo", repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "baseline")
    key = tmp_path / "key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", decider, "-f", str(key)],
        check=True,
    )
    allowed = tmp_path / "allowed_signers"
    public = " ".join((tmp_path / "key.pub").read_text().split()[:2])
    allowed.write_text(f"{decider} {public}\n")
    return [str(repo), str(key), str(allowed), str(tmp_path / "ledger.sqlite")]


@pytest.mark.slow
def test_orchestrator_runs_the_pipeline_decides_and_promotes_from_python(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results" / "demo"
    config = ROOT / "fixtures" / "demo" / "config.json"
    decider = "you@example.com"
    args = [str(EXAMPLE), str(config), str(out), str(tmp_path / "results"), decider]
    args += _promotion_inputs(tmp_path, decider)
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
    assert printed[-2] == "demo/median-fix: accept (exactly one verified candidate)"
    assert printed[-1].startswith("promoted attempt-1: ")
    # main moved to a commit whose tree holds the fix, and the run folder is intact.
    assert _git(tmp_path / "repo", "log", "-1", "--format=%s").startswith("kernel:")
    assert "Kernel-Ledger-Head: " in _git(tmp_path / "repo", "log", "-1", "--format=%B")
    assert load_report(out / "evidence.json").run_id == "demo/median-fix"
