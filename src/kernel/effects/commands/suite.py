"""``kernel suite``: judge SWE-bench-style predictions on a suite of task instances.

Reads an instances file (JSON array or lines: ``instance_id``, ``repo`` (a folder or a
git repository, relative to the file), ``base_commit``, ``FAIL_TO_PASS``,
``PASS_TO_PASS``, optional reference ``patch`` and ``test_patch``) and a predictions
file (JSON lines: ``instance_id``, ``model_name_or_path``, ``model_patch``). Each
instance is calibrated (FAIL_TO_PASS must fail and PASS_TO_PASS pass on the baseline;
the reference patch must pass them all) and, when valid, every non-empty prediction
is judged by the independent verifier in its own sandbox. Writes one evidence folder
per instance (``instances/<id>/``) and the suite summary (``summary.json``, ``.md``,
``.html``: resolved / unresolved / error / empty-patch per model, FULL / PARTIAL / NO
per prediction with the failing tests, evidence classes, the calibration table), and
prints the resolved rate of each model. An instance already judged with the same
inputs is not run again (resumable). Progress (done/total, ETA) goes to stderr.
The same as `kernel.effects.suite.run_suite` from Python.
"""

from __future__ import annotations

import argparse

from kernel.effects import console
from kernel.effects.commands.options import add_results_root, number
from kernel.effects.executors import EXECUTOR_HELP, open_executor
from kernel.effects.exit_status import ExitStatus
from kernel.effects.suite import run_suite
from kernel.run.suite import ModelCounts

__all__ = ["register", "suite"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``suite`` verb."""
    parser = subparsers.add_parser(
        "suite",
        help="judge model predictions on task instances (SWE-bench formats): resolved rates",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--instances", required=True, help="instances (JSON array or lines)")
    parser.add_argument("--predictions", required=True, help="predictions (JSON lines)")
    parser.add_argument(
        "--output-dir", default="results/suite", help="output folder (default: results/suite)"
    )
    parser.add_argument(
        "--max-workers",
        type=number(integer=True, minimum=1, maximum=1024),
        default=1,
        help="instances judged at once on the local pool (default 1)",
    )
    parser.add_argument("--executor", default="local", help=EXECUTOR_HELP)
    add_results_root(parser)
    parser.set_defaults(handler=suite)


def _line(counts: ModelCounts) -> str:
    rate = 100 * counts.resolved / counts.predictions if counts.predictions else 0.0
    return (
        f"{counts.model}: resolved {counts.resolved}/{counts.predictions} ({rate:.1f}%), "
        f"unresolved {counts.unresolved}, error {counts.error}, "
        f"empty patch {counts.empty_patch}"
    )


def suite(args: argparse.Namespace) -> int:
    """Run the verb; 0 when every instance was judged, 1 when one was not (an invalid
    instance or a control error: its predictions are ``error``)."""
    with open_executor(args.executor) as executor:
        outcome = run_suite(
            args.instances,
            args.predictions,
            args.output_dir,
            results_root=args.results_root,
            max_workers=args.max_workers,
            executor=executor,
        )
    for name, path in outcome.files.items():
        console.info(f"{name:<13} {path}")
    invalid = [r.instance_id for r in outcome.summary.instances if not r.calibration.valid]
    for counts in outcome.summary.models:
        print(_line(counts))
    print(
        f"suite {outcome.summary.digest[:12]}: {len(outcome.summary.instances)} instances "
        f"({outcome.judged} run, {len(outcome.summary.instances) - outcome.judged} resumed), "
        + (f"not judged: {', '.join(invalid)}" if invalid else "all calibrated")
    )
    return ExitStatus.REFUSED if invalid else ExitStatus.OK
