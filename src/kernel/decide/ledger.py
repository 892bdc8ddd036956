"""The evidence ledger: append-only entries chained by SHA-256 (ADR-0006).

Pure: no I/O, no clock. The stores (SQLite, PostgreSQL, JSON Lines) live in
`kernel.effects.ledger_store`; this module owns what an entry is and how a chain is
checked, so every store verifies the same way.

An entry is ``(seq, prev_id, kind, payload)``: ``seq`` counts from 1, ``prev_id`` is
the previous entry's id (`GENESIS_ID` for the first), ``payload`` is the canonical
JSON text of a JSON object (what was admitted, decided, staged, promoted or refused).

Identity payload of `LedgerEntry` (self-sealed ``entry_id``)::

    sha256(canonical_json({"entry_id": "", "kind": ..., "payload_digest": ...,
                           "prev_id": ..., "seq": ...}))

with ``payload_digest = sha256(utf-8 bytes of payload)``. The id therefore covers the
previous id, the sequence number and the canonical payload; the payload text itself
stays out of the id payload so a verifier hashes each payload once, as bytes.

Rules enforced by `verify_chain`, on the entries in the order a store returns them
(the first entry that fails is named, with every code it fails):

- L1 ``seq`` is the position (1, 2, 3, ...): ``sequence_broken`` (a deleted,
  inserted or reordered entry);
- L2 ``prev_id`` is the id of the entry before it: ``link_broken``;
- L3 ``kind`` is a known `EntryKind`: ``unknown_kind``;
- L4 the payload hashes to ``payload_digest``: ``payload_edited``;
- L5 ``entry_id`` recomputes from the fields: ``entry_id_mismatch``;
- L6 the chain ends at the head the store recorded separately (sequence and id):
  ``head_mismatch`` (the last entry removed, or one appended behind the store's back);
- L7 at every tree size an outside anchor names (a promotion commit's
  ``Kernel-Ledger-Head`` trailer), the Merkle root of the entries so far is the
  anchored root: ``anchor_mismatch`` (a tail rewritten with recomputed hashes and head).

The ledger is also a Merkle tree (RFC 9162 §2.1; `kernel.decide.merkle`): leaf ``i`` is
the ``i``-th entry, its leaf hash SHA-256(0x00 || the 32 bytes of its entry id).

An empty ledger is intact (count 0): a fresh store must be usable; L6 still applies.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, NamedTuple, cast

import attrs

from kernel.decide.merkle import TreeBuilder, leaf_hash
from kernel.errors import ParameterTypeError, ParameterValueError
from kernel.records.codec import UNSEALED, Identity, Record, describe_found, seal
from kernel.records.identity import (
    MAX_SAFE_INT,
    canonical_json,
    is_digest,
    sha256_bytes,
    sha256_digest,
    sha256_hex,
)
from kernel.records.values import Count, Digest, OptionalDigest, Refusal, boundary

__all__ = [
    "GENESIS_ID",
    "EntryKind",
    "LedgerRefusal",
    "LedgerEntry",
    "LedgerHead",
    "LedgerVerified",
    "LedgerReason",
    "NewEntry",
    "RawEntry",
    "entry_after",
    "entry_row_after",
    "entry_id_of",
    "new_entry",
    "next_entry",
    "verify_chain",
]

GENESIS_ID: Final = "0" * 64
"""The ``prev_id`` of the first entry (and the head id of an empty ledger)."""


class EntryKind(enum.StrEnum):
    """What an entry records."""

    ADMISSION = "admission"
    """A run's admission document (evidence classes of its candidate groups)."""
    DECISION = "decision"
    """A human decision record (and its signature status)."""
    STAGING = "staging"
    """A candidate committed under ``refs/kernel/staged/...``."""
    UNSTAGING = "unstaging"
    """A staged candidate removed."""
    PROMOTION = "promotion"
    """A branch fast-forwarded to a promoted candidate."""
    REFUSAL = "refusal"
    """A refused stage or promotion: the refusal is evidence too."""


_KINDS: Final = frozenset(k.value for k in EntryKind)
"""Tree sizes a proof may name (a path has at most 62 nodes)."""


