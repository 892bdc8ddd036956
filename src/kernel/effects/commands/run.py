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
``patches/<digest>.patch``  each distinct candidate patch, for the human to read
``checks/<digest>.txt``     the tail of each check's output (what the report shows)

Exit codes: 0 the pipeline ran and the replay matched (or was skipped); 1 the replay
did not match;
2 unusable input (unknown adapter, missing command, baseline not a directory, a
verifier with no checks, an output outside the root): one line, nothing written.
Nothing here selects, merges or decides: the human decision stays pending.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from kernel.consensus import CaptureMode, CorroborationReport
from kernel.effects import console
from kernel.effects.adapters.command import OUTPUT_TAIL, CommandWorker
from kernel.effects.commands.options import add_results_root, number
from kernel.effects.commands.report import plan_outputs, replay, warn_stale_decisions
from kernel.effects.executors import EXECUTOR_HELP, open_executor
from kernel.effects.files import (
    DEFAULT_OUTPUT_ROOT,
    OutputRoot,
    atomic_write_bytes,
    load_json,
    refuse_outputs_on_inputs,
    write_canonical_json,
)
from kernel.effects.orchestrate import (
    LIMIT_KEYS,
    LoadedConfig,
    RunOutcome,
    load_config,
    run_detailed,
)
from kernel.effects.rerun import corroborate
from kernel.effects.sandbox import Capture
from kernel.errors import ConfigError
from kernel.evidence_report import ReportRefusal, RunEvidenceReport, build_evidence_report
from kernel.render import (
    CheckOutputView,
    PatchView,
    Workspace,
    render_html,
    render_json,
    render_markdown,
)
from kernel.run_admission import RunAdmission, admission_section, build_run_admission
from kernel.run_replay import ReplayCheck, ReplayMode, default_mode
from kernel.runrecord import DeclaredReplay

__all__ = [
    "DEFAULT_RERUNS",
    "REPLAY_NONE",
    "PipelineResult",
    "chosen_replay",
    "parse_limits",
    "refuse_outputs_on_inputs",
    "register",
    "run",
    "run_pipeline",
    "summary_lines",
]

DEFAULT_RERUNS: Final = 3
MAX_RERUNS: Final = 1000
"""More reruns per candidate group than this is a usage error."""
_FILES: Final = (
    "run.json",
    "run.volatile.json",
    "evidence.json",
    "evidence.md",
    "evidence.html",
    "admission.json",
    "corroboration.json",
    "replay.json",
)


@attrs.frozen(kw_only=True)
class PipelineResult:
    """Everything one pipeline run produced (the files hold the same)."""

    outcome: RunOutcome
    """The run record, per-attempt outcomes and volatile notes."""
    report: RunEvidenceReport
    """The evidence report."""
    corroborations: Mapping[str, CorroborationReport]
    """Candidate digest -> corroboration report of reruns."""
    admission: RunAdmission
    """Evidence classes of the candidate groups."""
    replay: ReplayCheck | None
    """The replay check of the saved record; None when the replay was skipped."""
    files: Mapping[str, Path]
    """Name -> path of every file written."""
    wall_ms: int
    """Wall time of the whole pipeline."""


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


def _report(outcome: RunOutcome, config: Path) -> RunEvidenceReport:
    report = build_evidence_report(outcome.record)
    if isinstance(report, ReportRefusal):
        codes = ", ".join(report.reason_codes)
        raise ConfigError(f"{config}: report refused ({codes})")
    return report


