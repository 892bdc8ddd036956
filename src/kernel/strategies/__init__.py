"""Hypothesis strategies that build valid `kernel` records by construction.

For our own tests and for users' property-based suites. Needs the optional extra
``evidence-kernel[testing]`` (hypothesis). One submodule per pure module; this
package re-exports them all.
"""

try:
    import hypothesis  # noqa: F401
except ModuleNotFoundError as e:
    # Say which extra brings it, not only which module is missing.
    raise ModuleNotFoundError(
        "kernel.strategies needs hypothesis, from the optional extra 'testing': "
        "pip install 'evidence-kernel[testing]'",
        name=e.name,
    ) from e

from kernel.strategies.consensus import branches, drafts, run_observations, tool_sets
from kernel.strategies.fields import from_annotation, records_of
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
from kernel.strategies.search import (
    binding_pairs,
    binding_refusals,
    bindings,
    budget_consumed,
    candidate_attempts,
    candidate_operator_results,
    candidate_reconstructions,
    compute_budget_decisions,
    corrupted_binding_pairs,
    geometric_search_runs,
    search_gate_decisions,
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
    "from_annotation",
    "records_of",
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
    "binding_pairs",
    "binding_refusals",
    "bindings",
    "budget_consumed",
    "candidate_attempts",
    "candidate_operator_results",
    "candidate_reconstructions",
    "compute_budget_decisions",
    "corrupted_binding_pairs",
    "geometric_search_runs",
    "search_gate_decisions",
    "budget_charges",
    "digests",
    "json_values",
    "source_spans",
    "texts",
    "version_pairs",
]
