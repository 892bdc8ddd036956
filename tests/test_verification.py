"""Tests for kernel.run.verification: records, digests and check_evidence_chain."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.errors import RecordError
from kernel.run.verification import (
    CheckResult,
    CheckStatus,
    EvidenceChain,
    EvidenceChainReason,
    EvidenceChainRefusal,
    Recommendation,
    ResultManifest,
    VerificationResult,
    VerificationStatus,
    WorkerStatus,
    WorkUnit,
    check_evidence_chain,
    check_manifest_chain,
    verdict_from_checks,
)
from kernel.strategies import result_manifests, verification_results, work_units


def _digest(value: Any) -> str:
    data = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


UNIT = WorkUnit.from_dict(
    {
        "id": "wu",
        "version": 1,
        "objective": "do it",
        "inputs": [{"id": "in", "digest": "a" * 64}],
        "required_validators": ["scope", "accept"],
    }
)
MANIFEST = ResultManifest.from_dict(
    {
        "id": "m-1",
        "work_unit_id": "wu",
        "work_unit_version": 1,
        "work_unit_digest": UNIT.digest,
        "attempt": 1,
        "worker": {"id": "w", "type": "agent", "adapter": "fixture-result", "adapter_version": "1"},
        "status": "succeeded",
        "artifacts": [{"id": "c", "locator": "c.json", "digest": "b" * 64, "media_type": ""}],
        "claims": ["done"],
    }
)


def _verification(**changes: Any) -> VerificationResult:
    base = VerificationResult.from_dict(
        {
            "id": "v-1",
            "result_manifest_id": "m-1",
            "result_manifest_digest": MANIFEST.digest,
            "work_unit_id": "wu",
            "work_unit_version": 1,
            "work_unit_digest": UNIT.digest,
            "attempt": 1,
            "verifier": {
                "id": "v",
                "type": "system",
                "adapter": "fixture-policy",
                "adapter_version": "1",
            },
            "independence": {
                "independent_from_worker": True,
                "worker_id_observed": "w",
                "shared_model_family": False,
                "shared_runtime": False,
            },
            "status": "passed",
            "checks": [
                {"id": "scope", "required": True, "status": "passed", "evidence_digests": []},
                {
                    "id": "accept",
                    "required": True,
                    "status": "passed",
                    "evidence_digests": ["c" * 64],
                },
            ],
            "recommendation": "accept_candidate",
            "rationale": "all passed",
        }
    )
    return attrs.evolve(base, **changes)


def test_digests_recompute_with_the_stdlib() -> None:
    """Work unit and manifest digests are SHA-256 of the stdlib canonical JSON of the document."""
    assert UNIT.digest == _digest(UNIT.to_dict())
    assert MANIFEST.digest == _digest(MANIFEST.to_dict())


def test_semantic_digest_leaves_out_the_rationale() -> None:
    """The semantic digest covers every field but the rationale."""
    verification = _verification()
    document = verification.to_dict()
    del document["rationale"]
    assert verification.semantic_digest == _digest(document)
    assert _verification(rationale="other words").semantic_digest == verification.semantic_digest


def test_a_binding_triple_binds() -> None:
    """A consistent triple yields a EvidenceChain with the three digests."""
    outcome = check_evidence_chain(UNIT, MANIFEST, _verification())
    assert outcome == EvidenceChain(
        work_unit_digest=UNIT.digest,
        result_manifest_digest=MANIFEST.digest,
        verification_semantic_digest=_verification().semantic_digest,
    )


def _evolved_check(index: int, **changes: Any) -> tuple[Any, ...]:
    checks = list(_verification().checks)
    checks[index] = attrs.evolve(checks[index], **changes)
    return tuple(checks)


REFUSALS = {
    "manifest-work-unit-id": (
        attrs.evolve(MANIFEST, work_unit_id="other"),
        None,
        (EvidenceChainReason.MANIFEST_WORK_UNIT_ID,),
    ),
    "manifest-work-unit-version": (
        attrs.evolve(MANIFEST, work_unit_version=2),
        None,
        (EvidenceChainReason.MANIFEST_WORK_UNIT_VERSION,),
    ),
    "manifest-work-unit-digest": (
        attrs.evolve(MANIFEST, work_unit_digest="0" * 64),
        None,
        (EvidenceChainReason.MANIFEST_WORK_UNIT_DIGEST,),
    ),
    "verification-manifest-id": (
        MANIFEST,
        {"result_manifest_id": "m-2"},
        (EvidenceChainReason.VERIFICATION_MANIFEST_ID,),
    ),
    "verification-manifest-digest": (
        MANIFEST,
        {"result_manifest_digest": "0" * 64},
        (EvidenceChainReason.VERIFICATION_MANIFEST_DIGEST,),
    ),
    "verification-work-unit-id": (
        MANIFEST,
        {"work_unit_id": "other"},
        (EvidenceChainReason.VERIFICATION_WORK_UNIT_ID,),
    ),
    "verification-work-unit-version": (
        MANIFEST,
        {"work_unit_version": 3},
        (EvidenceChainReason.VERIFICATION_WORK_UNIT_VERSION,),
    ),
    "verification-work-unit-digest": (
        MANIFEST,
        {"work_unit_digest": "1" * 64},
        (EvidenceChainReason.VERIFICATION_WORK_UNIT_DIGEST,),
    ),
    "attempt": (MANIFEST, {"attempt": 2}, (EvidenceChainReason.VERIFICATION_ATTEMPT,)),
    "observed-other-worker": (
        MANIFEST,
        {"independence": attrs.evolve(_verification().independence, worker_id_observed="x")},
        (EvidenceChainReason.OBSERVED_OTHER_WORKER,),
    ),
    "not-independent": (
        MANIFEST,
        {"independence": attrs.evolve(_verification().independence, independent_from_worker=False)},
        (EvidenceChainReason.NOT_INDEPENDENT,),
    ),
    "verifier-is-worker": (
        MANIFEST,
        {"verifier": attrs.evolve(_verification().verifier, id="w")},
        (EvidenceChainReason.NOT_INDEPENDENT,),
    ),
    "required_check_missing": (
        MANIFEST,
        {"checks": _evolved_check(0, required=False)},
        (EvidenceChainReason.REQUIRED_CHECK_MISSING,),
    ),
    "accept-with-failed-check": (
        MANIFEST,
        {"checks": _evolved_check(1, status=CheckStatus.FAILED)},
        (EvidenceChainReason.ACCEPT_WITH_UNPASSED_CHECK,),
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_binding_refusals(name: str) -> None:
    """Each broken binding yields exactly its own reason code."""
    manifest, changes, codes = REFUSALS[name]
    verification = _verification(**(changes or {}))
    if changes is None:
        # The verification follows the drifted manifest, so only the manifest check fails.
        verification = _verification(result_manifest_digest=manifest.digest)
    outcome = check_evidence_chain(UNIT, manifest, verification)
    assert isinstance(outcome, EvidenceChainRefusal)
    assert outcome.reason_codes == codes
    assert EvidenceChainRefusal.from_dict(outcome.to_dict()) == outcome


def test_manifest_binding_alone() -> None:
    """check_manifest_chain checks only the manifest's work unit binding."""
    assert isinstance(check_manifest_chain(UNIT, MANIFEST), EvidenceChain)
    refused = check_manifest_chain(UNIT, attrs.evolve(MANIFEST, work_unit_version=9))
    assert isinstance(refused, EvidenceChainRefusal)
    assert refused.verification_semantic_digest is None


