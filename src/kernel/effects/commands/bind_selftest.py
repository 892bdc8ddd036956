"""Self-test checks for the ADR-0232 binding, corroboration and commit admission.

The binding checks replay the reference chain (a copy of
``fixtures/binding/reference-chain.json`` ships with the package; a test keeps the two
identical): `kernel` must reproduce the origin implementation's binding and refusal
ids byte for byte. The corroboration and admission checks are the seeds' boundary
cases. Each check raises `SelfTestFailure` with what it saw.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable
from typing import Any

from kernel.corroboration.commit_admission import (
    Admission,
    Branch,
    CommitReason,
    CommitRefusal,
    Draft,
    EvidenceClass,
    VerifierOutcome,
    admit_to_commit,
)
from kernel.corroboration.consensus import (
    CaptureStatus,
    Consensus,
    Isolation,
    NoConsensus,
    RunObservation,
    build_consensus,
)
from kernel.effects.files import load_json
from kernel.errors import SelfTestFailure
from kernel.search.binding import (
    CandidateAttemptRunBinding,
    CandidateAttemptRunBindingRefusal,
    bind_candidate_attempt_to_run,
)
from kernel.search.records import CandidateOperatorResult, GeometricSearchRun

__all__ = ["BIND_CHECKS", "REFERENCE_CHAIN", "reference_chain"]

REFERENCE_CHAIN = "data/adr0232-reference-chain.json"
"""The packaged reference chain, relative to this package."""


def reference_chain() -> dict[str, Any]:
    """The packaged ADR-0232 reference chain (a copy of fixtures/binding's)."""
    resource = importlib.resources.files(__package__).joinpath(REFERENCE_CHAIN)
    with importlib.resources.as_file(resource) as path:
        chain = load_json(path, what="packaged reference chain")
    if not isinstance(chain, dict):
        raise SelfTestFailure("the packaged reference chain is not a JSON object")
    return chain


def _reference_binding() -> None:
    chain = reference_chain()
    run = GeometricSearchRun.from_dict(chain["geometric_search_run"])
    result = CandidateOperatorResult.from_dict(chain["candidate_operator_result"])
    outcome = bind_candidate_attempt_to_run(original_run=run, candidate_operator_result=result)
    if not isinstance(outcome, CandidateAttemptRunBinding):
        raise SelfTestFailure(f"the reference chain did not bind: {outcome.reason_codes}")
    if outcome.to_dict() != chain["binding"]:
        raise SelfTestFailure(f"binding {outcome.binding_id} differs from the reference")


def _reference_refusal() -> None:
    chain = reference_chain()
    case = chain["refusal_case"]
    run = GeometricSearchRun.from_dict(chain["geometric_search_run"])
    document = {**chain["candidate_operator_result"], **case["candidate_operator_result_change"]}
    result = CandidateOperatorResult.from_dict(document, verify_ids=False)
    outcome = bind_candidate_attempt_to_run(original_run=run, candidate_operator_result=result)
    if not isinstance(outcome, CandidateAttemptRunBindingRefusal):
        raise SelfTestFailure("a result naming another run was bound")
    document, reference = outcome.to_dict(), case["refusal"]
    # Every field is the reference's; the prose adds what was expected and found after
    # the reference's own sentence (it never enters an id).
    if {**document, "explanation": ""} != {**reference, "explanation": ""} or not document[
        "explanation"
    ].startswith(reference["explanation"] + " "):
        raise SelfTestFailure(f"refusal {outcome.binding_refusal_id} differs from the reference")


def _observation(index: int, digest: str | None) -> RunObservation:
    failed = digest is None
    return RunObservation(
        index=index,
        status=CaptureStatus.FAILED if failed else CaptureStatus.OK,
        exit_code=1 if failed else 0,
        output_digest=digest,
        output_size=None if failed else 5,
        isolation=Isolation.OVERLAY,
        duration_ms=0,
    )


def _plurality_is_not_consensus() -> None:
    a, b = "a" * 64, "b" * 64
    outcome = build_consensus(tuple(_observation(i, d) for i, d in enumerate((a, a, b, None))))
    if not isinstance(outcome, NoConsensus):
        raise SelfTestFailure(f"2 of 4 launched runs gave {type(outcome).__name__}")
    majority = build_consensus(tuple(_observation(i, d) for i, d in enumerate((a, a, a, b))))
    if not isinstance(majority, Consensus) or majority.agreement_count != 3:
        raise SelfTestFailure("3 of 4 identical outputs did not corroborate")


def _correlated_unanimity_is_refused() -> None:
    clone = Draft(output_digest="a" * 64, context_digest="1" * 64, tools=("shell",))
    branch = Branch(branch_id="b", drafts=(clone, clone, clone), verifier=VerifierOutcome.NONE)
    outcome = admit_to_commit(branch)
    if not isinstance(outcome, CommitRefusal) or outcome.reason_codes != (
        CommitReason.UNANIMOUS_CORRELATED_DRAFTS,
    ):
        raise SelfTestFailure("unanimous correlated drafters were admitted without a verifier")
    verified = admit_to_commit(
        Branch(branch_id="b", drafts=(clone, clone, clone), verifier=VerifierOutcome.PASSED)
    )
    if not isinstance(verified, Admission) or verified.evidence_class is not EvidenceClass.VERIFIED:
        raise SelfTestFailure("an independent verifier's pass did not make the branch verified")


BIND_CHECKS: tuple[tuple[str, Callable[[], None]], ...] = (
    ("binding: the ADR-0232 reference chain binds to the reference binding", _reference_binding),
    ("binding: the reference refusal reproduces (its id byte for byte)", _reference_refusal),
    (
        "corroboration: a plurality is not a consensus; a strict majority is",
        _plurality_is_not_consensus,
    ),
    (
        "admission: correlated unanimity is refused; a verifier pass is verified",
        _correlated_unanimity_is_refused,
    ),
)
