"""Tests for kernel.corroboration.commit_admission: the seed's decision boundary (A1-A5), ids,
properties."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel
from kernel.corroboration.commit_admission import (
    Admission,
    AdmissionVerified,
    Branch,
    CommitBoundaryError,
    CommitReason,
    CommitRefusal,
    Draft,
    EvidenceClass,
    VerifierOutcome,
    admit_to_commit,
    branch_from_corroboration,
    drafts_are_decorrelated,
    verify_admission,
)
from kernel.corroboration.consensus import (
    CaptureMode,
    CaptureStatus,
    ConsensusRefusal,
    Isolation,
    RunObservation,
    build_consensus,
    build_corroboration_report,
)
from kernel.errors import ParameterTypeError, RefusedError
from kernel.records.codec import identity_payload, seal
from kernel.records.values import unwrap
from kernel.strategies import branches, drafts

OUT_A, OUT_B = "a" * 64, "b" * 64
CTX_1, CTX_2, CTX_3 = "1" * 64, "2" * 64, "3" * 64


def stdlib_id(payload: dict[str, Any]) -> str:
    """The id definition, recomputed with the stdlib only."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def draft(out: str, ctx: str, tools: tuple[str, ...] = ("shell",)) -> Draft:
    """A draft with the given output, context and tools."""
    return Draft(output_digest=out, context_digest=ctx, tools=tools)


def branch(verifier: VerifierOutcome, *items: Draft) -> Branch:
    """A branch named 'b1'."""
    return Branch(branch_id="b1", drafts=tuple(items), verifier=verifier)


CORRELATED = (draft(OUT_A, CTX_1), draft(OUT_A, CTX_1), draft(OUT_A, CTX_1))
DECORRELATED = (draft(OUT_A, CTX_1), draft(OUT_A, CTX_2), draft(OUT_A, CTX_3))
DIVERGENT_CORRELATED = (draft(OUT_A, CTX_1), draft(OUT_B, CTX_1))

V, E, R = VerifierOutcome, EvidenceClass, CommitReason

ADMIT_TABLE = [
    ("verified-correlated", V.PASSED, CORRELATED, E.VERIFIED),
    ("verified-decorrelated", V.PASSED, DECORRELATED, E.VERIFIED),
    ("verified-single", V.PASSED, (draft(OUT_A, CTX_1),), E.VERIFIED),
    ("unanimous-decorrelated-no-verifier", V.NONE, DECORRELATED, E.CORROBORATED_ONLY),
    ("divergent-no-verifier", V.NONE, DIVERGENT_CORRELATED, E.CORROBORATED_ONLY),
    ("single-draft-no-verifier", V.NONE, (draft(OUT_A, CTX_1),), E.CORROBORATED_ONLY),
]


@pytest.mark.parametrize(("name", "verifier", "items", "evidence"), ADMIT_TABLE)
def test_admissions(
    name: str, verifier: VerifierOutcome, items: tuple[Draft, ...], evidence: EvidenceClass
) -> None:
    """Only a verifier pass is `verified`; otherwise agreement stages only (A2, A5)."""
    outcome = admit_to_commit(branch(verifier, *items))
    assert isinstance(outcome, Admission), name
    assert outcome.evidence_class is evidence
    assert outcome.commit_permitted is (evidence is E.VERIFIED)
    assert outcome.staging_only is (evidence is E.CORROBORATED_ONLY)
    assert outcome.admission_id == stdlib_id(identity_payload(outcome))
    assert Admission.from_dict(outcome.to_dict()) == outcome


REFUSE_TABLE = [
    ("no-drafts-even-if-verified", V.PASSED, (), R.NO_DRAFTS),
    ("no-drafts", V.NONE, (), R.NO_DRAFTS),
    ("verifier-fail-unanimous", V.FAILED, DECORRELATED, R.VERIFIER_REJECTED),
    ("verifier-fail-correlated", V.FAILED, CORRELATED, R.VERIFIER_REJECTED),
    ("unanimous-correlated", V.NONE, CORRELATED, R.UNANIMOUS_CORRELATED_DRAFTS),
    (
        "two-share-prefix-and-tools",
        V.NONE,
        (draft(OUT_A, CTX_1), draft(OUT_A, CTX_2), draft(OUT_A, CTX_1)),
        R.UNANIMOUS_CORRELATED_DRAFTS,
    ),
]


@pytest.mark.parametrize(("name", "verifier", "items", "reason"), REFUSE_TABLE)
def test_refusals(
    name: str, verifier: VerifierOutcome, items: tuple[Draft, ...], reason: CommitReason
) -> None:
    """Vacuous, rejected and correlated-unanimous branches are refused (A1, A3, A4)."""
    outcome = admit_to_commit(branch(verifier, *items))
    assert isinstance(outcome, CommitRefusal), name
    assert outcome.reason_codes == (reason,)
    assert outcome.refusal_id == stdlib_id(identity_payload(outcome))
    assert CommitRefusal.from_dict(outcome.to_dict()) == outcome
    with pytest.raises(CommitBoundaryError) as caught:
        unwrap(admit_to_commit(branch(verifier, *items)))
    assert caught.value.refusal == outcome


