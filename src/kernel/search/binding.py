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

The module is split along those steps: the records in `binding_records`, checks 1-14
in `binding_reference`, 15-24 in `binding_stricter`, the refusals' texts in
`binding_text`; the build and the verifiers are here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kernel.errors import CanonicalizationError
from kernel.records.codec import (
    compute_id,
    id_of_fields,
    nested_id,
    short_repr,
)
from kernel.records.values import differs
from kernel.search.binding_records import (
    _BOUND_EXPLANATION,
    BINDING_POLICY_NAME,
    CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION,
    CandidateAttemptRunBinding,
    CandidateAttemptRunBindingInput,
    CandidateAttemptRunBindingOutcome,
    CandidateAttemptRunBindingRefusal,
    P,
    R,
    RunAttemptBindingRefusalReason,
    RunAttemptMembership,
    T,
)
from kernel.search.binding_reference import (
    _beside_existing,
    _Read,
    _same_problem,
    _same_source,
    _typed,
    _versions_refused,
    _within_budget,
)
from kernel.search.binding_stricter import (
    _stricter,
)
from kernel.search.binding_text import (
    _COMPARED_FIELDS,
    _NO_IDS,
    _exact_pairs,
    _gap,
    _held_in_set,
    _Ids,
    _known,
    _not_a,
    _not_a_binding,
    _other_run,
    _record_differs,
    _refusal,
    _set_over_budget,
    _shape,
    _trusted,
    _understated,
    _unreadable,
    _unshaped,
)
from kernel.search.records import (
    CandidateOperatorResult,
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
            lambda: differs(
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
            lambda: differs(
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
            lambda: differs(
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
