"""How fast `kernel.strategies` generates valid records, as a ratio to ``st.integers()``.

Each strategy draws examples inside one ``@given`` test (generate phase only, no
database, no shrinking, no health checks) for a fixed number of examples; the rate is
examples per second of this process's CPU time (so other processes of a shared machine
count as little as they can), and the ratio is that rate over ``st.integers()``'s rate
measured the same way in this process right before it: the median of ``--rounds`` such
pairs (both runs of a pair see about the same load, which changes while the bench runs).

Target (issue 11): every record strategy >= 25 % of ``st.integers()``'s rate.

    python bench/strategies.py [--examples N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kernel import strategies as ks

TARGET = 0.25

STRATEGIES: dict[str, Callable[[], st.SearchStrategy[Any]]] = {
    "budget_charges": ks.budget_charges,
    "source_spans": ks.source_spans,
    "candidate_attempts": ks.candidate_attempts,
    "geometric_search_runs": ks.geometric_search_runs,
    "candidate_operator_results": ks.candidate_operator_results,
    "binding_pairs": ks.binding_pairs,
    "bindings": ks.bindings,
    "work_units": ks.work_units,
    "result_manifests": ks.result_manifests,
    "verification_results": ks.verification_results,
    "run_records": ks.run_records,
    "reports": ks.reports,
    "decisions": ks.decisions,
    "run_observations": ks.run_observations,
    "drafts": ks.drafts,
    "branches": ks.branches,
    "budget_consumed": ks.budget_consumed,
    "candidate_reconstructions": ks.candidate_reconstructions,
    "search_gate_decisions": ks.search_gate_decisions,
    "compute_budget_decisions": ks.compute_budget_decisions,
    "corrupted_binding_pairs": ks.corrupted_binding_pairs,
    "binding_refusals": ks.binding_refusals,
    "actors": ks.actors,
    "attempt_records": ks.attempt_records,
    "tool_sets": ks.tool_sets,
    "identifiers": ks.identifiers,
    "texts": ks.texts,
    "digests": ks.digests,
    "version_pairs": ks.version_pairs,
}

# Not a record: nested structure is what it explores, so hypothesis draws every node
# (and shrinks each); shown for reference, not held to the target.
REFERENCE: dict[str, Callable[[], st.SearchStrategy[Any]]] = {"json_values": ks.json_values}


def rate(strategy: st.SearchStrategy[object], examples: int) -> float:
    """Examples per second drawn from ``strategy`` by hypothesis itself."""
    seen = 0

    @settings(
        max_examples=examples,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(strategy)
    def draw(_value: object) -> None:
        nonlocal seen
        seen += 1

    start = time.process_time()
    draw()
    return seen / (time.process_time() - start)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("names", nargs="*", help="only these strategies")
    args = parser.parse_args()
    rate(st.integers(), args.examples)  # warm-up: hypothesis' first run pays setup costs
    print(f"load average {os.getloadavg()[0]:.2f}")
    worst = 1.0
    for name, make in {**STRATEGIES, **REFERENCE}.items():
        if args.names and name not in args.names:
            continue
        baselines, ratios = [], []
        for _ in range(args.rounds):
            baselines.append(rate(st.integers(), args.examples))
            ratios.append(rate(make(), args.examples) / baselines[-1])
        baseline = statistics.median(baselines)
        ratio = statistics.median(ratios)
        if name in STRATEGIES:
            worst = min(worst, ratio)
            mark = "PASS" if ratio >= TARGET else "MISS"
        else:
            mark = "info"
        print(
            f"{mark} {name:28} {ratio * baseline:9,.0f}/s  {ratio:6.1%} of st.integers()"
            f" ({baseline:,.0f}/s)"
        )
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"worst ratio {worst:.1%} (target >= {TARGET:.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
