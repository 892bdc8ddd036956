"""`kernel ledger`: the tamper-evident evidence ledger (ADR-0006).

    kernel ledger verify [--ledger L | --jsonl FILE] [--expect-head ID] [--repo GIT]
    kernel ledger show   [--ledger L] [--json]
    kernel ledger export --output results/ledger.jsonl [--ledger L]
    kernel ledger head   [--ledger L] [--signing-key KEY]
    kernel ledger prove  (--inclusion ENTRY | --consistency OLD_HEAD) [--ledger L]
    kernel ledger check-proof --proof FILE --head FILE [--old-head FILE]
                              [--allowed-signers FILE --signer ID]

``--ledger`` is a SQLite file (default ``results/ledger.sqlite``) or a
``postgresql://`` URL. Every verb opens the ledger read-only and writes nothing to it;
a mistyped path is unusable input, never a fresh empty ledger.

- ``verify`` recomputes the chain; with ``--repo`` it also recomputes the Merkle tree
  at every head the repository's promotion commits anchor (``Kernel-Ledger-Head``),
  so a tail rewritten with recomputed hashes is caught with no flag, and names every
  promotion and stage a crash left half done (``kernel promote --recover`` and
  ``kernel stage --recover`` finish them).
- ``head`` verifies the chain and prints its RFC 9162 tree head as JSON, signed with
  ``--signing-key`` (namespace ``kernel-ledger-head``).
- ``prove`` prints an inclusion proof for an entry (id or sequence number) or a
  consistency proof from an older head (a ``head`` file or a tree size) to the current
  one; ``check-proof`` checks one against head files (and the head's signature for
  ``--signer``), as any RFC 9162 client can.

Exit codes: 0 intact / proof holds; 1 broken, a promotion half done, or a proof that
does not hold (one line); 2 unusable input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from kernel.decide.gate import SignatureStatus
from kernel.decide.ledger import LedgerReason, LedgerRefusal, verify_chain
from kernel.decide.merkle import (
    ConsistencyProof,
    InclusionProof,
    ProofRefusal,
    TreeHead,
    check_consistency,
    check_inclusion,
)
from kernel.effects.commands.options import add_results_root
from kernel.effects.documents import plan_outputs
from kernel.effects.exit_status import ExitStatus
from kernel.effects.files import load_json
from kernel.effects.git import Repo
from kernel.effects.ledger_store import (
    DEFAULT_LEDGER,
    LedgerStore,
    export_jsonl,
    opened,
    prove_consistency,
    prove_inclusion,
    read_jsonl,
    tree_head,
    verify_store,
)
from kernel.effects.promotion import check_repository
from kernel.effects.signing import armored, check_tree_head_signature, one_line, sign_tree_head
from kernel.errors import ConfigError, RecordError
from kernel.records.codec import Record, seal
from kernel.records.identity import canonical_json, is_digest

__all__ = [
    "register",
    "run_check_proof",
    "run_export",
    "run_head",
    "run_prove",
    "run_show",
    "run_verify",
]


def run_verify(args: argparse.Namespace) -> int:
    """Verify a ledger or an export; 0 intact, 1 broken (or a promotion half done)."""
    expected = args.expect_head
    if expected is not None and not is_digest(expected):
        raise ConfigError(f"--expect-head: not a 64-char lowercase hex entry id: {expected!r}")
    incomplete: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()
    anchors = 0
    if args.jsonl is not None:
        if args.repo is not None:
            raise ConfigError("--repo checks a ledger, not an export (use --ledger)")
        entries, head = read_jsonl(Path(args.jsonl))
        outcome = verify_chain(entries, recorded_head=head)
        where = args.jsonl
    else:
        with opened(args.ledger, create=False) as store:
            if args.repo is not None:
                checked = check_repository(
                    Repo(args.repo, trust_config=args.trust_repo_config), store
                )
                outcome, anchors = checked.outcome, checked.anchors
                incomplete, stages = checked.incomplete, checked.stages
            else:
                outcome = verify_store(store)
            where = store.locator
    if isinstance(outcome, LedgerRefusal):
        print(f"kernel ledger verify: {outcome.explanation}")
        return ExitStatus.REFUSED
    if expected is not None and outcome.head.entry_id != expected:
        print(
            "kernel ledger verify: broken (head_mismatch) the chain ends at "
            f"{outcome.head.entry_id}, not the expected {expected}"
        )
        return ExitStatus.REFUSED
    if incomplete or stages:
        hints = [
            f"{'; '.join(lines)}: run `kernel {verb} --recover`"
            for lines, verb in ((incomplete, "promote"), (stages, "stage"))
            if lines
        ]
        print(f"kernel ledger verify: {'; '.join(hints)}")
        return ExitStatus.REFUSED
    anchored = f", {anchors} anchored tree heads" if args.repo is not None else ""
    print(f"intact: {outcome.count} entries, head {outcome.head.entry_id}{anchored} ({where})")
    return ExitStatus.OK


def run_show(args: argparse.Namespace) -> int:
    """Print every entry (one line each, or JSON Lines with ``--json``)."""
    with opened(args.ledger, create=False) as store:
        for raw in store.entries():
            if args.json:
                print(
                    orjson.dumps(
                        {
                            "entry_id": raw.entry_id,
                            "kind": raw.kind,
                            "payload": raw.payload,
                            "payload_digest": raw.payload_digest,
                            "prev_id": raw.prev_id,
                            "seq": raw.seq,
                        },
                        option=orjson.OPT_SORT_KEYS,
                    ).decode("utf-8")
                )
            else:
                payload = str(raw.payload)
                short = payload if len(payload) <= 100 else payload[:97] + "..."
                print(f"{raw.seq:>6} {str(raw.entry_id)[:12]} {raw.kind!s:<10} {short}")
    return ExitStatus.OK


def run_export(args: argparse.Namespace) -> int:
    """Export the chain as JSON Lines inside the output root."""
    (target,) = plan_outputs(args.results_root, [args.output], [])
    if target is None:  # pragma: no cover - plan_outputs maps a path to a path
        raise ConfigError("--output is required")
    with opened(args.ledger, create=False) as store:
        count = export_jsonl(store, target)
    print(f"exported {count} entries to {target}")
    return ExitStatus.OK


def _verified_head(store: LedgerStore) -> TreeHead | LedgerRefusal:
    outcome = verify_store(store, anchors={})
    if isinstance(outcome, LedgerRefusal):
        return outcome
    head = TreeHead(tree_size=outcome.count, root_hash=str(outcome.root_hash))
    if tree_head(store) != head:
        # The chain verifies but the stored subtree roots (what proofs are made of) do
        # not: proofs from this store would not hold against its head.
        return seal(
            LedgerRefusal,
            position=outcome.count,
            entry_id=outcome.head.entry_id,
            reason_codes=(LedgerReason.ANCHOR_MISMATCH,),
            explanation=(
                f"ledger broken: the stored Merkle subtree roots give root "
                f"{tree_head(store).root_hash[:12]}, the entries {head.root_hash[:12]}"
            ),
        )
    return head


def run_head(args: argparse.Namespace) -> int:
    """Print the verified ledger's tree head as JSON (signed with ``--signing-key``)."""
    with opened(args.ledger, create=False) as store:
        head = _verified_head(store)
    if isinstance(head, LedgerRefusal):
        print(f"kernel ledger head: {head.explanation}")
        return ExitStatus.REFUSED
    signature = None
    if args.signing_key is not None:
        signature = one_line(sign_tree_head(head, Path(args.signing_key)))
    print(canonical_json({"signature": signature, "tree_head": head.to_dict()}).decode())
    return ExitStatus.OK