class LedgerReason(enum.StrEnum):
    """Closed reason codes of `LedgerRefusal` (rules L1-L6 of the module docstring)."""

    SEQUENCE_BROKEN = "sequence_broken"
    """L1: an entry's sequence number is not its position."""
    LINK_BROKEN = "link_broken"
    """L2: an entry's ``prev_id`` is not the previous entry's id."""
    UNKNOWN_KIND = "unknown_kind"
    """L3: an entry's kind is not an `EntryKind`."""
    PAYLOAD_EDITED = "payload_edited"
    """L4: an entry's payload does not hash to its ``payload_digest``."""
    ENTRY_ID_MISMATCH = "entry_id_mismatch"
    """L5: an entry's id does not recompute from its fields."""
    HEAD_MISMATCH = "head_mismatch"
    """L6: the chain does not end at the recorded (or expected) head."""
    ANCHOR_MISMATCH = "anchor_mismatch"
    """L7: the Merkle root at an anchored size is not the anchored root."""


@attrs.frozen(kw_only=True)
class LedgerEntry(Record):
    """One ledger entry. ``entry_id`` self-seals (module docstring); the payload text
    enters through ``payload_digest``."""

    __identity__ = Identity(field="entry_id", seals=True, exclude=frozenset({"payload"}))

    entry_id: Digest = UNSEALED
    """Self-sealed SHA-256 over seq, prev_id, kind and payload_digest."""
    seq: Count
    """Position in the chain, from 1."""
    prev_id: Digest
    """The previous entry's id (`GENESIS_ID` for the first)."""
    kind: EntryKind
    """What the entry records."""
    payload_digest: Digest
    """SHA-256 of the payload's UTF-8 bytes."""
    payload: str
    """Canonical JSON text of the payload object."""


@attrs.frozen(kw_only=True)
class LedgerHead(Record):
    """Where a chain ends: the last entry's sequence number and id (0 and `GENESIS_ID`
    for an empty ledger)."""

    seq: Count
    """The last entry's sequence number."""
    entry_id: Digest = UNSEALED
    """The last entry's id."""

    @classmethod
    def empty(cls) -> LedgerHead:
        """The head of an empty ledger."""
        return cls(seq=0, entry_id=GENESIS_ID)


@attrs.frozen(kw_only=True)
class LedgerVerified(Record):
    """A chain that verifies: how many entries and where it ends."""

    count: Count
    """Entries checked."""
    head: LedgerHead
    """The last entry."""
    root_hash: OptionalDigest = None
    """The Merkle root of the entries (hex), when the tree was computed (anchors given)."""


@attrs.frozen(kw_only=True)
class LedgerRefusal(Refusal):
    """A chain that does not verify, naming the first broken entry. Self-sealed
    ``refusal_id`` over every field but ``explanation``."""

    __identity__ = Identity(field="refusal_id", seals=True)

    refusal_id: Digest = UNSEALED
    """Self-sealed id."""
    position: Count
    """1-based position of the first broken entry as read (count + 1 for L6 and for an
    anchor beyond the chain's end)."""
    entry_id: str = UNSEALED
    """The id that entry claims ("" for L6, which concerns no single entry)."""
    reason_codes: tuple[LedgerReason, ...]
    """Every rule the entry fails, in rule order."""


class RawEntry(NamedTuple):
    """An entry as a store returns it, unchecked (a tampered store returns anything).

    A store that keeps no ``prev_id`` or ``payload_digest`` (SQLite's narrow row: the
    previous row's id and the payload's hash stand for them) passes None: the entry's
    id, which covers both, is then what catches a removed neighbour or an edited
    payload (L5).
    """

    seq: object
    entry_id: object
    prev_id: object
    kind: object
    payload_digest: object
    payload: object


def entry_id_of(seq: int, prev_id: str, kind: str, payload_digest: str) -> str:
    """The id an entry with these fields must have (the identity payload above).

    When the fields have their admitted shapes (a known kind, two digests, a
    non-negative int) the canonical bytes are written out directly: every value is
    ASCII that JSON does not escape, and keys are in sorted order, so the bytes are
    exactly ``canonical_json`` of the payload (a property test holds the two
    together). Anything else takes the general path.
    """
    if (
        isinstance(kind, str)
        and kind in _KINDS
        and type(seq) is int
        and 0 <= seq <= MAX_SAFE_INT
        and is_digest(prev_id)
        and is_digest(payload_digest)
    ):
        return _fast_id(seq, prev_id, kind, payload_digest)
    return sha256_hex(
        {
            "entry_id": "",
            "kind": kind,
            "payload_digest": payload_digest,
            "prev_id": prev_id,
            "seq": seq,
        }
    )


def _fast_id(seq: int, prev_id: str, kind: str, payload_digest: str) -> str:
    return sha256_bytes((_ID_TEMPLATE % (kind, payload_digest, prev_id, seq)).encode("ascii"))


