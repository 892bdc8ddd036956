"""The evidence ledger as a Merkle tree (RFC 9162 §2.1), and its proofs (ADR-0006).

Pure: no I/O, no clock. Leaf ``i`` is the ledger's ``i``-th entry (`kernel.decide.ledger`),
its leaf hash SHA-256(0x00 || the 32 bytes of its entry id), an interior node
SHA-256(0x01 || left || right), split at the largest power of two below the size.
`TreeHead` names a tree (size and root); `InclusionProof` and `ConsistencyProof` are
checked against heads by `check_inclusion` and `check_consistency`, the RFC's
verification algorithms, so any RFC 9162 client can check the same proofs. The stores
(`kernel.effects.ledger_store`) keep the roots of perfect subtrees and make the proofs
from them (`inclusion_path`, `consistency_path` over a `Perfect` reader).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Final, Literal

import attrs

from kernel.errors import ParameterValueError
from kernel.records.codec import UNSEALED, Identity, Record, seal
from kernel.records.identity import sha256_bytes, sha256_digest
from kernel.records.values import Count, Digest, Digests, Refusal, boundary

__all__ = [
    "ConsistencyProof",
    "InclusionProof",
    "Perfect",
    "ProofChecked",
    "ProofReason",
    "ProofRefusal",
    "TreeBuilder",
    "TreeHead",
    "check_consistency",
    "check_inclusion",
    "consistency_holds",
    "consistency_path",
    "frontier_of",
    "inclusion_path",
    "inclusion_root",
    "leaf_hash",
    "node_hash",
    "range_hash",
]

_MAX_TREE: Final = 1 << 62
"""The largest tree a proof may name (sizes past it are out of range, not arithmetic)."""


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


_EMPTY_ROOT: Final = bytes.fromhex(sha256_bytes(b""))


def leaf_hash(entry_id: str) -> bytes:
    """The RFC 9162 leaf hash of an entry: SHA-256(0x00 || the entry id's 32 bytes)."""
    return sha256_digest(b"\x00" + bytes.fromhex(entry_id))


def node_hash(left: bytes, right: bytes) -> bytes:
    """The RFC 9162 interior node hash: SHA-256(0x01 || left || right)."""
    return sha256_digest(b"\x01" + left + right)


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

    def append_entry(self, entry_id: str) -> bytes | None:
        """Add the leaf of an entry id a caller made (a store's append: 64 lowercase hex,
        not checked again); returns the perfect subtree roots it completes, level 1 up,
        joined (None when it completes none): a row's ``nodes``."""
        return self.append_leaf_of(bytes.fromhex(entry_id))

    def append_leaf_of(self, raw_id: bytes) -> bytes | None:
        """`append_entry` of an entry id given as its 32 bytes. `append` and `leaf_hash`
        inline, without a list: every append makes one."""
        node = sha256_digest(b"\x00" + raw_id)
        frontier = self.frontier
        self.size = rest = self.size + 1
        if rest & 1:
            frontier.append(node)
            return None
        completed = b""
        while not rest & 1:
            node = sha256_digest(b"\x01" + frontier.pop() + node)
            completed += node
            rest >>= 1
        frontier.append(node)
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
