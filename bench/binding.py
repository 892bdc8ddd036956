"""ADR-0232 binding speed: bindings per second, and one binding against its floor.

(a) bindings per second against runs holding 0, 100 and 10,000 existing attempts
    (the binding walks the existing attempts once: duplicates and ordering);
(b) one binding at 0 attempts against the floor, hashing its own binding payload:
    the normative definition (stdlib ``json.dumps`` + ``hashlib.sha256`` of the
    prebuilt payload dict) and, for reference, orjson + sha256 of the same dict.

Targets (issue 3): <= 3x the floor at 0 attempts; linear growth at worst.

    python bench/binding.py
"""

from __future__ import annotations

import hashlib
import json
import timeit
from collections.abc import Callable
from pathlib import Path

import attrs
import orjson

from kernel.records.codec import identity_payload, seal
from kernel.search.binding import CandidateAttemptRunBinding, bind_candidate_attempt_to_run
from kernel.search.records import CandidateAttempt, CandidateOperatorResult, GeometricSearchRun

CHAIN = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures/binding/reference-chain.json").read_text()
)


def best(fn: Callable[[], object], number: int) -> float:
    """Best-of-5 seconds per call."""
    return min(timeit.repeat(fn, number=number, repeat=5)) / number


def chain_with(existing: int) -> tuple[GeometricSearchRun, CandidateOperatorResult]:
    """The reference chain, with ``existing`` earlier attempts and a new one after them."""
    run = GeometricSearchRun.from_dict(CHAIN["geometric_search_run"])
    result = CandidateOperatorResult.from_dict(CHAIN["candidate_operator_result"])
    template = result.candidate_attempt
    fields = {f.name: getattr(template, f.name) for f in attrs.fields(CandidateAttempt)}
    del fields["attempt_id"]
    attempts = tuple(
        seal(
            CandidateAttempt,
            **{**fields, "attempt_index": i, "candidate_digest": f"{i + 1:064x}"},
        )
        for i in range(existing)
    )
    consumed = attrs.evolve(
        run.budget_consumed,
        candidates_considered=existing,
        max_candidates=existing + 5,
        steps_used=existing,
        max_steps=existing + 10,
        depth_reached=max((a.depth for a in attempts), default=run.budget_consumed.depth_reached),
    )
    run = attrs.evolve(run, candidate_attempts=attempts, budget_consumed=consumed)
    attempt = attrs.evolve(template, attempt_index=existing)
    result = attrs.evolve(result, attempt_index=existing, candidate_attempt=attempt)
    return run, result


def main() -> None:
    """Print the figures."""
    rates: dict[int, float] = {}
    for existing, number in ((0, 20_000), (100, 5_000), (10_000, 100)):
        run, result = chain_with(existing)
        outcome = bind_candidate_attempt_to_run(original_run=run, candidate_operator_result=result)
        assert type(outcome) is CandidateAttemptRunBinding, outcome

        def once(run: GeometricSearchRun = run, result: CandidateOperatorResult = result) -> object:
            return bind_candidate_attempt_to_run(original_run=run, candidate_operator_result=result)

        seconds = best(once, number)
        rates[existing] = 1 / seconds
        print(
            f"(a) {existing:>6} existing attempts: {1 / seconds:>10,.0f} bindings/s "
            f"({seconds * 1e6:8.1f} us each)"
        )
    per_attempt = (1 / rates[10_000] - 1 / rates[0]) / 10_000
    print(f"    growth: {per_attempt * 1e9:.0f} ns per existing attempt (linear in n)")

    run, result = chain_with(0)
    outcome = bind_candidate_attempt_to_run(original_run=run, candidate_operator_result=result)
    assert type(outcome) is CandidateAttemptRunBinding
    payload = identity_payload(outcome)

    def bind_once() -> object:
        return bind_candidate_attempt_to_run(original_run=run, candidate_operator_result=result)

    def floor_once() -> object:
        text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def fast_once() -> object:
        return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()

    # Interleaved rounds, best of each: a busy machine slows all three alike.
    one = floor = fast = float("inf")
    for _ in range(7):
        one = min(one, best(bind_once, 5_000))
        floor = min(floor, best(floor_once, 5_000))
        fast = min(fast, best(fast_once, 5_000))
    print(f"(b) one binding:                 {one * 1e6:8.1f} us")
    print(
        f"    floor (stdlib hash of its payload): {floor * 1e6:6.1f} us -> "
        f"{one / floor:.2f}x the floor (target <= 3x)"
    )
    print(f"    orjson hash of its payload:         {fast * 1e6:6.1f} us -> {one / fast:.1f}x")


if __name__ == "__main__":
    main()
