"""Promotion and its recovery on a real git repository, as library calls (ADR-0006
§5), and what staging (`kernel.effects.staging`) shares with it: refusals recorded,
intents found open, the candidate checks. The CLI verbs (`kernel stage|unstage|promote`)
parse, call and print.

A promotion is all or nothing. Everything the update needs is checked before
anything moves: the gate's permit, a candidate that adds or changes no
``.gitattributes``/``.gitmodules``, submodule or escaping symlink
(``candidate_unsafe``), and, when the branch is checked out, a clean work tree that
can take the update and is this repository's own (``work_tree_blocked``). Then, in
this order, each step durable before the next:

1. the admission and the permit are appended to the ledger;
2. the commit is made (trailers name the evidence, the permit's ledger entry and the
   ledger's Merkle tree head at that entry, signed when a ledger key is given);
3. a ``promotion`` entry with ``phase: intent`` names the branch, its old tip and
   the commit;
4. the branch moves by compare-and-swap (``branch_moved`` when it moved; when it did
   not but could not be updated, as when another git holds its lock, the promotion
   is blocked with its intent pending, as recovery reads the same failure);
5. the checked-out work tree and index follow (`Repo.fast_forward_work_tree`: each
   path replaced whole, the index swapped whole, under a lock whose marker names
   the intent, so a kill inside the step leaves what recovery provably owns);
6. a ``promotion`` entry with ``phase: done`` closes the intent.

A process killed between two steps leaves an intent without its close: `pending`
finds it (and `check_repository` a promoted commit whose permit has no close), and
`recover` finishes it (the branch still at its tip: steps 4-6; at the commit: 5-6)
or closes it as ``abandoned`` (the branch moved elsewhere, the commit lost). Branch,
work tree and ledger agree after it. Every refusal is appended to the ledger.
"""

from __future__ import annotations

import enum
import os
import posixpath
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, Generic, Literal, TypeVar

import attrs
import orjson

from kernel.decide.decision import HumanDecisionRecord
from kernel.decide.gate import (
    GateReason,
    GateRefusal,
    PromotionPermit,
    SignatureCheck,
    decide_promotion,
)
from kernel.decide.ledger import EntryKind, LedgerRefusal, LedgerVerified
from kernel.decide.merkle import TreeBuilder, TreeHead
from kernel.effects.git import CommitIdentity, Repo
from kernel.effects.ledger_store import LedgerStore, redact, tree_head, verify_store
from kernel.effects.run_folder import RunFolder
from kernel.effects.signing import one_line, sign_tree_head
from kernel.errors import ConfigError, EffectError, GitRefusal, UntrustedConfig
from kernel.records.codec import seal
from kernel.run.record import TrustLevel

__all__ = [
    "CRASH_AT_VARIABLE",
    "InputReason",
    "PendingPromotion",
    "Promoted",
    "Recovered",
    "Refused",
    "RepositoryCheck",
    "check_repository",
    "pending",
    "promote",
    "open_intents",
    "record_unusable",
    "record_blocked",
    "recover",
    "unsafe_changes",
]

_EMPTY_ROOT: Final = TreeBuilder().root().hex()
"""The root of an empty tree."""
CRASH_AT_VARIABLE: Final = "KERNEL_TEST_PROMOTE_CRASH_AT"
"""Test hook: a promotion (or recovery) whose environment names a step here (``permit``,
``intent``, ``ref``, ``work-tree``; a stage's: ``stage-intent``, ``stage-ref``; an
unstage's: ``unstage-intent``, ``unstage-ref``) ends
the process at once after that step, as a kill would. An operator's environment
only: nothing a config or candidate sets."""


@attrs.frozen(kw_only=True)
class Refused:
    """A stage or promotion refused, and the ledger entry that records it (None when
    the ledger itself refused the append)."""

    refusal: GateRefusal
    entry_id: str | None


@attrs.frozen(kw_only=True)
class Promoted:
    """A branch fast-forwarded to a promoted candidate."""

    permit: PromotionPermit
    branch: str
    tip: str
    commit: str
    permit_entry: str
    done_entry: str
    tree_head: TreeHead


@attrs.frozen(kw_only=True)
class PendingPromotion:
    """An intent entry without its close."""

    intent_entry: str
    permit_id: str
    branch: str
    tip: str
    commit: str


