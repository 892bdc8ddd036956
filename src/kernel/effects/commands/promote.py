"""`kernel stage|unstage|promote`: the commit gate on a real git repository (ADR-0006).

    kernel stage   --run-dir DIR --attempt ID --repo GIT [--base REV] [--ledger L]
    kernel stage   --recover --repo GIT [--ledger L]
    kernel unstage --run-dir DIR --attempt ID --repo GIT [--ledger L]
    kernel promote --run-dir DIR --attempt ID --decision FILE --allowed-signers FILE
                   --repo GIT --onto BRANCH [--ledger L] [--ledger-key KEY]
    kernel promote --recover --repo GIT [--ledger L]

The run folder is what `kernel run` wrote. Everything is re-derived and put to the
pure gate (`kernel.decide.gate`); the work is done by `kernel.effects.promotion`, whose
docstring says how a promotion is made all or nothing and how ``--recover`` finishes
(or closes) one a crash left half done.

- ``stage`` commits the candidate patch onto the baseline commit (``--base``, default
  ``HEAD``) as a commit reachable only from ``refs/kernel/staged/<run>/<attempt>``,
  all or nothing (`kernel.effects.staging`: an intent entry before the ref moves);
  ``--recover`` finishes (or closes) every stage and unstage a crash left half done,
  as the next stage or unstage of that attempt does for its own ref.
- ``unstage`` deletes that ref (compare-and-swap), all or nothing too (an intent
  entry before the ref is deleted).
- ``promote`` asks the gate with the signed decision (``<decision>.sig``), the branch
  tip and the ledger's verification; on a permit it records the permit, makes a
  commit on the tip whose trailers name the evidence and the ledger's tree head
  (signed with ``--ledger-key``), and moves the branch by compare-and-swap (never
  forced, never a remote), the checked-out work tree with it.

A repository whose own configuration can run commands (filter drivers, ``include``,
``core.worktree``, ...) is refused unless ``--trust-repo-config`` is given.

Every outcome is appended to the ledger (``--ledger``, default
``results/ledger.sqlite``, or a ``postgresql://`` URL), a refusal too. Exit codes: 0
done; 1 refused (the reason codes on one line; ``--recover``: a promotion or stage it
could not finish); 2 unusable input (missing or invalid run folder, key file or repository,
a repository configuration that runs commands, a missing branch): one line, and a
``refusal`` entry naming it (``untrusted_repo_config`` or ``unusable_input``) and
the inputs given, when the ledger itself can be opened.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from pathlib import Path

from kernel.decide.decision import HumanDecisionRecord
from kernel.decide.gate import SignatureCheck, SignatureStatus
from kernel.effects.exit_status import ExitStatus
from kernel.effects.files import read_input
from kernel.effects.git import Repo
from kernel.effects.ledger_store import DEFAULT_LEDGER, opened
from kernel.effects.promotion import Refused, promote, record_unusable, recover
from kernel.effects.run_folder import load_run_folder, parse_document
from kernel.effects.signing import check_decision_signature, signature_path
from kernel.effects.staging import PendingStage, recover_stages, stage, unstage
from kernel.errors import ConfigError, KernelError
from kernel.records.identity import sha256_bytes
from kernel.run.record import TrustLevel

__all__ = ["register", "run_promote", "run_stage", "run_unstage"]


def _refused(verb: str, refused: Refused) -> int:
    recorded = (
        "; not recorded (the ledger refused the append)"
        if refused.entry_id is None
        else f"; ledger entry {refused.entry_id}"
    )
    codes = ", ".join(refused.refusal.reason_codes)
    print(f"kernel {verb}: refused ({codes}){recorded}")
    return ExitStatus.REFUSED


def _recorded(
    action: str, handler: Callable[[argparse.Namespace], int]
) -> Callable[[argparse.Namespace], int]:
    """``handler``, whose unusable input (exit 2) is recorded in the ledger too, like
    the gate's refusals (when the ledger itself can be opened)."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (KernelError, OSError) as e:
            inputs = {
                name: getattr(args, name, None)
                for name in ("repo", "run_dir", "attempt", "onto", "decision", "base")
            }
            verb = f"{action} --recover" if getattr(args, "recover", False) else action
            # A ledger that cannot be opened (the error may be about it) records nothing.
            with contextlib.suppress(KernelError, OSError), opened(args.ledger) as store:
                record_unusable(store, verb, e, inputs)
            raise

    return run


