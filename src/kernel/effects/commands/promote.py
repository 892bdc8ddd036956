"""`kernel stage|unstage|promote`: the commit gate on a real git repository (ADR-0006).

    kernel stage   --run-dir DIR --attempt ID --repo GIT [--base REV] [--ledger L]
    kernel unstage --run-dir DIR --attempt ID --repo GIT [--ledger L]
    kernel promote --run-dir DIR --attempt ID --decision FILE --allowed-signers FILE
                   --repo GIT --onto BRANCH [--ledger L]

The run folder is what `kernel run` wrote (``run.json``, ``evidence.json``,
``admission.json``, ``corroboration.json``, ``patches/``). Everything is re-derived
and put to the pure gate (`kernel.gate`); the stored admission is only compared.

- ``stage`` commits the candidate patch onto the baseline commit (``--base``, default
  ``HEAD``; its tree must be the run's baseline tree) as a commit reachable only from
  ``refs/kernel/staged/<run>/<attempt>``: ``verified`` and ``corroborated_only``
  candidates can be staged, a refused group cannot.
- ``unstage`` deletes that ref (compare-and-swap).
- ``promote`` asks the gate with the signed decision (``<decision>.sig``), the branch
  tip and the ledger's verification; on a permit it records the permit in the ledger,
  makes a commit on the tip with trailers naming the evidence, and moves the branch
  with a compare-and-swap ``update-ref`` (never forced, never a remote).

Every outcome is appended to the ledger (``--ledger``, default
``results/ledger.sqlite``, or a ``postgresql://`` URL); a refusal too, and nothing else
on a refusal. Exit codes: 0 done; 1 refused (the reason codes on one line); 2 unusable
input (missing or invalid run folder, decision, key file or repository; a dirty work
tree on the branch to promote; a missing branch): one line, nothing changed or appended.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

import attrs

from kernel.codec import Record, seal
from kernel.consensus import CorroborationReport
from kernel.decision import HumanDecisionRecord
from kernel.effects.documents import load_report, load_run_record
from kernel.effects.files import load_json, read_input
from kernel.effects.git import CommitIdentity, GitRefusal, Repo
from kernel.effects.ledger_store import DEFAULT_LEDGER, LedgerStore, opened, verify_store
from kernel.effects.signing import check_decision_signature, signature_path
from kernel.errors import ConfigError, EffectError, RecordError
from kernel.evidence_report import RunEvidenceReport
from kernel.gate import (
    GateReason,
    GateRefusal,
    PromotionPermit,
    decide_promotion,
    decide_staging,
)
from kernel.identity import sha256_bytes
from kernel.ledger import EntryKind
from kernel.run_admission import RunAdmission
from kernel.runrecord import RunRecord

__all__ = [
    "RunFolder",
    "load_run_folder",
    "register",
    "run_promote",
    "run_stage",
    "run_unstage",
    "with_run_limits",
]

STAGED_PREFIX: Final = "refs/kernel/staged/"
_STAGER: Final = CommitIdentity(name="kernel", email="kernel@localhost", date="@0 +0000")


@attrs.frozen(kw_only=True)
class RunFolder:
    """The documents of one `kernel run` output folder."""

    path: Path
    run: RunRecord
    report: RunEvidenceReport
    admission: RunAdmission
    corroborations: dict[str, CorroborationReport]

    def patch(self, digest: str) -> bytes:
        """The candidate patch with this digest, checked against it.

        Raises:
            EffectError: missing, unreadable or not matching its digest.
        """
        path = self.path / "patches" / f"{digest}.patch"
        data = read_input(path, what="candidate patch")
        if sha256_bytes(data) != digest:
            raise EffectError(f"{path}: the patch does not hash to its name (edited?)")
        return data


def _parse(cls: type[Record], path: Path, what: str) -> Record:
    try:
        return cls.from_dict(load_json(path, what=what))
    except RecordError as e:
        raise ConfigError(f"{path}: {e}") from e


def load_run_folder(folder: Path | str) -> RunFolder:
    """Read and strictly parse a run folder (ids verified on the way in).

    Raises:
        EffectError, ConfigError: a file is missing, unreadable or invalid.
    """
    path = Path(folder)
    if not path.is_dir():
        raise EffectError(f"{path}: run folder not found")
    admission = _parse(RunAdmission, path / "admission.json", "admission")
    sets = load_json(path / "corroboration.json", what="corroboration set")
    if type(sets) is not dict or type(sets.get("reports")) is not dict:
        raise ConfigError(f"{path / 'corroboration.json'}: not a corroboration set")
    corroborations: dict[str, CorroborationReport] = {}
    for key, value in sets["reports"].items():
        try:
            corroborations[key] = CorroborationReport.from_dict(with_run_limits(value))
        except RecordError as e:
            raise ConfigError(f"{path / 'corroboration.json'}: reports.{key}: {e}") from e
    return RunFolder(
        path=path,
        run=load_run_record(path / "run.json"),
        report=load_report(path / "evidence.json"),
        admission=admission,  # type: ignore[arg-type]
        corroborations=corroborations,
    )


def with_run_limits(report: object) -> object:
    """A corroboration report written before each run recorded its ``limits`` reads
    them as ``null`` (not recorded); they never entered its ids."""
    if not isinstance(report, dict) or not isinstance(report.get("runs"), list):
        return report
    runs = [{"limits": None, **r} if isinstance(r, dict) else r for r in report["runs"]]
    return {**report, "runs": runs}


def _staged_ref(repo: Repo, run: RunRecord, attempt: str) -> str:
    ref = f"{STAGED_PREFIX}{run.run_id}/{attempt}"
    repo.check_ref_name(ref)
    return ref


def _refused(store: LedgerStore, verb: str, refusal: GateRefusal, extra: dict[str, object]) -> int:
    payload = {"action": verb, "refusal": refusal.to_dict(), **extra}
    try:
        entry = store.append(EntryKind.REFUSAL, payload)
        recorded = f"; ledger entry {entry.entry_id}"
    except EffectError:
        # A broken ledger may refuse the append itself; the refusal still stands.
        recorded = "; not recorded (the ledger refused the append)"
    print(f"kernel {verb}: refused ({', '.join(refusal.reason_codes)}){recorded}")
    return 1


def run_stage(args: argparse.Namespace) -> int:
    """Stage a candidate under refs/kernel/staged/<run>/<attempt>."""
    folder = load_run_folder(args.run_dir)
    repo = Repo(args.repo)
    base = repo.resolve(args.base)
    if base is None:
        raise EffectError(f"{args.repo}: {args.base!r} names no commit")
    ref = _staged_ref(repo, folder.run, args.attempt)
    with opened(args.ledger) as store:
        outcome = decide_staging(
            run=folder.run,
            report=folder.report,
            admission=folder.admission,
            corroborations=folder.corroborations,
            attempt_id=args.attempt,
            base_tree=repo.tree_of(base),
            ledger=verify_store(store),
        )
        if isinstance(outcome, GateRefusal):
            return _refused(store, "stage", outcome, {"repo_base": base, "ref": ref})
        patch = folder.patch(outcome.candidate_digest)
        store.append(EntryKind.ADMISSION, {"action": "stage", **folder.admission.to_dict()})
        message = (
            f"kernel: stage {args.attempt} of run {folder.run.run_id} "
            f"({outcome.evidence_class})\n\n"
            f"Staged only: reversible, not promoted.\n\n"
            f"Kernel-Run: {folder.run.run_id}\nKernel-Attempt: {args.attempt}\n"
            f"Kernel-Candidate: sha256:{outcome.candidate_digest}\n"
            f"Kernel-Evidence-Class: {outcome.evidence_class}\n"
            f"Kernel-Report-Digest: {outcome.report_digest}\n"
            f"Kernel-Admission-Id: {outcome.admission_id}\n"
        )
        commit = repo.commit_patch(base, patch, message, _STAGER)
        existing = repo.resolve(ref)
        if existing != commit:
            try:
                repo.update_ref(ref, commit, existing, "kernel stage")
            except GitRefusal as e:
                raise EffectError(str(e)) from e
        entry = store.append(
            EntryKind.STAGING,
            {"action": "stage", "permit": outcome.to_dict(), "ref": ref, "commit": commit},
        )
    print(f"staged {args.attempt} ({outcome.evidence_class}) as {commit} at {ref}")
    print(f"ledger entry {entry.entry_id}")
    return 0


def run_unstage(args: argparse.Namespace) -> int:
    """Remove a staged candidate's ref."""
    folder = load_run_folder(args.run_dir)
    repo = Repo(args.repo)
    ref = _staged_ref(repo, folder.run, args.attempt)
    old = repo.resolve(ref)
    if old is None:
        raise EffectError(f"{ref}: not staged in {args.repo}")
    with opened(args.ledger) as store:
        try:
            repo.delete_ref(ref, old)
        except GitRefusal as e:
            raise EffectError(str(e)) from e
        entry = store.append(
            EntryKind.UNSTAGING,
            {"action": "unstage", "run_id": folder.run.run_id, "attempt_id": args.attempt,
             "ref": ref, "commit": old},
        )  # fmt: skip
    print(f"unstaged {ref} (was {old}); ledger entry {entry.entry_id}")
    return 0