P = TypeVar("P")
"""What a recovery found pending: `PendingPromotion`, or a stage's or unstage's
(`kernel.effects.staging`)."""


@attrs.frozen(kw_only=True)
class Recovered(Generic[P]):
    """What a recovery did with one act a crash left half done (an intent without its
    close): `recover` with a promotion, `kernel.effects.staging.recover_stages` with a
    stage or an unstage."""

    pending: P
    """The intent as the ledger holds it."""
    outcome: Literal["finished", "abandoned", "blocked"]
    """``finished``: done and closed ``done``; ``abandoned``: the ref moved elsewhere,
    closed ``abandoned`` and left alone; ``blocked``: it cannot be finished (stays
    pending, the refusal recorded)."""
    detail: str
    """Why it was abandoned or blocked ("" when finished)."""
    entry_id: str | None
    """The ledger entry that closes the intent, or records why it could not be."""


def record_blocked(
    store: LedgerStore, outcome: Recovered[P], action: str, context: dict[str, object]
) -> Recovered[P]:
    """``outcome`` as it stands, or, when ``blocked``, with the refusal appended to the
    ledger (``action``: the verb that recovers; ``context``: what names the intent)."""
    if outcome.outcome != "blocked":
        return outcome
    payload = {
        "action": action,
        "reason_codes": [InputReason.RECOVERY_BLOCKED.value],
        "explanation": outcome.detail[:_INPUT_TEXT_LIMIT],
        **context,
    }
    entry = store.append(EntryKind.REFUSAL, payload).entry_id
    return attrs.evolve(outcome, entry_id=entry)


@attrs.frozen(kw_only=True)
class RepositoryCheck:
    """The ledger verified against the trees a repository's promotion commits anchor,
    and the promotions the two disagree on."""

    outcome: LedgerVerified | LedgerRefusal
    anchors: int
    incomplete: tuple[str, ...]
    """One line per promotion left half done (run ``kernel promote --recover``)."""
    stages: tuple[str, ...] = ()
    """One line per stage or unstage left half done (run ``kernel stage --recover``)."""


def crash_point(step: str) -> None:
    """End the process here, as a kill would, when `CRASH_AT_VARIABLE` names ``step``."""
    if os.environ.get(CRASH_AT_VARIABLE) == step:
        os._exit(137)


def gate_refusal(
    action: Literal["stage", "promote"],
    folder: RunFolder,
    attempt_id: str,
    reason: GateReason,
    why: str,
) -> GateRefusal:
    return seal(
        GateRefusal,
        action=action,
        run_id=folder.run.run_id,
        attempt_id=attempt_id,
        report_digest=folder.report.digest,
        reason_codes=(reason,),
        explanation=f"{action} of {attempt_id} refused: {reason}: {why}",
    )


def record_refusal(store: LedgerStore, refusal: GateRefusal, extra: dict[str, object]) -> Refused:
    """Append ``refusal`` with ``extra`` context to the ledger (its entry, or None when
    a broken ledger refuses the append: the refusal still stands)."""
    payload = {"action": refusal.action, "refusal": refusal.to_dict(), **extra}
    try:
        entry_id: str | None = store.append(EntryKind.REFUSAL, payload).entry_id
    except EffectError:
        # A broken ledger may refuse the append itself; the refusal still stands.
        entry_id = None
    return Refused(refusal=refusal, entry_id=entry_id)


class InputReason(enum.StrEnum):
    """Why a stage, unstage or promotion could not be asked of the gate at all (exit 2);
    recorded like the gate's refusals."""

    UNTRUSTED_REPO_CONFIG = "untrusted_repo_config"
    """The repository's configuration can run a command or move the work tree."""
    UNUSABLE_INPUT = "unusable_input"
    """Anything else that cannot be used: a run folder, decision, key, repository,
    branch, base, argument, a patch that does not apply (the explanation says which)."""
    RECOVERY_BLOCKED = "recovery_blocked"
    """``promote --recover`` could not finish a pending promotion (it stays pending)."""


_INPUT_TEXT_LIMIT: Final = 500


