"""Staging on a real git repository, as library calls (ADR-0006 §5): a candidate
committed under ``refs/kernel/staged/<run>/<attempt>``, reversible, never a branch.

A stage is all or nothing, as a promotion is (`kernel.effects.promotion`). Everything
is checked before anything moves (the gate's staging permit, a candidate that adds or
changes no ``.gitattributes``/``.gitmodules``, submodule or escaping symlink, a lock
on the ref that is not provably ours); then, in this order:

1. the admission is appended to the ledger;
2. the commit is made (objects only: the same inputs make the same commit);
3. a ``staging`` entry with ``phase: intent`` names the ref, the value it must hold
   (``old``: none, or an earlier staging of the attempt) and the commit; durable
   before the ref moves;
4. the ref moves by compare-and-swap;
5. a ``staging`` entry with ``phase: done`` closes the intent.

A process killed between two steps leaves nothing (before 3: an admission entry and
unreachable objects) or an intent without its close, which `recover` (``kernel stage
--recover``), the next stage of that attempt or its unstage provably owns: the ref
still at ``old`` (a killed ``update-ref`` may have left its lock holding part or all
of the commit: removed) is moved and the intent closed ``done``; the ref at the commit, the
intent closed ``done``; the ref anywhere else (moved or deleted by someone else), the
intent closed ``abandoned`` and the ref left alone. Ledger and ref agree after it, and
`kernel.effects.promotion.check_repository` (``kernel ledger verify --repo``) names an
intent left open. A stage's own compare-and-swap that fails is read the same way: the
ref still at ``old`` (another git holds its lock) is blocked, the intent left pending.
A staging entry without a phase (written before intents) is a finished stage.

An unstage is all or nothing the same way: an ``unstaging`` entry with ``phase:
intent`` naming the ref and the commit it holds (durable before the ref is deleted),
the compare-and-swap delete, an ``unstaging`` entry with ``phase: done``. Killed after
the intent, `recover_stages`, the next stage or unstage of that attempt deletes the ref
still at the commit (and the empty lock a killed delete leaves), closes ``done`` a ref
already gone, and ``abandoned`` a ref someone else moved; the unstage's own failed
delete is read the same way (the ref still at the commit: blocked, pending). An
unstaging entry without a phase is a finished unstage.
"""

from __future__ import annotations

from typing import Final, Literal

import attrs

from kernel.decide.gate import GateReason, GateRefusal, StagingPermit, decide_staging
from kernel.decide.ledger import EntryKind
from kernel.effects.git import CommitIdentity, Repo
from kernel.effects.ledger_store import LedgerStore, verify_store
from kernel.effects.promotion import (
    Recovered,
    Refused,
    crash_point,
    gate_refusal,
    open_intents,
    record_blocked,
    record_refusal,
    unsafe_changes,
)
from kernel.effects.run_folder import RunFolder
from kernel.errors import EffectError, GitRefusal
from kernel.run.record import RunRecord

__all__ = [
    "STAGED_PREFIX",
    "PendingStage",
    "PendingUnstage",
    "Staged",
    "Unstaged",
    "pending_stages",
    "pending_unstages",
    "recover_stages",
    "stage",
    "unstage",
]

STAGED_PREFIX: Final = "refs/kernel/staged/"
_STAGER: Final = CommitIdentity(name="kernel", email="kernel@localhost", date="@0 +0000")


@attrs.frozen(kw_only=True)
class Staged:
    """A candidate committed under ``refs/kernel/staged/<run>/<attempt>``."""

    permit: StagingPermit
    ref: str
    commit: str
    entry_id: str
    """The ``done`` entry that closes the stage's intent."""


@attrs.frozen(kw_only=True)
class Unstaged:
    """A staged ref removed."""

    ref: str
    commit: str
    entry_id: str
    """The ``done`` entry that closes the unstage's intent."""


@attrs.frozen(kw_only=True)
class PendingStage:
    """A staging intent without its close."""

    intent_entry: str
    ref: str
    old: str | None
    """The value the ref held when the intent was written (None: no ref)."""
    commit: str


@attrs.frozen(kw_only=True)
class PendingUnstage:
    """An unstaging intent without its close."""

    intent_entry: str
    ref: str
    commit: str
    """The value the ref held when the intent was written (what is deleted)."""


