"""Upstream search-loop records (ADR-0225..0231), byte-compatible with their origin.

These are the records a residual-gated search loop produces before a candidate is
bound to its run (ADR-0232, `kernel.search.binding`)::

    SearchGateDecision -> ComputeBudgetDecision -> GeometricSearchRun
        -> CandidateOperatorResult (carrying a CandidateAttempt and its
           CandidateReconstruction)

Field names, field order, enum values and identity payloads are those of the
implementation that wrote the ADR series, so a document it wrote parses here and
every id reproduces byte for byte. Ids are ``sha256(canonical_json(payload))``
(`kernel.records.identity`), bare lowercase hex; ``explanation`` never enters a payload.

Identity payloads (the codec computes them from ``__identity__``):

- `CandidateAttempt.attempt_id` self-seals over every field but ``explanation``.
  The attempt's *nested form* (every field but ``explanation``, real ``attempt_id``)
  is how it enters a run's payload, and its digest is a binding's
  ``candidate_attempt_ref``.
- `GeometricSearchRun.run_id` self-seals over every field but ``explanation``:
  attempts in nested form, ``budget_consumed`` with all nine fields.
- `SearchGateDecision.decision_id` covers every field but ``decision_id`` and
  ``explanation`` (not self-sealing).
- `ComputeBudgetDecision.budget_id` covers every field but ``budget_id``,
  ``max_wallclock_ms`` and ``explanation`` (not self-sealing).
- `CandidateOperatorResult.operator_result_id` self-seals over
  ``operator_policy_version, input_digest, geometric_search_run_id, attempt_id,
  attempt_index, candidate_digest, candidate_reconstruction_digest, candidate_organ,
  operator_name, operator_version, reason_codes, evidence_spans`` (not the nested
  attempt or reconstruction).
- `CandidateReconstruction.candidate_reconstruction_digest` covers data the record
  does not carry (the residual's kind and code): it cannot be recomputed from the
  record and is taken as given (``from_dict`` never tries).
- Digests the records carry but cannot recompute (the gate's and run's
  ``input_digest``, ``operator_set_id``, ``candidate_digest``) are shape-checked only.

Rules enforced at construction (field *shape*, never cross-field consistency, which
is the binding's job so that a refusal carries the reference's reason code):

- every ``*_id``/``*_digest`` field is a 64-char lowercase hex digest, except
  ``contract_assessment_id``/``original_contract_assessment_id`` (any string, as
  upstream assessment ids are not digests);
- strings are exact ``str`` holding valid Unicode (no lone surrogate);
- ints are exact ints (``bool`` is not) inside +/-(2**53 - 1); run budget counts
  (`BudgetConsumed`, `ComputeBudgetDecision` limits) are non-negative; an attempt's
  ``attempt_index``, ``depth`` and ``step_index`` may be negative here because the
  binding refuses them with the reference's code;
- collections are tuples of the declared item type; enums are members.
"""

from __future__ import annotations

import enum
from typing import Final

import attrs

from kernel.records.codec import UNSEALED, Identity, Record, compute_id
from kernel.records.values import (
    BudgetCharge,
    Count,
    Digest,
    Digests,
    OptionalDigest,
    SafeInt,
    SourceSpan,
)

