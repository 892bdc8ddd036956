"""End to end: signed decisions, staging and promotion on real git repositories, with a
real SQLite ledger (ADR-0006). The demo is run once; every test works on its own git
copy of the demo repository and its own ledger."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from kernel.corroboration.commit_admission import EvidenceClass
from kernel.corroboration.consensus import (
    CaptureMode,
    CaptureStatus,
    ConsensusRefusal,
    Isolation,
    RunObservation,
    build_consensus,
    build_corroboration_report,
)
from kernel.corroboration.run_admission import RunAdmission
from kernel.decide.decision import Decision, HumanDecisionRecord
from kernel.decide.gate import SignatureStatus, derive_run_admission
from kernel.decide.ledger import EntryKind, LedgerVerified
from kernel.decide.merkle import TreeHead
from kernel.effects import git as git_effects
from kernel.effects.cli import main
from kernel.effects.git import (
    CommitIdentity,
    Repo,
    content_tree_id,
    exec_keys,
)
from kernel.effects.ledger_store import opened, read_jsonl, tree_head, verify_store
from kernel.effects.pipeline import run_pipeline
from kernel.effects.promotion import CRASH_AT_VARIABLE, pending, unsafe_changes
from kernel.effects.run_folder import load_run_folder
from kernel.effects.signing import armored, check_tree_head_signature
from kernel.effects.staging import pending_stages, pending_unstages
from kernel.errors import ConfigError, EffectError, GitRefusal, UntrustedConfig
from kernel.records.codec import seal
from kernel.records.identity import canonical_json
from kernel.run.report import RunEvidenceReport, build_evidence_report
from kernel.run.verification import Recommendation, VerificationStatus

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo"
DECIDER = "alice@example.com"


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` as a user would (with an explicit identity)."""
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def keygen(path: Path, comment: str) -> Path:
    """A throwaway ed25519 key pair (no passphrase)."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
    )
    return path


@attrs.frozen
class Demo:
    """The demo's run folder and keys, shared by the module."""

    base: Path
    results: Path
    run_dir: Path
    alice: Path
    bob: Path
    allowed: Path


@pytest.fixture(scope="module")
def demo() -> Iterator[Demo]:
    """Run the demo once; make keys for alice (allowed) and bob (not allowed)."""
    base = Path(tempfile.mkdtemp(prefix="kernel-test-promote-"))
    try:
        shutil.copytree(DEMO, base / "demo")
        results = base / "results"
        run_pipeline(base / "demo" / "config.json", results / "demo", results_root=results)
        keys = base / "keys"
        keys.mkdir()
        alice, bob = keygen(keys / "alice", DECIDER), keygen(keys / "bob", "bob")
        allowed = keys / "allowed_signers"
        public = (keys / "alice.pub").read_text().split()[:2]
        allowed.write_text(f"{DECIDER} {' '.join(public)}\n")
        yield Demo(base, results, results / "demo", alice, bob, allowed)
    finally:
        shutil.rmtree(base)


@pytest.fixture
def repo(demo: Demo, tmp_path: Path) -> Path:
    """A git copy of the demo repository, one commit on main."""
    path = tmp_path / "repo"
    shutil.copytree(demo.base / "demo" / "repo", path)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "baseline")
    return path


def decide(
    demo: Demo,
    tmp_path: Path,
    *,
    decision: str = "accept",
    attempt: str | None = "attempt-1",
    key: Path | None = None,
    name: str = "decision.json",
) -> Path:
    """Record (and sign with ``key``) a decision inside the results root."""
    out = demo.results / tmp_path.name / name
    argv = [
        "decision", "record", "--evidence-report", str(demo.run_dir / "evidence.json"),
        "--output", str(out), "--decision-id", "d-1", "--decision", decision,
        "--rationale", "the median fix passes the held-out tests", "--decider-id", DECIDER,
        "--decided-at", "2026-11-30T12:00:00Z", "--results-root", str(demo.results),
    ]  # fmt: skip
    if attempt is not None:
        argv += ["--selected-attempt-id", attempt]
    if key is not None:
        argv += ["--signing-key", str(key)]
    assert main(argv) == 0
    return out


def promote(
    demo: Demo, repo: Path, decision: Path, ledger: Path, *extra: str, onto: str = "main"
) -> int:
    """`kernel promote` onto ``onto``."""
    return main(
        [
            "promote", "--run-dir", str(demo.run_dir), "--decision", str(decision),
            "--allowed-signers", str(demo.allowed), "--repo", str(repo), "--onto", onto,
            "--ledger", str(ledger), *extra,
        ]
    )  # fmt: skip


def kinds(ledger: Path) -> list[str]:
    """The kinds of the ledger's entries, in order."""
    with opened(ledger, create=False) as store:
        assert isinstance(verify_store(store), LedgerVerified)
        return [str(e.kind) for e in store.entries()]


def test_run_names_its_baseline_git_tree(demo: Demo, repo: Path) -> None:
    """The run record names the verifier's baseline as a git tree id: exactly the tree
    of a git copy of the demo repository."""
    run = load_run_folder(demo.run_dir).run
    assert run.provenance is not None
    assert run.provenance.baseline_git_tree == git(repo, "rev-parse", "HEAD^{tree}")
    assert content_tree_id(demo.base / "demo" / "repo") == run.provenance.baseline_git_tree


