"""Tests for the SQLite ledger store, the JSON Lines export and `kernel ledger`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.decide.ledger import (
    GENESIS_ID,
    EntryKind,
    LedgerHead,
    LedgerReason,
    LedgerRefusal,
    LedgerVerified,
    next_entry,
    verify_chain,
)
from kernel.decide.merkle import TreeBuilder, leaf_hash
from kernel.effects.cli import main
from kernel.effects.ledger_store import (
    export_jsonl,
    open_store,
    opened,
    prove_consistency,
    prove_inclusion,
    read_jsonl,
    redact,
    tree_head,
    verify_store,
)
from kernel.errors import CanonicalizationError, EffectError
from kernel.strategies import json_values, texts

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "ledger" / "written-2026-12-03.sqlite"
"""A ledger as this store wrote it before its rows lost ``prev_id`` and ``payload_digest``
(11 entries of every kind, one durable), with its JSON Lines export beside it."""
GOLDEN_HEAD = (11, "a496e1547759f65e7ab7fb1811dc63d577165818d293836909be9b95bca8f6c1")
GOLDEN_ROOT = "94dfd87c5c280af35318323179daf3567288c9e925018913e5afa8067eb3c210"

WRITER = """
import sys
from kernel.effects.ledger_store import open_store
from kernel.decide.ledger import EntryKind
store = open_store(sys.argv[1])
for i in range(int(sys.argv[3])):
    store.append(EntryKind.ADMISSION, {"writer": int(sys.argv[2]), "i": i})
