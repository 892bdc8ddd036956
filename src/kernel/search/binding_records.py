"""ADR-0232's binding records: the reason codes, the input, the binding and the
refusal (`kernel.search.binding` binds and verifies; its docstring states the checks)."""

from __future__ import annotations

import enum
from typing import Any, Final, ParamSpec, TypeAlias, TypeVar

import attrs

from kernel.records.codec import (
    UNSEALED,
    Identity,
    Record,
    field_error,
)
from kernel.records.values import (
    Digest,
    Digests,
    OptionalDigest,
    Refusal,
    SafeInt,
    SourceSpan,
    VersionPairsField,
)
from kernel.search.records import (
    BudgetCharge,
)

__all__ = [
    "BINDING_POLICY_NAME",
    "CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION",
    "CandidateAttemptRunBinding",
    "CandidateAttemptRunBindingInput",
    "CandidateAttemptRunBindingOutcome",
    "CandidateAttemptRunBindingRefusal",
    "RunAttemptBindingRefusalReason",
    "RunAttemptMembership",
]


CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION: Final = "candidate_attempt_run_binding.v1"
"""The binding policy this module implements."""

BINDING_POLICY_NAME: Final = "candidate_attempt_run_binding"
"""Name under which ``policy_versions`` may declare the binding policy (check 18)."""

_BOUND_EXPLANATION: Final = "CandidateAttempt structurally bound to GeometricSearchRun."


class RunAttemptBindingRefusalReason(enum.StrEnum):
    """Closed reason codes of the binding and its verifiers (check numbers: module doc)."""

    INVALID_BINDING_INPUT = "invalid_binding_input"
    """1-3: an argument is not the record it must be."""
    UNSUPPORTED_BINDING_POLICY = "unsupported_binding_policy"
    """18: another binding policy was declared (verifiers: the binding's own policy)."""
    RUN_RESULT_MISMATCH = "run_result_mismatch"
    """5: the result was built for another run."""
    ATTEMPT_RESULT_MISMATCH = "attempt_result_mismatch"
    """6: the result and its attempt disagree."""
    RECONSTRUCTION_RESULT_MISMATCH = "reconstruction_result_mismatch"
    """7: the result and its reconstruction disagree."""
    REPLAY_STATUS_NOT_PENDING = "replay_status_not_pending"
    """8: the attempt was already replayed."""
    REPLAY_BLOCKERS_PRESENT = "replay_blockers_present"
    """9: the attempt carries replay blockers."""
    DUPLICATE_ATTEMPT_INDEX = "duplicate_attempt_index"
    """13: the run already holds an attempt at that index."""
    DUPLICATE_ATTEMPT_ID = "duplicate_attempt_id"
    """13: the run already holds that attempt."""
    DUPLICATE_CANDIDATE_DIGEST = "duplicate_candidate_digest"
    """13: the run already holds that candidate (refused in v1)."""
    BUDGET_CHARGE_EXCEEDS_REMAINING = "budget_charge_exceeds_remaining"
    """14: negative charge/depth/step, or the charge does not fit the run's budget."""
    OPERATOR_SET_MISMATCH = "operator_set_mismatch"
    """11: the candidate was not built by the run's operator set."""
    RUN_IDENTITY_MISMATCH = "run_identity_mismatch"
    """10: the candidate addresses another residual, problem frame or assessment."""
    MALFORMED_EVIDENCE_SPAN = "malformed_evidence_span"
    """12, 23: invalid spans, or span streams that differ."""
    UNSUPPORTED_SCHEMA_VERSION = "unsupported_schema_version"
    """4: version pairs are not unique, sorted, non-empty str pairs."""
    # -- kernel's stricter checks (ADR-0232 rules the reference skips) ---------------
    MISSING_CANDIDATE_RECONSTRUCTION = "missing_candidate_reconstruction"
    """7: the result carries no `CandidateReconstruction`."""
    MISSING_BUDGET_CHARGE = "missing_budget_charge"
    """14: the attempt carries no `BudgetCharge`."""
    MALFORMED_INPUT_FIELD = "malformed_input_field"
    """10-14, 15, 24: a field has a type or value its record refuses (bool as int, a
    record altered after construction, an unencodable value)."""
    UNSUPPORTED_RUN_POLICY = "unsupported_run_policy"
    """16: run policy or schema is not the v1 one."""
    UNSUPPORTED_OPERATOR_POLICY = "unsupported_operator_policy"
    """17: operator policy is not the v1 one."""
    NON_POSITIVE_BUDGET_CHARGE = "non_positive_budget_charge"
    """19: a zero candidate or step charge (an attempt always consumes)."""
    UNSUPPORTED_PARALLELISM = "unsupported_parallelism"
    """20: v1 runs are sequential (``max_parallelism == 1``)."""
    AMBIGUOUS_ATTEMPT_ORDER = "ambiguous_attempt_order"
    """21: existing attempts are not exactly indices ``0..n-1`` in order."""
    ATTEMPT_INDEX_GAP = "attempt_index_gap"
    """22: the declared index is not the next one (``n``)."""
    RUN_ACCOUNTING_UNDERSTATED = "run_accounting_understated"
    """25: the run declares less consumption (candidates, steps, depth) than its
    existing attempts charged."""
    # -- verifiers (`verify_binding`, `verify_binding_set`) ---------------------------
    BINDING_ID_MISMATCH = "binding_id_mismatch"
    """The binding's ``binding_id`` does not reproduce from its own payload."""
    INPUT_DIGEST_MISMATCH = "input_digest_mismatch"
    """The binding's ``input_digest`` is not the one its inputs yield."""
    CANDIDATE_ATTEMPT_REF_MISMATCH = "candidate_attempt_ref_mismatch"
    """The binding's ``candidate_attempt_ref`` is not the attempt's content digest."""
    BINDING_RECORD_MISMATCH = "binding_record_mismatch"
    """Another binding field differs from what binding its inputs yields."""
    EMPTY_BINDING_SET = "empty_binding_set"
    """`verify_binding_set` was given no binding (vacuous input is refused)."""