def record_unusable(
    store: LedgerStore, action: str, error: Exception, inputs: dict[str, object]
) -> str | None:
    """Append the refusal of a verb that stopped on unusable input (``error``) with the
    inputs it was given; the entry's id, or None when the ledger refused the append."""
    reason = (
        InputReason.UNTRUSTED_REPO_CONFIG
        if isinstance(error, UntrustedConfig)
        else InputReason.UNUSABLE_INPUT
    )
    payload = {
        "action": action,
        "reason_codes": [reason.value],
        "explanation": redact(" ".join(str(error).split()))[:_INPUT_TEXT_LIMIT],
        "inputs": {
            key: redact(str(value))[:_INPUT_TEXT_LIMIT]
            for key, value in inputs.items()
            if value is not None
        },
    }
    try:
        return store.append(EntryKind.REFUSAL, payload).entry_id
    except EffectError:
        return None


def unsafe_changes(repo: Repo, old: str, new: str) -> list[str]:
    """What of the change from ``old`` to ``new`` a promotion never carries: a
    ``.gitattributes`` or ``.gitmodules`` added or changed (they name filters and
    submodules that run or fetch code), a submodule, a symlink leaving the tree."""
    problems: list[str] = []
    for change in repo.changes(old, new):
        name = posixpath.basename(change.path)
        if name in (".gitattributes", ".gitmodules"):
            problems.append(f"{change.path} added or changed")
        elif change.new_mode == "160000":
            problems.append(f"{change.path} is a submodule")
        elif change.new_mode == "120000":
            target = repo.blob(change.new_blob).decode("utf-8", "surrogateescape")
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(change.path), target))
            if target.startswith("/") or joined == ".." or joined.startswith(("../", ".git")):
                problems.append(f"{change.path} is a symlink to {target!r}, outside the tree")
    return problems


def _author(record: HumanDecisionRecord) -> CommitIdentity:
    who = record.decider.id
    if any(c in who for c in "<>\n\r\0"):
        raise ConfigError(f"decider id {who!r} cannot name a git author")
    return CommitIdentity(name=who, email=who, date=record.decided_at)


def _message(
    permit: PromotionPermit, entry_id: str, head: TreeHead, signature: bytes | None
) -> str:
    signed = "" if signature is None else f"Kernel-Ledger-Head-Signature: {one_line(signature)}\n"
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
        f"Kernel-Ledger-Head: {head.tree_size} {head.root_hash}\n"
        f"{signed}"
    )


def _checkout(repo: Repo, branch: str) -> tuple[bool, str | None]:
    """Whether ``branch`` is checked out in this repository's own work tree; and why
    not, when another work tree holds it (a linked one is never moved under its user)."""
    holder = repo.worktrees().get(branch)
    if holder is None:
        return False, None
    own = repo.work_tree()
    if own is None or os.path.realpath(holder) != os.path.realpath(own):
        return False, f"{branch} is checked out in another work tree, {holder}"
    return True, None


def _work_tree_blocker(repo: Repo, branch: str, old: str, new: str) -> str | None:
    """Why the work tree holding ``branch`` cannot move from ``old`` to ``new``."""
    here, elsewhere = _checkout(repo, branch)
    if elsewhere is not None:
        return elsewhere
    return repo.work_tree_blocker(old, new) if here else None


