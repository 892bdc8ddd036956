"""`kernel corroborate`: N isolated reruns of one command, judged by byte identity.

    kernel corroborate -n N [--candidate FILE] [--baseline DIR] [--capture stdout|patch]
        [--baseline-output FILE] [--timeout S] [--network] [--vary tz,locale,...]
        [--env NAME[=VALUE]]... [--limit KIND=VALUE]...
        [--output REPORT.json] [--majority-output FILE] -- CMD [ARGS...]

Every run starts from a minimal environment (PATH, HOME=/tmp, TMPDIR=/tmp,
LANG=C.UTF-8, KERNEL_RUN_INDEX); ``--env NAME`` passes the runner's value of NAME,
``--env NAME=VALUE`` sets one. ``--limit`` sets a resource limit of every run
(memory, processes, cpu, output, writable, tmp; ``none`` lifts it), e.g.
``--limit memory=1G --limit cpu=120``.

Exit codes: 0 consensus (a strict majority of the launched runs agreed byte for
byte), 3 no consensus, 2 unusable input (N < 1 or absurd, a timeout that is not a
finite positive number, missing baseline, an input that is not a regular file, a
command that cannot start, an output path outside the output root); in that case
nothing is written. Writes only the named report
(canonical JSON, atomically; stdout when ``--output`` is not given) and, when asked,
the majority bytes. Every exit prints one outcome line (on stderr when the report goes
to stdout). Progress goes to stderr when it is a terminal or with ``-v``, never with
``-q``. Agreement is a corroboration signal, never a correctness claim.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kernel.corroboration.consensus import CaptureMode, Consensus, Isolation, NoConsensus
from kernel.effects import console
from kernel.effects.commands.options import add_results_root, number
from kernel.effects.exit_status import ExitStatus
from kernel.effects.files import OutputRoot, check_input, write_canonical_json
from kernel.effects.rerun import corroborate
from kernel.effects.sandbox import Capture, LimitKind, Limits, Variation, limits_with
from kernel.errors import ConfigError, EffectError
from kernel.records.identity import canonical_json

__all__ = ["outcome_line", "register", "run"]

MAX_RUNS = 1000
"""More runs than this is a usage error (not a machine's worth of sandboxes)."""
MAX_TIMEOUT_S = 7 * 24 * 3600
"""A per-run timeout beyond a week is a usage error."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``corroborate`` verb."""
    parser = subparsers.add_parser(
        "corroborate",
        help="run a command N times in isolated sandboxes and report byte agreement",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-n",
        "--runs",
        type=number(integer=True, minimum=1, maximum=MAX_RUNS),
        required=True,
        help=f"runs to launch (1 <= N <= {MAX_RUNS})",
    )
    parser.add_argument("--candidate", type=Path, help="the candidate patch or answer")
    parser.add_argument("--baseline", type=Path, help="directory each run starts from")
    parser.add_argument(
        "--capture",
        choices=[m.value for m in CaptureMode],
        default=CaptureMode.STDOUT.value,
        help="what each run's output is: its stdout, or the patch it makes (default: stdout)",
    )
    parser.add_argument("--baseline-output", type=Path, help="output that means 'no change'")
    parser.add_argument(
        "--timeout",
        type=number(integer=False, minimum=0, maximum=MAX_TIMEOUT_S, exclusive_minimum=True),
        help="per-run time limit in seconds",
    )
    parser.add_argument("--network", action="store_true", help="give runs network access")
    parser.add_argument(
        "--vary",
        action="append",
        default=[],
        help="per-run variations, comma-separated: " + ",".join(v.value for v in Variation),
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="add NAME (the runner's value) or NAME=VALUE to every run's environment",
    )
    parser.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="KIND=VALUE",
        help="resource limit of every run: " + ", ".join(k.value for k in LimitKind),
    )
    parser.add_argument(
        "--isolation",
        choices=[level.value for level in Isolation],
        help="require this isolation level (default: the strongest available)",
    )
    parser.add_argument("--output", type=Path, help="report path (default: stdout)")
    parser.add_argument("--majority-output", type=Path, help="write the majority bytes here")
    add_results_root(parser)
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    parser.set_defaults(handler=run)


