"""ADR-0232: bind one candidate operator result to one immutable search run.

``bind_candidate_attempt_to_run(original_run=..., candidate_operator_result=...)``
returns a `CandidateAttemptRunBinding` (membership evidence only: the attempt is
structurally admissible as a member of that run episode) or a
`CandidateAttemptRunBindingRefusal`. It never raises on bad data, never mutates its
inputs, never produces a new ``run_id``, and decides nothing about truth, ranking,
selection, replay, sealing or serving.

Check order (first failure wins, exactly one reason code per refusal). Checks 1-14
are those of the reference implementation, in its order, so a refusal's id agrees
with the reference's whenever the reference refuses too:

1.   ``original_run`` is a `GeometricSearchRun` -> ``invalid_binding_input``;
2.   ``candidate_operator_result`` is a `CandidateOperatorResult` -> the same;
3.   its attempt is a `CandidateAttempt` -> the same (1-3 by ``isinstance``, as the
     reference checks: a subclass passes here);
4.   ``schema_versions``/``policy_versions`` are tuples of non-empty ``(name,
     version)`` str pairs, names strictly ascending -> ``unsupported_schema_version``;
5.   result's ``geometric_search_run_id`` == ``run_id`` -> ``run_result_mismatch``;
6.   result vs attempt: ``attempt_id``, ``attempt_index``, ``candidate_digest``,
     ``input_digest``, ``operator_name``/``operator_id``, ``operator_version``
     -> ``attempt_result_mismatch``;
7.   (kernel: the reconstruction has a ``candidate_digest``, where the reference
     raises AttributeError -> ``missing_candidate_reconstruction``)
     reconstruction's ``candidate_digest`` then ``candidate_reconstruction_digest``
     vs the result -> ``reconstruction_result_mismatch``;
8.   attempt replay status is pending -> ``replay_status_not_pending``;
9.   attempt has no replay blockers -> ``replay_blockers_present``;
10.  reconstruction's source residual is one of the run's, its problem frame and
     assessment are the run's -> ``run_identity_mismatch``;
11.  the run's operator set id and version are in the reconstruction's provenance
     -> ``operator_set_mismatch``;
12.  attempt spans are valid; result and reconstruction spans equal them
     -> ``malformed_evidence_span``;
13.  per existing attempt, in order: index, id, candidate digest differ
     -> ``duplicate_attempt_index`` / ``duplicate_attempt_id`` /
     ``duplicate_candidate_digest``;
14.  (kernel: the charge has ``candidates``, where the reference raises
     AttributeError -> ``missing_budget_charge``) charge,
     depth and step index are non-negative, ``considered + charge <= max_candidates``,
     ``steps_used + charge <= max_steps``, ``max(depth_reached, depth) <= max_depth``,
     ``parallelism_used <= max_parallelism`` -> ``budget_charge_exceeds_remaining``.

Then the ADR-0232 rules the reference skips (kernel is stricter; docs/adr explains):

15.  every int the binding reads is an exact int (``bool`` is not) and
     ``explanation`` is a str -> ``malformed_input_field``;
16.  run policy and schema are the v1 ones -> ``unsupported_run_policy``;
17.  operator policy is the v1 one -> ``unsupported_operator_policy``;
18.  ``policy_versions`` declares no binding policy but this one
     -> ``unsupported_binding_policy``;
19.  charge candidates and steps are positive -> ``non_positive_budget_charge``;
20.  ``max_parallelism == 1`` -> ``unsupported_parallelism``;
21.  existing attempts hold indices ``0..n-1`` in order -> ``ambiguous_attempt_order``;
22.  the declared index is ``n`` (no gap) -> ``attempt_index_gap``;
23.  every span sentence index is non-negative -> ``malformed_evidence_span``;
24.  every record is exactly its class (no subclass, no lookalike) and every value
     entering an id has its record shape and is encodable (a record altered after
     construction is caught here) -> ``malformed_input_field``;
25.  the run's ``budget_consumed`` covers its existing attempts (sum of candidate and
     step charges, deepest depth) -> ``run_accounting_understated``.

A binding is stateless: two bindings of different candidates against the same run
may each succeed while together exceeding its budget. `verify_binding_set` checks a
set of bindings of one run together.

Identity payloads (tests recompute them with the stdlib):

- ``input_digest`` = H(every `CandidateAttemptRunBindingInput` field but itself);
- ``candidate_attempt_ref`` = H(the attempt's nested form: every field but
  ``explanation``, real ``attempt_id``);
- ``binding_id`` self-seals over every binding field but ``explanation``
  (``run_attempt_membership = "structurally_bound"``, ``reason_codes = []``);
- ``binding_refusal_id`` self-seals over every refusal field but ``explanation``;
  a refusal's ``input_digest`` is always null (as in the reference) and an identity
  is filled in once its record's type was validated, with the record's own value as
  the reference writes it (a non-digest string included; a value that is not text,
  which only a forged record can hold, is null).

Through the Python API as through JSON documents, kernel's stricter rules never pre-empt
a reference check: checks 1-14 read the inputs as the reference does (``isinstance``,
attribute reads, its comparisons in its order). Version pairs the reference accepts (a
NamedTuple, a str subclass) pass check 4 and are normalised to exact tuples afterwards
(they hash the same); a record subclass, a lookalike nested record (a charge or
reconstruction with the same attributes) and a record altered after construction meet
the reference's checks as the reference would judge them (a list searched like a tuple,
a float compared as a number, a str subclass as its text) and are refused as
``malformed_input_field`` only where the reference itself could not go on (it raises
there: a deleted attribute, a value it cannot compare or hash), or after every
reference check (15, 24). Residual ids, operator provenance or existing attempts given
as an iterator are refused (``malformed_input_field``, where checks 10, 11 and 13 would
search or walk them) rather than consumed as the reference would. Nothing raises out of
the binding.

Imports: stdlib value facilities and `kernel.records.identity`/`codec`/`values`/`errors`/
`search` only; the fenced ``guard`` block of docs/adr/ADR-0232 pins this.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, NamedTuple, ParamSpec, TypeAlias, TypeVar

import attrs

from kernel.errors import CanonicalizationError
from kernel.records.codec import (
    UNSEALED,
    Identity,
    Record,
    compute_id,
    field_error,
    id_of_fields,
    malformed,
    nested_id,
    seal,
    short_repr,
)
from kernel.records.identity import is_canonical_str
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
    CANDIDATE_OPERATOR_POLICY_VERSION,
    GEOMETRIC_SEARCH_RUN_POLICY_VERSION,
    GEOMETRIC_SEARCH_RUN_SCHEMA_VERSION,
    BudgetCharge,
    BudgetConsumed,
    CandidateAttempt,
    CandidateOperatorResult,
    CandidateReconstruction,
    CandidateReplayStatus,
    GeometricSearchRun,
)

__all__ = [
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

_Ids = tuple[str | None, str | None, str | None]
_NO_IDS: Final[_Ids] = (None, None, None)


def _known(value: object) -> str | None:
    """An identity as the reference writes it into a refusal: the record's own value.

    A string (a str subclass as its plain text, which hashes the same) is kept even
    when it is not a digest, as the reference keeps it; a value that is not valid text
    (a forged non-string, a lone surrogate) cannot enter a refusal and is None.
    """
    if isinstance(value, str):
        text = str.__str__(value)
        if is_canonical_str(text):
            return text
    return None


_REFUSED: Final = "CandidateAttempt run binding refused"
_RESULT: Final = "candidate_operator_result"
_ATTEMPT: Final = "candidate_operator_result.candidate_attempt"
_RECON: Final = "candidate_operator_result.candidate_reconstruction"


def _refusal(
    reason: R, ids: _Ids, said: Callable[..., str], *args: object
) -> CandidateAttemptRunBindingRefusal:
    """The refusal of ``reason``; ``said(*args)`` tells what the check expected and found.

    The explanation starts with the reference's own sentence. ``said`` reads the
    caller's values again, which may be forged: if that fails, the refusal (its code,
    its id) is still the one the check made, only less talkative.
    """
    try:
        detail = said(*args)
    except Exception:  # pragma: no cover - a message about bad input must not fail on it
        detail = "(the values involved cannot be shown)"
    return seal(
        CandidateAttemptRunBindingRefusal,
        binding_policy_version=CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION,
        input_digest=None,
        original_run_id=ids[0],
        operator_result_id=ids[1],
        candidate_attempt_id=ids[2],
        reason_codes=(reason,),
        explanation=f"{_REFUSED}: {reason.value}. {detail}.",
    )


# -- what a refusal says (never on the binding's success path) ----------------------


def _shape(value: object) -> str:
    """What a value is: its type, and a bounded repr of a scalar."""
    if value is None:
        return "None"
    kind = type(value).__name__
    if isinstance(value, enum.Enum):
        return f"{kind} {short_repr(value.value)}"
    if isinstance(value, str | int | float):
        return f"{kind} {short_repr(value)}"
    return kind


def _not_a(path: str, cls: type, value: object) -> str:
    return f"{path}: expected a {cls.__name__}, got {_shape(value)}"


def _differs(path: str, expected: str, want: object, got: object) -> str:
    return f"{path}: expected {expected} {short_repr(want)}, got {short_repr(got)}"


def _bad_pairs(schema_versions: object, policy_versions: object) -> str:
    name, value = (
        ("schema_versions", schema_versions)
        if not _reference_pairs(schema_versions)
        else ("policy_versions", policy_versions)
    )
    return (
        f"{name}: expected a tuple of (name, version) pairs of non-empty str, names"
        f" strictly ascending, got {short_repr(value)}"
    )


def _attempt_differs(result: Any, attempt: Any) -> str:
    for name, theirs, got in (
        ("attempt_id", "attempt_id", result.attempt_id),
        ("attempt_index", "attempt_index", result.attempt_index),
        ("candidate_digest", "candidate_digest", result.candidate_digest),
        ("input_digest", "input_digest", result.input_digest),
        ("operator_name", "operator_id", result.operator_name),
        ("operator_version", "operator_version", result.operator_version),
    ):
        want = getattr(attempt, theirs)
        if got != want:
            return _differs(f"{_RESULT}.{name}", f"the attempt's {theirs}", want, got)
    # The check compares exactly these fields, so one of them differs.
    return f"{_RESULT}: differs from its candidate_attempt"  # pragma: no cover


def _identity_differs(run: Any, reconstruction: Any) -> str:
    if reconstruction.source_residual_id not in run.residual_ids:
        return (
            f"{_RECON}.source_residual_id: expected one of the run's"
            f" {len(run.residual_ids)} residual_ids, got"
            f" {short_repr(reconstruction.source_residual_id)}"
        )
    if reconstruction.problem_frame_digest != run.problem_frame_digest:
        return _differs(
            f"{_RECON}.problem_frame_digest",
            "the run's",
            run.problem_frame_digest,
            reconstruction.problem_frame_digest,
        )
    return _differs(
        f"{_RECON}.original_contract_assessment_id",
        "the run's contract_assessment_id",
        run.contract_assessment_id,
        reconstruction.original_contract_assessment_id,
    )


def _consumed(path: str, value: object) -> str:
    return f"{path}: expected a tuple, got an iterator ({type(value).__name__}) it would consume"


def _span_problem(valid: bool, spans: Any, result: Any, reconstruction: Any) -> str:
    if not valid:
        return (
            f"{_ATTEMPT}.evidence_spans: expected a tuple of SourceSpan (str text, int"
            f" offsets 0 <= start <= end), got {short_repr(spans)}"
        )
    for path, other in (
        (f"{_RESULT}.evidence_spans", result.evidence_spans),
        (f"{_RECON}.evidence_spans", reconstruction.evidence_spans),
    ):
        if other != spans:
            return f"{path}: expected the attempt's {len(spans)} spans, got {short_repr(other)}"
    # The check compares exactly these span streams, so one of them differs.
    return f"{_ATTEMPT}.evidence_spans: not one span stream"  # pragma: no cover


def _held(path: str, value: object, position: int) -> str:
    return (
        f"{path}: expected a value no existing attempt holds, got {short_repr(value)},"
        f" held by original_run.candidate_attempts[{position}]"
    )


def _over_budget(charge: Any, depth: Any, step_index: Any, consumed: Any) -> str:
    for path, value in (
        (f"{_ATTEMPT}.budget_charge.candidates", charge.candidates),
        (f"{_ATTEMPT}.budget_charge.steps", charge.steps),
        (f"{_ATTEMPT}.depth", depth),
        (f"{_ATTEMPT}.step_index", step_index),
    ):
        if value < 0:
            return f"{path}: expected >= 0, got {short_repr(value)}"
    budget = "original_run.budget_consumed"
    if consumed.candidates_considered + charge.candidates > consumed.max_candidates:
        return (
            f"{_ATTEMPT}.budget_charge.candidates: expected at most"
            f" {short_repr(consumed.max_candidates - consumed.candidates_considered)} (the"
            f" candidates {budget} has left), got {short_repr(charge.candidates)}"
        )
    if consumed.steps_used + charge.steps > consumed.max_steps:
        return (
            f"{_ATTEMPT}.budget_charge.steps: expected at most"
            f" {short_repr(consumed.max_steps - consumed.steps_used)} (the steps {budget}"
            f" has left), got {short_repr(charge.steps)}"
        )
    if max(consumed.depth_reached, depth) > consumed.max_depth:
        return (
            f"{_ATTEMPT}.depth: expected at most {budget}.max_depth"
            f" {short_repr(consumed.max_depth)}, got"
            f" {short_repr(max(consumed.depth_reached, depth))}"
        )
    return (
        f"{budget}.parallelism_used: expected at most max_parallelism"
        f" {short_repr(consumed.max_parallelism)}, got {short_repr(consumed.parallelism_used)}"
    )


_NUMBER_PATHS: Final = (
    f"{_ATTEMPT}.budget_charge.candidates",
    f"{_ATTEMPT}.budget_charge.steps",
    f"{_ATTEMPT}.depth",
    f"{_ATTEMPT}.step_index",
    f"{_ATTEMPT}.attempt_index",
    f"{_RESULT}.attempt_index",
    "original_run.budget_consumed.candidates_considered",
    "original_run.budget_consumed.max_candidates",
    "original_run.budget_consumed.depth_reached",
    "original_run.budget_consumed.max_depth",
    "original_run.budget_consumed.steps_used",
    "original_run.budget_consumed.max_steps",
    "original_run.budget_consumed.parallelism_used",
    "original_run.budget_consumed.max_parallelism",
)
"""Where each number check 15 reads comes from, in the order it reads them."""


def _not_int(numbers: tuple[object, ...], explanation: object) -> str:
    for path, value in zip(_NUMBER_PATHS, numbers, strict=True):
        if type(value) is not int:
            return f"{path}: expected an exact int, got {_shape(value)}"
    return f"explanation: expected a str, got {_shape(explanation)}"


def _disordered(existing_attempts: Any) -> str:
    indices = [attempt.attempt_index for attempt in existing_attempts[:8]]
    more = ", ..." if len(existing_attempts) > 8 else ""
    shown = ", ".join(short_repr(index) for index in indices)
    return (
        f"original_run.candidate_attempts: expected attempt_index 0..{len(existing_attempts) - 1}"
        f" in order, got [{shown}{more}]"
    )


def _understated(charged: tuple[int, int, int] | None, consumed: Any) -> str:
    if charged is None:
        return (
            "original_run.candidate_attempts: expected each to carry an exact BudgetCharge"
            " and int depth, got one that does not"
        )
    budget = "original_run.budget_consumed"
    return (
        f"{budget}: expected at least what the existing attempts charged (candidates"
        f" {short_repr(charged[0])}, steps {short_repr(charged[1])}, depth"
        f" {short_repr(charged[2])}), got candidates_considered"
        f" {short_repr(consumed.candidates_considered)}, steps_used"
        f" {short_repr(consumed.steps_used)}, depth_reached {short_repr(consumed.depth_reached)}"
    )


def _unshaped(run: Any, result: Any, *, encodable: bool = True) -> str:
    """Which record is not exactly as built (check 24), as precisely as it can be told."""
    for path, value in (("original_run", run), (_RESULT, result)):
        found = malformed(value, path)
        if found is not None:
            return f"{found[0]}: expected the field as its record declares it, got {found[1]}"
    attempt = result.candidate_attempt
    for path, value, cls in (
        ("original_run", run, GeometricSearchRun),
        (_RESULT, result, CandidateOperatorResult),
        (_ATTEMPT, attempt, CandidateAttempt),
        (_RECON, result.candidate_reconstruction, CandidateReconstruction),
        (f"{_ATTEMPT}.budget_charge", attempt.budget_charge, BudgetCharge),
        ("original_run.budget_consumed", run.budget_consumed, BudgetConsumed),
    ):
        # One of these is a subclass or lookalike whenever a well-typed run gets here.
        if type(value) is not cls:  # pragma: no branch
            return f"{path}: expected exactly a {cls.__name__}, got a {type(value).__name__}"
    if not encodable:  # pragma: no cover - malformed() names such a field first
        return (
            "a value entering an id: expected canonical JSON (valid Unicode text, ints"
            " within 2**53 - 1), got one that cannot be encoded"
        )
    return (  # pragma: no cover - malformed() and the class checks above name it first
        "a value entering an id: expected exact tuples, str and digests as the records"
        " hold them, got a subclass, a lookalike or a non-digest"
    )


def _unreadable(error: Exception, *records: object) -> str:
    """What a forged input that made a check raise looks like, if it can be told."""
    for value in records:
        found = malformed(value, _path_of(value))
        if found is not None:
            return f"{found[0]}: expected the field as its record declares it, got {found[1]}"
    return (  # pragma: no cover - only a lookalike whose own code raises gets here
        f"inputs: expected values the checks can read and compare, got one that raised"
        f" {type(error).__name__}"
    )


def _path_of(value: object) -> str:
    if isinstance(value, GeometricSearchRun):
        return "original_run"
    if isinstance(value, CandidateOperatorResult):
        return _RESULT
    if isinstance(value, CandidateAttemptRunBinding):
        return "binding"
    return type(value).__name__  # pragma: no cover - the verifiers pass only these three


def _record_differs(
    binding: CandidateAttemptRunBinding, expected: CandidateAttemptRunBinding
) -> str:
    for name in _COMPARED_FIELDS:
        want, got = getattr(expected, name), getattr(binding, name)
        if want != got:
            return _differs(f"binding.{name}", "what binding these inputs yields", want, got)
    # `_compared` compares exactly these fields, so one of them differs.
    return "binding: differs from what binding these inputs yields"  # pragma: no cover


def _negative_sentence(spans: Any, span: Any) -> str:
    return (
        f"{_ATTEMPT}.evidence_spans[{spans.index(span)}].sentence_index: expected >= 0 or"
        f" None, got {short_repr(span.sentence_index)}"
    )


def _not_a_binding(position: int, item: object) -> str:
    return _not_a(f"bindings[{position}]", CandidateAttemptRunBinding, item)


def _other_run(position: int, item: Any, run: Any) -> str:
    return _differs(
        f"bindings[{position}].original_run_id",
        "the run's run_id",
        run.run_id,
        item.original_run_id,
    )


def _gap(offset: int, start: int, item: Any) -> str:
    return (
        f"bindings (sorted by attempt_index)[{offset}].attempt_index: expected"
        f" {start + offset} (no gap after the run's attempts), got"
        f" {short_repr(item.attempt_index)}"
    )


def _set_over_budget(consumed: Any, candidates: int, steps: int, depth: int) -> str:
    return (
        f"bindings together: expected to fit the run's remaining budget (candidates"
        f" {short_repr(consumed.max_candidates - consumed.candidates_considered)}, steps"
        f" {short_repr(consumed.max_steps - consumed.steps_used)}, max depth"
        f" {short_repr(consumed.max_depth)}), got candidates {short_repr(candidates)},"
        f" steps {short_repr(steps)}, depth {short_repr(depth)}"
    )


def _held_in_set(position: int, item: Any, name: str) -> str:
    return (
        f"bindings[{position}].{name}: expected a value neither the run nor"
        f" another binding holds, got {short_repr(getattr(item, name))}"
    )


def _valid_spans(spans: object) -> tuple[bool, bool]:
    """Check 12's span validity, the reference's rule: a tuple (a subclass too) of
    `SourceSpan` with str text (a subclass too), exact int offsets, ``0 <= start <=
    end``, an exact int or None sentence index. Also (for check 24) whether they are
    exactly as a record holds them: an exact tuple of exact spans with exact str text
    (the encoder checks the text is valid Unicode).

    Returns:
        ``(valid, exact)``.
    """
    if not isinstance(spans, tuple):
        return False, False
    exact = type(spans) is tuple
    for span in spans:
        if not isinstance(span, SourceSpan):
            return False, False
        text, start, end, sentence = span.text, span.start, span.end, span.sentence_index
        if (
            not isinstance(text, str)
            or type(start) is not int
            or type(end) is not int
            or not 0 <= start <= end
            or (sentence is not None and type(sentence) is not int)
        ):
            return False, False
        if type(span) is not SourceSpan or type(text) is not str:
            exact = False
    return True, exact


def _reference_pairs(value: object) -> bool:
    """Check 4 as the reference makes it: a tuple of 2-tuples of non-empty strings,
    names strictly ascending (subclasses of tuple and str pass, as they do there)."""
    if not isinstance(value, tuple):
        return False
    previous: str | None = None
    for pair in value:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            return False
        name, version = pair
        if not (isinstance(name, str) and isinstance(version, str) and name and version):
            return False
        if previous is not None and not previous < name:
            return False
        previous = name
    return True


def _iterator(value: object) -> bool:
    """True for an iterator (searching or walking it would consume the caller's object);
    a tuple, what a record holds, is answered without the ABC check."""
    return type(value) is not tuple and isinstance(value, Iterator)


def _exact_pairs(value: object) -> tuple[tuple[str, str], ...]:
    """Pairs that passed `_reference_pairs`, as exact tuples of exact str."""
    pairs = typing.cast("tuple[tuple[str, str], ...]", value)
    if type(pairs) is tuple and all(
        type(p) is tuple and type(p[0]) is str and type(p[1]) is str for p in pairs
    ):
        return pairs
    return tuple((str.__str__(name), str.__str__(version)) for name, version in pairs)


def _declares_other_binding_policy(policy_versions: tuple[tuple[str, str], ...]) -> bool:
    return any(
        name == BINDING_POLICY_NAME and version != CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION
        for name, version in policy_versions
    )


def _all_digests(values: tuple[object, ...]) -> bool:
    """True when every value is a digest (one C-speed pass over their concatenation)."""
    if set(map(type, values)) != _STR_ONLY or set(map(len, values)) != _DIGEST_LENGTH:  # type: ignore[arg-type]
        return False
    joined = "".join(values)  # type: ignore[arg-type]
    try:
        decoded = bytes.fromhex(joined)
    except ValueError:
        return False
    # fromhex skips whitespace and reads upper case: refuse both.
    return len(decoded) * 2 == len(joined) and joined == joined.lower()


def _trusted(cls: type[_R], fields: dict[str, object], /) -> _R:
    """Build a record from values the caller has already shape-checked.

    The record constructor would re-run every field validator; the binding's hot
    path has checked exactly those rules itself (checks 4, 12, 15, 24), so it sets
    the fields directly, as the generated ``__init__`` would.
    """
    record = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(record, name, value)
    return record


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


def _bind(
    original_run: object,
    candidate_operator_result: object,
    schema_versions: object,
    policy_versions: object,
    explanation: object,
) -> tuple[CandidateAttemptRunBinding, dict[str, object]] | CandidateAttemptRunBindingRefusal:
    """Every check of the module docstring, in order; the binding and its input."""
    ids: list[str | None] = [None, None, None]
    try:
        return _checked(
            original_run,
            candidate_operator_result,
            schema_versions,
            policy_versions,
            explanation,
            known=ids,
        )
    except Exception as error:  # the contract: bad data is refused, never raised
        # Only a forged or foreign value gets here (a deleted attribute, an object whose
        # comparison raises, a value the reference could not compare either): the
        # reference raises at this point, kernel refuses with the identities it has.
        return _refusal(
            R.MALFORMED_INPUT_FIELD,
            (ids[0], ids[1], ids[2]),
            _unreadable,
            error,
            original_run,
            candidate_operator_result,
        )


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
            lambda: _differs(
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
            lambda: _differs(
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
            lambda: _differs(
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


def _checked(
    run: Any,
    result: Any,
    schema_versions: object,
    policy_versions: object,
    explanation: object,
    *,
    known: list[str | None],
) -> tuple[CandidateAttemptRunBinding, dict[str, object]] | CandidateAttemptRunBindingRefusal:
    """`_bind`'s checks; ``known`` collects the refusal identities as they validate.

    Checks 1-14 read the records as the reference does (``isinstance``, attribute
    reads, its comparisons in its order), so a subclass, a lookalike nested record or
    a record altered after construction gets the reference's verdict wherever the
    reference reaches one; exact shapes are kernel's checks 15 and 24.
    """
    typed = _typed(run, result, known)
    if isinstance(typed, CandidateAttemptRunBindingRefusal):
        return typed
    attempt, reconstruction, ids = typed
    refused = _versions_refused(schema_versions, policy_versions, ids)
    if refused is None:
        refused = _same_source(run, result, attempt, reconstruction, ids)
    if refused is not None:
        return refused
    problem = _same_problem(run, result, attempt, reconstruction, ids)
    if isinstance(problem, CandidateAttemptRunBindingRefusal):
        return problem
    residual_ids, provenance, spans, exact_spans = problem
    beside = _beside_existing(run, attempt, ids)
    if isinstance(beside, CandidateAttemptRunBindingRefusal):
        return beside
    existing_attempts, index, attempt_id, candidate_digest, ordered, charged = beside
    budget = _within_budget(run, attempt, ids)
    if isinstance(budget, CandidateAttemptRunBindingRefusal):
        return budget
    consumed, charge, depth = budget
    read = _Read(
        run=run,
        result=result,
        attempt=attempt,
        reconstruction=reconstruction,
        ids=ids,
        index=index,
        attempt_id=attempt_id,
        candidate_digest=candidate_digest,
        residual_ids=residual_ids,
        provenance=provenance,
        spans=spans,
        exact_spans=exact_spans,
        existing_attempts=existing_attempts,
        ordered=ordered,
        consumed=consumed,
        charge=charge,
        depth=depth,
    )
    refused = _stricter(read, policy_versions, explanation)
    if refused is not None:
        return refused
    # Version pairs the reference accepts as subclasses (NamedTuple, str subclass) are
    # normalised to exact tuples of exact str: they hash the same, and records hold them.
    schema_versions = _exact_pairs(schema_versions)
    policy_versions = _exact_pairs(policy_versions)
    # 25 (run_accounting_understated): ADR section 10, the run's declared consumption
    # covers what its existing attempts charged; an understated run would let this
    # candidate in on budget the run no longer has.
    if (
        charged is None
        or charged[0] > consumed.candidates_considered
        or charged[1] > consumed.steps_used
        or charged[2] > consumed.depth_reached
    ):
        return _refusal(
            R.RUN_ACCOUNTING_UNDERSTATED,
            ids,
            lambda: _understated(charged, consumed),
        )
    return _build(read, schema_versions, policy_versions, explanation)


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
            lambda: _differs(
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


def _build(
    read: _Read, schema_versions: object, policy_versions: object, explanation: object
) -> tuple[CandidateAttemptRunBinding, dict[str, object]] | CandidateAttemptRunBindingRefusal:
    """The binding and its input, once every check passed."""
    run, result, attempt = read.run, read.result, read.attempt
    reconstruction, ids, spans = read.reconstruction, read.ids, read.spans
    charge, depth = read.charge, read.depth
    index, attempt_id, candidate_digest = read.index, read.attempt_id, read.candidate_digest
    residual_ids = read.residual_ids
    # Every field below was shape-checked above (checks 4, 12, 15, 24): the ids come
    # from the codec without building the records first, and the binding is built
    # without re-running its validators (the hot path; a property test holds this
    # equal to validated construction). Nested records are hashed as their fields hold
    # now (a record altered after its nested form was cached must not hash as it was).
    input_fields: dict[str, object] = {
        "binding_policy_version": CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION,
        "original_run_id": run.run_id,
        "original_run_policy_version": run.run_policy_version,
        "original_run_input_digest": run.input_digest,
        "operator_result_id": result.operator_result_id,
        "operator_policy_version": result.operator_policy_version,
        "candidate_attempt_id": attempt_id,
        "attempt_index": index,
        "candidate_digest": candidate_digest,
        "candidate_reconstruction_digest": reconstruction.candidate_reconstruction_digest,
        "operator_set_id": run.operator_set_id,
        "operator_set_version": run.operator_set_version,
        "budget_id": run.budget_id,
        "gate_decision_id": run.gate_decision_id,
        "residual_ids": residual_ids,
        "problem_frame_digest": run.problem_frame_digest,
        "original_contract_assessment_id": run.contract_assessment_id,
        "schema_versions": schema_versions,
        "policy_versions": policy_versions,
    }
    try:
        input_digest = id_of_fields(CandidateAttemptRunBindingInput, input_fields)
        fields: dict[str, object] = {
            "binding_policy_version": CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION,
            "input_digest": input_digest,
            "original_run_id": run.run_id,
            "operator_result_id": result.operator_result_id,
            "candidate_attempt_id": attempt_id,
            "attempt_index": index,
            "candidate_digest": candidate_digest,
            "candidate_reconstruction_digest": reconstruction.candidate_reconstruction_digest,
            "candidate_attempt_ref": nested_id(attempt, cached=False),
            "budget_charge": charge,
            "depth": depth,
            "step_index": attempt.step_index,
            "run_attempt_membership": RunAttemptMembership.STRUCTURALLY_BOUND,
            "evidence_spans": spans,
            "reason_codes": (),
            "explanation": explanation or _BOUND_EXPLANATION,
        }
        fields["binding_id"] = id_of_fields(CandidateAttemptRunBinding, fields)
    except CanonicalizationError:
        return _refusal(
            R.MALFORMED_INPUT_FIELD,
            ids,
            lambda: _unshaped(run, result, encodable=False),
        )
    binding = _trusted(CandidateAttemptRunBinding, fields)
    return binding, input_fields


def bind_candidate_attempt_to_run(
    *,
    original_run: GeometricSearchRun,
    candidate_operator_result: CandidateOperatorResult,
    schema_versions: tuple[tuple[str, str], ...] = (),
    policy_versions: tuple[tuple[str, str], ...] = (),
    explanation: str = "",
) -> CandidateAttemptRunBindingOutcome:
    """Bind one candidate operator result to one immutable run episode (ADR-0232).

    Args:
        original_run: the run envelope; never mutated, its id never recomputed.
        candidate_operator_result: the operator's result, with its attempt and
            reconstruction; never mutated.
        schema_versions: caller-declared ``(name, version)`` pairs, sorted, unique.
        policy_versions: likewise; may declare ``BINDING_POLICY_NAME``.
        explanation: prose for the binding (never in an id); a default when empty.

    Returns:
        The binding, or a refusal naming the first failed check (module docstring).
        Never raises on bad data: wrong types, ``None``, foreign objects and records
        altered after construction are refusals. Upstream ids are not re-verified
        (`kernel.search.records.recompute_*`, ``from_dict`` and `verify_binding` do that).
    """
    outcome = _bind(
        original_run, candidate_operator_result, schema_versions, policy_versions, explanation
    )
    if type(outcome) is tuple:
        return outcome[0]
    return outcome  # type: ignore[return-value]


_COMPARED_FIELDS: Final = (
    "binding_policy_version",
    "original_run_id",
    "operator_result_id",
    "candidate_attempt_id",
    "attempt_index",
    "candidate_digest",
    "candidate_reconstruction_digest",
    "budget_charge",
    "depth",
    "step_index",
    "run_attempt_membership",
    "evidence_spans",
    "reason_codes",
)
"""Every binding field `verify_binding` compares after the two digests."""


def _compared(binding: CandidateAttemptRunBinding) -> tuple[object, ...]:
    return tuple(getattr(binding, name) for name in _COMPARED_FIELDS)


def _refusing(
    verify: Callable[P, T],
) -> Callable[P, T | CandidateAttemptRunBindingRefusal]:
    """The contract of a binding verifier: bad data is refused, never raised. A record
    altered after it was built (a field overwritten or deleted in place) fails deep
    inside; it is refused with ``malformed_input_field``."""

    def refusing(*args: P.args, **kwargs: P.kwargs) -> T | CandidateAttemptRunBindingRefusal:
        try:
            return verify(*args, **kwargs)
        except Exception as error:  # the contract: bad data is refused, never raised
            return _refusal(
                R.MALFORMED_INPUT_FIELD,
                _NO_IDS,
                _unreadable,
                error,
                *args,
                *kwargs.values(),
            )

    # What functools.wraps does, spelt out (this module's import surface is ADR-0232's).
    for name in ("__module__", "__name__", "__qualname__", "__doc__", "__annotations__"):
        setattr(refusing, name, getattr(verify, name))
    refusing.__wrapped__ = verify  # type: ignore[attr-defined]
    return refusing


def _sealed_binding(binding: object) -> _Ids | CandidateAttemptRunBindingRefusal:
    """`verify_binding` steps 1-3: a v1 binding whose id reproduces; its identities."""
    # 1: the thing verified is a binding.
    if type(binding) is not CandidateAttemptRunBinding:
        return _refusal(
            R.INVALID_BINDING_INPUT,
            _NO_IDS,
            lambda: _not_a("binding", CandidateAttemptRunBinding, binding),
        )
    ids: _Ids = (
        _known(binding.original_run_id),
        _known(binding.operator_result_id),
        _known(binding.candidate_attempt_id),
    )
    # 2: a binding of another policy is not ours to verify.
    if binding.binding_policy_version != CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION:
        return _refusal(
            R.UNSUPPORTED_BINDING_POLICY,
            ids,
            lambda: _differs(
                "binding.binding_policy_version",
                "the v1 policy",
                CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION,
                binding.binding_policy_version,
            ),
        )
    # 3: the binding is internally sealed.
    try:
        sealed = compute_id(binding) == binding.binding_id
    except ValueError:
        sealed = False
    if not sealed:
        return _refusal(
            R.BINDING_ID_MISMATCH,
            ids,
            lambda: (
                f"binding.binding_id: expected the id recomputed over the binding,"
                f" got {short_repr(binding.binding_id)}"
            ),
        )
    return ids


def _binding_differs(
    binding: CandidateAttemptRunBinding, expected: CandidateAttemptRunBinding, ids: _Ids
) -> CandidateAttemptRunBindingRefusal | None:
    """`verify_binding` steps 5-7: ``binding`` is the one the inputs yield."""
    # 5-7: the binding is the one these inputs yield.
    if binding.input_digest != expected.input_digest:
        return _refusal(
            R.INPUT_DIGEST_MISMATCH,
            ids,
            lambda: _differs(
                "binding.input_digest",
                "the digest of these inputs",
                expected.input_digest,
                binding.input_digest,
            ),
        )
    if binding.candidate_attempt_ref != expected.candidate_attempt_ref:
        return _refusal(
            R.CANDIDATE_ATTEMPT_REF_MISMATCH,
            ids,
            lambda: _differs(
                "binding.candidate_attempt_ref",
                "the attempt's content digest",
                expected.candidate_attempt_ref,
                binding.candidate_attempt_ref,
            ),
        )
    if _compared(binding) != _compared(expected):
        return _refusal(R.BINDING_RECORD_MISMATCH, ids, lambda: _record_differs(binding, expected))
    return None


@_refusing
def verify_binding(
    binding: CandidateAttemptRunBinding,
    original_run: GeometricSearchRun,
    candidate_operator_result: CandidateOperatorResult,
    *,
    schema_versions: tuple[tuple[str, str], ...] = (),
    policy_versions: tuple[tuple[str, str], ...] = (),
) -> CandidateAttemptRunBindingInput | CandidateAttemptRunBindingRefusal:
    """Check that ``binding`` is exactly what binding these inputs yields.

    Steps: (1) ``binding`` is a binding (``invalid_binding_input``); (2) its policy
    is v1 (``unsupported_binding_policy``); (3) ``binding_id`` reproduces from the
    binding's own payload (``binding_id_mismatch``); (4) the inputs still bind (the
    bind refusal is returned as is); (5) ``input_digest``
    (``input_digest_mismatch``), (6) ``candidate_attempt_ref``
    (``candidate_attempt_ref_mismatch``) and (7) every other field but
    ``explanation`` (``binding_record_mismatch``) equal the recomputed binding's.

    Returns:
        The `CandidateAttemptRunBindingInput` the binding bound, or a refusal.
        ``schema_versions``/``policy_versions`` must be those passed when binding,
        since the input digest covers them. Never raises on bad data.
    """
    ids = _sealed_binding(binding)
    if isinstance(ids, CandidateAttemptRunBindingRefusal):
        return ids
    # 4: the inputs bind now.
    outcome = _bind(original_run, candidate_operator_result, schema_versions, policy_versions, "")
    if type(outcome) is not tuple:
        return outcome  # type: ignore[return-value]
    expected, input_fields = outcome
    refused = _binding_differs(binding, expected, ids)
    if refused is not None:
        return refused
    return CandidateAttemptRunBindingInput(input_digest=expected.input_digest, **input_fields)  # type: ignore[arg-type]


@_refusing
def verify_binding_set(
    original_run: GeometricSearchRun,
    bindings: Iterable[CandidateAttemptRunBinding],
) -> tuple[CandidateAttemptRunBinding, ...] | CandidateAttemptRunBindingRefusal:
    """Check that several bindings of one run could all be members together.

    A single binding is stateless; this checks what only a set can show. Steps:
    (1) ``original_run`` is a run and every item a binding of it
    (``invalid_binding_input``, ``run_result_mismatch``); (2) the set is not empty
    (``empty_binding_set``); (3) no two bindings, nor a binding and an existing
    attempt, share an index, attempt id or candidate digest (``duplicate_*``);
    (4) sorted by index, the bindings continue the run's indices without a gap
    (``attempt_index_gap``); (5) their charges together fit the run's remaining
    candidates and steps, and their depths its max depth
    (``budget_charge_exceeds_remaining``).

    Each binding should first pass `verify_binding` against its own inputs; this
    function trusts each binding's fields and checks only the set.

    Returns:
        The bindings ordered by ``attempt_index``, or a refusal. Never raises on bad
        data.
    """
    members = _set_members(original_run, bindings)
    if not isinstance(members, tuple):
        return members
    items, run_ids = members
    # 2: vacuous input is refused, never a vacuous "ok".
    if not items:
        return _refusal(
            R.EMPTY_BINDING_SET,
            run_ids,
            lambda: "bindings: expected at least one binding, got 0",
        )
    duplicate = _set_duplicate(original_run, items, run_ids)
    if duplicate is not None:
        return duplicate
    ordered = tuple(sorted(items, key=lambda item: item.attempt_index))
    misfit = _set_misfit(original_run, ordered, run_ids)
    return ordered if misfit is None else misfit


def _set_members(
    original_run: GeometricSearchRun, bindings: Iterable[CandidateAttemptRunBinding]
) -> tuple[tuple[CandidateAttemptRunBinding, ...], _Ids] | CandidateAttemptRunBindingRefusal:
    """`verify_binding_set` step 1: a run, and bindings of it (the items, the run's ids)."""
    if type(original_run) is not GeometricSearchRun:
        return _refusal(
            R.INVALID_BINDING_INPUT,
            _NO_IDS,
            lambda: _not_a("original_run", GeometricSearchRun, original_run),
        )
    run_ids: _Ids = (_known(original_run.run_id), None, None)
    try:
        items = tuple(bindings)
    except TypeError:
        return _refusal(
            R.INVALID_BINDING_INPUT,
            run_ids,
            lambda: f"bindings: expected an iterable of bindings, got {_shape(bindings)}",
        )
    for position, item in enumerate(items):
        if type(item) is not CandidateAttemptRunBinding:
            return _refusal(
                R.INVALID_BINDING_INPUT,
                run_ids,
                _not_a_binding,
                position,
                item,
            )
        if item.original_run_id != original_run.run_id:
            return _refusal(
                R.RUN_RESULT_MISMATCH,
                run_ids,
                _other_run,
                position,
                item,
                original_run,
            )
    return items, run_ids


def _set_duplicate(
    original_run: GeometricSearchRun,
    items: tuple[CandidateAttemptRunBinding, ...],
    run_ids: _Ids,
) -> CandidateAttemptRunBindingRefusal | None:
    """`verify_binding_set` step 3: duplicates across the set and the run."""
    existing = original_run.candidate_attempts
    indices = {attempt.attempt_index for attempt in existing}
    attempt_ids = {attempt.attempt_id for attempt in existing}
    digests = {attempt.candidate_digest for attempt in existing}
    for position, item in enumerate(items):
        if item.attempt_index in indices:
            return _refusal(
                R.DUPLICATE_ATTEMPT_INDEX,
                run_ids,
                _held_in_set,
                position,
                item,
                "attempt_index",
            )
        if item.candidate_attempt_id in attempt_ids:
            return _refusal(
                R.DUPLICATE_ATTEMPT_ID,
                run_ids,
                _held_in_set,
                position,
                item,
                "candidate_attempt_id",
            )
        if item.candidate_digest in digests:
            return _refusal(
                R.DUPLICATE_CANDIDATE_DIGEST,
                run_ids,
                _held_in_set,
                position,
                item,
                "candidate_digest",
            )
        indices.add(item.attempt_index)
        attempt_ids.add(item.candidate_attempt_id)
        digests.add(item.candidate_digest)
    return None


def _set_misfit(
    original_run: GeometricSearchRun,
    ordered: tuple[CandidateAttemptRunBinding, ...],
    run_ids: _Ids,
) -> CandidateAttemptRunBindingRefusal | None:
    """`verify_binding_set` steps 4-5: contiguous after the run's attempts, and
    together within its remaining budget."""
    # 4: contiguous after the run's attempts.
    start = len(original_run.candidate_attempts)
    for offset, item in enumerate(ordered):
        if item.attempt_index != start + offset:
            return _refusal(
                R.ATTEMPT_INDEX_GAP,
                run_ids,
                _gap,
                offset,
                start,
                item,
            )
    # 5: together within the run's remaining budget.
    consumed = original_run.budget_consumed
    candidates = sum(item.budget_charge.candidates for item in ordered)
    steps = sum(item.budget_charge.steps for item in ordered)
    depth = max(item.depth for item in ordered)
    if (
        consumed.candidates_considered + candidates > consumed.max_candidates
        or consumed.steps_used + steps > consumed.max_steps
        or max(consumed.depth_reached, depth) > consumed.max_depth
    ):
        return _refusal(
            R.BUDGET_CHARGE_EXCEEDS_REMAINING,
            run_ids,
            _set_over_budget,
            consumed,
            candidates,
            steps,
            depth,
        )
    return None
