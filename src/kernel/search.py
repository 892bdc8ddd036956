"""Upstream search-loop records (ADR-0225..0231), byte-compatible with their origin.

These are the records a residual-gated search loop produces before a candidate is
bound to its run (ADR-0232, `kernel.binding`)::

    SearchGateDecision -> ComputeBudgetDecision -> GeometricSearchRun
        -> CandidateOperatorResult (carrying a CandidateAttempt and its
           CandidateReconstruction)

Field names, field order, enum values and identity payloads are those of the
implementation that wrote the ADR series, so a document it wrote parses here and
every id reproduces byte for byte. Ids are ``sha256(canonical_json(payload))``
(`kernel.identity`), bare lowercase hex; ``explanation`` never enters a payload.

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
from collections.abc import Callable
from typing import Any, Final

import attrs

from kernel.codec import UNSEALED, Identity, Record, compute_id, field_error
from kernel.identity import is_canonical_str
from kernel.values import (
    BudgetCharge,
    SourceSpan,
    digest,
    digests,
    enum_member,
    exact,
    non_negative,
    optional,
    optional_digest,
    safe_int,
    tuple_of,
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

_Validator = Callable[[object, "attrs.Attribute[Any]", object], None]


# -- field validators -----------------------------------------------------------------


def _str_pairs(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """A tuple of ``(str, str)`` tuples (order and duplicates as given)."""
    if type(value) is not tuple:
        raise field_error(attribute.name, f"expected a tuple, got {type(value).__name__}")
    for index, pair in enumerate(value):
        if (
            type(pair) is not tuple
            or len(pair) != 2
            or not is_canonical_str(pair[0])
            or not is_canonical_str(pair[1])
        ):
            raise field_error(f"{attribute.name}[{index}]", "expected a (str, str) pair")


def _optional_str(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not is_canonical_str(value):
        raise field_error(attribute.name, f"expected str or None, got {value!r}")


def _record(kind: type[Record]) -> _Validator:
    """Exactly a ``kind`` record (no subclass, no look-alike)."""

    def check(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if type(value) is not kind:
            raise field_error(
                attribute.name, f"expected a {kind.__name__}, got {type(value).__name__}"
            )

    return check


def _optional_enum(kind: type[enum.Enum]) -> _Validator:
    member = enum_member(kind)

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            member(instance, attribute, value)

    return check


_STR = exact(str)
_SPANS = tuple_of(SourceSpan)
_STRS = tuple_of(str)


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

    candidates_considered: int = attrs.field(validator=non_negative)
    """Candidates the run has already considered."""
    max_candidates: int = attrs.field(validator=non_negative)
    """Ceiling copied from the compute budget."""
    depth_reached: int = attrs.field(validator=non_negative)
    """Deepest attempt depth reached so far."""
    max_depth: int = attrs.field(validator=non_negative)
    """Ceiling copied from the compute budget."""
    steps_used: int = attrs.field(validator=non_negative)
    """Steps already used."""
    max_steps: int = attrs.field(validator=non_negative)
    """Ceiling copied from the compute budget."""
    parallelism_used: int = attrs.field(validator=non_negative)
    """Parallel attempts in use."""
    max_parallelism: int = attrs.field(validator=non_negative)
    """Ceiling copied from the compute budget (v1 binding requires 1)."""
    exhausted: bool = attrs.field(validator=exact(bool))
    """Whether the run declared its budget exhausted."""


@attrs.frozen(kw_only=True)
class CandidateAttempt(Record):
    """One candidate attempt of a run.

    Identity: ``attempt_id`` self-seals over every field but ``explanation``.
    """

    __identity__ = Identity(field="attempt_id")

    attempt_id: str = attrs.field(default=UNSEALED, validator=digest)
    """Self-sealed id of this attempt."""
    attempt_index: int = attrs.field(validator=safe_int)
    """Declared position of the attempt in its run (binding checks contiguity)."""
    parent_attempt_id: str | None = attrs.field(validator=optional_digest)
    """The attempt this one refines, if any."""
    operator_id: str = attrs.field(validator=_STR)
    """Operator that produced the candidate."""
    operator_version: str = attrs.field(validator=_STR)
    """Version of that operator."""
    input_digest: str = attrs.field(validator=digest)
    """Digest of the operator input (shared with the operator result)."""
    candidate_digest: str = attrs.field(validator=digest)
    """Digest of the candidate itself."""
    budget_charge: BudgetCharge = attrs.field(validator=_record(BudgetCharge))
    """Budget the attempt declares it consumes."""
    depth: int = attrs.field(validator=safe_int)
    """Search depth of the attempt."""
    step_index: int = attrs.field(validator=safe_int)
    """Step at which the attempt was made."""
    replay_status: CandidateReplayStatus = attrs.field(validator=enum_member(CandidateReplayStatus))
    """Replay status (pending until replayed)."""
    replay_blockers: tuple[str, ...] = attrs.field(validator=_STRS)
    """Reasons replay cannot run yet."""
    evidence_spans: tuple[SourceSpan, ...] = attrs.field(validator=_SPANS)
    """Cited evidence, in order, duplicates kept."""
    explanation: str = attrs.field(default="", validator=_STR)
    """Prose; never part of an identity."""


@attrs.frozen(kw_only=True)
class GeometricSearchRun(Record):
    """One immutable search run envelope (ADR-0228).

    Identity: ``run_id`` self-seals over every field but ``explanation``, attempts in
    nested form.
    """

    __identity__ = Identity(field="run_id")

    run_id: str = attrs.field(default=UNSEALED, validator=digest)
    """Self-sealed id of the run envelope."""
    run_policy_version: str = attrs.field(validator=_STR)
    """Run policy (v1 binding accepts `GEOMETRIC_SEARCH_RUN_POLICY_VERSION`)."""
    schema_version: str = attrs.field(validator=_STR)
    """Run schema (v1 binding accepts `GEOMETRIC_SEARCH_RUN_SCHEMA_VERSION`)."""
    problem_frame_digest: str = attrs.field(validator=digest)
    """Digest of the problem frame searched."""
    contract_assessment_id: str = attrs.field(validator=_STR)
    """The contract assessment the run answers (not a digest upstream)."""
    residual_ids: tuple[str, ...] = attrs.field(validator=digests)
    """Residuals the run addresses, in order."""
    gate_decision_id: str = attrs.field(validator=digest)
    """The search gate decision that opened the run."""
    budget_id: str = attrs.field(default=UNSEALED, validator=digest)
    """The compute budget decision that sized the run."""
    operator_set_id: str = attrs.field(validator=digest)
    """The candidate operator set the run may use."""
    operator_set_version: str = attrs.field(validator=_STR)
    """Its version."""
    input_digest: str = attrs.field(validator=digest)
    """Digest of the run's input (not recomputable from the record)."""
    candidate_attempts: tuple[CandidateAttempt, ...] = attrs.field(
        validator=tuple_of(CandidateAttempt)
    )
    """Attempts already in the run, in order."""
    budget_consumed: BudgetConsumed = attrs.field(validator=_record(BudgetConsumed))
    """Consumption so far and ceilings."""
    run_disposition: SearchRunDisposition = attrs.field(validator=enum_member(SearchRunDisposition))
    """How the episode stands."""
    exhaustion_code: RunExhaustionCode | None = attrs.field(
        validator=_optional_enum(RunExhaustionCode)
    )
    """Why it produced no (further) candidate, if it did not."""
    explanation: str = attrs.field(default="", validator=_STR)
    """Prose; never part of an identity."""