__all__ = [
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

SEARCH_GATE_POLICY_VERSION: Final = "search_gate.v1"
"""The search gate policy whose decisions these records describe."""
COMPUTE_BUDGET_POLICY_VERSION: Final = "compute_budget.v1"
"""The compute budget policy whose decisions these records describe."""
GEOMETRIC_SEARCH_RUN_POLICY_VERSION: Final = "geometric_search_run.v1"
"""The only run policy the v1 binding accepts."""
GEOMETRIC_SEARCH_RUN_SCHEMA_VERSION: Final = "geometric_search_run.schema.v1"
"""The only run schema the v1 binding accepts."""
CANDIDATE_OPERATOR_POLICY_VERSION: Final = "candidate_operator.v1"
"""The only candidate operator policy the v1 binding accepts."""


# -- enums ----------------------------------------------------------------------------


class CandidateReplayStatus(enum.StrEnum):
    """Where a candidate attempt stands with respect to contract/proof replay."""

    REPLAY_PENDING = "replay_pending"
    """Not yet replayed: the only status a binding accepts (ADR-0232 section 9)."""
    REPLAY_CLOSED = "replay_closed"
    """Replay closed the candidate."""
    REPLAY_REFUSED = "replay_refused"
    """Replay refused the candidate."""


class SearchRunDisposition(enum.StrEnum):
    """How a geometric search run episode ended (ADR-0228)."""

    NOT_STARTED = "not_started"
    BLOCKED_BY_BUDGET = "blocked_by_budget"
    BLOCKED_BY_GATE = "blocked_by_gate"
    INVALID_INPUT = "invalid_input"
    EXHAUSTED_NO_CANDIDATE = "exhausted_no_candidate"
    CANDIDATE_REPLAY_PENDING = "candidate_replay_pending"
    CANDIDATE_REPLAY_CLOSED = "candidate_replay_closed"
    CANDIDATE_REPLAY_REFUSED = "candidate_replay_refused"


class RunExhaustionCode(enum.StrEnum):
    """Why a run produced no (further) candidate."""

    OPERATOR_SET_EMPTY = "operator_set_empty"
    OPERATOR_SPACE_DEPLETED = "operator_space_depleted"
    MAX_CANDIDATES_REACHED = "max_candidates_reached"
    MAX_DEPTH_REACHED = "max_depth_reached"
    MAX_STEPS_REACHED = "max_steps_reached"


class SearchGateStatus(enum.StrEnum):
    """A search gate's decision (ADR-0226)."""

    ELIGIBLE = "eligible"
    INELIGIBLE = "ineligible"
    BLOCKED = "blocked"
    UNASSESSABLE = "unassessable"


class ComputeBudgetStatus(enum.StrEnum):
    """A compute budget's decision (ADR-0227)."""

    BUDGET_ALLOWED = "budget_allowed"
    BUDGET_BLOCKED = "budget_blocked"
    BUDGET_ZERO = "budget_zero"
    BUDGET_UNASSESSABLE = "budget_unassessable"


# -- records --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class BudgetConsumed(Record):
    """A run's consumption so far and its copied ceilings (nested form: all nine fields)."""

    candidates_considered: Count
    """Candidates the run has already considered."""
    max_candidates: Count
    """Ceiling copied from the compute budget."""
    depth_reached: Count
    """Deepest attempt depth reached so far."""
    max_depth: Count
    """Ceiling copied from the compute budget."""
    steps_used: Count
    """Steps already used."""
    max_steps: Count
    """Ceiling copied from the compute budget."""
    parallelism_used: Count
    """Parallel attempts in use."""
    max_parallelism: Count
    """Ceiling copied from the compute budget (v1 binding requires 1)."""
    exhausted: bool
    """Whether the run declared its budget exhausted."""


@attrs.frozen(kw_only=True)
class CandidateAttempt(Record):
    """One candidate attempt of a run.

    Identity: ``attempt_id`` self-seals over every field but ``explanation``.
    """

    __identity__ = Identity(field="attempt_id")

    attempt_id: Digest = UNSEALED
    """Self-sealed id of this attempt."""
    attempt_index: SafeInt
    """Declared position of the attempt in its run (binding checks contiguity)."""
    parent_attempt_id: OptionalDigest
    """The attempt this one refines, if any."""
    operator_id: str
    """Operator that produced the candidate."""
    operator_version: str
    """Version of that operator."""
    input_digest: Digest
    """Digest of the operator input (shared with the operator result)."""
    candidate_digest: Digest
    """Digest of the candidate itself."""
    budget_charge: BudgetCharge
    """Budget the attempt declares it consumes."""
    depth: SafeInt
    """Search depth of the attempt."""
    step_index: SafeInt
    """Step at which the attempt was made."""
    replay_status: CandidateReplayStatus
    """Replay status (pending until replayed)."""
    replay_blockers: tuple[str, ...]
    """Reasons replay cannot run yet."""
    evidence_spans: tuple[SourceSpan, ...]
    """Cited evidence, in order, duplicates kept."""
    explanation: str = ""
    """Prose; never part of an identity."""


@attrs.frozen(kw_only=True)
class GeometricSearchRun(Record):
    """One immutable search run envelope (ADR-0228).

    Identity: ``run_id`` self-seals over every field but ``explanation``, attempts in
    nested form.
    """

    __identity__ = Identity(field="run_id")

    run_id: Digest = UNSEALED
    """Self-sealed id of the run envelope."""
    run_policy_version: str
    """Run policy (v1 binding accepts `GEOMETRIC_SEARCH_RUN_POLICY_VERSION`)."""
    schema_version: str
    """Run schema (v1 binding accepts `GEOMETRIC_SEARCH_RUN_SCHEMA_VERSION`)."""
    problem_frame_digest: Digest
    """Digest of the problem frame searched."""
    contract_assessment_id: str
    """The contract assessment the run answers (not a digest upstream)."""
    residual_ids: Digests
    """Residuals the run addresses, in order."""
    gate_decision_id: Digest
    """The search gate decision that opened the run."""
    budget_id: Digest = UNSEALED
    """The compute budget decision that sized the run."""
    operator_set_id: Digest
    """The candidate operator set the run may use."""
    operator_set_version: str
    """Its version."""
    input_digest: Digest
    """Digest of the run's input (not recomputable from the record)."""
    candidate_attempts: tuple[CandidateAttempt, ...]
    """Attempts already in the run, in order."""
    budget_consumed: BudgetConsumed
    """Consumption so far and ceilings."""
    run_disposition: SearchRunDisposition
    """How the episode stands."""
    exhaustion_code: RunExhaustionCode | None
    """Why it produced no (further) candidate, if it did not."""
    explanation: str = ""
    """Prose; never part of an identity."""


@attrs.frozen(kw_only=True)
class SearchGateDecision(Record):
    """A search gate decision (ADR-0226).

    Identity: ``decision_id`` covers every field but itself and ``explanation``.
    """

    __identity__ = Identity(field="decision_id", seals=False)

    decision_id: Digest = UNSEALED
    """Id over the decision payload (not self-sealing)."""
    policy_version: str
    """Gate policy (`SEARCH_GATE_POLICY_VERSION`)."""
    input_digest: Digest
    """Digest of the gate input (not recomputable from the record)."""
    residual_ids: Digests
    """Residuals gated."""
    candidate_organ: str | None
    """The organ a candidate would repair, if any."""
    status: SearchGateStatus
    """The decision."""
    reason_code: str
    """Why."""
    evidence_spans: tuple[SourceSpan, ...]
    """Cited evidence."""
    explanation: str = ""
    """Prose; never part of an identity."""


@attrs.frozen(kw_only=True)
class ComputeBudgetDecision(Record):
    """A compute budget decision (ADR-0227).

    Identity: ``budget_id`` covers every field but itself, ``max_wallclock_ms`` and
    ``explanation`` (wall-clock limits never enter an identity).
    """

    __identity__ = Identity(
        field="budget_id",
        seals=False,
        exclude=frozenset({"explanation", "max_wallclock_ms"}),
    )

    budget_id: Digest = UNSEALED
    """Id over the budget payload (not self-sealing)."""
    policy_version: str
    """Budget policy (`COMPUTE_BUDGET_POLICY_VERSION`)."""
    gate_decision_id: Digest
    """The gate decision budgeted."""
    gate_policy_version: str
    """That gate's policy."""
    gate_input_digest: Digest
    """That gate's input digest."""
    status: ComputeBudgetStatus
    """The decision."""
    reason_code: str
    """Why."""
    max_candidates: Count
    """Candidate ceiling."""
    max_depth: Count
    """Depth ceiling."""
    max_steps: Count
    """Step ceiling."""
    max_wallclock_ms: Count | None
    """Wall-clock ceiling, if any (never part of the id)."""
    max_parallelism: Count
    """Parallelism ceiling."""
    evidence_spans: tuple[SourceSpan, ...]
    """Cited evidence."""
    explanation: str = ""
    """Prose; never part of an identity."""


@attrs.frozen(kw_only=True)
class CandidateReconstruction(Record):
    """What a candidate operator reconstructed, with its provenance.

    Identity: ``candidate_reconstruction_digest`` self-seals upstream over data this
    record does not carry; it is taken as given and never recomputed.
    """

    __identity__ = Identity(field=None)

    candidate_digest: Digest
    """Digest of the candidate."""
    candidate_reconstruction_digest: Digest
    """Upstream digest of this reconstruction (taken as given)."""
    candidate_organ: str
    """The organ the candidate fills."""
    candidate_payload: tuple[tuple[str, str], ...]
    """The candidate as ``(key, value)`` pairs."""
    evidence_spans: tuple[SourceSpan, ...]
    """Cited evidence."""
    operator_name: str
    """Operator that built it."""
    operator_version: str
    """Its version."""
    operator_provenance: tuple[tuple[str, str], ...]
    """``(key, value)`` provenance, incl. ``operator_set_id`` and ``operator_set_version``."""
    source_residual_id: Digest
    """The residual the candidate addresses."""
    problem_frame_digest: Digest
    """The problem frame it was built for."""
    original_contract_assessment_id: str
    """The contract assessment it was built for."""


@attrs.frozen(kw_only=True)
class CandidateOperatorResult(Record):
    """One candidate operator's output: the attempt and its reconstruction (ADR-0231).

    Identity: ``operator_result_id`` self-seals over the scalar fields, reason codes
    and spans listed in the module docstring (not the nested records).
    """

    __identity__ = Identity(
        field="operator_result_id",
        include=(
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
        ),
    )

    operator_result_id: Digest = UNSEALED
    """Self-sealed id of the result."""
    operator_policy_version: str
    """Operator policy (v1 binding accepts `CANDIDATE_OPERATOR_POLICY_VERSION`)."""
    input_digest: Digest
    """Digest of the operator input."""
    geometric_search_run_id: Digest
    """The run the result was built for."""
    attempt_id: Digest = UNSEALED
    """The attempt's id, repeated."""
    attempt_index: SafeInt
    """The attempt's index, repeated."""
    candidate_digest: Digest
    """The candidate's digest, repeated."""
    candidate_reconstruction_digest: Digest
    """The reconstruction's digest, repeated."""
    candidate_organ: str
    """The organ the candidate fills."""
    operator_name: str
    """Operator that produced the result."""
    operator_version: str
    """Its version."""
    candidate_attempt: CandidateAttempt
    """The attempt produced."""
    candidate_reconstruction: CandidateReconstruction
    """The reconstruction produced."""
    reason_codes: tuple[str, ...]
    """Operator reason codes."""
    evidence_spans: tuple[SourceSpan, ...]
    """Cited evidence."""
    explanation: str = ""
    """Prose; never part of an identity."""


# -- id recomputation (upstream verification is its own step, never the binding's) ---


def recompute_attempt_id(attempt: CandidateAttempt) -> str:
    """The ``attempt_id`` the attempt's payload yields (compare to detect tampering)."""
    return compute_id(attempt)


def recompute_run_id(run: GeometricSearchRun) -> str:
    """The ``run_id`` the run's payload yields."""
    return compute_id(run)


def recompute_decision_id(decision: SearchGateDecision) -> str:
    """The ``decision_id`` the gate decision's payload yields."""
    return compute_id(decision)


def recompute_budget_id(budget: ComputeBudgetDecision) -> str:
    """The ``budget_id`` the budget decision's payload yields."""
    return compute_id(budget)


def recompute_operator_result_id(result: CandidateOperatorResult) -> str:
    """The ``operator_result_id`` the result's payload yields."""
    return compute_id(result)
