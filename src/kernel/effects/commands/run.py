"""`kernel run --config C [--output-dir DIR]`: the whole verified-run pipeline.

    kernel run --config fixtures/demo/config.json --output-dir results/demo

Steps: run every attempt (workers in sandboxes, each candidate checked by the
independent verifier in its own fresh sandbox) -> run record -> evidence report ->
corroboration of each candidate group by reruns of its worker -> evidence class of each
group (admission) -> report views (JSON, Markdown, HTML with the admission section) ->
replay check of the saved record in the config's declared mode. Then it prints where
each file is and a five-line summary. Progress (attempt started/finished, check
results, reruns, replay) goes to stderr on a terminal or with ``-v``.

What it costs, by default: each attempt runs once (worker, then each verifier check);
each distinct candidate is rerun ``--reruns`` times (default 3) for corroboration; the
replay runs the whole config once more (every worker and check again). So with the
defaults a worker runs up to 1 + 3 + 1 = 5 times. ``--reruns 0`` skips corroboration
(no candidate group can then be corroborated); ``--replay none`` skips the replay. A
config that declares ``"replay": "nondeterministic"`` (model or agent workers) or
``"costly": true`` (paid workers) is not re-run for replay unless ``--replay`` asks
for a mode.

Files written into the output folder (every path is confined to ``--results-root``,
default ``results/``, and checked before anything runs):

``run.json``             the run record (byte-stable; what replay compares)
``run.volatile.json``    durations, isolation levels, check output digests (not compared)
``evidence.json|.md|.html``  the run evidence report (Markdown/HTML add the admission section)
``admission.json``       evidence classes of the candidate groups (bound to the report)
``corroboration.json``   one corroboration report per candidate group (reruns)
``replay.json``          the replay check (mode recorded; not written when skipped)
``calibration.json``     only when calibration refused the instance: the per-test table
``patches/<digest>.patch``  each distinct candidate patch, for the human to read
``checks/<digest>.txt``     the tail of each check's and each worker's output

The folder is one run: the run locks it (``.<name>.lock`` beside it), writes into a
staging folder beside it and moves that into place at the end, so it holds a whole run
or none; files of yours in it (a recorded decision) are kept.

The library call is `kernel.effects.pipeline.run_pipeline`.

Before any attempt is judged, the declared tests run on the baseline (and on the
config's ``"calibration": {"reference_patch": PATH}``): FAIL_TO_PASS must fail,
PASS_TO_PASS must pass, the reference must pass them all. The calibration is in
``run.json`` and the report; an instance it refuses is not judged: the folder holds only
``calibration.json`` (the per-test table, each test's reason), the table is shown and
the command exits 1 with one line (`kernel.effects.calibration`).

Exit codes: 0 the pipeline ran and the replay matched (or was skipped); 1 the replay
did not match, or calibration refused the instance;
2 unusable input (unknown adapter, missing command, baseline not a directory, a
verifier with no checks, an output outside the root, another run writing the same
folder): one line, nothing written.
Nothing here selects, merges or decides: the human decision stays pending.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kernel.corroboration.run_admission import RunAdmission
from kernel.effects import console
from kernel.effects.commands.options import add_results_root, number
from kernel.effects.executors import EXECUTOR_HELP, open_executor
from kernel.effects.exit_status import ExitStatus
from kernel.effects.orchestrate import LIMIT_KEYS
from kernel.effects.pipeline import (
    DEFAULT_RERUNS,
    MAX_RERUNS,
    REPLAY_NONE,
    PipelineResult,
    run_pipeline,
)
from kernel.errors import ConfigError, RefusedError
from kernel.run.record import Calibration
from kernel.run.replay import ReplayMode
from kernel.run.report import candidate_disagreements

__all__ = ["parse_limits", "register", "run", "summary_lines"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``run`` verb."""
    parser = subparsers.add_parser(
        "run",
        help="run a config end to end: attempts, verifier, report, corroboration, replay",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", required=True, help="orchestration config (JSON)")
    parser.add_argument(
        "--output-dir", default="results/run", help="output folder (default: results/run)"
    )
    parser.add_argument(
        "--reruns",
        type=number(integer=True, minimum=0, maximum=MAX_RERUNS),
        default=DEFAULT_RERUNS,
        help="reruns of each distinct candidate's worker for corroboration; each costs one "
        f"more worker run (0..{MAX_RERUNS}, default {DEFAULT_RERUNS}; 0 skips corroboration)",
    )
    parser.add_argument(
        "--replay",
        choices=[*(m.value for m in ReplayMode), REPLAY_NONE],
        help="replay check after the run: exact, provenance and semantic re-run the whole "
        "config once more (every worker and check again: the cost of one more run) and "
        "compare; nondeterministic re-runs and compares provenance only (configs that "
        "declare it); none skips it (no cost). Default: the config's declared mode, and "
        "none for a config declaring nondeterministic or costly (paid) workers",
    )
    parser.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a resource limit of every sandboxed run, over the config's `limits` "
        f"({', '.join(LIMIT_KEYS)}; a positive integer or `none`); repeatable",
    )
    parser.add_argument("--executor", default="local", help=EXECUTOR_HELP)
    add_results_root(parser)
    parser.set_defaults(handler=run)