@attrs.frozen(kw_only=True)
class SearchGateDecision(Record):
    """A search gate decision (ADR-0226).

    Identity: ``decision_id`` covers every field but itself and ``explanation``.
    """

    __identity__ = Identity(field="decision_id", seals=False)

    decision_id: str = attrs.field(default=UNSEALED, validator=digest)
    """Id over the decision payload (not self-sealing)."""
    policy_version: str = attrs.field(validator=_STR)
    """Gate policy (`SEARCH_GATE_POLICY_VERSION`)."""
    input_digest: str = attrs.field(validator=digest)
    """Digest of the gate input (not recomputable from the record)."""
    residual_ids: tuple[str, ...] = attrs.field(validator=digests)
    """Residuals gated."""
    candidate_organ: str | None = attrs.field(validator=_optional_str)
    """The organ a candidate would repair, if any."""
    status: SearchGateStatus = attrs.field(validator=enum_member(SearchGateStatus))
    """The decision."""
    reason_code: str = attrs.field(validator=_STR)
    """Why."""
    evidence_spans: tuple[SourceSpan, ...] = attrs.field(validator=_SPANS)
    """Cited evidence."""
    explanation: str = attrs.field(default="", validator=_STR)
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

    budget_id: str = attrs.field(default=UNSEALED, validator=digest)
    """Id over the budget payload (not self-sealing)."""
    policy_version: str = attrs.field(validator=_STR)
    """Budget policy (`COMPUTE_BUDGET_POLICY_VERSION`)."""
    gate_decision_id: str = attrs.field(validator=digest)
    """The gate decision budgeted."""
    gate_policy_version: str = attrs.field(validator=_STR)
    """That gate's policy."""
    gate_input_digest: str = attrs.field(validator=digest)
    """That gate's input digest."""
    status: ComputeBudgetStatus = attrs.field(validator=enum_member(ComputeBudgetStatus))
    """The decision."""
    reason_code: str = attrs.field(validator=_STR)
    """Why."""
    max_candidates: int = attrs.field(validator=non_negative)
    """Candidate ceiling."""
    max_depth: int = attrs.field(validator=non_negative)
    """Depth ceiling."""
    max_steps: int = attrs.field(validator=non_negative)
    """Step ceiling."""
    max_wallclock_ms: int | None = attrs.field(validator=optional(non_negative))
    """Wall-clock ceiling, if any (never part of the id)."""
    max_parallelism: int = attrs.field(validator=non_negative)
    """Parallelism ceiling."""
    evidence_spans: tuple[SourceSpan, ...] = attrs.field(validator=_SPANS)
    """Cited evidence."""
    explanation: str = attrs.field(default="", validator=_STR)
    """Prose; never part of an identity."""


