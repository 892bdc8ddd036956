"""The binding through the Python API: forged, foreign and subclassed inputs get the
reference's verdict wherever the reference reaches one (ADR-0232 decision 3), kernel's
stricter refusal only after every reference check, and never an exception.

Each test states what the reference implementation does with the same input (its
rules are restated in the module docstring of `kernel.search.binding`); no reference code
is used.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.search.binding import (
    CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION,
    CandidateAttemptRunBinding,
    CandidateAttemptRunBindingRefusal,
    RunAttemptBindingRefusalReason,
    bind_candidate_attempt_to_run,
)
from kernel.search.records import CandidateOperatorResult, GeometricSearchRun
from kernel.strategies import binding_pairs

CHAIN = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures/binding/reference-chain.json").read_text()
)
R = RunAttemptBindingRefusalReason


def _chain() -> tuple[GeometricSearchRun, CandidateOperatorResult]:
    return (
        GeometricSearchRun.from_dict(CHAIN["geometric_search_run"]),
        CandidateOperatorResult.from_dict(CHAIN["candidate_operator_result"]),
    )


def _forged(record: Any, **changes: Any) -> Any:
    """A copy of ``record`` altered after construction (bypassing its validators)."""
    copy_ = copy.copy(record)
    for name, value in changes.items():
        object.__setattr__(copy_, name, value)
    return copy_


def _attempt(result: CandidateOperatorResult, **changes: Any) -> Any:
    attempt = _forged(result.candidate_attempt, **changes)
    return _forged(result, candidate_attempt=attempt)


def _bind(run: object, result: object, **kwargs: Any) -> Any:
    return bind_candidate_attempt_to_run(
        original_run=run,  # type: ignore[arg-type]
        candidate_operator_result=result,  # type: ignore[arg-type]
        **kwargs,
    )


def _code(outcome: object) -> R | None:
    if type(outcome) is CandidateAttemptRunBinding:
        return None
    assert type(outcome) is CandidateAttemptRunBindingRefusal
    return outcome.reason_codes[0]


def _stdlib_refusal_id(run_id: object, result_id: object, attempt_id: object, code: R) -> str:
    payload = {
        "binding_refusal_id": "",
        "binding_policy_version": CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION,
        "input_digest": None,
        "original_run_id": run_id,
        "operator_result_id": result_id,
        "candidate_attempt_id": attempt_id,
        "reason_codes": [code.value],
    }
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _Text(str):
    """A str subclass (json.dumps writes it as its text)."""


class _Evil:
    """A hostile foreign value: every comparison, hash and truth test raises."""

    def _boom(self, *_args: object) -> Any:
        raise RuntimeError("evil")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __hash__ = _boom


def test_a_str_subclass_identity_enters_the_refusal_as_its_text() -> None:
    """The reference writes the record's own value into the refusal and hashes a str
    subclass as its text: same refusal id, and the refusal holds the exact str."""
    run, result = _chain()
    run_id = _Text(run.run_id)
    attempt_id = _Text("not a digest")
    forged_result = _attempt(
        _forged(result, geometric_search_run_id="1" * 64), attempt_id=attempt_id
    )
    outcome = _bind(_forged(run, run_id=run_id), forged_result)
    assert _code(outcome) is R.RUN_RESULT_MISMATCH
    assert type(outcome.original_run_id) is str
    assert type(outcome.candidate_attempt_id) is str
    assert outcome.original_run_id == run.run_id
    assert outcome.candidate_attempt_id == "not a digest"
    assert outcome.binding_refusal_id == _stdlib_refusal_id(
        run.run_id, result.operator_result_id, "not a digest", R.RUN_RESULT_MISMATCH
    )


def _same_spans(result: CandidateOperatorResult, spans: object) -> Any:
    recon = _forged(result.candidate_reconstruction, evidence_spans=spans)
    return _forged(
        _attempt(result, evidence_spans=spans),
        evidence_spans=spans,
        candidate_reconstruction=recon,
    )


class _Spans(tuple):  # type: ignore[type-arg]
    """A tuple subclass (the reference's span check accepts it)."""


def _text_subclass_spans(result: CandidateOperatorResult) -> tuple[Any, ...]:
    spans = result.candidate_attempt.evidence_spans
    assert spans, "the reference chain carries evidence spans"
    return (_forged(spans[0], text=_Text(spans[0].text)), *spans[1:])


@pytest.mark.parametrize(
    "spans_of",
    [
        _text_subclass_spans,
        lambda result: _Spans(result.candidate_attempt.evidence_spans),
    ],
    ids=["str-subclass-text", "tuple-subclass"],
)
def test_spans_the_reference_accepts_meet_every_reference_check(spans_of: Any) -> None:
    """Check 12 is the reference's rule (isinstance): such spans are not
    malformed_evidence_span; a later reference check still decides, and kernel refuses
    the inexact shape only after every reference check (24)."""
    run, result = _chain()
    spanned = _same_spans(result, spans_of(result))
    assert _code(_bind(run, spanned)) is R.MALFORMED_INPUT_FIELD
    over = _attempt(spanned, depth=run.budget_consumed.max_depth + 1)
    assert _code(_bind(run, over)) is R.BUDGET_CHARGE_EXCEEDS_REMAINING


def test_a_reference_budget_refusal_comes_before_an_uncomparable_number() -> None:
    """The reference refuses a negative charge before it reaches a counter it could not
    compare; kernel reaches the same verdict, and refuses the counter only when the
    reference would have raised on it."""
    run, result = _chain()
    odd_run = _forged(run, budget_consumed=_forged(run.budget_consumed, parallelism_used="x"))
    negative = _attempt(result, depth=-1)
    assert _code(_bind(odd_run, negative)) is R.BUDGET_CHARGE_EXCEEDS_REMAINING
    assert _code(_bind(odd_run, result)) is R.MALFORMED_INPUT_FIELD


@attrs.frozen
class _ChargeLike:
    """Not a BudgetCharge, but it has what the reference reads."""

    candidates: int
    steps: int


def test_a_lookalike_budget_charge_gets_the_reference_verdict() -> None:
    """The reference reads ``charge.candidates``/``steps``: a lookalike that exceeds the
    budget is refused as the reference refuses it; one within it is malformed (24); a
    missing charge is refused where the reference raises (missing_budget_charge)."""
    run, result = _chain()
    room = run.budget_consumed.max_candidates - run.budget_consumed.candidates_considered
    too_big = _attempt(result, budget_charge=_ChargeLike(candidates=room + 1, steps=1))
    assert _code(_bind(run, too_big)) is R.BUDGET_CHARGE_EXCEEDS_REMAINING
    fits = _attempt(result, budget_charge=_ChargeLike(candidates=1, steps=1))
    assert _code(_bind(run, fits)) is R.MALFORMED_INPUT_FIELD
    assert _code(_bind(run, _attempt(result, budget_charge=None))) is R.MISSING_BUDGET_CHARGE


def test_a_lookalike_reconstruction_gets_the_reference_verdict() -> None:
    """A reconstruction replaced by an object with the same attributes is read as the
    reference reads it (a mismatch is its code); one without them is missing."""
    run, result = _chain()
    recon = result.candidate_reconstruction
    fields = {f.name: getattr(recon, f.name) for f in attrs.fields(type(recon))}
    like = attrs.make_class("ReconLike", list(fields), frozen=True)
    mismatched = _forged(
        result, candidate_reconstruction=like(**{**fields, "candidate_digest": "1" * 64})
    )
    assert _code(_bind(run, mismatched)) is R.RECONSTRUCTION_RESULT_MISMATCH
    same = _forged(result, candidate_reconstruction=like(**fields))
    assert _code(_bind(run, same)) is R.MALFORMED_INPUT_FIELD
    for missing in (None, {"candidate_digest": recon.candidate_digest}, 5):
        outcome = _bind(run, _forged(result, candidate_reconstruction=missing))
        assert _code(outcome) is R.MISSING_CANDIDATE_RECONSTRUCTION


@pytest.mark.parametrize("where", ["residual_ids", "operator_provenance", "candidate_attempts"])
def test_an_iterator_is_refused_unconsumed(where: str) -> None:
    """Checks 10, 11 and 13 search or walk these containers; the reference would consume
    an iterator there (mutating its caller's object): kernel refuses it untouched."""
    run, result = _chain()
    source = {
        "residual_ids": run.residual_ids,
        "operator_provenance": result.candidate_reconstruction.operator_provenance,
        "candidate_attempts": run.candidate_attempts,
    }[where]
    items = iter(source)
    if where == "operator_provenance":
        recon = _forged(result.candidate_reconstruction, operator_provenance=items)
        result = _forged(result, candidate_reconstruction=recon)
    else:
        run = _forged(run, **{where: items})
    assert _code(_bind(run, result)) is R.MALFORMED_INPUT_FIELD
    assert tuple(items) == source


_PATHS = (
    ("run", "run_id"),
    ("run", "residual_ids"),
    ("run", "budget_consumed"),
    ("run", "candidate_attempts"),
    ("result", "geometric_search_run_id"),
    ("result", "candidate_reconstruction"),
    ("result", "evidence_spans"),
    ("attempt", "attempt_id"),
    ("attempt", "replay_blockers"),
    ("attempt", "budget_charge"),
    ("attempt", "evidence_spans"),
    ("attempt", "depth"),
    ("recon", "source_residual_id"),
    ("recon", "operator_provenance"),
    ("consumed", "max_steps"),
)


@settings(max_examples=60)
@given(
    pair=binding_pairs(max_existing=2),
    path=st.sampled_from(_PATHS),
    hostile=st.sampled_from(["evil", "deleted"]),
)
def test_hostile_values_are_refused_never_raised(
    pair: tuple[GeometricSearchRun, CandidateOperatorResult], path: tuple[str, str], hostile: str
) -> None:
    """(bad input) A value whose comparisons raise, or an attribute deleted after
    construction (the reference raises on both), is a refusal, never an exception."""
    run, result = pair
    owner, name = path
    target: Any = {
        "run": run,
        "result": result,
        "attempt": result.candidate_attempt,
        "recon": result.candidate_reconstruction,
        "consumed": run.budget_consumed,
    }[owner]
    changed = copy.copy(target)
    if hostile == "evil":
        object.__setattr__(changed, name, _Evil())
    else:
        object.__delattr__(changed, name)
    if owner == "run":
        run = changed
    elif owner == "consumed":
        run = _forged(run, budget_consumed=changed)
    elif owner == "result":
        result = changed
    elif owner == "attempt":
        result = _forged(result, candidate_attempt=changed)
    else:
        result = _forged(result, candidate_reconstruction=changed)
    outcome = _bind(run, result)
    assert type(outcome) is CandidateAttemptRunBindingRefusal
