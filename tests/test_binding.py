"""Tests for kernel.search.binding: ADR-0232 section 19 obligations (numbered) and controls.

Ids are recomputed here with the stdlib (json + hashlib), never through kernel.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel.search.binding as binding_module
from kernel.errors import RefusedError
from kernel.guard import check_source, load_policy
from kernel.records.codec import compute_id
from kernel.records.values import SourceSpan, unwrap
from kernel.search.binding import (
    CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION,
    CandidateAttemptRunBinding,
    CandidateAttemptRunBindingInput,
    CandidateAttemptRunBindingRefusal,
    RunAttemptBindingRefusalReason,
    RunAttemptMembership,
    bind_candidate_attempt_to_run,
    verify_binding,
    verify_binding_set,
)
from kernel.search.records import (
    BudgetCharge,
    CandidateAttempt,
    CandidateOperatorResult,
    CandidateReplayStatus,
    GeometricSearchRun,
)
from kernel.strategies import (
    binding_pairs,
    binding_refusals,
    bindings,
    corrupted_binding_pairs,
    source_spans,
)

R = RunAttemptBindingRefusalReason
ROOT = Path(__file__).resolve().parents[1]
CHAIN = json.loads((ROOT / "fixtures/binding/reference-chain.json").read_text())
ADR = ROOT / "docs/adr/ADR-0232-candidate-attempt-run-binding.md"
Outcome = CandidateAttemptRunBinding | CandidateAttemptRunBindingRefusal


def H(payload: object) -> str:
    """Stdlib canonical JSON + SHA-256, independent of kernel."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chain() -> tuple[GeometricSearchRun, CandidateOperatorResult]:
    """The reference chain as kernel records."""
    return (
        GeometricSearchRun.from_dict(CHAIN["geometric_search_run"]),
        CandidateOperatorResult.from_dict(CHAIN["candidate_operator_result"]),
    )


def bind(run: object, result: object, **kwargs: Any) -> Outcome:
    """bind_candidate_attempt_to_run with loosely typed arguments (for bad input)."""
    return bind_candidate_attempt_to_run(
        original_run=run,  # type: ignore[arg-type]
        candidate_operator_result=result,  # type: ignore[arg-type]
        **kwargs,
    )


def code_of(outcome: object) -> R:
    """The single reason code of a refusal (fails on a binding)."""
    assert type(outcome) is CandidateAttemptRunBindingRefusal, outcome
    assert len(outcome.reason_codes) == 1
    return outcome.reason_codes[0]


def evolve_attempt(result: CandidateOperatorResult, **changes: Any) -> CandidateOperatorResult:
    """The result with its attempt changed (ids not re-sealed, as the reference's tests)."""
    return attrs.evolve(result, candidate_attempt=attrs.evolve(result.candidate_attempt, **changes))


def evolve_recon(result: CandidateOperatorResult, **changes: Any) -> CandidateOperatorResult:
    """The result with its reconstruction changed (not re-sealed)."""
    return attrs.evolve(
        result, candidate_reconstruction=attrs.evolve(result.candidate_reconstruction, **changes)
    )


def evolve_consumed(run: GeometricSearchRun, **changes: Any) -> GeometricSearchRun:
    """The run with its budget consumption changed (not re-sealed)."""
    return attrs.evolve(run, budget_consumed=attrs.evolve(run.budget_consumed, **changes))


def forged(record: Any, **changes: Any) -> Any:
    """A copy of ``record`` altered after construction (bypassing its validators)."""
    copy_ = copy.copy(record)
    for name, value in changes.items():
        object.__setattr__(copy_, name, value)
    return copy_


OTHER = "1" * 64


# -- 1. public API --------------------------------------------------------------------


def test_01_public_api_exports_are_exact() -> None:
    """(1) __all__ is the reference's seven names, then kernel's additions, in order."""
    assert binding_module.__all__ == [
        "CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION",
        "RunAttemptBindingRefusalReason",
        "CandidateAttemptRunBindingInput",
        "CandidateAttemptRunBinding",
        "CandidateAttemptRunBindingRefusal",
        "CandidateAttemptRunBindingOutcome",
        "bind_candidate_attempt_to_run",
        "BINDING_POLICY_NAME",
        "RunAttemptMembership",
        "verify_binding",
        "verify_binding_set",
    ]
    assert CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION == "candidate_attempt_run_binding.v1"
    assert [m.value for m in R][:15] == [
        "invalid_binding_input",
        "unsupported_binding_policy",
        "run_result_mismatch",
        "attempt_result_mismatch",
        "reconstruction_result_mismatch",
        "replay_status_not_pending",
        "replay_blockers_present",
        "duplicate_attempt_index",
        "duplicate_attempt_id",
        "duplicate_candidate_digest",
        "budget_charge_exceeds_remaining",
        "operator_set_mismatch",
        "run_identity_mismatch",
        "malformed_evidence_span",
        "unsupported_schema_version",
    ]


# -- 2-4. valid binding, determinism, no mutation, explanation ------------------------


def test_02_reference_chain_binds_to_the_reference_binding() -> None:
    """(2) The reference chain binds to exactly fixture-a's binding, deterministically."""
    run, result = chain()
    first = bind(run, result)
    second = bind(run, result)
    assert type(first) is CandidateAttemptRunBinding
    assert first == second
    assert first.to_dict() == CHAIN["binding"]
    assert first.run_attempt_membership is RunAttemptMembership.STRUCTURALLY_BOUND
    assert first.reason_codes == ()


def test_02_reference_ids_recompute_with_the_stdlib() -> None:
    """(2, control) input_digest, candidate_attempt_ref, binding_id from the stdlib."""
    run_doc = CHAIN["geometric_search_run"]
    res_doc = CHAIN["candidate_operator_result"]
    attempt = res_doc["candidate_attempt"]
    expected = CHAIN["binding"]
    input_payload = {
        "binding_policy_version": "candidate_attempt_run_binding.v1",
        "original_run_id": run_doc["run_id"],
        "original_run_policy_version": run_doc["run_policy_version"],
        "original_run_input_digest": run_doc["input_digest"],
        "operator_result_id": res_doc["operator_result_id"],
        "operator_policy_version": res_doc["operator_policy_version"],
        "candidate_attempt_id": attempt["attempt_id"],
        "attempt_index": attempt["attempt_index"],
        "candidate_digest": attempt["candidate_digest"],
        "candidate_reconstruction_digest": res_doc["candidate_reconstruction_digest"],
        "operator_set_id": run_doc["operator_set_id"],
        "operator_set_version": run_doc["operator_set_version"],
        "budget_id": run_doc["budget_id"],
        "gate_decision_id": run_doc["gate_decision_id"],
        "residual_ids": run_doc["residual_ids"],
        "problem_frame_digest": run_doc["problem_frame_digest"],
        "original_contract_assessment_id": run_doc["contract_assessment_id"],
        "schema_versions": [],
        "policy_versions": [],
    }
    ref = H({k: v for k, v in attempt.items() if k != "explanation"})
    binding_payload = {k: v for k, v in expected.items() if k != "explanation"}
    run, result = chain()
    outcome = bind(run, result)
    assert type(outcome) is CandidateAttemptRunBinding
    assert outcome.input_digest == H(input_payload) == expected["input_digest"]
    assert outcome.candidate_attempt_ref == ref == expected["candidate_attempt_ref"]
    assert outcome.binding_id == H({**binding_payload, "binding_id": ""})
    assert outcome.binding_id == expected["binding_id"]
    # The binding_id payload covers candidate_attempt_ref and the input digest.
    assert H({**binding_payload, "binding_id": "", "candidate_attempt_ref": OTHER}) != (
        outcome.binding_id
    )