_ID_TEMPLATE: Final = '{"entry_id":"","kind":"%s","payload_digest":"%s","prev_id":"%s","seq":%d}'


class NewEntry(NamedTuple):
    """An entry made by `new_entry`: typed, built from checked values (a store's
    append returns it without the cost of a record's validators)."""

    seq: int
    entry_id: str
    prev_id: str
    kind: EntryKind
    payload_digest: str
    payload: str


def new_entry(head: tuple[int, str], kind: EntryKind, payload: Mapping[str, object]) -> NewEntry:
    """The entry that appends ``payload`` after ``head`` (``(seq, entry_id)``).

    Raises:
        CanonicalizationError: ``payload`` is not portable canonical JSON.
        ParameterTypeError: ``payload`` is not a dict (a ledger payload is a JSON
            object), or ``kind`` is not an `EntryKind` (a ``TypeError``).
        ParameterValueError: ``head`` is not a sequence number and an entry id (a
            ``ValueError``).
    """
    head_seq, head_id = head
    if type(head_seq) is not int or not 0 <= head_seq < MAX_SAFE_INT or not is_digest(head_id):
        raise ParameterValueError("new_entry", "head", "a ledger head (seq, entry id)", repr(head))
    return entry_after(head_seq, head_id, kind, payload)


def entry_after(
    head_seq: int, head_id: str, kind: EntryKind, payload: Mapping[str, object]
) -> NewEntry:
    """`new_entry` after a head the caller made with it (a store's last append): the
    head is not checked again, every other argument is.

    Raises:
        CanonicalizationError: ``payload`` is not portable canonical JSON.
        ParameterTypeError: ``payload`` is not a dict, or ``kind`` not an `EntryKind`.
    """
    data = _canonical_payload(kind, payload)
    payload_digest = sha256_bytes(data)
    seq = head_seq + 1
    # The id inline, the tuple made in C (a named tuple's own constructor is Python
    # code): every store append builds one, and a call more is measurable there.
    return _new_tuple(
        NewEntry,
        (
            seq,
            sha256_bytes((_ID_TEMPLATE % (kind._value_, payload_digest, head_id, seq)).encode()),
            head_id,
            kind,
            payload_digest,
            data.decode("utf-8"),
        ),
    )


_new_tuple: Final = tuple.__new__


def _canonical_payload(kind: EntryKind, payload: Mapping[str, object]) -> bytes:
    """The payload's canonical bytes, once ``kind`` and ``payload`` are what an entry takes."""
    if type(payload) is not dict:
        raise ParameterTypeError("new_entry", "payload", "a dict", type(payload).__name__)
    if type(kind) is not EntryKind:
        raise ParameterTypeError("new_entry", "kind", "an EntryKind", repr(kind))
    return canonical_json(payload)


def entry_row_after(
    tree: TreeBuilder, head_id: str, kind: EntryKind, payload: Mapping[str, object]
) -> tuple[int, str, str, str, str, str, bytes | None]:
    """`entry_after` the head ``(tree.size, head_id)`` a store made, as the row it
    inserts: ``(seq, entry_id, prev_id, kind value, payload_digest, payload, nodes)``,
    ``nodes`` the Merkle subtree roots the entry completes (`TreeBuilder.append_entry`);
    ``tree`` grows by the entry's leaf. One call, no record and no hex round trip: a
    store's every append makes one, and SQLite's statement shares the caches it uses.

    Raises:
        CanonicalizationError: ``payload`` is not portable canonical JSON.
        ParameterTypeError: ``payload`` is not a dict, or ``kind`` not an `EntryKind`.
    """
    data = _canonical_payload(kind, payload)
    payload_digest = sha256_bytes(data)
    seq = tree.size + 1
    value = kind._value_
    raw_id = sha256_digest((_ID_TEMPLATE % (value, payload_digest, head_id, seq)).encode())
    return (
        seq,
        raw_id.hex(),
        head_id,
        value,
        payload_digest,
        data.decode("utf-8"),
        tree.append_leaf_of(raw_id),
    )


def next_entry(head: LedgerHead, kind: EntryKind, payload: Mapping[str, object]) -> LedgerEntry:
    """`new_entry` as a validated `LedgerEntry` record."""
    return LedgerEntry(**new_entry((head.seq, head.entry_id), kind, payload)._asdict())