def test_same_context_different_tools_is_decorrelated() -> None:
    """Drafters are correlated only when they share both context and tools."""
    items = (draft(OUT_A, CTX_1, ("grep",)), draft(OUT_A, CTX_1, ("shell",)))
    assert drafts_are_decorrelated(branch(VerifierOutcome.NONE, *items))
    assert not drafts_are_decorrelated(branch(VerifierOutcome.NONE, *CORRELATED))


def test_unwrap_raises_a_refusal_at_the_commit_boundary() -> None:
    """`unwrap` of a refused admission raises `CommitBoundaryError` carrying the refusal;
    the 0.1.0 helpers (``admit_or_raise``, ``require_verified``) are gone."""
    with pytest.raises(CommitBoundaryError) as caught:
        unwrap(admit_to_commit(branch(VerifierOutcome.FAILED, *CORRELATED)))
    assert isinstance(caught.value.refusal, CommitRefusal)
    assert isinstance(caught.value, RefusedError)
    assert unwrap(admit_to_commit(branch(VerifierOutcome.PASSED, *CORRELATED))).commit_permitted
    assert not hasattr(kernel, "admit_or_raise")
    assert not hasattr(kernel, "require_verified")


def test_wrong_type_is_a_programmer_error() -> None:
    """admit_to_commit takes a Branch."""
    with pytest.raises(TypeError):
        admit_to_commit("b1")  # type: ignore[arg-type]


def test_unsorted_tools_cannot_exist() -> None:
    """A draft's tools are sorted and unique."""
    with pytest.raises(ValueError):  # noqa: PT011
        Draft(output_digest=OUT_A, context_digest=CTX_1, tools=("z", "a"))


@settings(max_examples=100, deadline=None)
@given(branches())
def test_branch_outcomes_round_trip_and_seal(item: Branch) -> None:
    """Every outcome round-trips and its id reproduces with the stdlib definition."""
    assert Branch.from_dict(item.to_dict()) == item
    outcome = admit_to_commit(item)
    assert type(outcome).from_dict(outcome.to_dict()) == outcome
    own = outcome.admission_id if isinstance(outcome, Admission) else outcome.refusal_id
    assert own == stdlib_id(identity_payload(outcome))


@settings(max_examples=100, deadline=None)
@given(branches(), st.lists(st.integers(min_value=0, max_value=10), min_size=1, max_size=4))
def test_correlated_drafts_never_cross_into_verified(item: Branch, picks: list[int]) -> None:
    """Adding drafts that copy an existing drafter's context and tools never yields `verified`.

    Only the verifier outcome decides `verified` (seed: a fourth correlated drafter
    does not cross the boundary).
    """
    before = admit_to_commit(item)
    if not item.drafts:
        return
    extra = tuple(item.drafts[i % len(item.drafts)] for i in picks)
    after = admit_to_commit(attrs.evolve(item, drafts=item.drafts + extra))
    if item.verifier is not VerifierOutcome.PASSED:
        assert not (isinstance(after, Admission) and after.evidence_class is EvidenceClass.VERIFIED)
    if isinstance(before, Admission) and before.evidence_class is EvidenceClass.CORROBORATED_ONLY:
        assert isinstance(after, CommitRefusal) or (
            after.evidence_class is EvidenceClass.CORROBORATED_ONLY
        )


@settings(max_examples=60, deadline=None)
@given(drafts(), st.integers(min_value=2, max_value=6))
def test_unanimity_among_clones_is_refused_without_verifier(one: Draft, n: int) -> None:
    """N identical drafters agreeing is the highest-risk signal, not a green light."""
    outcome = admit_to_commit(
        Branch(branch_id="x", drafts=(one,) * n, verifier=VerifierOutcome.NONE)
    )
    assert isinstance(outcome, CommitRefusal)
    assert outcome.reason_codes == (CommitReason.UNANIMOUS_CORRELATED_DRAFTS,)


def _report(*digests: str) -> Any:
    observations = tuple(
        RunObservation(
            index=i,
            status=CaptureStatus.OK,
            exit_code=0,
            output_digest=d,
            output_size=4,
            isolation=Isolation.OVERLAY,
            duration_ms=1,
        )
        for i, d in enumerate(digests)
    )
    outcome = build_consensus(observations)
    assert not isinstance(outcome, ConsensusRefusal)
    return build_corroboration_report(
        outcome, command=("make", "test"), capture_mode=CaptureMode.PATCH, network=False,
        timeout_ms=None,
    )  # fmt: skip


