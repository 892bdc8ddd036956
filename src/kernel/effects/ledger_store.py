"""Stores of the evidence ledger: SQLite (default), PostgreSQL, JSON Lines export.

The chain rules live in the pure `kernel.decide.ledger`; a store only keeps entries and a
recorded head, and appends under a lock that serialises writers:

- SQLite (a file path, default ``results/ledger.sqlite``): WAL journal, a busy
  timeout, so writers in several processes queue instead of failing and none is
  lost. The recorded head is the last row, which carries the tail mark (``tail =
  1``); removing the last entries leaves the new last row unmarked. The first append
  of a connection is one ``BEGIN IMMEDIATE`` transaction (the write lock, taken before
  the head is read); later ones are one plain ``INSERT`` (its own transaction) after
  the head this connection appended after. A trigger refuses any insert that does not
  follow the marked row and moves the mark, inside the insert's own statement, so a
  connection whose head is stale goes back to the locked path. A row keeps what
  cannot be derived (seq, id, kind, payload, subtree roots, mark): its ``prev_id`` is
  the previous row's id and its ``payload_digest`` its payload's hash, both covered by
  its id. A ledger written before the mark (its head in a row of its own) or before
  the narrow row (both columns kept) is read as it is and moved to the current form
  by its first writer. Durability:
  ``synchronous=NORMAL`` (no fsync per append): in WAL mode a crash of the process
  never loses a committed append; a power loss may drop the appends made since the
  last sync, never break the chain. An append that an act outside the ledger names
  (``durable=True``: the permit a promotion commit's trailer anchors, the intent
  before a branch moves, a staged ref's entry) commits with ``synchronous=FULL``:
  one fsync of the log, which makes it and every append before it durable. Each row
  also keeps the Merkle subtree roots its entry completes (``nodes``), so a proof or
  tree head reads O(log n) rows.
  Readers (``create=False``: verify, show, export, prove) open the file read-only
  and write nothing: ``immutable`` when no write-ahead log exists (so no ``-wal`` or
  ``-shm`` file is made), else read-only beside the writer's log.
- PostgreSQL (a ``postgresql://`` URL; optional extra ``postgres``, psycopg): the
  entries with their subtree roots and the head in a row of its own; an append locks
  the head row (``SELECT ... FOR UPDATE``) so writers on several machines serialise.
- JSON Lines (`export_jsonl` / `read_jsonl`): one canonical entry per line, payload
  as a JSON object, then one head line; it verifies without the database.

Before appending, a store checks that its recorded head is its last entry (a
mismatch, or an unmarked last row, means the ledger was edited behind its back) and
refuses to append
(`EffectError`); full verification is `LedgerStore.verify`.

Every failure (unreadable file, not a database, server down) is an `EffectError`.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Protocol

from kernel.decide.ledger import (
    GENESIS_ID,
    EntryKind,
    LedgerHead,
    LedgerRefusal,
    LedgerVerified,
    NewEntry,
    RawEntry,
    entry_row_after,
    new_entry,
    verify_chain,
)
from kernel.decide.merkle import (
    ConsistencyProof,
    InclusionProof,
    TreeBuilder,
    TreeHead,
    consistency_path,
    frontier_of,
    inclusion_path,
    leaf_hash,
    node_hash,
)
from kernel.effects.files import check_input
from kernel.effects.ledger_jsonl import export_jsonl, read_jsonl
from kernel.errors import ConfigError, EffectError
from kernel.records.identity import is_digest, sha256_bytes

__all__ = [
    "DEFAULT_LEDGER",
    "WAL_PAGES",
    "LedgerStore",
    "export_jsonl",
    "open_store",
    "opened",
    "prove_consistency",
    "prove_inclusion",
    "read_jsonl",
    "redact",
    "tree_head",
    "verify_store",
]

DEFAULT_LEDGER: Final = "results/ledger.sqlite"
_BUSY_TIMEOUT_S: Final = 120.0
WAL_PAGES: Final = 10_000
"""Pages the write-ahead log holds before a writer copies them into the file (SQLite's
default is 1,000). Every append rewrites the last leaf page; a checkpoint copies each
page once, so a longer log makes that page nearly free (about 40 MB of log at most)."""

_SQLITE_SCHEMA: Final = (
    # A row keeps what cannot be derived: ``prev_id`` is the previous row's id and
    # ``payload_digest`` the payload's hash (a ledger written before keeps both
    # columns until its first writer drops them: `_NARROW`).
    "CREATE TABLE IF NOT EXISTS kernel_ledger ("
    " seq INTEGER PRIMARY KEY, entry_id TEXT NOT NULL, kind TEXT NOT NULL,"
    " payload TEXT NOT NULL, nodes BLOB, tail INTEGER)",
    # An index on entry ids (briefly made by this store) costs every append a page.
    "DROP INDEX IF EXISTS kernel_ledger_by_id",
    # The head is the last row, marked ``tail = 1`` (L6): every insert must follow the
    # marked row (its seq and id) and moves the mark, inside the insert's own
    # statement. The previous row is nearly always on the new row's page, so an append
    # writes one page (a separate head row cost a second page and a trigger update in
    # every commit). Removing the last entries leaves the new last row unmarked. An
    # append is one plain INSERT (SQLite's fast path for a rowid past the last).
    # The row's link to the previous one is its id (which covers the previous id):
    # verification checks it, the trigger the sequence and the mark.
    "CREATE TRIGGER IF NOT EXISTS kernel_ledger_follows_tail AFTER INSERT ON kernel_ledger"
    " BEGIN UPDATE kernel_ledger SET tail = NULL WHERE seq = NEW.seq - 1 AND tail = 1;"
    " SELECT RAISE(ABORT, 'not after the last entry') WHERE NEW.tail IS NOT 1"
    " OR (changes() = 0 AND NEW.seq <> 1); END",
)
# Triggers of ledgers written before (a head row's, the wide row's), replaced.
_OLD_TRIGGERS: Final = tuple(
    f"DROP TRIGGER IF EXISTS kernel_ledger_{name}"
    for name in ("head_follows", "head_moves", "after_head", "follows_tail")
)
# A ledger written before the narrow row (2026-12-03): its first writer drops the two
# derivable columns, in the transaction that opens it (the ids stay as they were).
_NARROW: Final = (
    "ALTER TABLE kernel_ledger DROP COLUMN prev_id",
    "ALTER TABLE kernel_ledger DROP COLUMN payload_digest",
)
# A ledger written before the tail mark: its head row marks the last entry when it
# matches it (a head row that does not leaves the last row unmarked: L6 still fails).
_ADD_TAIL: Final = (
    "ALTER TABLE kernel_ledger ADD COLUMN tail INTEGER",
    "UPDATE kernel_ledger SET tail = 1 WHERE seq = (SELECT MAX(seq) FROM kernel_ledger)"
    " AND EXISTS (SELECT 1 FROM kernel_ledger_head AS h"
    " WHERE h.seq = kernel_ledger.seq AND h.entry_id = kernel_ledger.entry_id)",
    "DROP TABLE kernel_ledger_head",
)
_PG_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS kernel_ledger ("
    " seq BIGINT PRIMARY KEY, entry_id TEXT NOT NULL, prev_id TEXT NOT NULL,"
    " kind TEXT NOT NULL, payload_digest TEXT NOT NULL, payload TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kernel_ledger_head ("
    " one INTEGER PRIMARY KEY CHECK (one = 1), seq BIGINT NOT NULL, entry_id TEXT NOT NULL)",
    # The Merkle subtree roots an entry completes, as in SQLite (NULL in a ledger written
    # before: its roots are computed from the leaves).
    "ALTER TABLE kernel_ledger ADD COLUMN IF NOT EXISTS nodes BYTEA",
)
_SELECT_ENTRIES: Final = (
    "SELECT seq, entry_id, prev_id, kind, payload_digest, payload FROM kernel_ledger ORDER BY seq"
)
# SQLite's narrow rows for verification: no ``prev_id`` nor ``payload_digest`` (None:
# `verify_chain` derives them), the payload as its stored UTF-8 bytes (hashed as they
# are, without a decode and a re-encode per entry).
_SELECT_NARROW_RAW: Final = (
    "SELECT seq, entry_id, NULL, kind, NULL, CAST(payload AS BLOB) FROM kernel_ledger ORDER BY seq"
)
# ... and for readers: the previous row's id beside each row (the ``prev_id`` it
# stands for); the payload's hash is added in Python.
_SELECT_NARROW: Final = (
    "SELECT seq, entry_id, LAG(entry_id, 1, printf('%064d', 0)) OVER (ORDER BY seq), kind,"
    " payload FROM kernel_ledger ORDER BY seq"
)
# A ledger written before the narrow row, read-only: its columns as stored.
_SELECT_WIDE_RAW: Final = (
    "SELECT seq, entry_id, prev_id, kind, payload_digest, CAST(payload AS BLOB)"
    " FROM kernel_ledger ORDER BY seq"
)
# The Merkle subtree roots an entry completes (level 1 up, 32 bytes each); NULL in a
# ledger written before the tree (its roots are then computed from the leaves).
_ADD_NODES: Final = "ALTER TABLE kernel_ledger ADD COLUMN nodes BLOB"
_INSERT: Final = (
    "INSERT INTO kernel_ledger (seq, entry_id, kind, payload, nodes, tail)"
    " VALUES (?, ?, ?, ?, ?, 1)"
)
_SELECT_SEQ: Final = "SELECT seq FROM kernel_ledger WHERE entry_id = ?"
_SELECT_NODE: Final = "SELECT entry_id, nodes FROM kernel_ledger WHERE seq = ?"
_SELECT_LAST: Final = "SELECT seq, entry_id FROM kernel_ledger ORDER BY seq DESC LIMIT 1"
_SELECT_HEAD: Final = "SELECT seq, entry_id FROM kernel_ledger_head WHERE one = 1"
# SQLite's head: the last row when it is marked; else the last marked row (a removed
# tail), or none.
_SELECT_TAIL: Final = "SELECT seq, entry_id, tail FROM kernel_ledger ORDER BY seq DESC LIMIT 1"
_SELECT_MARKED: Final = (
    "SELECT seq, entry_id FROM kernel_ledger WHERE tail = 1 ORDER BY seq DESC LIMIT 1"
)


class LedgerStore(Protocol):
    """What every store offers."""

    @property
    def locator(self) -> str:
        """Where the store is (path or URL without password)."""
        ...

    def append(
        self, kind: EntryKind, payload: Mapping[str, object], *, durable: bool = False
    ) -> NewEntry:
        """Append one entry atomically after the current head; returns it. ``durable``:
        on stable storage when this returns, with every entry before it (what an act
        outside the ledger names: a commit's trailer, a ref's move)."""
        ...

    def entries(self) -> Iterator[RawEntry]:
        """Every entry in sequence order, unchecked."""
        ...

    def recorded_head(self) -> tuple[object, object]:
        """The ``(seq, entry_id)`` the store records as its head, unchecked (SQLite:
        the row carrying the tail mark; PostgreSQL: its head row; ``(0, GENESIS_ID)``
        when it has none yet)."""
        ...

    def seq_of(self, entry_id: str) -> int | None:
        """The sequence number of the entry with this id (None when there is none)."""
        ...

    def entry_at(self, seq: int) -> str | None:
        """The id of the entry with this sequence number (None when there is none)."""
        ...

    def perfect(self, level: int, index: int) -> bytes:
        """The root of a perfect Merkle subtree (`kernel.decide.ledger.Perfect`)."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