def _corroborate(
    loaded: LoadedConfig,
    outcome: RunOutcome,
    reruns: int,
    executor: concurrent.futures.Executor | None = None,
) -> tuple[dict[str, str], dict[str, str], dict[str, CorroborationReport], dict[str, bytes]]:
    """Candidates, contexts, one corroboration per candidate group, and the patches."""
    workers = dict(loaded.attempts)
    candidates: dict[str, str] = {}
    contexts: dict[str, str] = {}
    patches: dict[str, bytes] = {}
    first: dict[str, CommandWorker] = {}
    for attempt in outcome.attempts:
        aid = attempt.record.attempt_id
        worker = workers[aid]
        if isinstance(worker, CommandWorker):
            contexts[aid] = worker.context_digest()
        manifest = attempt.manifest
        patch = next((a for a in manifest.artifacts if a.id == "patch"), None) if manifest else None
        if patch is None or "patch" not in attempt.artifacts:
            continue
        candidates[aid] = patch.digest
        patches.setdefault(patch.digest, attempt.artifacts["patch"])
        if isinstance(worker, CommandWorker):
            first.setdefault(patch.digest, worker)
    reports: dict[str, CorroborationReport] = {}
    for digest, worker in first.items() if reruns else ():
        spec = worker.spec()
        label = f"rerun of candidate {digest[:12]}"

        def show(capture: Capture, label: str = label) -> None:
            console.progress(
                f"{label}: run {capture.run_index + 1}/{reruns} {capture.status} "
                f"({capture.duration_ms} ms)"
            )

        result = corroborate(
            spec.command,
            runs=reruns,
            baseline=spec.baseline,
            capture=CaptureMode.PATCH,
            candidate=patches[digest],
            timeout_s=spec.timeout_s,
            network=spec.network,
            env=dict(spec.env or ()),
            limits=spec.limits,
            on_capture=show,
            executor=executor,
        )
        reports[digest] = result.report
    return candidates, contexts, reports, patches


def _workspace(
    outcome: RunOutcome, candidates: Mapping[str, str], patches: Mapping[str, bytes]
) -> Workspace:
    """The diffs and check output tails the report views show (and link to)."""
    by_patch: dict[str, list[str]] = {}
    for attempt_id, digest in candidates.items():
        by_patch.setdefault(digest, []).append(attempt_id)
    outputs = []
    suffix = f":{OUTPUT_TAIL}"
    for attempt in outcome.attempts:
        for key, value in sorted(attempt.notes.items()):
            if key.startswith("check:") and key.endswith(suffix) and isinstance(value, str):
                check_id = key[len("check:") : -len(suffix)]
                outputs.append(
                    CheckOutputView.of(attempt.record.attempt_id, check_id, value.encode())
                )
    return Workspace(
        patches=tuple(PatchView.of(patches[d], ids) for d, ids in sorted(by_patch.items())),
        outputs=tuple(outputs),
    )


REPLAY_NONE: Final = "none"


def chosen_replay(loaded: LoadedConfig, requested: str | None) -> ReplayMode | None:
    """The replay mode to run (None: skip the replay), checked before anything runs.

    Raises:
        ConfigError: ``nondeterministic`` asked for a config that does not declare it
            (it would silently weaken exact replay).
    """
    declared = loaded.declared_replay
    if requested == REPLAY_NONE:
        return None
    if requested is None:
        # Nondeterministic (model/agent) or costly (paid) workers are not re-run unasked.
        unasked = declared is DeclaredReplay.NONDETERMINISTIC or loaded.costly
        return None if unasked else default_mode(declared)
    mode = ReplayMode(requested)
    if mode is ReplayMode.NONDETERMINISTIC and declared is not DeclaredReplay.NONDETERMINISTIC:
        raise ConfigError(
            f"{loaded.source.path}: --replay nondeterministic needs the config to declare "
            '"replay": "nondeterministic"; it would silently weaken exact replay'
        )
    return mode