def test_corroboration_report_is_correlated_by_construction() -> None:
    """Reruns of one command never become `verified` without an independent verifier."""
    report = _report(OUT_A, OUT_A, OUT_A)
    unverified = branch_from_corroboration(report, branch_id="r")
    assert not drafts_are_decorrelated(unverified)
    refused = admit_to_commit(unverified)
    assert isinstance(refused, CommitRefusal)
    assert refused.reason_codes == (CommitReason.UNANIMOUS_CORRELATED_DRAFTS,)
    verified = admit_to_commit(
        branch_from_corroboration(report, branch_id="r", verifier=VerifierOutcome.PASSED)
    )
    assert isinstance(verified, Admission)
    assert verified.evidence_class is EvidenceClass.VERIFIED


def test_divergent_reruns_stage_only() -> None:
    """A split rerun report without verifier is corroborated_only at best."""
    outcome = admit_to_commit(
        branch_from_corroboration(_report(OUT_A, OUT_B, OUT_A), branch_id="r")
    )
    assert isinstance(outcome, Admission)
    assert outcome.evidence_class is EvidenceClass.CORROBORATED_ONLY
    assert not outcome.commit_permitted


def test_a_branch_that_cannot_be_digested_cannot_exist() -> None:
    """Regression: a Branch whose id or tool names held a lone surrogate was built, and
    admit_to_commit then raised CanonicalizationError instead of deciding; such a branch
    is now refused at construction, so the validator only ever sees digestible branches."""
    with pytest.raises(ValueError, match="lone surrogate") as bad_id:
        Branch(branch_id="b\ud800", drafts=CORRELATED, verifier=V.PASSED)
    assert getattr(bad_id.value, "kernel_field", None) == "branch_id"
    with pytest.raises(ValueError, match="lone surrogate") as bad_tool:
        draft(OUT_A, CTX_1, ("sh\udfff",))
    assert getattr(bad_tool.value, "kernel_field", None) == "tools[0]"


def test_verify_admission_accepts_exactly_the_derived_outcome() -> None:
    """The admission (or refusal) admit_to_commit gives verifies against its branch."""
    for item in (branch(V.NONE, *DECORRELATED), branch(V.FAILED, *DECORRELATED)):
        outcome = admit_to_commit(item)
        verified = verify_admission(outcome, item)
        assert isinstance(verified, AdmissionVerified)
        assert verified.admitted is isinstance(outcome, Admission)
        assert verified.branch_digest == outcome.branch_digest
        assert unwrap(verified) is verified


@given(st.sampled_from(["evolve", "setattr"]), st.sampled_from(["admission", "refusal"]))
def test_an_outcome_altered_but_keeping_its_id_does_not_verify(how: str, which: str) -> None:
    """For every way of keeping the old id (evolve, or writing a field in place) and
    either outcome: an admission promoted to verified, or a refusal turned into
    something else, is refused: its fields no longer give the id it carries."""
    item = branch(V.NONE if which == "admission" else V.FAILED, *DECORRELATED)
    honest = admit_to_commit(item)
    if isinstance(honest, Admission):
        changes: dict[str, object] = {
            "evidence_class": E.VERIFIED,
            "commit_permitted": True,
            "staging_only": False,
        }
    else:
        changes = {"branch_id": "another"}
    if how == "evolve":
        forged = attrs.evolve(honest, **changes)  # type: ignore[arg-type]
    else:
        forged = copy.copy(honest)
        for name, value in changes.items():
            object.__setattr__(forged, name, value)
    refused = verify_admission(forged, item)
    assert isinstance(refused, CommitRefusal)
    assert refused.reason_codes == (CommitReason.OUTCOME_MISMATCH,)
    assert "altered after it was sealed" in refused.explanation


def test_a_resealed_verified_admission_does_not_verify() -> None:
    """Editing a corroborated_only admission to verified and resealing it is caught."""
    item = branch(V.NONE, *DECORRELATED)
    honest = admit_to_commit(item)
    assert isinstance(honest, Admission)
    fields = {k: getattr(honest, k) for k in honest.to_dict() if k != "admission_id"}
    fields.update(evidence_class=E.VERIFIED, commit_permitted=True, staging_only=False)
    forged = seal(Admission, **fields)
    assert Admission.from_dict(forged.to_dict()) == forged
    refused = verify_admission(forged, item)
    assert isinstance(refused, CommitRefusal)
    assert refused.reason_codes == (CommitReason.OUTCOME_MISMATCH,)
    assert honest.admission_id in refused.explanation
    assert forged.admission_id in refused.explanation
    assert refused.refusal_id == stdlib_id(identity_payload(refused))
    other = verify_admission(honest, branch(V.NONE, *CORRELATED[:2], DECORRELATED[1]))
    assert isinstance(other, CommitRefusal)
    with pytest.raises(ParameterTypeError, match=r"verify_admission\(\): branch: expected Branch"):
        verify_admission(honest, "not a branch")  # type: ignore[arg-type]