R = RunAttemptBindingRefusalReason
_R = TypeVar("_R", bound=Record)
T = TypeVar("T")
P = ParamSpec("P")
_INT_ONLY: Final = frozenset({int})
_STR_ONLY: Final = frozenset({str})
_DIGEST_LENGTH: Final = frozenset({64})


class RunAttemptMembership(enum.StrEnum):
    """The closed semantic tag of a binding (ADR-0232 section 7)."""

    STRUCTURALLY_BOUND = "structurally_bound"
    """Admissible as a member of this run episode under the v1 policy; nothing more."""


def _empty(_instance: object, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    if value:
        raise field_error(attribute.name, "a binding carries no reason codes")


def _one_reason(_instance: object, attribute: attrs.Attribute[Any], value: tuple[R, ...]) -> None:
    if len(value) != 1:
        raise field_error(attribute.name, "a refusal carries exactly one reason code")


@attrs.frozen(kw_only=True)
class CandidateAttemptRunBindingInput(Record):
    """The structural input a binding hashes (ADR-0232 section 6).

    Identity: ``input_digest`` covers every other field (not self-sealing).
    """

    __identity__ = Identity(field="input_digest", seals=False)

    input_digest: Digest = UNSEALED
    """Digest of every field below."""
    binding_policy_version: str
    """`CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION`."""
    original_run_id: Digest
    """The run bound to."""
    original_run_policy_version: str
    """Its policy."""
    original_run_input_digest: Digest
    """Its input digest."""
    operator_result_id: Digest
    """The operator result bound."""
    operator_policy_version: str
    """Its policy."""
    candidate_attempt_id: Digest
    """The attempt bound."""
    attempt_index: SafeInt
    """Its declared index."""
    candidate_digest: Digest
    """The candidate's digest."""
    candidate_reconstruction_digest: Digest
    """The reconstruction's digest."""
    operator_set_id: Digest
    """The run's operator set."""
    operator_set_version: str
    """Its version."""
    budget_id: Digest
    """The run's compute budget decision."""
    gate_decision_id: Digest
    """The run's search gate decision."""
    residual_ids: Digests
    """The run's residuals, in order."""
    problem_frame_digest: Digest
    """The run's problem frame."""
    original_contract_assessment_id: str
    """The run's contract assessment."""
    schema_versions: VersionPairsField
    """Caller-declared schema versions (sorted, unique)."""
    policy_versions: VersionPairsField
    """Caller-declared policy versions (sorted, unique)."""


@attrs.frozen(kw_only=True)
class CandidateAttemptRunBinding(Record):
    """Membership evidence: one attempt is admissible in one run (ADR-0232 section 7).

    Carries no answer, verdict, rank, score or selection. Identity: ``binding_id``
    self-seals over every field but ``explanation``.
    """

    __identity__ = Identity(field="binding_id")

    binding_id: Digest = UNSEALED
    """Self-sealed id of the membership relation."""
    binding_policy_version: str
    """`CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION`."""
    input_digest: Digest = UNSEALED
    """`CandidateAttemptRunBindingInput.input_digest`."""
    original_run_id: Digest
    """The run (unchanged; a binding never makes a run id)."""
    operator_result_id: Digest
    """The operator result bound."""
    candidate_attempt_id: Digest
    """The attempt bound."""
    attempt_index: SafeInt
    """Its declared index."""
    candidate_digest: Digest
    """The candidate's digest."""
    candidate_reconstruction_digest: Digest
    """The reconstruction's digest."""
    candidate_attempt_ref: Digest
    """Content digest of the exact attempt (its nested form)."""
    budget_charge: BudgetCharge
    """The attempt's declared charge, copied (evidence, not an allocation)."""
    depth: SafeInt
    """The attempt's depth, copied."""
    step_index: SafeInt
    """The attempt's step index, copied."""
    run_attempt_membership: RunAttemptMembership
    """Always `RunAttemptMembership.STRUCTURALLY_BOUND`."""
    evidence_spans: tuple[SourceSpan, ...]
    """The attempt's spans, in order, duplicates kept."""
    reason_codes: tuple[str, ...] = attrs.field(validator=_empty)
    """Always empty for a binding."""
    explanation: str = ""
    """Prose; never part of an identity."""


@attrs.frozen(kw_only=True)
class CandidateAttemptRunBindingRefusal(Refusal):
    """Why a candidate could not be bound; never a partial binding (ADR-0232 section 8).

    Identity: ``binding_refusal_id`` self-seals over every field but ``explanation``.
    Identities are the records' own values once their types were validated (as the
    reference writes them), else None.
    """

    __identity__ = Identity(field="binding_refusal_id")

    binding_refusal_id: Digest = UNSEALED
    """Self-sealed id of the refusal."""
    binding_policy_version: str
    """`CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION`."""
    input_digest: OptionalDigest
    """Always None (as in the reference): no input was accepted."""
    original_run_id: str | None
    """The run, once validated as a run."""
    operator_result_id: str | None
    """The operator result, once validated as one."""
    candidate_attempt_id: str | None
    """The attempt, once validated as one."""
    reason_codes: tuple[RunAttemptBindingRefusalReason, ...] = attrs.field(validator=_one_reason)
    """Exactly one code: the first failed check."""


CandidateAttemptRunBindingOutcome: TypeAlias = (
    CandidateAttemptRunBinding | CandidateAttemptRunBindingRefusal
)
"""What `bind_candidate_attempt_to_run` returns; callers ``match`` on the type."""