def run_stage(args: argparse.Namespace) -> int:
    """Stage a candidate under refs/kernel/staged/<run>/<attempt>."""
    repo = Repo(args.repo, trust_config=args.trust_repo_config)
    if args.recover:
        return _run_recover_stages(repo, args.ledger)
    missing = [
        flag for flag, value in (("--run-dir", args.run_dir), ("--attempt", args.attempt))
        if value is None
    ]  # fmt: skip
    if missing:
        raise ConfigError(f"stage needs {', '.join(missing)} (or --recover)")
    folder = load_run_folder(args.run_dir)
    with opened(args.ledger) as store:
        outcome = stage(folder, repo, store, attempt_id=args.attempt, base=args.base)
    if isinstance(outcome, Refused):
        return _refused("stage", outcome)
    print(
        f"staged {args.attempt} ({outcome.permit.evidence_class}) as {outcome.commit} "
        f"at {outcome.ref}"
    )
    print(f"ledger entry {outcome.entry_id}")
    return ExitStatus.OK


def run_unstage(args: argparse.Namespace) -> int:
    """Remove a staged candidate's ref."""
    folder = load_run_folder(args.run_dir)
    repo = Repo(args.repo, trust_config=args.trust_repo_config)
    with opened(args.ledger) as store:
        done = unstage(folder, repo, store, attempt_id=args.attempt)
    print(f"unstaged {done.ref} (was {done.commit}); ledger entry {done.entry_id}")
    return ExitStatus.OK


def _load_decision(path: Path, allowed: Path) -> tuple[HumanDecisionRecord | None, SignatureCheck]:
    """The decision and its signature's check; a record that does not parse (a forged
    or edited one) is None, so the gate refuses it and the refusal is recorded."""
    data = read_input(path, what="decision record")
    signature = read_input(signature_path(path), what="signature", missing_ok=True)
    try:
        record = parse_document(HumanDecisionRecord, path, "decision record")
    except ConfigError:
        unsigned = SignatureCheck(
            status=SignatureStatus.UNSIGNED, principal="", message_digest=sha256_bytes(data)
        )
        return None, unsigned
    if not isinstance(record, HumanDecisionRecord):  # pragma: no cover - parse_document's class
        raise ConfigError(f"{path}: not a decision record")
    return record, check_decision_signature(record, signature, allowed)


def run_promote(args: argparse.Namespace) -> int:
    """Promote a verified, signed, accepted candidate onto a branch (fast-forward)."""
    repo = Repo(args.repo, trust_config=args.trust_repo_config)
    if args.recover:
        return _run_recover(repo, args.ledger)
    missing = [
        flag
        for flag, value in (
            ("--run-dir", args.run_dir), ("--decision", args.decision),
            ("--allowed-signers", args.allowed_signers), ("--onto", args.onto),
        )
        if value is None
    ]  # fmt: skip
    if missing:
        raise ConfigError(f"promote needs {', '.join(missing)} (or --recover)")
    folder = load_run_folder(args.run_dir)
    record, check = _load_decision(Path(args.decision), Path(args.allowed_signers))
    branch = args.onto if args.onto.startswith("refs/") else f"refs/heads/{args.onto}"
    repo.check_ref_name(branch)
    attempt = args.attempt or (record.selected_attempt_id if record is not None else None) or ""
    key = None if args.ledger_key is None else Path(args.ledger_key)
    with opened(args.ledger) as store:
        outcome = promote(
            folder, repo, store, branch=branch, attempt_id=attempt, decision=record,
            signature=check, ledger_key=key,
            require_trust=None if args.require_trust is None else TrustLevel(args.require_trust),
        )  # fmt: skip
    if isinstance(outcome, Refused):
        return _refused("promote", outcome)
    print(
        f"promoted {outcome.permit.attempt_id} onto {args.onto}: "
        f"{outcome.tip[:12]} -> {outcome.commit}"
    )
    print(
        f"ledger entries {outcome.permit_entry} (permit), {outcome.done_entry} (promotion); "
        f"tree head {outcome.tree_head.tree_size} {outcome.tree_head.root_hash}"
    )
    return ExitStatus.OK


