"""What a binding refusal says: one function per check's explanation, each naming the
path, what was expected and what was found (`kernel.search.binding`'s checks call them
only when they refuse)."""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable, Iterator
from typing import Any, Final

from kernel.records.codec import (
    malformed,
    seal,
    short_repr,
)
from kernel.records.identity import is_canonical_str
from kernel.records.values import (
    SourceSpan,
    differs,
)
from kernel.search.binding_records import (
    _DIGEST_LENGTH,
    _R,
    _STR_ONLY,
    BINDING_POLICY_NAME,
    CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION,
    CandidateAttemptRunBinding,
    CandidateAttemptRunBindingRefusal,
    R,
)
from kernel.search.records import (
    BudgetCharge,
    BudgetConsumed,
    CandidateAttempt,
    CandidateOperatorResult,
    CandidateReconstruction,
    GeometricSearchRun,
)

__all__: list[str] = []

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
            return differs(f"{_RESULT}.{name}", f"the attempt's {theirs}", want, got)
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
        return differs(
            f"{_RECON}.problem_frame_digest",
            "the run's",
            run.problem_frame_digest,
            reconstruction.problem_frame_digest,
        )
    return differs(
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


def _record_differs(
    binding: CandidateAttemptRunBinding, expected: CandidateAttemptRunBinding
) -> str:
    for name in _COMPARED_FIELDS:
        want, got = getattr(expected, name), getattr(binding, name)
        if want != got:
            return differs(f"binding.{name}", "what binding these inputs yields", want, got)
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
    return differs(
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
