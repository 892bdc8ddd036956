"""Evidence ledger speed (SQLite store), as ratios against a floor run in this process.

(a) appends/s: `SqliteStore.append` (entry id and Merkle roots computed, one
    autocommitted INSERT after the head the connection knows; its trigger checks the
    marked last row and moves the mark) against the floor:
    bare SQLite inserts of the same canonical payloads, one autocommitted INSERT per
    payload, same file settings (WAL, synchronous=NORMAL, the store's checkpoint
    interval), one process. Wall time is the target; CPU time is printed beside it,
    with its own PASS/MISS (on a machine shared with other work the wall ratio drifts
    towards the CPU ratio).
    The design's own floor is printed beside it: the same rows and hashes written by
    hand (orjson, hashlib, one INSERT into the ledger's table with its trigger, the
    Merkle frontier as a list; no validation, no objects): what the schema costs.
(b) verify: `kernel.decide.ledger.verify_chain` over every entry read back from the file.
(c) proofs: an inclusion proof (entry given by sequence number, as a promotion trailer's
    tree size names its permit) and a consistency proof (from half
    the tree) for a ledger of ``--proof-entries`` entries, made by the store from the
    subtree roots its rows keep (built in bulk, not timed), checked with the pure
    RFC 9162 verification; the slowest of ``PROOFS`` of each, after one untimed (and
    the median, which one preemption on a loaded machine does not move).

Targets (issue 14, issue 22): (a) >= 50 % of the floor; (b) >= 100,000 entries/s
(linear); (c) < 10 ms each for 1,000,000 entries.

    python bench/ledger.py [--entries 100000] [--proof-entries 1000000]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from kernel.decide.ledger import GENESIS_ID, EntryKind, LedgerVerified, new_entry
from kernel.decide.merkle import (
    ProofChecked,
    TreeBuilder,
    TreeHead,
    check_consistency,
    check_inclusion,
    leaf_hash,
)
from kernel.effects.ledger_store import (
    WAL_PAGES,
    SqliteStore,
    prove_consistency,
    prove_inclusion,
    tree_head,
    verify_store,
)
from kernel.records.identity import canonical_json

ROUNDS = 10
PROOFS = 20


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


def floor_db_settings(db: sqlite3.Connection) -> sqlite3.Connection:
    """The store's file settings on a connection."""
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}")
    return db


def floor_db(path: Path) -> sqlite3.Connection:
    """The floor's database: same file settings as the ledger store."""
    db = floor_db_settings(sqlite3.connect(path, isolation_level=None))
    db.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, payload TEXT NOT NULL)")
    return db