def verify_store(
    store: LedgerStore,
    expected_head: LedgerHead | None = None,
    anchors: Mapping[int, str] | None = None,
) -> LedgerVerified | LedgerRefusal:
    """Recompute ``store``'s chain (`kernel.decide.ledger.verify_chain`; ``anchors``: tree size
    -> Merkle root recorded elsewhere, and the tree is computed)."""
    rows = store.verify_rows() if isinstance(store, SqliteStore) else store.entries()
    outcome = verify_chain(
        rows, recorded_head=store.recorded_head(), expected_head=expected_head, anchors=anchors
    )
    if isinstance(store, SqliteStore) and store.changed_while_read():
        # A writer began during an immutable read: read again, through its log.
        outcome = verify_chain(
            store.verify_rows(),
            recorded_head=store.recorded_head(),
            expected_head=expected_head,
            anchors=anchors,
        )
    return outcome


def tree_head(store: LedgerStore) -> TreeHead:
    """The Merkle tree head of ``store`` as recorded (its head's size, the root of the
    stored subtree roots): O(log n) reads. A head to sign comes from a verified chain
    (`verify_store` with anchors); this one is what a promotion trailer records.

    Raises:
        EffectError: the store cannot be read or its head is malformed.
    """
    seq, _ = _checked_head(store)
    tree = TreeBuilder(seq, [_perfect(store, *part) for part in frontier_of(seq)])
    return TreeHead(tree_size=seq, root_hash=tree.root().hex())


