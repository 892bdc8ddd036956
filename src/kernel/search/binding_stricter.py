"""Checks 15-24 of `kernel.search.binding`: the ADR-0232 rules the reference skips,
run after every reference check passed."""

from __future__ import annotations

from kernel.records.codec import (
    short_repr,
)
from kernel.records.values import differs
from kernel.search.binding_records import (
    _INT_ONLY,
    _STR_ONLY,
    BINDING_POLICY_NAME,
    CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION,
    CandidateAttemptRunBindingRefusal,
    R,
)
from kernel.search.binding_reference import (
    _Read,
)
from kernel.search.binding_text import (
    _ATTEMPT,
    _RESULT,
    _all_digests,
    _declares_other_binding_policy,
    _disordered,
    _negative_sentence,
    _not_int,
    _refusal,
    _unshaped,
)
from kernel.search.records import (
    CANDIDATE_OPERATOR_POLICY_VERSION,
    GEOMETRIC_SEARCH_RUN_POLICY_VERSION,
    GEOMETRIC_SEARCH_RUN_SCHEMA_VERSION,
    BudgetCharge,
    BudgetConsumed,
    CandidateAttempt,
    CandidateOperatorResult,
    CandidateReconstruction,
    GeometricSearchRun,
)

__all__: list[str] = []


def _stricter(
    read: _Read, policy_versions: object, explanation: object
) -> CandidateAttemptRunBindingRefusal | None:
    """Checks 15-24: the ADR-0232 rules the reference skips, after every reference
    check passed (module docstring)."""
    refused = _exact_and_supported(read, policy_versions, explanation)
    if refused is None:
        refused = _in_sequence(read)
    if refused is None:
        refused = _shaped(read)
    return refused


def _exact_and_supported(
    read: _Read, policy_versions: object, explanation: object
) -> CandidateAttemptRunBindingRefusal | None:
    """Checks 15-19: exact ints, the v1 run, operator and binding policies, a positive
    charge."""
    run, result, attempt, ids = read.run, read.result, read.attempt, read.ids
    charge, depth, consumed, index = read.charge, read.depth, read.consumed, read.index
    # 15 (malformed_input_field): every number read is an exact int (bool is not);
    # explanation is prose, a str.
    numbers = (
        charge.candidates,
        charge.steps,
        depth,
        attempt.step_index,
        index,
        result.attempt_index,
        consumed.candidates_considered,
        consumed.max_candidates,
        consumed.depth_reached,
        consumed.max_depth,
        consumed.steps_used,
        consumed.max_steps,
        consumed.parallelism_used,
        consumed.max_parallelism,
    )
    if set(map(type, numbers)) != _INT_ONLY or type(explanation) is not str:
        return _refusal(R.MALFORMED_INPUT_FIELD, ids, lambda: _not_int(numbers, explanation))
    # 16 (unsupported_run_policy) and 17 (unsupported_operator_policy).
    if (
        run.run_policy_version != GEOMETRIC_SEARCH_RUN_POLICY_VERSION
        or run.schema_version != GEOMETRIC_SEARCH_RUN_SCHEMA_VERSION
    ):
        return _refusal(
            R.UNSUPPORTED_RUN_POLICY,
            ids,
            lambda: (
                f"original_run.run_policy_version and schema_version: expected"
                f" {GEOMETRIC_SEARCH_RUN_POLICY_VERSION!r} and"
                f" {GEOMETRIC_SEARCH_RUN_SCHEMA_VERSION!r},"
                f" got {short_repr(run.run_policy_version)} and {short_repr(run.schema_version)}"
            ),
        )
    if result.operator_policy_version != CANDIDATE_OPERATOR_POLICY_VERSION:
        return _refusal(
            R.UNSUPPORTED_OPERATOR_POLICY,
            ids,
            lambda: differs(
                f"{_RESULT}.operator_policy_version",
                "the v1 policy",
                CANDIDATE_OPERATOR_POLICY_VERSION,
                result.operator_policy_version,
            ),
        )
    # 18 (unsupported_binding_policy): the caller expects another binding policy.
    if _declares_other_binding_policy(policy_versions):  # type: ignore[arg-type]
        return _refusal(
            R.UNSUPPORTED_BINDING_POLICY,
            ids,
            lambda: (
                f"policy_versions: expected {BINDING_POLICY_NAME} (when declared) to be"
                f" {CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION!r},"
                f" got {short_repr(policy_versions)}"
            ),
        )
    # 19 (non_positive_budget_charge): ADR section 10, a charge is positive.
    if charge.candidates <= 0 or charge.steps <= 0:
        return _refusal(
            R.NON_POSITIVE_BUDGET_CHARGE,
            ids,
            lambda: (
                f"{_ATTEMPT}.budget_charge: expected candidates and steps > 0, got"
                f" candidates {short_repr(charge.candidates)}, steps {short_repr(charge.steps)}"
            ),
        )
    return None