def _run_recover(repo: Repo, ledger: str) -> int:
    with opened(ledger) as store:
        done = recover(repo, store)
    if not done:
        print("kernel promote --recover: no promotion left half done")
        return ExitStatus.OK
    for item in done:
        what = f"{item.pending.branch} -> {item.pending.commit[:12]}"
        detail = f" ({item.detail})" if item.detail else ""
        print(f"{item.outcome}: promotion {item.pending.permit_id[:12]} {what}{detail}")
    return ExitStatus.REFUSED if any(item.outcome == "blocked" for item in done) else ExitStatus.OK


def _run_recover_stages(repo: Repo, ledger: str) -> int:
    with opened(ledger) as store:
        done = recover_stages(repo, store)
    if not done:
        print("kernel stage --recover: no stage or unstage left half done")
        return ExitStatus.OK
    for item in done:
        detail = f" ({item.detail})" if item.detail else ""
        what = "stage" if isinstance(item.pending, PendingStage) else "unstage"
        print(f"{item.outcome}: {what} of {item.pending.ref} -> {item.pending.commit[:12]}{detail}")
    return ExitStatus.REFUSED if any(item.outcome == "blocked" for item in done) else ExitStatus.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``stage``, ``unstage`` and ``promote`` verbs."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--repo", required=True, help="the git repository")
    common.add_argument("--ledger", default=DEFAULT_LEDGER, help="SQLite file or postgresql:// URL")
    common.add_argument(
        "--trust-repo-config",
        action="store_true",
        help="use a repository whose configuration can run commands (filters, include, ...)",
    )
    run_dir = argparse.ArgumentParser(add_help=False)
    run_dir.add_argument("--run-dir", required=True, help="a `kernel run` output folder")
    stage_parser = subparsers.add_parser(
        "stage", parents=[common], help="commit a candidate under refs/kernel/staged/"
    )
    stage_parser.add_argument("--run-dir", help="a `kernel run` output folder")
    stage_parser.add_argument("--attempt", help="the attempt id to stage")
    stage_parser.add_argument("--base", default="HEAD", help="the baseline commit (default HEAD)")
    stage_parser.add_argument(
        "--recover",
        action="store_true",
        help="finish or close stages and unstages a crash left half done",
    )
    stage_parser.set_defaults(handler=_recorded("stage", run_stage))
    unstage_parser = subparsers.add_parser(
        "unstage", parents=[common, run_dir], help="remove a staged ref"
    )
    unstage_parser.add_argument("--attempt", required=True, help="the attempt id to unstage")
    unstage_parser.set_defaults(handler=_recorded("unstage", run_unstage))
    parser = subparsers.add_parser(
        "promote",
        parents=[common],
        help="fast-forward a branch to a verified, signed, accepted candidate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--run-dir", help="a `kernel run` output folder")
    parser.add_argument("--decision", help="the decision record (JSON)")
    parser.add_argument("--allowed-signers", help="git allowed_signers file")
    parser.add_argument("--onto", help="the branch to fast-forward")
    parser.add_argument("--attempt", help="default: the decision's selected attempt")
    parser.add_argument("--ledger-key", help="an SSH key that signs the ledger tree head")
    parser.add_argument(
        "--require-trust",
        choices=[str(t) for t in TrustLevel],
        help="promote only when a check of this trust level passed (e.g. oracle)",
    )
    parser.add_argument(
        "--recover", action="store_true", help="finish or close promotions a crash left half done"
    )
    parser.set_defaults(handler=_recorded("promote", run_promote))