def _variations(values: list[str]) -> tuple[Variation, ...]:
    chosen: list[Variation] = []
    for value in values:
        for name in filter(None, (part.strip() for part in value.split(","))):
            try:
                variation = Variation(name)
            except ValueError as e:
                allowed = ", ".join(v.value for v in Variation)
                raise ConfigError(f"--vary: unknown variation {name!r} (one of {allowed})") from e
            if variation not in chosen:
                chosen.append(variation)
    return tuple(chosen)


def _env(values: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not name or "\0" in value:
            raise ConfigError(f"--env {value!r}: expected NAME or NAME=VALUE")
        if sep:
            env[name] = text
        elif name in os.environ:
            env[name] = os.environ[name]
        else:
            raise ConfigError(f"--env {name}: not set in this environment")
    return env


def run(args: argparse.Namespace) -> int:
    """Run the verb; 0 consensus, 3 no consensus (usage errors raise `KernelError`)."""
    command = list(args.cmd)
    if command[:1] == ["--"]:
        command = command[1:]
    if args.runs < 1:
        raise ConfigError(f"-n must be >= 1, got {args.runs}")
    if not command:
        raise ConfigError("no command given (put it after --)")
    if args.timeout is not None and args.timeout <= 0:
        raise ConfigError(f"--timeout must be positive, got {args.timeout}")
    variations = _variations(args.vary)
    env = _env(args.env)
    limits = limits_with(Limits(), args.limit)
    if args.baseline is not None and not args.baseline.is_dir():
        raise EffectError(f"{args.baseline}: baseline directory not found")
    inputs = [p for p in (args.candidate, args.baseline_output) if p is not None]
    for path in inputs:
        check_input(path, what="input")
    root = OutputRoot(args.results_root)
    # Every output path is checked before anything runs, so a refusal writes nothing.
    report_path = None if args.output is None else root.resolve(args.output, inputs=inputs)
    majority_path = (
        None if args.majority_output is None else root.resolve(args.majority_output, inputs=inputs)
    )
    if report_path is not None and report_path == majority_path:
        raise EffectError(f"{args.output}: report and majority output are the same file")

    def show(capture: Capture) -> None:
        console.progress(f"run {capture.run_index}: {capture.status} ({capture.duration_ms} ms)")

    result = corroborate(
        command,
        runs=args.runs,
        baseline=args.baseline,
        capture=CaptureMode(args.capture),
        candidate=args.candidate,
        baseline_output=args.baseline_output,
        timeout_s=args.timeout,
        network=args.network,
        variations=variations,
        env=env,
        limits=limits,
        isolation=None if args.isolation is None else Isolation(args.isolation),
        majority_output_path=majority_path,
        on_capture=show,
    )
    document = result.report.to_dict()
    if report_path is None:
        sys.stdout.buffer.write(canonical_json(document) + b"\n")
        sys.stdout.flush()
    else:
        write_canonical_json(report_path, document)
    # The outcome line: on stderr when stdout carries the report document itself.
    print(outcome_line(result.outcome), file=sys.stderr if report_path is None else sys.stdout)
    consensus = isinstance(result.outcome, Consensus)
    return ExitStatus.OK if consensus else ExitStatus.NO_CONSENSUS


def outcome_line(outcome: Consensus | NoConsensus) -> str:
    """One line for exit 0 (consensus) or 3 (no consensus)."""
    if isinstance(outcome, Consensus):
        return (
            f"consensus: {outcome.agreement_count} of {outcome.runs_launched} runs agree byte "
            f"for byte ({outcome.majority_digest[:12]}); a corroboration signal, not correctness"
        )
    largest = max((len(g.run_indexes) for g in outcome.groups), default=0)
    return (
        f"no consensus ({outcome.reason}): the largest byte-identical group has {largest} of "
        f"{outcome.runs_launched} runs; a strict majority needs "
        f"{outcome.runs_launched // 2 + 1}"
    )