def _head_file(path: str, what: str) -> tuple[TreeHead, str | None]:
    document = load_json(path, what=what)
    if type(document) is not dict or set(document) != {"signature", "tree_head"}:
        raise ConfigError(f"{path}: not a `kernel ledger head` document")
    signature = document["signature"]
    if signature is not None and type(signature) is not str:
        raise ConfigError(f"{path}: signature: expected a string or null")
    return _record(TreeHead, document["tree_head"], path), signature  # type: ignore[return-value]


def _record(cls: type[Record], value: object, path: str) -> Record:
    try:
        return cls.from_dict(value)
    except RecordError as e:
        raise ConfigError(f"{path}: {e}") from e


def run_prove(args: argparse.Namespace) -> int:
    """Print an inclusion or consistency proof against the current head."""
    with opened(args.ledger, create=False) as store:
        head = tree_head(store)
        if args.inclusion is not None:
            entry: str | int = args.inclusion
            if args.inclusion.isascii() and args.inclusion.isdigit() and len(args.inclusion) < 19:
                entry = int(args.inclusion)
            elif not is_digest(args.inclusion):
                raise ConfigError("--inclusion: expected an entry id (64 hex) or a sequence number")
            proof: Record = prove_inclusion(store, entry, head.tree_size)
            document = {"head": head.to_dict(), "inclusion": proof.to_dict()}
        else:
            old_size = _old_size(args.consistency)
            proof = prove_consistency(store, old_size, head.tree_size)
            document = {"consistency": proof.to_dict(), "head": head.to_dict()}
    print(canonical_json(document).decode())
    return ExitStatus.OK