def pending_unstages(store: LedgerStore) -> list[PendingUnstage]:
    """Every unstaging intent the ledger holds without its close (oldest first)."""
    return [
        PendingUnstage(
            intent_entry=entry_id, ref=str(payload.get("ref")), commit=str(payload.get("commit"))
        )
        for entry_id, payload in open_intents(store, EntryKind.UNSTAGING)
    ]


def pending_stages(store: LedgerStore) -> list[PendingStage]:
    """Every staging intent the ledger holds without its close (oldest first)."""
    found: list[PendingStage] = []
    for entry_id, payload in open_intents(store, EntryKind.STAGING):
        old = payload.get("old")
        found.append(
            PendingStage(
                intent_entry=entry_id,
                ref=str(payload.get("ref")),
                old=old if isinstance(old, str) else None,
                commit=str(payload.get("commit")),
            )
        )
    return found


def recover_stages(
    repo: Repo, store: LedgerStore, *, ref: str | None = None
) -> list[Recovered[PendingStage | PendingUnstage]]:
    """Finish or close every pending stage and unstage of ``repo`` (of ``ref`` alone
    when given); one that cannot be finished stays pending and its refusal is recorded.
    (A ref has at most one: each stage and unstage settles its ref's first.)"""
    found: list[PendingStage | PendingUnstage] = [*pending_stages(store), *pending_unstages(store)]
    return [
        record_blocked(
            store,
            _try_recover(repo, store, item)
            if isinstance(item, PendingStage)
            else _try_recover_unstage(repo, store, item),
            "stage --recover",
            {"intent_entry": item.intent_entry, "ref": item.ref, "commit": item.commit},
        )
        for item in found
        if ref is None or item.ref == ref
    ]


def _try_recover(
    repo: Repo, store: LedgerStore, item: PendingStage
) -> Recovered[PendingStage | PendingUnstage]:
    at = repo.resolve(item.ref)
    if at == item.old and repo.resolve(item.commit) == item.commit:
        try:
            # A kill inside ``update-ref`` leaves the ref's lock holding part of the commit.
            repo.sweep_ref_lock(item.ref, item.commit)
            repo.update_ref(item.ref, item.commit, item.old, "kernel stage --recover")
            at = item.commit
        except GitRefusal as e:
            at = repo.resolve(item.ref)
            if at == item.old:
                # Not moved: the update failed for another reason (a lock taken since
                # the sweep); nothing is abandoned, the intent stays pending.
                return Recovered(pending=item, outcome="blocked", detail=str(e), entry_id=None)
        except EffectError as e:
            return Recovered(pending=item, outcome="blocked", detail=str(e), entry_id=None)
    if at == item.commit:
        entry = _close(store, item, "done", "")
        return Recovered(pending=item, outcome="finished", detail="", entry_id=entry)
    why = _moved_away(item, at)
    entry = _close(store, item, "abandoned", why)
    return Recovered(pending=item, outcome="abandoned", detail=why, entry_id=entry)


def _try_recover_unstage(
    repo: Repo, store: LedgerStore, item: PendingUnstage
) -> Recovered[PendingStage | PendingUnstage]:
    """An unstage killed after its intent: the ref still at the commit is deleted, a
    ref already gone is done, a ref anywhere else was moved by someone else (closed
    ``abandoned``, left alone). git's ``update-ref -d`` creates the ref's lock and
    then ``packed-refs.lock``, both empty, before it unlinks the ref and then them: a
    kill leaves either empty, which (under no running kernel update, the intent naming
    this delete) is ours to remove. A delete that still fails, the ref still at the
    commit, is blocked: the intent stays pending."""
    at = repo.resolve(item.ref)
    try:
        repo.sweep_ref_lock(item.ref, item.commit)
        repo.sweep_packed_refs_lock()
        if at == item.commit:
            repo.delete_ref(item.ref, item.commit)
            at = None
    except GitRefusal as e:
        at = repo.resolve(item.ref)
        if at == item.commit:
            return Recovered(pending=item, outcome="blocked", detail=str(e), entry_id=None)
    except EffectError as e:
        return Recovered(pending=item, outcome="blocked", detail=str(e), entry_id=None)
    if at is None:
        entry = _close(store, item, "done", "")
        return Recovered(pending=item, outcome="finished", detail="", entry_id=entry)
    why = _moved_away(item, at)
    entry = _close(store, item, "abandoned", why)
    return Recovered(pending=item, outcome="abandoned", detail=why, entry_id=entry)