def _checked_head(store: LedgerStore) -> tuple[int, str]:
    seq, entry_id = store.recorded_head()
    if type(seq) is not int or seq < 0 or not is_digest(entry_id):
        raise EffectError(f"{store.locator}: malformed recorded head (run `kernel ledger verify`)")
    return seq, str(entry_id)


def _perfect(store: LedgerStore, level: int, index: int) -> bytes:
    try:
        return store.perfect(level, index)
    except (sqlite3.Error, ValueError) as e:
        raise EffectError(f"{store.locator}: cannot read the Merkle tree ({e})") from e


def prove_inclusion(
    store: LedgerStore, entry: str | int, tree_size: int | None = None
) -> InclusionProof:
    """The proof that an entry is in the tree of ``tree_size`` entries (default: the
    whole ledger). ``entry`` is its sequence number (found by key: a promotion
    trailer's ``Kernel-Ledger-Head`` size is its permit's) or its id (found by a scan:
    no index slows every append for it).

    Raises:
        EffectError: no such entry within that tree, or an unreadable store.
    """
    size = _checked_head(store)[0] if tree_size is None else tree_size
    if isinstance(entry, int):
        seq: int | None = entry
        entry_id = store.entry_at(entry) or ""
    else:
        seq, entry_id = store.seq_of(entry), entry
    if seq is None or not is_digest(entry_id) or not 1 <= seq <= size:
        raise EffectError(f"{store.locator}: entry {entry_id} is not in the tree of {size}")
    path = inclusion_path(seq - 1, size, lambda level, index: _perfect(store, level, index))
    return InclusionProof(
        entry_id=entry_id, leaf_index=seq - 1, tree_size=size, path=tuple(p.hex() for p in path)
    )


