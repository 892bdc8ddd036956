"""Tests for kernel.search.records: reference field names, enum values, ids, strict parsing."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings

import kernel.search.records as search
from kernel.errors import RecordError
from kernel.records.values import BudgetCharge, SourceSpan
from kernel.search.records import (
    BudgetConsumed,
    CandidateAttempt,
    CandidateOperatorResult,
    CandidateReconstruction,
    CandidateReplayStatus,
    ComputeBudgetDecision,
    ComputeBudgetStatus,
    GeometricSearchRun,
    RunExhaustionCode,
    SearchGateDecision,
    SearchGateStatus,
    SearchRunDisposition,
    recompute_attempt_id,
    recompute_budget_id,
    recompute_decision_id,
    recompute_operator_result_id,
    recompute_run_id,
)
from kernel.strategies import (
    budget_consumed,
    candidate_attempts,
    candidate_operator_results,
    candidate_reconstructions,
    compute_budget_decisions,
    geometric_search_runs,
    search_gate_decisions,
)

CHAIN = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures/binding/reference-chain.json").read_text()
)


def H(payload: object) -> str:
    """Stdlib canonical JSON + SHA-256, independent of kernel."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def without(document: dict[str, Any], *keys: str) -> dict[str, Any]:
    """A copy of ``document`` without ``keys``."""
    return {k: v for k, v in document.items() if k not in keys}


def test_public_api_exports() -> None:
    """kernel.search.records exports exactly its records, enums, constants and recompute_*."""
    assert sorted(search.__all__) == sorted(
        [
            "CANDIDATE_OPERATOR_POLICY_VERSION",
            "COMPUTE_BUDGET_POLICY_VERSION",
            "GEOMETRIC_SEARCH_RUN_POLICY_VERSION",
            "GEOMETRIC_SEARCH_RUN_SCHEMA_VERSION",
            "SEARCH_GATE_POLICY_VERSION",
            "BudgetCharge",
            "BudgetConsumed",
            "CandidateAttempt",
            "CandidateOperatorResult",
            "CandidateReconstruction",
            "CandidateReplayStatus",
            "ComputeBudgetDecision",
            "ComputeBudgetStatus",
            "GeometricSearchRun",
            "RunExhaustionCode",
            "SearchGateDecision",
            "SearchGateStatus",
            "SearchRunDisposition",
            "SourceSpan",
            "recompute_attempt_id",
            "recompute_budget_id",
            "recompute_decision_id",
            "recompute_operator_result_id",
            "recompute_run_id",
        ]
    )
    assert search.SourceSpan is SourceSpan
    assert search.BudgetCharge is BudgetCharge


def test_enum_values_are_the_reference_values() -> None:
    """Enum values equal the reference implementation's, in its order."""
    assert [m.value for m in CandidateReplayStatus] == [
        "replay_pending",
        "replay_closed",
        "replay_refused",
    ]
    assert [m.value for m in SearchRunDisposition] == [
        "not_started",
        "blocked_by_budget",
        "blocked_by_gate",
        "invalid_input",
        "exhausted_no_candidate",
        "candidate_replay_pending",
        "candidate_replay_closed",
        "candidate_replay_refused",
    ]
    assert [m.value for m in RunExhaustionCode] == [
        "operator_set_empty",
        "operator_space_depleted",
        "max_candidates_reached",
        "max_depth_reached",
        "max_steps_reached",
    ]
    assert [m.value for m in SearchGateStatus] == [
        "eligible",
        "ineligible",
        "blocked",
        "unassessable",
    ]
    assert [m.value for m in ComputeBudgetStatus] == [
        "budget_allowed",
        "budget_blocked",
        "budget_zero",
        "budget_unassessable",
    ]


@pytest.mark.parametrize(
    ("cls", "key"),
    [
        (GeometricSearchRun, "geometric_search_run"),
        (CandidateOperatorResult, "candidate_operator_result"),
        (SearchGateDecision, "search_gate_decision"),
        (ComputeBudgetDecision, "compute_budget_decision"),
    ],
)
def test_reference_documents_round_trip_field_for_field(cls: Any, key: str) -> None:
    """Each reference document parses and its to_dict equals it, key order included."""
    document = CHAIN[key]
    record = cls.from_dict(document)
    assert record.to_dict() == document
    assert list(record.to_dict()) == [f.name for f in attrs.fields(cls)]


