"""The whole verified-run pipeline as one library call: `run_pipeline`.

Steps: run every attempt (workers in sandboxes, each candidate checked by the
independent verifier in its own fresh sandbox) -> run record -> evidence report ->
corroboration of each candidate group by reruns of its worker -> evidence class of each
group (admission) -> report views (JSON, Markdown, HTML with the admission section) ->
replay check of the saved record. Nothing here selects, merges or decides: the human
decision stays pending. `kernel run` is this function plus argument parsing and printing.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import attrs

from kernel.corroboration.consensus import CaptureMode, CorroborationReport
from kernel.corroboration.run_admission import RunAdmission, build_run_admission
from kernel.effects import console
from kernel.effects.adapters.command import OUTPUT_TAIL, CommandWorker
from kernel.effects.documents import plan_outputs, report_of, stale_decisions
from kernel.effects.files import (
    DEFAULT_OUTPUT_ROOT,
    OutputRoot,
    atomic_write_bytes,
    load_json,
    refuse_outputs_on_inputs,
    write_canonical_json,
)
from kernel.effects.orchestrate import LoadedConfig, RunOutcome, load_config, run_detailed
from kernel.effects.replay import replay
from kernel.effects.rerun import corroborate
from kernel.effects.run_folder_lock import RunFolder
from kernel.effects.sandbox import Capture
from kernel.errors import ConfigError, RefusedError
from kernel.run.record import Calibration, DeclaredReplay
from kernel.run.replay import ReplayCheck, ReplayMode, default_mode
from kernel.run.report import RunEvidenceReport
from kernel.views import (
    CheckOutputView,
    PatchView,
    Workspace,
    render_html,
    render_json,
    render_markdown,
)
from kernel.views.admission import admission_section

__all__ = [
    "DEFAULT_RERUNS",
    "MAX_RERUNS",
    "PIPELINE_FILES",
    "REPLAY_NONE",
    "Candidates",
    "PipelineResult",
    "chosen_replay",
    "corroborate_candidates",
    "run_pipeline",
]

DEFAULT_RERUNS: Final = 3
MAX_RERUNS: Final = 1000
"""More reruns per candidate group than this is a usage error."""
REPLAY_NONE: Final = "none"
"""The replay mode that skips the replay."""
PIPELINE_FILES: Final = (
    "run.json",
    "run.volatile.json",
    "evidence.json",
    "evidence.md",
    "evidence.html",
    "admission.json",
    "corroboration.json",
    "replay.json",
    "calibration.json",
)
"""The fixed files of an output folder (patches and check outputs are named by digest)."""


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
    stale_decisions: tuple[str, ...]
    """One warning per decision record in the output folder that decides on another
    report of this run (`kernel.effects.documents.stale_decisions`)."""
    wall_ms: int
    """Wall time of the whole pipeline."""


@attrs.frozen(kw_only=True)
class Candidates:
    """The candidate patches of a run and their corroboration."""

    by_attempt: Mapping[str, str]
    """Attempt id -> digest of the patch it produced (attempts without one are absent)."""
    contexts: Mapping[str, str]
    """Attempt id -> context digest of its command worker."""
    corroborations: Mapping[str, CorroborationReport]
    """Patch digest -> corroboration report of reruns of its first command worker."""
    patches: Mapping[str, bytes]
    """Patch digest -> the patch bytes."""


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


def corroborate_candidates(
    loaded: LoadedConfig,
    outcome: RunOutcome,
    reruns: int,
    executor: concurrent.futures.Executor | None = None,
) -> Candidates:
    """The candidates of ``outcome`` and one corroboration per candidate group: its first
    command worker rerun ``reruns`` times in patch mode (none when ``reruns`` is 0)."""
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
    return Candidates(
        by_attempt=candidates, contexts=contexts, corroborations=reports, patches=patches
    )


def _workspace(outcome: RunOutcome, candidates: Candidates) -> Workspace:
    """The diffs and the check and worker output tails the report views show (and link to)."""
    by_patch: dict[str, list[str]] = {}
    for attempt_id, digest in candidates.by_attempt.items():
        by_patch.setdefault(digest, []).append(attempt_id)
    outputs = []
    workers = []
    suffix = f":{OUTPUT_TAIL}"
    for attempt in outcome.attempts:
        aid = attempt.record.attempt_id
        for key, value in sorted(attempt.notes.items()):
            if key.startswith("check:") and key.endswith(suffix) and isinstance(value, str):
                check_id = key[len("check:") : -len(suffix)]
                outputs.append(CheckOutputView.of(aid, check_id, value.encode()))
        tail = attempt.notes.get(f"worker{suffix}")
        if isinstance(tail, str):
            workers.append(CheckOutputView.of(aid, "worker", tail.encode()))
    return Workspace(
        patches=tuple(
            PatchView.of(candidates.patches[d], ids) for d, ids in sorted(by_patch.items())
        ),
        outputs=tuple(outputs),
        worker_outputs=tuple(workers),
    )


def _plan(
    loaded: LoadedConfig, folder: Path, results_root: Path | str
) -> tuple[dict[str, Path], OutputRoot]:
    """Confine every fixed output path before anything runs: a refusal writes nothing."""
    root = OutputRoot(results_root)
    root.resolve(folder / "patches" / "probe", inputs=loaded.inputs)
    planned = plan_outputs(results_root, [folder / name for name in PIPELINE_FILES], loaded.inputs)
    files = {n: p for n, p in zip(PIPELINE_FILES, planned, strict=True) if p is not None}
    probes = [folder / "patches" / "probe", folder / "checks" / "probe"]
    refuse_outputs_on_inputs([*files.values(), *probes], loaded.inputs)
    return files, root


def _plan_artifacts(
    loaded: LoadedConfig,
    folder: Path,
    root: OutputRoot,
    patches: Mapping[str, bytes],
    workspace: Workspace,
) -> dict[str, tuple[Path, bytes]]:
    """Artifact names are known only after the run: confine each before the first write.
    Returns file name -> (path, bytes)."""
    planned = {
        f"patches/{digest[:12]}": (
            root.resolve(folder / "patches" / f"{digest}.patch", inputs=loaded.inputs),
            patches[digest],
        )
        for digest in sorted(patches)
    }
    tails = (*workspace.outputs, *workspace.worker_outputs)
    if tails:
        root.resolve(folder / "checks" / "probe", inputs=loaded.inputs)
    for o in sorted(tails, key=lambda o: o.digest):
        path = root.resolve(folder / "checks" / f"{o.digest}.txt", inputs=loaded.inputs)
        planned[f"checks/{o.digest[:12]}"] = (path, o.text.encode("utf-8"))
    refuse_outputs_on_inputs([path for path, _data in planned.values()], loaded.inputs)
    return planned


def _write_documents(
    files: Mapping[str, Path],
    *,
    outcome: RunOutcome,
    report: RunEvidenceReport,
    admission: RunAdmission,
    candidates: Candidates,
    workspace: Workspace,
) -> None:
    sections = [admission_section(admission)]
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
            "reports": {d: r.to_dict() for d, r in sorted(candidates.corroborations.items())},
        },
    )


def _replay_saved(
    loaded: LoadedConfig,
    files: dict[str, Path],
    mode: ReplayMode | None,
    executor: concurrent.futures.Executor | None,
) -> ReplayCheck | None:
    if mode is None:
        del files["replay.json"]
        console.progress("replay: skipped (no worker is re-run)")
        return None
    # Replay reads the record back as a user would, and re-runs the config.
    console.progress(f"replay: re-running the config ({mode} comparison)")
    saved = load_json(files["run.json"], what="run record")
    check, _ = replay(loaded, saved, mode, executor=executor)
    write_canonical_json(files["replay.json"], check.to_dict())
    console.progress(f"replay: {'match' if check.match else 'MISMATCH'}")
    return check


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

    ``reruns`` per candidate group (0 skips corroboration); ``replay_mode`` one of
    `kernel.run.replay.ReplayMode`'s values, `REPLAY_NONE`, or None for the config's
    declared mode (none for nondeterministic or costly workers). Every output path is
    confined to ``results_root`` and checked before anything runs.

    Raises:
        ConfigError: unusable config, adapter, command, baseline or verifier; reruns not
            an integer in 0..MAX_RERUNS; a replay mode the config does not allow.
        EffectError: a file cannot be read or written, or an output escapes the root.
        RefusedError: the config's calibration refused its instance (its ``refusal``
            is the `Calibration`): no attempt was judged, and the output folder holds
            only ``calibration.json``, the per-test table that says why.
    """
    started = time.monotonic()
    if type(reruns) is not int or not 0 <= reruns <= MAX_RERUNS:
        raise ConfigError(f"--reruns must be an integer >= 0 and <= {MAX_RERUNS}, got {reruns!r}")
    loaded = load_config(config, limit_overrides=limit_overrides)
    mode = chosen_replay(loaded, replay_mode)
    folder = Path(output_dir)
    files, root = _plan(loaded, folder, results_root)
    # Written only when calibration refuses the instance (the run record holds a valid one).
    refused_file = files.pop("calibration.json")
    # One run per folder: locked before anything runs, written into a staging folder and
    # published whole at the end (a killed run leaves the old folder or none).
    with RunFolder(folder, owned=(*PIPELINE_FILES, "patches", "checks")) as run_folder:
        try:
            result = _run_into(
                loaded,
                config,
                run_folder,
                files=files,
                root=root,
                reruns=reruns,
                mode=mode,
                executor=executor,
            )
        except RefusedError as e:
            if isinstance(e.refusal, Calibration):
                # Not judged: the folder holds the calibration table that says why.
                write_canonical_json(run_folder.staged(refused_file), e.refusal.to_dict())
                run_folder.publish()
            raise
        run_folder.publish()
    return attrs.evolve(
        result,
        stale_decisions=tuple(stale_decisions(files["evidence.json"].parent, result.report)),
        wall_ms=int((time.monotonic() - started) * 1000),
    )