def run_pipeline(
    config: Path | str,
    output_dir: Path | str,
    *,
    reruns: int = DEFAULT_RERUNS,
    results_root: Path | str = DEFAULT_OUTPUT_ROOT,
    replay_mode: str | None = None,
    executor: concurrent.futures.Executor | None = None,
    limit_overrides: Mapping[str, int | None] | None = None,
) -> PipelineResult:
    """Run the whole pipeline for ``config`` into ``output_dir`` (module docstring).

    Raises:
        ConfigError: unusable config, adapter, command, baseline or verifier; reruns < 0;
            a replay mode the config does not allow.
        EffectError: a file cannot be read or written, or an output escapes the root.
    """
    started = time.monotonic()
    if type(reruns) is not int or reruns < 0:
        raise ConfigError(f"--reruns must be an integer >= 0, got {reruns!r}")
    loaded = load_config(config, limit_overrides=limit_overrides)
    mode = chosen_replay(loaded, replay_mode)
    # Every output path is confined before anything runs: a refusal writes nothing.
    folder = Path(output_dir)
    OutputRoot(results_root).resolve(folder / "patches" / "probe", inputs=loaded.inputs)
    planned = plan_outputs(results_root, [folder / name for name in _FILES], loaded.inputs)
    files = {name: path for name, path in zip(_FILES, planned, strict=True) if path is not None}
    probes = [folder / "patches" / "probe", folder / "checks" / "probe"]
    refuse_outputs_on_inputs([*files.values(), *probes], loaded.inputs)
    outcome = run_detailed(loaded, executor=executor, keep_artifacts=True)
    report = _report(outcome, Path(config))
    candidates, contexts, corroborations, patches = _corroborate(loaded, outcome, reruns, executor)
    admission = build_run_admission(
        report, candidates=candidates, contexts=contexts, corroborations=corroborations
    )
    sections = [admission_section(admission)]
    workspace = _workspace(outcome, candidates, patches)
    # Artifact names are known only now: confine each one too before the first write.
    root = OutputRoot(results_root)
    patch_files = {
        digest: root.resolve(folder / "patches" / f"{digest}.patch", inputs=loaded.inputs)
        for digest in sorted(patches)
    }
    if workspace.outputs:
        root.resolve(folder / "checks" / "probe", inputs=loaded.inputs)
    output_files = {
        o.digest: (
            root.resolve(folder / "checks" / f"{o.digest}.txt", inputs=loaded.inputs),
            o.text.encode("utf-8"),
        )
        for o in workspace.outputs
    }
    refuse_outputs_on_inputs(
        [*patch_files.values(), *(path for path, _text in output_files.values())], loaded.inputs
    )
    write_canonical_json(files["run.json"], outcome.record.to_dict())
    write_canonical_json(files["run.volatile.json"], outcome.volatile())
    atomic_write_bytes(files["evidence.json"], render_json(report))
    markdown = render_markdown(report, sections, workspace)
    atomic_write_bytes(files["evidence.md"], markdown.encode("utf-8"))
    atomic_write_bytes(files["evidence.html"], render_html(report, sections, workspace).encode())
    write_canonical_json(files["admission.json"], admission.to_dict())
    write_canonical_json(
        files["corroboration.json"],
        {
            "kind": "kernel-corroboration-set",
            "schema_version": "1",
            "run_id": report.run_id,
            "reports": {d: r.to_dict() for d, r in sorted(corroborations.items())},
        },
    )
    for digest, path in patch_files.items():
        atomic_write_bytes(path, patches[digest])
        files[f"patches/{digest[:12]}"] = path
    for digest, (path, data) in sorted(output_files.items()):
        atomic_write_bytes(path, data)
        files[f"checks/{digest[:12]}"] = path
    check = None
    if mode is None:
        del files["replay.json"]
        console.progress("replay: skipped (no worker is re-run)")
    else:
        # Replay reads the record back as a user would, and re-runs the config.
        console.progress(f"replay: re-running the config ({mode} comparison)")
        saved = load_json(files["run.json"], what="run record")
        check, _ = replay(loaded, saved, mode, executor=executor)
        write_canonical_json(files["replay.json"], check.to_dict())
        console.progress(f"replay: {'match' if check.match else 'MISMATCH'}")
    return PipelineResult(
        outcome=outcome,
        report=report,
        corroborations=corroborations,
        admission=admission,
        replay=check,
        files=files,
        wall_ms=int((time.monotonic() - started) * 1000),
    )


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
        f"control errors {s.control_errors}; verifiers disagree: "
        f"{'yes' if s.verification_disagreement else 'no'}",
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
    """Run the verb; 0 done and replay matched, 1 replay mismatch."""
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
    for name, path in result.files.items():
        console.info(f"{name:<20} {path}")
    warn_stale_decisions(result.files["evidence.json"].parent, result.report)
    console.info("")
    for line in summary_lines(result):
        print(line)
    console.info(f"(pipeline wall time {result.wall_ms} ms)")
    return 0 if result.replay is None or result.replay.match else 1
