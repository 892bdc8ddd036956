"""The static screen's human exception, end to end (issue 18 item 5): a candidate whose
tests and oracle pass but whose code sniffs the hostname is never verified; `kernel
promote` refuses it on a signed accept that does not name the finding, and promotes it
on a signed accept whose rationale names the finding id (ADR-0004 §1c, gate P4).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.corroboration.commit_admission import EvidenceClass
from kernel.effects.cli import main
from kernel.effects.pipeline import run_pipeline
from kernel.effects.run_folder import load_run_folder
from kernel.run.record import SCREEN_CHECK_ID
from kernel.run.report import EvidenceState

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo"
DECIDER = "alice@example.com"
FIX = (DEMO / "workers" / "correct_fix.sh").read_text().split("<<'PY'\n", 1)[1]
FIX = FIX.split("\nPY\n", 1)[0] + "\n"
SNIFF = FIX + "\nimport socket\n\n_HOST = socket.gethostname()\n"


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def world() -> Iterator[Path]:
    """A run of one sniffing candidate, an allowed key for alice, a git copy of the repo."""
    base = Path(tempfile.mkdtemp(prefix="kernel-test-screen-promote-"))
    try:
        shutil.copytree(DEMO, base / "demo")
        worker = base / "demo" / "workers" / "sniff.sh"
        worker.write_text(f"#!/bin/sh\nset -eu\ncat > stats.py <<'PY'\n{SNIFF}PY\n")
        worker.chmod(0o755)
        config = json.loads((base / "demo" / "config.json").read_text())
        config["attempts"] = [{**config["attempts"][0], "command": ["workers/sniff.sh"]}]
        (base / "demo" / "sniff.json").write_text(json.dumps(config))
        results = base / "results"
        run_pipeline(base / "demo" / "sniff.json", results / "run", results_root=results, reruns=0)
        key = base / "alice"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", DECIDER, "-f", str(key)],
            check=True,
        )
        public = " ".join((base / "alice.pub").read_text().split()[:2])
        (base / "allowed_signers").write_text(f"{DECIDER} {public}\n")
        yield base
    finally:
        shutil.rmtree(base)


def _repo(world: Path, tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(world / "demo" / "repo", repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "baseline")
    return repo


def _decide_and_promote(world: Path, tmp_path: Path, rationale: str) -> tuple[int, str]:
    results = world / "results"
    decision = results / tmp_path.name / "decision.json"
    assert main(
        [
            "decision", "record", "--evidence-report", str(results / "run" / "evidence.json"),
            "--output", str(decision), "--decision-id", "d-1", "--decision", "accept",
            "--rationale", rationale, "--decider-id", DECIDER, "--selected-attempt-id",
            "attempt-1", "--decided-at", "2026-11-30T12:00:00Z", "--results-root", str(results),
            "--signing-key", str(world / "alice"),
        ]
    ) == 0  # fmt: skip
    repo = _repo(world, tmp_path)
    code = main(
        [
            "promote", "--run-dir", str(results / "run"), "--decision", str(decision),
            "--allowed-signers", str(world / "allowed_signers"), "--repo", str(repo),
            "--onto", "main", "--ledger", str(tmp_path / "ledger.sqlite"),
        ]
    )  # fmt: skip
    return code, (repo / "stats.py").read_text()


def _finding(world: Path) -> str:
    folder = load_run_folder(world / "results" / "run")
    (attempt,) = folder.run.attempts
    screen = next(r for r in attempt.check_runs if r.check_id == SCREEN_CHECK_ID)
    (finding,) = screen.findings
    return finding.finding_id


def test_a_suspicious_candidate_is_not_verified(world: Path) -> None:
    """Its tests and oracle pass; the screen's finding keeps it from supported."""
    folder = load_run_folder(world / "results" / "run")
    (attempt,) = folder.report.attempts
    assert attempt.evidence_state is EvidenceState.INCONCLUSIVE
    assert _finding(world).startswith("environment-sniffing:stats.py:")
    (group,) = folder.admission.groups
    # Never verified; whether it may be staged is the non-pass rule's (issue 18 item 7).
    assert group.evidence_class is not EvidenceClass.VERIFIED


def test_a_signed_accept_that_does_not_name_the_finding_is_refused(
    world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A generic rationale acknowledges nothing: not_verified, main unchanged."""
    capsys.readouterr()
    code, stats = _decide_and_promote(world, tmp_path, "the median fix passes the tests")
    assert code == 1
    assert "not_verified" in capsys.readouterr().out
    assert "gethostname" not in stats


def test_a_signed_accept_naming_the_finding_promotes(world: Path, tmp_path: Path) -> None:
    """The decider read the finding and names it: the candidate is promoted."""
    rationale = f"the hostname is only logged; acknowledged {_finding(world)}"
    code, stats = _decide_and_promote(world, tmp_path, rationale)
    assert code == 0
    assert "gethostname" in stats