def _run_into(
    loaded: LoadedConfig,
    config: Path | str,
    run_folder: RunFolder,
    *,
    files: dict[str, Path],
    root: OutputRoot,
    reruns: int,
    mode: ReplayMode | None,
    executor: concurrent.futures.Executor | None,
) -> PipelineResult:
    """The pipeline's steps, every output written to its staged path; ``files`` gets the
    final path of every output written."""
    folder = run_folder.target
    outcome = run_detailed(loaded, executor=executor, keep_artifacts=True)
    report = report_of(outcome.record, config)
    candidates = corroborate_candidates(loaded, outcome, reruns, executor)
    admission = build_run_admission(
        report,
        candidates=candidates.by_attempt,
        contexts=candidates.contexts,
        corroborations=candidates.corroborations,
    )
    workspace = _workspace(outcome, candidates)
    artifacts = _plan_artifacts(loaded, folder, root, candidates.patches, workspace)
    staged = {name: run_folder.staged(path) for name, path in files.items()}
    _write_documents(
        staged,
        outcome=outcome,
        report=report,
        admission=admission,
        candidates=candidates,
        workspace=workspace,
    )
    for name, (path, data) in artifacts.items():
        atomic_write_bytes(run_folder.staged(path), data)
        files[name] = path
    check = _replay_saved(loaded, staged, mode, executor)
    if check is None:
        del files["replay.json"]
    return PipelineResult(
        outcome=outcome,
        report=report,
        corroborations=candidates.corroborations,
        admission=admission,
        replay=check,
        files=files,
        stale_decisions=(),
        wall_ms=0,
    )