def _moved_away(item: PendingStage | PendingUnstage, at: str | None) -> str:
    """Why ``item``'s intent is closed ``abandoned``: its ref is at ``at``, where
    neither the intent found it nor the act would have put it (someone else's move)."""
    if isinstance(item, PendingStage):
        return f"{item.ref} is at {at or 'no commit'}, neither its old value nor the commit"
    return f"{item.ref} is at {at}, no longer the commit its unstage deletes"


def _failed_swap(
    repo: Repo, store: LedgerStore, item: PendingStage | PendingUnstage, error: GitRefusal
) -> None:
    """Read a stage's or unstage's failed compare-and-swap as their recovery reads it
    (ADR-0006): the ref still where the intent found it (another git holds its lock)
    is blocked, the intent left pending for ``kernel stage --recover``; the ref where
    the act would have put it returns (the caller closes the intent ``done``); the ref
    anywhere else was moved by someone else: the intent is closed ``abandoned``.

    Raises:
        EffectError: blocked, or abandoned.
    """
    if isinstance(item, PendingStage):
        act, found, wanted = "stage", item.old, item.commit
    else:
        act, found, wanted = "unstage", item.commit, None
    at = repo.resolve(item.ref)
    if at == wanted:
        return
    if at == found:
        raise EffectError(
            f"{act} of {item.ref} blocked, its intent left pending "
            f"(`kernel stage --recover` finishes it once the ref can be updated): {error}"
        ) from error
    why = _moved_away(item, at)
    _close(store, item, "abandoned", why)
    raise EffectError(f"{why}; the intent is closed abandoned ({error})") from error


def _close(
    store: LedgerStore,
    item: PendingStage | PendingUnstage,
    phase: Literal["done", "abandoned"],
    why: str,
) -> str:
    """The entry that closes ``item``'s intent (a staging or an unstaging one)."""
    stage = isinstance(item, PendingStage)
    payload: dict[str, object] = {
        "action": "stage" if stage else "unstage",
        "phase": phase,
        "intent_entry": item.intent_entry,
        "ref": item.ref,
        "commit": item.commit,
    }
    if why:
        payload["reason"] = why
    return store.append(EntryKind.STAGING if stage else EntryKind.UNSTAGING, payload).entry_id


def _settle(repo: Repo, store: LedgerStore, ref: str) -> None:
    """Finish or close what a killed stage of ``ref`` left, before ``ref`` moves again.

    Raises:
        EffectError: a pending stage of ``ref`` cannot be finished (a lock on the ref
            that is not provably ours): nothing else is done.
    """
    for item in recover_stages(repo, store, ref=ref):
        if item.outcome == "blocked":
            raise EffectError(f"an earlier stage of {ref} cannot be finished: {item.detail}")


def _staged_ref(repo: Repo, run: RunRecord, attempt: str) -> str:
    ref = f"{STAGED_PREFIX}{run.run_id}/{attempt}"
    repo.check_ref_name(ref)
    return ref


