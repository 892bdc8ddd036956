"""Binding-record invariants built directly (not through the binder): a binding carries
no reason codes, a refusal exactly one."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from kernel.binding import (
    CandidateAttemptRunBinding,
    CandidateAttemptRunBindingRefusal,
    RunAttemptBindingRefusalReason,
    bind_candidate_attempt_to_run,
)
from kernel.errors import FieldError
from kernel.search import CandidateOperatorResult, GeometricSearchRun

CHAIN = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures/binding/reference-chain.json").read_text()
)
R = RunAttemptBindingRefusalReason


def _binding() -> CandidateAttemptRunBinding:
    outcome = bind_candidate_attempt_to_run(
        original_run=GeometricSearchRun.from_dict(CHAIN["geometric_search_run"]),
        candidate_operator_result=CandidateOperatorResult.from_dict(
            CHAIN["candidate_operator_result"]
        ),
    )
    assert type(outcome) is CandidateAttemptRunBinding
    return outcome


@pytest.mark.parametrize("codes", [("x",), [], (R.INVALID_BINDING_INPUT,)])
def test_a_binding_carries_no_reason_codes(codes: object) -> None:
    with pytest.raises(FieldError, match="a binding carries no reason codes"):
        attrs.evolve(_binding(), reason_codes=codes)  # type: ignore[arg-type]


def test_a_refusal_carries_exactly_one_reason_code() -> None:
    refusal = bind_candidate_attempt_to_run(
        original_run=None,  # type: ignore[arg-type]
        candidate_operator_result=None,  # type: ignore[arg-type]
    )
    assert type(refusal) is CandidateAttemptRunBindingRefusal
    assert len(refusal.reason_codes) == 1
    other = next(r for r in R if r not in refusal.reason_codes)
    for codes in ((), (*refusal.reason_codes, other), [refusal.reason_codes[0]], ("x",)):
        with pytest.raises(FieldError, match="a refusal carries exactly one reason code"):
            attrs.evolve(refusal, reason_codes=codes)  # type: ignore[arg-type]