def floor(db: sqlite3.Connection, texts: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds for bare autocommitted inserts of the same payload texts."""
    started, cpu = time.perf_counter(), time.process_time()
    for text in texts:
        db.execute("INSERT INTO t (payload) VALUES (?)", (text,))
    return time.perf_counter() - started, time.process_time() - cpu


def appends(store: SqliteStore, payloads: list[dict[str, object]]) -> tuple[float, float]:
    """Wall and CPU seconds for ledger appends of the payloads."""
    started, cpu = time.perf_counter(), time.process_time()
    for item in payloads:
        store.append(EntryKind.STAGING, item)
    return time.perf_counter() - started, time.process_time() - cpu


class HandWritten:
    """The design's floor: an append written by hand with the same bytes, hashes and
    row as `SqliteStore.append` (the property tests hold the store to the record path;
    this only needs to cost what the schema costs)."""

    TEMPLATE = '{"entry_id":"","kind":"%s","payload_digest":"%s","prev_id":"%s","seq":%d}'
    INSERT = (
        "INSERT INTO kernel_ledger (seq, entry_id, kind, payload, nodes, tail)"
        " VALUES (?, ?, ?, ?, ?, 1)"
    )

    def __init__(self, path: Path) -> None:
        SqliteStore(path, create=True).close()
        self.db = floor_db_settings(sqlite3.connect(path, isolation_level=None))
        self.seq, self.head, self.frontier = 0, GENESIS_ID, list[bytes]()

    def run(self, payloads: list[dict[str, object]]) -> tuple[float, float]:
        """Wall and CPU seconds for the hand-written appends of the payloads."""
        sha, cursor, frontier = hashlib.sha256, self.db.cursor(), self.frontier
        seq, head, options = self.seq, self.head, orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER
        started, cpu = time.perf_counter(), time.process_time()
        for item in payloads:
            data = orjson.dumps(item, option=options)
            digest = sha(data).hexdigest()
            seq += 1
            entry_id = sha((self.TEMPLATE % ("staging", digest, head, seq)).encode()).hexdigest()
            node, nodes, rest = sha(b"\x00" + bytes.fromhex(entry_id)).digest(), b"", seq
            while not rest & 1:
                node = sha(b"\x01" + frontier.pop() + node).digest()
                nodes, rest = nodes + node, rest >> 1
            frontier.append(node)
            cursor.execute(self.INSERT, (seq, entry_id, "staging", data.decode(), nodes or None))
            head = entry_id
        self.seq, self.head = seq, head
        return time.perf_counter() - started, time.process_time() - cpu


def bulk_ledger(path: Path, n: int) -> list[str]:
    """A ledger of ``n`` small entries written in one transaction (not timed); their ids."""
    store = SqliteStore(path, create=True)
    store.close()
    db = sqlite3.connect(path, isolation_level=None)
    head, tree, ids, rows = (0, GENESIS_ID), TreeBuilder(), [], []
    for i in range(n):
        entry = new_entry(head, EntryKind.DECISION, {"i": i})
        nodes = b"".join(tree.append(leaf_hash(entry.entry_id))) or None
        rows.append((entry.seq, entry.entry_id, entry.kind.value, entry.payload, nodes))
        head = (entry.seq, entry.entry_id)
        ids.append(entry.entry_id)
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO kernel_ledger (seq, entry_id, kind, payload, nodes, tail)"
        " VALUES (?, ?, ?, ?, ?, 1)",
        rows,
    )
    db.execute("COMMIT")
    db.close()
    return ids


def proofs(path: Path, ids: list[str]) -> dict[str, tuple[float, float, float]]:
    """The slowest inclusion and consistency proof made (wall and CPU seconds), and the
    median wall time (one preemption on a loaded machine moves the slowest alone)."""
    store = SqliteStore(path, create=False)
    head = tree_head(store)
    # One of each first, untimed: opening the file and preparing the statements.
    prove_inclusion(store, 1)
    prove_consistency(store, len(ids) // 2)
    times: dict[str, list[tuple[float, float]]] = {"inclusion": [], "consistency": []}
    for k in range(PROOFS):
        seq = (k * 7919) % len(ids) + 1
        started, cpu = time.perf_counter(), time.process_time()
        inclusion = prove_inclusion(store, seq)
        times["inclusion"].append((time.perf_counter() - started, time.process_time() - cpu))
        assert isinstance(check_inclusion(inclusion, head), ProofChecked)
        old = len(ids) // 2 + k
        started, cpu = time.perf_counter(), time.process_time()
        consistency = prove_consistency(store, old)
        times["consistency"].append((time.perf_counter() - started, time.process_time() - cpu))
        old_head = attrs_head(store, old)
        assert isinstance(check_consistency(consistency, old_head, head), ProofChecked)
    store.close()
    return {
        name: (max(w for w, _ in taken), max(c for _, c in taken),
               statistics.median(w for w, _ in taken))
        for name, taken in times.items()
    }  # fmt: skip


def attrs_head(store: SqliteStore, size: int) -> TreeHead:
    """The head of the tree of the first ``size`` entries (from the stored roots)."""
    from kernel.decide.merkle import frontier_of

    tree = TreeBuilder(size, [store.perfect(*part) for part in frontier_of(size)])
    return TreeHead(tree_size=size, root_hash=tree.root().hex())


def main() -> int:
    """Run the bench; print figures and PASS/MISS against the targets."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--proof-entries", type=int, default=1_000_000)
    options = parser.parse_args()
    n = options.entries
    payloads = [payload(i) for i in range(n)]
    texts = [canonical_json(p).decode() for p in payloads]
    with tempfile.TemporaryDirectory(prefix="kernel-bench-ledger-") as scratch:
        base = Path(scratch)
        db = floor_db(base / "floor.sqlite")
        store = SqliteStore(base / "ledger.sqlite", create=True)
        by_hand = HandWritten(base / "by-hand.sqlite")
        # Interleaved rounds, so that a load change on a shared machine hits all three.
        floor_s = append_s = floor_cpu = append_cpu = hand_cpu = 0.0
        step = max(1, n // ROUNDS)
        for start in range(0, n, step):
            wall, cpu = floor(db, texts[start : start + step])
            floor_s, floor_cpu = floor_s + wall, floor_cpu + cpu
            wall, cpu = appends(store, payloads[start : start + step])
            append_s, append_cpu = append_s + wall, append_cpu + cpu
            hand_cpu += by_hand.run(payloads[start : start + step])[1]
        db.close()
        by_hand.db.close()
        same_rows = by_hand.head == store.recorded_head()[1]
        started, cpu = time.perf_counter(), time.process_time()
        outcome = verify_store(store)
        verify_s = time.perf_counter() - started
        verify_cpu_s = time.process_time() - cpu
        store.close()
        ids = bulk_ledger(base / "proofs.sqlite", options.proof_entries)
        worst = proofs(base / "proofs.sqlite", ids)
    if not same_rows:
        print("FAIL: the hand-written appends made another chain than the store's")
        return 1
    if not isinstance(outcome, LedgerVerified) or outcome.count != n:
        print(f"FAIL: the chain did not verify: {outcome}")
        return 1
    ratio = floor_s / append_s
    verify_rate = n / verify_s
    load = os.getloadavg()[0]
    print(f"ledger bench: {n:,} entries, load average {load:.2f}")
    print(
        f"  floor (bare autocommitted inserts): {n / floor_s:,.0f}/s; "
        f"ledger appends: {n / append_s:,.0f}/s = {ratio:.0%} of the floor "
        f"[{'PASS' if ratio >= 0.5 else 'MISS'} >= 50%]; CPU: {floor_cpu / n * 1e6:.0f} us "
        f"against {append_cpu / n * 1e6:.0f} us = {floor_cpu / append_cpu:.0%} "
        f"[{'PASS' if floor_cpu / append_cpu >= 0.5 else 'MISS'} >= 50%]"
    )
    print(
        f"  the same append written by hand (the schema's own floor): "
        f"{hand_cpu / n * 1e6:.0f} us CPU = {floor_cpu / hand_cpu:.0%} of the floor; "
        f"the store's appends cost {append_cpu / hand_cpu:.2f}x it"
    )
    print(
        f"  verify: {verify_s:.2f} s = {verify_rate:,.0f} entries/s "
        f"[{'PASS' if verify_rate >= 100_000 else 'MISS'} >= 100,000/s]; "
        f"{n / verify_cpu_s:,.0f} entries per CPU second (what a shared machine's load "
        "does not change)"
    )
    size = options.proof_entries
    for name, (seconds, cpu_s, median) in worst.items():
        print(
            f"  {name} proof, {size:,} entries: {seconds * 1000:.2f} ms, "
            f"{cpu_s * 1000:.2f} ms CPU (slowest of {PROOFS}; median {median * 1000:.2f} ms) "
            f"[{'PASS' if seconds < 0.01 else 'MISS'} < 10 ms]"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
