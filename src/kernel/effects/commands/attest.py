"""`kernel attest`: an in-toto Statement v1 for one attempt's candidate (ADR-0006 §6).

    kernel attest --run-dir results/demo --attempt attempt-1 [--decision FILE]
                  [--output results/demo/attestations/attempt-1.intoto.json]

The statement is made by `kernel.effects.attestation.statement`. The subject is the
candidate patch (its sha256, named ``patches/<digest>.patch``); the predicate
(``predicateType`` ``https://evidence-kernel.dev/attestation/candidate/v1``) carries
what supply-chain tooling needs to weigh it: the run and report digests, the
re-derived admission id and evidence class, the independent verifier's checks, and the
decision record's id when a decision on exactly this report is given. The statement is
written as canonical JSON, unsigned (sign it with the tool your pipeline uses, e.g. an
in-toto/DSSE signer).

Nothing stored is trusted: the report must be exactly the run's report and the stored
admission must re-derive, else the attestation is refused.

Exit codes: 0 written; 1 refused (reason codes on one line); 2 unusable input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kernel.decide.decision import HumanDecisionRecord
from kernel.effects.attestation import statement
from kernel.effects.commands.options import add_results_root
from kernel.effects.documents import plan_outputs
from kernel.effects.exit_status import ExitStatus
from kernel.effects.files import load_json, write_canonical_json
from kernel.effects.run_folder import load_run_folder
from kernel.errors import ConfigError, RecordError

__all__ = ["register", "run_attest"]


def run_attest(args: argparse.Namespace) -> int:
    """Write the statement; 1 when the evidence does not hold together."""
    folder = load_run_folder(args.run_dir)
    decision = None
    inputs: list[Path | str] = [Path(args.run_dir) / "run.json"]
    if args.decision is not None:
        inputs.append(args.decision)
        try:
            decision = HumanDecisionRecord.from_dict(load_json(args.decision, what="decision"))
        except RecordError as e:
            raise ConfigError(f"{args.decision}: {e}") from e
    output = args.output or (Path(args.run_dir) / "attestations" / f"{args.attempt}.intoto.json")
    (target,) = plan_outputs(args.results_root, [output], inputs)
    if target is None:  # pragma: no cover - plan_outputs maps a path to a path
        raise ConfigError("no output")
    outcome = statement(folder, args.attempt, decision)
    if isinstance(outcome, list):
        print(f"kernel attest: refused ({', '.join(outcome)})")
        return ExitStatus.REFUSED
    write_canonical_json(target, outcome)
    print(f"wrote {target} (subject sha256:{outcome['subject'][0]['digest']['sha256']})")
    return ExitStatus.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``attest`` verb."""
    parser = subparsers.add_parser(
        "attest",
        help="write an in-toto Statement v1 for an attempt's candidate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--run-dir", required=True, help="a `kernel run` output folder")
    parser.add_argument("--attempt", required=True, help="the attempt whose candidate to attest")
    parser.add_argument("--decision", help="a decision record on the run's report")
    parser.add_argument("--output", help="default: <run-dir>/attestations/<attempt>.intoto.json")
    add_results_root(parser)
    parser.set_defaults(handler=run_attest)