def test_02_ids_hash_an_attempt_altered_after_its_nested_form_was_cached() -> None:
    """An attempt altered in place (a valid value) after the codec cached its nested form
    (sealing the result hashes it) binds with ids of its fields as they hold now, never
    of the cached values: the binding record and its ids describe the same attempt."""
    run, result = chain()
    attempt = result.candidate_attempt
    compute_id(result)  # caches the attempt's nested form, spans and charge
    object.__setattr__(attempt, "step_index", attempt.step_index + 1)  # our own object
    object.__setattr__(attempt.budget_charge, "steps", attempt.budget_charge.steps + 1)
    outcome = bind(run, result)
    assert type(outcome) is CandidateAttemptRunBinding
    assert outcome.step_index == attempt.step_index
    current = {k: v for k, v in attempt.to_dict().items() if k != "explanation"}
    assert current["step_index"] == attempt.step_index
    assert outcome.candidate_attempt_ref == H(current) != CHAIN["binding"]["candidate_attempt_ref"]
    document = outcome.to_dict()
    assert document["budget_charge"]["steps"] == attempt.budget_charge.steps
    payload = {k: v for k, v in document.items() if k != "explanation"}
    assert outcome.binding_id == H({**payload, "binding_id": ""})


def test_02_reference_refusal_reproduces() -> None:
    """(5, control) fixture-a's refusal: same code, identities and binding_refusal_id."""
    run, result = chain()
    outcome = bind(run, attrs.evolve(result, geometric_search_run_id="0" * 64))
    expected = CHAIN["refusal_case"]["refusal"]
    assert type(outcome) is CandidateAttemptRunBindingRefusal
    document = outcome.to_dict()
    payload = {k: v for k, v in expected.items() if k != "explanation"}
    # Every field but the prose is the reference's; the prose starts with the
    # reference's sentence, then says what was expected and found (issue 11).
    assert {k: v for k, v in document.items() if k != "explanation"} == payload
    assert document["explanation"].startswith(expected["explanation"] + " ")
    assert "geometric_search_run_id" in document["explanation"]
    assert outcome.binding_refusal_id == H({**payload, "binding_refusal_id": ""})


def snapshot(*records: Any) -> list[dict[str, Any]]:
    """Deep JSON snapshots of records (to prove they were not mutated)."""
    return [copy.deepcopy(r.to_dict()) for r in records]


def test_03_binding_does_not_mutate_the_run_or_the_result() -> None:
    """(3, control) run attempts tuple, budget_consumed and the result are unchanged."""
    run, result = chain()
    before = snapshot(run, result)
    attempts, consumed = run.candidate_attempts, run.budget_consumed
    outcome = bind(run, result)
    assert type(outcome) is CandidateAttemptRunBinding
    assert snapshot(run, result) == before
    assert run.candidate_attempts is attempts
    assert run.candidate_attempts == ()
    assert run.budget_consumed is consumed
    assert compute_id(run) == run.run_id
    assert outcome.original_run_id == run.run_id


def test_04_explanation_never_enters_an_id() -> None:
    """(4) Different explanations: same input_digest, ref and binding_id; default prose."""
    run, result = chain()
    first = bind(run, result, explanation="first")
    second = bind(run, result, explanation="second")
    default = bind(run, result)
    assert type(first) is type(second) is type(default) is CandidateAttemptRunBinding
    assert first.explanation == "first"
    assert default.explanation == "CandidateAttempt structurally bound to GeometricSearchRun."
    for name in ("input_digest", "candidate_attempt_ref", "binding_id"):
        assert getattr(first, name) == getattr(second, name) == getattr(default, name)


# -- 5-15, 17: one vector per reason code and per sub-check (kills the mutants) ------


def _run(change: Callable[[GeometricSearchRun], GeometricSearchRun]) -> Callable[..., Any]:
    return lambda run, result: (change(run), result, {})


def _res(
    change: Callable[[CandidateOperatorResult], CandidateOperatorResult],
) -> Callable[..., Any]:
    return lambda run, result: (run, change(result), {})


def _existing(result: CandidateOperatorResult, **changes: Any) -> CandidateAttempt:
    return attrs.evolve(result.candidate_attempt, **changes)