def prove_consistency(
    store: LedgerStore, old_size: int, new_size: int | None = None
) -> ConsistencyProof:
    """The proof that the tree of ``old_size`` entries is a prefix of the tree of
    ``new_size`` (default: the whole ledger).

    Raises:
        EffectError: ``old_size`` beyond the ledger, or an unreadable store.
    """
    size = _checked_head(store)[0] if new_size is None else new_size
    if not 0 <= old_size <= size:
        raise EffectError(f"{store.locator}: the ledger has {size} entries, not {old_size}")
    path = consistency_path(old_size, size, lambda level, index: _perfect(store, level, index))
    return ConsistencyProof(old_size=old_size, new_size=size, path=tuple(p.hex() for p in path))


_SECRETS: Final = (
    re.compile(r"(postgres(?:ql)?://[^/?#@\s]*?:)[^/?#@\s]*@", re.IGNORECASE),
    re.compile(r"([?&](?:password|sslpassword)=)[^&#\s]*", re.IGNORECASE),
)


def redact(text: str) -> str:
    """``text`` with every password of a PostgreSQL URL (``user:SECRET@`` or
    ``?password=SECRET``) replaced by ``***``: what errors and locators print."""
    for pattern in _SECRETS:
        text = pattern.sub(r"\1***" + ("@" if pattern is _SECRETS[0] else ""), text)
    return text


def _raw_head(row: Any) -> tuple[object, object]:
    return (0, GENESIS_ID) if row is None else (row[0], row[1])


def _check_head(recorded: Any, last: Any, where: object) -> tuple[int, str]:
    """The head to append after: the recorded head, when it is the last entry."""
    recorded_head, last_head = _raw_head(recorded), _raw_head(last)
    seq, entry_id = recorded_head
    if recorded_head != last_head or type(seq) is not int or not is_digest(entry_id):
        raise _edited(where)
    return seq, str(entry_id)


