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

The ledger is also a Merkle tree (RFC 9162 §2.1): leaf ``i`` is the ``i``-th entry, its
leaf hash SHA-256(0x00 || the 32 bytes of its entry id), an interior node
SHA-256(0x01 || left || right), split at the largest power of two below the size.
`TreeHead` names a tree (size and root); `InclusionProof` and `ConsistencyProof` are
checked against heads by `check_inclusion` and `check_consistency`, the RFC's
verification algorithms, so any RFC 9162 client can check the same proofs.

An empty ledger is intact (count 0): a fresh store must be usable; L6 still applies.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, Literal, NamedTuple, cast

import attrs

from kernel.errors import ParameterTypeError, ParameterValueError
from kernel.records.codec import UNSEALED, Identity, Record, describe_found, seal
from kernel.records.identity import (
    MAX_SAFE_INT,
    canonical_json,
    is_digest,
    sha256_bytes,
    sha256_hex,
)
from kernel.records.values import Count, Digest, Digests, OptionalDigest, Refusal, boundary

__all__ = [
    "GENESIS_ID",
    "ConsistencyProof",
    "EntryKind",
    "InclusionProof",
    "LedgerBroken",
    "LedgerEntry",
    "LedgerHead",
    "LedgerIntact",
    "LedgerReason",
    "NewEntry",
    "Perfect",
    "ProofChecked",
    "ProofReason",
    "ProofRefusal",
    "RawEntry",
    "TreeBuilder",
    "TreeHead",
    "check_consistency",
    "check_inclusion",
    "consistency_holds",
    "consistency_path",
    "entry_id_of",
    "frontier_of",
    "inclusion_path",
    "inclusion_root",
    "leaf_hash",
    "new_entry",
    "next_entry",
    "node_hash",
    "range_hash",
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
_MAX_TREE: Final = 1 << 62
"""Tree sizes a proof may name (a path has at most 62 nodes)."""


class LedgerReason(enum.StrEnum):
    """Closed reason codes of `LedgerBroken` (rules L1-L6 of the module docstring)."""

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
class LedgerIntact(Record):
    """A chain that verifies: how many entries and where it ends."""

    count: Count
    """Entries checked."""
    head: LedgerHead
    """The last entry."""
    root_hash: OptionalDigest = None
    """The Merkle root of the entries (hex), when the tree was computed (anchors given)."""


@attrs.frozen(kw_only=True)
class LedgerBroken(Refusal):
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


@attrs.frozen(kw_only=True)
class TreeHead(Record):
    """A Merkle tree of the ledger: its size (entries) and root (hex). What a signed
    tree head signs (its canonical JSON)."""

    tree_size: Count
    """Leaves (entries) in the tree."""
    root_hash: Digest
    """The RFC 9162 root (SHA-256 of nothing for an empty tree)."""


@attrs.frozen(kw_only=True)
class InclusionProof(Record):
    """Entry ``entry_id`` is leaf ``leaf_index`` of the tree of ``tree_size`` leaves."""

    entry_id: Digest
    """The entry proved included."""
    leaf_index: Count
    """Its 0-based leaf index (its sequence number minus one)."""
    tree_size: Count
    """The tree it is proved included in."""
    path: Digests
    """RFC 9162 inclusion path (hex), leaf side first."""


@attrs.frozen(kw_only=True)
class ConsistencyProof(Record):
    """The tree of ``old_size`` leaves is a prefix of the tree of ``new_size`` leaves."""

    old_size: Count
    """The older tree's size."""
    new_size: Count
    """The newer tree's size."""
    path: Digests
    """RFC 9162 consistency path (hex)."""


class ProofReason(enum.StrEnum):
    """Closed reason codes of `ProofRefusal`."""

    SIZE_MISMATCH = "size_mismatch"
    """The proof is about another tree size than the head it is checked against."""
    OUT_OF_RANGE = "out_of_range"
    """A leaf index or old size outside the tree (or a path of the wrong length)."""
    ROOT_MISMATCH = "root_mismatch"
    """The path does not lead to the head's root."""


@attrs.frozen(kw_only=True)
class ProofChecked(Record):
    """A proof that holds against the heads given."""

    proof: Literal["inclusion", "consistency"]
    """Which kind of proof."""
    tree_size: Count
    """The (newer) tree's size."""
    root_hash: Digest
    """The (newer) tree's root."""


@attrs.frozen(kw_only=True)
class ProofRefusal(Refusal):
    """A proof that does not hold. Self-sealed ``refusal_id``."""

    __identity__ = Identity(field="refusal_id", seals=True)

    refusal_id: Digest = UNSEALED
    """Self-sealed id."""
    proof: Literal["inclusion", "consistency"]
    """Which kind of proof."""
    reason_codes: tuple[ProofReason, ...]
    """What failed."""


class RawEntry(NamedTuple):
    """An entry as a store returns it, unchecked (a tampered store returns anything)."""

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
    if type(payload) is not dict:
        raise ParameterTypeError("new_entry", "payload", "a dict", type(payload).__name__)
    if type(kind) is not EntryKind:
        raise ParameterTypeError("new_entry", "kind", "an EntryKind", repr(kind))
    head_seq, head_id = head
    if type(head_seq) is not int or not 0 <= head_seq < MAX_SAFE_INT or not is_digest(head_id):
        raise ParameterValueError("new_entry", "head", "a ledger head (seq, entry id)", repr(head))
    data = canonical_json(payload)
    payload_digest = sha256_bytes(data)
    seq = head_seq + 1
    # Positional: every store append builds one (keywords cost a third of it).
    return NewEntry(
        seq,
        _fast_id(seq, head_id, kind.value, payload_digest),
        head_id,
        kind,
        payload_digest,
        data.decode("utf-8"),
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
    # L2: the link to the previous entry.
    if prev_id != previous_id:
        reasons.append(LedgerReason.LINK_BROKEN)
    # L3: a closed vocabulary of entry kinds (an `EntryKind` is its own value).
    if not isinstance(kind, str) or kind not in _KINDS:
        reasons.append(LedgerReason.UNKNOWN_KIND)
    # L4: the payload bytes are what the entry committed to.
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
        return (
            f"payload expected to hash to {_short(raw.payload_digest)}, "
            f"found {'no text' if found is None else found[:12]}"
        )
    return f"entry_id {_short(raw.entry_id)} does not recompute from the entry's fields"


def _broken(
    position: int, entry_id: object, reasons: list[LedgerReason], details: list[str]
) -> LedgerBroken:
    shown = entry_id if type(entry_id) is str and is_digest(entry_id) else ""
    codes = ", ".join(reasons)
    where = f"entry {position}" if shown == "" else f"entry {position} ({shown[:12]})"
    return seal(
        LedgerBroken,
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
) -> LedgerIntact | LedgerBroken:
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
            and `LedgerIntact.root_hash` set.

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
        # The common case, every rule at once; the slow path names what failed.
        if not (
            type(seq) is int
            and seq == position
            and prev_id == previous_id
            and isinstance(kind, str)
            and kind in _KINDS
            and type(payload_digest) is str
            # Inline (no call per entry): SQLite's rows hand payloads over as bytes.
            and (sha256_bytes(payload) if type(payload) is bytes else _payload_hash(payload))
            == payload_digest
            and type(entry_id) is str
            and sha256_bytes((_ID_TEMPLATE % (kind, payload_digest, previous_id, seq)).encode())
            == entry_id
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
    return LedgerIntact(count=position, head=head, root_hash=root)


def _anchor_problem(tree: TreeBuilder, anchors: Mapping[int, str] | None) -> str | None:
    # L7: the tree at an anchored size has the root recorded outside the ledger.
    expected = None if anchors is None else anchors.get(tree.size)
    if expected is None:
        return None
    found = tree.root().hex()
    if found == expected:
        return None
    return f"the tree of {tree.size} entries expected root {expected[:12]}, found {found[:12]}"


# -- The ledger as a Merkle tree (RFC 9162 §2.1) ------------------------------------------

_EMPTY_ROOT: Final = bytes.fromhex(sha256_bytes(b""))


def leaf_hash(entry_id: str) -> bytes:
    """The RFC 9162 leaf hash of an entry: SHA-256(0x00 || the entry id's 32 bytes)."""
    return bytes.fromhex(sha256_bytes(b"\x00" + bytes.fromhex(entry_id)))


def node_hash(left: bytes, right: bytes) -> bytes:
    """The RFC 9162 interior node hash: SHA-256(0x01 || left || right)."""
    return bytes.fromhex(sha256_bytes(b"\x01" + left + right))


class TreeBuilder:
    """The Merkle tree of a growing list of leaves, kept as its right edge: the roots of
    the perfect subtrees the leaves so far make (one per set bit of the size)."""

    __slots__ = ("frontier", "size")

    def __init__(self, size: int = 0, frontier: Sequence[bytes] = ()) -> None:
        self.size = size
        self.frontier = list(frontier)
        """Perfect subtree roots, largest (leftmost) first."""

    def append(self, leaf: bytes) -> list[bytes]:
        """Add a leaf hash; returns the perfect subtree roots it completes, level 1 up."""
        completed: list[bytes] = []
        node = leaf
        self.size += 1
        rest = self.size
        while not rest & 1:
            node = node_hash(self.frontier.pop(), node)
            completed.append(node)
            rest >>= 1
        self.frontier.append(node)
        return completed

    def root(self) -> bytes:
        """The tree's root (SHA-256 of nothing for an empty tree)."""
        if not self.frontier:
            return _EMPTY_ROOT
        node = self.frontier[-1]
        for left in reversed(self.frontier[:-1]):
            node = node_hash(left, node)
        return node


def frontier_of(size: int) -> list[tuple[int, int]]:
    """The perfect subtrees ``(level, index)`` whose roots make a tree of ``size`` leaves
    (largest first): what `TreeBuilder` keeps."""
    parts: list[tuple[int, int]] = []
    start = 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            parts.append((level, start >> level))
            start += 1 << level
    return parts


Perfect = Callable[[int, int], bytes]
"""``perfect(level, index)``: the root of the perfect subtree over leaves
``[index * 2**level, (index + 1) * 2**level)`` (a leaf hash at level 0)."""


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n > 1): RFC 9162's split point."""
    return 1 << ((n - 1).bit_length() - 1)


def range_hash(start: int, end: int, perfect: Perfect) -> bytes:
    """MTH of leaves ``[start, end)`` (``start`` a multiple of the split sizes above it)."""
    n = end - start
    if n & (n - 1) == 0:
        level = n.bit_length() - 1
        return perfect(level, start >> level)
    k = _split(n)
    return node_hash(range_hash(start, start + k, perfect), range_hash(start + k, end, perfect))


def inclusion_path(index: int, size: int, perfect: Perfect) -> list[bytes]:
    """RFC 9162 §2.1.3.1 PATH(index, D[size]), leaf side first.

    Raises:
        ParameterValueError: ``index`` is not a leaf of a tree of ``size``.
    """
    if not 0 <= index < size:
        raise ParameterValueError(
            "inclusion_path", "index", f"a leaf index below {size}", str(index)
        )
    path: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            path.append(range_hash(start + k, end, perfect))
            end = start + k
        else:
            path.append(range_hash(start, start + k, perfect))
            start += k
    path.reverse()
    return path


def consistency_path(old_size: int, new_size: int, perfect: Perfect) -> list[bytes]:
    """RFC 9162 §2.1.4.1 PROOF(old_size, D[new_size]), in the RFC's order.

    Raises:
        ParameterValueError: not ``0 <= old_size <= new_size``.
    """
    if not 0 <= old_size <= new_size:
        raise ParameterValueError(
            "consistency_path", "old_size", f"a size from 0 to {new_size}", str(old_size)
        )
    if old_size in (0, new_size):
        return []
    path: list[bytes] = []
    start, end, m, whole = 0, new_size, old_size, True
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            path.append(range_hash(start + k, end, perfect))
            end = start + k
        else:
            path.append(range_hash(start, start + k, perfect))
            start, m, whole = start + k, m - k, False
    if not whole:
        path.append(range_hash(start, end, perfect))
    path.reverse()
    return path


def inclusion_root(leaf: bytes, index: int, size: int, path: Sequence[bytes]) -> bytes | None:
    """The root a leaf and its inclusion path imply (RFC 9162 §2.1.3.2), or None when the
    path cannot be one for ``index`` in a tree of ``size``."""
    if not 0 <= index < size:
        return None
    fn, sn, node = index, size - 1, leaf
    for sibling in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            node = node_hash(sibling, node)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            node = node_hash(node, sibling)
        fn, sn = fn >> 1, sn >> 1
    return node if sn == 0 else None


def consistency_holds(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, path: Sequence[bytes]
) -> bool:
    """Whether ``path`` proves the tree of ``old_size`` leaves with ``old_root`` is a
    prefix of the tree of ``new_size`` leaves with ``new_root`` (RFC 9162 §2.1.4.2)."""
    if not 0 <= old_size <= new_size:
        return False
    if old_size == new_size:
        return not path and old_root == new_root
    if old_size == 0:
        return not path
    nodes = list(path)
    if old_size & (old_size - 1) == 0:
        nodes.insert(0, old_root)
    if not nodes:
        return False
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = nodes[0]
    for c in nodes[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == old_root and sr == new_root and sn == 0


def _proof_refusal(
    proof: Literal["inclusion", "consistency"], reason: ProofReason, why: str
) -> ProofRefusal:
    return seal(ProofRefusal, proof=proof, reason_codes=(reason,), explanation=why)


@boundary
def check_inclusion(proof: InclusionProof, head: TreeHead) -> ProofChecked | ProofRefusal:
    """Whether ``proof`` shows its entry is in the tree ``head`` names (RFC 9162 §2.1.3.2).

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    if proof.tree_size != head.tree_size:
        return _proof_refusal(
            "inclusion",
            ProofReason.SIZE_MISMATCH,
            f"expected a proof for the head's tree of {head.tree_size}, "
            f"found one for a tree of {proof.tree_size}",
        )
    if proof.tree_size > _MAX_TREE or not proof.leaf_index < proof.tree_size:
        return _proof_refusal(
            "inclusion",
            ProofReason.OUT_OF_RANGE,
            f"expected a leaf index below {proof.tree_size}, found {proof.leaf_index}",
        )
    path = [bytes.fromhex(node) for node in proof.path]
    root = inclusion_root(leaf_hash(proof.entry_id), proof.leaf_index, proof.tree_size, path)
    if root is None or root.hex() != head.root_hash:
        found = "a path of the wrong length" if root is None else f"root {root.hex()[:12]}"
        return _proof_refusal(
            "inclusion",
            ProofReason.ROOT_MISMATCH,
            f"expected the path to lead to root {head.root_hash[:12]}, found {found}",
        )
    return ProofChecked(proof="inclusion", tree_size=head.tree_size, root_hash=head.root_hash)


@boundary
def check_consistency(
    proof: ConsistencyProof, old: TreeHead, new: TreeHead
) -> ProofChecked | ProofRefusal:
    """Whether ``proof`` shows the tree ``old`` names is a prefix of the tree ``new``
    names (RFC 9162 §2.1.4.2): nothing in the older ledger was rewritten.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    if (proof.old_size, proof.new_size) != (old.tree_size, new.tree_size):
        return _proof_refusal(
            "consistency",
            ProofReason.SIZE_MISMATCH,
            f"expected a proof from {old.tree_size} to {new.tree_size} entries, "
            f"found one from {proof.old_size} to {proof.new_size}",
        )
    if proof.new_size > _MAX_TREE or proof.old_size > proof.new_size:
        return _proof_refusal(
            "consistency",
            ProofReason.OUT_OF_RANGE,
            f"expected an old size up to {proof.new_size}, found {proof.old_size}",
        )
    path = [bytes.fromhex(node) for node in proof.path]
    old_root, new_root = bytes.fromhex(old.root_hash), bytes.fromhex(new.root_hash)
    if not consistency_holds(proof.old_size, proof.new_size, old_root, new_root, path):
        return _proof_refusal(
            "consistency",
            ProofReason.ROOT_MISMATCH,
            f"expected the path to join root {old.root_hash[:12]} ({old.tree_size}) to "
            f"root {new.root_hash[:12]} ({new.tree_size}); it does not",
        )
    return ProofChecked(proof="consistency", tree_size=new.tree_size, root_hash=new.root_hash)
