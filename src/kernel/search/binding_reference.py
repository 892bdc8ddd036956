"""Checks 1-14 of `kernel.search.binding`: the reference implementation's checks, in
its order, reading the records as it does (module docstring of `kernel.search.binding`)."""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs

from kernel.records.codec import (
    short_repr,
)
from kernel.records.values import differs
from kernel.search.binding_records import (
    CandidateAttemptRunBindingRefusal,
    R,
)
from kernel.search.binding_text import (
    _ATTEMPT,
    _NO_IDS,
    _RECON,
    _RESULT,
    _attempt_differs,
    _bad_pairs,
    _consumed,
    _held,
    _identity_differs,
    _Ids,
    _iterator,
    _known,
    _not_a,
    _over_budget,
    _reference_pairs,
    _refusal,
    _shape,
    _span_problem,
    _valid_spans,
)
from kernel.search.records import (
    BudgetCharge,
    CandidateAttempt,
    CandidateOperatorResult,
    CandidateReconstruction,
    CandidateReplayStatus,
    GeometricSearchRun,
)

__all__: list[str] = []


@attrs.frozen(kw_only=True)
class _Read:
    """What checks 1-14 read of the inputs, each value read once, for checks 15-25 and
    the build (a lookalike record's attribute may not answer twice the same)."""

    run: Any
    result: Any
    attempt: Any
    reconstruction: Any
    ids: _Ids
    index: Any
    attempt_id: Any
    candidate_digest: Any
    residual_ids: Any
    provenance: Any
    spans: Any
    exact_spans: bool
    existing_attempts: Any
    ordered: bool
    consumed: Any
    charge: Any
    depth: Any


class _Existing(NamedTuple):
    """What check 13 read: the existing attempts and this attempt's index, id and
    candidate (each read once), whether the existing ones hold 0..n-1 in order (for 21)
    and what they charged (for 25; None: not an exact charge)."""

    attempts: Any
    index: Any
    attempt_id: Any
    candidate_digest: Any
    ordered: bool
    charged: tuple[int, int, int] | None


def _typed(
    run: Any, result: Any, known: list[str | None]
) -> tuple[Any, Any, _Ids] | CandidateAttemptRunBindingRefusal:
    """Checks 1-3: the attempt, its reconstruction and the identities, as validated."""
    # 1-3 (invalid_binding_input): the record types (a subclass passes, as there);
    # identities fill in as validated.
    if not isinstance(run, GeometricSearchRun):
        return _refusal(
            R.INVALID_BINDING_INPUT,
            _NO_IDS,
            lambda: _not_a("original_run", GeometricSearchRun, run),
        )
    known[0] = _known(run.run_id)
    if not isinstance(result, CandidateOperatorResult):
        return _refusal(
            R.INVALID_BINDING_INPUT,
            (known[0], None, None),
            lambda: _not_a("candidate_operator_result", CandidateOperatorResult, result),
        )
    known[1] = _known(result.operator_result_id)
    attempt: object = result.candidate_attempt
    reconstruction: Any = result.candidate_reconstruction
    if not isinstance(attempt, CandidateAttempt):
        return _refusal(
            R.INVALID_BINDING_INPUT,
            (known[0], known[1], None),
            lambda: _not_a(f"{_RESULT}.candidate_attempt", CandidateAttempt, attempt),
        )
    known[2] = _known(attempt.attempt_id)
    return attempt, reconstruction, (known[0], known[1], known[2])


def _versions_refused(
    schema_versions: object, policy_versions: object, ids: _Ids
) -> CandidateAttemptRunBindingRefusal | None:
    """Check 4: the caller-declared version pairs."""
    # 4 (unsupported_schema_version): caller-declared version pairs.
    # (Empty tuples, the common case, need no walk.)
    # The reference's rule: tuples (a NamedTuple is one) of non-empty str (a str
    # subclass is one) pairs, names ascending; kernel normalises them to exact tuples
    # of exact str after every reference check (they hash the same).
    if (
        type(schema_versions) is not tuple
        or type(policy_versions) is not tuple
        or schema_versions
        or policy_versions
    ) and (not _reference_pairs(schema_versions) or not _reference_pairs(policy_versions)):
        return _refusal(
            R.UNSUPPORTED_SCHEMA_VERSION,
            ids,
            lambda: _bad_pairs(schema_versions, policy_versions),
        )
    return None