store.close()
"""


def filled(path: Path, count: int = 5) -> Path:
    """A SQLite ledger with ``count`` entries."""
    with opened(path) as store:
        for i in range(count):
            store.append(EntryKind.DECISION, {"i": i})
    return path


def sql(path: Path, *statements: str) -> None:
    """Tamper with the database directly, as a local user with write access would."""
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


def test_appends_chain_and_verify(tmp_path: Path) -> None:
    """Appended entries form an intact chain; the head is the last entry."""
    path = filled(tmp_path / "l.sqlite")
    with opened(path, create=False) as store:
        outcome = verify_store(store)
        assert isinstance(outcome, LedgerVerified)
        assert outcome.count == 5
        assert store.recorded_head() == (5, outcome.head.entry_id)
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_eight_processes_append_without_loss(tmp_path: Path) -> None:
    """8 processes appending 1,000 entries each leave one intact chain of 8,000."""
    path = tmp_path / "l.sqlite"
    open_store(path).close()
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(w), "1000"])
        for w in range(8)
    ]
    assert [w.wait(timeout=600) for w in writers] == [0] * 8
    with opened(path, create=False) as store:
        outcome = verify_store(store)
        assert isinstance(outcome, LedgerVerified)
        assert outcome.count == 8000
        seen = {(e.payload) for e in store.entries()}
    assert len(seen) == 8000


TAMPERS = {
    "edit payload": ["UPDATE kernel_ledger SET payload = '{\"i\":99}' WHERE seq = 3"],
    "payload not UTF-8": ["UPDATE kernel_ledger SET payload = X'ff7b7d' WHERE seq = 2"],
    "payload as blob": [
        "UPDATE kernel_ledger SET payload = CAST(payload AS BLOB) || X'20' WHERE seq = 4"
    ],
    "edit kind": ["UPDATE kernel_ledger SET kind = 'promotion' WHERE seq = 2"],
    "edit id": ["UPDATE kernel_ledger SET entry_id = printf('%064d', 0) WHERE seq = 4"],
    "delete middle": ["DELETE FROM kernel_ledger WHERE seq = 3"],
    "delete last": ["DELETE FROM kernel_ledger WHERE seq = 5"],
    "delete first": ["DELETE FROM kernel_ledger WHERE seq = 1"],
    "reorder": [
        "UPDATE kernel_ledger SET seq = 100 WHERE seq = 2",
        "UPDATE kernel_ledger SET seq = 2 WHERE seq = 3",
        "UPDATE kernel_ledger SET seq = 3 WHERE seq = 100",
    ],
    "insert": [
        # The store's trigger refuses an insert not after the head: a user with write
        # access drops it first.
        "DROP TRIGGER kernel_ledger_follows_tail",
        "UPDATE kernel_ledger SET seq = seq + 100",
        "UPDATE kernel_ledger SET seq = seq - 99 WHERE seq > 102",
        "UPDATE kernel_ledger SET seq = seq - 100 WHERE seq > 100",
        "INSERT INTO kernel_ledger (seq, entry_id, kind, payload)"
        " SELECT 3, entry_id, kind, payload FROM kernel_ledger WHERE seq = 2",
    ],
    # L6: the last row carries the tail mark (the store's recorded head).
    "tail unmarked": ["UPDATE kernel_ledger SET tail = NULL WHERE seq = 5"],
    "tail moved back": [
        "UPDATE kernel_ledger SET tail = NULL WHERE seq = 5",
        "UPDATE kernel_ledger SET tail = 1 WHERE seq = 4",
    ],
    "tail mark garbage": ["UPDATE kernel_ledger SET tail = 'x' WHERE seq = 5"],
}


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_cli_verify_catches_every_tamper(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kernel ledger verify` exits 1 naming the broken entry after each tamper; an
    append onto a tampered tail is refused before it writes."""
    path = filled(tmp_path / "l.sqlite")
    assert main(["ledger", "verify", "--ledger", str(path)]) == 0
    sql(path, *TAMPERS[name])
    capsys.readouterr()
    assert main(["ledger", "verify", "--ledger", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("kernel ledger verify: ledger broken at entry ")
    assert out.count("\n") == 1
    if name in ("delete last", "tail unmarked", "tail moved back", "tail mark garbage"):
        with opened(path) as store, pytest.raises(EffectError, match="head does not match"):
            store.append(EntryKind.REFUSAL, {"x": 1})


def test_export_verifies_the_same_way(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON Lines export verifies without the database, and catches edits too."""
    path = filled(tmp_path / "l.sqlite")
    results = tmp_path / "results"
    export = results / "l.jsonl"
    assert main(["ledger", "export", "--ledger", str(path), "--output", str(export),
                 "--results-root", str(results)]) == 0  # fmt: skip
    assert main(["ledger", "verify", "--jsonl", str(export)]) == 0
    lines = export.read_text().splitlines()
    assert len(lines) == 6
    # Key order inside a payload is not an edit (canonical form); a value is.
    edited = [*lines[:2], lines[2].replace('"i":2', '"i":7'), *lines[3:]]
    export.write_text("\n".join(edited) + "\n")
    capsys.readouterr()
    assert main(["ledger", "verify", "--jsonl", str(export)]) == 1
    assert "entry 3" in capsys.readouterr().out
    export.write_text("\n".join(lines[:-2] + lines[-1:]) + "\n")
    assert main(["ledger", "verify", "--jsonl", str(export)]) == 1
    export.write_text("\n".join(lines[:-1]) + "\n")
    assert main(["ledger", "verify", "--jsonl", str(export)]) == 2


def test_export_round_trip_of_read(tmp_path: Path) -> None:
    """read_jsonl returns exactly the stored entries and head."""
    path = filled(tmp_path / "l.sqlite", 3)
    with opened(path, create=False) as store:
        export_jsonl(store, tmp_path / "e.jsonl")
        entries, head = read_jsonl(tmp_path / "e.jsonl")
        assert entries == list(store.entries())
        assert head == store.recorded_head()
    assert isinstance(verify_chain(entries, recorded_head=head), LedgerVerified)


def test_expect_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--expect-head anchors the chain's end."""
    path = filled(tmp_path / "l.sqlite", 2)
    with opened(path, create=False) as store:
        head = store.recorded_head()[1]
    assert main(["ledger", "verify", "--ledger", str(path), "--expect-head", str(head)]) == 0
    assert main(["ledger", "verify", "--ledger", str(path), "--expect-head", "a" * 64]) == 1
    assert main(["ledger", "verify", "--ledger", str(path), "--expect-head", "zz"]) == 2


@pytest.mark.parametrize("content", [b"", b"not a database at all" * 100])
def test_unusable_ledger_exit_2(
    content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing, empty or corrupt file is unusable input (2), not a broken chain."""
    assert main(["ledger", "verify", "--ledger", str(tmp_path / "missing.sqlite")]) == 2
    assert not (tmp_path / "missing.sqlite").exists()
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(content)
    capsys.readouterr()
    code = main(["ledger", "verify", "--ledger", str(bad)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1


def test_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`kernel ledger show` prints one line per entry (or JSON Lines)."""
    path = filled(tmp_path / "l.sqlite", 3)
    assert main(["ledger", "show", "--ledger", str(path)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert main(["ledger", "show", "--ledger", str(path), "--json"]) == 0
    assert '"seq":1' in capsys.readouterr().out


def test_broken_store_refusal_codes(tmp_path: Path) -> None:
    """verify_store returns the pure refusal with its codes."""
    path = filled(tmp_path / "l.sqlite")
    sql(path, "DELETE FROM kernel_ledger WHERE seq = 2")
    with opened(path, create=False) as store:
        outcome = verify_store(store)
    assert isinstance(outcome, LedgerRefusal)
    assert outcome.position == 2
    assert LedgerReason.SEQUENCE_BROKEN in outcome.reason_codes


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


@pytest.mark.parametrize("verb", [["verify"], ["show"], ["head"], ["prove", "--consistency", "0"]])
def test_readers_write_nothing(
    verb: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 22: a zero-byte file stays zero bytes, no -wal/-shm is left, a read-only
    folder works."""
    zero = tmp_path / "zero.sqlite"
    zero.write_bytes(b"")
    assert main(["ledger", *verb, "--ledger", str(zero)]) == 2
    assert zero.stat().st_size == 0
    assert _files(tmp_path) == {"zero.sqlite"}
    folder = tmp_path / "ro"
    folder.mkdir()
    path = filled(folder / "l.sqlite", 3)
    before = {name: (folder / name).read_bytes() for name in _files(folder)}
    folder.chmod(0o555)
    try:
        assert main(["ledger", *verb, "--ledger", str(path)]) == 0
    finally:
        folder.chmod(0o755)
    assert {name: (folder / name).read_bytes() for name in _files(folder)} == before
    assert _files(folder) == {"l.sqlite"}
    capsys.readouterr()


def test_a_reader_beside_a_live_writer_sees_its_appends(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with opened(path) as writer:
        writer.append(EntryKind.DECISION, {"i": 1})
        with opened(path, create=False) as reader:
            outcome = verify_store(reader)
            assert isinstance(outcome, LedgerVerified)
            assert outcome.count == 1


@pytest.mark.parametrize("target", ["folder", "fifo", "device", "long"])
def test_a_ledger_that_is_no_file_is_unusable(
    target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder, a FIFO, a device, a 5,000-character path: one line, exit 2, no hang."""
    if target == "folder":
        path = str(tmp_path)
    elif target == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    elif target == "device":
        path = "/dev/full"
    else:
        path = str(tmp_path / ("x" * 5000))
    for verb in (["verify"], ["show"], ["head"], ["prove", "--inclusion", "1"]):
        capsys.readouterr()
        assert main(["ledger", *verb, "--ledger", path]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "Traceback" not in err


def test_a_duplicate_key_in_an_export_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A forged first "payload" with the original last would verify under a reader that
    keeps the last of two keys: refused."""
    path = filled(tmp_path / "l.sqlite", 2)
    export = tmp_path / "l.jsonl"
    with opened(path, create=False) as store:
        export_jsonl(store, export)
    lines = export.read_text().splitlines()
    lines[0] = lines[0].replace('{"entry_id"', '{"payload":{"i":"forged"},"entry_id"', 1)
    export.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["ledger", "verify", "--jsonl", str(export)]) == 2
    assert "duplicate key 'payload'" in capsys.readouterr().err


def test_postgres_passwords_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    assert redact("postgresql://u:s3cret@db/ledger?password=x&sslmode=require") == (
        "postgresql://u:***@db/ledger?password=***&sslmode=require"
    )
    assert redact("postgres://db/l?sslpassword=k&password=p") == (
        "postgres://db/l?sslpassword=***&password=***"
    )
    url = "postgresql://kernel:s3cret@127.0.0.1:1/ledger?password=hunter2&connect_timeout=1"
    assert main(["ledger", "verify", "--ledger", url]) == 2
    err = capsys.readouterr().err
    assert "s3cret" not in err
    assert "hunter2" not in err


def test_head_prove_and_check_proof(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A third party checks the proofs against the (signed) heads."""
    path = filled(tmp_path / "l.sqlite", 3)
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    allowed = tmp_path / "allowed"
    allowed.write_text(
        f"op@example.com {' '.join((tmp_path / 'key.pub').read_text().split()[:2])}\n"
    )

    def out(*argv: str) -> str:
        capsys.readouterr()
        assert main(["ledger", *argv, "--ledger", str(path)]) == 0
        return capsys.readouterr().out

    old = tmp_path / "old.json"
    old.write_text(out("head", "--signing-key", str(key)))
    with opened(path) as store:
        added = [store.append(EntryKind.DECISION, {"i": i}) for i in range(3, 8)]
    head = tmp_path / "head.json"
    head.write_text(out("head", "--signing-key", str(key)))
    assert json.loads(head.read_text())["tree_head"]["tree_size"] == 8
    inclusion = tmp_path / "inclusion.json"
    inclusion.write_text(out("prove", "--inclusion", added[1].entry_id))
    consistency = tmp_path / "consistency.json"
    consistency.write_text(out("prove", "--consistency", str(old)))
    check = ["ledger", "check-proof", "--head", str(head)]
    signed = ["--allowed-signers", str(allowed), "--signer", "op@example.com"]
    assert main([*check, "--proof", str(inclusion), *signed]) == 0
    assert main([*check, "--proof", str(consistency), "--old-head", str(old)]) == 0
    assert "holds: consistency proof" in capsys.readouterr().out
    # A rewritten old head, an edited proof, a head signed by no one allowed: refused.
    forged = json.loads(old.read_text())
    forged["tree_head"]["root_hash"] = "a" * 64
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    assert (
        main([*check, "--proof", str(consistency), "--old-head", str(tmp_path / "forged.json")])
        == 1
    )
    edited = json.loads(inclusion.read_text())
    edited["inclusion"]["leaf_index"] = 2
    inclusion.write_text(json.dumps(edited))
    assert main([*check, "--proof", str(inclusion)]) == 1
    assert main([*check, "--proof", str(consistency), "--old-head", str(old),
                 "--allowed-signers", str(allowed), "--signer", "mallory"]) == 1  # fmt: skip
    assert "root_mismatch" in capsys.readouterr().out


def test_head_refuses_a_store_whose_subtree_roots_were_edited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = filled(tmp_path / "l.sqlite", 4)
    sql(path, "UPDATE kernel_ledger SET nodes = zeroblob(64) WHERE seq = 4")
    assert main(["ledger", "verify", "--ledger", str(path)]) == 0
    capsys.readouterr()
    assert main(["ledger", "head", "--ledger", str(path)]) == 1
    assert "stored Merkle subtree roots" in capsys.readouterr().out


def test_a_ledger_made_before_the_tree_gets_its_subtree_roots_computed(tmp_path: Path) -> None:
    path = filled(tmp_path / "l.sqlite", 5)
    sql(path, "UPDATE kernel_ledger SET nodes = NULL")
    with opened(path) as store:
        store.append(EntryKind.DECISION, {"i": 5})
        verified = verify_store(store, anchors={})
        assert isinstance(verified, LedgerVerified)
        assert tree_head(store).root_hash == verified.root_hash


def test_a_writer_starting_during_an_immutable_read_is_read_through(tmp_path: Path) -> None:
    """A reader opened with no writer's log reads the file as immutable; when a writer
    begins meanwhile, verification reads again through the writer's log."""
    path = filled(tmp_path / "l.sqlite", 2)
    with opened(path, create=False) as reader, opened(path) as writer:
        writer.append(EntryKind.DECISION, {"i": 2})
        outcome = verify_store(reader)
        assert isinstance(outcome, LedgerVerified)
        assert outcome.count == 3


def test_an_inclusion_proof_by_sequence_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = filled(tmp_path / "l.sqlite", 6)
    with opened(path, create=False) as store:
        third = next(e for e in store.entries() if e.seq == 3).entry_id
        assert prove_inclusion(store, 3) == prove_inclusion(store, str(third))
        with pytest.raises(EffectError, match="not in the tree"):
            prove_inclusion(store, 7)
    capsys.readouterr()
    assert main(["ledger", "prove", "--ledger", str(path), "--inclusion", "3"]) == 0
    assert str(third) in capsys.readouterr().out
    assert main(["ledger", "prove", "--ledger", str(path), "--inclusion", "nope"]) == 2


def test_an_insert_not_after_the_recorded_head_is_refused_by_the_database(
    tmp_path: Path,
) -> None:
    """The store's trigger refuses a row that does not follow the marked last row (a
    writer with a stale head, a hand-made row) or does not carry the mark itself, and
    a refused insert moves nothing. (Its link to the row before is its id, which
    verification checks.)"""
    path = filled(tmp_path / "l.sqlite", 3)
    with opened(path, create=False) as store:
        head = store.recorded_head()
    db = sqlite3.connect(path)
    row = "INSERT INTO kernel_ledger (seq, entry_id, kind, payload, tail)"
    for seq, tail in ((5, 1), (3, 1), (4, None), (1, 1), (0, 1)):
        with pytest.raises(sqlite3.IntegrityError):
            db.execute(f"{row} VALUES (?, ?, 'decision', '{{}}', ?)", (seq, "a" * 64, tail))
    db.close()
    with opened(path) as store:
        assert store.recorded_head() == head
        assert isinstance(verify_store(store), LedgerVerified)


def test_a_stale_connection_appends_after_the_real_head(tmp_path: Path) -> None:
    """Two connections take turns: each one-statement append after a head another
    writer moved is refused by the database and retried under the lock, so the chain
    stays one chain."""
    path = tmp_path / "l.sqlite"
    with opened(path) as first, opened(path) as second:
        for i in range(6):
            (first if i % 3 else second).append(EntryKind.DECISION, {"i": i})
        outcome = verify_store(first)
    assert isinstance(outcome, LedgerVerified)
    assert outcome.count == 6


def test_a_durable_append_syncs_the_log_and_the_next_does_not(tmp_path: Path) -> None:
    """``durable=True`` commits with synchronous=FULL (one fsync of the log); the
    connection goes back to NORMAL, also when the append fails."""
    path = filled(tmp_path / "l.sqlite", 1)
    store = open_store(path)
    db = store._db  # type: ignore[attr-defined]
    seen: list[str] = []
    db.set_trace_callback(seen.append)
    store.append(EntryKind.PROMOTION, {"phase": "intent"}, durable=True)
    assert seen[0] == "PRAGMA synchronous=FULL"
    assert any(s.startswith("INSERT INTO kernel_ledger") for s in seen[1:-1])
    assert seen[-1] == "PRAGMA synchronous=NORMAL"
    assert db.execute("PRAGMA synchronous").fetchone() == (1,)
    with pytest.raises(CanonicalizationError):
        store.append(EntryKind.PROMOTION, {"x": 1.5}, durable=True)
    assert db.execute("PRAGMA synchronous").fetchone() == (1,)
    seen.clear()
    store.append(EntryKind.PROMOTION, {"phase": "done"})
    assert not any("synchronous" in s for s in seen)
    store.close()


def _as_written_before_the_mark(path: Path, head: tuple[int, str]) -> None:
    """Turn ``path`` into a ledger as this store wrote it before the tail mark: the
    head in a row of its own (``head``), kept by a trigger."""
    sql(
        path,
        "DROP TRIGGER kernel_ledger_follows_tail",
        "ALTER TABLE kernel_ledger DROP COLUMN tail",
        "CREATE TABLE kernel_ledger_head (one INTEGER PRIMARY KEY CHECK (one = 1),"
        " seq INTEGER NOT NULL, entry_id TEXT NOT NULL)",
        f"INSERT INTO kernel_ledger_head VALUES (1, {head[0]}, '{head[1]}')",
        "CREATE TRIGGER kernel_ledger_after_head BEFORE INSERT ON kernel_ledger"
        " BEGIN SELECT RAISE(ABORT, 'not after the recorded head'); END",
    )


def test_a_ledger_written_before_the_tail_mark_reads_and_moves_to_it(tmp_path: Path) -> None:
    """Readers of a ledger with a separate head row read that row (a removed last
    entry is still caught); the first writer moves the head to the last row's mark
    in one transaction, and appends go on."""
    path = filled(tmp_path / "l.sqlite", 4)
    with opened(path, create=False) as store:
        head = store.recorded_head()
    _as_written_before_the_mark(path, (int(str(head[0])), str(head[1])))
    with opened(path, create=False) as store:
        assert store.recorded_head() == head
        assert isinstance(verify_store(store), LedgerVerified)
    with opened(path) as store:
        store.append(EntryKind.DECISION, {"i": 4})
        outcome = verify_store(store)
        assert isinstance(outcome, LedgerVerified)
        assert outcome.count == 5
    tables = {row[0] for row in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert "kernel_ledger_head" not in tables
    assert "kernel_ledger_after_head" not in tables


def test_a_removed_tail_stays_caught_when_the_ledger_moves_to_the_mark(tmp_path: Path) -> None:
    """A ledger written before the mark whose head row is past its last entry (the last
    entry removed) is broken before and after the move: the last row gets no mark."""
    path = filled(tmp_path / "l.sqlite", 4)
    with opened(path, create=False) as store:
        head = store.recorded_head()
    _as_written_before_the_mark(path, (int(str(head[0])), str(head[1])))
    sql(path, "DELETE FROM kernel_ledger WHERE seq = 4")
    with opened(path, create=False) as store:
        before = verify_store(store)
    with opened(path) as store:
        after = verify_store(store)
        with pytest.raises(EffectError, match="head does not match"):
            store.append(EntryKind.REFUSAL, {"x": 1})
    for outcome in (before, after):
        assert isinstance(outcome, LedgerRefusal)
        assert outcome.reason_codes == (LedgerReason.HEAD_MISMATCH,)


def test_a_stale_head_after_the_tail_was_cut_is_refused(tmp_path: Path) -> None:
    """A connection whose known head was removed behind its back (the last rows
    deleted by hand) appends nothing: its one-statement insert finds no marked row to
    follow, and the locked path refuses the unmarked last row."""
    path = tmp_path / "l.sqlite"
    with opened(path) as store:
        for i in range(4):
            store.append(EntryKind.DECISION, {"i": i})
        sql(path, "DELETE FROM kernel_ledger WHERE seq >= 3")
        with pytest.raises(EffectError, match="head does not match"):
            store.append(EntryKind.REFUSAL, {"x": 1})
        assert [e.seq for e in store.entries()] == [1, 2]


def record_rows(
    steps: list[tuple[EntryKind, dict[str, object]]],
) -> list[tuple[object, ...]]:
    """The rows the record path makes: `next_entry` records (every validator) and the
    tree's completed roots from `TreeBuilder.append` of each `leaf_hash`."""
    head, tree = LedgerHead.empty(), TreeBuilder()
    rows: list[tuple[object, ...]] = []
    for kind, payload in steps:
        entry = next_entry(head, kind, payload)
        nodes = b"".join(tree.append(leaf_hash(entry.entry_id))) or None
        rows.append(
            (entry.seq, entry.entry_id, entry.prev_id, entry.kind.value, entry.payload_digest,
             entry.payload, nodes)
        )  # fmt: skip
        head = LedgerHead(seq=entry.seq, entry_id=entry.entry_id)
    return rows


def stored_rows(path: Path) -> list[tuple[object, ...]]:
    """The stored rows as the record path's (`record_rows`): each narrow row with the
    previous row's id and its payload's digest, computed here, not by the store."""
    db = sqlite3.connect(path)
    narrow = db.execute(
        "SELECT seq, entry_id, kind, payload, nodes FROM kernel_ledger ORDER BY seq"
    ).fetchall()
    db.close()
    rows: list[tuple[object, ...]] = []
    previous = GENESIS_ID
    for seq, entry_id, kind, payload, nodes in narrow:
        digest = hashlib.sha256(payload.encode()).hexdigest()
        rows.append((seq, entry_id, previous, kind, digest, payload, nodes))
        previous = entry_id
    return rows


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(EntryKind),
            st.dictionaries(texts(), json_values(4), max_size=4),
            st.booleans(),
            st.booleans(),
        ),
        max_size=10,
    )
)
def test_appends_store_exactly_the_record_paths_rows(
    steps: list[tuple[EntryKind, dict[str, object], bool, bool]],
) -> None:
    """For all kind/payload sequences, appended by two connections in turn (one
    statement after a head a connection knows, the locked path after another's) and
    durable or not, the stored rows and the returned entries are the record path's:
    same seq, ids, kind, digest, payload text and Merkle subtree roots."""
    with tempfile.TemporaryDirectory(prefix="kernel-test-ledger-") as scratch:
        path = Path(scratch) / "l.sqlite"
        with opened(path) as first, opened(path) as second:
            made = [
                tuple((second if other else first).append(kind, payload, durable=durable))
                for kind, payload, durable, other in steps
            ]
        stored = stored_rows(path)
    expected = record_rows([(kind, payload) for kind, payload, _, _ in steps])
    assert stored == expected
    assert made == [row[:6] for row in expected]


def test_a_failed_insert_leaves_the_connections_tree_as_the_ledger(tmp_path: Path) -> None:
    """An append the database refuses for another reason than another writer (here the
    write lock held elsewhere, no busy wait) is an error, and the connection's next
    appends keep every row's Merkle roots right: its tree does not keep the leaf that
    failed."""
    path = filled(tmp_path / "l.sqlite", 3)
    with opened(path) as store:
        store.append(EntryKind.DECISION, {"i": 3})
        store._db.execute("PRAGMA busy_timeout=0")  # type: ignore[attr-defined]
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(EffectError, match="ledger append failed"):
            store.append(EntryKind.DECISION, {"i": "lost"})
        holder.execute("ROLLBACK")
        holder.close()
        for i in range(4, 9):
            store.append(EntryKind.DECISION, {"i": i})
        outcome = verify_store(store, anchors={})
        assert isinstance(outcome, LedgerVerified)
        assert tree_head(store).root_hash == outcome.root_hash
    assert stored_rows(path) == record_rows([(EntryKind.DECISION, {"i": i}) for i in range(9)])


def test_a_ledger_written_before_the_narrow_row_reads_as_it_was(tmp_path: Path) -> None:
    """Readers of the golden ledger (written before the narrow row) read its columns as
    stored, write nothing, and export it byte for byte as it was exported then; an edit
    of a column it still keeps is caught as before."""
    path = tmp_path / "old.sqlite"
    shutil.copyfile(GOLDEN, path)
    with opened(path, create=False) as store:
        assert store.recorded_head() == GOLDEN_HEAD
        outcome = verify_store(store, anchors={11: GOLDEN_ROOT})
        assert isinstance(outcome, LedgerVerified)
        assert outcome.count == 11
        assert tree_head(store).root_hash == GOLDEN_ROOT
        export_jsonl(store, tmp_path / "e.jsonl")
    assert (tmp_path / "e.jsonl").read_bytes() == GOLDEN.with_suffix(".jsonl").read_bytes()
    assert path.read_bytes() == GOLDEN.read_bytes()
    sql(path, "UPDATE kernel_ledger SET prev_id = printf('%064d', 0) WHERE seq = 3")
    with opened(path, create=False) as store:
        broken = verify_store(store)
    assert isinstance(broken, LedgerRefusal)
    codes = (LedgerReason.LINK_BROKEN, LedgerReason.ENTRY_ID_MISMATCH)
    assert (broken.position, broken.reason_codes) == (3, codes)


def test_the_first_writer_of_an_older_ledger_drops_the_derivable_columns(tmp_path: Path) -> None:
    """The first writer of the golden ledger drops ``prev_id`` and ``payload_digest``;
    every entry reads back as it was (ids, links, digests, payloads: the export is the
    golden one), the tree is the same, and appends go on after it."""
    path = tmp_path / "old.sqlite"
    shutil.copyfile(GOLDEN, path)
    with opened(path) as store:
        export_jsonl(store, tmp_path / "e.jsonl")
        store.append(EntryKind.REFUSAL, {"after": "the narrow row"})
        outcome = verify_store(store, anchors={11: GOLDEN_ROOT})
        assert isinstance(outcome, LedgerVerified)
        assert outcome.count == 12
    assert (tmp_path / "e.jsonl").read_bytes() == GOLDEN.with_suffix(".jsonl").read_bytes()
    db = sqlite3.connect(path)
    columns = [row[1] for row in db.execute("PRAGMA table_info(kernel_ledger)")]
    db.close()
    assert columns == ["seq", "entry_id", "kind", "payload", "nodes", "tail"]
    golden = read_jsonl(GOLDEN.with_suffix(".jsonl"))[0]
    assert [row[:6] for row in stored_rows(path)[:11]] == [tuple(e) for e in golden]


NARROW_TAMPERS = {
    # A narrow row keeps no prev_id nor payload_digest: its id, which covers both, is
    # what an edited payload or a removed neighbour fails (L5), beside L1.
    "edit payload": (["UPDATE kernel_ledger SET payload = '{\"i\":99}' WHERE seq = 3"], 3,
                     (LedgerReason.ENTRY_ID_MISMATCH,)),
    "delete middle": (["DELETE FROM kernel_ledger WHERE seq = 3"], 3,
                      (LedgerReason.SEQUENCE_BROKEN, LedgerReason.ENTRY_ID_MISMATCH)),
    "payload not UTF-8": (["UPDATE kernel_ledger SET payload = X'ff7b7d' WHERE seq = 2"], 2,
                          (LedgerReason.ENTRY_ID_MISMATCH,)),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(NARROW_TAMPERS))
def test_a_narrow_row_edit_is_named_by_its_id(name: str, tmp_path: Path) -> None:
    """Each tamper of a narrow row is caught at that row, with the codes it fails."""
    statements, position, codes = NARROW_TAMPERS[name]
    path = filled(tmp_path / "l.sqlite")
    sql(path, *statements)
    with opened(path, create=False) as store:
        outcome = verify_store(store)
    assert isinstance(outcome, LedgerRefusal)
    assert (outcome.position, outcome.reason_codes) == (position, codes)


def test_check_proof_refuses_unusable_documents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kernel ledger check-proof` and `verify` name what they cannot use (exit 2): a
    head file that is not a head document, a signature that is not a string, a tree
    head that does not parse, ``--signer`` alone, a consistency proof without its old
    head, a file that is no proof, ``--repo`` with an export. `ledger head` of a ledger
    that does not verify is refused (exit 1) with its reason codes."""
    path = filled(tmp_path / "l.sqlite", 3)
    capsys.readouterr()
    assert main(["ledger", "head", "--ledger", str(path)]) == 0
    head = tmp_path / "head.json"
    head.write_text(capsys.readouterr().out)
    assert main(["ledger", "prove", "--consistency", str(head), "--ledger", str(path)]) == 0
    consistency = tmp_path / "consistency.json"
    consistency.write_text(capsys.readouterr().out)
    document = json.loads(head.read_text())

    def written(name: str, value: object) -> str:
        (tmp_path / name).write_text(json.dumps(value))
        return str(tmp_path / name)

    cases = {
        "not a head": (["--head", written("h1.json", {"tree_head": document["tree_head"]}),
                        "--proof", str(consistency), "--old-head", str(head)],
                       "h1.json: not a `kernel ledger head` document"),
        "signature": (["--head", written("h2.json", {**document, "signature": 5}),
                       "--proof", str(consistency), "--old-head", str(head)],
                      "h2.json: signature: expected a string or null"),
        "tree head": (["--head", written("h3.json", {**document, "tree_head": {"tree_size": "3"}}),
                       "--proof", str(consistency), "--old-head", str(head)],
                      "h3.json: "),
        "signer alone": (["--head", str(head), "--proof", str(consistency), "--signer", "op"],
                         "--signer and --allowed-signers go together"),
        "no old head": (["--head", str(head), "--proof", str(consistency)],
                        "a consistency proof is checked against --old-head too"),
        "no proof": (["--head", str(head), "--proof", written("p.json", {"proof": []})],
                     "p.json: not a `kernel ledger prove` document"),
    }  # fmt: skip
    for name, (argv, says) in cases.items():
        assert main(["ledger", "check-proof", *argv]) == 2, name
        err = capsys.readouterr().err
        assert says in err, (name, err)
    export = tmp_path / "ledger.jsonl"
    assert main(["ledger", "export", "--output", str(export), "--ledger", str(path),
                 "--results-root", str(tmp_path)]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["ledger", "verify", "--jsonl", str(export), "--repo", str(tmp_path)]) == 2
    assert "--repo checks a ledger, not an export" in capsys.readouterr().err
    sql(path, "UPDATE kernel_ledger SET kind = 'refusal' WHERE seq = 2")
    assert main(["ledger", "head", "--ledger", str(path)]) == 1
    out = capsys.readouterr().out
    assert "ledger broken at entry 2 (" in out
    assert "entry_id_mismatch" in out


def test_an_export_carries_a_payload_that_is_not_json_and_still_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stored payload edited into text that is not JSON is exported as that text
    (a broken chain exports broken) and the export then fails verification at that
    entry, as the ledger does; so does an export whose payload holds a float (no
    canonical text hashes to any digest)."""
    path = filled(tmp_path / "l.sqlite", 3)
    sql(path, "UPDATE kernel_ledger SET payload = 'not json' WHERE seq = 2")
    export = tmp_path / "l.jsonl"
    with opened(path, create=False) as store:
        assert export_jsonl(store, export) == 3
    lines = export.read_text().splitlines()
    assert json.loads(lines[1])["payload"] == "not json"
    capsys.readouterr()
    assert main(["ledger", "verify", "--jsonl", str(export)]) == 1
    assert "entry 2" in capsys.readouterr().out
    floated = json.loads(lines[0])
    floated["payload"] = {"i": 0.5}
    export.write_text("\n".join([json.dumps(floated), *lines[1:]]) + "\n")
    assert main(["ledger", "verify", "--jsonl", str(export)]) == 1
    assert "entry 1" in capsys.readouterr().out


def test_tree_heads_and_proofs_refuse_what_the_ledger_cannot_back(tmp_path: Path) -> None:
    """A consistency proof from a size the ledger never reached, and a tree head of a
    ledger whose last entry lost its tail mark, are effect errors naming the ledger."""
    path = filled(tmp_path / "l.sqlite", 3)
    with (
        opened(path, create=False) as store,
        pytest.raises(EffectError, match="the ledger has 3 entries, not 10"),
    ):
        prove_consistency(store, 10)
    sql(path, "UPDATE kernel_ledger SET tail = 0")
    with (
        opened(path, create=False) as store,
        pytest.raises(EffectError, match=r"malformed recorded head \(run `kernel ledger"),
    ):
        tree_head(store)


def test_a_postgres_ledger_without_its_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the optional psycopg, a postgresql:// ledger is unusable input naming
    the extra to install, before any connection is tried."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    assert main(["ledger", "verify", "--ledger", "postgresql://db.invalid/ledger"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'evidence-kernel[postgres]'" in err
