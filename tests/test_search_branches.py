"""Search-record validators the main tests do not reach: built directly (not parsed,
where the codec's types refuse first), each record still refuses the value its
validator exists for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from kernel.errors import FieldError
from kernel.search.records import CandidateOperatorResult, ComputeBudgetDecision, SearchGateDecision

CHAIN = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures/binding/reference-chain.json").read_text()
)


def _result() -> CandidateOperatorResult:
    return CandidateOperatorResult.from_dict(CHAIN["candidate_operator_result"], verify_ids=False)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([("a", "b")], "candidate_payload: expected a tuple, got list"),
        ((("a",),), r"candidate_payload\[0\]: expected 2 items, got 1"),
        ((("a", 1),), r"candidate_payload\[0\]\[1\]: expected str, got int 1"),
        ((("a", "b"), ["c", "d"]), r"candidate_payload\[1\]: expected a tuple, got list"),
    ],
)
def test_candidate_payload_is_a_tuple_of_string_pairs(value: Any, message: str) -> None:
    reconstruction = _result().candidate_reconstruction
    with pytest.raises(FieldError, match=message):
        attrs.evolve(reconstruction, candidate_payload=value)
    kept = attrs.evolve(reconstruction, candidate_payload=(("a", "b"), ("a", "b")))
    assert kept.candidate_payload == (("a", "b"), ("a", "b"))


def test_a_gate_decision_organ_is_a_string_or_none() -> None:
    decision = SearchGateDecision.from_dict(CHAIN["search_gate_decision"], verify_ids=False)
    with pytest.raises(FieldError, match="candidate_organ: expected str or None, got int 5"):
        attrs.evolve(decision, candidate_organ=5)  # type: ignore[arg-type]
    assert attrs.evolve(decision, candidate_organ=None).candidate_organ is None


def test_nested_records_must_be_exactly_their_class() -> None:
    result = _result()
    attempt = result.candidate_attempt

    class LookAlike(type(attempt.budget_charge)):  # type: ignore[misc]
        pass

    impostor = LookAlike(candidates=1, steps=1)
    with pytest.raises(FieldError, match="budget_charge: expected a BudgetCharge, got LookAlike"):
        attrs.evolve(attempt, budget_charge=impostor)
    with pytest.raises(
        FieldError, match="candidate_attempt: expected a CandidateAttempt, got dict"
    ):
        attrs.evolve(result, candidate_attempt={})  # type: ignore[arg-type]


def test_the_wallclock_ceiling_outside_the_id_is_still_a_count() -> None:
    # Not in the budget's id (so no id check would notice it): only its kind guards it.
    budget = ComputeBudgetDecision.from_dict(CHAIN["compute_budget_decision"], verify_ids=False)
    with pytest.raises(
        FieldError,
        match=r"ComputeBudgetDecision\.max_wallclock_ms: expected an integer in 0\.\.2\*\*53-1"
        r" or None, got -1",
    ):
        attrs.evolve(budget, max_wallclock_ms=-1)
    assert attrs.evolve(budget, max_wallclock_ms=None).max_wallclock_ms is None