def test_rejecting_with_failed_check_is_consistent() -> None:
    """A rejection with a failed required check binds (only acceptance must be backed)."""
    verification = _verification(
        checks=_evolved_check(1, status=CheckStatus.FAILED),
        recommendation=Recommendation.REJECT_CANDIDATE,
    )
    assert isinstance(check_evidence_chain(UNIT, MANIFEST, verification), EvidenceChain)


BAD_DOCUMENTS = {
    "blank-id": ("id", " "),
    "bool-version": ("version", True),
    "zero-version": ("version", 0),
    "prefixed-digest": ("inputs", [{"id": "in", "digest": "sha256:" + "a" * 64}]),
    "duplicate-validators": ("required_validators", ["a", "a"]),
}


@pytest.mark.parametrize("name", sorted(BAD_DOCUMENTS))
def test_work_unit_from_dict_refuses(name: str) -> None:
    """Malformed work units are refused with the failing path."""
    field, value = BAD_DOCUMENTS[name]
    document = UNIT.to_dict()
    document[field] = value
    with pytest.raises(RecordError) as info:
        WorkUnit.from_dict(document)
    assert info.value.path.startswith(field)


def test_manifest_has_no_acceptance_field() -> None:
    """A worker cannot smuggle an acceptance verdict into its manifest."""
    document = MANIFEST.to_dict()
    document["accepted"] = True
    with pytest.raises(RecordError) as info:
        ResultManifest.from_dict(document)
    assert info.value.path == "accepted"


