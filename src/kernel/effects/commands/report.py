"""`kernel report generate|render|replay-check`: run evidence reports from the command line.

``replay-check --mode exact|provenance|semantic|nondeterministic`` (default: what the
config declares, ``exact`` when it declares nothing) prints the mode it compared and,
with ``--output``, writes the `kernel.run.replay.ReplayCheck` document. ``nondeterministic``
on a config that does not declare it is refused (exit 2): a mode never silently
weakens another.

A saved run record written before ``provenance`` existed is read as ``provenance:
null`` (documents stay readable; nothing else is filled in).

Exit codes: 0 success / replay match; 1 replay mismatch (the first differing path is
printed): a saved record that is a valid run record but not the one the config
produces (an edited field, another config). 2 unusable input (missing, unreadable,
non-JSON, schema-violating or digest-drifted, including a saved record that is not a
valid run record: one line naming the file and field), an output path outside the
output root, or an output that would overwrite an input. On exit 2 nothing is written:
every input is read and checked and every output path is confined before the first
(atomic) write.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from kernel.effects import console
from kernel.effects.documents import (
    load_run_record,
    parse_run_record,
    plan_outputs,
    report_of,
    stale_decisions,
)
from kernel.effects.exit_status import ExitStatus
from kernel.effects.files import (
    DEFAULT_OUTPUT_ROOT,
    atomic_write_bytes,
    load_json,
    write_canonical_json,
)
from kernel.effects.orchestrate import LoadedConfig, load_config, run_loaded
from kernel.effects.replay import replay
from kernel.errors import ConfigError, KernelError, RecordError
from kernel.importers.idkmesh import is_idkmesh_run
from kernel.importers.idkmesh_config import (
    idkmesh_provenance_differences,
    is_idkmesh_config,
    read_idkmesh_config,
    read_idkmesh_verifier_policy,
    read_idkmesh_work_unit,
)
from kernel.run.replay import ReplayCheck, ReplayMode, ReplayReason
from kernel.run.report import RunEvidenceReport
from kernel.views import render_html, render_json, render_markdown

__all__ = [
    "describe_replay",
    "register",
    "run_generate",
    "run_render",
    "run_replay_check",
]


def _add_views(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--report-json", required=True, help="evidence report (JSON)")
    parser.add_argument("--report-markdown", required=True, help="evidence report (Markdown)")
    parser.add_argument("--report-html", help="evidence report (self-contained HTML)")
    parser.add_argument(
        "--results-root",
        default=str(DEFAULT_OUTPUT_ROOT),
        help="every output must be inside this folder (default: results)",
    )


def _write_views(report: RunEvidenceReport, targets: Sequence[Path | None]) -> None:
    json_path, markdown_path, html_path = targets
    # plan_outputs keeps None only where no path was given; these two are required.
    json_path, markdown_path = cast(Path, json_path), cast(Path, markdown_path)
    atomic_write_bytes(json_path, render_json(report))
    atomic_write_bytes(markdown_path, render_markdown(report).encode("utf-8"))
    if html_path is not None:
        atomic_write_bytes(html_path, render_html(report).encode("utf-8"))


def _print_summary(report: RunEvidenceReport, targets: Sequence[Path | None]) -> None:
    s = report.summary
    print(
        f"report {report.run_id}: {s.attempt_count} attempts, supported {s.supported}, "
        f"rejected {s.rejected}, inconclusive {s.inconclusive}, control errors "
        f"{s.control_errors}, disagreement {'yes' if s.verification_disagreement else 'no'}, "
        "decision pending"
    )
    console.info(f"report digest {report.digest}")
    for target in targets:
        if target is not None:
            console.info(f"wrote {target}")
    json_target = targets[-3]
    if json_target is not None:
        for warning in stale_decisions(json_target.parent, report):
            print(warning, file=sys.stderr)


def run_generate(args: argparse.Namespace) -> int:
    """Run a config, then write the run record and the report views."""
    loaded = load_config(args.config)
    targets = plan_outputs(
        args.results_root,
        [args.run_output, args.report_json, args.report_markdown, args.report_html],
        loaded.inputs,
    )
    run = run_loaded(loaded)
    report = report_of(run, args.config)
    run_path = cast(Path, targets[0])  # --run-output is required, so it was planned
    write_canonical_json(run_path, run.to_dict())
    _write_views(report, targets[1:])
    _print_summary(report, targets)
    return ExitStatus.OK


def run_render(args: argparse.Namespace) -> int:
    """Write the report views of a saved run record (kernel or IDKMesh v0.1)."""
    run = load_run_record(args.run_record)
    targets = plan_outputs(
        args.results_root,
        [args.report_json, args.report_markdown, args.report_html],
        [args.run_record],
    )
    report = report_of(run, args.run_record)
    _write_views(report, targets)
    _print_summary(report, targets)
    return ExitStatus.OK


def describe_replay(
    check: ReplayCheck, saved: object, record_path: Path | str, loaded: LoadedConfig
) -> str:
    """One line naming the mode and the outcome."""
    mode = f"mode {check.mode}" + ("" if check.outputs_compared else ", outputs not compared")
    if check.match:
        return f"replay match ({mode}): {check.saved_compared_digest}"
    if ReplayReason.CONFIG_DIGEST in check.reason_codes:
        recorded = saved.get("config_digest") if isinstance(saved, dict) else None
        return (
            f"replay mismatch ({mode}): {record_path} config_digest {recorded!r} is not the "
            f"digest of {loaded.source.path} ({loaded.config_digest})"
        )
    if ReplayReason.NOT_CANONICAL in check.reason_codes:
        return f"replay mismatch ({mode}): {record_path} is not canonical JSON"
    return (
        f"replay mismatch ({mode}): saved {check.saved_compared_digest} != replayed "
        f"{check.replayed_compared_digest}; first difference at {check.first_difference}"
    )


def run_replay_check(args: argparse.Namespace) -> int:
    """Check the config digest, replay the config, compare in the chosen mode.

    Exit 0 when the replay matches in that mode, 1 on any mismatch (the config digest
    first, then the first differing path), 2 on unusable input.
    """
    config_document = load_json(args.config, what="config")
    if is_idkmesh_config(config_document):
        return _replay_idkmesh(args, config_document)
    loaded = load_config(args.config)
    mode = None if args.mode is None else ReplayMode(args.mode)
    target = None
    if args.output is not None:
        (target,) = plan_outputs(args.results_root, [args.output], [args.config, args.run_record])
    saved = load_json(args.run_record, what="run record")
    # A saved record that is not a run record at all is unusable input (exit 2), not a
    # mismatch: it names its file and field before anything is re-run.
    parse_run_record(saved, args.run_record)
    check, _ = replay(loaded, saved, mode)
    print(describe_replay(check, saved, args.run_record, loaded))
    if target is not None:
        write_canonical_json(target, check.to_dict())
        console.info(f"wrote {target}")
    return ExitStatus.OK if check.match else ExitStatus.REFUSED


def _idkmesh_root(config: Path, relative: str, given: str | None) -> Path:
    """The IDKMesh checkout the config's paths are relative to: ``--idkmesh-root``, or
    the nearest folder above the config that holds its work unit."""
    if given is not None:
        return Path(given)
    for folder in config.resolve().parents:
        if (folder / relative).is_file():
            return folder
    raise ConfigError(
        f"{config}: no folder above it holds {relative} (give the IDKMesh checkout with "
        "--idkmesh-root)"
    )


def _replay_idkmesh(args: argparse.Namespace, document: object) -> int:
    """Provenance replay of a saved IDKMesh v0.1 run against its IDKMesh config
    (`kernel.importers.idkmesh_config.idkmesh_provenance_differences` says what is compared)."""
    try:
        config = read_idkmesh_config(document)
    except RecordError as e:
        raise ConfigError(f"{args.config}: {e}") from e
    if args.mode not in {None, ReplayMode.PROVENANCE.value}:
        raise ConfigError(
            f"--mode {args.mode}: an IDKMesh run is replayed in provenance mode (its "
            "verifier is not re-run by kernel)"
        )
    if args.output is not None:
        raise ConfigError("--output writes kernel replay checks; an IDKMesh replay prints")
    saved = load_json(args.run_record, what="run record")
    parse_run_record(saved, args.run_record)
    if not is_idkmesh_run(saved) or not isinstance(saved, dict):
        raise ConfigError(f"{args.run_record}: an IDKMesh config replays an IDKMesh run record")
    root = _idkmesh_root(Path(args.config), config.work_unit, args.idkmesh_root)
    documents: dict[str, object] = {
        config.work_unit: load_json(root / config.work_unit, what="IDKMesh work unit"),
        config.verifier_policy: load_json(
            root / config.verifier_policy, what="IDKMesh verifier policy"
        ),
    }
    for path, reader in (
        (config.work_unit, read_idkmesh_work_unit),
        (config.verifier_policy, read_idkmesh_verifier_policy),
    ):
        try:
            reader(documents[path])
        except RecordError as e:
            raise ConfigError(f"{root / path}: {e}") from e
    for spec in config.attempts:
        if spec.result_manifest is not None:
            try:
                documents[spec.result_manifest] = load_json(
                    root / spec.result_manifest, what="result manifest"
                )
            except KernelError:
                documents[spec.result_manifest] = None  # IDKMesh: result_manifest_error
    try:
        differences = idkmesh_provenance_differences(config, documents, saved)
    except RecordError as e:
        raise ConfigError(f"{args.config}: {e}") from e
    scope = "IDKMesh provenance replay; its verifier is not re-run"
    if differences:
        print(f"replay mismatch ({scope}): first difference at {differences[0]}")
        return ExitStatus.REFUSED
    print(f"replay match ({scope}): {args.run_record} is a run of {args.config}")
    return ExitStatus.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``report`` verb and its sub-commands."""
    parser = subparsers.add_parser("report", help="run evidence reports")
    sub = parser.add_subparsers(dest="report_command", required=True)
    generate = sub.add_parser("generate", help="run a config, write run record + report")
    generate.add_argument("--config", required=True, help="orchestration config (JSON)")
    generate.add_argument("--run-output", required=True, help="where to write the run record")
    _add_views(generate)
    generate.set_defaults(handler=run_generate)
    render = sub.add_parser("render", help="report on a saved run record")
    render.add_argument(
        "--run-record", required=True, help="kernel or IDKMesh v0.1 run record (JSON)"
    )
    _add_views(render)
    render.set_defaults(handler=run_render)
    replay = sub.add_parser("replay-check", help="replay a config against a saved run")
    replay.add_argument("--config", required=True, help="orchestration config (JSON)")
    replay.add_argument("--run-record", required=True, help="saved run record (JSON)")
    replay.add_argument(
        "--mode",
        choices=[m.value for m in ReplayMode],
        help="comparison (default: the config's declared replay; exact when none)",
    )
    replay.add_argument("--output", help="write the replay check document (JSON) here")
    replay.add_argument(
        "--idkmesh-root",
        help="IDKMesh checkout an IDKMesh config's paths are relative to (default: the "
        "nearest folder above the config that holds its work unit)",
    )
    replay.add_argument(
        "--results-root",
        default=str(DEFAULT_OUTPUT_ROOT),
        help="--output must be inside this folder (default: results)",
    )
    replay.set_defaults(handler=run_replay_check)