VECTORS: dict[str, tuple[R, Callable[..., Any]]] = {
    # 5: run_result_mismatch
    "result names another run": (
        R.RUN_RESULT_MISMATCH, _res(lambda o: attrs.evolve(o, geometric_search_run_id=OTHER))),
    # 6: attempt_result_mismatch, each compared field on its own
    "attempt_id": (R.ATTEMPT_RESULT_MISMATCH, _res(lambda o: attrs.evolve(o, attempt_id=OTHER))),
    "attempt_index": (
        R.ATTEMPT_RESULT_MISMATCH, _res(lambda o: attrs.evolve(o, attempt_index=1))),
    "candidate_digest (result)": (
        R.ATTEMPT_RESULT_MISMATCH, _res(lambda o: attrs.evolve(o, candidate_digest=OTHER))),
    "candidate_digest (attempt)": (
        R.ATTEMPT_RESULT_MISMATCH, _res(lambda o: evolve_attempt(o, candidate_digest=OTHER))),
    "input_digest": (
        R.ATTEMPT_RESULT_MISMATCH, _res(lambda o: evolve_attempt(o, input_digest=OTHER))),
    "operator_name vs operator_id": (
        R.ATTEMPT_RESULT_MISMATCH, _res(lambda o: evolve_attempt(o, operator_id="other"))),
    "operator_version": (
        R.ATTEMPT_RESULT_MISMATCH, _res(lambda o: attrs.evolve(o, operator_version="v9"))),
    # 7: reconstruction_result_mismatch (8, 9 of the ADR list)
    "reconstruction candidate_digest": (
        R.RECONSTRUCTION_RESULT_MISMATCH, _res(lambda o: evolve_recon(o, candidate_digest=OTHER))),
    "reconstruction digest": (
        R.RECONSTRUCTION_RESULT_MISMATCH,
        _res(lambda o: evolve_recon(o, candidate_reconstruction_digest=OTHER))),
    "result reconstruction digest": (
        R.RECONSTRUCTION_RESULT_MISMATCH,
        _res(lambda o: attrs.evolve(o, candidate_reconstruction_digest=OTHER))),
    # 8, 9 (ADR 10, 11)
    "replay closed": (
        R.REPLAY_STATUS_NOT_PENDING,
        _res(lambda o: evolve_attempt(o, replay_status=CandidateReplayStatus.REPLAY_CLOSED))),
    "replay refused": (
        R.REPLAY_STATUS_NOT_PENDING,
        _res(lambda o: evolve_attempt(o, replay_status=CandidateReplayStatus.REPLAY_REFUSED))),
    "replay blockers": (
        R.REPLAY_BLOCKERS_PRESENT, _res(lambda o: evolve_attempt(o, replay_blockers=("x",)))),
    # 10: run_identity_mismatch, each field
    "source residual": (
        R.RUN_IDENTITY_MISMATCH, _res(lambda o: evolve_recon(o, source_residual_id=OTHER))),
    "problem frame": (
        R.RUN_IDENTITY_MISMATCH, _res(lambda o: evolve_recon(o, problem_frame_digest=OTHER))),
    "assessment id": (
        R.RUN_IDENTITY_MISMATCH,
        _res(lambda o: evolve_recon(o, original_contract_assessment_id="assessment-b"))),
    # 11 (ADR 15): operator_set_mismatch, id and version
    "operator set id": (
        R.OPERATOR_SET_MISMATCH, _run(lambda r: attrs.evolve(r, operator_set_id=OTHER))),
    "operator set version": (
        R.OPERATOR_SET_MISMATCH, _run(lambda r: attrs.evolve(r, operator_set_version="v1"))),
    # 12 (ADR 17): malformed_evidence_span
    "result spans differ": (
        R.MALFORMED_EVIDENCE_SPAN, _res(lambda o: attrs.evolve(o, evidence_spans=()))),
    "reconstruction spans differ": (
        R.MALFORMED_EVIDENCE_SPAN, _res(lambda o: evolve_recon(o, evidence_spans=()))),
    "span end before start (forged)": (
        R.MALFORMED_EVIDENCE_SPAN,
        _res(lambda o: evolve_attempt(o, evidence_spans=(
            forged(o.evidence_spans[0], end=1),)))),
    "span is not a span (forged)": (
        R.MALFORMED_EVIDENCE_SPAN,
        _res(lambda o: forged(o, candidate_attempt=forged(o.candidate_attempt,
                                                          evidence_spans=(object(),))))),
    "span start is bool (forged)": (
        R.MALFORMED_EVIDENCE_SPAN,
        _res(lambda o: forged(o, candidate_attempt=forged(o.candidate_attempt, evidence_spans=(
            forged(o.evidence_spans[0], start=True),))))),
    "same invalid span in every stream (forged)": (
        R.MALFORMED_EVIDENCE_SPAN,
        lambda run, o: (run, _all_spans(o, forged(o.evidence_spans[0], end=1)), {})),
    "same bool-start span in every stream (forged)": (
        R.MALFORMED_EVIDENCE_SPAN,
        lambda run, o: (run, _all_spans(o, forged(o.evidence_spans[0], start=False)), {})),
    "same non-span in every stream (forged)": (
        R.MALFORMED_EVIDENCE_SPAN, lambda run, o: (run, _all_spans(o, object()), {})),
    "span sentence_index negative (forged)": (
        R.MALFORMED_EVIDENCE_SPAN,
        lambda run, o: (run, _all_spans(o, forged(o.evidence_spans[0], sentence_index=-1)), {})),
    # 13 (ADR 12, 13, v1 digest rule): duplicates
    "duplicate index": (
        R.DUPLICATE_ATTEMPT_INDEX,
        lambda r, o: (attrs.evolve(r, candidate_attempts=(
            _existing(o, attempt_id=OTHER, candidate_digest=OTHER),)), o, {})),
    "duplicate id": (
        R.DUPLICATE_ATTEMPT_ID,
        lambda r, o: (attrs.evolve(r, candidate_attempts=(
            _existing(o, attempt_index=1, candidate_digest=OTHER),)), o, {})),
    "duplicate candidate digest": (
        R.DUPLICATE_CANDIDATE_DIGEST,
        lambda r, o: (attrs.evolve(r, candidate_attempts=(
            _existing(o, attempt_index=1, attempt_id=OTHER),)), o, {})),
    # 14 (ADR 14): budget, each sub-check and its boundary
    "candidates 5 of 5": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING,
        _run(lambda r: evolve_consumed(r, candidates_considered=5))),
    "steps 10 of 10": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING, _run(lambda r: evolve_consumed(r, steps_used=10))),
    "depth max + 1": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING, _res(lambda o: evolve_attempt(o, depth=3))),
    "depth reached beyond max": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING, _run(lambda r: evolve_consumed(r, depth_reached=3))),
    "parallelism used 2 > 1": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING, _run(lambda r: evolve_consumed(r, parallelism_used=2))),
    "negative candidate charge": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING,
        _res(lambda o: evolve_attempt(o, budget_charge=BudgetCharge(candidates=-1, steps=1)))),
    "negative step charge": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING,
        _res(lambda o: evolve_attempt(o, budget_charge=BudgetCharge(candidates=1, steps=-1)))),
    "negative depth": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING, _res(lambda o: evolve_attempt(o, depth=-1))),
    "negative step_index": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING, _res(lambda o: evolve_attempt(o, step_index=-1))),
    # 4 (ADR 25-ish): version pairs
    "unsorted schema versions": (
        R.UNSUPPORTED_SCHEMA_VERSION,
        lambda r, o: (r, o, {"schema_versions": (("b", "1"), ("a", "1"))})),
    "duplicate policy versions": (
        R.UNSUPPORTED_SCHEMA_VERSION,
        lambda r, o: (r, o, {"policy_versions": (("a", "1"), ("a", "2"))})),
    "empty version name": (
        R.UNSUPPORTED_SCHEMA_VERSION, lambda r, o: (r, o, {"schema_versions": (("", "1"),)})),
    "version pairs as a list": (
        R.UNSUPPORTED_SCHEMA_VERSION, lambda r, o: (r, o, {"policy_versions": [("a", "1")]})),
    "version pairs None": (
        R.UNSUPPORTED_SCHEMA_VERSION, lambda r, o: (r, o, {"schema_versions": None})),
    # kernel's stricter checks
    "zero candidate charge": (
        R.NON_POSITIVE_BUDGET_CHARGE,
        _res(lambda o: evolve_attempt(o, budget_charge=BudgetCharge(candidates=0, steps=1)))),
    "zero step charge": (
        R.NON_POSITIVE_BUDGET_CHARGE,
        _res(lambda o: evolve_attempt(o, budget_charge=BudgetCharge(candidates=1, steps=0)))),
    "max_parallelism 2": (
        R.UNSUPPORTED_PARALLELISM, _run(lambda r: evolve_consumed(r, max_parallelism=2))),
    "max_parallelism 0": (
        R.UNSUPPORTED_PARALLELISM, _run(lambda r: evolve_consumed(r, max_parallelism=0))),
    "run policy v2": (
        R.UNSUPPORTED_RUN_POLICY, _run(lambda r: attrs.evolve(r, run_policy_version="x.v2"))),
    "run schema v2": (
        R.UNSUPPORTED_RUN_POLICY, _run(lambda r: attrs.evolve(r, schema_version="x.v2"))),
    "operator policy v2": (
        R.UNSUPPORTED_OPERATOR_POLICY,
        _res(lambda o: attrs.evolve(o, operator_policy_version="x.v2"))),
    "another binding policy declared": (
        R.UNSUPPORTED_BINDING_POLICY,
        lambda r, o: (r, o, {"policy_versions": (
            ("candidate_attempt_run_binding", "candidate_attempt_run_binding.v2"),)})),
    "attempt index gap": (
        R.ATTEMPT_INDEX_GAP,
        _res(lambda o: attrs.evolve(evolve_attempt(o, attempt_index=1), attempt_index=1))),
    "negative attempt index": (
        R.ATTEMPT_INDEX_GAP,
        _res(lambda o: attrs.evolve(evolve_attempt(o, attempt_index=-1), attempt_index=-1))),
    "existing attempts out of order": (
        R.AMBIGUOUS_ATTEMPT_ORDER,
        lambda r, o: (
            evolve_consumed(attrs.evolve(r, candidate_attempts=(
                _existing(o, attempt_index=1, attempt_id=OTHER, candidate_digest=OTHER),
                _existing(o, attempt_index=0, attempt_id="2" * 64, candidate_digest="2" * 64),
            )), candidates_considered=2, steps_used=2),
            _at_index(o, 2), {})),
    "run understates candidates": (
        R.RUN_ACCOUNTING_UNDERSTATED,
        lambda r, o: (
            evolve_consumed(attrs.evolve(r, candidate_attempts=(
                _existing(o, attempt_index=0, attempt_id=OTHER, candidate_digest=OTHER),
            )), candidates_considered=0, steps_used=1, depth_reached=1),
            _at_index(o, 1), {})),
    "run understates steps": (
        R.RUN_ACCOUNTING_UNDERSTATED,
        lambda r, o: (
            evolve_consumed(attrs.evolve(r, candidate_attempts=(
                _existing(o, attempt_index=0, attempt_id=OTHER, candidate_digest=OTHER),
            )), candidates_considered=1, steps_used=0, depth_reached=1),
            _at_index(o, 1), {})),
    "run understates depth": (
        R.RUN_ACCOUNTING_UNDERSTATED,
        lambda r, o: (
            evolve_consumed(attrs.evolve(r, candidate_attempts=(
                _existing(o, attempt_index=0, attempt_id=OTHER, candidate_digest=OTHER),
            )), candidates_considered=1, steps_used=1, depth_reached=0),
            _at_index(o, 1), {})),
    "missing reconstruction (forged)": (
        R.MISSING_CANDIDATE_RECONSTRUCTION,
        _res(lambda o: forged(o, candidate_reconstruction=None))),
    "missing budget charge (forged)": (
        R.MISSING_BUDGET_CHARGE,
        _res(lambda o: forged(o, candidate_attempt=forged(
            o.candidate_attempt, budget_charge=None)))),
    "bool attempt index (forged)": (
        R.MALFORMED_INPUT_FIELD,
        _res(lambda o: forged(o, attempt_index=False, candidate_attempt=forged(
            o.candidate_attempt, attempt_index=False)))),
    "bool depth (forged)": (
        R.MALFORMED_INPUT_FIELD,
        _res(lambda o: forged(o, candidate_attempt=forged(o.candidate_attempt, depth=True)))),
    "str budget count (forged)": (
        R.MALFORMED_INPUT_FIELD,
        _run(lambda r: forged(r, budget_consumed=forged(r.budget_consumed, steps_used="0")))),
    "explanation not a str": (R.MALFORMED_INPUT_FIELD, lambda r, o: (r, o, {"explanation": None})),
    "run digest not a digest (forged)": (
        R.MALFORMED_INPUT_FIELD, _run(lambda r: forged(r, budget_id="bad"))),
    "operator_id not a str (forged)": (
        R.MALFORMED_INPUT_FIELD,
        lambda r, o: (r, forged(o, operator_name=7, candidate_attempt=forged(
            o.candidate_attempt, operator_id=7)), {})),
    # A record holding a lone surrogate can no longer be built: forge one.
    "lone surrogate (unencodable, forged)": (
        R.MALFORMED_INPUT_FIELD,
        lambda r, o: (
            forged(r, contract_assessment_id="\ud800"),
            forged(o, candidate_reconstruction=forged(
                o.candidate_reconstruction, original_contract_assessment_id="\ud800")), {})),
    "int beyond 2**53 (forged)": (
        R.MALFORMED_INPUT_FIELD,
        lambda r, o: (
            forged(r, budget_consumed=forged(r.budget_consumed, max_steps=2**60)),
            forged(o, candidate_attempt=forged(
                o.candidate_attempt, budget_charge=forged(
                    o.candidate_attempt.budget_charge, steps=2**54))), {})),
    "residual_ids not a tuple (forged)": (
        R.MALFORMED_INPUT_FIELD, _run(lambda r: forged(r, residual_ids=None))),
    "provenance not a tuple (forged)": (
        R.MALFORMED_INPUT_FIELD,
        _res(lambda o: forged(o, candidate_reconstruction=forged(
            o.candidate_reconstruction, operator_provenance=None)))),
    "attempts not a tuple (forged)": (
        R.MALFORMED_INPUT_FIELD, _run(lambda r: forged(r, candidate_attempts=None))),
    "attempt not an attempt (forged)": (
        R.MALFORMED_INPUT_FIELD, _run(lambda r: forged(r, candidate_attempts=(None,)))),
    "budget_consumed missing (forged)": (
        R.MALFORMED_INPUT_FIELD, _run(lambda r: forged(r, budget_consumed=None))),
}  # fmt: skip


