"""Strategies for `kernel.search.records` records and `kernel.search.binding` inputs and outcomes.

- one strategy per record (all sealed, ids reproduce);
- `binding_pairs`: a ``(run, operator_result)`` pair that binds, with zero or more
  existing attempts in the run;
- `corrupted_binding_pairs`: such a pair with one cross-checked field changed
  *without re-sealing any id* (as the reference's tests do), and the reason code
  the binding must refuse it with.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from hypothesis import strategies as st

from kernel.records.codec import seal
from kernel.records.values import BudgetCharge, unwrap
from kernel.search.binding import (
    CandidateAttemptRunBinding,
    CandidateAttemptRunBindingRefusal,
    RunAttemptBindingRefusalReason,
    bind_candidate_attempt_to_run,
)
from kernel.search.records import (
    CANDIDATE_OPERATOR_POLICY_VERSION,
    COMPUTE_BUDGET_POLICY_VERSION,
    GEOMETRIC_SEARCH_RUN_POLICY_VERSION,
    GEOMETRIC_SEARCH_RUN_SCHEMA_VERSION,
    SEARCH_GATE_POLICY_VERSION,
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
)
from kernel.strategies._seeded import SEEDS, Stream, seeded
from kernel.strategies.values import (
    seeded_charge,
    seeded_span,
    seeded_spans,
)

__all__ = [
    "CORRUPTED_FIELDS",
    "BindingPair",
    "CorruptedPair",
    "binding_pairs",
    "binding_refusals",
    "bindings",
    "budget_consumed",
    "candidate_attempts",
    "candidate_operator_results",
    "candidate_reconstructions",
    "compute_budget_decisions",
    "corrupted_binding_pairs",
    "geometric_search_runs",
    "search_gate_decisions",
]

BindingPair = tuple[GeometricSearchRun, CandidateOperatorResult]
"""A run and an operator result that bind."""
CorruptedPair = tuple[GeometricSearchRun, CandidateOperatorResult, RunAttemptBindingRefusalReason]
"""A run, an operator result, and the code the binding must refuse them with."""

R = RunAttemptBindingRefusalReason


def budget_consumed() -> st.SearchStrategy[BudgetConsumed]:
    """Any well-formed `BudgetConsumed` (not necessarily one a binding accepts)."""
    return SEEDS.map(lambda seed: _consumed_of(Stream(seed)))


def _consumed_of(s: Stream) -> BudgetConsumed:
    return BudgetConsumed(
        candidates_considered=s.integer(0, 50),
        max_candidates=s.integer(0, 50),
        depth_reached=s.integer(0, 50),
        max_depth=s.integer(0, 50),
        steps_used=s.integer(0, 50),
        max_steps=s.integer(0, 50),
        parallelism_used=s.integer(0, 50),
        max_parallelism=s.integer(0, 50),
        exhausted=s.flag(),
    )


def candidate_attempts(
    *, index: int | None = None, pending: bool = False
) -> st.SearchStrategy[CandidateAttempt]:
    """A sealed `CandidateAttempt` (pending with no blockers when ``pending``)."""
    return SEEDS.map(lambda seed: _attempt_of(Stream(seed), index=index, pending=pending))


def _attempt_of(stream: Stream, *, index: int | None, pending: bool) -> CandidateAttempt:
    s = stream
    return seal(
        CandidateAttempt,
        attempt_index=s.integer(0, 20) if index is None else index,
        parent_attempt_id=s.maybe(s.digest),
        operator_id=s.text(),
        operator_version=s.text(),
        input_digest=s.digest(),
        candidate_digest=s.digest(),
        budget_charge=seeded_charge(s),
        depth=s.integer(0, 5),
        step_index=s.integer(0, 5),
        replay_status=(
            CandidateReplayStatus.REPLAY_PENDING if pending else s.pick(_REPLAY_STATUSES)
        ),
        replay_blockers=() if pending else s.texts(2),
        evidence_spans=seeded_spans(s),
        explanation=s.text(),
    )


_REPLAY_STATUSES = tuple(CandidateReplayStatus)


def geometric_search_runs() -> st.SearchStrategy[GeometricSearchRun]:
    """A sealed `GeometricSearchRun` with up to three attempts (any consistency)."""
    return seeded(_run_of, 0, 3)


def _run_of(count: int, s: Stream) -> GeometricSearchRun:
    return seal(
        GeometricSearchRun,
        run_policy_version=GEOMETRIC_SEARCH_RUN_POLICY_VERSION,
        schema_version=GEOMETRIC_SEARCH_RUN_SCHEMA_VERSION,
        problem_frame_digest=s.digest(),
        contract_assessment_id=s.text(),
        residual_ids=s.digests(3, min_count=1),
        gate_decision_id=s.digest(),
        budget_id=s.digest(),
        operator_set_id=s.digest(),
        operator_set_version=s.text(),
        input_digest=s.digest(),
        candidate_attempts=tuple(_attempt_of(s, index=None, pending=False) for _ in range(count)),
        budget_consumed=_consumed_of(s),
        run_disposition=s.pick(_DISPOSITIONS),
        exhaustion_code=s.maybe(lambda: s.pick(_EXHAUSTION_CODES)),
        explanation=s.text(),
    )


_DISPOSITIONS = tuple(SearchRunDisposition)
_EXHAUSTION_CODES = tuple(RunExhaustionCode)


def search_gate_decisions() -> st.SearchStrategy[SearchGateDecision]:
    """A `SearchGateDecision` with a reproducing ``decision_id``."""
    return SEEDS.map(lambda seed: _gate_decision_of(Stream(seed)))


def _gate_decision_of(s: Stream) -> SearchGateDecision:
    return seal(
        SearchGateDecision,
        policy_version=SEARCH_GATE_POLICY_VERSION,
        input_digest=s.digest(),
        residual_ids=s.digests(3),
        candidate_organ=s.maybe(s.text),
        status=s.pick(_GATE_STATUSES),
        reason_code=s.text(),
        evidence_spans=seeded_spans(s),
        explanation=s.text(),
    )


_GATE_STATUSES = tuple(SearchGateStatus)


def compute_budget_decisions() -> st.SearchStrategy[ComputeBudgetDecision]:
    """A `ComputeBudgetDecision` with a reproducing ``budget_id``."""
    return SEEDS.map(lambda seed: _budget_decision_of(Stream(seed)))


def _budget_decision_of(s: Stream) -> ComputeBudgetDecision:
    return seal(
        ComputeBudgetDecision,
        policy_version=COMPUTE_BUDGET_POLICY_VERSION,
        gate_decision_id=s.digest(),
        gate_policy_version=SEARCH_GATE_POLICY_VERSION,
        gate_input_digest=s.digest(),
        status=s.pick(_BUDGET_STATUSES),
        reason_code=s.text(),
        max_candidates=s.integer(0, 50),
        max_depth=s.integer(0, 50),
        max_steps=s.integer(0, 50),
        max_wallclock_ms=s.maybe(lambda: s.integer(0, 50)),
        max_parallelism=s.integer(0, 50),
        evidence_spans=seeded_spans(s),
        explanation=s.text(),
    )


_BUDGET_STATUSES = tuple(ComputeBudgetStatus)


def candidate_reconstructions() -> st.SearchStrategy[CandidateReconstruction]:
    """Any well-formed `CandidateReconstruction` (its digest is taken as given)."""
    return SEEDS.map(lambda seed: _reconstruction_of(Stream(seed)))


def _reconstruction_of(s: Stream) -> CandidateReconstruction:
    return CandidateReconstruction(
        candidate_digest=s.digest(),
        candidate_reconstruction_digest=s.digest(),
        candidate_organ=s.text(),
        candidate_payload=_pairs_of(s, 3),
        evidence_spans=seeded_spans(s),
        operator_name=s.text(),
        operator_version=s.text(),
        operator_provenance=_pairs_of(s, 3),
        source_residual_id=s.digest(),
        problem_frame_digest=s.digest(),
        original_contract_assessment_id=s.text(),
    )


def candidate_operator_results() -> st.SearchStrategy[CandidateOperatorResult]:
    """A sealed `CandidateOperatorResult` (bound to some run: see `binding_pairs`)."""
    return binding_pairs(max_existing=0).map(lambda pair: pair[1])


def binding_pairs(*, max_existing: int = 3) -> st.SearchStrategy[BindingPair]:
    """A ``(run, operator_result)`` pair that binds, with 0..max_existing attempts."""
    return seeded(_pair_of, 0, max_existing)


def _pair_of(count: int, s: Stream) -> BindingPair:
    # Every digest of one stream is distinct, so candidate digests never collide.
    existing = tuple(_attempt_of(s, index=position, pending=False) for position in range(count))
    charge = seeded_charge(s)
    depth = s.integer(0, 4)
    run = _binding_run(s, existing, charge, depth)
    spans = seeded_spans(s)
    attempt = seal(
        CandidateAttempt,
        attempt_index=count,
        parent_attempt_id=(
            s.maybe(lambda: s.pick([a.attempt_id for a in existing])) if existing else None
        ),
        operator_id=s.text(),
        operator_version=s.text(),
        input_digest=s.digest(),
        candidate_digest=s.digest(),
        budget_charge=charge,
        depth=depth,
        step_index=s.integer(0, 20),
        replay_status=CandidateReplayStatus.REPLAY_PENDING,
        replay_blockers=(),
        evidence_spans=spans,
        explanation=s.text(),
    )
    return run, _result_of(s, run, attempt)


def _binding_run(
    s: Stream,
    existing: tuple[CandidateAttempt, ...],
    charge: BudgetCharge,
    depth: int,
) -> GeometricSearchRun:
    """The run the next attempt joins: its budget leaves room for ``charge`` at ``depth``."""
    considered = sum(a.budget_charge.candidates for a in existing) + s.integer(0, 2)
    steps = sum(a.budget_charge.steps for a in existing) + s.integer(0, 2)
    reached = max((a.depth for a in existing), default=0)
    consumed = BudgetConsumed(
        candidates_considered=considered,
        max_candidates=considered + charge.candidates + s.integer(0, 3),
        depth_reached=reached,
        max_depth=max(reached, depth) + s.integer(0, 2),
        steps_used=steps,
        max_steps=steps + charge.steps + s.integer(0, 3),
        parallelism_used=s.integer(0, 1),
        max_parallelism=1,
        exhausted=s.flag(),
    )
    residual_ids = s.digests(3, min_count=1)
    return seal(
        GeometricSearchRun,
        run_policy_version=GEOMETRIC_SEARCH_RUN_POLICY_VERSION,
        schema_version=GEOMETRIC_SEARCH_RUN_SCHEMA_VERSION,
        problem_frame_digest=s.digest(),
        contract_assessment_id=s.text(),
        residual_ids=residual_ids,
        gate_decision_id=s.digest(),
        budget_id=s.digest(),
        operator_set_id=s.digest(),
        operator_set_version=s.text(),
        input_digest=s.digest(),
        candidate_attempts=existing,
        budget_consumed=consumed,
        run_disposition=s.pick(_DISPOSITIONS),
        exhaustion_code=s.maybe(lambda: s.pick(_EXHAUSTION_CODES)),
        explanation=s.text(),
    )


def _result_of(
    s: Stream, run: GeometricSearchRun, attempt: CandidateAttempt
) -> CandidateOperatorResult:
    """The operator result that binds ``attempt`` to ``run`` (its reconstruction included)."""
    spans = attempt.evidence_spans
    listed = [
        ("operator_set_id", run.operator_set_id),
        ("operator_set_version", run.operator_set_version),
        *_pairs_of(s, 2),
    ]
    # A seeded shuffle: the binding must not depend on the provenance's order.
    provenance = tuple(sorted(listed, key=lambda _: s.integer(0, 2**32)))
    reconstruction = CandidateReconstruction(
        candidate_digest=attempt.candidate_digest,
        candidate_reconstruction_digest=s.digest(),
        candidate_organ=s.text(),
        candidate_payload=_pairs_of(s, 3),
        evidence_spans=spans,
        operator_name=attempt.operator_id,
        operator_version=attempt.operator_version,
        operator_provenance=provenance,
        source_residual_id=s.pick(list(run.residual_ids)),
        problem_frame_digest=run.problem_frame_digest,
        original_contract_assessment_id=run.contract_assessment_id,
    )
    return seal(
        CandidateOperatorResult,
        operator_policy_version=CANDIDATE_OPERATOR_POLICY_VERSION,
        input_digest=attempt.input_digest,
        geometric_search_run_id=run.run_id,
        attempt_id=attempt.attempt_id,
        attempt_index=attempt.attempt_index,
        candidate_digest=attempt.candidate_digest,
        candidate_reconstruction_digest=reconstruction.candidate_reconstruction_digest,
        candidate_organ=reconstruction.candidate_organ,
        operator_name=attempt.operator_id,
        operator_version=attempt.operator_version,
        candidate_attempt=attempt,
        candidate_reconstruction=reconstruction,
        reason_codes=s.texts(2),
        evidence_spans=spans,
        explanation=s.text(),
    )


def _pairs_of(stream: Stream, max_count: int) -> tuple[tuple[str, str], ...]:
    return tuple((stream.text(), stream.text()) for _ in range(stream.integer(0, max_count)))


def bindings() -> st.SearchStrategy[CandidateAttemptRunBinding]:
    """Bindings of `binding_pairs`."""
    return binding_pairs().map(_bound)


def binding_refusals() -> st.SearchStrategy[CandidateAttemptRunBindingRefusal]:
    """Refusals of `corrupted_binding_pairs`."""
    return corrupted_binding_pairs().map(_refused)


def _bound(pair: BindingPair) -> CandidateAttemptRunBinding:
    # A drawn pair binds: a refusal here is a bug of this module, raised as such.
    return unwrap(
        bind_candidate_attempt_to_run(original_run=pair[0], candidate_operator_result=pair[1])
    )


def _refused(case: CorruptedPair) -> CandidateAttemptRunBindingRefusal:
    outcome = bind_candidate_attempt_to_run(original_run=case[0], candidate_operator_result=case[1])
    if type(outcome) is not CandidateAttemptRunBindingRefusal:
        raise TypeError(f"a corrupted pair was not refused: {outcome}")
    return outcome


# -- single-field corruptions (ids deliberately not re-sealed) ------------------------

_Corruption = Callable[[Stream, GeometricSearchRun, CandidateOperatorResult], BindingPair]


def _other(s: Stream, value: str) -> str:
    digest = s.digest()
    # Two digests of one stream differ, so the second differs from value when the first does not.
    return digest if digest != value else s.digest()


def _other_text(s: Stream, value: str) -> str:
    text = s.text()
    return text if text != value else f"{text}x"


def _result(result: CandidateOperatorResult, **changes: object) -> CandidateOperatorResult:
    return attrs.evolve(result, **changes)  # type: ignore[arg-type]


def _attempt(result: CandidateOperatorResult, **changes: object) -> CandidateOperatorResult:
    return attrs.evolve(result, candidate_attempt=attrs.evolve(result.candidate_attempt, **changes))  # type: ignore[arg-type]


def _recon(result: CandidateOperatorResult, **changes: object) -> CandidateOperatorResult:
    return attrs.evolve(
        result,
        candidate_reconstruction=attrs.evolve(result.candidate_reconstruction, **changes),  # type: ignore[arg-type]
    )


def _consumed(run: GeometricSearchRun, **changes: object) -> GeometricSearchRun:
    return attrs.evolve(run, budget_consumed=attrs.evolve(run.budget_consumed, **changes))  # type: ignore[arg-type]


def _both_index(result: CandidateOperatorResult, index: int) -> CandidateOperatorResult:
    return _result(
        result,
        attempt_index=index,
        candidate_attempt=attrs.evolve(result.candidate_attempt, attempt_index=index),
    )


def _existing_like(
    s: Stream, run: GeometricSearchRun, result: CandidateOperatorResult, **same: object
) -> BindingPair:
    """The pair with one existing attempt of the run (it has some: `_MIN_EXISTING`)
    replaced to share ``same`` with the new one."""
    position = s.integer(0, len(run.candidate_attempts) - 1)
    changed = attrs.evolve(run.candidate_attempts[position], **same)  # type: ignore[arg-type]
    attempts = list(run.candidate_attempts)
    attempts[position] = changed
    return attrs.evolve(run, candidate_attempts=tuple(attempts)), result


def _span_other(s: Stream, spans: tuple[object, ...]) -> tuple[object, ...]:
    other = seeded_spans(s)
    return other if other != spans else (*other, seeded_span(s))


_CORRUPTIONS: dict[str, tuple[RunAttemptBindingRefusalReason, _Corruption]] = {
    "result.geometric_search_run_id": (
        R.RUN_RESULT_MISMATCH,
        lambda d, run, res: (run, _result(res, geometric_search_run_id=_other(d, run.run_id))),
    ),
    "result.attempt_id": (
        R.ATTEMPT_RESULT_MISMATCH,
        lambda d, run, res: (run, _result(res, attempt_id=_other(d, res.attempt_id))),
    ),
    "result.attempt_index": (
        R.ATTEMPT_RESULT_MISMATCH,
        lambda d, run, res: (
            run,
            _result(res, attempt_index=_other_int(d, res.attempt_index)),
        ),
    ),
    "result.candidate_digest": (
        R.ATTEMPT_RESULT_MISMATCH,
        lambda d, run, res: (run, _result(res, candidate_digest=_other(d, res.candidate_digest))),
    ),
    "result.input_digest": (
        R.ATTEMPT_RESULT_MISMATCH,
        lambda d, run, res: (run, _result(res, input_digest=_other(d, res.input_digest))),
    ),
    "result.operator_name": (
        R.ATTEMPT_RESULT_MISMATCH,
        lambda d, run, res: (run, _result(res, operator_name=_other_text(d, res.operator_name))),
    ),
    "result.operator_version": (
        R.ATTEMPT_RESULT_MISMATCH,
        lambda d, run, res: (
            run,
            _result(res, operator_version=_other_text(d, res.operator_version)),
        ),
    ),
    "attempt.candidate_digest": (
        R.ATTEMPT_RESULT_MISMATCH,
        lambda d, run, res: (run, _attempt(res, candidate_digest=_other(d, res.candidate_digest))),
    ),
    "reconstruction.candidate_digest": (
        R.RECONSTRUCTION_RESULT_MISMATCH,
        lambda d, run, res: (run, _recon(res, candidate_digest=_other(d, res.candidate_digest))),
    ),
    "reconstruction.candidate_reconstruction_digest": (
        R.RECONSTRUCTION_RESULT_MISMATCH,
        lambda d, run, res: (
            run,
            _recon(
                res,
                candidate_reconstruction_digest=_other(d, res.candidate_reconstruction_digest),
            ),
        ),
    ),
    "attempt.replay_status": (
        R.REPLAY_STATUS_NOT_PENDING,
        lambda d, run, res: (
            run,
            _attempt(
                res,
                replay_status=d.pick(
                    (CandidateReplayStatus.REPLAY_CLOSED, CandidateReplayStatus.REPLAY_REFUSED)
                ),
            ),
        ),
    ),
    "attempt.replay_blockers": (
        R.REPLAY_BLOCKERS_PRESENT,
        lambda d, run, res: (
            run,
            _attempt(res, replay_blockers=d.texts(2, min_count=1)),
        ),
    ),
    "reconstruction.source_residual_id": (
        R.RUN_IDENTITY_MISMATCH,
        lambda d, run, res: (
            run,
            _recon(res, source_residual_id=_other_than(d, run.residual_ids)),
        ),
    ),
    "reconstruction.problem_frame_digest": (
        R.RUN_IDENTITY_MISMATCH,
        lambda d, run, res: (
            run,
            _recon(res, problem_frame_digest=_other(d, run.problem_frame_digest)),
        ),
    ),
    "reconstruction.original_contract_assessment_id": (
        R.RUN_IDENTITY_MISMATCH,
        lambda d, run, res: (
            run,
            _recon(res, original_contract_assessment_id=_other_text(d, run.contract_assessment_id)),
        ),
    ),
    "run.operator_set_id": (
        R.OPERATOR_SET_MISMATCH,
        lambda d, run, res: (
            attrs.evolve(run, operator_set_id=_other(d, run.operator_set_id)),
            res,
        ),
    ),
    "run.operator_set_version": (
        R.OPERATOR_SET_MISMATCH,
        lambda d, run, res: (
            attrs.evolve(run, operator_set_version=_other_text(d, run.operator_set_version)),
            res,
        ),
    ),
    "result.evidence_spans": (
        R.MALFORMED_EVIDENCE_SPAN,
        lambda d, run, res: (
            run,
            _result(res, evidence_spans=_span_other(d, res.candidate_attempt.evidence_spans)),
        ),
    ),
    "reconstruction.evidence_spans": (
        R.MALFORMED_EVIDENCE_SPAN,
        lambda d, run, res: (
            run,
            _recon(res, evidence_spans=_span_other(d, res.candidate_attempt.evidence_spans)),
        ),
    ),
    "run.candidate_attempts[i].attempt_index": (
        R.DUPLICATE_ATTEMPT_INDEX,
        lambda d, run, res: _existing_like(d, run, res, attempt_index=res.attempt_index),
    ),
    "run.candidate_attempts[i].attempt_id": (
        R.DUPLICATE_ATTEMPT_ID,
        lambda d, run, res: _existing_like(
            d, run, res, attempt_id=res.attempt_id, attempt_index=res.attempt_index + 1
        ),
    ),
    "run.candidate_attempts[i].candidate_digest": (
        R.DUPLICATE_CANDIDATE_DIGEST,
        lambda d, run, res: _existing_like(
            d,
            run,
            res,
            candidate_digest=res.candidate_digest,
            attempt_index=res.attempt_index + 1,
        ),
    ),
    "attempt.budget_charge.candidates": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING,
        lambda d, run, res: (run, _charge(res, candidates=_over(d, run, "candidates"))),
    ),
    "attempt.budget_charge.steps": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING,
        lambda d, run, res: (run, _charge(res, steps=_over(d, run, "steps"))),
    ),
    "attempt.budget_charge negative": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING,
        lambda d, run, res: (run, _charge(res, candidates=d.integer(-5, -1))),
    ),
    "attempt.depth": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING,
        lambda d, run, res: (
            run,
            _attempt(res, depth=run.budget_consumed.max_depth + d.integer(1, 3)),
        ),
    ),
    "attempt.depth negative": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING,
        lambda d, run, res: (run, _attempt(res, depth=d.integer(-5, -1))),
    ),
    "attempt.step_index negative": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING,
        lambda d, run, res: (run, _attempt(res, step_index=d.integer(-5, -1))),
    ),
    "run.budget_consumed.parallelism_used": (
        R.BUDGET_CHARGE_EXCEEDS_REMAINING,
        lambda d, run, res: (_consumed(run, parallelism_used=d.integer(2, 4)), res),
    ),
    "run.run_policy_version": (
        R.UNSUPPORTED_RUN_POLICY,
        lambda d, run, res: (
            attrs.evolve(
                run, run_policy_version=_other_text(d, GEOMETRIC_SEARCH_RUN_POLICY_VERSION)
            ),
            res,
        ),
    ),
    "run.schema_version": (
        R.UNSUPPORTED_RUN_POLICY,
        lambda d, run, res: (
            attrs.evolve(run, schema_version=_other_text(d, GEOMETRIC_SEARCH_RUN_SCHEMA_VERSION)),
            res,
        ),
    ),
    "result.operator_policy_version": (
        R.UNSUPPORTED_OPERATOR_POLICY,
        lambda d, run, res: (
            run,
            _result(res, operator_policy_version=_other_text(d, CANDIDATE_OPERATOR_POLICY_VERSION)),
        ),
    ),
    "attempt.budget_charge zero": (
        R.NON_POSITIVE_BUDGET_CHARGE,
        lambda d, run, res: (
            run,
            _charge(res, **{d.pick(("candidates", "steps")): 0}),
        ),
    ),
    "run.budget_consumed.max_parallelism": (
        R.UNSUPPORTED_PARALLELISM,
        lambda d, run, res: (_consumed(run, max_parallelism=d.integer(2, 8)), res),
    ),
    "run.candidate_attempts order": (
        R.AMBIGUOUS_ATTEMPT_ORDER,
        lambda d, run, res: (
            attrs.evolve(run, candidate_attempts=run.candidate_attempts[::-1]),
            res,
        ),
    ),
    "attempt_index gap": (
        R.ATTEMPT_INDEX_GAP,
        lambda d, run, res: (
            run,
            _both_index(res, len(run.candidate_attempts) + d.integer(1, 3)),
        ),
    ),
    "attempt_index negative": (
        R.ATTEMPT_INDEX_GAP,
        lambda d, run, res: (run, _both_index(res, d.integer(-3, -1))),
    ),
}
"""Every single-field corruption, by the field it changes, with its expected code."""

CORRUPTED_FIELDS: tuple[str, ...] = tuple(_CORRUPTIONS)
"""Names of the corruptions `corrupted_binding_pairs` draws from."""

_MIN_EXISTING: dict[str, int] = {
    "run.candidate_attempts[i].attempt_index": 1,
    "run.candidate_attempts[i].attempt_id": 1,
    "run.candidate_attempts[i].candidate_digest": 1,
    "run.candidate_attempts order": 2,
}
"""Corruptions of the run's existing attempts, and how many the pair needs."""