def _edited(where: object) -> EffectError:
    return EffectError(
        f"{where}: ledger head does not match its last entry (edited?); "
        "run `kernel ledger verify` - nothing appended"
    )


_new_tuple: Final = tuple.__new__
"""A `NewEntry` made in C (a named tuple's own constructor is Python code)."""

_UNMARKED: Final = "no entry marked last"
"""SQLite's recorded head when no row carries the tail mark (L6 names it)."""


class SqliteStore:
    """The embedded default store (module docstring)."""

    def __init__(self, path: Path, *, create: bool) -> None:
        self._path = path
        # This connection's last append: its id and the tree up to it (its size the
        # entry's seq).
        self._known: tuple[str, TreeBuilder] | None = None
        self._snapshot: tuple[int, int] | None = None
        # A ledger written before the tail mark keeps its head in a row of its own
        # (read-only openers cannot move it to the mark).
        self._head_row = False
        # A ledger written before the narrow row, opened read-only: its own columns.
        self._wide = False
        try:
            if create:
                path.parent.mkdir(parents=True, exist_ok=True)
                # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE).
                self._db = sqlite3.connect(path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}")
                self._create()
                self._cursor = self._db.cursor()
            else:
                check_input(path, what="ledger")
                self._open_read_only(immutable=not os.path.lexists(f"{path}-wal"))
        except (sqlite3.Error, OSError) as e:
            raise EffectError(f"{path}: not a usable ledger ({e})") from e

    def _create(self) -> None:
        """The tables and trigger, one transaction (concurrent openers serialise); a
        ledger written before gets the ``nodes`` column and the tail mark."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute(_SQLITE_SCHEMA[0])
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(kernel_ledger)")}
            if "nodes" not in columns:
                self._db.execute(_ADD_NODES)
            if "tail" not in columns:
                for statement in _ADD_TAIL:
                    self._db.execute(statement)
            for statement in _OLD_TRIGGERS:
                self._db.execute(statement)
            if "prev_id" in columns:
                for statement in _NARROW:
                    self._db.execute(statement)
            for statement in _SQLITE_SCHEMA[1:]:
                self._db.execute(statement)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _open_read_only(self, *, immutable: bool) -> None:
        target = urllib.parse.quote(str(self._path.absolute()))
        # ``immutable`` when no writer's log exists: a read-only open would create
        # ``-wal`` and ``-shm`` files; beside a writer's log, read-only through it.
        uri = f"file:{target}?mode=ro" + ("&immutable=1" if immutable else "")
        self._db = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(kernel_ledger)")}
        if "tail" not in columns:
            # Not a ledger at all, or one written before the mark: its head row.
            self._db.execute(_SELECT_HEAD).fetchone()
            self._head_row = True
        self._wide = "prev_id" in columns
        self._snapshot = _stat(self._path) if immutable else None
        self._cursor = self._db.cursor()

    def changed_while_read(self) -> bool:
        """True (and the file reopened read-only through the log) when a writer began
        while this immutable reader read: what it read may predate the writer's log."""
        if self._snapshot is None:
            return False
        if self._snapshot == _stat(self._path) and not os.path.lexists(f"{self._path}-wal"):
            return False
        self._db.close()
        self._open_read_only(immutable=False)
        return True

    @property
    def locator(self) -> str:
        return str(self._path)

    def append(
        self, kind: EntryKind, payload: Mapping[str, object], *, durable: bool = False
    ) -> NewEntry:
        try:
            if durable:
                return self._append_durable(kind, payload)
            known = self._known
            if known is not None:
                entry = self._append_after(kind, payload, known)
                if entry is not None:
                    return entry
            return self._append_locked(kind, payload)
        except sqlite3.Error as e:
            raise EffectError(f"{self.locator}: ledger append failed ({e})") from e

    def _append_durable(self, kind: EntryKind, payload: Mapping[str, object]) -> NewEntry:
        # FULL syncs the log at this commit: this entry and every one before it.
        self._db.execute("PRAGMA synchronous=FULL")
        try:
            known = self._known
            entry = None if known is None else self._append_after(kind, payload, known)
            return self._append_locked(kind, payload) if entry is None else entry
        finally:
            self._db.execute("PRAGMA synchronous=NORMAL")

    def _append_after(
        self, kind: EntryKind, payload: Mapping[str, object], known: tuple[str, TreeBuilder]
    ) -> NewEntry | None:
        """The one-statement append after a head this connection appended (so made by
        `new_entry`, not checked again); None when the ledger moved on (another
        writer) and the locked path must decide. The payload and kind are checked
        (`entry_row_after`); nothing this connection made is."""
        head_id, tree = known
        # The row and the tree's new roots in one pure call; the tree grows in place.
        row = entry_row_after(
            tree, head_id, kind, payload if type(payload) is dict else dict(payload)
        )
        try:
            # One plain INSERT, its own transaction: the trigger refuses it unless the
            # last row is still ``head``, marked; the key refuses a seq another writer
            # took. One cursor for every append (no cursor object per call).
            self._cursor.execute(_INSERT, (row[0], row[1], row[3], row[5], row[6]))
        except sqlite3.Error as e:
            # The tree holds a leaf the ledger does not: the locked path rebuilds it
            # from the stored roots (a busy or full disk as much as another writer).
            self._known = None
            if isinstance(e, sqlite3.IntegrityError):
                return None
            raise
        self._known = (row[1], tree)
        return _new_tuple(NewEntry, (row[0], row[1], head_id, kind, row[4], row[5]))

    def _append_locked(self, kind: EntryKind, payload: Mapping[str, object]) -> NewEntry:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            # The last entry, which must carry the tail mark.
            last = self._db.execute(_SELECT_TAIL).fetchone()
            if last is not None and last[2] != 1:
                raise _edited(self._path)
            head = _check_head(last, last, self._path)
            entry = new_entry(head, kind, dict(payload))
            tree = TreeBuilder(head[0], [self.perfect(*part) for part in frontier_of(head[0])])
            nodes = tree.append_entry(entry.entry_id)
            self._db.execute(
                _INSERT, (entry.seq, entry.entry_id, entry.kind.value, entry.payload, nodes)
            )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._known = (entry.entry_id, tree)
        return entry

    def perfect(self, level: int, index: int) -> bytes:
        """The root of a perfect subtree (`kernel.decide.ledger.Perfect`): stored in the row of
        its last leaf, or computed from its halves where that row has none.

        Raises:
            EffectError: the row is missing or its id is not a digest (a tampered
                store: run ``kernel ledger verify``).
        """
        return _perfect_of(lambda seq: self._db.execute(_SELECT_NODE, (seq,)).fetchone(),
                           self.locator, level, index)  # fmt: skip

    def entries(self) -> Iterator[RawEntry]:
        try:
            if self._wide:
                for row in self._db.execute(_SELECT_ENTRIES):
                    yield RawEntry(*row)
                return
            for seq, entry_id, prev_id, kind, payload in self._db.execute(_SELECT_NARROW):
                yield RawEntry(seq, entry_id, prev_id, kind, _digest_of(payload), payload)
        except sqlite3.Error as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({e})") from e

    def verify_rows(self) -> Iterator[tuple[object, ...]]:
        """`entries` as plain row tuples (RawEntry's field order), each payload as its
        stored UTF-8 bytes: what verification hashes, without per-row conversions. A
        narrow row gives None for ``prev_id`` and ``payload_digest`` (`RawEntry`: an
        edited payload then fails L5, the id, not L4)."""
        try:
            yield from self._db.execute(_SELECT_WIDE_RAW if self._wide else _SELECT_NARROW_RAW)
        except sqlite3.Error as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({e})") from e

    def recorded_head(self) -> tuple[object, object]:
        """The last entry when it carries the tail mark; else the last entry that
        does (a removed tail), or ``(None, "no entry marked last")``."""
        try:
            if self._head_row:
                return _raw_head(self._db.execute(_SELECT_HEAD).fetchone())
            last = self._db.execute(_SELECT_TAIL).fetchone()
            if last is None or last[2] == 1:
                return _raw_head(last)
            marked = self._db.execute(_SELECT_MARKED).fetchone()
            return (None, _UNMARKED) if marked is None else _raw_head(marked)
        except sqlite3.Error as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({e})") from e

    def seq_of(self, entry_id: str) -> int | None:
        try:
            row = self._db.execute(_SELECT_SEQ, (entry_id,)).fetchone()
        except sqlite3.Error as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({e})") from e
        return row[0] if row is not None and type(row[0]) is int else None

    def entry_at(self, seq: int) -> str | None:
        try:
            row = self._db.execute(_SELECT_NODE, (seq,)).fetchone()
        except (sqlite3.Error, OverflowError) as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({e})") from e
        return row[0] if row is not None and type(row[0]) is str else None

    def close(self) -> None:
        self._db.close()