def promote(
    folder: RunFolder,
    repo: Repo,
    store: LedgerStore,
    *,
    branch: str,
    attempt_id: str,
    decision: HumanDecisionRecord | None,
    signature: SignatureCheck,
    ledger_key: Path | None = None,
    require_trust: TrustLevel | None = None,
) -> Promoted | Refused:
    """Promote ``attempt_id``'s candidate onto ``branch`` (module docstring: all or
    nothing, each step in the ledger).

    Args:
        decision: the decision record (None when the one presented did not parse: a
            forged record is refused and recorded like any other refusal).
        signature: the effects layer's check of the decision's signature.
        ledger_key: an SSH key that signs the ledger tree head in the trailer.
        require_trust: the promotion policy's required trust level (gate P4b).

    Raises:
        EffectError: the branch is missing, the patch does not apply, the branch
            could not be updated though it did not move (blocked), or a step failed
            after the branch moved (then `recover` finishes either).
    """
    tip = repo.resolve(branch)
    if tip is None:
        raise EffectError(f"{repo.path}: branch {branch!r} not found")
    if ledger_key is not None:
        # A key that cannot sign is unusable input, found before anything is written.
        sign_tree_head(TreeHead(tree_size=0, root_hash=_EMPTY_ROOT), ledger_key)
    author = None if decision is None else _author(decision)
    outcome = decide_promotion(
        run=folder.run,
        report=folder.report,
        admission=folder.admission,
        corroborations=folder.corroborations,
        attempt_id=attempt_id,
        decision=decision,
        signature=signature,
        branch_tree=repo.tree_of(tip),
        ledger=verify_store(store),
        require_trust=require_trust,
    )
    context: dict[str, object] = {"branch": branch, "tip": tip}
    if decision is not None:
        context["decision_record_id"] = decision.record_id
    if isinstance(outcome, GateRefusal):
        return record_refusal(store, outcome, context)
    if author is None:  # pragma: no cover - the gate permits nothing without a decision
        raise EffectError("a permit without a decision")
    tree = repo.apply_patch(tip, folder.patch(outcome.candidate_digest))
    for reason, check in _PRE_MOVE_CHECKS:
        why = check(repo, branch, tip, tree)
        if why is not None:
            return record_refusal(
                store, gate_refusal("promote", folder, attempt_id, reason, why), context
            )
    permit = _Permitted(
        permit=outcome, decision=decision, signature=signature, context=context, tree=tree
    )
    return _commit_and_move(folder, repo, store, permit, author=author, ledger_key=ledger_key)


@attrs.frozen(kw_only=True)
class _Permitted:
    """A permitted promotion that passed the pre-move checks: what is recorded of it."""

    permit: PromotionPermit
    decision: HumanDecisionRecord | None
    signature: SignatureCheck
    context: dict[str, object]
    """The branch, its tip and the decision's id."""
    tree: str
    """The tip's tree with the candidate applied."""


def _commit_and_move(
    folder: RunFolder,
    repo: Repo,
    store: LedgerStore,
    done: _Permitted,
    *,
    author: CommitIdentity,
    ledger_key: Path | None,
) -> Promoted | Refused:
    """Steps 1-6 of the module docstring, each durable before the next."""
    outcome, context = done.permit, done.context
    branch, tip = str(context["branch"]), str(context["tip"])
    store.append(EntryKind.ADMISSION, {"action": "promote", **folder.admission.to_dict()})
    permit_entry = store.append(
        EntryKind.DECISION,
        {
            "action": "promote",
            "permit": outcome.to_dict(),
            "decision": None if done.decision is None else done.decision.to_dict(),
            "signature": done.signature.to_dict(),
            **context,
        },
        durable=True,
    )
    crash_point("permit")
    head = tree_head(store)
    signed = None if ledger_key is None else sign_tree_head(head, ledger_key)
    message = _message(outcome, permit_entry.entry_id, head, signed)
    commit = repo.commit_tree(done.tree, tip, message, author)
    intent = store.append(
        EntryKind.PROMOTION,
        {
            "action": "promote",
            "phase": "intent",
            "permit_id": outcome.permit_id,
            "permit_entry": permit_entry.entry_id,
            "commit": commit,
            **context,
        },
        durable=True,
    )
    pending = PendingPromotion(
        intent_entry=intent.entry_id,
        permit_id=outcome.permit_id,
        branch=branch,
        tip=tip,
        commit=commit,
    )
    crash_point("intent")
    try:
        repo.update_ref(branch, commit, tip, f"kernel promote {outcome.permit_id}")
    except GitRefusal as e:
        if repo.resolve(branch) == tip:
            # Not moved (another git holds its lock): read as recovery reads it, blocked
            # with the intent pending; `branch_moved` would be false.
            raise EffectError(
                f"promotion onto {branch} blocked, its intent left pending (`kernel promote "
                f"--recover` finishes it once the branch can be updated): {e}"
            ) from e
        _close(store, pending, "abandoned", "the branch moved before its update")
        moved = gate_refusal(
            "promote", folder, outcome.attempt_id, GateReason.BRANCH_MOVED,
            "the branch moved between the gate's answer and the update",
        )  # fmt: skip
        return record_refusal(store, moved, {**context, "commit": commit})
    closed = _finish(repo, store, pending)
    return Promoted(
        permit=outcome,
        branch=branch,
        tip=tip,
        commit=commit,
        permit_entry=permit_entry.entry_id,
        done_entry=closed,
        tree_head=head,
    )