def test_reference_ids_reproduce_with_stdlib_and_kernel() -> None:
    """run_id, attempt_id, operator_result_id, decision_id, budget_id: stdlib == kernel."""
    run_doc = CHAIN["geometric_search_run"]
    res_doc = CHAIN["candidate_operator_result"]
    att_doc = res_doc["candidate_attempt"]
    gate_doc = CHAIN["search_gate_decision"]
    budget_doc = CHAIN["compute_budget_decision"]
    assert H({**without(att_doc, "explanation"), "attempt_id": ""}) == att_doc["attempt_id"]
    assert H({**without(run_doc, "explanation"), "run_id": ""}) == run_doc["run_id"]
    fields = [
        "operator_policy_version",
        "input_digest",
        "geometric_search_run_id",
        "attempt_id",
        "attempt_index",
        "candidate_digest",
        "candidate_reconstruction_digest",
        "candidate_organ",
        "operator_name",
        "operator_version",
        "reason_codes",
        "evidence_spans",
    ]
    assert (
        H({**{k: res_doc[k] for k in fields}, "operator_result_id": ""})
        == res_doc["operator_result_id"]
    )
    assert H(without(gate_doc, "explanation", "decision_id")) == gate_doc["decision_id"]
    assert (
        H(without(budget_doc, "explanation", "budget_id", "max_wallclock_ms"))
        == budget_doc["budget_id"]
    )
    run = GeometricSearchRun.from_dict(run_doc)
    result = CandidateOperatorResult.from_dict(res_doc)
    assert recompute_run_id(run) == run.run_id
    assert recompute_attempt_id(result.candidate_attempt) == att_doc["attempt_id"]
    assert recompute_operator_result_id(result) == result.operator_result_id
    assert recompute_decision_id(SearchGateDecision.from_dict(gate_doc)) == gate_doc["decision_id"]
    assert (
        recompute_budget_id(ComputeBudgetDecision.from_dict(budget_doc)) == budget_doc["budget_id"]
    )


def test_wallclock_and_explanation_never_enter_ids() -> None:
    """Changing max_wallclock_ms or any explanation leaves every id unchanged."""
    budget = ComputeBudgetDecision.from_dict(CHAIN["compute_budget_decision"])
    assert recompute_budget_id(attrs.evolve(budget, max_wallclock_ms=99)) == budget.budget_id
    run = GeometricSearchRun.from_dict(CHAIN["geometric_search_run"])
    assert recompute_run_id(attrs.evolve(run, explanation="other")) == run.run_id


def test_from_dict_refuses_ids_that_do_not_reproduce() -> None:
    """A tampered document is refused naming the id path, unless verify_ids=False."""
    doc = copy.deepcopy(CHAIN["candidate_operator_result"])
    doc["candidate_attempt"]["depth"] = 2
    with pytest.raises(RecordError) as info:
        CandidateOperatorResult.from_dict(doc)
    assert info.value.path == "candidate_attempt.attempt_id"
    assert CandidateOperatorResult.from_dict(doc, verify_ids=False).candidate_attempt.depth == 2
    run_doc = copy.deepcopy(CHAIN["geometric_search_run"])
    run_doc["budget_consumed"]["steps_used"] = 1
    with pytest.raises(RecordError) as info:
        GeometricSearchRun.from_dict(run_doc)
    assert info.value.path == "run_id"


def test_reconstruction_digest_is_taken_as_given() -> None:
    """CandidateReconstruction declares no recomputable id: any digest parses."""
    doc = copy.deepcopy(CHAIN["candidate_operator_result"]["candidate_reconstruction"])
    doc["candidate_reconstruction_digest"] = "1" * 64
    assert CandidateReconstruction.from_dict(doc).candidate_reconstruction_digest == "1" * 64


BAD_FIELDS = [
    ("candidate_attempt.attempt_index", True, "candidate_attempt.attempt_index"),
    ("candidate_attempt.depth", 2**53, "candidate_attempt.depth"),
    ("candidate_attempt.candidate_digest", "bad", "candidate_attempt.candidate_digest"),
    ("candidate_attempt.replay_status", "replay_maybe", "candidate_attempt.replay_status"),
    ("candidate_attempt.budget_charge.steps", 1.0, "candidate_attempt.budget_charge.steps"),
    ("candidate_attempt.budget_charge", None, "candidate_attempt.budget_charge"),
    ("candidate_attempt.evidence_spans", [{"text": "x"}],
     "candidate_attempt.evidence_spans[0].end"),
    ("candidate_reconstruction.candidate_payload", [["a"]],
     "candidate_reconstruction.candidate_payload[0]"),
    ("candidate_reconstruction", None, "candidate_reconstruction"),
    ("reason_codes", "x", "reason_codes"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "value", "reported"), BAD_FIELDS)