def _load_decision(path: Path) -> tuple[HumanDecisionRecord, bytes | None]:
    record = _parse(HumanDecisionRecord, path, "decision record")
    signature = read_input(signature_path(path), what="signature", missing_ok=True)
    return record, signature  # type: ignore[return-value]


def _author(record: HumanDecisionRecord) -> CommitIdentity:
    who = record.decider.id
    if any(c in who for c in "<>\n\r\0"):
        raise ConfigError(f"decider id {who!r} cannot name a git author")
    return CommitIdentity(name=who, email=who, date=record.decided_at)


def _message(permit: PromotionPermit, entry_id: str) -> str:
    return (
        f"kernel: promote {permit.attempt_id} of run {permit.run_id}\n\n"
        f"Verified by the held-out verifier; accepted by {permit.decider_id} "
        f"(signed decision).\n\n"
        f"Kernel-Run: {permit.run_id}\nKernel-Attempt: {permit.attempt_id}\n"
        f"Kernel-Candidate: sha256:{permit.candidate_digest}\n"
        f"Kernel-Report-Digest: {permit.report_digest}\n"
        f"Kernel-Admission-Id: {permit.admission_id}\n"
        f"Kernel-Decision-Id: {permit.decision_record_id}\n"
        f"Kernel-Permit-Id: {permit.permit_id}\n"
        f"Kernel-Ledger-Entry: {entry_id}\n"
    )