def _unsafe(repo: Repo, branch: str, tip: str, tree: str) -> str | None:
    """Why the candidate is never promoted (`unsafe_changes`), or None."""
    del branch
    return "; ".join(unsafe_changes(repo, tip, tree)) or None


_PreMoveCheck = Callable[[Repo, str, str, str], "str | None"]
"""``check(repo, branch, tip, tree)``: why the repository cannot take the promotion."""

_PRE_MOVE_CHECKS: Final[tuple[tuple[GateReason, _PreMoveCheck], ...]] = (
    (GateReason.CANDIDATE_UNSAFE, _unsafe),
    (GateReason.WORK_TREE_BLOCKED, _work_tree_blocker),
)
"""What a permitted promotion is refused for before anything is written, in order (as
the gate's rules are): the first that answers is the refusal recorded."""


def _finish(repo: Repo, store: LedgerStore, pending: PendingPromotion) -> str:
    """Steps 5-6 once the branch is at the commit: the work tree follows, the intent
    closes. Returns the closing entry's id.

    Raises:
        EffectError: the work tree cannot follow (the intent stays open).
    """
    crash_point("ref")
    here, elsewhere = _checkout(repo, pending.branch)
    if elsewhere is not None:
        raise EffectError(f"{pending.branch} moved to {pending.commit}, but {elsewhere}")
    if here:
        try:
            # What a kill inside the index update left (ours only; never another's).
            repo.sweep_index(pending.intent_entry)
        except EffectError as e:
            raise EffectError(f"{pending.branch} moved to {pending.commit}, but {e}") from e
        index = repo.index_tree()
        if index == repo.tree_of(pending.tip):
            try:
                repo.fast_forward_work_tree(pending.tip, pending.commit, owner=pending.intent_entry)
            except EffectError as e:
                raise EffectError(
                    f"{pending.branch} moved to {pending.commit}, but its work tree did not "
                    f"follow ({e}); run `kernel promote --recover` once it can"
                ) from e
        elif index != repo.tree_of(pending.commit):
            raise EffectError(
                f"{pending.branch} moved to {pending.commit}, but its index holds neither "
                "the old tip nor the commit; run `kernel promote --recover` once it does"
            )
    crash_point("work-tree")
    return _close(store, pending, "done", "")


def _close(
    store: LedgerStore, pending: PendingPromotion, phase: Literal["done", "abandoned"], why: str
) -> str:
    payload: dict[str, object] = {
        "action": "promote", "phase": phase, "permit_id": pending.permit_id,
        "intent_entry": pending.intent_entry, "branch": pending.branch, "tip": pending.tip,
        "commit": pending.commit,
    }  # fmt: skip
    if why:
        payload["reason"] = why
    return store.append(EntryKind.PROMOTION, payload).entry_id


def _promotions(
    store: LedgerStore, kind: EntryKind = EntryKind.PROMOTION
) -> Iterator[tuple[str, dict[str, object]]]:
    for raw in store.entries():
        if raw.kind != kind.value or type(raw.payload) is not str:
            continue
        try:
            payload = orjson.loads(raw.payload)
        except orjson.JSONDecodeError:
            continue
        if type(payload) is dict:
            yield str(raw.entry_id), payload


def open_intents(store: LedgerStore, kind: EntryKind) -> list[tuple[str, dict[str, object]]]:
    """Every ``kind`` entry with ``phase: intent`` that no later ``done`` or ``abandoned``
    entry of that kind closes (its ``intent_entry``), oldest first: ``(id, payload)``."""
    intents: dict[str, dict[str, object]] = {}
    for entry_id, payload in _promotions(store, kind):
        if payload.get("phase") == "intent":
            intents[entry_id] = payload
        elif payload.get("phase") in ("done", "abandoned"):
            intents.pop(str(payload.get("intent_entry")), None)
    return list(intents.items())