def test_from_dict_names_the_failing_path(path: str, value: object, reported: str) -> None:
    """Mistyped, out-of-range or malformed fields are refused with their field path."""
    doc = copy.deepcopy(CHAIN["candidate_operator_result"])
    *parents, last = path.split(".")
    target = doc
    for name in parents:
        target = target[name]
    target[last] = value
    with pytest.raises(RecordError) as info:
        CandidateOperatorResult.from_dict(doc, verify_ids=False)
    assert info.value.path == reported


def test_run_budget_counts_are_non_negative_and_runs_refuse_unknown_fields() -> None:
    """BudgetConsumed counts are >= 0; unknown or missing keys are refused by name."""
    doc = copy.deepcopy(CHAIN["geometric_search_run"])
    doc["budget_consumed"]["steps_used"] = -1
    with pytest.raises(RecordError) as info:
        GeometricSearchRun.from_dict(doc, verify_ids=False)
    assert info.value.path == "budget_consumed.steps_used"
    doc = copy.deepcopy(CHAIN["geometric_search_run"])
    doc["rank"] = 1
    with pytest.raises(RecordError) as info:
        GeometricSearchRun.from_dict(doc)
    assert info.value.path == "rank"


def test_contract_assessment_id_need_not_be_a_digest() -> None:
    """Upstream assessment ids are plain strings ("assessment-a" in the reference)."""
    run = GeometricSearchRun.from_dict(CHAIN["geometric_search_run"])
    assert run.contract_assessment_id == "assessment-a"


@settings(max_examples=60)
@given(geometric_search_runs())
def test_runs_round_trip_and_ids_reproduce(run: GeometricSearchRun) -> None:
    """from_dict(to_dict(run)) == run and the run id reproduces with the stdlib."""
    document = run.to_dict()
    assert GeometricSearchRun.from_dict(document) == run
    payload = without(document, "explanation")
    payload["candidate_attempts"] = [
        without(a, "explanation") for a in document["candidate_attempts"]
    ]
    assert H({**payload, "run_id": ""}) == run.run_id


@settings(max_examples=60)
@given(candidate_attempts())
def test_attempts_round_trip(attempt: CandidateAttempt) -> None:
    """from_dict(to_dict(attempt)) == attempt; explanation never enters its id."""
    assert CandidateAttempt.from_dict(attempt.to_dict()) == attempt
    assert recompute_attempt_id(attrs.evolve(attempt, explanation="x")) == attempt.attempt_id


@settings(max_examples=40)
@given(candidate_operator_results())
def test_results_round_trip(result: CandidateOperatorResult) -> None:
    """from_dict(to_dict(result)) == result."""
    assert CandidateOperatorResult.from_dict(result.to_dict()) == result


@settings(max_examples=40)
@given(search_gate_decisions(), compute_budget_decisions())
def test_decisions_round_trip(gate: SearchGateDecision, budget: ComputeBudgetDecision) -> None:
    """Gate and budget decisions round-trip and their ids reproduce."""
    assert SearchGateDecision.from_dict(gate.to_dict()) == gate
    assert ComputeBudgetDecision.from_dict(budget.to_dict()) == budget


@settings(max_examples=40)
@given(candidate_reconstructions(), budget_consumed())
def test_plain_records_round_trip(
    reconstruction: CandidateReconstruction, consumed: BudgetConsumed
) -> None:
    """Reconstructions and consumption records round-trip."""
    assert CandidateReconstruction.from_dict(reconstruction.to_dict()) == reconstruction
    assert BudgetConsumed.from_dict(consumed.to_dict()) == consumed


def test_records_are_frozen_and_tuple_typed() -> None:
    """Records cannot be mutated and refuse lists where tuples belong."""
    run = GeometricSearchRun.from_dict(CHAIN["geometric_search_run"])
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        run.run_id = "0" * 64  # type: ignore[misc]
    with pytest.raises(ValueError, match="tuple"):
        attrs.evolve(run, residual_ids=list(run.residual_ids))  # type: ignore[arg-type]