def _all_spans(result: CandidateOperatorResult, span: object) -> Any:
    spans = (span,)
    return forged(
        result,
        evidence_spans=spans,
        candidate_attempt=forged(result.candidate_attempt, evidence_spans=spans),
        candidate_reconstruction=forged(result.candidate_reconstruction, evidence_spans=spans),
    )


def _at_index(result: CandidateOperatorResult, index: int) -> CandidateOperatorResult:
    return attrs.evolve(evolve_attempt(result, attempt_index=index), attempt_index=index)


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_05_to_17_refusal_vectors(name: str) -> None:
    """(5-15, 17) Each single prohibited state refuses with its code, identities kept."""
    code, make = VECTORS[name]
    run, result = chain()
    bad_run, bad_result, kwargs = make(run, result)
    outcome = bind(bad_run, bad_result, **kwargs)
    assert code_of(outcome) is code
    assert outcome.input_digest is None
    payload = {k: v for k, v in outcome.to_dict().items() if k != "explanation"}
    assert outcome.binding_refusal_id == H({**payload, "binding_refusal_id": ""})


def test_every_bind_code_has_a_vector() -> None:
    """The vector table covers every code the binding produces (verifier codes aside)."""
    verifier = {
        R.BINDING_ID_MISMATCH,
        R.INPUT_DIGEST_MISMATCH,
        R.CANDIDATE_ATTEMPT_REF_MISMATCH,
        R.BINDING_RECORD_MISMATCH,
        R.EMPTY_BINDING_SET,
        R.INVALID_BINDING_INPUT,  # covered by test_invalid_inputs_refuse
    }
    assert {code for code, _ in VECTORS.values()} == set(R) - verifier


@pytest.mark.parametrize(
    ("change", "bound"),
    [
        ({"candidates_considered": 4}, True),
        ({"candidates_considered": 5}, False),
        ({"steps_used": 9}, True),
        ({"steps_used": 10}, False),
        ({"depth_reached": 2}, True),
        ({"depth_reached": 3}, False),
        ({"parallelism_used": 1}, True),
        ({"parallelism_used": 2}, False),
    ],
)
def test_14_budget_boundaries(change: dict[str, int], bound: bool) -> None:
    """(14) 4/5 binds, 5/5 refuses; 9/10 binds, 10/10 refuses; depth and parallelism."""
    run, result = chain()
    outcome = bind(evolve_consumed(run, **change), result)
    if bound:
        assert type(outcome) is CandidateAttemptRunBinding
    else:
        assert code_of(outcome) is R.BUDGET_CHARGE_EXCEEDS_REMAINING


@pytest.mark.parametrize(("depth", "bound"), [(2, True), (3, False)])
def test_14_depth_boundary(depth: int, bound: bool) -> None:
    """(14) attempt depth == max_depth binds; max_depth + 1 refuses."""
    run, result = chain()
    outcome = bind(run, evolve_attempt(result, depth=depth))
    assert (type(outcome) is CandidateAttemptRunBinding) is bound


