"""Stores of the evidence ledger: SQLite (default), PostgreSQL, JSON Lines export.

The chain rules live in the pure `kernel.ledger`; a store only keeps entries and a
separately recorded head, and appends under a lock that serialises writers:

- SQLite (a file path, default ``results/ledger.sqlite``): WAL journal, and every
  append is one ``BEGIN IMMEDIATE`` transaction (the database's write lock, taken
  before the head is read), with a busy timeout, so writers in several processes
  queue instead of failing and none is lost. ``synchronous=NORMAL``: in WAL mode a
  crash of the process never loses a committed append; a power loss may drop the
  last appends, never break the chain.
- PostgreSQL (a ``postgresql://`` URL; optional extra ``postgres``, psycopg): the
  same tables; an append locks the head row (``SELECT ... FOR UPDATE``) so writers
  on several machines serialise.
- JSON Lines (`export_jsonl` / `read_jsonl`): one canonical entry per line, payload
  as a JSON object, then one head line; it verifies without the database.

Before appending, a store checks that its recorded head is its last entry (a
mismatch means the ledger was edited behind its back) and refuses to append
(`EffectError`); full verification is `LedgerStore.verify`.

Every failure (unreadable file, not a database, server down) is an `EffectError`.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Protocol

import orjson

from kernel.effects.files import atomic_write_bytes, read_input
from kernel.errors import CanonicalizationError, ConfigError, EffectError
from kernel.identity import canonical_json, is_digest
from kernel.ledger import (
    GENESIS_ID,
    EntryKind,
    LedgerBroken,
    LedgerHead,
    LedgerIntact,
    NewEntry,
    RawEntry,
    new_entry,
    verify_chain,
)

__all__ = [
    "DEFAULT_LEDGER",
    "LedgerStore",
    "export_jsonl",
    "open_store",
    "opened",
    "read_jsonl",
    "verify_store",
]

DEFAULT_LEDGER: Final = "results/ledger.sqlite"
_BUSY_TIMEOUT_S: Final = 120.0
_HEAD_LINE: Final = "ledger_head"

_SQLITE_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS kernel_ledger ("
    " seq INTEGER PRIMARY KEY, entry_id TEXT NOT NULL, prev_id TEXT NOT NULL,"
    " kind TEXT NOT NULL, payload_digest TEXT NOT NULL, payload TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kernel_ledger_head ("
    " one INTEGER PRIMARY KEY CHECK (one = 1), seq INTEGER NOT NULL, entry_id TEXT NOT NULL)",
    # The head follows every append inside the append's own transaction (one round
    # trip fewer per append than a second statement).
    "CREATE TRIGGER IF NOT EXISTS kernel_ledger_head_follows AFTER INSERT ON kernel_ledger"
    " BEGIN INSERT OR REPLACE INTO kernel_ledger_head VALUES (1, NEW.seq, NEW.entry_id); END",
)
_PG_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS kernel_ledger ("
    " seq BIGINT PRIMARY KEY, entry_id TEXT NOT NULL, prev_id TEXT NOT NULL,"
    " kind TEXT NOT NULL, payload_digest TEXT NOT NULL, payload TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kernel_ledger_head ("
    " one INTEGER PRIMARY KEY CHECK (one = 1), seq BIGINT NOT NULL, entry_id TEXT NOT NULL)",
)
_SELECT_ENTRIES: Final = (
    "SELECT seq, entry_id, prev_id, kind, payload_digest, payload FROM kernel_ledger ORDER BY seq"
)
# SQLite hands the payload over as its stored UTF-8 bytes: verification hashes them
# as they are, without a decode and a re-encode per entry.
_SELECT_ENTRIES_RAW: Final = (
    "SELECT seq, entry_id, prev_id, kind, payload_digest, CAST(payload AS BLOB)"
    " FROM kernel_ledger ORDER BY seq"
)
_SELECT_LAST: Final = "SELECT seq, entry_id FROM kernel_ledger ORDER BY seq DESC LIMIT 1"
_SELECT_HEAD: Final = "SELECT seq, entry_id FROM kernel_ledger_head WHERE one = 1"
_SELECT_BOTH: Final = (
    "SELECT (SELECT seq FROM kernel_ledger_head WHERE one = 1),"
    " (SELECT entry_id FROM kernel_ledger_head WHERE one = 1),"
    " (SELECT seq FROM kernel_ledger ORDER BY seq DESC LIMIT 1),"
    " (SELECT entry_id FROM kernel_ledger ORDER BY seq DESC LIMIT 1)"
)


class LedgerStore(Protocol):
    """What every store offers."""

    @property
    def locator(self) -> str:
        """Where the store is (path or URL without password)."""
        ...

    def append(self, kind: EntryKind, payload: Mapping[str, object]) -> NewEntry:
        """Append one entry atomically after the current head; returns it."""
        ...

    def entries(self) -> Iterator[RawEntry]:
        """Every entry in sequence order, unchecked."""
        ...

    def recorded_head(self) -> tuple[object, object]:
        """The ``(seq, entry_id)`` the store keeps apart from the entries, unchecked
        (``(0, GENESIS_ID)`` when it has none yet)."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


