"""`kernel decision record|verify`: human decision records bound to an evidence report.

Exit codes: 0 recorded / verified; 1 refused (reason codes printed on one line);
2 unusable input (missing, unreadable, non-JSON or schema-violating files), an output
outside the output root, or an output that would overwrite an input. Nothing is written
unless the decision is recorded.

The default clock (``--decided-at`` omitted) lives here, in effects: the pure
`kernel.decide.decision.record_decision` only ever receives a timestamp.
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Callable
from pathlib import Path
from typing import cast

from kernel.decide.decision import (
    DeciderType,
    Decision,
    DecisionReason,
    DecisionRefusal,
    HumanDecisionRecord,
    record_decision,
    upgrade_decision_document,
    verify_decision,
)
from kernel.decide.gate import DECISION_SIGNATURE_NAMESPACE, GateReason, SignatureStatus
from kernel.decide.ledger import EntryKind
from kernel.effects import console
from kernel.effects.commands.options import add_results_root
from kernel.effects.documents import load_report, load_run_record, plan_outputs
from kernel.effects.exit_status import ExitStatus
from kernel.effects.files import (
    atomic_write_bytes,
    load_json,
    read_input,
    write_canonical_json,
)
from kernel.effects.ledger_store import opened
from kernel.effects.run_folder_lock import holding_run_folder
from kernel.effects.signing import check_decision_signature, sign_decision, signature_path
from kernel.errors import ConfigError, RecordError
from kernel.importers.idkmesh import is_idkmesh_document
from kernel.importers.idkmesh_reports import (
    read_idkmesh_decision,
    read_idkmesh_report,
    verify_idkmesh_decision,
)
from kernel.run.report import ReportRefusal, check_evidence_report

__all__ = ["register", "run_record", "run_verify", "utc_now"]


def utc_now() -> str:
    """The current time as RFC 3339 UTC with second precision (the default clock)."""
    now = datetime.datetime.now(datetime.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


CLOCK: Callable[[], str] = utc_now
"""The clock `run_record` uses when ``--decided-at`` is omitted (tests may replace it)."""


def _refused(verb: str, refusal: DecisionRefusal | ReportRefusal) -> int:
    codes = ", ".join(refusal.reason_codes)
    print(f"kernel decision {verb}: refused ({codes})")
    return ExitStatus.REFUSED


def run_record(args: argparse.Namespace) -> int:
    """Record a decision on an evidence report; refuse per `record_decision`."""
    report = load_report(args.evidence_report)
    inputs = [args.evidence_report]
    run = None
    if args.run_record is not None:
        run = load_run_record(args.run_record)
        inputs.append(args.run_record)
    signing_key = getattr(args, "signing_key", None)
    if signing_key is not None:
        inputs.append(signing_key)
    planned = plan_outputs(
        args.results_root,
        [args.output, None if signing_key is None else signature_path(args.output)],
        inputs,
    )
    target, sig_target = planned
    target = cast(Path, target)  # --output is required, so it was planned
    if run is not None:
        checked = check_evidence_report(report, run=run)
        if isinstance(checked, ReportRefusal):
            return _refused("record", checked)
    outcome = record_decision(
        report,
        decision_id=args.decision_id,
        decision=args.decision,
        rationale=args.rationale,
        decider_id=args.decider_id,
        decider_type=args.decider_type,
        decided_at=args.decided_at if args.decided_at is not None else CLOCK(),
        selected_attempt_id=args.selected_attempt_id,
        decider_display_name=args.decider_display_name,
    )
    if isinstance(outcome, DecisionRefusal):
        return _refused("record", outcome)
    # Sign before writing anything: a key that cannot sign leaves no unsigned record.
    signature = None if signing_key is None else sign_decision(outcome, Path(signing_key))
    # Beside a run's report: never while that run writes or publishes its folder.
    with holding_run_folder(target):
        write_canonical_json(target, outcome.to_dict())
        if signature is not None and sig_target is not None:
            atomic_write_bytes(sig_target, signature)
    if signature is not None and sig_target is not None:
        print(f"signed ({DECISION_SIGNATURE_NAMESPACE}) -> {sig_target}")
    if getattr(args, "ledger", None) is not None:
        with opened(args.ledger) as store:
            entry = store.append(
                EntryKind.DECISION,
                {"action": "record", "decision": outcome.to_dict(), "signed": bool(signature)},
            )
        print(f"ledger entry {entry.entry_id}")
    print(f"recorded {outcome.decision} on report {outcome.evidence_report.digest}")
    console.info(f"wrote {target}")
    return ExitStatus.OK


def run_verify(args: argparse.Namespace) -> int:
    """Verify a decision record against the evidence report presented (kernel or
    IDKMesh v0.1 documents; an IDKMesh decision is checked against an IDKMesh report)."""
    document = load_json(args.decision_record, what="decision record")
    if is_idkmesh_document(document):
        return _verify_idkmesh(args, document)
    try:
        record = HumanDecisionRecord.from_dict(upgrade_decision_document(document))
    except RecordError as e:
        raise ConfigError(f"{args.decision_record}: {e}") from e
    report = load_report(args.evidence_report)
    outcome = verify_decision(record, report)
    if isinstance(outcome, DecisionRefusal):
        if DecisionReason.REPORT_DIGEST in outcome.reason_codes:
            _stale(args, record.evidence_report.digest, report.digest)
        return _refused("verify", outcome)
    if args.run_record is not None:
        checked = check_evidence_report(report, run=load_run_record(args.run_record))
        if isinstance(checked, ReportRefusal):
            return _refused("verify", checked)
    signed = ""
    allowed = getattr(args, "allowed_signers", None)
    if allowed is not None:
        sig_file = Path(args.signature or signature_path(args.decision_record))
        signature = read_input(sig_file, what="signature", missing_ok=True)
        check = check_decision_signature(record, signature, Path(allowed))
        if check.status is not SignatureStatus.VALID:
            code = {
                SignatureStatus.UNSIGNED: GateReason.DECISION_UNSIGNED,
                SignatureStatus.INVALID: GateReason.SIGNATURE_INVALID,
                SignatureStatus.SIGNER_NOT_ALLOWED: GateReason.SIGNER_NOT_ALLOWED,
            }[check.status]
            print(f"kernel decision verify: refused ({code})")
            return ExitStatus.REFUSED
        signed = f", signed by {check.principal}"
    print(f"verified: {record.decision_id} decides on report {outcome.report_digest}{signed}")
    return ExitStatus.OK


def _stale(args: argparse.Namespace, decided_on: str, presented: str) -> None:
    print(
        f"kernel decision verify: stale: {args.decision_record} decides on report "
        f"{decided_on}; {args.evidence_report} is report {presented} (regenerated or "
        "edited after the decision)"
    )


def _verify_idkmesh(args: argparse.Namespace, document: object) -> int:
    """An IDKMesh v0.1 decision against an IDKMesh v0.1 report (and its run record)."""
    try:
        decision = read_idkmesh_decision(document)
    except RecordError as e:
        raise ConfigError(f"{args.decision_record}: {e}") from e
    report_document = load_json(args.evidence_report, what="evidence report")
    try:
        report = read_idkmesh_report(report_document)
    except RecordError as e:
        raise ConfigError(f"{args.evidence_report}: {e}") from e
    run = None if args.run_record is None else load_run_record(args.run_record)
    reasons = verify_idkmesh_decision(decision, report, run)
    if reasons:
        if DecisionReason.REPORT_DIGEST in reasons:
            _stale(args, decision.report.digest, report.digest)
        print(f"kernel decision verify: refused ({', '.join(reasons)})")
        return ExitStatus.REFUSED
    print(
        f"verified: IDKMesh decision {decision.decision_id} ({decision.decision}) decides on "
        f"report {report.digest}"
    )
    return ExitStatus.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``decision`` verb and its sub-commands."""
    parser = subparsers.add_parser("decision", help="human decision records")
    sub = parser.add_subparsers(dest="decision_command", required=True)
    record = sub.add_parser(
        "record",
        help="record a human decision on an evidence report",
        description="Exit codes: 0 recorded; 1 refused (reason codes on one line); "
        "2 unusable input or an output outside the results root (nothing written).",
    )
    record.add_argument("--evidence-report", required=True, help="evidence report (JSON)")
    record.add_argument("--output", required=True, help="where to write the decision record (JSON)")
    record.add_argument("--decision-id", required=True, help="your id for this decision")
    # Free strings, choices listed: the report's own vocabulary (accept_candidate...) is
    # refused with its own reason code, which argparse choices would hide.
    choices = ", ".join(d.value for d in Decision)
    record.add_argument(
        "--decision",
        required=True,
        metavar="{" + choices.replace(", ", ",") + "}",
        help=f"the human decision: one of {choices}",
    )
    record.add_argument("--rationale", required=True, help="why (kept in the record)")
    record.add_argument("--decider-id", required=True, help="who decides (e-mail, handle)")
    record.add_argument(
        "--decider-display-name", help="how the decider is shown to people (optional)"
    )
    types = ",".join(t.value for t in DeciderType)
    record.add_argument(
        "--decider-type",
        default=DeciderType.HUMAN.value,
        metavar="{" + types + "}",
        help="who decided (default: human); another value is refused with a reason code",
    )
    record.add_argument(
        "--selected-attempt-id", help="the attempt decided on (required for accept)"
    )
    record.add_argument("--decided-at", help="RFC 3339 UTC timestamp (default: now)")
    record.add_argument(
        "--run-record", help="also require the report to be exactly this run's report"
    )
    add_results_root(record)
    record.add_argument(
        "--signing-key",
        help="SSH private key: sign the record with ssh-keygen -Y (writes <output>.sig)",
    )
    record.add_argument(
        "--ledger",
        help="also append the decision to this ledger (SQLite file or postgresql:// URL)",
    )
    record.set_defaults(handler=run_record)
    verify = sub.add_parser(
        "verify",
        help="verify a decision record against a report (kernel or IDKMesh v0.1)",
        description="Exit codes: 0 verified; 1 refused (reason codes on one line; a "
        "decision on an earlier report is reported stale); 2 unusable input.",
    )
    verify.add_argument(
        "--decision-record", required=True, help="decision record (JSON; kernel or IDKMesh)"
    )
    verify.add_argument(
        "--evidence-report", required=True, help="the report it should decide on (JSON)"
    )
    verify.add_argument(
        "--run-record", help="also require the report to be exactly this run's report"
    )
    verify.add_argument(
        "--allowed-signers",
        help="git allowed_signers file: also require a valid signature by the decider",
    )
    verify.add_argument("--signature", help="the signature (default: <decision-record>.sig)")
    verify.set_defaults(handler=run_verify)
