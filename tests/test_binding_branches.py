"""Binding-record invariants built directly (not through the binder): a binding carries
no reason codes, a refusal exactly one."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings

from kernel.errors import FieldError
from kernel.search.binding import (
    CandidateAttemptRunBinding,
    CandidateAttemptRunBindingRefusal,
    RunAttemptBindingRefusalReason,
    bind_candidate_attempt_to_run,
    verify_binding,
)
from kernel.search.records import CandidateOperatorResult, GeometricSearchRun
from kernel.strategies import binding_pairs

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


@pytest.mark.parametrize(
    ("codes", "message"),
    [
        (("x",), "a binding carries no reason codes"),
        ([], "reason_codes: expected a tuple, got list"),
        ((R.INVALID_BINDING_INPUT,), r"reason_codes\[0\]: expected str, got RunAttempt"),
        (("",), "a binding carries no reason codes"),
    ],
)
def test_a_binding_carries_no_reason_codes(codes: object, message: str) -> None:
    with pytest.raises(FieldError, match=message):
        attrs.evolve(_binding(), reason_codes=codes)  # type: ignore[arg-type]


def test_a_refusal_carries_exactly_one_reason_code() -> None:
    refusal = bind_candidate_attempt_to_run(
        original_run=None,  # type: ignore[arg-type]
        candidate_operator_result=None,  # type: ignore[arg-type]
    )
    assert type(refusal) is CandidateAttemptRunBindingRefusal
    assert len(refusal.reason_codes) == 1
    other = next(r for r in R if r not in refusal.reason_codes)
    for codes in ((), (*refusal.reason_codes, other)):
        with pytest.raises(FieldError, match="a refusal carries exactly one reason code"):
            attrs.evolve(refusal, reason_codes=codes)
    with pytest.raises(FieldError, match="reason_codes: expected a tuple, got list"):
        attrs.evolve(refusal, reason_codes=[refusal.reason_codes[0]])  # type: ignore[arg-type]
    with pytest.raises(FieldError, match=r"reason_codes\[0\]: expected a RunAttemptBinding"):
        attrs.evolve(refusal, reason_codes=("x",))  # type: ignore[arg-type]


def _chain() -> tuple[GeometricSearchRun, CandidateOperatorResult]:
    return (
        GeometricSearchRun.from_dict(CHAIN["geometric_search_run"]),
        CandidateOperatorResult.from_dict(CHAIN["candidate_operator_result"]),
    )


def _forged(record: Any, **changes: Any) -> Any:
    """A copy of ``record`` altered after construction (bypassing its validators)."""
    copy_ = copy.copy(record)
    for name, value in changes.items():
        object.__setattr__(copy_, name, value)
    return copy_


@pytest.mark.parametrize("versions", [(("a",),), (("a", "b", "c"),), ["x"]])
def test_malformed_schema_versions_are_unsupported(versions: Any) -> None:
    run, result = _chain()
    outcome = bind_candidate_attempt_to_run(
        original_run=run, candidate_operator_result=result, schema_versions=versions
    )
    assert type(outcome) is CandidateAttemptRunBindingRefusal
    assert outcome.reason_codes == (R.UNSUPPORTED_SCHEMA_VERSION,)


@pytest.mark.parametrize("value", ["g" * 64, "A" * 64, " " + "a" * 63])
def test_a_64_character_id_that_is_not_lowercase_hex_is_malformed(value: str) -> None:
    run, result = _chain()
    outcome = bind_candidate_attempt_to_run(
        original_run=_forged(run, budget_id=value), candidate_operator_result=result
    )
    assert type(outcome) is CandidateAttemptRunBindingRefusal
    assert outcome.reason_codes == (R.MALFORMED_INPUT_FIELD,)


def test_a_binding_whose_id_cannot_be_recomputed_does_not_verify() -> None:
    run, result = _chain()
    forged = _forged(_binding(), original_run_id="\ud800")
    outcome = verify_binding(forged, original_run=run, candidate_operator_result=result)
    assert type(outcome) is CandidateAttemptRunBindingRefusal
    assert outcome.reason_codes == (R.BINDING_ID_MISMATCH,)


@settings(max_examples=25)
@given(binding_pairs(max_existing=3).filter(lambda pair: len(pair[0].candidate_attempts) >= 2))
def test_an_existing_attempt_without_an_exact_charge_leaves_the_run_unaccounted(
    pair: tuple[GeometricSearchRun, CandidateOperatorResult],
) -> None:
    """Once one existing attempt's charge is not an exact BudgetCharge, what the earlier
    attempts charged is unknown, whatever the later ones say: check 25 refuses."""
    run, result = pair
    first, *rest = run.candidate_attempts
    attempts = (_forged(first, budget_charge=None), *rest)
    outcome = bind_candidate_attempt_to_run(
        original_run=_forged(run, candidate_attempts=attempts), candidate_operator_result=result
    )
    assert type(outcome) is CandidateAttemptRunBindingRefusal
    assert outcome.reason_codes == (R.RUN_ACCOUNTING_UNDERSTATED,)
