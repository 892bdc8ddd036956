"""Tests for kernel.effects.signing: SSH signatures over decision records (throwaway keys)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import attrs
import pytest

from kernel.decide.decision import HumanDecisionRecord, record_decision
from kernel.decide.gate import SignatureStatus, decision_message
from kernel.effects.cli import main
from kernel.effects.documents import load_run_record
from kernel.effects.signing import check_decision_signature, sign_decision, signature_path
from kernel.errors import EffectError
from kernel.records.codec import seal
from kernel.records.identity import canonical_json, sha256_bytes
from kernel.run.report import RunEvidenceReport, build_evidence_report

DECIDER = "alice@example.com"
IDKMESH_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "idkmesh" / "demo.run.json"


def keygen(path: Path, comment: str = "k") -> Path:
    """A throwaway ed25519 key pair."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
    )
    return path


@pytest.fixture
def record() -> HumanDecisionRecord:
    """A decision record on a strategy-built report."""
    report = build_evidence_report(load_run_record(IDKMESH_RUN))
    assert isinstance(report, RunEvidenceReport)
    outcome = record_decision(
        report, decision_id="d", decision="reject", rationale="r", decider_id=DECIDER,
        decided_at="2026-01-01T00:00:00Z",
    )  # fmt: skip
    assert isinstance(outcome, HumanDecisionRecord)
    return outcome


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path, Path]:
    """alice's key (allowed for DECIDER), bob's key (allowed for nobody), allowed_signers."""
    alice, bob = keygen(tmp_path / "alice"), keygen(tmp_path / "bob")
    allowed = tmp_path / "allowed_signers"
    public = " ".join((tmp_path / "alice.pub").read_text().split()[:2])
    allowed.write_text(f'{DECIDER} namespaces="kernel-decision" {public}\n')
    return alice, bob, allowed


def test_message_is_the_canonical_record(record: HumanDecisionRecord) -> None:
    """The signed bytes are the record's canonical JSON (record_id included)."""
    assert decision_message(record) == canonical_json(record.to_dict())
    assert b'"record_id":"' + record.record_id.encode() in decision_message(record)


def test_statuses(record: HumanDecisionRecord, keys: tuple[Path, Path, Path]) -> None:
    """valid / signer_not_allowed / invalid / unsigned, each for the decider principal."""
    alice, bob, allowed = keys
    good = sign_decision(record, alice)
    assert good.startswith(b"-----BEGIN SSH SIGNATURE-----")
    check = check_decision_signature(record, good, allowed)
    assert check.status is SignatureStatus.VALID
    assert check.principal == DECIDER
    assert check.message_digest == sha256_bytes(decision_message(record))
    other = check_decision_signature(record, sign_decision(record, bob), allowed)
    assert other.status is SignatureStatus.SIGNER_NOT_ALLOWED
    fields = {
        f.name: getattr(record, f.name)
        for f in attrs.fields(HumanDecisionRecord)
        if f.name != "record_id"
    }
    edited = seal(HumanDecisionRecord, **{**fields, "rationale": "changed after signing"})
    assert check_decision_signature(edited, good, allowed).status is SignatureStatus.INVALID
    garbage = check_decision_signature(record, b"not a signature", allowed)
    assert garbage.status is SignatureStatus.INVALID
    assert check_decision_signature(record, None, allowed).status is SignatureStatus.UNSIGNED


def test_another_principal_is_not_allowed(
    record: HumanDecisionRecord, keys: tuple[Path, Path, Path]
) -> None:
    """alice's key signs for alice only: a record naming another decider is not allowed."""
    alice, _, allowed = keys
    fields = {
        f.name: getattr(record, f.name)
        for f in attrs.fields(HumanDecisionRecord)
        if f.name != "record_id"
    }
    mallory = seal(
        HumanDecisionRecord, **{**fields, "decider": attrs.evolve(record.decider, id="mallory")}
    )
    check = check_decision_signature(mallory, sign_decision(mallory, alice), allowed)
    assert check.status is SignatureStatus.SIGNER_NOT_ALLOWED


def test_unusable_key_or_signers(record: HumanDecisionRecord, tmp_path: Path) -> None:
    """A missing key or allowed-signers file is an effect error, never a verdict."""
    with pytest.raises(EffectError, match="signing key not found"):
        sign_decision(record, tmp_path / "nope")
    (tmp_path / "notakey").write_text("garbage\n")
    with pytest.raises(EffectError, match="cannot sign"):
        sign_decision(record, tmp_path / "notakey")
    with pytest.raises(EffectError, match="allowed signers"):
        check_decision_signature(record, b"x", tmp_path / "nope")


def test_record_with_bad_key_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`decision record --signing-key` with an unusable key: exit 2, no record, no sig."""
    report = build_evidence_report(load_run_record(IDKMESH_RUN))
    assert isinstance(report, RunEvidenceReport)
    results = tmp_path / "results"
    results.mkdir()
    evidence = results / "evidence.json"
    evidence.write_bytes(canonical_json(report.to_dict()))
    out = results / "decision.json"
    code = main(
        [
            "decision", "record", "--evidence-report", str(evidence), "--output", str(out),
            "--decision-id", "d", "--decision", "reject", "--rationale", "r",
            "--decider-id", DECIDER, "--results-root", str(results),
            "--signing-key", str(tmp_path / "missing"),
        ]
    )  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not out.exists()
    assert not signature_path(out).exists()