def _charge(result: CandidateOperatorResult, **changes: int) -> CandidateOperatorResult:
    charge = attrs.evolve(result.candidate_attempt.budget_charge, **changes)
    return _attempt(result, budget_charge=charge)


def _over(s: Stream, run: GeometricSearchRun, kind: str) -> int:
    consumed = run.budget_consumed
    if kind == "candidates":
        room = consumed.max_candidates - consumed.candidates_considered
    else:
        room = consumed.max_steps - consumed.steps_used
    return room + s.integer(1, 3)


def _other_int(s: Stream, value: int) -> int:
    drawn = s.integer(0, 50)
    return drawn if drawn != value else drawn + 1


def _other_than(s: Stream, values: tuple[str, ...]) -> str:
    # The stream's next digests until one is not in values (the first, unless values
    # holds digests of this very stream that are still to come).
    return next(digest for digest in iter(s.digest, "") if digest not in values)


def corrupted_binding_pairs(
    *, fields: tuple[str, ...] = CORRUPTED_FIELDS
) -> st.SearchStrategy[CorruptedPair]:
    """A `binding_pairs` pair with one field corrupted (ids not re-sealed), and its code.

    One draw: it picks the corruption (its remainder), the number of existing attempts
    and the stream that derives the pair and the corrupted value.

    Args:
        fields: restrict to these corruption names (default: all of `CORRUPTED_FIELDS`).
    """
    return seeded(lambda index, s: _corrupted(fields[index], s), 0, len(fields) - 1)


def _corrupted(name: str, s: Stream) -> CorruptedPair:
    code, corrupt = _CORRUPTIONS[name]
    run, result = corrupt(s, *_pair_of(s.integer(_MIN_EXISTING.get(name, 0), 3), s))
    return run, result, code