def stage(
    folder: RunFolder, repo: Repo, store: LedgerStore, *, attempt_id: str, base: str = "HEAD"
) -> Staged | Refused:
    """Commit ``attempt_id``'s candidate onto ``base`` under a staged ref (reversible;
    module docstring: all or nothing, each step in the ledger).

    Raises:
        EffectError: ``base`` names no commit, the patch does not apply, the ref's lock
            is not ours, the ref moved (the intent is then closed ``abandoned``), or
            another git took its lock since (blocked: the intent stays pending).
    """
    base_commit = repo.resolve(base)
    if base_commit is None:
        raise EffectError(f"{repo.path}: {base!r} names no commit")
    ref = _staged_ref(repo, folder.run, attempt_id)
    outcome = decide_staging(
        run=folder.run,
        report=folder.report,
        admission=folder.admission,
        corroborations=folder.corroborations,
        attempt_id=attempt_id,
        base_tree=repo.tree_of(base_commit),
        ledger=verify_store(store),
    )
    context: dict[str, object] = {"repo_base": base_commit, "ref": ref}
    if isinstance(outcome, GateRefusal):
        return record_refusal(store, outcome, context)
    tree = repo.apply_patch(base_commit, folder.patch(outcome.candidate_digest))
    unsafe = unsafe_changes(repo, base_commit, tree)
    if unsafe:
        why = "; ".join(unsafe)
        refusal = gate_refusal("stage", folder, attempt_id, GateReason.CANDIDATE_UNSAFE, why)
        return record_refusal(store, refusal, context)
    _settle(repo, store, ref)
    store.append(EntryKind.ADMISSION, {"action": "stage", **folder.admission.to_dict()})
    message = (
        f"kernel: stage {attempt_id} of run {folder.run.run_id} ({outcome.evidence_class})\n\n"
        f"Staged only: reversible, not promoted.\n\n"
        f"Kernel-Run: {folder.run.run_id}\nKernel-Attempt: {attempt_id}\n"
        f"Kernel-Candidate: sha256:{outcome.candidate_digest}\n"
        f"Kernel-Evidence-Class: {outcome.evidence_class}\n"
        f"Kernel-Report-Digest: {outcome.report_digest}\n"
        f"Kernel-Admission-Id: {outcome.admission_id}\n"
    )
    commit = repo.commit_tree(tree, base_commit, message, _STAGER)
    existing = repo.resolve(ref)
    if existing != commit:
        # The same inputs make the same commit: a lock a killed stage of this attempt
        # left holds exactly it, and is ours to remove (any other is refused, before
        # the intent is written).
        repo.sweep_ref_lock(ref, commit)
    intent = store.append(
        EntryKind.STAGING,
        {"action": "stage", "phase": "intent", "permit": outcome.to_dict(), "ref": ref,
         "old": existing, "commit": commit},
        durable=True,
    )  # fmt: skip
    item = PendingStage(intent_entry=intent.entry_id, ref=ref, old=existing, commit=commit)
    crash_point("stage-intent")
    if existing != commit:
        try:
            repo.update_ref(ref, commit, existing, "kernel stage")
        except GitRefusal as e:
            _failed_swap(repo, store, item, e)
    crash_point("stage-ref")
    done = _close(store, item, "done", "")
    return Staged(permit=outcome, ref=ref, commit=commit, entry_id=done)


def unstage(folder: RunFolder, repo: Repo, store: LedgerStore, *, attempt_id: str) -> Unstaged:
    """Remove a staged candidate's ref (compare-and-swap), after finishing what a
    killed stage or unstage of it left: an ``unstaging`` intent naming the ref and its
    commit (durable before the ref is deleted), the delete, an ``unstaging`` entry with
    ``phase: done``. Killed after the intent, it is finished by `recover_stages`, the
    next stage or unstage of that attempt.

    Raises:
        EffectError: not staged, a killed stage of it cannot be finished, a lock on the
            ref is not provably ours, the ref moved (the intent is then closed
            ``abandoned``), or another git took its lock since (blocked: the intent
            stays pending).
    """
    ref = _staged_ref(repo, folder.run, attempt_id)
    _settle(repo, store, ref)
    old = repo.resolve(ref)
    if old is None:
        raise EffectError(f"{ref}: not staged in {repo.path}")
    # A lock a killed update of this ref left (empty, or part of its value) is ours
    # to remove; any other refuses the unstage before its intent is written.
    repo.sweep_ref_lock(ref, old)
    intent = store.append(
        EntryKind.UNSTAGING,
        {"action": "unstage", "phase": "intent", "run_id": folder.run.run_id,
         "attempt_id": attempt_id, "ref": ref, "commit": old},
        durable=True,
    )  # fmt: skip
    item = PendingUnstage(intent_entry=intent.entry_id, ref=ref, commit=old)
    crash_point("unstage-intent")
    try:
        repo.delete_ref(ref, old)
    except GitRefusal as e:
        _failed_swap(repo, store, item, e)
    crash_point("unstage-ref")
    done = _close(store, item, "done", "")
    return Unstaged(ref=ref, commit=old, entry_id=done)
