"""Run-admission branches the demo tests do not reach: malformed candidate groups, the
document digest, and how a discounted verifier pass is shown."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.corroboration.commit_admission import (
    CommitReason,
    EvidenceClass,
    VerifierOutcome,
)
from kernel.corroboration.run_admission import RunAdmission, build_run_admission
from kernel.effects.orchestrate import load_config, run_loaded
from kernel.errors import FieldError
from kernel.run.record import CheckRun
from kernel.run.report import EvidenceState, RunEvidenceReport, build_evidence_report
from kernel.run.verification import CheckReason, Isolation
from kernel.views.admission import admission_section

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _admission() -> RunAdmission:
    report = build_evidence_report(
        run_loaded(load_config(FIXTURES / "orchestration/two-attempt-good-vs-bad.json"))
    )
    assert isinstance(report, RunEvidenceReport)
    good, bad = (a.attempt_id for a in report.attempts)
    return build_run_admission(
        report,
        candidates={good: "a" * 64, bad: "b" * 64},
        contexts={good: "1" * 64, bad: "2" * 64},
        corroborations={},
    )


def test_the_document_digest_is_the_stdlib_sha256_of_its_canonical_json() -> None:
    admission = _admission()
    text = json.dumps(
        admission.to_dict(), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    assert admission.digest == hashlib.sha256(text.encode()).hexdigest()


def test_a_group_needs_exactly_a_class_or_refusal_reasons() -> None:
    verified, refused = _admission().groups
    with pytest.raises(FieldError, match="a group has a class or refusal reasons"):
        attrs.evolve(verified, evidence_class=None)
    with pytest.raises(FieldError, match="a group has a class or refusal reasons"):
        attrs.evolve(refused, evidence_class=EvidenceClass.CORROBORATED_ONLY)
    with pytest.raises(FieldError, match="expected an EvidenceClass or None"):
        attrs.evolve(verified, evidence_class="verified")  # type: ignore[arg-type]


@pytest.mark.parametrize("cut", ["ids", "states", "both"])
def test_a_group_has_one_state_per_attempt_and_at_least_one(cut: str) -> None:
    group = _admission().groups[0]
    changes: dict[str, Any] = {}
    if cut in {"ids", "both"}:
        changes["attempt_ids"] = ()
    if cut in {"states", "both"}:
        changes["evidence_states"] = ()
    with pytest.raises(FieldError, match="one state per attempt, at least one"):
        attrs.evolve(group, **changes)


def test_a_discounted_verifier_pass_is_explained_in_the_section() -> None:
    admission = _admission()
    refused = attrs.evolve(
        admission.groups[1], verifier_pass_discounted=True, isolation=Isolation.COPY
    )
    section = admission_section(attrs.evolve(admission, groups=(admission.groups[0], refused)))
    cells = [cell for row in section.rows for cell in row]
    assert any(
        "verifier pass not counted: evidence gathered at copy isolation, below overlay" in cell
        for cell in cells
    )
    assert not any(
        "not counted" in cell for row in admission_section(admission).rows for cell in row
    )


_REPORT = build_evidence_report(
    run_loaded(load_config(FIXTURES / "orchestration/two-attempt-good-vs-bad.json"))
)


@given(
    reasons=st.lists(st.none() | st.sampled_from(CheckReason), max_size=4),
    state=st.sampled_from([EvidenceState.SUPPORTED, EvidenceState.INCONCLUSIVE]),
)
def test_a_check_that_ended_without_a_pass_is_never_verified_nor_stageable(
    reasons: list[CheckReason | None], state: EvidenceState
) -> None:
    """G9, for all check reasons: any non-pass but ``exit_status_only`` disqualifies the
    candidate (never verified, never corroborated_only); otherwise the class is what the
    attempt's evidence state gives."""
    assert isinstance(_REPORT, RunEvidenceReport)
    attempt = attrs.evolve(
        _REPORT.attempts[0],
        evidence_state=state,
        check_runs=tuple(
            CheckRun(check_id=f"c{i}", sandbox=None, reason=r) for i, r in enumerate(reasons)
        ),
    )
    report = attrs.evolve(_REPORT, attempts=(attempt,))
    (group,) = build_run_admission(
        report,
        candidates={attempt.attempt_id: "a" * 64},
        contexts={attempt.attempt_id: "1" * 64},
        corroborations={},
    ).groups
    if any(r not in (None, CheckReason.EXIT_STATUS_ONLY) for r in reasons):
        assert group.verifier is VerifierOutcome.FAILED
        assert group.evidence_class is None
        assert group.refusal_reasons == (CommitReason.VERIFIER_REJECTED,)
    elif state is EvidenceState.SUPPORTED:
        assert group.evidence_class is EvidenceClass.VERIFIED
    else:
        assert group.evidence_class is EvidenceClass.CORROBORATED_ONLY