def test_signed_accept_is_promoted_with_trailers(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A verified, signed, accepted candidate fast-forwards main to a commit whose
    trailers name the evidence; the ledger records permit and promotion."""
    decision = decide(demo, tmp_path, key=demo.alice)
    ledger = tmp_path / "ledger.sqlite"
    old = git(repo, "rev-parse", "main")
    assert promote(demo, repo, decision, ledger) == 0
    new = git(repo, "rev-parse", "main")
    assert git(repo, "rev-parse", "main^") == old
    trailers = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", "main")
    folder = load_run_folder(demo.run_dir)
    record = HumanDecisionRecord.from_dict(json.loads(decision.read_text()))
    assert f"Kernel-Report-Digest: {folder.report.digest}" in trailers
    assert f"Kernel-Decision-Id: {record.record_id}" in trailers
    assert f"Kernel-Admission-Id: {folder.admission.admission_id}" in trailers
    assert kinds(ledger) == ["admission", "decision", "promotion", "promotion"]
    with opened(ledger, create=False) as store:
        permit_entry = list(store.entries())[1].entry_id
    assert f"Kernel-Ledger-Entry: {permit_entry}" in trailers
    # The commit is the decider's, at the decision's time; the work tree followed.
    assert git(repo, "log", "-1", "--format=%an %ae %aI", "main") == (
        f"{DECIDER} {DECIDER} 2026-11-30T12:00:00+00:00"
    )
    assert git(repo, "status", "--porcelain") == ""
    assert "def median" in (repo / "stats.py").read_text()
    # Reproducible: the same promotion in another copy makes the same commit.
    other = tmp_path / "other"
    shutil.copytree(repo, other)
    git(other, "reset", "-q", "--hard", old)
    assert promote(demo, other, decision, tmp_path / "other.sqlite") == 0
    # A fresh ledger gets the same entries, so even the trailer's entry id is the same.
    assert git(other, "rev-parse", "main") == new


def _refused(
    demo: Demo, repo: Path, decision: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> str:
    before = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    capsys.readouterr()
    assert promote(demo, repo, decision, ledger) == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert git(repo, "for-each-ref", "--format=%(refname) %(objectname)") == before
    assert kinds(ledger) == ["refusal"]
    return out


def test_unsigned_decision_is_refused(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unsigned accept verifies as a decision but never authorises a promotion."""
    decision = decide(demo, tmp_path)
    assert main(["decision", "verify", "--decision-record", str(decision),
                 "--evidence-report", str(demo.run_dir / "evidence.json")]) == 0  # fmt: skip
    out = _refused(demo, repo, decision, tmp_path / "l.sqlite", capsys)
    assert "refused (decision_unsigned)" in out


def test_forged_decision_is_refused(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A signed reject edited into an accept and resealed: the id reproduces, the
    signature does not."""
    decision = decide(demo, tmp_path, decision="reject", key=demo.alice)
    record = HumanDecisionRecord.from_dict(json.loads(decision.read_text()))
    fields = {
        f.name: getattr(record, f.name)
        for f in attrs.fields(HumanDecisionRecord)
        if f.name != "record_id"
    }
    forged = seal(HumanDecisionRecord, **{**fields, "decision": Decision.ACCEPT})
    decision.write_bytes(json.dumps(forged.to_dict()).encode())
    assert main(["decision", "verify", "--decision-record", str(decision),
                 "--evidence-report", str(demo.run_dir / "evidence.json")]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["decision", "verify", "--decision-record", str(decision),
                 "--evidence-report", str(demo.run_dir / "evidence.json"),
                 "--allowed-signers", str(demo.allowed)]) == 1  # fmt: skip
    assert "signature_invalid" in capsys.readouterr().out
    out = _refused(demo, repo, decision, tmp_path / "l.sqlite", capsys)
    assert "refused (signature_invalid)" in out


def test_wrong_key_is_refused(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A valid signature by a key not allowed for the decider."""
    decision = decide(demo, tmp_path, key=demo.bob)
    out = _refused(demo, repo, decision, tmp_path / "l.sqlite", capsys)
    assert "refused (signer_not_allowed)" in out


def test_rejected_candidate_is_refused(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Accepting the candidate the held-out verifier rejected: not_verified."""
    decision = decide(demo, tmp_path, attempt="attempt-2", key=demo.alice)
    out = _refused(demo, repo, decision, tmp_path / "l.sqlite", capsys)
    assert "refused (not_verified)" in out


def test_reject_decision_is_refused(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A signed reject authorises nothing."""
    decision = decide(demo, tmp_path, decision="reject", key=demo.alice)
    out = _refused(demo, repo, decision, tmp_path / "l.sqlite", capsys)
    assert "refused (no_accept_decision)" in out


def test_branch_moved_since_the_run_is_refused(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The branch moved between run and promotion: its tip is not the baseline."""
    (repo / "NOTES.md").write_text("someone else's change\n")
    git(repo, "add", "NOTES.md")
    git(repo, "commit", "-q", "-m", "moved")
    decision = decide(demo, tmp_path, key=demo.alice)
    out = _refused(demo, repo, decision, tmp_path / "l.sqlite", capsys)
    assert "refused (branch_not_baseline)" in out


def test_branch_moving_during_promotion_is_refused(demo: Demo, repo: Path) -> None:
    """The compare-and-swap update refuses a ref that is not what it was read as."""
    handle = Repo(repo)
    tip = git(repo, "rev-parse", "main")
    who = CommitIdentity(name="t", email="t@example.com", date="@0 +0000")
    commit = handle.commit_patch(tip, b"", "empty", who)
    with pytest.raises(GitRefusal):
        handle.update_ref("refs/heads/main", commit, commit, "race")
    assert git(repo, "rev-parse", "main") == tip


def test_broken_ledger_is_refused(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ledger edited in the middle refuses promotion (ledger_broken)."""
    ledger = tmp_path / "l.sqlite"
    with opened(ledger) as store:
        for i in range(3):
            store.append(EntryKind.ADMISSION, {"i": i})
    db = sqlite3.connect(ledger)
    db.execute("UPDATE kernel_ledger SET payload = '{}' WHERE seq = 2")
    db.commit()
    db.close()
    decision = decide(demo, tmp_path, key=demo.alice)
    before = git(repo, "rev-parse", "main")
    capsys.readouterr()
    assert promote(demo, repo, decision, ledger) == 1
    assert "ledger_broken" in capsys.readouterr().out
    assert git(repo, "rev-parse", "main") == before


def test_a_ledger_that_refuses_appends_still_refuses_and_says_unrecorded(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ledger whose last entry lost its tail mark refuses every append: the
    promotion is refused all the same (ledger_broken), and the refusal says it was not
    recorded instead of pretending to an entry; nothing moved."""
    ledger = tmp_path / "l.sqlite"
    with opened(ledger) as store:
        for i in range(3):
            store.append(EntryKind.ADMISSION, {"i": i})
    db = sqlite3.connect(ledger)
    db.execute("UPDATE kernel_ledger SET tail = 0")
    db.commit()
    db.close()
    decision = decide(demo, tmp_path, key=demo.alice)
    before = git(repo, "rev-parse", "main")
    capsys.readouterr()
    assert promote(demo, repo, decision, ledger) == 1
    out = capsys.readouterr().out
    assert "refused (ledger_broken); not recorded (the ledger refused the append)" in out
    assert git(repo, "rev-parse", "main") == before
    with opened(ledger, create=False) as store:
        assert len(list(store.entries())) == 3


@pytest.mark.parametrize("problem", ["missing repo", "not a repo", "no branch"])
def test_unusable_repository_exit_2(
    problem: str, demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing or branchless repository: exit 2, one line, nothing changed, the
    refusal recorded (issue 22: every refusal of promote is in the ledger)."""
    decision = decide(demo, tmp_path, key=demo.alice)
    target, onto = repo, "main"
    if problem == "missing repo":
        target = tmp_path / "nowhere"
    elif problem == "not a repo":
        target = tmp_path / "plain"
        target.mkdir()
    else:
        onto = "no-such-branch"
    ledger = tmp_path / "l.sqlite"
    capsys.readouterr()
    assert promote(demo, target, decision, ledger, onto=onto) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert kinds(ledger) == ["refusal"]


def test_edited_admission_is_refused(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Flipping a refused group to verified (and resealing) is an admission mismatch."""
    run_dir = demo.results / tmp_path.name / "run"
    shutil.copytree(demo.run_dir, run_dir)
    admission = load_run_folder(run_dir).admission
    rejected = next(g for g in admission.groups if "attempt-2" in g.attempt_ids)
    flipped = attrs.evolve(
        rejected,
        evidence_class=EvidenceClass.VERIFIED,
        refusal_reasons=(),
    )
    groups = tuple(flipped if g is rejected else g for g in admission.groups)
    fields = {
        f.name: getattr(admission, f.name)
        for f in attrs.fields(RunAdmission)
        if f.name != "admission_id"
    }
    forged = seal(RunAdmission, **{**fields, "groups": groups})
    (run_dir / "admission.json").write_bytes(json.dumps(forged.to_dict()).encode())
    decision = decide(demo, tmp_path, attempt="attempt-2", key=demo.alice)
    ledger = tmp_path / "l.sqlite"
    capsys.readouterr()
    code = main(
        [
            "promote", "--run-dir", str(run_dir), "--decision", str(decision),
            "--allowed-signers", str(demo.allowed), "--repo", str(repo), "--onto", "main",
            "--ledger", str(ledger),
        ]
    )  # fmt: skip
    assert code == 1
    assert "refused (admission_mismatch, not_verified)" in capsys.readouterr().out


def test_stage_and_unstage(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Staging makes a commit reachable only from refs/kernel/staged/<run>/<attempt>;
    unstaging removes it; both are in the ledger. A refused group cannot be staged."""
    ledger = tmp_path / "l.sqlite"
    common = ["--run-dir", str(demo.run_dir), "--repo", str(repo), "--ledger", str(ledger)]
    branches = git(repo, "for-each-ref", "refs/heads", "--format=%(refname) %(objectname)")
    assert main(["stage", *common, "--attempt", "attempt-1"]) == 0
    ref = "refs/kernel/staged/demo/median-fix/attempt-1"
    staged = git(repo, "rev-parse", ref)
    assert git(repo, "for-each-ref", "refs/heads", "--format=%(refname) %(objectname)") == (
        branches
    )
    assert git(repo, "branch", "--contains", staged) == ""
    assert "Kernel-Evidence-Class: verified" in git(repo, "log", "-1", "--format=%B", staged)
    # Staging again is idempotent (same commit: pinned identity and date).
    assert main(["stage", *common, "--attempt", "attempt-1"]) == 0
    assert git(repo, "rev-parse", ref) == staged
    capsys.readouterr()
    assert main(["stage", *common, "--attempt", "attempt-2"]) == 1
    assert "refused (not_stageable)" in capsys.readouterr().out
    assert main(["unstage", *common, "--attempt", "attempt-1"]) == 0
    assert git(repo, "for-each-ref", "refs/kernel") == ""
    assert main(["unstage", *common, "--attempt", "attempt-1"]) == 2
    # The unstage of what is not staged is refused, and recorded like the others.
    # Each stage and unstage is an intent and its close (the ref moves between the two).
    assert kinds(ledger) == [
        "admission", "staging", "staging", "admission", "staging", "staging", "refusal",
        "unstaging", "unstaging", "refusal",
    ]  # fmt: skip


def _readme_blocks() -> tuple[str, str]:
    """The README's setup block and the three-command block after the loop-demo marker."""
    text = (ROOT / "README.md").read_text()
    before, marker, after = text.partition("<!-- loop-demo")
    assert marker, "README lost its loop-demo block"
    setup = before.rsplit("```sh\n", 1)[1].split("```", 1)[0]
    commands = after.split("```sh\n", 1)[1].split("```", 1)[0]
    return setup, commands


def test_readme_closes_the_loop(demo: Demo, tmp_path: Path) -> None:
    """The README's commands, run as written after `make demo`: a signed decision, a
    promotion onto main of a git copy of the demo repository, an intact ledger."""
    setup, commands = _readme_blocks()
    assert len([line for line in commands.splitlines() if line.strip()]) == 3
    work = tmp_path / "work"
    shutil.copytree(DEMO / "repo", work / "fixtures" / "demo" / "repo")
    shutil.copytree(demo.run_dir, work / "results" / "demo")
    kernel = f"{shlex.quote(sys.executable)} -m kernel"
    script = "set -euo pipefail\n" + setup + commands.replace(".venv/bin/kernel", kernel)
    script += 'git -C "$DEMO/repo" log -1 --format=%B main > trailers.txt\n'
    (tmp_path / "scratch").mkdir()
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env={**os.environ, "TMPDIR": str(tmp_path / "scratch")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "promoted attempt-1 onto main" in done.stdout
    assert "intact: 4 entries" in done.stdout
    trailers = (work / "trailers.txt").read_text()
    assert f"Kernel-Report-Digest: {load_run_folder(demo.run_dir).report.digest}" in trailers


def test_attest_writes_an_in_toto_statement(
    demo: Demo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kernel attest`: subject = the candidate patch's sha256; the predicate carries the
    report digest, the evidence class, the verifier's checks and the decision id."""
    decision = decide(demo, tmp_path, key=demo.alice)
    out = demo.results / tmp_path.name / "attempt-1.intoto.json"
    assert main(["attest", "--run-dir", str(demo.run_dir), "--attempt", "attempt-1",
                 "--decision", str(decision), "--output", str(out),
                 "--results-root", str(demo.results)]) == 0  # fmt: skip
    statement = json.loads(out.read_text())
    folder = load_run_folder(demo.run_dir)
    patch = next(demo.run_dir.glob("patches/*.patch"))
    candidate = next(g for g in folder.admission.groups if "attempt-1" in g.attempt_ids)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"] == [
        {
            "name": f"patches/{candidate.candidate_digest}.patch",
            "digest": {"sha256": candidate.candidate_digest},
        }
    ]
    assert (demo.run_dir / statement["subject"][0]["name"]).exists() or patch.exists()
    predicate = statement["predicate"]
    assert statement["predicateType"].startswith("https://")
    assert predicate["report_digest"] == folder.report.digest
    assert predicate["evidence_class"] == "verified"
    assert {c["id"] for c in predicate["verifier"]["checks"]} >= {"unit-tests"}
    record = json.loads(decision.read_text())
    assert predicate["decision"]["record_id"] == record["record_id"]
    capsys.readouterr()
    assert main(["attest", "--run-dir", str(demo.run_dir), "--attempt", "attempt-3",
                 "--output", str(out), "--results-root", str(demo.results)]) == 1  # fmt: skip
    assert "refused (no_candidate)" in capsys.readouterr().out


def _without_verifier_pass(demo: Demo, tmp_path: Path, reruns: int) -> Path:
    """A run folder whose only attempt carries the demo's correct fix but no verifier
    pass (insufficient evidence), with ``reruns`` unanimous reruns of its worker."""
    folder = load_run_folder(demo.run_dir)
    attempt = next(a for a in folder.run.attempts if a.attempt_id == "attempt-1")
    assert attempt.verification is not None
    assert attempt.manifest is not None
    inconclusive = attrs.evolve(
        attempt,
        verification=attrs.evolve(
            attempt.verification,
            recommendation=Recommendation.INSUFFICIENT_EVIDENCE,
            status=VerificationStatus.INCONCLUSIVE,
        ),
    )
    assert folder.run.provenance is not None
    provenance = attrs.evolve(
        folder.run.provenance,
        inputs=tuple(
            i for i in folder.run.provenance.inputs
            if not i.name.startswith("worker:") or i.name == "worker:attempt-1"
        ),
    )  # fmt: skip
    run = attrs.evolve(folder.run, attempts=(inconclusive,), provenance=provenance)
    report = build_evidence_report(run)
    assert isinstance(report, RunEvidenceReport)
    candidate = attempt.manifest.candidate_digest
    assert candidate is not None
    corroborations = {}
    if reruns:
        observations = [
            RunObservation(
                index=i, status=CaptureStatus.OK, exit_code=0, output_digest=candidate,
                output_size=100, isolation=Isolation.OVERLAY, duration_ms=1,
            )
            for i in range(reruns)
        ]  # fmt: skip
        consensus = build_consensus(observations, candidate_digest=candidate)
        assert not isinstance(consensus, ConsensusRefusal)
        corroborations[candidate] = build_corroboration_report(
            consensus, command=("workers/correct_fix.sh",), capture_mode=CaptureMode.PATCH,
            network=False, timeout_ms=None,
        )  # fmt: skip
    admission = derive_run_admission(run, report, corroborations)
    assert admission is not None
    out = demo.results / tmp_path.name / f"run-{reruns}"
    (out / "patches").mkdir(parents=True)
    shutil.copy(demo.run_dir / "patches" / f"{candidate}.patch", out / "patches")
    (out / "run.json").write_bytes(canonical_json(run.to_dict()))
    (out / "evidence.json").write_bytes(canonical_json(report.to_dict()))
    (out / "admission.json").write_bytes(canonical_json(admission.to_dict()))
    (out / "corroboration.json").write_bytes(
        canonical_json(
            {"kind": "kernel-corroboration-set", "schema_version": "1", "run_id": run.run_id,
             "reports": {d: r.to_dict() for d, r in corroborations.items()}}
        )
    )  # fmt: skip
    return out


@pytest.mark.parametrize("reruns", [0, 3, 9])
def test_no_verifier_pass_is_never_promoted(
    reruns: int, demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the held-out verifier's pass a candidate is never promoted, signed accept
    or not, whatever the number of unanimous reruns. Alone it is corroborated_only and
    stageable; with unanimous reruns of its own (correlated) worker, admission refuses
    the group (unanimous_correlated_drafts), so it is not even stageable."""
    run_dir = _without_verifier_pass(demo, tmp_path, reruns)
    ledger = tmp_path / "l.sqlite"
    common = ["--run-dir", str(run_dir), "--repo", str(repo), "--ledger", str(ledger)]
    group = load_run_folder(run_dir).admission.groups[0]
    capsys.readouterr()
    staged = main(["stage", *common, "--attempt", "attempt-1"])
    out = capsys.readouterr().out
    if reruns == 0:
        assert group.evidence_class is EvidenceClass.CORROBORATED_ONLY
        assert staged == 0
        ref = "refs/kernel/staged/demo/median-fix/attempt-1"
        body = git(repo, "log", "-1", "--format=%B", ref)
        assert "Kernel-Evidence-Class: corroborated_only" in body
    else:
        assert group.evidence_class is None
        assert staged == 1
        assert "refused (not_stageable)" in out
    report = run_dir / "evidence.json"
    decision = demo.results / tmp_path.name / f"accept-{reruns}.json"
    assert main([
        "decision", "record", "--evidence-report", str(report), "--output", str(decision),
        "--decision-id", "d", "--decision", "accept", "--selected-attempt-id", "attempt-1",
        "--rationale", "looks right", "--decider-id", DECIDER, "--signing-key", str(demo.alice),
        "--decided-at", "2026-11-30T12:00:00Z", "--results-root", str(demo.results),
    ]) == 0  # fmt: skip
    before = git(repo, "rev-parse", "main")
    capsys.readouterr()
    code = main(
        [
            "promote", *common, "--decision", str(decision), "--allowed-signers",
            str(demo.allowed), "--onto", "main",
        ]
    )  # fmt: skip
    assert code == 1
    assert "refused (not_verified)" in capsys.readouterr().out
    assert git(repo, "rev-parse", "main") == before
    assert kinds(ledger)[-1] == "refusal"


def test_decision_record_appends_to_the_ledger(demo: Demo, tmp_path: Path) -> None:
    """`decision record --ledger` appends the signed decision as evidence."""
    ledger = tmp_path / "l.sqlite"
    out = demo.results / tmp_path.name / "d.json"
    assert main([
        "decision", "record", "--evidence-report", str(demo.run_dir / "evidence.json"),
        "--output", str(out), "--decision-id", "d", "--decision", "reject",
        "--rationale", "no", "--decider-id", DECIDER, "--signing-key", str(demo.alice),
        "--results-root", str(demo.results), "--ledger", str(ledger),
    ]) == 0  # fmt: skip
    assert kinds(ledger) == ["decision"]
    with opened(ledger, create=False) as store:
        (entry,) = store.entries()
    payload = json.loads(str(entry.payload))
    assert payload["signed"] is True
    assert payload["decision"]["record_id"] == json.loads(out.read_text())["record_id"]


# --- bad input to the loop's verbs -------------------------------------------------


def copy_run(demo: Demo, tmp_path: Path) -> Path:
    """A private copy of the demo's run folder inside the results root."""
    target = demo.results / tmp_path.name / "run"
    shutil.copytree(demo.run_dir, target)
    return target


def stage(run_dir: Path, repo: Path, ledger: Path, *extra: str) -> int:
    """`kernel stage` of attempt-1."""
    return main(["stage", "--run-dir", str(run_dir), "--repo", str(repo), "--ledger",
                 str(ledger), "--attempt", "attempt-1", *extra])  # fmt: skip


@pytest.mark.parametrize(
    "damage",
    ["no folder", "corroboration not a set", "corroboration report", "admission field",
     "patch edited", "patch missing"],
)  # fmt: skip
def test_unusable_run_folder(
    damage: str, demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged run folder: exit 2, one line, no ref, nothing appended."""
    run_dir = copy_run(demo, tmp_path)
    if damage == "no folder":
        shutil.rmtree(run_dir)
    elif damage == "corroboration not a set":
        (run_dir / "corroboration.json").write_text("[]")
    elif damage == "corroboration report":
        data = json.loads((run_dir / "corroboration.json").read_text())
        first = next(iter(data["reports"]))
        data["reports"][first]["consensus"] = "yes"
        (run_dir / "corroboration.json").write_text(json.dumps(data))
    elif damage == "admission field":
        data = json.loads((run_dir / "admission.json").read_text())
        del data["groups"]
        (run_dir / "admission.json").write_text(json.dumps(data))
    else:
        for patch in (run_dir / "patches").glob("*.patch"):
            if damage == "patch missing":
                patch.unlink()
            else:
                patch.write_bytes(patch.read_bytes() + b"\n# sneaked in\n")
    ledger = tmp_path / "l.sqlite"
    capsys.readouterr()
    assert stage(run_dir, repo, ledger) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert git(repo, "for-each-ref", "refs/kernel") == ""
    [entry] = refusals(ledger)
    assert entry["reason_codes"] == ["unusable_input"]
    assert entry["inputs"]["run_dir"] == str(run_dir)


def test_stage_base_must_name_a_commit(demo: Demo, repo: Path, tmp_path: Path) -> None:
    """--base that names nothing is unusable input."""
    assert stage(demo.run_dir, repo, tmp_path / "l.sqlite", "--base", "nope") == 2


def test_stage_base_not_the_baseline_is_refused(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A base whose tree is not the run's baseline: refused, and the refusal recorded."""
    (repo / "extra.txt").write_text("x\n")
    git(repo, "add", "extra.txt")
    git(repo, "commit", "-q", "-m", "moved")
    ledger = tmp_path / "l.sqlite"
    capsys.readouterr()
    assert stage(demo.run_dir, repo, ledger) == 1
    assert "refused (branch_not_baseline)" in capsys.readouterr().out
    assert kinds(ledger) == ["refusal"]


def test_decider_id_that_cannot_name_an_author(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A decider id with angle brackets cannot become a git author: unusable input."""
    out = demo.results / tmp_path.name / "d.json"
    assert main([
        "decision", "record", "--evidence-report", str(demo.run_dir / "evidence.json"),
        "--output", str(out), "--decision-id", "d", "--decision", "accept",
        "--selected-attempt-id", "attempt-1", "--rationale", "r",
        "--decider-id", "Eve <eve@example.com>", "--results-root", str(demo.results),
    ]) == 0  # fmt: skip
    assert promote(demo, repo, out, tmp_path / "l.sqlite") == 2


def test_branch_moving_during_promotion_is_a_refusal(
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another writer moves main between the gate's answer and the update: the
    compare-and-swap loses, the refusal is branch_moved, the other writer's commit stays."""
    decision = decide(demo, tmp_path, key=demo.alice)
    original = Repo.update_ref
    moved: list[str] = []

    def racing(self: Repo, ref: str, new: str, old: str | None, reason: str) -> None:
        (repo / "race.txt").write_text("the other writer\n")
        git(repo, "add", "race.txt")
        git(repo, "commit", "-q", "-m", "the other writer")
        moved.append(git(repo, "rev-parse", "main"))
        original(self, ref, new, old, reason)

    monkeypatch.setattr(Repo, "update_ref", racing)
    ledger = tmp_path / "l.sqlite"
    capsys.readouterr()
    assert promote(demo, repo, decision, ledger) == 1
    assert "refused (branch_moved)" in capsys.readouterr().out
    assert git(repo, "rev-parse", "main") == moved[0]
    assert kinds(ledger) == ["admission", "decision", "promotion", "promotion", "refusal"]
    assert pending_of(ledger) == []


def test_unstage_race_and_bad_ref_names(demo: Demo, repo: Path, tmp_path: Path) -> None:
    """Deleting a ref that moved is refused; an invalid ref name is refused."""
    handle = Repo(repo)
    tip = git(repo, "rev-parse", "main")
    who = CommitIdentity(name="t", email="t@example.com", date="@0 +0000")
    stale = handle.commit_patch(tip, b"", "not the tip", who)
    with pytest.raises(GitRefusal):
        handle.delete_ref("refs/heads/main", stale)
    with pytest.raises(EffectError, match="refusing to delete"):
        handle.delete_ref("refs/heads/main", "0" * 40)
    assert git(repo, "rev-parse", "main") == tip
    with pytest.raises(EffectError, match="not a valid git ref"):
        handle.check_ref_name("refs/kernel/staged/bad..name")
    with pytest.raises(EffectError, match="git rev-parse failed"):
        handle.tree_of("no-such-commit")


def test_bare_repository(tmp_path: Path, repo: Path) -> None:
    """A bare clone has no work tree: never dirty, no checked-out branch."""
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    handle = Repo(bare)
    assert handle.bare
    assert handle.checked_out_branch() is None
    assert not handle.is_dirty()


def test_repository_queries_answer_or_say_what_failed(tmp_path: Path) -> None:
    """A fresh repository (no commit, no index) has the empty tree in its index; the
    checked-out branch is named, None once detached and in a bare clone (which has no
    work tree either); a diff of, or a blob at, an unknown object is an effect error
    naming it."""
    path = tmp_path / "fresh"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    handle = Repo(path)
    empty = git(path, "hash-object", "-t", "tree", "/dev/null")
    assert handle.index_tree() == empty
    git(path, "commit", "-q", "--allow-empty", "-m", "one")
    assert handle.checked_out_branch() == "refs/heads/main"
    assert handle.work_tree() == path
    tip = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "-q", "--detach")
    assert handle.checked_out_branch() is None
    missing = "1" * 40
    with pytest.raises(EffectError, match="git diff-tree failed"):
        handle.changes(tip, missing)
    with pytest.raises(EffectError, match=f"no blob {missing}"):
        handle.blob(missing)
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(path), str(bare))
    assert Repo(bare).work_tree() is None


def test_a_repository_git_cannot_read_or_one_trusted_as_it_is(tmp_path: Path) -> None:
    """A configuration git cannot parse makes the repository unusable, naming git's
    complaint; a configuration that can run commands is used as it is when trusted."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    config = path / ".git" / "config"
    original = config.read_text()
    config.write_text(original + "[broken\n")
    with pytest.raises(EffectError, match=r"not a git repository \(.*bad config"):
        Repo(path)
    config.write_text(original + '[filter "probe"]\n\tclean = touch probe\n')
    with pytest.raises(UntrustedConfig):
        Repo(path)
    assert not Repo(path, trust_config=True).bare


def test_a_linked_work_tree_locks_its_refs_in_the_common_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common git folder, where refs and their locks live, is asked of git once,
    when the `Repo` is made: the ref updates and lock sweeps of a linked work tree
    (under a folder whose name holds a space and a newline) act on the main
    repository's refs and locks, and run no `rev-parse --git-common-dir` of their own."""
    folder = tmp_path / "a b\nc"
    first = folder / "main"
    first.mkdir(parents=True)
    git(first, "init", "-q", "-b", "main")
    git(first, "commit", "-q", "--allow-empty", "-m", "one")
    linked = folder / "linked"
    git(first, "worktree", "add", "-q", "-b", "side", str(linked))
    handle = Repo(linked)
    calls: list[list[str]] = []
    real = git_effects._run

    def counted(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        calls.append(list(args))
        return real(args, **kwargs)

    monkeypatch.setattr(git_effects, "_run", counted)
    tip = git(first, "rev-parse", "main")
    lock = first / ".git" / "refs" / "heads" / "other.lock"
    lock.write_text(tip[:10])  # what a killed update of it leaves
    assert handle.sweep_ref_lock("refs/heads/other", tip)
    assert not lock.exists()
    handle.update_ref("refs/heads/other", tip, None, "test")
    assert git(first, "rev-parse", "other") == tip
    lock.write_text("")
    assert handle.sweep_ref_lock("refs/heads/other", tip)
    handle.delete_ref("refs/heads/other", tip)
    assert git(first, "branch", "--list", "other") == ""
    assert calls
    assert [c for c in calls if "--git-common-dir" in c] == []


class _NoWhich:
    """A `shutil` stand-in that finds no program."""

    @staticmethod
    def which(_name: str) -> None:
        """Nothing is on PATH."""
        return


def test_without_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No git on PATH: no baseline tree (None), and repository verbs fail cleanly."""
    monkeypatch.setattr(git_effects, "shutil", _NoWhich())
    assert content_tree_id(tmp_path) is None
    with pytest.raises(EffectError, match="git not found"):
        Repo(tmp_path)


def test_content_tree_of_unreadable_folder(tmp_path: Path) -> None:
    """A folder git cannot read is an effect error, not a tree id."""
    with pytest.raises(EffectError):
        content_tree_id(tmp_path / "missing")


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["not json"], "not valid JSON"),
        (["[1]"], "expected a JSON object"),
        (['{"ledger_head": {"seq": 0, "entry_id": "x"}}', "{}"], "after the head line"),
        (["{}"], "no head line"),
    ],
)
def test_unreadable_export(lines: list[str], message: str, tmp_path: Path) -> None:
    """A JSON Lines export that is not one: ConfigError naming the line."""
    path = tmp_path / "e.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=message):
        read_jsonl(path)
    with pytest.raises(EffectError, match="not found"):
        read_jsonl(tmp_path / "missing.jsonl")


def test_attest_refuses_inconsistent_evidence(
    demo: Demo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """attest re-derives: a report that is not the run's, or a decision on another
    report, is refused; a bad decision file is unusable."""
    run_dir = copy_run(demo, tmp_path)
    other = copy_run(demo, tmp_path / "x")
    data: dict[str, Any] = json.loads((run_dir / "evidence.json").read_text())
    data["run_id"] = "another-run"
    (other / "evidence.json").write_text(json.dumps(data))
    argv = ["attest", "--run-dir", str(other), "--attempt", "attempt-1",
            "--results-root", str(demo.results)]  # fmt: skip
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr()
    assert code in (1, 2), out
    bad = demo.results / tmp_path.name / "bad-decision.json"
    bad.write_text("{}")
    assert main(["attest", "--run-dir", str(run_dir), "--attempt", "attempt-1",
                 "--decision", str(bad), "--results-root", str(demo.results)]) == 2  # fmt: skip


@pytest.mark.parametrize("signers", ["principal missing", "file missing"])
def test_missing_signer(
    signers: str, demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An allowed_signers file that does not list the decider refuses (1); no file at
    all is unusable input (2), recorded too. No ref moves either way."""
    decision = decide(demo, tmp_path, key=demo.alice)
    allowed = tmp_path / "allowed_signers"
    if signers == "principal missing":
        public = " ".join((demo.alice.parent / "bob.pub").read_text().split()[:2])
        allowed.write_text(f"someone-else@example.com {public}\n")
    before = git(repo, "rev-parse", "main")
    ledger = tmp_path / "l.sqlite"
    capsys.readouterr()
    code = main(
        [
            "promote", "--run-dir", str(demo.run_dir), "--decision", str(decision),
            "--allowed-signers", str(allowed), "--repo", str(repo), "--onto", "main",
            "--ledger", str(ledger),
        ]
    )  # fmt: skip
    if signers == "principal missing":
        assert code == 1
        assert "refused (signer_not_allowed)" in capsys.readouterr().out
        assert kinds(ledger) == ["refusal"]
    else:
        assert code == 2
        assert capsys.readouterr().err.count("\n") == 1
        [entry] = refusals(ledger)
        assert entry["reason_codes"] == ["unusable_input"]
    assert git(repo, "rev-parse", "main") == before


# -- All or nothing (issue 22 items 1-2): killed after every step and recovered, refused
# before anything moves, never running anything of the repository's or the candidate's.

STEPS = ["permit", "intent", "ref", "work-tree"]


def pending_of(ledger: Path) -> list[str]:
    with opened(ledger, create=False) as store:
        return [p.commit for p in pending(store)]


def verify_repo(repo: Path, ledger: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["ledger", "verify", "--ledger", str(ledger), "--repo", str(repo)])
    return code, capsys.readouterr().out


def agree(repo: Path) -> None:
    """Branch, index and work tree say the same thing: nothing staged or changed."""
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    assert git(repo, "write-tree") == git(repo, "rev-parse", "main^{tree}")


@pytest.mark.parametrize("step", STEPS)
def test_a_promotion_killed_after_any_step_is_recovered(
    step: str,
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    decision = decide(demo, tmp_path, key=demo.alice)
    ledger = tmp_path / "l.sqlite"
    old = git(repo, "rev-parse", "main")
    argv = [
        sys.executable, "-m", "kernel", "promote", "--run-dir", str(demo.run_dir),
        "--decision", str(decision), "--allowed-signers", str(demo.allowed),
        "--repo", str(repo), "--onto", "main", "--ledger", str(ledger),
    ]  # fmt: skip
    killed = subprocess.run(
        argv, env={**os.environ, CRASH_AT_VARIABLE: step}, capture_output=True, check=False
    )
    assert killed.returncode == 137, killed.stderr
    moved = git(repo, "rev-parse", "main") != old
    assert moved == (step in ("ref", "work-tree"))
    code, out = verify_repo(repo, ledger, capsys)
    if step == "permit":
        assert code == 0
        assert pending_of(ledger) == []
    else:
        assert code == 1
        assert "was not finished" in out
        assert "kernel promote --recover" in out
    capsys.readouterr()
    assert main(["promote", "--recover", "--repo", str(repo), "--ledger", str(ledger)]) == 0
    assert pending_of(ledger) == []
    agree(repo)
    if step == "permit":
        assert git(repo, "rev-parse", "main") == old
        assert promote(demo, repo, decision, ledger) == 0
    assert git(repo, "rev-parse", "main^") == old
    assert kinds(ledger)[-1] == "promotion"
    assert verify_repo(repo, ledger, capsys)[0] == 0


KILL_POINTS = 10


def test_a_promotion_killed_at_any_moment_is_recovered(
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SIGKILL of the whole process group (promote and the git it runs) at moments
    spread over a promotion's run, inside steps as well as between them: after
    `promote --recover` the branch, index, work tree and ledger agree, and nothing of
    a killed step is left in the git folder."""
    decision = decide(demo, tmp_path, key=demo.alice)
    old = git(repo, "rev-parse", "main")

    def start(copy: Path, ledger: Path) -> subprocess.Popen[bytes]:
        argv = [
            sys.executable, "-m", "kernel", "promote", "--run-dir", str(demo.run_dir),
            "--decision", str(decision), "--allowed-signers", str(demo.allowed),
            "--repo", str(copy), "--onto", "main", "--ledger", str(ledger),
        ]  # fmt: skip
        return subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL)

    # How long one promotion takes on this machine now (the kills spread over it).
    probe = tmp_path / "probe"
    shutil.copytree(repo, probe, symlinks=True)
    started = time.monotonic()
    assert start(probe, tmp_path / "probe.sqlite").wait() == 0
    duration = time.monotonic() - started
    outcomes = set()
    for k in range(KILL_POINTS + 1):
        copy, ledger = tmp_path / f"r{k}", tmp_path / f"l{k}.sqlite"
        shutil.copytree(repo, copy, symlinks=True)
        child = start(copy, ledger)
        try:
            # The last one is not killed: the spread has a finished promotion too.
            child.wait(timeout=None if k == KILL_POINTS else duration * k / KILL_POINTS)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        if ledger.exists():
            capsys.readouterr()
            recovered = main(["promote", "--recover", "--repo", str(copy), "--ledger", str(ledger)])
            assert recovered == 0, capsys.readouterr().out
            assert pending_of(ledger) == []
            assert verify_repo(copy, ledger, capsys)[0] == 0
        agree(copy)
        assert not [p for p in (copy / ".git").iterdir() if p.name.endswith(".lock")]
        assert not list((copy / ".git").glob("kernel-*"))
        tip = git(copy, "rev-parse", "main")
        assert tip == old or git(copy, "rev-parse", "main^") == old
        outcomes.add(tip != old)
    # The spread reached both sides: killed before the branch moved and after.
    assert outcomes == {False, True}


def test_recovery_with_nothing_pending_and_a_branch_moved_elsewhere(
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ledger = tmp_path / "l.sqlite"
    assert main(["promote", "--recover", "--repo", str(repo), "--ledger", str(ledger)]) == 0
    assert "no promotion left half done" in capsys.readouterr().out
    decision = decide(demo, tmp_path, key=demo.alice)
    argv = [
        sys.executable, "-m", "kernel", "promote", "--run-dir", str(demo.run_dir),
        "--decision", str(decision), "--allowed-signers", str(demo.allowed),
        "--repo", str(repo), "--onto", "main", "--ledger", str(ledger),
    ]  # fmt: skip
    env = {**os.environ, CRASH_AT_VARIABLE: "intent"}
    assert subprocess.run(argv, env=env, capture_output=True, check=False).returncode == 137
    (repo / "other.txt").write_text("someone else\n")
    git(repo, "add", "other.txt")
    git(repo, "commit", "-q", "-m", "someone else")
    other = git(repo, "rev-parse", "main")
    assert main(["promote", "--recover", "--repo", str(repo), "--ledger", str(ledger)]) == 0
    assert "abandoned" in capsys.readouterr().out
    assert git(repo, "rev-parse", "main") == other
    assert pending_of(ledger) == []
    assert verify_repo(repo, ledger, capsys)[0] == 0


def test_a_dirty_work_tree_is_refused_before_anything_moves(
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Refused and recorded (work_tree_blocked); the branch stays where it was."""
    decision = decide(demo, tmp_path, key=demo.alice)
    ledger = tmp_path / "l.sqlite"
    old = git(repo, "rev-parse", "main")
    (repo / "stats.py").write_text("# edited by hand\n")
    capsys.readouterr()
    assert promote(demo, repo, decision, ledger) == 1
    assert "refused (work_tree_blocked)" in capsys.readouterr().out
    assert git(repo, "rev-parse", "main") == old
    assert kinds(ledger) == ["refusal"]


def test_a_branch_checked_out_in_a_linked_work_tree_is_not_moved_under_it(
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    decision = decide(demo, tmp_path, key=demo.alice)
    ledger = tmp_path / "l.sqlite"
    git(repo, "checkout", "-q", "--detach")
    git(repo, "worktree", "add", "-q", str(tmp_path / "linked"), "main")
    old = git(repo, "rev-parse", "main")
    capsys.readouterr()
    assert promote(demo, repo, decision, ledger) == 1
    out = capsys.readouterr().out
    assert "refused (work_tree_blocked)" in out
    assert git(repo, "rev-parse", "main") == old
    assert kinds(ledger) == ["refusal"]


def test_an_untracked_file_in_the_way_blocks_the_work_tree(tmp_path: Path) -> None:
    """The check promote runs before the ref moves: a file the update would add exists
    untracked (ignored or not); nothing in the work tree or index changes."""
    path = tmp_path / "r"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("a\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    old = git(path, "rev-parse", "HEAD")
    (path / "b.txt").write_text("b\n")
    git(path, "add", "b.txt")
    git(path, "commit", "-q", "-m", "adds b")
    new = git(path, "rev-parse", "HEAD")
    git(path, "reset", "-q", "--hard", old)
    handle = Repo(path)
    assert handle.work_tree_blocker(old, new) is None
    (path / "b.txt").write_text("mine\n")
    why = handle.work_tree_blocker(old, new)
    assert why is not None
    assert "b.txt" in why
    assert (path / "b.txt").read_text() == "mine\n"
    assert git(path, "status", "--porcelain") == "?? b.txt"


def _filter(repo: Path, tmp_path: Path) -> tuple[str, Path]:
    marker = tmp_path / "filter-ran"
    command = f"sh -c 'touch {marker}; cat'"
    return command, marker


@pytest.mark.parametrize("where", ["config", "include", "worktree"])
def test_a_repository_configuration_that_runs_commands_is_refused(
    where: str,
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A filter driver in .git/config (named by .git/info/attributes), the same through
    include.path, core.worktree: exit 2 naming the key; the filter never runs."""
    decision = decide(demo, tmp_path, key=demo.alice)
    command, marker = _filter(repo, tmp_path)
    (repo / ".git" / "info" / "attributes").write_text("* filter=probe\n")
    if where == "config":
        git(repo, "config", "filter.probe.clean", command)
        git(repo, "config", "filter.probe.smudge", command)
        key = "filter.probe.clean"
    elif where == "include":
        extra = tmp_path / "extra.config"
        extra.write_text(f'[filter "probe"]\n\tclean = {command}\n\tsmudge = {command}\n')
        git(repo, "config", "include.path", str(extra))
        key = "include.path"
    else:
        git(repo, "config", "core.worktree", str(tmp_path))
        key = "core.worktree"
    ledger = tmp_path / "l.sqlite"
    old = git(repo, "rev-parse", "main")
    capsys.readouterr()
    assert promote(demo, repo, decision, ledger) == 2
    err = capsys.readouterr().err
    assert key in err
    assert err.count("\n") == 1
    assert not marker.exists()
    assert git(repo, "rev-parse", "main") == old
    with pytest.raises(UntrustedConfig):
        Repo(repo)
    assert not marker.exists()


def test_exec_keys_names_what_can_run_a_command() -> None:
    config = [
        ("local", "core.bare"), ("local", "filter.x.smudge"),
        ("local", "includeIf.onbranch:m.path"),
        ("local", "diff.x.textconv"), ("local", "merge.y.driver"), ("command", "core.pager"),
        ("worktree", "core.sshCommand"), ("local", "user.name"), ("local", "alias.st"),
    ]  # fmt: skip
    assert exec_keys(config) == [
        "filter.x.smudge", "includeIf.onbranch:m.path", "diff.x.textconv", "merge.y.driver",
        "core.sshCommand", "alias.st",
    ]  # fmt: skip


def test_candidate_changes_a_promotion_never_carries(tmp_path: Path) -> None:
    """Second layer behind verification's hygiene: .gitattributes, .gitmodules, a
    submodule and symlinks leaving the tree are named; a symlink inside is not."""
    path = tmp_path / "r"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("a\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    old = git(path, "rev-parse", "HEAD")
    (path / "sub").mkdir()
    (path / "sub" / ".gitattributes").write_text("* filter=probe\n")
    (path / ".gitmodules").write_text("")
    os.symlink("/etc/passwd", path / "abs")
    os.symlink("../../..", path / "sub" / "up")
    os.symlink("../a.txt", path / "sub" / "inside")
    os.symlink(".git/config", path / "gitdir")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "candidate")
    problems = unsafe_changes(Repo(path), old, git(path, "rev-parse", "HEAD"))
    text = "\n".join(problems)
    assert len(problems) == 5, text
    for name in ("sub/.gitattributes", ".gitmodules", "abs", "sub/up", "gitdir"):
        assert name in text
    assert "sub/inside" not in text


def test_promotion_policy_can_require_oracle_trust(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--require-trust oracle`` promotes the demo's fix (its oracle check passed);
    a trust level no passed check has is refused with ``trust_not_met``."""
    decision = decide(demo, tmp_path, key=demo.alice)
    capsys.readouterr()
    assert (
        promote(demo, repo, decision, tmp_path / "a.sqlite", "--require-trust", "exit_status") == 1
    )
    assert "trust_not_met" in capsys.readouterr().out
    assert promote(demo, repo, decision, tmp_path / "b.sqlite", "--require-trust", "oracle") == 0


def test_a_whole_tail_rewrite_is_caught_by_verify_repo_without_a_flag(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every entry from the permit on rewritten with recomputed ids and head: intact
    on its own, broken against the tree head the promotion commit anchors."""
    decision = decide(demo, tmp_path, key=demo.alice)
    ledger = tmp_path / "l.sqlite"
    assert promote(demo, repo, decision, ledger) == 0
    trailers = git(repo, "log", "-1", "--format=%B", "main")
    assert "Kernel-Ledger-Head: 2 " in trailers
    capsys.readouterr()
    assert main(["ledger", "verify", "--ledger", str(ledger), "--repo", str(repo)]) == 0
    assert "1 anchored tree heads" in capsys.readouterr().out
    with opened(ledger, create=False) as store:
        entries = list(store.entries())
    forged = tmp_path / "forged.sqlite"
    with opened(forged) as store:
        store.append(EntryKind(str(entries[0].kind)), json.loads(str(entries[0].payload)))
        for entry in entries[1:]:
            payload = json.loads(str(entry.payload))
            payload["forged"] = True
            store.append(EntryKind(str(entry.kind)), payload)
    assert main(["ledger", "verify", "--ledger", str(forged)]) == 0
    capsys.readouterr()
    assert main(["ledger", "verify", "--ledger", str(forged), "--repo", str(repo)]) == 1
    out = capsys.readouterr().out
    assert "anchor_mismatch" in out
    assert out.count("\n") == 1


def test_a_signed_tree_head_in_the_trailer(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--ledger-key signs the head the trailer carries; check-proof verifies it."""
    decision = decide(demo, tmp_path, key=demo.alice)
    ledger = tmp_path / "l.sqlite"
    assert promote(demo, repo, decision, ledger, "--ledger-key", str(demo.alice)) == 0
    fields = dict(
        line.split(": ", 1)
        for line in git(repo, "log", "-1", "--format=%B", "main").splitlines()
        if line.startswith("Kernel-Ledger-Head")
    )
    size, root = fields["Kernel-Ledger-Head"].split()
    head = tmp_path / "head.json"
    head.write_text(
        json.dumps(
            {
                "signature": fields["Kernel-Ledger-Head-Signature"],
                "tree_head": {"root_hash": root, "tree_size": int(size)},
            }
        )
    )
    capsys.readouterr()
    assert main(["ledger", "prove", "--ledger", str(ledger), "--consistency", size]) == 0
    proof = tmp_path / "proof.json"
    proof.write_text(capsys.readouterr().out)
    capsys.readouterr()
    assert main(["ledger", "head", "--ledger", str(ledger)]) == 0
    now = tmp_path / "now.json"
    now.write_text(capsys.readouterr().out)
    argv = ["ledger", "check-proof", "--proof", str(proof), "--head", str(now)]
    assert main([*argv, "--old-head", str(head)]) == 0
    signed = ["--allowed-signers", str(demo.allowed), "--signer", DECIDER]
    swapped = ["ledger", "check-proof", "--proof", str(proof), "--head", str(head)]
    assert main([*swapped, "--old-head", str(head), *signed]) == 1  # sizes differ
    assert "size_mismatch" in capsys.readouterr().out
    inclusion = tmp_path / "inclusion.json"
    with opened(ledger, create=False) as store:
        permit = next(e for e in store.entries() if e.seq == int(size)).entry_id
    capsys.readouterr()
    assert main(["ledger", "prove", "--ledger", str(ledger), "--inclusion", str(permit)]) == 0
    inclusion.write_text(capsys.readouterr().out)
    assert main(["ledger", "check-proof", "--proof", str(inclusion), "--head", str(now)]) == 0
    now_doc = json.loads(now.read_text())
    assert now_doc["signature"] is None
    old_signed = ["ledger", "check-proof", "--proof", str(inclusion), "--head", str(head)]
    assert main([*old_signed, *signed]) == 1  # the inclusion proof is for the newer tree
    trailer_head = TreeHead(tree_size=int(size), root_hash=root)
    signature = armored(fields["Kernel-Ledger-Head-Signature"])
    assert check_tree_head_signature(trailer_head, signature, demo.allowed, DECIDER) is (
        SignatureStatus.VALID
    )
    other = TreeHead(tree_size=int(size) + 1, root_hash=root)
    assert check_tree_head_signature(other, signature, demo.allowed, DECIDER) is (
        SignatureStatus.INVALID
    )


def test_no_argument_makes_a_traceback_or_a_hang(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 22 item 5: a 5,000-character path, a full device, a FIFO, a folder or random
    bytes given to any path option of promote, stage, unstage and attest: one line and
    exit 2 (a decision of random bytes is a forged decision, random allowed signers allow
    no one: refused and recorded)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "folder").mkdir()
    noise = tmp_path / "noise"
    noise.write_bytes(bytes(range(256)) * 8)
    values = [str(tmp_path / ("x" * 5000)), "/dev/full", str(fifo), str(tmp_path / "folder"),
              str(noise)]  # fmt: skip
    ledger = str(tmp_path / "l.sqlite")
    run = ["--run-dir", str(demo.run_dir)]
    decision = decide(demo, tmp_path, key=demo.alice)
    verbs = {
        "promote --run-dir": ["promote", "--decision", str(decision), "--allowed-signers",
                              str(demo.allowed), "--repo", str(repo), "--onto", "main"],
        "promote --repo": ["promote", *run, "--decision", str(decision), "--allowed-signers",
                           str(demo.allowed), "--onto", "main"],
        "promote --allowed-signers": ["promote", *run, "--decision", str(decision), "--repo",
                                      str(repo), "--onto", "main"],
        "promote --ledger-key": ["promote", *run, "--decision", str(decision),
                                 "--allowed-signers", str(demo.allowed), "--repo", str(repo),
                                 "--onto", "main", "--ledger", ledger],
        "stage --run-dir": ["stage", "--attempt", "attempt-1", "--repo", str(repo)],
        "stage --repo": ["stage", *run, "--attempt", "attempt-1"],
        "stage --ledger": ["stage", *run, "--attempt", "attempt-1", "--repo", str(repo)],
        "unstage --run-dir": ["unstage", "--attempt", "attempt-1", "--repo", str(repo)],
        "attest --run-dir": ["attest", "--attempt", "attempt-1"],
        "attest --decision": ["attest", *run, "--attempt", "attempt-1"],
        "promote --recover --repo": ["promote", "--recover", "--ledger", ledger],
    }  # fmt: skip
    for name, argv in verbs.items():
        option = name.split()[-1]
        extra = ["--ledger", ledger] if "--ledger" not in argv and option != "--ledger" else []
        if argv[0] == "attest":
            extra = []
        for value in values:
            capsys.readouterr()
            code = main([*argv, *extra, option, value])
            seen = capsys.readouterr()
            where = (name, value[:60], seen.err, seen.out)
            # Random bytes as allowed signers allow no one: a refusal, recorded.
            refused = option == "--allowed-signers" and value == str(noise)
            assert code == (1 if refused else 2), where
            assert (seen.out if refused else seen.err).count("\n") == 1, where
    capsys.readouterr()
    assert main(["promote", *run, "--decision", str(noise), "--allowed-signers",
                 str(demo.allowed), "--repo", str(repo), "--onto", "main",
                 "--ledger", ledger]) == 1  # fmt: skip
    assert "refused (no_candidate, no_accept_decision, decision_unsigned)" in (
        capsys.readouterr().out
    )
    # Every refusal is recorded: the two the gate made, and each unusable input of a
    # verb given this ledger (ours is not among them: a ledger that cannot be opened
    # records nothing).
    entries = refusals(Path(ledger))
    assert len(entries) == len(kinds(Path(ledger)))
    assert sum("refusal" in e for e in entries) == 2
    assert {tuple(e["reason_codes"]) for e in entries if "refusal" not in e} == {
        ("unusable_input",)
    }


def test_a_promotion_from_python_alone(demo: Demo, repo: Path, tmp_path: Path) -> None:
    """Issue 20: an orchestrator signs, promotes, recovers and checks the ledger with
    library calls that take and return records (no CLI module)."""
    from kernel.decide.decision import record_decision
    from kernel.effects.ledger_store import opened as open_ledger
    from kernel.effects.promotion import Promoted, check_repository, promote, recover
    from kernel.effects.run_folder import load_run_folder as load
    from kernel.effects.signing import check_decision_signature, sign_decision

    folder = load(demo.run_dir)
    decision = record_decision(
        folder.report, decision_id="py-1", decision="accept", rationale="checked",
        decider_id=DECIDER, decided_at="2026-12-01T00:00:00Z", selected_attempt_id="attempt-1",
    )  # fmt: skip
    assert isinstance(decision, HumanDecisionRecord)
    signature = check_decision_signature(
        decision, sign_decision(decision, demo.alice), demo.allowed
    )
    with open_ledger(tmp_path / "l.sqlite") as store:
        outcome = promote(
            folder, Repo(repo), store, branch="refs/heads/main", attempt_id="attempt-1",
            decision=decision, signature=signature,
        )  # fmt: skip
        assert isinstance(outcome, Promoted)
        assert git(repo, "rev-parse", "main") == outcome.commit
        assert recover(Repo(repo), store) == []
        checked = check_repository(Repo(repo), store)
        assert isinstance(checked.outcome, LedgerVerified)
        assert (checked.anchors, checked.incomplete) == (1, ())
    probe = (
        "import sys, kernel.effects.promotion, kernel.effects.attestation;"
        "print(sorted(m for m in sys.modules if m.startswith('kernel.effects.commands')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"


def refusals(ledger: Path) -> list[dict[str, Any]]:
    """The payloads of the ledger's refusal entries, in order."""
    with opened(ledger, create=False) as store:
        return [json.loads(str(e.payload)) for e in store.entries() if e.kind == "refusal"]


UNUSABLE = {
    # case -> (verb, arguments beyond --repo/--ledger, reason, what the explanation names)
    "stage untrusted config": ("stage", ["--attempt", "attempt-1"], "untrusted_repo_config",
                               "filter.probe.clean"),
    "unstage untrusted config": ("unstage", ["--attempt", "attempt-1"],
                                 "untrusted_repo_config", "filter.probe.clean"),
    "promote untrusted config": ("promote", [], "untrusted_repo_config", "filter.probe.clean"),
    "recover untrusted config": ("promote", ["--recover"], "untrusted_repo_config",
                                 "filter.probe.clean"),
    "stage no run folder": ("stage", ["--attempt", "attempt-1", "--run-dir", "missing"],
                            "unusable_input", "missing"),
    "promote no run folder": ("promote", ["--run-dir", "missing"], "unusable_input", "missing"),
    "promote missing flags": ("promote", ["--onto", "main"], "unusable_input", "--run-dir"),
    "promote no branch": ("promote", ["--onto", "nope"], "unusable_input", "nope"),
    "promote bad ref name": ("promote", ["--onto", "bad..name"], "unusable_input", "bad..name"),
    "promote unusable key": ("promote", ["--ledger-key", "missing-key"], "unusable_input",
                             "missing-key"),
    "stage no base": ("stage", ["--attempt", "attempt-1", "--base", "nope"], "unusable_input",
                      "nope"),
    "unstage not staged": ("unstage", ["--attempt", "attempt-1"], "unusable_input", "not staged"),
    "stage missing flags": ("stage", ["--run-dir", "missing"], "unusable_input", "--attempt"),
    "stage recover untrusted config": ("stage", ["--recover"], "untrusted_repo_config",
                                       "filter.probe.clean"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(UNUSABLE))
def test_every_unusable_input_of_stage_and_promote_is_in_the_ledger(
    case: str,
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Exit 2, one line, nothing moved, and a refusal entry naming the reason and the
    inputs given (issue 22: a repository refused for its configuration included)."""
    verb, extra, reason, named = UNUSABLE[case]
    if "untrusted" in case:
        git(repo, "config", "filter.probe.clean", "cat")
    ledger = tmp_path / "l.sqlite"
    argv = [verb, "--repo", str(repo), "--ledger", str(ledger)]
    if verb == "promote" and "--recover" not in extra:
        decision = decide(demo, tmp_path, key=demo.alice)
        given = {"--run-dir": str(demo.run_dir), "--decision": str(decision),
                 "--allowed-signers": str(demo.allowed), "--onto": "main"}  # fmt: skip
        if case == "promote missing flags":
            del given["--run-dir"]
        argv += [
            word for flag, value in given.items() if flag not in extra for word in (flag, value)
        ]
    elif verb in ("stage", "unstage") and "--run-dir" not in extra:
        argv += ["--run-dir", str(demo.run_dir)]
    argv += [str(tmp_path / w) if w.startswith("missing") else w for w in extra]
    old = git(repo, "rev-parse", "main")
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert git(repo, "rev-parse", "main") == old
    [entry] = refusals(ledger)
    assert entry["action"] == verb + (" --recover" if "--recover" in extra else "")
    assert entry["reason_codes"] == [reason]
    assert named in entry["explanation"]
    assert entry["inputs"]["repo"] == str(repo)
    assert kinds(ledger) == ["refusal"]


def test_a_ledger_that_cannot_be_opened_records_nothing_and_says_so_once(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The unusable input is the ledger itself: still one line, exit 2, no traceback."""
    ledger = tmp_path / "folder.sqlite"
    ledger.mkdir()
    capsys.readouterr()
    assert stage(demo.run_dir, repo, ledger, "--attempt", "attempt-1") == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert list(ledger.iterdir()) == []


def test_a_blocked_recovery_is_in_the_ledger_and_stays_pending(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decision = decide(demo, tmp_path, key=demo.alice)
    ledger = tmp_path / "l.sqlite"
    argv = [
        sys.executable, "-m", "kernel", "promote", "--run-dir", str(demo.run_dir),
        "--decision", str(decision), "--allowed-signers", str(demo.allowed),
        "--repo", str(repo), "--onto", "main", "--ledger", str(ledger),
    ]  # fmt: skip
    env = {**os.environ, CRASH_AT_VARIABLE: "intent"}
    assert subprocess.run(argv, env=env, capture_output=True, check=False).returncode == 137
    (repo / "stats.py").write_text("# someone's edit\n")
    capsys.readouterr()
    assert main(["promote", "--recover", "--repo", str(repo), "--ledger", str(ledger)]) == 1
    assert "blocked" in capsys.readouterr().out
    [entry] = refusals(ledger)
    assert entry["action"] == "promote --recover"
    assert entry["reason_codes"] == ["recovery_blocked"]
    assert len(pending_of(ledger)) == 1
    assert (repo / "stats.py").read_text() == "# someone's edit\n"


def test_a_stage_killed_inside_its_ref_update_is_finished_by_the_next(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A killed `update-ref` leaves the staged ref's lock holding the commit; the same
    inputs make the same commit, so the next stage of that attempt removes exactly that
    lock and stages. A lock holding anything else is someone else's: exit 2, recorded,
    untouched."""
    ledger = tmp_path / "l.sqlite"
    assert stage(demo.run_dir, repo, ledger) == 0
    ref = "refs/kernel/staged/demo/median-fix/attempt-1"
    commit = git(repo, "rev-parse", ref)
    git(repo, "update-ref", "-d", ref)
    lock = repo / ".git" / f"{ref}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(f"{commit}\n")
    assert stage(demo.run_dir, repo, ledger) == 0
    assert git(repo, "rev-parse", ref) == commit
    assert not lock.exists()
    git(repo, "update-ref", "-d", ref)
    lock.parent.mkdir(parents=True, exist_ok=True)
    other = f"{git(repo, 'rev-parse', 'main')}\n"
    lock.write_text(other)
    capsys.readouterr()
    assert stage(demo.run_dir, repo, ledger) == 2
    assert "holds neither" in capsys.readouterr().err
    assert lock.read_text() == other
    assert refusals(ledger)[-1]["reason_codes"] == ["unusable_input"]


# -- A stage is all or nothing too (issue 22): an intent before its ref moves, finished
# by `kernel stage --recover`, the next stage or the unstage of that attempt.

STAGE_STEPS = ["stage-intent", "stage-ref"]
STAGED = "refs/kernel/staged/demo/median-fix/attempt-1"


def staged_at(repo: Path) -> str | None:
    """The commit the staged ref of attempt-1 names, or None."""
    return git(repo, "for-each-ref", STAGED, "--format=%(objectname)") or None


def stages_pending(ledger: Path) -> list[str]:
    with opened(ledger, create=False) as store:
        return [p.commit for p in pending_stages(store)]


def stage_argv(run_dir: Path, repo: Path, ledger: Path) -> list[str]:
    return [sys.executable, "-m", "kernel", "stage", "--run-dir", str(run_dir), "--repo",
            str(repo), "--ledger", str(ledger), "--attempt", "attempt-1"]  # fmt: skip


def killed_stage(demo: Demo, repo: Path, ledger: Path, step: str) -> str:
    """`kernel stage` of attempt-1 killed after ``step``; the commit its intent names."""
    env = {**os.environ, CRASH_AT_VARIABLE: step}
    done = subprocess.run(
        stage_argv(demo.run_dir, repo, ledger), env=env, capture_output=True, check=False
    )
    assert done.returncode == 137, done.stderr
    [commit] = stages_pending(ledger)
    return commit


def last_stage_close(ledger: Path) -> dict[str, Any]:
    with opened(ledger, create=False) as store:
        payloads = [json.loads(str(e.payload)) for e in store.entries() if e.kind == "staging"]
    last: dict[str, Any] = payloads[-1]
    return last


def stage_agrees(repo: Path, ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No stage pending, `ledger verify --repo` intact, the ref as the last close says,
    no lock left."""
    assert stages_pending(ledger) == []
    assert verify_repo(repo, ledger, capsys)[0] == 0
    said: list[str | None] = []
    with opened(ledger, create=False) as store:
        for entry in store.entries():
            payload = json.loads(str(entry.payload))
            if payload.get("phase", "done") != "done":
                continue
            if entry.kind == "unstaging":
                said.append(None)
            elif entry.kind == "staging":
                said.append(payload["commit"])
    if said:
        assert staged_at(repo) == said[-1]
    assert not list((repo / ".git").rglob("*.lock"))


def named_half_done(
    repo: Path, ledger: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    """`ledger verify --repo` exits 1 naming ``what`` as not finished, and the verb
    that finishes it; the captured output is consumed."""
    code, out = verify_repo(repo, ledger, capsys)
    assert code == 1
    assert f"{what} was not finished" in out
    assert "run `kernel stage --recover`" in out
    capsys.readouterr()


@pytest.mark.parametrize("finisher", ["recover", "next stage", "unstage"])
@pytest.mark.parametrize("step", STAGE_STEPS)
def test_a_stage_killed_after_any_step_is_finished(
    step: str,
    finisher: str,
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Killed after its intent (the ref not moved) or after the ref moved: `ledger
    verify --repo` names the stage; `stage --recover`, the next stage or the unstage
    of the attempt finishes it, and ref and ledger agree."""
    ledger = tmp_path / "l.sqlite"
    commit = killed_stage(demo, repo, ledger, step)
    assert staged_at(repo) == (commit if step == "stage-ref" else None)
    named_half_done(repo, ledger, capsys, f"stage of {STAGED} ({commit[:12]})")
    common = ["--repo", str(repo), "--ledger", str(ledger)]
    if finisher == "recover":
        assert main(["stage", "--recover", *common]) == 0
        assert f"finished: stage of {STAGED}" in capsys.readouterr().out
    elif finisher == "next stage":
        assert stage(demo.run_dir, repo, ledger) == 0
    else:
        assert main(["unstage", "--run-dir", str(demo.run_dir), "--attempt", "attempt-1",
                     *common]) == 0  # fmt: skip
    assert staged_at(repo) == (None if finisher == "unstage" else commit)
    stage_agrees(repo, ledger, capsys)
    # The killed stage's intent is closed `done`, with the ref at its commit.
    with opened(ledger, create=False) as store:
        closes = [json.loads(str(e.payload)) for e in store.entries() if e.kind == "staging"]
    assert [c["phase"] for c in closes][:2] == ["intent", "done"]
    assert closes[1]["commit"] == commit
    assert main(["stage", "--recover", *common]) == 0
    assert "no stage or unstage left half done" in capsys.readouterr().out


def test_a_stage_killed_at_any_moment_is_recovered(
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SIGKILL of the whole process group (stage and the git it runs) at moments
    spread over a stage's run: after `stage --recover` the ref is absent with no
    finished stage in the ledger, or at the commit the ledger's close names; nothing
    pending, no lock left."""

    def start(copy: Path, ledger: Path) -> subprocess.Popen[bytes]:
        argv = stage_argv(demo.run_dir, copy, ledger)
        return subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL)

    probe = tmp_path / "probe"
    shutil.copytree(repo, probe, symlinks=True)
    started = time.monotonic()
    assert start(probe, tmp_path / "probe.sqlite").wait() == 0
    duration = time.monotonic() - started
    outcomes = set()
    for k in range(KILL_POINTS + 1):
        copy, ledger = tmp_path / f"r{k}", tmp_path / f"l{k}.sqlite"
        shutil.copytree(repo, copy, symlinks=True)
        child = start(copy, ledger)
        try:
            # The last one is not killed: the spread has a finished stage too.
            child.wait(timeout=None if k == KILL_POINTS else duration * k / KILL_POINTS)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        if ledger.exists():
            capsys.readouterr()
            recovered = main(["stage", "--recover", "--repo", str(copy), "--ledger", str(ledger)])
            assert recovered == 0, capsys.readouterr().out
            with opened(ledger, create=False) as store:
                closed = [e for e in store.entries() if e.kind == "staging"]
            if closed:
                stage_agrees(copy, ledger, capsys)
            else:
                assert staged_at(copy) is None
        else:
            assert staged_at(copy) is None
        assert not list((copy / ".git").rglob("*.lock"))
        outcomes.add(staged_at(copy) is not None)
    # The spread reached both sides: killed before the ref moved and after.
    assert outcomes == {False, True}


def test_a_killed_stage_whose_ref_moved_elsewhere_is_abandoned(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Someone else moved the ref after the intent: recovery closes the intent
    `abandoned` and leaves the ref alone."""
    ledger = tmp_path / "l.sqlite"
    killed_stage(demo, repo, ledger, "stage-intent")
    other = git(repo, "rev-parse", "main")
    git(repo, "update-ref", STAGED, other)
    capsys.readouterr()
    assert main(["stage", "--recover", "--repo", str(repo), "--ledger", str(ledger)]) == 0
    assert f"abandoned: stage of {STAGED}" in capsys.readouterr().out
    assert staged_at(repo) == other
    assert last_stage_close(ledger)["phase"] == "abandoned"
    stage_agrees(repo, ledger, capsys)


def test_a_stage_recovery_takes_only_its_own_lock(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kill inside `update-ref` leaves the ref's lock holding the commit: recovery
    removes exactly that lock and finishes. A lock holding another value is not
    provably ours: recovery is blocked (exit 1, recorded, the stage stays pending,
    the lock untouched), and so is the next stage of that attempt (exit 2)."""
    ledger = tmp_path / "l.sqlite"
    commit = killed_stage(demo, repo, ledger, "stage-intent")
    lock = repo / ".git" / f"{STAGED}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    other = git(repo, "rev-parse", "main")
    assert other != commit
    lock.write_text(f"{other}\n")
    common = ["--repo", str(repo), "--ledger", str(ledger)]
    capsys.readouterr()
    assert main(["stage", "--recover", *common]) == 1
    assert "blocked" in capsys.readouterr().out
    assert refusals(ledger)[-1]["action"] == "stage --recover"
    assert refusals(ledger)[-1]["reason_codes"] == ["recovery_blocked"]
    assert stage(demo.run_dir, repo, ledger) == 2
    assert "cannot be finished" in capsys.readouterr().err
    assert stages_pending(ledger) == [commit]
    assert lock.read_text() == f"{other}\n"
    lock.write_text(f"{commit}\n")
    assert main(["stage", "--recover", *common]) == 0
    assert not lock.exists()
    assert staged_at(repo) == commit
    stage_agrees(repo, ledger, capsys)


@pytest.mark.parametrize("written", ["nothing", "part", "no newline"])
def test_a_lock_killed_before_git_wrote_it_is_recovered(
    written: str, demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """git creates the ref's lock empty and writes the value after: a kill in between
    leaves an empty or partly written lock. With no kernel ref update running (the
    lease is free), recovery owns it and finishes the stage."""
    ledger = tmp_path / "l.sqlite"
    commit = killed_stage(demo, repo, ledger, "stage-intent")
    lock = repo / ".git" / f"{STAGED}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text({"nothing": "", "part": commit[:9], "no newline": commit}[written])
    capsys.readouterr()
    assert main(["stage", "--recover", "--repo", str(repo), "--ledger", str(ledger)]) == 0
    assert not lock.exists()
    assert staged_at(repo) == commit
    assert stages_pending(ledger) == []
    stage_agrees(repo, ledger, capsys)


def test_an_empty_lock_is_not_swept_while_a_kernel_update_runs(
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An empty lock is a killed update's only when no kernel ref update (nor the git
    it started) still runs: while another process holds the ref-update lease (an
    flock on the git folder), recovery is blocked and the lock untouched; once the
    holder is gone, recovery finishes."""
    monkeypatch.setattr("kernel.effects.git._LEASE_WAIT_S", 0.0)
    ledger = tmp_path / "l.sqlite"
    commit = killed_stage(demo, repo, ledger, "stage-intent")
    lock = repo / ".git" / f"{STAGED}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    hold = (
        "import fcntl, os, sys\n"
        f"fd = os.open({str(repo / '.git')!r}, os.O_RDONLY | os.O_DIRECTORY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert holder.stdout is not None
    assert holder.stdin is not None
    common = ["--repo", str(repo), "--ledger", str(ledger)]
    try:
        assert holder.stdout.readline() == b"held\n"
        capsys.readouterr()
        assert main(["stage", "--recover", *common]) == 1
        assert "still running" in capsys.readouterr().out
        assert lock.exists()
        assert stages_pending(ledger) == [commit]
    finally:
        holder.stdin.close()
        holder.wait()
        holder.stdout.close()
    assert main(["stage", "--recover", *common]) == 0
    assert not lock.exists()
    assert staged_at(repo) == commit


@pytest.mark.parametrize("during", ["stage", "recovery"])
def test_a_staged_ref_moving_during_its_update_is_left_alone(
    during: str,
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another writer moves the staged ref between the intent and the compare-and-swap
    (of the stage, or of its recovery): the swap loses, the intent is closed
    `abandoned`, the other writer's value stays."""
    ledger = tmp_path / "l.sqlite"
    if during == "recovery":
        killed_stage(demo, repo, ledger, "stage-intent")
    original = Repo.update_ref
    other = git(repo, "rev-parse", "main")

    def racing(self: Repo, ref: str, new: str, old: str | None, reason: str) -> None:
        git(repo, "update-ref", ref, other)
        original(self, ref, new, old, reason)

    monkeypatch.setattr(Repo, "update_ref", racing)
    capsys.readouterr()
    if during == "stage":
        assert stage(demo.run_dir, repo, ledger) == 2
        assert f"{STAGED} moved" in capsys.readouterr().err
    else:
        assert main(["stage", "--recover", "--repo", str(repo), "--ledger", str(ledger)]) == 0
        assert "abandoned" in capsys.readouterr().out
    assert staged_at(repo) == other
    assert last_stage_close(ledger)["phase"] == "abandoned"
    stage_agrees(repo, ledger, capsys)


# -- An unstage is all or nothing too (issue 22): an intent before its ref is deleted,
# finished by `kernel stage --recover`, the next stage or the next unstage.

UNSTAGE_STEPS = ["unstage-intent", "unstage-ref"]


def unstages_pending(ledger: Path) -> list[str]:
    with opened(ledger, create=False) as store:
        return [p.commit for p in pending_unstages(store)]


def killed_unstage(demo: Demo, repo: Path, ledger: Path, step: str) -> str:
    """attempt-1 staged, then `kernel unstage` of it killed after ``step``; the commit
    its intent names."""
    assert stage(demo.run_dir, repo, ledger) == 0
    argv = [sys.executable, "-m", "kernel", "unstage", "--run-dir", str(demo.run_dir),
            "--repo", str(repo), "--ledger", str(ledger), "--attempt", "attempt-1"]  # fmt: skip
    env = {**os.environ, CRASH_AT_VARIABLE: step}
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    assert done.returncode == 137, done.stderr
    [commit] = unstages_pending(ledger)
    return commit


@pytest.mark.parametrize("finisher", ["recover", "next stage", "next unstage"])
@pytest.mark.parametrize("step", UNSTAGE_STEPS)
def test_an_unstage_killed_after_any_step_is_finished(
    step: str,
    finisher: str,
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Killed after its intent (the ref still there) or after the ref was deleted:
    `ledger verify --repo` names the unstage; `stage --recover`, the next stage or the
    next unstage of the attempt finishes it (the ref deleted, the intent closed
    `done`) before doing its own, and ref and ledger agree."""
    ledger = tmp_path / "l.sqlite"
    commit = killed_unstage(demo, repo, ledger, step)
    assert staged_at(repo) == (commit if step == "unstage-intent" else None)
    named_half_done(repo, ledger, capsys, f"unstage of {STAGED} ({commit[:12]})")
    common = ["--repo", str(repo), "--ledger", str(ledger)]
    if finisher == "recover":
        assert main(["stage", "--recover", *common]) == 0
        assert f"finished: unstage of {STAGED}" in capsys.readouterr().out
        assert staged_at(repo) is None
    elif finisher == "next stage":
        assert stage(demo.run_dir, repo, ledger) == 0
        assert staged_at(repo) == commit
    else:
        # The killed unstage is finished first: nothing is left to unstage.
        assert main(["unstage", "--run-dir", str(demo.run_dir), "--attempt", "attempt-1",
                     *common]) == 2  # fmt: skip
        assert "not staged" in capsys.readouterr().err
        assert staged_at(repo) is None
    assert unstages_pending(ledger) == []
    stage_agrees(repo, ledger, capsys)
    with opened(ledger, create=False) as store:
        closes = [json.loads(str(e.payload)) for e in store.entries() if e.kind == "unstaging"]
    assert [c["phase"] for c in closes] == ["intent", "done"]
    assert closes[1]["intent_entry"] == unstage_intent_id(ledger)
    assert closes[1]["commit"] == commit
    assert main(["stage", "--recover", *common]) == 0
    assert "no stage or unstage left half done" in capsys.readouterr().out


def unstage_intent_id(ledger: Path) -> str:
    with opened(ledger, create=False) as store:
        return next(
            str(e.entry_id)
            for e in store.entries()
            if e.kind == "unstaging" and json.loads(str(e.payload))["phase"] == "intent"
        )


def test_an_unstage_is_durable_before_the_ref_is_deleted(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The unstaging intent is in the ledger, as every append before it, when the ref
    is deleted: killed right after the intent, the ref is still there and the intent
    names it and its commit."""
    ledger = tmp_path / "l.sqlite"
    commit = killed_unstage(demo, repo, ledger, "unstage-intent")
    with opened(ledger, create=False) as store:
        [intent] = [json.loads(str(e.payload)) for e in store.entries() if e.kind == "unstaging"]
    assert intent == {
        "action": "unstage", "phase": "intent", "run_id": "demo/median-fix",
        "attempt_id": "attempt-1", "ref": STAGED, "commit": commit,
    }  # fmt: skip
    assert staged_at(repo) == commit


def test_a_killed_unstage_whose_ref_moved_elsewhere_is_abandoned(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Someone else moved the ref after the unstage's intent: recovery closes the
    intent `abandoned` and leaves the ref alone."""
    ledger = tmp_path / "l.sqlite"
    killed_unstage(demo, repo, ledger, "unstage-intent")
    other = git(repo, "rev-parse", "main")
    git(repo, "update-ref", STAGED, other)
    capsys.readouterr()
    assert main(["stage", "--recover", "--repo", str(repo), "--ledger", str(ledger)]) == 0
    assert f"abandoned: unstage of {STAGED}" in capsys.readouterr().out
    assert staged_at(repo) == other
    assert unstages_pending(ledger) == []


@pytest.mark.parametrize("ref_left", [True, False])
def test_an_unstage_recovery_takes_only_its_own_lock(
    ref_left: bool,
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A kill inside `update-ref -d` leaves the ref's lock empty (git writes nothing
    into a delete's lock), with the ref deleted or not: recovery removes that lock and
    finishes. A lock holding another value is not provably ours: recovery is blocked
    (exit 1, recorded, the unstage stays pending, the lock untouched)."""
    ledger = tmp_path / "l.sqlite"
    commit = killed_unstage(demo, repo, ledger, "unstage-intent")
    if not ref_left:
        git(repo, "update-ref", "-d", STAGED, commit)
    lock = repo / ".git" / f"{STAGED}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    other = git(repo, "rev-parse", "main")
    lock.write_text(f"{other}\n")
    common = ["--repo", str(repo), "--ledger", str(ledger)]
    capsys.readouterr()
    assert main(["stage", "--recover", *common]) == 1
    assert "blocked: unstage of" in capsys.readouterr().out
    assert refusals(ledger)[-1]["action"] == "stage --recover"
    assert refusals(ledger)[-1]["reason_codes"] == ["recovery_blocked"]
    assert unstages_pending(ledger) == [commit]
    assert lock.read_text() == f"{other}\n"
    lock.write_text("")
    assert main(["stage", "--recover", *common]) == 0
    assert not lock.exists()
    assert staged_at(repo) is None
    stage_agrees(repo, ledger, capsys)


def test_an_unstage_refuses_a_foreign_lock_before_its_intent(
    demo: Demo, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lock on the staged ref that no killed kernel update left (another value) makes
    the unstage exit 2 before anything is written: no intent, the ref and lock kept."""
    ledger = tmp_path / "l.sqlite"
    assert stage(demo.run_dir, repo, ledger) == 0
    commit = staged_at(repo)
    lock = repo / ".git" / f"{STAGED}.lock"
    other = git(repo, "rev-parse", "main")
    lock.write_text(f"{other}\n")
    before = kinds(ledger)
    capsys.readouterr()
    assert main(["unstage", "--run-dir", str(demo.run_dir), "--attempt", "attempt-1",
                 "--repo", str(repo), "--ledger", str(ledger)]) == 2  # fmt: skip
    assert "holds neither" in capsys.readouterr().err
    assert "unstaging" not in kinds(ledger)[len(before) :]
    assert staged_at(repo) == commit
    assert lock.read_text() == f"{other}\n"


@pytest.mark.parametrize("ref_left", [True, False])
def test_an_unstage_killed_inside_git_delete_is_recovered(
    ref_left: bool,
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`update-ref -d` creates the ref's lock, then `packed-refs.lock`, both empty,
    unlinks the ref, then both locks: a kill leaves them empty, with the ref there or
    gone. Recovery (its intent names the delete, no kernel update runs) removes them
    and finishes. A `packed-refs.lock` with content is not ours: the unstage is blocked,
    not abandoned (the ref is still at its commit), until it is gone."""
    ledger = tmp_path / "l.sqlite"
    commit = killed_unstage(demo, repo, ledger, "unstage-intent")
    if not ref_left:
        git(repo, "update-ref", "-d", STAGED, commit)
    lock, packed = repo / ".git" / f"{STAGED}.lock", repo / ".git" / "packed-refs.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    packed.write_text("# pack-refs with: peeled fully-peeled sorted\n")
    common = ["--repo", str(repo), "--ledger", str(ledger)]
    capsys.readouterr()
    if ref_left:
        assert main(["stage", "--recover", *common]) == 1
        assert "blocked: unstage of" in capsys.readouterr().out
        assert unstages_pending(ledger) == [commit]
        assert staged_at(repo) == commit
        assert packed.read_text().startswith("# pack-refs")
    packed.write_text("")
    lock.write_text("")
    assert main(["stage", "--recover", *common]) == 0
    assert f"finished: unstage of {STAGED}" in capsys.readouterr().out
    assert not lock.exists()
    assert not packed.exists()
    assert staged_at(repo) is None
    stage_agrees(repo, ledger, capsys)


def test_an_unstage_killed_at_any_moment_is_recovered(
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SIGKILL of the whole process group (unstage and the git it runs) at moments
    spread over an unstage's run: after `stage --recover` the ref is at its commit with
    no finished unstage in the ledger, or gone with one; nothing pending, no lock left.
    The first is killed at once and the last not at all, so both sides are reached."""
    staged = tmp_path / "staged"
    shutil.copytree(repo, staged, symlinks=True)
    base_ledger = tmp_path / "staged.sqlite"
    assert stage(demo.run_dir, staged, base_ledger) == 0
    # Closed, the ledger is its one file (copied whole below).
    assert not Path(f"{base_ledger}-wal").exists()
    commit = staged_at(staged)

    def start(k: int) -> tuple[Path, Path, subprocess.Popen[bytes]]:
        copy, ledger = tmp_path / f"r{k}", tmp_path / f"l{k}.sqlite"
        shutil.copytree(staged, copy, symlinks=True)
        shutil.copyfile(base_ledger, ledger)
        argv = [sys.executable, "-m", "kernel", "unstage", "--run-dir", str(demo.run_dir),
                "--repo", str(copy), "--ledger", str(ledger), "--attempt", "attempt-1"]  # fmt: skip
        return (
            copy,
            ledger,
            subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL),
        )

    started = time.monotonic()
    assert start(-1)[2].wait() == 0
    duration = time.monotonic() - started
    outcomes = set()
    for k in range(KILL_POINTS + 1):
        copy, ledger, child = start(k)
        try:
            child.wait(timeout=None if k == KILL_POINTS else duration * k / KILL_POINTS)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        capsys.readouterr()
        recovered = main(["stage", "--recover", "--repo", str(copy), "--ledger", str(ledger)])
        assert recovered == 0, capsys.readouterr().out
        assert unstages_pending(ledger) == []
        stage_agrees(copy, ledger, capsys)
        with opened(ledger, create=False) as store:
            unstaged = any(e.kind == "unstaging" for e in store.entries())
        assert staged_at(copy) == (None if unstaged else commit)
        assert not list((copy / ".git").rglob("*.lock"))
        outcomes.add(staged_at(copy) is not None)
    assert outcomes == {False, True}


def refuse_one_update(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next `Repo.update_ref` fails as git does when the ref's lock is taken (the
    ref not moved); later ones run."""
    real = git_effects.Repo.update_ref
    calls: list[str] = []

    def once(self: git_effects.Repo, ref: str, new: str, old: str | None, reason: str) -> None:
        calls.append(ref)
        if len(calls) == 1:
            raise GitRefusal(f"{ref}: cannot lock ref (held)")
        real(self, ref, new, old, reason)

    monkeypatch.setattr(git_effects.Repo, "update_ref", once)


def test_a_recovery_whose_update_fails_unmoved_is_blocked_not_abandoned(
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A recovering stage, unstage or promotion whose compare-and-swap fails while the
    ref is still where the intent found it (a lock taken since the sweep) is blocked
    and stays pending; the next recovery finishes it. Abandoned is only for a ref
    moved away."""
    ledger = tmp_path / "l.sqlite"
    commit = killed_stage(demo, repo, ledger, "stage-intent")
    common = ["--repo", str(repo), "--ledger", str(ledger)]
    refuse_one_update(monkeypatch)
    capsys.readouterr()
    assert main(["stage", "--recover", *common]) == 1
    assert f"blocked: stage of {STAGED}" in capsys.readouterr().out
    assert stages_pending(ledger) == [commit]
    assert main(["stage", "--recover", *common]) == 0
    assert staged_at(repo) == commit
    stage_agrees(repo, ledger, capsys)

    unstages = tmp_path / "u.sqlite"
    killed_unstage(demo, repo, unstages, "unstage-intent")
    real = git_effects.Repo.delete_ref
    failed: list[str] = []

    def delete_once(self: git_effects.Repo, ref: str, old: str) -> None:
        if not failed:
            failed.append(ref)
            raise GitRefusal(f"{ref}: cannot lock ref (held)")
        real(self, ref, old)

    monkeypatch.setattr(git_effects.Repo, "delete_ref", delete_once)
    theirs = ["--repo", str(repo), "--ledger", str(unstages)]
    capsys.readouterr()
    assert main(["stage", "--recover", *theirs]) == 1
    assert f"blocked: unstage of {STAGED}" in capsys.readouterr().out
    assert unstages_pending(unstages) == [commit]
    assert main(["stage", "--recover", *theirs]) == 0
    assert staged_at(repo) is None
    stage_agrees(repo, unstages, capsys)

    decision = decide(demo, tmp_path, key=demo.alice)
    promotions = tmp_path / "p.sqlite"
    argv = [
        sys.executable, "-m", "kernel", "promote", "--run-dir", str(demo.run_dir),
        "--decision", str(decision), "--allowed-signers", str(demo.allowed),
        "--repo", str(repo), "--onto", "main", "--ledger", str(promotions),
    ]  # fmt: skip
    env = {**os.environ, CRASH_AT_VARIABLE: "intent"}
    assert subprocess.run(argv, env=env, capture_output=True, check=False).returncode == 137
    old = git(repo, "rev-parse", "main")
    refuse_one_update(monkeypatch)
    mine = ["--repo", str(repo), "--ledger", str(promotions)]
    capsys.readouterr()
    assert main(["promote", "--recover", *mine]) == 1
    assert "blocked" in capsys.readouterr().out
    assert git(repo, "rev-parse", "main") == old
    assert len(pending_of(promotions)) == 1
    assert main(["promote", "--recover", *mine]) == 0
    assert git(repo, "rev-parse", "main^") == old
    assert pending_of(promotions) == []
    agree(repo)


@pytest.mark.parametrize("act", ["stage", "unstage"])
@pytest.mark.parametrize("race", ["lock taken", "ref moved", "same move"])
def test_a_failed_swap_is_read_as_recovery_reads_it(
    act: str,
    race: str,
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between a stage's or unstage's intent and its compare-and-swap, another git takes
    the ref's lock, moves the ref elsewhere, or makes the very move: as a recovery
    would, the first is blocked (exit 2, the intent pending, the lock and ref
    untouched; `stage --recover` finishes it once the lock is gone), the second closed
    `abandoned` (the other value kept), the third closed `done`."""
    ledger = tmp_path / "l.sqlite"
    common = ["--repo", str(repo), "--ledger", str(ledger)]
    if act == "unstage":
        assert stage(demo.run_dir, repo, ledger) == 0
    before = staged_at(repo)
    other = git(repo, "rev-parse", "main")
    lock = repo / ".git" / f"{STAGED}.lock"
    name = "update_ref" if act == "stage" else "delete_ref"
    real = getattr(Repo, name)

    def racing(self: Repo, ref: str, *args: Any) -> None:
        if race == "lock taken":
            lock.parent.mkdir(parents=True, exist_ok=True)
            lock.write_text(f"{other}\n")
        elif race == "ref moved":
            git(repo, "update-ref", ref, other)
        elif act == "stage":
            git(repo, "update-ref", ref, args[0])
        else:
            git(repo, "update-ref", "-d", ref)
        real(self, ref, *args)

    monkeypatch.setattr(Repo, name, racing)
    capsys.readouterr()
    argv = [act, "--run-dir", str(demo.run_dir), "--attempt", "attempt-1", *common]
    if race == "same move":
        assert main(argv) == 0
        assert staged_at(repo) == (None if act == "unstage" else last_stage_close(ledger)["commit"])
        assert (stages_pending(ledger), unstages_pending(ledger)) == ([], [])
        stage_agrees(repo, ledger, capsys)
        return
    assert main(argv) == 2
    err = capsys.readouterr().err
    kind = "staging" if act == "stage" else "unstaging"
    with opened(ledger, create=False) as store:
        entries = [(e.kind, json.loads(str(e.payload))) for e in store.entries()]
    # The error is recorded as every unusable input of the verb is, after the intent
    # (and its close, when there is one).
    assert entries[-1][0] == "refusal"
    assert entries[-1][1]["reason_codes"] == ["unusable_input"]
    assert entries[-1][1]["action"] == act
    if race == "ref moved":
        assert f"{STAGED} is at {other}" in err
        assert "abandoned" in err
        [(_, intent), (_, close)] = [(k, p) for k, p in entries[-3:-1] if k == kind]
        assert (intent["phase"], close["phase"]) == ("intent", "abandoned")
        assert close["reason"].startswith(f"{STAGED} is at {other}")
        assert staged_at(repo) == other
        assert (stages_pending(ledger), unstages_pending(ledger)) == ([], [])
        return
    assert f"{act} of {STAGED} blocked, its intent left pending" in err
    assert "blocked" in entries[-1][1]["explanation"]
    assert entries[-2][0] == kind
    intent = entries[-2][1]
    assert intent["phase"] == "intent"
    pending = stages_pending(ledger) if act == "stage" else unstages_pending(ledger)
    assert pending == [intent["commit"]]
    assert staged_at(repo) == before
    assert lock.read_text() == f"{other}\n"
    monkeypatch.setattr(Repo, name, real)
    assert main(["stage", "--recover", *common]) == 1  # the lock still not ours
    lock.unlink()
    assert main(["stage", "--recover", *common]) == 0
    assert f"finished: {act} of {STAGED}" in capsys.readouterr().out
    assert staged_at(repo) == (intent["commit"] if act == "stage" else None)
    assert (stages_pending(ledger), unstages_pending(ledger)) == ([], [])
    stage_agrees(repo, ledger, capsys)


def test_promotion_commits_anchoring_two_trees_of_one_size_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger verify --repo` checks the ledger against the tree heads the repository's
    promotion commits anchor: a commit anchoring another tree of a size already
    anchored is named (a rewritten history shows), a malformed anchor anchors nothing,
    and commits whose permits the ledger never closed are named too."""
    ledger = tmp_path / "l.sqlite"
    with opened(ledger) as store:
        for i in range(2):
            store.append(EntryKind.DECISION, {"i": i})
        root = tree_head(store).root_hash
        store.append(EntryKind.DECISION, {"i": 2})
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    commits = {}
    for name, head in (("malformed", "two " + "c" * 64), ("other", "2 " + "d" * 64),
                       ("real", f"2 {root}")):  # fmt: skip
        message = f"{name}\n\nKernel-Permit-Id: permit-{name}\nKernel-Ledger-Head: {head}\n"
        git(path, "commit", "-q", "--allow-empty", "-m", message)
        commits[name] = git(path, "rev-parse", "HEAD")
    capsys.readouterr()
    assert main(["ledger", "verify", "--ledger", str(ledger), "--repo", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{commits['other']} anchors another tree of 2 entries" in out
    assert f"{commits['real']} anchors" not in out
    for name in commits:
        permit = f"permit-{name}"[:12]
        assert f"commit {commits[name][:12]} promotes permit {permit}, which" in out
    assert "run `kernel promote --recover`" in out


def test_a_promotion_whose_branch_lock_is_held_is_blocked_not_refused(
    demo: Demo,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another git takes the branch's lock between the intent and the compare-and-swap:
    the branch did not move, so this is no `branch_moved` refusal: the promotion is
    blocked (exit 2, saying so), its intent pending, the lock untouched; once the lock
    is gone, `promote --recover` finishes it."""
    decision = decide(demo, tmp_path, key=demo.alice)
    lock = repo / ".git" / "refs" / "heads" / "main.lock"
    tip = git(repo, "rev-parse", "main")
    original = Repo.update_ref

    def locked(self: Repo, ref: str, new: str, old: str | None, reason: str) -> None:
        lock.write_text(f"{tip}\n")  # another git's update of main, under way
        original(self, ref, new, old, reason)

    monkeypatch.setattr(Repo, "update_ref", locked)
    ledger = tmp_path / "l.sqlite"
    capsys.readouterr()
    assert promote(demo, repo, decision, ledger) == 2
    err = capsys.readouterr().err
    assert "promotion onto refs/heads/main blocked, its intent left pending" in err
    assert git(repo, "rev-parse", "main") == tip
    assert len(pending_of(ledger)) == 1
    assert lock.read_text() == f"{tip}\n"
    assert refusals(ledger)[-1]["reason_codes"] == ["unusable_input"]
    monkeypatch.setattr(Repo, "update_ref", original)
    lock.unlink()
    common = ["--repo", str(repo), "--ledger", str(ledger)]
    assert main(["promote", "--recover", *common]) == 0
    assert "finished: promotion" in capsys.readouterr().out
    assert git(repo, "rev-parse", "main^") == tip
    assert pending_of(ledger) == []
    agree(repo)