def _same_source(
    run: Any, result: Any, attempt: Any, reconstruction: Any, ids: _Ids
) -> CandidateAttemptRunBindingRefusal | None:
    """Checks 5-9: the result was built for this run from this attempt, reconstructed
    faithfully (5-7), and the attempt awaits replay with nothing blocking it (8-9)."""
    # 5 (run_result_mismatch): the result was built for this run.
    if result.geometric_search_run_id != run.run_id:
        return _refusal(
            R.RUN_RESULT_MISMATCH,
            ids,
            lambda: differs(
                f"{_RESULT}.geometric_search_run_id",
                "the run's run_id",
                run.run_id,
                result.geometric_search_run_id,
            ),
        )
    # 6 (attempt_result_mismatch): the result repeats its attempt faithfully.
    if (
        result.attempt_id != attempt.attempt_id
        or result.attempt_index != attempt.attempt_index
        or result.candidate_digest != attempt.candidate_digest
        or result.input_digest != attempt.input_digest
        or result.operator_name != attempt.operator_id
        or result.operator_version != attempt.operator_version
    ):
        return _refusal(R.ATTEMPT_RESULT_MISMATCH, ids, lambda: _attempt_differs(result, attempt))
    # 7 (missing_candidate_reconstruction, kernel, where the reference raises
    # AttributeError; reconstruction_result_mismatch).
    try:
        reconstructed = reconstruction.candidate_digest
    except AttributeError:
        return _refusal(
            R.MISSING_CANDIDATE_RECONSTRUCTION,
            ids,
            lambda: _not_a(
                f"{_RESULT}.candidate_reconstruction", CandidateReconstruction, reconstruction
            ),
        )
    if reconstructed != result.candidate_digest:
        return _refusal(
            R.RECONSTRUCTION_RESULT_MISMATCH,
            ids,
            lambda: differs(
                f"{_RECON}.candidate_digest",
                "the result's candidate_digest",
                result.candidate_digest,
                reconstructed,
            ),
        )
    if reconstruction.candidate_reconstruction_digest != result.candidate_reconstruction_digest:
        return _refusal(
            R.RECONSTRUCTION_RESULT_MISMATCH,
            ids,
            lambda: differs(
                f"{_RECON}.candidate_reconstruction_digest",
                "the result's candidate_reconstruction_digest",
                result.candidate_reconstruction_digest,
                reconstruction.candidate_reconstruction_digest,
            ),
        )
    return _replayable(attempt, ids)


def _replayable(attempt: Any, ids: _Ids) -> CandidateAttemptRunBindingRefusal | None:
    """Checks 8-9: the attempt awaits replay, with nothing blocking it."""
    # 8 (replay_status_not_pending) and 9 (replay_blockers_present).
    if attempt.replay_status is not CandidateReplayStatus.REPLAY_PENDING:
        return _refusal(
            R.REPLAY_STATUS_NOT_PENDING,
            ids,
            lambda: (
                f"{_ATTEMPT}.replay_status: expected replay_pending,"
                f" got {_shape(attempt.replay_status)}"
            ),
        )
    if attempt.replay_blockers != ():
        return _refusal(
            R.REPLAY_BLOCKERS_PRESENT,
            ids,
            lambda: (
                f"{_ATTEMPT}.replay_blockers: expected none,"
                f" got {short_repr(attempt.replay_blockers)}"
            ),
        )
    return None


def _same_problem(
    run: Any, result: Any, attempt: Any, reconstruction: Any, ids: _Ids
) -> tuple[Any, Any, Any, bool] | CandidateAttemptRunBindingRefusal:
    """Checks 10-12: the candidate addresses this run's problem with its operator set,
    on one valid span stream; what they read (residual ids, provenance, spans)."""
    # 10 (run_identity_mismatch): the candidate addresses this run's problem. A record
    # altered after construction is judged as the reference judges it (a list of
    # residual ids is searched like a tuple); its shape is refused at 24.
    # A container searched or walked (here, 11 and 13) that is an iterator would be
    # consumed (the reference consumes it): refused instead, never mutated.
    residual_ids = run.residual_ids
    if _iterator(residual_ids):
        return _refusal(
            R.MALFORMED_INPUT_FIELD,
            ids,
            lambda: _consumed("original_run.residual_ids", residual_ids),
        )
    if (
        reconstruction.source_residual_id not in residual_ids
        or reconstruction.problem_frame_digest != run.problem_frame_digest
        or reconstruction.original_contract_assessment_id != run.contract_assessment_id
    ):
        return _refusal(
            R.RUN_IDENTITY_MISMATCH, ids, lambda: _identity_differs(run, reconstruction)
        )
    # 11 (operator_set_mismatch): built by the run's operator set.
    provenance = reconstruction.operator_provenance
    if _iterator(provenance):
        return _refusal(
            R.MALFORMED_INPUT_FIELD,
            ids,
            lambda: _consumed(f"{_RECON}.operator_provenance", provenance),
        )
    if ("operator_set_id", run.operator_set_id) not in provenance or (
        "operator_set_version",
        run.operator_set_version,
    ) not in provenance:
        return _refusal(
            R.OPERATOR_SET_MISMATCH,
            ids,
            lambda: (
                f"{_RECON}.operator_provenance: expected the pairs (operator_set_id,"
                f" {short_repr(run.operator_set_id)}) and (operator_set_version,"
                f" {short_repr(run.operator_set_version)}), got {short_repr(provenance)}"
            ),
        )
    # 12 (malformed_evidence_span): valid, and one span stream, never merged.
    spans = attempt.evidence_spans
    valid_spans, exact_spans = _valid_spans(spans)
    if not valid_spans or result.evidence_spans != spans or reconstruction.evidence_spans != spans:
        return _refusal(
            R.MALFORMED_EVIDENCE_SPAN,
            ids,
            lambda: _span_problem(valid_spans, spans, result, reconstruction),
        )
    return residual_ids, provenance, spans, exact_spans