def _perfect_of(row_at: Callable[[int], Any], where: str, level: int, index: int) -> bytes:
    """A perfect subtree's root from the store's rows (``row_at(seq)``: the row's
    ``(entry_id, nodes)`` or None): kept in the row of its last leaf, or computed from
    its halves where that row keeps none (a ledger written before the column).

    Raises:
        EffectError: the row is missing or its id is not a digest (a tampered store).
    """
    seq = (index + 1) << level
    row = row_at(seq)
    if row is None or not is_digest(row[0]):
        raise EffectError(f"{where}: entry {seq} missing or malformed (verify it)")
    if level == 0:
        return leaf_hash(row[0])
    nodes = bytes(row[1]) if isinstance(row[1], bytes | memoryview) else None
    if nodes is not None and len(nodes) >= level * 32:
        return nodes[(level - 1) * 32 : level * 32]
    return node_hash(
        _perfect_of(row_at, where, level - 1, 2 * index),
        _perfect_of(row_at, where, level - 1, 2 * index + 1),
    )


def _digest_of(payload: object) -> str:
    """The hash a narrow row's payload stands for as its ``payload_digest`` ("" for a
    value no entry stores: L4 names it)."""
    if type(payload) is bytes:
        return sha256_bytes(payload)
    if type(payload) is str:
        return sha256_bytes(payload.encode("utf-8", "surrogatepass"))
    return ""


