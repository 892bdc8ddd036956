"""The evidence ledger's JSON Lines export (ADR-0006 §1): one canonical entry per line,
payload as a JSON object, then one head line; it verifies without the database
(`kernel.decide.ledger.verify_chain`). `kernel.effects.ledger_store` re-exports both
calls."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

import orjson

from kernel.decide.ledger import RawEntry
from kernel.effects.files import _refuse_duplicate_keys as refuse_duplicate_keys
from kernel.effects.files import atomic_write_bytes, read_input
from kernel.errors import CanonicalizationError, ConfigError
from kernel.records.identity import canonical_json

if TYPE_CHECKING:
    from kernel.effects.ledger_store import LedgerStore

__all__ = ["export_jsonl", "read_jsonl"]

_HEAD_LINE: Final = "ledger_head"


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
        # A repeated key would let a forged first value hide behind the original last.
        refuse_duplicate_keys(Path(f"{path}:{number}"), line, value)
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