def _beside_existing(
    run: Any, attempt: Any, ids: _Ids
) -> _Existing | CandidateAttemptRunBindingRefusal:
    """Check 13: no existing attempt holds this one's index, id or candidate; whether
    they hold exactly 0..n-1 in order (for 21) and what they charged (for 25)."""
    # 13 (duplicate_*): per existing attempt, in order. Also note (for 21) whether the
    # existing attempts hold exactly the indices 0..n-1 in order.
    existing_attempts: Any = run.candidate_attempts
    if _iterator(existing_attempts):
        return _refusal(
            R.MALFORMED_INPUT_FIELD,
            ids,
            lambda: _consumed("original_run.candidate_attempts", existing_attempts),
        )
    index = attempt.attempt_index
    attempt_id = attempt.attempt_id
    candidate_digest = attempt.candidate_digest
    ordered = True
    # What the existing attempts charged, for check 25 (None: not an exact charge).
    charged: tuple[int, int, int] | None = (0, 0, 0)
    for position, existing in enumerate(existing_attempts):
        existing_index = existing.attempt_index
        if existing_index == index:
            return _refusal(
                R.DUPLICATE_ATTEMPT_INDEX,
                ids,
                _held,
                f"{_ATTEMPT}.attempt_index",
                index,
                position,
            )
        if existing.attempt_id == attempt_id:
            return _refusal(
                R.DUPLICATE_ATTEMPT_ID,
                ids,
                _held,
                f"{_ATTEMPT}.attempt_id",
                attempt_id,
                position,
            )
        if existing.candidate_digest == candidate_digest:
            return _refusal(
                R.DUPLICATE_CANDIDATE_DIGEST,
                ids,
                _held,
                f"{_ATTEMPT}.candidate_digest",
                candidate_digest,
                position,
            )
        if type(existing_index) is not int or existing_index != position:
            ordered = False
        prior = existing.budget_charge
        if (
            charged is None
            or type(prior) is not BudgetCharge
            or type(prior.candidates) is not int
            or type(prior.steps) is not int
            or type(existing.depth) is not int
        ):
            charged = None
        else:
            charged = (
                charged[0] + prior.candidates,
                charged[1] + prior.steps,
                max(charged[2], existing.depth),
            )
    return _Existing(existing_attempts, index, attempt_id, candidate_digest, ordered, charged)


def _within_budget(
    run: Any, attempt: Any, ids: _Ids
) -> tuple[Any, Any, Any] | CandidateAttemptRunBindingRefusal:
    """Check 14: the charge fits what the run has left; the consumption, charge, depth."""
    # 14 (missing_budget_charge, kernel, where the reference raises AttributeError;
    # budget_charge_exceeds_remaining): the reference's comparisons in its order (it
    # compares whatever numbers it is given: bools as ints, a forged float as a float;
    # a value it cannot compare raises there and is refused here). Kernel refuses
    # anything but exact ints after every reference check (15).
    consumed = run.budget_consumed
    charge = attempt.budget_charge
    try:
        charged_candidates = charge.candidates
    except AttributeError:
        return _refusal(
            R.MISSING_BUDGET_CHARGE,
            ids,
            lambda: _not_a(f"{_ATTEMPT}.budget_charge", BudgetCharge, charge),
        )
    depth = attempt.depth
    if (
        charged_candidates < 0
        or charge.steps < 0
        or depth < 0
        or attempt.step_index < 0
        or consumed.candidates_considered + charge.candidates > consumed.max_candidates
        or consumed.steps_used + charge.steps > consumed.max_steps
        or max(consumed.depth_reached, depth) > consumed.max_depth
        or consumed.parallelism_used > consumed.max_parallelism
    ):
        return _refusal(
            R.BUDGET_CHARGE_EXCEEDS_REMAINING,
            ids,
            lambda: _over_budget(charge, depth, attempt.step_index, consumed),
        )
    return consumed, charge, depth