def _row(entry: NewEntry) -> tuple[object, ...]:
    return (
        entry.seq,
        entry.entry_id,
        entry.prev_id,
        entry.kind.value,
        entry.payload_digest,
        entry.payload,
    )


def _stat(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_mtime_ns, status.st_size


class PostgresStore:
    """The shared store for orchestrators on several machines (module docstring)."""

    def __init__(self, url: str, *, create: bool) -> None:
        try:
            import psycopg
        except ImportError as e:
            raise ConfigError(
                "a postgresql:// ledger needs the optional extra: "
                "pip install 'evidence-kernel[postgres]'"
            ) from e
        self._psycopg = psycopg
        self._url = url
        self._known: tuple[tuple[int, str], TreeBuilder] | None = None
        try:
            self._db = psycopg.connect(url, autocommit=True, connect_timeout=10)
            if not create:
                # Readers write nothing, whatever the role may do.
                self._db.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            else:
                with self._db.transaction():
                    # Serialise concurrent first-time creators.
                    self._db.execute("SELECT pg_advisory_xact_lock(7316243)")
                    for statement in _PG_SCHEMA:
                        self._db.execute(statement)
        except psycopg.Error as e:
            raise EffectError(f"{self.locator}: not a usable ledger ({_first_line(e)})") from e

    @property
    def locator(self) -> str:
        # Never print a password.
        return redact(self._url)

    def append(
        self, kind: EntryKind, payload: Mapping[str, object], *, durable: bool = False
    ) -> NewEntry:
        # Every commit is durable already (unless the server's operator turned
        # ``synchronous_commit`` off): ``durable`` asks nothing more here.
        del durable
        psycopg = self._psycopg
        try:
            with self._db.transaction():
                # The head row is the lock; an empty ledger has none yet, so the
                # first writers serialise on an advisory lock instead.
                self._db.execute("SELECT pg_advisory_xact_lock(7316244)")
                head = _check_head(
                    self._db.execute(_SELECT_HEAD + " FOR UPDATE").fetchone(),
                    self._db.execute(_SELECT_LAST).fetchone(),
                    self.locator,
                )
                entry = new_entry(head, kind, dict(payload))
                tree = self._frontier(head)
                nodes = tree.append_entry(entry.entry_id)
                self._db.execute(
                    "INSERT INTO kernel_ledger (seq, entry_id, prev_id, kind, payload_digest,"
                    " payload, nodes) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    (*_row(entry), nodes),
                )
                self._db.execute(
                    "INSERT INTO kernel_ledger_head VALUES (1, %s, %s) ON CONFLICT (one) "
                    "DO UPDATE SET seq = excluded.seq, entry_id = excluded.entry_id",
                    (entry.seq, entry.entry_id),
                )
        except psycopg.Error as e:
            self._known = None
            raise EffectError(f"{self.locator}: ledger append failed ({_first_line(e)})") from e
        self._known = ((entry.seq, entry.entry_id), tree)
        return entry

    def _frontier(self, head: tuple[int, str]) -> TreeBuilder:
        """The tree up to ``head`` (read under the append's lock): this connection's own
        when it appended that head last, else its O(log n) stored roots."""
        if self._known is not None and self._known[0] == head:
            return self._known[1]
        return TreeBuilder(head[0], [self.perfect(*part) for part in frontier_of(head[0])])

    def entries(self) -> Iterator[RawEntry]:
        psycopg = self._psycopg
        try:
            with self._db.cursor(name="kernel_ledger_read") as cursor, self._db.transaction():
                cursor.execute(_SELECT_ENTRIES)
                for row in cursor:
                    yield RawEntry(*row)
        except psycopg.Error as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({_first_line(e)})") from e

    def recorded_head(self) -> tuple[object, object]:
        psycopg = self._psycopg
        try:
            return _raw_head(self._db.execute(_SELECT_HEAD).fetchone())
        except psycopg.Error as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({_first_line(e)})") from e

    def seq_of(self, entry_id: str) -> int | None:
        psycopg = self._psycopg
        try:
            row = self._db.execute(_SELECT_SEQ.replace("?", "%s"), (entry_id,)).fetchone()
        except psycopg.Error as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({_first_line(e)})") from e
        return row[0] if row is not None and type(row[0]) is int else None

    def entry_at(self, seq: int) -> str | None:
        psycopg = self._psycopg
        try:
            row = self._db.execute(
                "SELECT entry_id FROM kernel_ledger WHERE seq = %s", (seq,)
            ).fetchone()
        except psycopg.Error as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({_first_line(e)})") from e
        return row[0] if row is not None and type(row[0]) is str else None

    def perfect(self, level: int, index: int) -> bytes:
        psycopg = self._psycopg

        def row_at(seq: int) -> Any:
            return self._db.execute(
                "SELECT entry_id, nodes FROM kernel_ledger WHERE seq = %s", (seq,)
            ).fetchone()

        try:
            return _perfect_of(row_at, self.locator, level, index)
        except psycopg.Error as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({_first_line(e)})") from e

    def close(self) -> None:
        self._db.close()


def _first_line(error: BaseException) -> str:
    text = redact(str(error)).strip()
    return text.splitlines()[0] if text else type(error).__name__


def open_store(locator: str | Path, *, create: bool = True) -> LedgerStore:
    """Open the ledger at ``locator``: a ``postgresql://`` URL or a SQLite file path.

    Args:
        create: create the file/tables when missing (appenders); verifiers pass False
            so a mistyped path is an error, not a fresh empty ledger.

    Raises:
        EffectError: the store cannot be opened.
        ConfigError: a PostgreSQL URL without the ``postgres`` extra installed.
    """
    text = str(locator)
    if text.startswith(("postgresql://", "postgres://")):
        return PostgresStore(text, create=create)
    return SqliteStore(Path(text), create=create)


@contextlib.contextmanager
def opened(locator: str | Path, *, create: bool = True) -> Iterator[LedgerStore]:
    """`open_store` as a context manager that always closes."""
    store = open_store(locator, create=create)
    try:
        yield store
    finally:
        store.close()