def test_continuation_after_existing_attempts_binds() -> None:
    """Existing attempts 0 and 1, new attempt 2: binds (no inferred position)."""
    run, result = chain()
    existing = (
        _existing(result, attempt_index=0, attempt_id=OTHER, candidate_digest=OTHER),
        _existing(result, attempt_index=1, attempt_id="2" * 64, candidate_digest="2" * 64),
    )
    run = evolve_consumed(
        attrs.evolve(run, candidate_attempts=existing),
        candidates_considered=2,
        steps_used=2,
        depth_reached=1,
    )
    assert type(bind(run, _at_index(result, 2))) is CandidateAttemptRunBinding
    assert code_of(bind(run, _at_index(result, 3))) is R.ATTEMPT_INDEX_GAP


def test_first_failure_wins_in_reference_order() -> None:
    """With several faults, the earliest check's code is the one reported."""
    run, result = chain()
    faults: list[tuple[R, dict[str, Any]]] = [
        (R.UNSUPPORTED_SCHEMA_VERSION, {"schema_versions": (("b", "1"), ("a", "1"))}),
        (R.RUN_RESULT_MISMATCH, {"geometric_search_run_id": OTHER}),
        (R.ATTEMPT_RESULT_MISMATCH, {"attempt_index": 1}),
        (R.RECONSTRUCTION_RESULT_MISMATCH, {"candidate_reconstruction_digest": OTHER}),
        (R.MALFORMED_EVIDENCE_SPAN, {"evidence_spans": ()}),
    ]
    for position, (code, _) in enumerate(faults):
        kwargs: dict[str, Any] = {}
        changed = result
        for _, change in faults[position:]:
            if "schema_versions" in change:
                kwargs.update(change)
            else:
                changed = attrs.evolve(changed, **change)
        # Budget and a kernel-only fault are present too, and never win.
        bad_run = evolve_consumed(run, max_parallelism=3, candidates_considered=5)
        assert code_of(bind(bad_run, changed, **kwargs)) is code


REFERENCE_CODES = frozenset(list(R)[:15])


@settings(max_examples=150)
@given(
    corrupted_binding_pairs().filter(lambda case: case[2] in REFERENCE_CODES),
    st.sampled_from(["run policy", "operator policy", "parallelism", "gap", "zero charge"]),
)
def test_property_kernel_checks_never_preempt_a_reference_refusal(
    case: tuple[GeometricSearchRun, CandidateOperatorResult, R], extra: str
) -> None:
    """Adding a kernel-only fault to a reference-refused pair keeps the reference code.

    So a refusal's id agrees with the reference's whenever the reference refuses.
    """
    run, result, code = case
    if extra == "run policy":
        run = attrs.evolve(run, run_policy_version="x.v2")
    elif extra == "operator policy":
        result = attrs.evolve(result, operator_policy_version="x.v2")
    elif extra == "parallelism":
        run = evolve_consumed(run, max_parallelism=3)
    elif extra == "gap":
        run = forged(run, candidate_attempts=run.candidate_attempts[1:])
    else:
        charge = result.candidate_attempt.budget_charge
        result = forged(
            result,
            candidate_attempt=forged(
                result.candidate_attempt, budget_charge=forged(charge, steps=0)
            ),
        )
    outcome = bind(run, result)
    if code is R.BUDGET_CHARGE_EXCEEDS_REMAINING and extra in ("zero charge", "parallelism"):
        return  # these faults change the reference's own budget inputs; nothing to compare
    if code is R.DUPLICATE_ATTEMPT_INDEX and extra == "gap":
        return  # dropping the first attempt may drop the duplicate itself
    if code in (R.DUPLICATE_ATTEMPT_ID, R.DUPLICATE_CANDIDATE_DIGEST) and extra == "gap":
        return
    assert code_of(outcome) is code


def test_budget_refusal_wins_over_a_gap() -> None:
    """Budget (reference check 14) is reported before the kernel's gap check (22)."""
    run, result = chain()
    full = evolve_consumed(run, candidates_considered=5)
    assert code_of(bind(full, _at_index(result, 3))) is R.BUDGET_CHARGE_EXCEEDS_REMAINING
    existing = _existing(result, attempt_index=0, attempt_id=OTHER, candidate_digest=OTHER)
    ahead = attrs.evolve(run, candidate_attempts=(existing,))
    assert code_of(bind(ahead, result)) is R.DUPLICATE_ATTEMPT_INDEX


def test_invalid_inputs_refuse() -> None:
    """(bad input) None, foreign objects and look-alikes refuse invalid_binding_input."""
    run, result = chain()

    class LookAlike(GeometricSearchRun):
        """A subclass: a run to the reference, not exactly the record to kernel."""

    cases: list[tuple[object, object, tuple[str | None, ...]]] = [
        (None, result, (None, None, None)),
        ({"run_id": run.run_id}, result, (None, None, None)),
        (result, run, (None, None, None)),
        (run, None, (run.run_id, None, None)),
        (run, object(), (run.run_id, None, None)),
        (run, forged(result, candidate_attempt="x"), (run.run_id, result.operator_result_id, None)),
        (forged(run, run_id=None), None, (None, None, None)),
    ]
    for bad_run, bad_result, ids in cases:
        outcome = bind(bad_run, bad_result)
        assert code_of(outcome) is R.INVALID_BINDING_INPUT
        assert (outcome.original_run_id, outcome.operator_result_id) == ids[:2]
        assert outcome.candidate_attempt_id == ids[2]
    look = LookAlike(**{f.name: getattr(run, f.name) for f in attrs.fields(GeometricSearchRun)})
    # A subclass is a run to the reference (isinstance): it meets every reference check
    # (here it would bind, and one whose result names another run is refused as the
    # reference refuses it), and only then is refused as not exactly the record.
    assert code_of(bind(look, result)) is R.MALFORMED_INPUT_FIELD
    other = attrs.evolve(look, run_id=OTHER)
    refused = bind(other, result)
    assert code_of(refused) is R.RUN_RESULT_MISMATCH
    assert refused.original_run_id == OTHER


def test_duplicate_candidate_digest_refuses_in_v1() -> None:
    """(control) Another attempt with the same candidate digest refuses in v1."""
    run, result = chain()
    other = _existing(result, attempt_index=0, attempt_id=OTHER)
    run = attrs.evolve(run, candidate_attempts=(other,))
    assert code_of(bind(run, _at_index(result, 1))) is R.DUPLICATE_CANDIDATE_DIGEST


# -- 16. evidence spans ---------------------------------------------------------------


def with_spans(result: CandidateOperatorResult, spans: tuple[SourceSpan, ...]) -> Any:
    """The result with one span stream everywhere (ids not re-sealed)."""
    return attrs.evolve(
        evolve_recon(evolve_attempt(result, evidence_spans=spans), evidence_spans=spans),
        evidence_spans=spans,
    )


def test_16_spans_keep_order_and_duplicates() -> None:
    """(16) Spans are copied in order with duplicates; order changes binding_id and ref."""
    run, result = chain()
    one = SourceSpan(text="one", start=0, end=3, sentence_index=0)
    two = SourceSpan(text="two", start=4, end=7, sentence_index=None)
    first = bind(run, with_spans(result, (one, one, two)))
    second = bind(run, with_spans(result, (two, one, one)))
    single = bind(run, with_spans(result, (one, two)))
    assert type(first) is type(second) is type(single) is CandidateAttemptRunBinding
    assert first.evidence_spans == (one, one, two)
    assert first.binding_id != second.binding_id != single.binding_id
    assert first.candidate_attempt_ref != second.candidate_attempt_ref
    assert first.input_digest == second.input_digest == single.input_digest