def _groups_line(admission: RunAdmission) -> str:
    parts = []
    for group in admission.groups:
        label = group.candidate_digest[:12] + (" (no change)" if group.no_change else "")
        verdict = (
            str(group.evidence_class)
            if group.evidence_class is not None
            else "not admitted: " + ", ".join(group.refusal_reasons)
        )
        parts.append(f"{label} [{', '.join(group.attempt_ids)}] {verdict}")
    return "; ".join(parts) if parts else "no candidate produced"


def summary_lines(result: PipelineResult) -> list[str]:
    """The five-line summary (plain text; ids come from the config)."""
    s = result.report.summary
    record = result.outcome.record
    reruns = sum(r.runs_launched for r in result.corroborations.values())
    agreeing = sum(1 for r in result.corroborations.values() if r.consensus)
    check = result.replay
    replay_text = (
        "skipped (no worker was re-run; `kernel report replay-check` or --replay runs it)"
        if check is None
        else f"mode {check.mode}, "
        + ("match " if check.match else "MISMATCH ")
        + (
            f"({check.saved_compared_digest})"
            if check.match
            else f"({', '.join(check.reason_codes)} at {check.first_difference})"
        )
    )
    return [
        f"run {record.run_id}: {s.attempt_count} attempts in {result.outcome.wall_ms} ms: "
        f"supported {s.supported}, rejected {s.rejected}, inconclusive {s.inconclusive}, "
        f"control errors {s.control_errors}; recommendations differ across candidates: "
        f"{'yes' if s.verification_disagreement else 'no'}; same candidate judged "
        f"differently: {'yes' if candidate_disagreements(result.report) else 'no'}",
        f"evidence classes: {_groups_line(result.admission)}",
        f"corroboration: {len(result.corroborations)} candidate groups, {reruns} reruns, "
        f"{agreeing} with a strict-majority byte agreement (a signal, not correctness)",
        f"replay: {replay_text}",
        "human decision: pending (nothing was selected, merged or pushed; record one with "
        "`kernel decision record`)",
    ]


def parse_limits(items: Sequence[str]) -> dict[str, int | None]:
    """``NAME=VALUE`` command-line limits: a positive integer (decimal digits) or ``none``.

    Raises:
        ConfigError: an item is not ``NAME=VALUE`` or its value is not such a number
            (NaN, infinities, signs, exponents and fractions are refused).
    """
    limits: dict[str, int | None] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--limit: expected NAME=VALUE, got {item!r}")
        if value == "none":
            limits[name] = None
        elif value.isascii() and value.isdigit() and len(value) <= 16:
            limits[name] = int(value)
        else:
            raise ConfigError(f"--limit {name}: expected a positive integer or none, got {value!r}")
    return limits


def run(args: argparse.Namespace) -> int:
    """Run the verb; 0 done and replay matched, 1 replay mismatch or an instance its
    calibration refused."""
    try:
        with open_executor(args.executor) as executor:
            result = run_pipeline(
                args.config,
                args.output_dir,
                reruns=args.reruns,
                results_root=args.results_root,
                replay_mode=args.replay,
                executor=executor,
                limit_overrides=parse_limits(args.limit),
            )
    except RefusedError as e:
        if not isinstance(e.refusal, Calibration):
            raise
        # Not judged: the per-test table says why, one line says what.
        for test in e.refusal.tests:
            console.info(
                f"  {test.test_id} ({test.kind}): baseline {test.baseline}, reference "
                f"{test.reference or '-'}: {test.blame or 'as expected'}"
            )
        print(f"kernel run: refused: {e}", file=sys.stderr)
        return ExitStatus.REFUSED
    for name, path in result.files.items():
        console.info(f"{name:<20} {path}")
    for warning in result.stale_decisions:
        print(warning, file=sys.stderr)
    console.info("")
    for line in summary_lines(result):
        print(line)
    console.info(f"(pipeline wall time {result.wall_ms} ms)")
    return ExitStatus.OK if result.replay is None or result.replay.match else ExitStatus.REFUSED