def test_verification_needs_a_check() -> None:
    """A verification with no check is refused (vacuous evidence)."""
    document = _verification().to_dict()
    document["checks"] = []
    with pytest.raises(RecordError):
        VerificationResult.from_dict(document)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_round_trip_and_generated_triples_bind_or_refuse(data: st.DataObject) -> None:
    """from_dict(to_dict(r)) == r; check_evidence_chain never raises on generated triples."""
    unit = data.draw(work_units())
    manifest = data.draw(result_manifests(unit))
    verification = data.draw(verification_results(unit, manifest))
    for record in (unit, manifest, verification):
        assert type(record).from_dict(record.to_dict()) == record
    outcome = check_evidence_chain(unit, manifest, verification)
    assert isinstance(outcome, EvidenceChain | EvidenceChainRefusal)


def _check(status: CheckStatus, required: bool = True) -> CheckResult:
    """One check with the given status."""
    return CheckResult(id=f"c-{status}", required=required, status=status, evidence_digests=())


P, F, E, INC = CheckStatus.PASSED, CheckStatus.FAILED, CheckStatus.ERROR, CheckStatus.INCONCLUSIVE
VERDICTS = [
    ("no checks: never a vacuous pass", (), WorkerStatus.SUCCEEDED,
     VerificationStatus.INCONCLUSIVE, Recommendation.INSUFFICIENT_EVIDENCE),
    ("all passed", (P, P), WorkerStatus.SUCCEEDED,
     VerificationStatus.PASSED, Recommendation.ACCEPT_CANDIDATE),
    ("passed but the worker failed", (P,), WorkerStatus.FAILED,
     VerificationStatus.PASSED, Recommendation.ESCALATE),
    ("one failed wins over errors", (P, E, F), WorkerStatus.SUCCEEDED,
     VerificationStatus.FAILED, Recommendation.REJECT_CANDIDATE),
    ("an error", (P, E), WorkerStatus.SUCCEEDED,
     VerificationStatus.ERROR, Recommendation.INSUFFICIENT_EVIDENCE),
    ("inconclusive", (P, INC), WorkerStatus.SUCCEEDED,
     VerificationStatus.INCONCLUSIVE, Recommendation.INSUFFICIENT_EVIDENCE),
]  # fmt: skip


@pytest.mark.parametrize(
    ("statuses", "worker", "status", "recommendation"),
    [v[1:] for v in VERDICTS],
    ids=[v[0] for v in VERDICTS],
)
def test_verdict_follows_the_checks(
    statuses: tuple[CheckStatus, ...],
    worker: WorkerStatus,
    status: VerificationStatus,
    recommendation: Recommendation,
) -> None:
    """The verifier's status and recommendation follow its checks (shared by all adapters)."""
    checks = tuple(_check(s) for s in statuses)
    assert verdict_from_checks(checks, worker) == (status, recommendation)


def test_only_required_checks_count_when_some_are_required() -> None:
    """A failing optional check does not reject when the required ones pass."""
    checks = (_check(P), _check(F, required=False))
    assert verdict_from_checks(checks, WorkerStatus.SUCCEEDED) == (
        VerificationStatus.PASSED,
        Recommendation.ACCEPT_CANDIDATE,
    )