@settings(max_examples=100)
@given(binding_pairs(), st.lists(source_spans(), min_size=2, max_size=4), st.randoms())
def test_16_span_permutations_property(
    pair: tuple[GeometricSearchRun, CandidateOperatorResult], spans: list[SourceSpan], rnd: Any
) -> None:
    """(16, property) Reordering/duplicating spans changes ids but never input_digest."""
    run, result = pair
    changed = spans[:]
    rnd.shuffle(changed)
    changed.append(changed[0])
    a = bind(run, with_spans(result, tuple(spans)))
    b = bind(run, with_spans(result, tuple(changed)))
    assert type(a) is type(b) is CandidateAttemptRunBinding
    assert a.input_digest == b.input_digest
    assert a.binding_id != b.binding_id
    assert a.candidate_attempt_ref != b.candidate_attempt_ref


# -- 18-24: authority, no producers, no effects, static guards ------------------------

FORBIDDEN_FIELDS = {
    "answer", "final_answer", "served_output", "proof", "verdict", "promotion", "mutation",
    "teaching_update", "pack_update", "policy_update", "identity_update", "workbench_state",
    "runtime_effect", "confidence", "score", "rank", "priority", "selected",
    "selected_candidate", "best", "best_candidate", "serving_allowed", "runnable",
}  # fmt: skip


def test_18_no_authority_fields() -> None:
    """(18) No binding record has an answer/proof/verdict/serving/rank/score field."""
    for cls in (
        CandidateAttemptRunBindingInput,
        CandidateAttemptRunBinding,
        CandidateAttemptRunBindingRefusal,
    ):
        assert FORBIDDEN_FIELDS.isdisjoint(f.name for f in attrs.fields(cls)), cls


def test_binding_is_not_replay_closure_or_a_sealed_trace() -> None:
    """(control) A binding carries no replay/seal state and is refused where a run goes."""
    run, result = chain()
    outcome = bind(run, result)
    assert type(outcome) is CandidateAttemptRunBinding
    names = {f.name for f in attrs.fields(CandidateAttemptRunBinding)}
    assert not names & {"replay_status", "replay_closed", "sealed", "trace_id", "run_id"}
    assert list(RunAttemptMembership) == [RunAttemptMembership.STRUCTURALLY_BOUND]
    assert code_of(bind(outcome, result)) is R.INVALID_BINDING_INPUT
    assert code_of(bind(run, outcome)) is R.INVALID_BINDING_INPUT


PRODUCERS = (
    "project_contract_residuals", "decide_search_gate", "decide_compute_budget",
    "initialize_geometric_search_run", "build_missing_role_candidate",
    "build_replay_adapter_input", "classify_replay_result", "build_practice_trace_input",
    "seal_practice_trace", "determine",
)  # fmt: skip