def run_promote(args: argparse.Namespace) -> int:
    """Promote a verified, signed, accepted candidate onto a branch (fast-forward)."""
    folder = load_run_folder(args.run_dir)
    record, signature = _load_decision(Path(args.decision))
    allowed = Path(args.allowed_signers)
    repo = Repo(args.repo)
    branch = args.onto if args.onto.startswith("refs/") else f"refs/heads/{args.onto}"
    repo.check_ref_name(branch)
    tip = repo.resolve(branch)
    if tip is None:
        raise EffectError(f"{args.repo}: branch {args.onto!r} not found")
    checked_out = repo.checked_out_branch() == branch
    if checked_out and repo.is_dirty():
        raise EffectError(f"{args.repo}: {args.onto} is checked out with uncommitted changes")
    author = _author(record)
    check = check_decision_signature(record, signature, allowed)
    attempt = args.attempt or record.selected_attempt_id or ""
    with opened(args.ledger) as store:
        outcome = decide_promotion(
            run=folder.run,
            report=folder.report,
            admission=folder.admission,
            corroborations=folder.corroborations,
            attempt_id=attempt,
            decision=record,
            signature=check,
            branch_tree=repo.tree_of(tip),
            ledger=verify_store(store),
        )
        context = {"branch": branch, "tip": tip, "decision_record_id": record.record_id}
        if isinstance(outcome, GateRefusal):
            return _refused(store, "promote", outcome, context)
        patch = folder.patch(outcome.candidate_digest)
        store.append(EntryKind.ADMISSION, {"action": "promote", **folder.admission.to_dict()})
        permit_entry = store.append(
            EntryKind.DECISION,
            {"action": "promote", "permit": outcome.to_dict(), "decision": record.to_dict(),
             "signature": check.to_dict(), **context},
        )  # fmt: skip
        commit = repo.commit_patch(tip, patch, _message(outcome, permit_entry.entry_id), author)
        try:
            repo.update_ref(branch, commit, tip, f"kernel promote {outcome.permit_id}")
        except GitRefusal:
            moved = _moved(outcome, folder)
            return _refused(store, "promote", moved, {**context, "commit": commit})
        if checked_out:
            repo.fast_forward_work_tree(tip, commit)
        entry = store.append(
            EntryKind.PROMOTION,
            {"action": "promote", "permit_id": outcome.permit_id, "commit": commit,
             "permit_entry": permit_entry.entry_id, **context},
        )  # fmt: skip
    print(f"promoted {outcome.attempt_id} onto {args.onto}: {tip[:12]} -> {commit}")
    print(f"ledger entries {permit_entry.entry_id} (permit), {entry.entry_id} (promotion)")
    return 0


def _moved(permit: PromotionPermit, folder: RunFolder) -> GateRefusal:
    """The refusal of a permitted promotion whose branch moved before the update."""
    return seal(
        GateRefusal,
        action="promote",
        run_id=folder.run.run_id,
        attempt_id=permit.attempt_id,
        report_digest=permit.report_digest,
        reason_codes=(GateReason.BRANCH_MOVED,),
        explanation="the branch moved between the gate's answer and the update",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``stage``, ``unstage`` and ``promote`` verbs."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--run-dir", required=True, help="a `kernel run` output folder")
    common.add_argument("--repo", required=True, help="the git repository")
    common.add_argument("--ledger", default=DEFAULT_LEDGER, help="SQLite file or postgresql:// URL")
    stage = subparsers.add_parser(
        "stage", parents=[common], help="commit a candidate under refs/kernel/staged/"
    )
    stage.add_argument("--attempt", required=True, help="the attempt id whose candidate to stage")
    stage.add_argument("--base", default="HEAD", help="the baseline commit (default HEAD)")
    stage.set_defaults(handler=run_stage)
    unstage = subparsers.add_parser("unstage", parents=[common], help="remove a staged ref")
    unstage.add_argument("--attempt", required=True, help="the attempt id to unstage")
    unstage.set_defaults(handler=run_unstage)
    promote = subparsers.add_parser(
        "promote",
        parents=[common],
        help="fast-forward a branch to a verified, signed, accepted candidate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    promote.add_argument("--decision", required=True, help="the decision record (JSON)")
    promote.add_argument("--allowed-signers", required=True, help="git allowed_signers file")
    promote.add_argument("--onto", required=True, help="the branch to fast-forward")
    promote.add_argument("--attempt", help="default: the decision's selected attempt")
    promote.set_defaults(handler=run_promote)
