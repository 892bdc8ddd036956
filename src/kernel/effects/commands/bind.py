"""`kernel bind` and `kernel bind verify`: ADR-0232 run-attempt binding at the shell.

``kernel bind --run RUN.json --operator-result RESULT.json [--explanation TEXT]
[--schema-version NAME=VERSION ...] [--policy-version NAME=VERSION ...]
[--output OUT.json]`` binds the operator result to the run and writes the outcome
(binding or refusal) as canonical JSON, to stdout or atomically to ``OUT.json``
(confined to ``--results-root``, ``results/`` by default).

``kernel bind verify --binding B.json --run RUN.json --operator-result RESULT.json``
recomputes the binding (input digest, attempt ref, binding id, every field) and
prints the `CandidateAttemptRunBindingInput` it bound as canonical JSON.

Exit codes: 0 bound / verified; 1 refused (the refusal record is printed or
written); 2 unreadable or malformed input (one line naming the file and field path),
or an output outside the output root.

Inputs are parsed strictly and their self-sealed ids must reproduce; pass
``--no-verify-ids`` to bind documents edited without re-sealing (the binding itself
never re-verifies upstream ids, as ADR-0232 leaves that to the verifier).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TypeVar, cast

from kernel.effects import console
from kernel.effects.commands.options import add_results_root
from kernel.effects.exit_status import ExitStatus
from kernel.effects.files import OutputRoot, load_json, write_canonical_json
from kernel.errors import ConfigError, RecordError
from kernel.records.codec import Record
from kernel.records.identity import canonical_json
from kernel.search.binding import (
    CandidateAttemptRunBinding,
    CandidateAttemptRunBindingRefusal,
    bind_candidate_attempt_to_run,
    verify_binding,
)
from kernel.search.records import CandidateOperatorResult, GeometricSearchRun

__all__ = ["register", "run"]

_R = TypeVar("_R", bound=Record)


def _load(kind: type[_R], path: str, what: str, *, verify_ids: bool) -> _R:
    """Parse one record document; a malformed one is a one-line error naming its path."""
    document = load_json(path, what=what)
    try:
        return kind.from_dict(document, verify_ids=verify_ids)
    except RecordError as e:
        raise ConfigError(f"{path}: {what}: {e}") from e


def _pairs(values: list[str] | None, flag: str) -> tuple[tuple[str, str], ...]:
    """``NAME=VERSION`` arguments, in the order given (the binding checks order)."""
    pairs: list[tuple[str, str]] = []
    for value in values or ():
        name, sep, version = value.partition("=")
        if not sep:
            raise ConfigError(f"{flag} {value!r}: expected NAME=VERSION")
        pairs.append((name, version))
    return tuple(pairs)


def _emit(record: Record, output: Path | None) -> None:
    if output is None:
        sys.stdout.buffer.write(canonical_json(record.to_dict()) + b"\n")
        sys.stdout.flush()
    else:
        write_canonical_json(output, record.to_dict())


def run(args: argparse.Namespace) -> int:
    """Dispatch ``kernel bind`` or ``kernel bind verify``."""
    if args.mode == "verify":
        return _run_verify(args)
    if args.binding is not None:
        raise ConfigError("--binding is only for `kernel bind verify`")
    verify_ids = not args.no_verify_ids
    inputs = [args.run, args.operator_result]
    output = None
    if args.output is not None:
        output = OutputRoot(args.results_root).resolve(args.output, inputs=inputs)
    original_run = _load(GeometricSearchRun, args.run, "run", verify_ids=verify_ids)
    result = _load(
        CandidateOperatorResult, args.operator_result, "operator result", verify_ids=verify_ids
    )
    outcome = bind_candidate_attempt_to_run(
        original_run=original_run,
        candidate_operator_result=result,
        schema_versions=_pairs(args.schema_version, "--schema-version"),
        policy_versions=_pairs(args.policy_version, "--policy-version"),
        explanation=args.explanation,
    )
    _emit(outcome, output)
    if output is not None:
        print(_summary(outcome), file=sys.stderr)
        console.info(f"wrote {output}")
    return (
        ExitStatus.REFUSED if type(outcome) is CandidateAttemptRunBindingRefusal else ExitStatus.OK
    )


def _run_verify(args: argparse.Namespace) -> int:
    if args.binding is None:
        raise ConfigError("`kernel bind verify` needs --binding")
    if args.output is not None or args.explanation:
        raise ConfigError("`kernel bind verify` takes no --output or --explanation")
    verify_ids = not args.no_verify_ids
    binding = _load(CandidateAttemptRunBinding, args.binding, "binding", verify_ids=False)
    original_run = _load(GeometricSearchRun, args.run, "run", verify_ids=verify_ids)
    result = _load(
        CandidateOperatorResult, args.operator_result, "operator result", verify_ids=verify_ids
    )
    outcome = verify_binding(
        binding,
        original_run,
        result,
        schema_versions=_pairs(args.schema_version, "--schema-version"),
        policy_versions=_pairs(args.policy_version, "--policy-version"),
    )
    _emit(outcome, None)
    return (
        ExitStatus.REFUSED if type(outcome) is CandidateAttemptRunBindingRefusal else ExitStatus.OK
    )


def _summary(outcome: Record) -> str:
    if type(outcome) is CandidateAttemptRunBinding:
        return f"bound: binding {outcome.binding_id}"
    refusal = cast(CandidateAttemptRunBindingRefusal, outcome)  # the binding's other outcome
    codes = ", ".join(refusal.reason_codes)
    return f"refused ({codes}): refusal {refusal.binding_refusal_id}"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``bind`` verb (``kernel bind ...`` and ``kernel bind verify ...``)."""
    parser = subparsers.add_parser(
        "bind",
        help="bind a candidate operator result to its search run (ADR-0232)",
        description="Bind (or, with `verify`, re-check a binding of) a candidate "
        "operator result to an immutable search run.",
    )
    parser.add_argument(
        "mode", nargs="?", choices=["verify"], help="verify an existing binding instead"
    )
    parser.add_argument("--run", required=True, help="GeometricSearchRun (JSON)")
    parser.add_argument("--operator-result", required=True, help="CandidateOperatorResult (JSON)")
    parser.add_argument("--binding", help="the binding to verify (verify only)")
    parser.add_argument("--explanation", default="", help="prose for the binding")
    parser.add_argument(
        "--schema-version", action="append", metavar="NAME=VERSION", help="repeatable"
    )
    parser.add_argument(
        "--policy-version", action="append", metavar="NAME=VERSION", help="repeatable"
    )
    parser.add_argument("--output", help="write the outcome here (atomic) instead of stdout")
    add_results_root(parser)
    parser.add_argument(
        "--no-verify-ids",
        action="store_true",
        help="accept input documents whose self-sealed ids do not reproduce",
    )
    parser.set_defaults(handler=run)