def verify_store(
    store: LedgerStore, expected_head: LedgerHead | None = None
) -> LedgerIntact | LedgerBroken:
    """Recompute ``store``'s chain (`kernel.ledger.verify_chain`)."""
    rows = store.verify_rows() if isinstance(store, SqliteStore) else store.entries()
    return verify_chain(rows, recorded_head=store.recorded_head(), expected_head=expected_head)


def _raw_head(row: Any) -> tuple[object, object]:
    return (0, GENESIS_ID) if row is None else (row[0], row[1])


def _check_head(recorded: Any, last: Any, where: object) -> tuple[int, str]:
    """The head to append after: the recorded head, when it is the last entry."""
    recorded_head, last_head = _raw_head(recorded), _raw_head(last)
    seq, entry_id = recorded_head
    if recorded_head != last_head or type(seq) is not int or not is_digest(entry_id):
        raise EffectError(
            f"{where}: ledger head does not match its last entry (edited?); "
            "run `kernel ledger verify` - nothing appended"
        )
    return seq, str(entry_id)


class SqliteStore:
    """The embedded default store (module docstring)."""

    def __init__(self, path: Path, *, create: bool) -> None:
        self._path = path
        if not create and not path.is_file():
            raise EffectError(f"{path}: ledger not found")
        try:
            if create:
                path.parent.mkdir(parents=True, exist_ok=True)
            # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE).
            self._db = sqlite3.connect(path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            if create:
                for statement in _SQLITE_SCHEMA:
                    self._db.execute(statement)
        except (sqlite3.Error, OSError) as e:
            raise EffectError(f"{path}: not a usable ledger ({e})") from e

    @property
    def locator(self) -> str:
        return str(self._path)

    def append(self, kind: EntryKind, payload: Mapping[str, object]) -> NewEntry:
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                # One round trip: the recorded head and the last entry.
                both = self._db.execute(_SELECT_BOTH).fetchone()
                head = _check_head(
                    None if both[0] is None else both[:2],
                    None if both[2] is None else both[2:],
                    self._path,
                )
                entry = new_entry(head, kind, dict(payload))
                self._db.execute(
                    "INSERT INTO kernel_ledger VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        entry.seq,
                        entry.entry_id,
                        entry.prev_id,
                        entry.kind.value,
                        entry.payload_digest,
                        entry.payload,
                    ),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise EffectError(f"{self.locator}: ledger append failed ({e})") from e
        return entry

    def entries(self) -> Iterator[RawEntry]:
        try:
            for row in self._db.execute(_SELECT_ENTRIES):
                yield RawEntry(*row)
        except sqlite3.Error as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({e})") from e

    def verify_rows(self) -> Iterator[RawEntry]:
        """`entries` as plain row tuples (RawEntry's field order), each payload as its
        stored UTF-8 bytes: what verification hashes, without per-row conversions."""
        try:
            yield from self._db.execute(_SELECT_ENTRIES_RAW)
        except sqlite3.Error as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({e})") from e

    def recorded_head(self) -> tuple[object, object]:
        try:
            return _raw_head(self._db.execute(_SELECT_HEAD).fetchone())
        except sqlite3.Error as e:
            raise EffectError(f"{self.locator}: cannot read ledger ({e})") from e

    def close(self) -> None:
        self._db.close()


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
        try:
            self._db = psycopg.connect(url, autocommit=True, connect_timeout=10)
            if create:
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
        scheme, sep, rest = self._url.partition("://")
        if "@" in rest.split("/", 1)[0]:
            rest = rest.split("@", 1)[1]
        return scheme + sep + rest

    def append(self, kind: EntryKind, payload: Mapping[str, object]) -> NewEntry:
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
                self._db.execute(
                    "INSERT INTO kernel_ledger VALUES (%s, %s, %s, %s, %s, %s)",
                    (
                        entry.seq,
                        entry.entry_id,
                        entry.prev_id,
                        entry.kind.value,
                        entry.payload_digest,
                        entry.payload,
                    ),
                )
                self._db.execute(
                    "INSERT INTO kernel_ledger_head VALUES (1, %s, %s) ON CONFLICT (one) "
                    "DO UPDATE SET seq = excluded.seq, entry_id = excluded.entry_id",
                    (entry.seq, entry.entry_id),
                )
        except psycopg.Error as e:
            raise EffectError(f"{self.locator}: ledger append failed ({_first_line(e)})") from e
        return entry

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

    def close(self) -> None:
        self._db.close()


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
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


def export_jsonl(store: LedgerStore, target: Path) -> int:
    """Write the chain as JSON Lines (atomically): one entry per line, then the head.

    Entries are exported as stored (a broken chain exports broken, and verifies so).
    Returns the number of entries written.
    """
    lines: list[bytes] = []
    for raw in store.entries():
        try:
            payload: object = orjson.loads(raw.payload) if type(raw.payload) is str else None
        except orjson.JSONDecodeError:
            payload = raw.payload
        lines.append(
            orjson.dumps(
                {
                    "entry_id": raw.entry_id,
                    "kind": raw.kind,
                    "payload": payload,
                    "payload_digest": raw.payload_digest,
                    "prev_id": raw.prev_id,
                    "seq": raw.seq,
                },
                option=orjson.OPT_SORT_KEYS,
            )
        )
    seq, entry_id = store.recorded_head()
    lines.append(
        orjson.dumps({_HEAD_LINE: {"entry_id": entry_id, "seq": seq}}, option=orjson.OPT_SORT_KEYS)
    )
    atomic_write_bytes(target, b"\n".join(lines) + b"\n")
    return len(lines) - 1


def _payload_text(payload: object) -> object:
    try:
        return canonical_json(payload).decode("utf-8")
    except CanonicalizationError:
        # Not canonical JSON: L4 refuses it (no text hashes to its digest).
        return None


def read_jsonl(path: Path) -> tuple[list[RawEntry], tuple[object, object]]:
    """Read an export: its entries (unchecked) and its head line.

    Raises:
        EffectError: the file is missing or unreadable.
        ConfigError: a line is not a JSON object, or the head line is missing.
    """
    data = read_input(path, what="ledger export")
    entries: list[RawEntry] = []
    head: tuple[object, object] = (None, None)
    seen_head = False
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise ConfigError(f"{path}:{number}: not valid JSON ({e})") from e
        if type(value) is not dict:
            raise ConfigError(f"{path}:{number}: expected a JSON object")
        if seen_head:
            raise ConfigError(f"{path}:{number}: a line after the head line")
        if set(value) == {_HEAD_LINE}:
            seen_head = True
            line_head = value[_HEAD_LINE]
            if type(line_head) is dict:
                head = (line_head.get("seq"), line_head.get("entry_id"))
            continue
        entries.append(
            RawEntry(
                seq=value.get("seq"),
                entry_id=value.get("entry_id"),
                prev_id=value.get("prev_id"),
                kind=value.get("kind"),
                payload_digest=value.get("payload_digest"),
                payload=_payload_text(value.get("payload")),
            )
        )
    if not seen_head:
        raise ConfigError(f"{path}: no head line: not a complete ledger export")
    return entries, head