def _entry_problems(raw: RawEntry, position: int, previous_id: str) -> list[LedgerReason]:
    reasons: list[LedgerReason] = []
    seq, entry_id, prev_id, kind, payload_digest, payload = raw
    # L1: the sequence number is the position; a gap or repeat means an entry was
    # removed, inserted or moved.
    if type(seq) is not int or seq != position:
        reasons.append(LedgerReason.SEQUENCE_BROKEN)
    # L2: the link to the previous entry (none stored: the previous entry's id).
    if prev_id is None:
        prev_id = previous_id
    elif prev_id != previous_id:
        reasons.append(LedgerReason.LINK_BROKEN)
    # L3: a closed vocabulary of entry kinds (an `EntryKind` is its own value).
    if not isinstance(kind, str) or kind not in _KINDS:
        reasons.append(LedgerReason.UNKNOWN_KIND)
    # L4: the payload bytes are what the entry committed to (none stored: the payload
    # must be text, whose hash stands for it).
    if payload_digest is None:
        payload_digest = _payload_hash(payload)
    if not is_digest(payload_digest) or _payload_hash(payload) != payload_digest:
        reasons.append(LedgerReason.PAYLOAD_EDITED)
    # L5: the id covers seq, prev_id, kind and payload digest.
    if (
        type(seq) is not int
        or type(prev_id) is not str
        or not isinstance(kind, str)
        or type(payload_digest) is not str
        or not is_digest(entry_id)
        or _recomputed(seq, prev_id, kind, payload_digest) != entry_id
    ):
        reasons.append(LedgerReason.ENTRY_ID_MISMATCH)
    return reasons


def _payload_hash(payload: object) -> str | None:
    """SHA-256 of a payload as stored: its UTF-8 bytes, or its text encoded as UTF-8."""
    if type(payload) is bytes:
        return sha256_bytes(payload)
    if type(payload) is str:
        return sha256_bytes(payload.encode("utf-8", "surrogatepass"))
    return None


def _recomputed(seq: int, prev_id: str, kind: str, payload_digest: str) -> str | None:
    try:
        return entry_id_of(seq, prev_id, kind, payload_digest)
    except ValueError:
        # A value with no canonical form (an out-of-range seq, a lone surrogate).
        return None


def _short(value: object) -> str:
    if type(value) is str and is_digest(value):
        return value[:12]
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _found(raw: RawEntry, position: int, previous_id: str, reason: LedgerReason) -> str:
    """What rule ``reason`` expected of the entry at ``position`` and what it found."""
    if reason is LedgerReason.SEQUENCE_BROKEN:
        return f"seq expected {position}, found {_short(raw.seq)}"
    if reason is LedgerReason.LINK_BROKEN:
        return f"prev_id expected {previous_id[:12]}, found {_short(raw.prev_id)}"
    if reason is LedgerReason.UNKNOWN_KIND:
        return f"kind expected one of {', '.join(sorted(_KINDS))}, found {_short(raw.kind)}"
    if reason is LedgerReason.PAYLOAD_EDITED:
        found = _payload_hash(raw.payload)
        expected = (
            "text" if raw.payload_digest is None else f"to hash to {_short(raw.payload_digest)}"
        )
        return f"payload expected {expected}, found {'no text' if found is None else found[:12]}"
    return f"entry_id {_short(raw.entry_id)} does not recompute from the entry's fields"


def _broken(
    position: int, entry_id: object, reasons: list[LedgerReason], details: list[str]
) -> LedgerRefusal:
    shown = entry_id if type(entry_id) is str and is_digest(entry_id) else ""
    codes = ", ".join(reasons)
    where = f"entry {position}" if shown == "" else f"entry {position} ({shown[:12]})"
    return seal(
        LedgerRefusal,
        position=position,
        entry_id=shown,
        reason_codes=tuple(reasons),
        explanation=f"ledger broken at {where}: {codes}: {'; '.join(details)}",
    )


def _as_raw(raw: object, position: int) -> RawEntry:
    """A `LedgerEntry` record as a 6-tuple (what does not unpack into six fields and is
    no record is a misuse)."""
    if isinstance(raw, LedgerEntry):
        return RawEntry(
            raw.seq, raw.entry_id, raw.prev_id, raw.kind, raw.payload_digest, raw.payload
        )
    raise ParameterTypeError(
        "verify_chain", f"entries[{position - 1}]", "a RawEntry or LedgerEntry", describe_found(raw)
    )