def _in_sequence(read: _Read) -> CandidateAttemptRunBindingRefusal | None:
    """Checks 20-23: a sequential run, the next index after 0..n-1, sentence indexes."""
    ids, consumed, index, spans = read.ids, read.consumed, read.index, read.spans
    existing_attempts = read.existing_attempts
    # 20 (unsupported_parallelism): ADR section 10, v1 runs are sequential.
    if consumed.max_parallelism != 1:
        return _refusal(
            R.UNSUPPORTED_PARALLELISM,
            ids,
            lambda: (
                f"original_run.budget_consumed.max_parallelism: expected 1 (v1 runs are"
                f" sequential), got {short_repr(consumed.max_parallelism)}"
            ),
        )
    # 21 (ambiguous_attempt_order) and 22 (attempt_index_gap): ADR section 9, no
    # inferred position, no gap: admissible only at index n after 0..n-1.
    if not read.ordered:
        return _refusal(
            R.AMBIGUOUS_ATTEMPT_ORDER,
            ids,
            lambda: _disordered(existing_attempts),
        )
    if index != len(existing_attempts):
        return _refusal(
            R.ATTEMPT_INDEX_GAP,
            ids,
            lambda: (
                f"{_ATTEMPT}.attempt_index: expected {len(existing_attempts)} (the next"
                f" index after the run's attempts), got {short_repr(index)}"
            ),
        )
    # 23 (malformed_evidence_span): the kernel's span rule adds sentence_index >= 0.
    for span in spans:
        if span.sentence_index is not None and span.sentence_index < 0:
            return _refusal(
                R.MALFORMED_EVIDENCE_SPAN,
                ids,
                _negative_sentence,
                spans,
                span,
            )
    return None


def _shaped(read: _Read) -> CandidateAttemptRunBindingRefusal | None:
    """Check 24: everything that enters an id has its record shape and encodes."""
    run, result, attempt, ids = read.run, read.result, read.attempt, read.ids
    reconstruction, charge, consumed = read.reconstruction, read.charge, read.consumed
    attempt_id, candidate_digest = read.attempt_id, read.candidate_digest
    residual_ids, provenance = read.residual_ids, read.provenance
    existing_attempts = read.existing_attempts
    # 24 (malformed_input_field): everything that enters an id has its record shape
    # (a record altered after construction fails here, never as an exception), and
    # the canonical encoder accepts it (no lone surrogate, no int beyond 2**53 - 1).
    parent = attempt.parent_attempt_id
    digests = (
        run.run_id,
        run.input_digest,
        run.operator_set_id,
        run.budget_id,
        run.gate_decision_id,
        run.problem_frame_digest,
        result.operator_result_id,
        attempt_id,
        attempt.input_digest,
        candidate_digest,
        reconstruction.candidate_reconstruction_digest,
        *residual_ids,
        *(() if parent is None else (parent,)),
    )
    texts = (
        run.run_policy_version,
        run.operator_set_version,
        run.contract_assessment_id,
        result.operator_policy_version,
        attempt.operator_id,
        attempt.operator_version,
    )
    if (
        not _all_digests(digests)
        or set(map(type, texts)) != _STR_ONLY
        or type(run) is not GeometricSearchRun
        or type(result) is not CandidateOperatorResult
        or type(attempt) is not CandidateAttempt
        or type(reconstruction) is not CandidateReconstruction
        or type(charge) is not BudgetCharge
        or type(consumed) is not BudgetConsumed
        or type(residual_ids) is not tuple
        or type(provenance) is not tuple
        or type(attempt.replay_blockers) is not tuple
        or not read.exact_spans
        or type(result.evidence_spans) is not tuple
        or type(reconstruction.evidence_spans) is not tuple
        or type(existing_attempts) is not tuple
        or any(type(existing) is not CandidateAttempt for existing in existing_attempts)
    ):
        return _refusal(R.MALFORMED_INPUT_FIELD, ids, lambda: _unshaped(run, result))
    return None