def names_in(path: Path) -> set[str]:
    """Every identifier and attribute name a module's source references."""
    tree = ast.parse(path.read_text("utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.update(node.name.split("."))
    return found


def test_19_to_21_no_operator_replay_sealing_or_producer_calls() -> None:
    """(19, 20, 21) The binding module names no producer, replay or sealing function."""
    source = ROOT / "src/kernel/search/binding.py"
    assert not names_in(source) & set(PRODUCERS)
    assert not any(hasattr(binding_module, name) for name in PRODUCERS)


@pytest.fixture
def audit_events() -> Iterator[list[str]]:
    """Audit events raised while the fixture is active (files, sockets, processes...)."""
    events: list[str] = []
    state = {"on": True}

    def hook(event: str, _args: tuple[object, ...]) -> None:
        if state["on"]:
            events.append(event)

    sys.addaudithook(hook)
    yield events
    state["on"] = False


def test_22_no_effects_while_binding(audit_events: list[str]) -> None:
    """(22) Binding, refusing and verifying raise no file/socket/process/env audit event."""
    run, result = chain()
    # The codec compiles a record class's annotations on first use (a cache filled once,
    # not an effect); warm it so only the measured calls' own events remain.
    warm = bind(run, result)
    assert type(warm) is CandidateAttemptRunBinding
    verify_binding(warm, run, result)
    bind(run, attrs.evolve(result, geometric_search_run_id=OTHER))
    audit_events.clear()
    outcome = bind(run, result)
    bind(run, attrs.evolve(result, geometric_search_run_id=OTHER))
    assert type(outcome) is CandidateAttemptRunBinding
    verify_binding(outcome, run, result)
    effects = [
        e
        for e in audit_events
        if e.split(".")[0] in {"open", "os", "socket", "subprocess", "shutil", "time", "urllib"}
        or e in {"import", "exec", "compile"}
    ]
    assert effects == []


def adr_policy() -> Any:
    """The ADR-0232 guard policy, read by kernel.guard from the ADR text."""
    return load_policy([ADR])


def test_23_static_guard_holds_over_the_binding_and_search_sources() -> None:
    """(23, control) The ADR's guard block passes over the real sources."""
    policy = adr_policy()
    assert {r.name for r in policy.rules} == {
        "adr-0232-binding-surface",
        "adr-0232-search-surface",
    }
    split = ("binding_records", "binding_text", "binding_reference", "binding_stricter")
    for module in ("search.binding", *(f"search.{name}" for name in split), "search.records"):
        source = (ROOT / "src" / f"kernel/{module.replace('.', '/')}.py").read_text("utf-8")
        assert check_source(source, policy, module=f"kernel.{module}") == ()


@pytest.mark.parametrize(
    "addition",
    [
        "import json\n",
        "import hashlib\n",
        "import time\n",
        "from os import environ\n",
        "import random\n",
        "import uuid\n",
        "import importlib\n",
        "from kernel.effects import files\n",
        "x = open('f')\n",
        "y = __import__('subprocess')\n",
        "from kernel.search.records import decide_search_gate\n",
        "from kernel.records.values import seal_practice_trace as s\n",
    ],
)
def test_23_static_guard_blocks_forbidden_imports_and_calls(addition: str) -> None:
    """(23) Adding a forbidden import or call to kernel.search.binding is a guard finding."""
    source = (ROOT / "src/kernel/search/binding.py").read_text("utf-8") + "\n" + addition
    assert check_source(source, adr_policy(), module="kernel.search.binding") != ()


def test_24_no_reverse_dependency_from_search() -> None:
    """(24) kernel.search.records may not import kernel.search.binding; today it does not."""
    source = (ROOT / "src/kernel/search/records.py").read_text("utf-8")
    assert "kernel.search.binding" not in names_in(ROOT / "src/kernel/search/records.py") | {
        a for a in source.splitlines() if a.startswith("from kernel.search.binding")
    }
    bad = source + "\nfrom kernel.search.binding import bind_candidate_attempt_to_run\n"
    assert check_source(bad, adr_policy(), module="kernel.search.records") != ()


def test_adr_block_parses_as_toml() -> None:
    """The fenced guard block is valid TOML with the rule keys (tomllib, no kernel)."""
    import tomllib

    text = ADR.read_text("utf-8")
    block = text.split("```guard\n", 1)[1].split("```", 1)[0]
    rules = tomllib.loads(block)["rules"]
    binding_rule = next(r for r in rules if r["name"] == "adr-0232-binding-surface")
    assert binding_rule["modules"] == ["kernel.search.binding", "kernel.search.binding_*"]
    assert {"name", "modules", "allow-imports", "forbid-imports", "forbid-calls"} <= set(
        binding_rule
    )
    assert "kernel.search.records" in binding_rule["allow-imports"]


# -- properties -----------------------------------------------------------------------


@settings(max_examples=200)
@given(corrupted_binding_pairs())
def test_property_every_corruption_refuses_with_its_code(
    case: tuple[GeometricSearchRun, CandidateOperatorResult, R],
) -> None:
    """Any single-field corruption (ids not re-sealed) refuses with the expected code."""
    run, result, code = case
    before = snapshot(run, result)
    assert code_of(bind(run, result)) is code
    assert snapshot(run, result) == before


@settings(max_examples=100)
@given(binding_pairs(), st.text(max_size=20))
def test_property_valid_pairs_bind_and_ids_recompute(
    pair: tuple[GeometricSearchRun, CandidateOperatorResult], explanation: str
) -> None:
    """Valid pairs bind; ids recompute with the stdlib; explanation changes nothing else."""
    run, result = pair
    before = snapshot(run, result)
    outcome = bind(run, result, explanation=explanation)
    assert type(outcome) is CandidateAttemptRunBinding
    assert snapshot(run, result) == before
    document = outcome.to_dict()
    payload = {k: v for k, v in document.items() if k != "explanation"}
    assert outcome.binding_id == H({**payload, "binding_id": ""})
    attempt = result.candidate_attempt.to_dict()
    del attempt["explanation"]
    assert outcome.candidate_attempt_ref == H(attempt)
    plain = bind(run, result)
    assert type(plain) is CandidateAttemptRunBinding
    assert plain.to_dict() | {"explanation": ""} == document | {"explanation": ""}


@settings(max_examples=100)
@given(bindings())
def test_property_binding_round_trips_and_equals_validated_construction(
    outcome: CandidateAttemptRunBinding,
) -> None:
    """from_dict(to_dict(b)) == b; the fast-built record equals a validated one."""
    assert CandidateAttemptRunBinding.from_dict(outcome.to_dict()) == outcome
    rebuilt = CandidateAttemptRunBinding(
        **{f.name: getattr(outcome, f.name) for f in attrs.fields(CandidateAttemptRunBinding)}
    )
    assert rebuilt == outcome
    assert compute_id(outcome) == outcome.binding_id


@settings(max_examples=100)
@given(binding_refusals())
def test_property_refusal_round_trips(refusal: CandidateAttemptRunBindingRefusal) -> None:
    """Refusals round-trip, self-seal, and unwrap raises RefusedError carrying them."""
    assert CandidateAttemptRunBindingRefusal.from_dict(refusal.to_dict()) == refusal
    assert compute_id(refusal) == refusal.binding_refusal_id
    with pytest.raises(RefusedError) as info:
        unwrap(refusal)
    assert info.value.refusal is refusal


FOREIGN = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.tuples(st.text(max_size=3)),
    st.builds(object),
    st.just(float("nan")),
)


@settings(max_examples=200)
@given(binding_pairs(max_existing=2), st.data())
def test_property_forged_fields_never_raise(
    pair: tuple[GeometricSearchRun, CandidateOperatorResult], data: st.DataObject
) -> None:
    """(bad input) Any field of any record forged to a foreign value: an outcome, no raise.

    When a binding still comes out, it is a well-formed record (validators pass).
    """
    run, result = pair
    targets = {
        "run": run,
        "result": result,
        "attempt": result.candidate_attempt,
        "reconstruction": result.candidate_reconstruction,
        "charge": result.candidate_attempt.budget_charge,
        "consumed": run.budget_consumed,
    }
    which = data.draw(st.sampled_from(sorted(targets)))
    record = targets[which]
    name = data.draw(st.sampled_from([f.name for f in attrs.fields(type(record))]))  # type: ignore[arg-type]
    value = data.draw(FOREIGN)
    changed = forged(record, **{name: value})
    if which == "run":
        run = changed
    elif which == "result":
        result = changed
    elif which == "consumed":
        run = forged(run, budget_consumed=changed)
    elif which == "charge":
        attempt = forged(result.candidate_attempt, budget_charge=changed)
        result = forged(result, candidate_attempt=attempt)
    else:
        key = "candidate_attempt" if which == "attempt" else "candidate_reconstruction"
        result = forged(result, **{key: changed})
    outcome = bind(run, result, explanation=data.draw(st.one_of(st.text(max_size=3), FOREIGN)))
    assert type(outcome) in (CandidateAttemptRunBinding, CandidateAttemptRunBindingRefusal)
    attrs.validate(outcome)
    assert type(outcome).from_dict(outcome.to_dict()) == outcome


@settings(max_examples=100)
@given(st.data())
def test_property_foreign_arguments_never_raise(data: st.DataObject) -> None:
    """(bad input) Foreign objects for every argument: a refusal, never an exception."""
    run, result = chain()
    args = {
        "run": data.draw(st.one_of(st.just(run), FOREIGN)),
        "result": data.draw(st.one_of(st.just(result), FOREIGN)),
    }
    kwargs = {
        "schema_versions": data.draw(st.one_of(st.just(()), FOREIGN)),
        "policy_versions": data.draw(st.one_of(st.just(()), FOREIGN)),
    }
    outcome = bind(args["run"], args["result"], **kwargs)
    if outcome.__class__ is CandidateAttemptRunBinding:
        assert args["run"] is run
        assert args["result"] is result
    else:
        assert type(outcome) is CandidateAttemptRunBindingRefusal


# -- verify_binding and verify_binding_set ---------------------------------------------


def test_verify_binding_returns_the_bound_input() -> None:
    """verify_binding returns the input record, whose id is the binding's input_digest."""
    run, result = chain()
    outcome = bind(run, result)
    assert type(outcome) is CandidateAttemptRunBinding
    checked = verify_binding(outcome, run, result)
    assert type(checked) is CandidateAttemptRunBindingInput
    assert checked.input_digest == outcome.input_digest == compute_id(checked)
    assert checked.original_contract_assessment_id == "assessment-a"


def reseal(record: CandidateAttemptRunBinding, **changes: Any) -> CandidateAttemptRunBinding:
    """A binding changed and honestly re-sealed."""
    changed = attrs.evolve(record, **changes)
    return attrs.evolve(changed, binding_id=compute_id(changed))


def test_verify_binding_refusals() -> None:
    """Each verification step refuses with its own code."""
    run, result = chain()
    good = bind(run, result)
    assert type(good) is CandidateAttemptRunBinding
    cases: list[tuple[Any, R, dict[str, Any]]] = [
        (None, R.INVALID_BINDING_INPUT, {}),
        (attrs.evolve(good, binding_policy_version="x.v2"), R.UNSUPPORTED_BINDING_POLICY, {}),
        (attrs.evolve(good, depth=2), R.BINDING_ID_MISMATCH, {}),
        (reseal(good, input_digest=OTHER), R.INPUT_DIGEST_MISMATCH, {}),
        (good, R.INPUT_DIGEST_MISMATCH, {"schema_versions": (("a", "1"),)}),
        (reseal(good, candidate_attempt_ref=OTHER), R.CANDIDATE_ATTEMPT_REF_MISMATCH, {}),
        (reseal(good, depth=2), R.BINDING_RECORD_MISMATCH, {}),
        (reseal(good, evidence_spans=()), R.BINDING_RECORD_MISMATCH, {}),
    ]
    for record, code, kwargs in cases:
        assert code_of(verify_binding(record, run, result, **kwargs)) is code
    moved = attrs.evolve(result, geometric_search_run_id=OTHER)
    assert code_of(verify_binding(good, run, moved)) is R.RUN_RESULT_MISMATCH
    assert type(verify_binding(reseal(good, explanation="other"), run, result)) is (
        CandidateAttemptRunBindingInput
    )


def test_verify_binding_set() -> None:
    """Stateless bindings that together overrun the run, collide or gap are refused."""
    run, result = chain()
    tight = evolve_consumed(run, candidates_considered=4)
    first = bind(tight, result)
    other = attrs.evolve(
        _at_index(evolve_attempt(result, candidate_digest=OTHER), 0),
        candidate_digest=OTHER,
        candidate_reconstruction=attrs.evolve(
            result.candidate_reconstruction, candidate_digest=OTHER
        ),
    )
    second_alone = bind(tight, other)
    assert type(first) is type(second_alone) is CandidateAttemptRunBinding
    # Both bind alone against a run with room for one; together they are refused.
    assert code_of(verify_binding_set(tight, [first, second_alone])) is R.DUPLICATE_ATTEMPT_INDEX
    assert code_of(verify_binding_set(tight, [])) is R.EMPTY_BINDING_SET
    assert code_of(verify_binding_set(None, [first])) is R.INVALID_BINDING_INPUT  # type: ignore[arg-type]
    assert code_of(verify_binding_set(tight, [None])) is R.INVALID_BINDING_INPUT  # type: ignore[list-item]
    assert code_of(verify_binding_set(tight, 5)) is R.INVALID_BINDING_INPUT  # type: ignore[arg-type]
    foreign_run = attrs.evolve(tight, run_id=OTHER)
    assert code_of(verify_binding_set(foreign_run, [first])) is R.RUN_RESULT_MISMATCH
    second = reseal(second_alone, attempt_index=1, candidate_attempt_id="2" * 64)
    assert code_of(verify_binding_set(tight, [first, second])) is (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING
    )
    assert verify_binding_set(run, [second, first]) == (first, second)
    gap = reseal(second, attempt_index=2)
    assert code_of(verify_binding_set(run, [first, gap])) is R.ATTEMPT_INDEX_GAP
    same_id = reseal(second, candidate_attempt_id=first.candidate_attempt_id)
    assert code_of(verify_binding_set(run, [first, same_id])) is R.DUPLICATE_ATTEMPT_ID
    same_digest = reseal(second, candidate_digest=first.candidate_digest)
    assert code_of(verify_binding_set(run, [first, same_digest])) is R.DUPLICATE_CANDIDATE_DIGEST
    deep = reseal(second, depth=5)
    assert code_of(verify_binding_set(run, [first, deep])) is R.BUDGET_CHARGE_EXCEEDS_REMAINING
    steps = reseal(second, budget_charge=BudgetCharge(candidates=1, steps=10))
    assert code_of(verify_binding_set(run, [first, steps])) is R.BUDGET_CHARGE_EXCEEDS_REMAINING


def test_25_smoke_lane() -> None:
    """(25) Smoke: the reference chain binds, verifies and unwraps end to end."""
    run, result = chain()
    outcome = unwrap(bind(run, result))
    assert type(outcome) is CandidateAttemptRunBinding
    assert type(verify_binding(outcome, run, result)) is CandidateAttemptRunBindingInput
    assert verify_binding_set(run, [outcome]) == (outcome,)


def test_an_honestly_accounted_continuation_binds() -> None:
    """The boundary of check 25: a run declaring exactly its attempts' charges binds."""
    run, result = chain()
    first = _existing(result, attempt_index=0, attempt_id=OTHER, candidate_digest=OTHER)
    honest = evolve_consumed(
        attrs.evolve(run, candidate_attempts=(first,)),
        candidates_considered=1,
        steps_used=1,
        depth_reached=1,
    )
    assert isinstance(bind(honest, _at_index(result, 1)), CandidateAttemptRunBinding)


# -- the Python API agrees with the reference, not only JSON documents ------------------


class Pair(NamedTuple):
    """A version pair as a NamedTuple (the reference accepts it: it is a tuple)."""

    name: str
    version: str


class Name(str):
    """A str subclass (the reference accepts it: it is a str)."""


def test_version_pair_subclasses_bind_as_the_reference_binds_them() -> None:
    """A NamedTuple pair or a str subclass passes check 4 (as in the reference) and binds
    to the binding that plain tuples give: same input_digest and binding_id."""
    run, result = chain()
    plain = bind(run, result, schema_versions=(("a", "1"), ("b", "2")))
    fancy = bind(run, result, schema_versions=(Pair("a", "1"), (Name("b"), Name("2"))))
    assert type(plain) is CandidateAttemptRunBinding
    assert type(fancy) is CandidateAttemptRunBinding
    assert fancy == plain
    assert fancy.input_digest == plain.input_digest
    assert fancy.binding_id == compute_id(fancy)


def test_forged_containers_meet_the_reference_checks_first() -> None:
    """A record altered after construction (a list where a tuple belongs) is judged by
    the reference's checks first; kernel's shape check refuses it only afterwards."""
    run, result = chain()
    elsewhere = forged(run, residual_ids=[OTHER])  # the candidate's residual is not there
    assert code_of(bind(elsewhere, result)) is R.RUN_IDENTITY_MISMATCH
    listed = forged(run, residual_ids=list(run.residual_ids))  # it is there: passes 10
    assert code_of(bind(listed, result)) is R.MALFORMED_INPUT_FIELD
    not_a_container = forged(run, residual_ids=7)  # the reference itself would fail here
    assert code_of(bind(not_a_container, result)) is R.MALFORMED_INPUT_FIELD


def test_a_forged_float_charge_meets_the_reference_budget_check_first() -> None:
    """A float where an int belongs compares as the reference compares it (check 14);
    kernel refuses the float itself only after the reference's checks."""
    run, result = chain()
    huge = attrs.evolve(result.candidate_attempt)
    object.__setattr__(huge, "budget_charge", forged(huge.budget_charge, candidates=1e9))
    over = attrs.evolve(result, candidate_attempt=huge)
    assert code_of(bind(run, over)) is R.BUDGET_CHARGE_EXCEEDS_REMAINING
    small = attrs.evolve(result.candidate_attempt)
    object.__setattr__(small, "budget_charge", forged(small.budget_charge, candidates=1.0))
    assert code_of(bind(run, attrs.evolve(result, candidate_attempt=small))) is (
        R.MALFORMED_INPUT_FIELD
    )


def test_a_refusal_names_non_digest_ids_as_the_reference_does() -> None:
    """A forged non-digest run id enters the refusal (and its id) as the reference's
    refusal holds it; only a value that is not text at all is left out."""
    run, result = chain()
    odd = forged(run, run_id="run-7")
    outcome = bind(odd, result)
    assert code_of(outcome) is R.RUN_RESULT_MISMATCH
    assert type(outcome) is CandidateAttemptRunBindingRefusal
    assert outcome.original_run_id == "run-7"
    payload = {k: v for k, v in outcome.to_dict().items() if k != "explanation"}
    assert outcome.binding_refusal_id == H({**payload, "binding_refusal_id": ""})
    numeric = bind(forged(run, run_id=7), result)
    assert type(numeric) is CandidateAttemptRunBindingRefusal
    assert numeric.original_run_id is None