def _head_problem(
    head: LedgerHead,
    recorded_head: tuple[object, object] | None,
    expected_head: LedgerHead | None,
) -> str | None:
    # L6: the chain ends where the store (and any outside anchor) says it does.
    found = f"the chain ends at seq {head.seq} ({head.entry_id[:12]})"
    if recorded_head is not None and (
        type(recorded_head[0]) is not int or recorded_head != (head.seq, head.entry_id)
    ):
        seq, entry_id = recorded_head
        return f"expected the recorded head, seq {_short(seq)} ({_short(entry_id)}); {found}"
    if expected_head is not None and expected_head != head:
        return (
            f"expected the anchored head, seq {expected_head.seq} "
            f"({expected_head.entry_id[:12]}); {found}"
        )
    return None


@boundary
def verify_chain(
    entries: Iterable[Sequence[object] | LedgerEntry],
    *,
    recorded_head: tuple[object, object] | None,
    expected_head: LedgerHead | None = None,
    anchors: Mapping[int, str] | None = None,
) -> LedgerVerified | LedgerRefusal:
    """Check a chain (rules L1-L7 of the module docstring); stop at the first broken entry.

    Args:
        entries: the entries in the order the store returns them (6-tuples or
            `LedgerEntry` records).
        recorded_head: the ``(seq, entry_id)`` the store keeps apart from the entries,
            unchecked (``(0, GENESIS_ID)`` when it recorded none); None only for a
            source that keeps no head at all.
        expected_head: an anchor held elsewhere; the chain must end exactly there.
        anchors: tree size -> Merkle root (hex) held elsewhere (a promotion commit's
            ``Kernel-Ledger-Head`` trailer); when given, the Merkle tree is computed
            and `LedgerVerified.root_hash` set.

    Raises:
        ParameterTypeError: ``entries`` is not an iterable of entries, or an argument is
            not of its annotated type.
    """
    if isinstance(entries, str | bytes | Mapping) or not isinstance(entries, Iterable):
        raise ParameterTypeError(
            "verify_chain", "entries", "an iterable of entries", describe_found(entries)
        )
    tree = None if anchors is None else TreeBuilder()
    previous_id = GENESIS_ID
    position = 0
    for raw in entries:
        position += 1
        try:
            # A store's 6-tuple; a record or a misuse takes the except branch.
            seq, entry_id, prev_id, kind, payload_digest, payload = cast("RawEntry", raw)
        except (TypeError, ValueError):
            seq, entry_id, prev_id, kind, payload_digest, payload = _as_raw(raw, position)
        # The common case, every rule at once; the slow path names what failed. A
        # store that keeps no prev_id or payload_digest passes None (`RawEntry`).
        if not (
            type(seq) is int
            and seq == position
            and (prev_id is None or prev_id == previous_id)
            and isinstance(kind, str)
            and kind in _KINDS
            # Inline (no call per entry): SQLite's rows hand payloads over as bytes.
            and type(
                digest := sha256_bytes(payload)
                if type(payload) is bytes
                else _payload_hash(payload)
            )
            is str
            and (payload_digest is None or digest == payload_digest)
            and type(entry_id) is str
            and sha256_bytes((_ID_TEMPLATE % (kind, digest, previous_id, seq)).encode()) == entry_id
        ):
            entry = RawEntry(seq, entry_id, prev_id, kind, payload_digest, payload)
            reasons = _entry_problems(entry, position, previous_id)
            details = [_found(entry, position, previous_id, r) for r in reasons]
            return _broken(position, entry_id, reasons, details)
        previous_id = entry_id
        if tree is not None:
            tree.append(leaf_hash(entry_id))
            problem = _anchor_problem(tree, anchors)
            if problem is not None:
                return _broken(position, entry_id, [LedgerReason.ANCHOR_MISMATCH], [problem])
    head = LedgerHead(seq=position, entry_id=previous_id)
    problem = _head_problem(head, recorded_head, expected_head)
    if problem is not None:
        return _broken(position + 1, "", [LedgerReason.HEAD_MISMATCH], [problem])
    if anchors is not None and any(size > position for size in anchors):
        beyond = min(size for size in anchors if size > position)
        found = f"the chain has {position} entries, an anchor names a tree of {beyond}"
        return _broken(position + 1, "", [LedgerReason.ANCHOR_MISMATCH], [found])
    root = None if tree is None else tree.root().hex()
    return LedgerVerified(count=position, head=head, root_hash=root)


def _anchor_problem(tree: TreeBuilder, anchors: Mapping[int, str] | None) -> str | None:
    # L7: the tree at an anchored size has the root recorded outside the ledger.
    expected = None if anchors is None else anchors.get(tree.size)
    if expected is None:
        return None
    found = tree.root().hex()
    if found == expected:
        return None
    return f"the tree of {tree.size} entries expected root {expected[:12]}, found {found[:12]}"
