"""Evidence ledger speed (SQLite store), as ratios against a floor run in this process.

(a) appends/s: `SqliteStore.append` (one BEGIN IMMEDIATE transaction per entry: head
    read and checked, entry id computed, entry and head written) against the floor:
    bare SQLite inserts of the same canonical payloads, one autocommitted INSERT per
    payload, same file settings (WAL, synchronous=NORMAL), one process.
(b) verify: `kernel.ledger.verify_chain` over every entry read back from the file.

Targets (issue 14): (a) >= 50 % of the floor; (b) >= 100,000 entries/s (linear).

    python bench/ledger.py [--entries 100000]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from pathlib import Path

from kernel.effects.ledger_store import SqliteStore, verify_store
from kernel.identity import canonical_json
from kernel.ledger import EntryKind, LedgerIntact

ROUNDS = 10


def payload(i: int) -> dict[str, object]:
    """A realistic entry: a staging permit's size and shape (~500 bytes)."""
    return {
        "action": "stage",
        "commit": f"{i:040x}",
        "ref": f"refs/kernel/staged/run-{i % 97}/attempt-{i}",
        "permit": {
            "admission_id": f"{i:064x}",
            "attempt_id": f"attempt-{i}",
            "baseline_git_tree": "da0fc19905937274b72b1f56748219c13ee93f00",
            "candidate_digest": f"{i * 7:064x}",
            "evidence_class": "verified",
            "permit_id": f"{i * 3:064x}",
            "report_digest": f"{i * 5:064x}",
            "run_id": f"run-{i % 97}",
        },
    }


def floor_db(path: Path) -> sqlite3.Connection:
    """The floor's database: same file settings as the ledger store."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, payload TEXT NOT NULL)")
    return db


def floor(db: sqlite3.Connection, texts: list[str]) -> float:
    """Seconds for bare autocommitted inserts of the same payload texts."""
    started = time.perf_counter()
    for text in texts:
        db.execute("INSERT INTO t (payload) VALUES (?)", (text,))
    return time.perf_counter() - started


def appends(store: SqliteStore, payloads: list[dict[str, object]]) -> float:
    """Seconds for ledger appends of the payloads."""
    started = time.perf_counter()
    for item in payloads:
        store.append(EntryKind.STAGING, item)
    return time.perf_counter() - started


def main() -> int:
    """Run the bench; print figures and PASS/MISS against the targets."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    n = parser.parse_args().entries
    payloads = [payload(i) for i in range(n)]
    texts = [canonical_json(p).decode() for p in payloads]
    with tempfile.TemporaryDirectory(prefix="kernel-bench-ledger-") as scratch:
        base = Path(scratch)
        db = floor_db(base / "floor.sqlite")
        store = SqliteStore(base / "ledger.sqlite", create=True)
        # Interleaved rounds, so that a load change on a shared machine hits both.
        floor_s = append_s = 0.0
        step = max(1, n // ROUNDS)
        for start in range(0, n, step):
            floor_s += floor(db, texts[start : start + step])
            append_s += appends(store, payloads[start : start + step])
        db.close()
        started, cpu = time.perf_counter(), time.process_time()
        outcome = verify_store(store)
        verify_s = time.perf_counter() - started
        verify_cpu_s = time.process_time() - cpu
        store.close()
    if not isinstance(outcome, LedgerIntact) or outcome.count != n:
        print(f"FAIL: the chain did not verify: {outcome}")
        return 1
    ratio = floor_s / append_s
    verify_rate = n / verify_s
    load = os.getloadavg()[0]
    print(f"ledger bench: {n:,} entries, load average {load:.2f}")
    print(
        f"  floor (bare autocommitted inserts): {n / floor_s:,.0f}/s; "
        f"ledger appends: {n / append_s:,.0f}/s = {ratio:.0%} of the floor "
        f"[{'PASS' if ratio >= 0.5 else 'MISS'} >= 50%]"
    )
    print(
        f"  verify: {verify_s:.2f} s = {verify_rate:,.0f} entries/s "
        f"[{'PASS' if verify_rate >= 100_000 else 'MISS'} >= 100,000/s]; "
        f"{n / verify_cpu_s:,.0f} entries per CPU second (what a shared machine's load "
        "does not change)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
