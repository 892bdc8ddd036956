"""Hypothesis strategies that build valid `kernel` records by construction.

For our own tests and for users' property-based suites. Needs the optional extra
``evidence-kernel[testing]`` (hypothesis). One submodule per pure module; this
package re-exports them all.
"""

from kernel.strategies.consensus import branches, drafts, run_observations, tool_sets
from kernel.strategies.report import (
    actors,
    attempt_records,
    decisions,
    identifiers,
    reports,
    result_manifests,
    run_records,
    verification_results,
    work_units,
)
from kernel.strategies.values import (
    budget_charges,
    digests,
    json_values,
    source_spans,
    texts,
    version_pairs,
)

__all__ = [
    "branches",
    "drafts",
    "run_observations",
    "tool_sets",
    "actors",
    "attempt_records",
    "decisions",
    "identifiers",
    "reports",
    "result_manifests",
    "run_records",
    "verification_results",
    "work_units",
    "budget_charges",
    "digests",
    "json_values",
    "source_spans",
    "texts",
    "version_pairs",
]
