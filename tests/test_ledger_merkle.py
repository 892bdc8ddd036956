"""The ledger as an RFC 9162 Merkle tree: roots, inclusion and consistency proofs against
the transparency-dev/merkle reference vectors, and every corruption of a proof refused."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.decide.merkle import (
    ConsistencyProof,
    InclusionProof,
    ProofChecked,
    ProofReason,
    ProofRefusal,
    TreeBuilder,
    TreeHead,
    check_consistency,
    check_inclusion,
    consistency_holds,
    consistency_path,
    frontier_of,
    inclusion_path,
    inclusion_root,
    leaf_hash,
    node_hash,
    range_hash,
)
from kernel.errors import ParameterTypeError, ParameterValueError

# transparency-dev/merkle testonly/constants.go: leaf inputs and the roots of every prefix.
LEAVES = [bytes.fromhex(h) for h in ("", "00", "10", "2021", "3031", "40414243",
          "5051525354555657", "606162636465666768696a6b6c6d6e6f")]  # fmt: skip
ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
# proof/verify_test.go: (1-based leaf, tree size, path) and (size1, size2, path).
INCLUSION = [
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (3, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (2, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]  # fmt: skip
CONSISTENCY = [
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (6, 7, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
]  # fmt: skip
SOME_HASH = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")


def rfc_leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def perfect_over(leaves: list[bytes]) -> dict[tuple[int, int], bytes]:
    """Every perfect subtree root of a tree of these leaf hashes, by (level, index)."""
    nodes = {(0, i): leaf for i, leaf in enumerate(leaves)}
    level, width = 0, len(leaves)
    while width > 1:
        for i in range(width // 2):
            nodes[(level + 1, i)] = node_hash(nodes[(level, 2 * i)], nodes[(level, 2 * i + 1)])
        level, width = level + 1, width // 2
    return nodes


HASHES = [rfc_leaf(leaf) for leaf in LEAVES]
NODES = perfect_over(HASHES)


def perfect(level: int, index: int) -> bytes:
    return NODES[(level, index)]


def test_roots_of_every_prefix_match_the_reference() -> None:
    tree = TreeBuilder()
    assert tree.root().hex() == ROOTS[0]
    for size, leaf in enumerate(HASHES, start=1):
        tree.append(leaf)
        assert tree.root().hex() == ROOTS[size]
        assert range_hash(0, size, perfect).hex() == ROOTS[size]
        assert [NODES[part] for part in frontier_of(size)] == tree.frontier


@pytest.mark.parametrize(("leaf", "size", "path"), INCLUSION)
def test_inclusion_paths_match_the_reference(leaf: int, size: int, path: list[str]) -> None:
    made = inclusion_path(leaf - 1, size, perfect)
    assert [node.hex() for node in made] == path
    root = bytes.fromhex(ROOTS[size])
    assert inclusion_root(HASHES[leaf - 1], leaf - 1, size, made) == root


@pytest.mark.parametrize(("size1", "size2", "path"), CONSISTENCY)
def test_consistency_paths_match_the_reference(size1: int, size2: int, path: list[str]) -> None:
    made = consistency_path(size1, size2, perfect)
    assert [node.hex() for node in made] == path
    old, new = bytes.fromhex(ROOTS[size1]), bytes.fromhex(ROOTS[size2])
    assert consistency_holds(size1, size2, old, new, made)


@pytest.mark.parametrize(("leaf", "size", "path"), [v for v in INCLUSION if v[2]])
def test_every_corrupted_inclusion_proof_fails(leaf: int, size: int, path: list[str]) -> None:
    nodes = [bytes.fromhex(p) for p in path]
    index, root, leaf_h = leaf - 1, bytes.fromhex(ROOTS[size]), HASHES[leaf - 1]
    probes = [
        (index - 1, size, leaf_h, nodes, root),
        (index + 1, size, leaf_h, nodes, root),
        (index ^ 2, size, leaf_h, nodes, root),
        (index, size * 2, leaf_h, nodes, root),
        (index, size // 2, leaf_h, nodes, root),
        (index, size, rfc_leaf(b"WrongLeaf"), nodes, root),
        (index, size, leaf_h, nodes, bytes.fromhex(ROOTS[0])),
        (index, size, leaf_h, nodes, SOME_HASH),
        (index, size, leaf_h, [*nodes, root], root),
        (index, size, leaf_h, [root, *nodes], root),
        (index, size, leaf_h, nodes[:-1], root),
        (index, size, leaf_h, [nodes[0], SOME_HASH, *nodes[1:]], root),
    ]
    for i in range(len(nodes)):
        flipped = list(nodes)
        flipped[i] = bytes([flipped[i][0] ^ 8]) + flipped[i][1:]
        probes.append((index, size, leaf_h, flipped, root))
    for p_index, p_size, p_leaf, p_path, p_root in probes:
        assert inclusion_root(p_leaf, p_index, p_size, p_path) != p_root


@pytest.mark.parametrize(("size1", "size2", "path"), [v for v in CONSISTENCY if v[2]])
def test_every_corrupted_consistency_proof_fails(size1: int, size2: int, path: list[str]) -> None:
    nodes = [bytes.fromhex(p) for p in path]
    r1, r2 = bytes.fromhex(ROOTS[size1]), bytes.fromhex(ROOTS[size2])
    probes = [
        (size1 - 1, size2, r1, r2, nodes),
        (size1 + 1, size2, r1, r2, nodes),
        (size1 ^ 2, size2, r1, r2, nodes),
        (size1, size2 * 2, r1, r2, nodes),
        (size1, size2 // 2, r1, r2, nodes),
        (size1, size2, SOME_HASH, r2, nodes),
        (size1, size2, r1, SOME_HASH, nodes),
        (size1, size2, r2, r1, nodes),
        (size1, size2, r1, r2, []),
        (size1, size2, r1, r2, [*nodes, r1]),
        (size1, size2, r1, r2, [*nodes, r2]),
        (size1, size2, r1, r2, [r1, *nodes]),
        (size1, size2, r1, r2, [r2, *nodes]),
        (size1, size2, r1, r2, [nodes[0], *nodes]),
        (size1, size2, r1, r2, nodes[:-1]),
    ]
    for i in range(len(nodes)):
        flipped = list(nodes)
        flipped[i] = bytes([flipped[i][0] ^ 16]) + flipped[i][1:]
        probes.append((size1, size2, r1, r2, flipped))
    for s1, s2, root1, root2, p in probes:
        assert not consistency_holds(s1, s2, root1, root2, p), (s1, s2)


def test_trivial_consistency_cases() -> None:
    empty = bytes.fromhex(ROOTS[0])
    assert consistency_holds(0, 0, empty, empty, [])
    assert consistency_holds(0, 1, SOME_HASH, empty, [])
    assert not consistency_holds(1, 1, SOME_HASH, empty, [])
    assert not consistency_holds(0, 1, empty, empty, [empty])
    assert not consistency_holds(1, 1, empty, empty, [empty])
    assert not consistency_holds(2, 1, empty, empty, [])
    assert inclusion_root(empty, 0, 0, []) is None
    assert inclusion_root(empty, 2, 1, []) is None


@given(st.integers(min_value=1, max_value=70), st.data())
def test_generated_proofs_hold_for_every_size(size: int, data: st.DataObject) -> None:
    leaves = [rfc_leaf(i.to_bytes(2, "big")) for i in range(size)]
    nodes = perfect_over(leaves[: 1 << (size.bit_length() - 1)])
    for level, index in frontier_of(size):
        start = index << level
        nodes.update(
            {
                (lv, (start >> lv) + i): n
                for (lv, i), n in perfect_over(leaves[start : start + (1 << level)]).items()
            }
        )
    tree = TreeBuilder()
    for leaf in leaves:
        tree.append(leaf)
    root = tree.root()
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    path = inclusion_path(index, size, lambda lv, i: nodes[(lv, i)])
    assert inclusion_root(leaves[index], index, size, path) == root
    old = data.draw(st.integers(min_value=0, max_value=size))
    old_tree = TreeBuilder()
    for leaf in leaves[:old]:
        old_tree.append(leaf)
    proof = consistency_path(old, size, lambda lv, i: nodes[(lv, i)])
    assert consistency_holds(old, size, old_tree.root(), root, proof)


def test_generation_refuses_sizes_outside_the_tree() -> None:
    with pytest.raises(ParameterValueError):
        inclusion_path(3, 3, perfect)
    with pytest.raises(ParameterValueError):
        consistency_path(4, 3, perfect)


ENTRY_IDS = [hashlib.sha256(bytes([i])).hexdigest() for i in range(6)]


def entry_tree(count: int) -> TreeBuilder:
    tree = TreeBuilder()
    for entry_id in ENTRY_IDS[:count]:
        tree.append(leaf_hash(entry_id))
    return tree


def entry_perfect(level: int, index: int) -> bytes:
    return range_hash_of(index << level, (index + 1) << level)


def range_hash_of(start: int, end: int) -> bytes:
    tree = TreeBuilder()
    for entry_id in ENTRY_IDS[start:end]:
        tree.append(leaf_hash(entry_id))
    return tree.root()


def test_check_inclusion_of_an_entry() -> None:
    head = TreeHead(tree_size=6, root_hash=entry_tree(6).root().hex())
    path = tuple(n.hex() for n in inclusion_path(4, 6, entry_perfect))
    proof = InclusionProof(entry_id=ENTRY_IDS[4], leaf_index=4, tree_size=6, path=path)
    assert check_inclusion(proof, head) == ProofChecked(
        proof="inclusion", tree_size=6, root_hash=head.root_hash
    )
    other = InclusionProof(entry_id=ENTRY_IDS[3], leaf_index=4, tree_size=6, path=path)
    refused = check_inclusion(other, head)
    assert isinstance(refused, ProofRefusal)
    assert refused.reason_codes == (ProofReason.ROOT_MISMATCH,)
    assert "expected" in refused.explanation
    assert "found" in refused.explanation
    short = InclusionProof(entry_id=ENTRY_IDS[4], leaf_index=4, tree_size=6, path=path[:-1])
    assert isinstance(check_inclusion(short, head), ProofRefusal)
    wrong_size = InclusionProof(entry_id=ENTRY_IDS[4], leaf_index=4, tree_size=5, path=path)
    refused = check_inclusion(wrong_size, head)
    assert isinstance(refused, ProofRefusal)
    assert refused.reason_codes == (ProofReason.SIZE_MISMATCH,)
    beyond = InclusionProof(entry_id=ENTRY_IDS[4], leaf_index=6, tree_size=6, path=path)
    refused = check_inclusion(beyond, head)
    assert isinstance(refused, ProofRefusal)
    assert refused.reason_codes == (ProofReason.OUT_OF_RANGE,)
    with pytest.raises(ParameterTypeError, match="head"):
        check_inclusion(proof, None)  # type: ignore[arg-type]


def test_check_consistency_of_two_heads() -> None:
    old = TreeHead(tree_size=3, root_hash=entry_tree(3).root().hex())
    new = TreeHead(tree_size=6, root_hash=entry_tree(6).root().hex())
    path = tuple(n.hex() for n in consistency_path(3, 6, entry_perfect))
    proof = ConsistencyProof(old_size=3, new_size=6, path=path)
    assert isinstance(check_consistency(proof, old, new), ProofChecked)
    rewritten = TreeHead(tree_size=3, root_hash=ENTRY_IDS[0])
    refused = check_consistency(proof, rewritten, new)
    assert isinstance(refused, ProofRefusal)
    assert refused.reason_codes == (ProofReason.ROOT_MISMATCH,)
    refused = check_consistency(proof, new, old)
    assert isinstance(refused, ProofRefusal)
    assert refused.reason_codes == (ProofReason.SIZE_MISMATCH,)
    backwards = ConsistencyProof(old_size=6, new_size=3, path=path)
    refused = check_consistency(backwards, new, old)
    assert isinstance(refused, ProofRefusal)
    assert refused.reason_codes == (ProofReason.OUT_OF_RANGE,)
    with pytest.raises(ParameterTypeError, match="proof"):
        check_consistency("proof", old, new)  # type: ignore[arg-type]


@given(st.lists(st.binary(min_size=32, max_size=32), max_size=70))
def test_appending_an_entry_id_is_appending_its_leaf(raw_ids: list[bytes]) -> None:
    """For all id sequences, `TreeBuilder.append_entry` (a store's append) grows the
    same tree as `append` of the id's `leaf_hash`, and returns the same completed roots
    joined (None where none): the nodes a store row keeps."""
    fast, reference = TreeBuilder(), TreeBuilder()
    for raw in raw_ids:
        entry_id = raw.hex()
        completed = reference.append(leaf_hash(entry_id))
        assert fast.append_entry(entry_id) == (b"".join(completed) or None)
        assert (fast.size, fast.frontier) == (reference.size, reference.frontier)
        assert fast.root() == reference.root()
    assert leaf_hash(ENTRY_IDS[0]) == rfc_leaf(bytes.fromhex(ENTRY_IDS[0]))
    left, right = leaf_hash(ENTRY_IDS[0]), leaf_hash(ENTRY_IDS[1])
    assert node_hash(left, right) == hashlib.sha256(b"\x01" + left + right).digest()