@attrs.frozen(kw_only=True)
class CandidateReconstruction(Record):
    """What a candidate operator reconstructed, with its provenance.

    Identity: ``candidate_reconstruction_digest`` self-seals upstream over data this
    record does not carry; it is taken as given and never recomputed.
    """

    __identity__ = Identity(field=None)

    candidate_digest: str = attrs.field(validator=digest)
    """Digest of the candidate."""
    candidate_reconstruction_digest: str = attrs.field(validator=digest)
    """Upstream digest of this reconstruction (taken as given)."""
    candidate_organ: str = attrs.field(validator=_STR)
    """The organ the candidate fills."""
    candidate_payload: tuple[tuple[str, str], ...] = attrs.field(validator=_str_pairs)
    """The candidate as ``(key, value)`` pairs."""
    evidence_spans: tuple[SourceSpan, ...] = attrs.field(validator=_SPANS)
    """Cited evidence."""
    operator_name: str = attrs.field(validator=_STR)
    """Operator that built it."""
    operator_version: str = attrs.field(validator=_STR)
    """Its version."""
    operator_provenance: tuple[tuple[str, str], ...] = attrs.field(validator=_str_pairs)
    """``(key, value)`` provenance, incl. ``operator_set_id`` and ``operator_set_version``."""
    source_residual_id: str = attrs.field(validator=digest)
    """The residual the candidate addresses."""
    problem_frame_digest: str = attrs.field(validator=digest)
    """The problem frame it was built for."""
    original_contract_assessment_id: str = attrs.field(validator=_STR)
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

    operator_result_id: str = attrs.field(default=UNSEALED, validator=digest)
    """Self-sealed id of the result."""
    operator_policy_version: str = attrs.field(validator=_STR)
    """Operator policy (v1 binding accepts `CANDIDATE_OPERATOR_POLICY_VERSION`)."""
    input_digest: str = attrs.field(validator=digest)
    """Digest of the operator input."""
    geometric_search_run_id: str = attrs.field(validator=digest)
    """The run the result was built for."""
    attempt_id: str = attrs.field(default=UNSEALED, validator=digest)
    """The attempt's id, repeated."""
    attempt_index: int = attrs.field(validator=safe_int)
    """The attempt's index, repeated."""
    candidate_digest: str = attrs.field(validator=digest)
    """The candidate's digest, repeated."""
    candidate_reconstruction_digest: str = attrs.field(validator=digest)
    """The reconstruction's digest, repeated."""
    candidate_organ: str = attrs.field(validator=_STR)
    """The organ the candidate fills."""
    operator_name: str = attrs.field(validator=_STR)
    """Operator that produced the result."""
    operator_version: str = attrs.field(validator=_STR)
    """Its version."""
    candidate_attempt: CandidateAttempt = attrs.field(validator=_record(CandidateAttempt))
    """The attempt produced."""
    candidate_reconstruction: CandidateReconstruction = attrs.field(
        validator=_record(CandidateReconstruction)
    )
    """The reconstruction produced."""
    reason_codes: tuple[str, ...] = attrs.field(validator=_STRS)
    """Operator reason codes."""
    evidence_spans: tuple[SourceSpan, ...] = attrs.field(validator=_SPANS)
    """Cited evidence."""
    explanation: str = attrs.field(default="", validator=_STR)
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