def _old_size(value: str) -> int:
    if value.isascii() and value.isdigit() and len(value) < 20:
        return int(value)
    return _head_file(value, "old tree head")[0].tree_size


def run_check_proof(args: argparse.Namespace) -> int:
    """Check a proof file against head files: 0 holds, 1 does not."""
    document = load_json(args.proof, what="proof")
    head, signature = _head_file(args.head, "tree head")
    if args.signer is not None or args.allowed_signers is not None:
        if args.signer is None or args.allowed_signers is None:
            raise ConfigError("--signer and --allowed-signers go together")
        status = (
            SignatureStatus.UNSIGNED
            if signature is None
            else check_tree_head_signature(
                head, armored(signature), Path(args.allowed_signers), args.signer
            )
        )
        if status is not SignatureStatus.VALID:
            print(f"kernel ledger check-proof: the tree head's signature is {status}")
            return ExitStatus.REFUSED
    if type(document) is dict and set(document) == {"head", "inclusion"}:
        inclusion = _record(InclusionProof, document["inclusion"], args.proof)
        outcome = check_inclusion(inclusion, head)  # type: ignore[arg-type]
    elif type(document) is dict and set(document) == {"head", "consistency"}:
        if args.old_head is None:
            raise ConfigError("a consistency proof is checked against --old-head too")
        old, _ = _head_file(args.old_head, "old tree head")
        consistency = _record(ConsistencyProof, document["consistency"], args.proof)
        outcome = check_consistency(consistency, old, head)  # type: ignore[arg-type]
    else:
        raise ConfigError(f"{args.proof}: not a `kernel ledger prove` document")
    if isinstance(outcome, ProofRefusal):
        print(
            f"kernel ledger check-proof: {', '.join(outcome.reason_codes)}: {outcome.explanation}"
        )
        return ExitStatus.REFUSED
    print(
        f"holds: {outcome.proof} proof against the tree of {outcome.tree_size} "
        f"({outcome.root_hash})"
    )
    return ExitStatus.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``ledger`` verb and its sub-commands."""
    parser = subparsers.add_parser("ledger", help="the tamper-evident evidence ledger")
    sub = parser.add_subparsers(dest="ledger_command", required=True)
    ledger_help = "SQLite file or postgresql:// URL"
    verify = sub.add_parser("verify", help="recompute the hash chain (0 intact, 1 broken)")
    source = verify.add_mutually_exclusive_group()
    source.add_argument("--ledger", default=DEFAULT_LEDGER, help=ledger_help)
    source.add_argument("--jsonl", help="verify a JSON Lines export instead")
    verify.add_argument("--expect-head", help="the chain must end at this entry id")
    verify.add_argument("--repo", help="check the tree heads this repository's promotions anchor")
    verify.add_argument(
        "--trust-repo-config",
        action="store_true",
        help="a --repo whose configuration runs commands",
    )
    verify.set_defaults(handler=run_verify)
    show = sub.add_parser("show", help="print the entries")
    show.add_argument("--ledger", default=DEFAULT_LEDGER, help=ledger_help)
    show.add_argument("--json", action="store_true", help="JSON Lines instead of a table")
    show.set_defaults(handler=run_show)
    export = sub.add_parser("export", help="write the chain as JSON Lines")
    export.add_argument("--ledger", default=DEFAULT_LEDGER, help=ledger_help)
    export.add_argument("--output", required=True, help="the .jsonl file to write")
    add_results_root(export)
    export.set_defaults(handler=run_export)
    head = sub.add_parser("head", help="print the verified RFC 9162 tree head (signed)")
    head.add_argument("--ledger", default=DEFAULT_LEDGER, help=ledger_help)
    head.add_argument("--signing-key", help="an SSH private key that signs the head")
    head.set_defaults(handler=run_head)
    prove = sub.add_parser("prove", help="print an inclusion or consistency proof")
    prove.add_argument("--ledger", default=DEFAULT_LEDGER, help=ledger_help)
    kind = prove.add_mutually_exclusive_group(required=True)
    kind.add_argument("--inclusion", metavar="ENTRY", help="an entry id or sequence number")
    kind.add_argument("--consistency", metavar="OLD_HEAD", help="a head file or a tree size")
    prove.set_defaults(handler=run_prove)
    check = sub.add_parser("check-proof", help="check a proof against tree head files")
    check.add_argument("--proof", required=True, help="a `kernel ledger prove` output")
    check.add_argument("--head", required=True, help="a `kernel ledger head` output")
    check.add_argument("--old-head", help="the older head (consistency proofs)")
    check.add_argument("--allowed-signers", help="git allowed_signers file for the head")
    check.add_argument("--signer", help="the principal the head must be signed by")
    check.set_defaults(handler=run_check_proof)