def pending(store: LedgerStore) -> list[PendingPromotion]:
    """Every promotion intent the ledger holds without its close (oldest first)."""
    return [
        PendingPromotion(
            intent_entry=entry_id,
            permit_id=str(payload.get("permit_id")),
            branch=str(payload.get("branch")),
            tip=str(payload.get("tip")),
            commit=str(payload.get("commit")),
        )
        for entry_id, payload in open_intents(store, EntryKind.PROMOTION)
    ]


def recover(repo: Repo, store: LedgerStore) -> list[Recovered[PendingPromotion]]:
    """Finish or close every pending promotion of ``repo`` (module docstring)."""
    return [
        record_blocked(
            store,
            _try_recover(repo, store, item),
            "promote --recover",
            {"intent_entry": item.intent_entry, "branch": item.branch, "commit": item.commit},
        )
        for item in pending(store)
    ]


def _try_recover(
    repo: Repo, store: LedgerStore, item: PendingPromotion
) -> Recovered[PendingPromotion]:
    at = repo.resolve(item.branch)
    if at == item.tip and repo.resolve(item.commit) == item.commit:
        try:
            # A kill inside ``update-ref`` leaves the branch's lock holding part of the commit.
            repo.sweep_ref_lock(item.branch, item.commit)
        except EffectError as e:
            return Recovered(pending=item, outcome="blocked", detail=str(e), entry_id=None)
        why = _work_tree_blocker(repo, item.branch, item.tip, item.commit)
        if why is not None:
            return Recovered(pending=item, outcome="blocked", detail=why, entry_id=None)
        try:
            repo.update_ref(item.branch, item.commit, item.tip, "kernel promote --recover")
            at = item.commit
        except GitRefusal as e:
            at = repo.resolve(item.branch)
            if at == item.tip:
                # Not moved: the update failed for another reason (a lock taken since
                # the sweep); nothing is abandoned, the intent stays pending.
                return Recovered(pending=item, outcome="blocked", detail=str(e), entry_id=None)
    if at == item.commit:
        try:
            entry = _finish(repo, store, item)
        except EffectError as e:
            return Recovered(pending=item, outcome="blocked", detail=str(e), entry_id=None)
        return Recovered(pending=item, outcome="finished", detail="", entry_id=entry)
    why = f"{item.branch} is at {at or 'no commit'}, neither its old tip nor the commit"
    entry = _close(store, item, "abandoned", why)
    return Recovered(pending=item, outcome="abandoned", detail=why, entry_id=entry)


def check_repository(repo: Repo, store: LedgerStore) -> RepositoryCheck:
    """Verify the ledger against every tree head ``repo``'s promotion commits anchor
    (``Kernel-Ledger-Head``), and name each promotion half done (an intent without its
    close, or a promoted commit whose permit the ledger never closed) and each stage
    and unstage half done (an intent without its close).

    Raises:
        EffectError: the store cannot be read.
    """
    anchors: dict[int, str] = {}
    conflicting: list[str] = []
    commits = repo.trailers()
    for fields in commits:
        size, _, root = fields.get("Kernel-Ledger-Head", "").partition(" ")
        if not size.isascii() or not size.isdigit() or len(root) != 64:
            continue
        if anchors.setdefault(int(size), root) != root:
            conflicting.append(f"{fields['commit']} anchors another tree of {size} entries")
    outcome = verify_store(store, anchors=anchors)
    closed = {
        str(p.get("permit_id")) for _, p in _promotions(store) if p.get("phase", "done") == "done"
    }
    promotions = pending(store)
    incomplete = [
        f"promotion {p.permit_id[:12]} of {p.branch} ({p.commit[:12]}) was not finished"
        for p in promotions
    ]
    intended = {p.commit for p in promotions}
    incomplete += [
        f"commit {f['commit'][:12]} promotes permit {f['Kernel-Permit-Id'][:12]}, "
        "which the ledger never closed"
        for f in commits
        if f["Kernel-Permit-Id"] not in closed and f["commit"] not in intended
    ]
    stages = tuple(
        f"{verb} of {p.get('ref')} ({str(p.get('commit'))[:12]}) was not finished"
        for kind, verb in ((EntryKind.STAGING, "stage"), (EntryKind.UNSTAGING, "unstage"))
        for _, p in open_intents(store, kind)
    )
    return RepositoryCheck(
        outcome=outcome,
        anchors=len(anchors),
        incomplete=(*conflicting, *incomplete),
        stages=stages,
    )
