"""`kernel ledger verify|show|export`: the tamper-evident evidence ledger (ADR-0006).

    kernel ledger verify [--ledger results/ledger.sqlite | --jsonl FILE] [--expect-head ID]
    kernel ledger show   [--ledger ...] [--json]
    kernel ledger export --output results/ledger.jsonl [--ledger ...]

``--ledger`` is a SQLite file (default ``results/ledger.sqlite``) or a
``postgresql://`` URL. ``verify`` recomputes the whole chain; it never creates a
ledger (a mistyped path is unusable input, not an empty chain).

Exit codes: ``verify``: 0 intact, 1 broken (the first broken entry named, its reason
codes on one line), 2 unusable (missing, not a database, unreadable export).
``show`` and ``export``: 0, or 2 when unusable.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from kernel.effects.commands.options import add_results_root
from kernel.effects.documents import plan_outputs
from kernel.effects.ledger_store import (
    DEFAULT_LEDGER,
    export_jsonl,
    opened,
    read_jsonl,
    verify_store,
)
from kernel.errors import ConfigError
from kernel.identity import is_digest
from kernel.ledger import LedgerBroken, verify_chain

__all__ = ["register", "run_export", "run_show", "run_verify"]


def run_verify(args: argparse.Namespace) -> int:
    """Verify a ledger or an export; 0 intact, 1 broken."""
    expected = args.expect_head
    if expected is not None and not is_digest(expected):
        raise ConfigError(f"--expect-head: not a 64-char lowercase hex entry id: {expected!r}")
    if args.jsonl is not None:
        entries, head = read_jsonl(Path(args.jsonl))
        outcome = verify_chain(entries, recorded_head=head)
        where = args.jsonl
    else:
        with opened(args.ledger, create=False) as store:
            outcome = verify_store(store)
            where = store.locator
    if isinstance(outcome, LedgerBroken):
        print(f"kernel ledger verify: {outcome.explanation}")
        return 1
    if expected is not None and outcome.head.entry_id != expected:
        print(
            "kernel ledger verify: broken (head_mismatch) the chain ends at "
            f"{outcome.head.entry_id}, not the expected {expected}"
        )
        return 1
    print(f"intact: {outcome.count} entries, head {outcome.head.entry_id} ({where})")
    return 0


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
    return 0


def run_export(args: argparse.Namespace) -> int:
    """Export the chain as JSON Lines inside the output root."""
    (target,) = plan_outputs(args.results_root, [args.output], [])
    if target is None:  # pragma: no cover - plan_outputs maps a path to a path
        raise ConfigError("--output is required")
    with opened(args.ledger, create=False) as store:
        count = export_jsonl(store, target)
    print(f"exported {count} entries to {target}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``ledger`` verb and its sub-commands."""
    parser = subparsers.add_parser("ledger", help="the tamper-evident evidence ledger")
    sub = parser.add_subparsers(dest="ledger_command", required=True)
    verify = sub.add_parser("verify", help="recompute the hash chain (0 intact, 1 broken)")
    source = verify.add_mutually_exclusive_group()
    source.add_argument("--ledger", default=DEFAULT_LEDGER, help="SQLite file or postgresql:// URL")
    source.add_argument("--jsonl", help="verify a JSON Lines export instead")
    verify.add_argument("--expect-head", help="the chain must end at this entry id")
    verify.set_defaults(handler=run_verify)
    show = sub.add_parser("show", help="print the entries")
    show.add_argument("--ledger", default=DEFAULT_LEDGER, help="SQLite file or postgresql:// URL")
    show.add_argument("--json", action="store_true", help="JSON Lines instead of a table")
    show.set_defaults(handler=run_show)
    export = sub.add_parser("export", help="write the chain as JSON Lines")
    export.add_argument("--ledger", default=DEFAULT_LEDGER, help="SQLite file or postgresql:// URL")
    export.add_argument("--output", required=True, help="the .jsonl file to write")
    add_results_root(export)
    export.set_defaults(handler=run_export)
