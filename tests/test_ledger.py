"""Tests for kernel.decide.ledger: entry ids, the chain rules L1-L6, every single-entry tamper."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.decide.ledger import (
    GENESIS_ID,
    EntryKind,
    LedgerEntry,
    LedgerHead,
    LedgerReason,
    LedgerRefusal,
    LedgerVerified,
    RawEntry,
    entry_id_of,
    entry_row_after,
    new_entry,
    next_entry,
    verify_chain,
)
from kernel.decide.merkle import TreeBuilder, leaf_hash
from kernel.errors import ParameterTypeError, ParameterValueError
from kernel.records.codec import compute_id
from kernel.strategies import digests, json_values, texts


def stdlib_sha(payload: Any) -> str:
    """The id definition, recomputed with the stdlib only."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chain(payloads: list[dict[str, object]]) -> list[LedgerEntry]:
    """A valid chain of admission entries."""
    head = LedgerHead.empty()
    entries = []
    for payload in payloads:
        entry = next_entry(head, EntryKind.ADMISSION, payload)
        entries.append(entry)
        head = LedgerHead(seq=entry.seq, entry_id=entry.entry_id)
    return entries


def raw(entries: list[LedgerEntry]) -> list[RawEntry]:
    """Entries as a store returns them."""
    return [
        RawEntry(e.seq, e.entry_id, e.prev_id, e.kind.value, e.payload_digest, e.payload)
        for e in entries
    ]


def head_of(entries: list[RawEntry]) -> tuple[object, object]:
    """The head a store would record for these entries."""
    return (len(entries), entries[-1].entry_id) if entries else (0, GENESIS_ID)


def test_entry_id_recomputed_with_stdlib() -> None:
    """The entry id is SHA-256 over seq, prev_id, kind and the payload's digest."""
    entry = next_entry(LedgerHead.empty(), EntryKind.DECISION, {"b": 1, "a": "é"})
    assert entry.payload == '{"a":"é","b":1}'
    assert entry.payload_digest == hashlib.sha256(entry.payload.encode()).hexdigest()
    expected = stdlib_sha(
        {
            "entry_id": "",
            "kind": "decision",
            "payload_digest": entry.payload_digest,
            "prev_id": GENESIS_ID,
            "seq": 1,
        }
    )
    assert entry.entry_id == expected == compute_id(entry)
    assert entry_id_of(1, GENESIS_ID, "decision", entry.payload_digest) == expected


def test_entry_round_trip() -> None:
    """from_dict(to_dict()) is the identity and verifies the id."""
    entry = chain([{"x": 1}])[0]
    assert LedgerEntry.from_dict(entry.to_dict()) == entry


def test_payload_must_be_an_object() -> None:
    """A ledger payload is a JSON object: anything else is a programmer error."""
    with pytest.raises(TypeError):
        next_entry(LedgerHead.empty(), EntryKind.ADMISSION, [1])  # type: ignore[arg-type]


def test_empty_chain_is_intact() -> None:
    """A fresh ledger verifies with count 0 at the genesis head."""
    outcome = verify_chain([], recorded_head=(0, GENESIS_ID))
    assert outcome == LedgerVerified(count=0, head=LedgerHead.empty())


@given(st.lists(st.dictionaries(texts(), json_values(8), max_size=4), max_size=12))
def test_valid_chains_verify(payloads: list[dict[str, object]]) -> None:
    """For all payload sequences, the chain built by next_entry verifies."""
    entries = raw(chain(payloads))
    outcome = verify_chain(entries, recorded_head=head_of(entries))
    assert isinstance(outcome, LedgerVerified)
    assert outcome.count == len(payloads)


def _edits(entry: RawEntry) -> list[tuple[str, RawEntry]]:
    other = "f" * 64
    return [
        ("seq", entry._replace(seq=entry.seq + 7)),  # type: ignore[operator]
        ("entry_id", entry._replace(entry_id=other)),
        ("prev_id", entry._replace(prev_id=other)),
        ("kind", entry._replace(kind="promotion")),
        ("kind-unknown", entry._replace(kind="bogus")),
        ("payload", entry._replace(payload=str(entry.payload) + " ")),
        ("payload_digest", entry._replace(payload_digest=other)),
        ("payload-none", entry._replace(payload=None)),
        ("seq-text", entry._replace(seq=str(entry.seq))),
    ]


PAYLOADS: list[dict[str, object]] = [{"n": i} for i in range(6)]


@pytest.mark.parametrize("index", range(len(PAYLOADS)))
def test_every_single_field_edit_is_caught(index: int) -> None:
    """Editing any one field of any one entry breaks the chain at that entry."""
    entries = raw(chain(PAYLOADS))
    for name, edited in _edits(entries[index]):
        tampered = [*entries[:index], edited, *entries[index + 1 :]]
        outcome = verify_chain(tampered, recorded_head=head_of(entries))
        assert isinstance(outcome, LedgerRefusal), name
        assert outcome.position == index + 1, name


@pytest.mark.parametrize("index", range(len(PAYLOADS)))
def test_every_deletion_is_caught(index: int) -> None:
    """Deleting any one entry (the last one included) is caught."""
    entries = raw(chain(PAYLOADS))
    tampered = entries[:index] + entries[index + 1 :]
    outcome = verify_chain(tampered, recorded_head=head_of(entries))
    assert isinstance(outcome, LedgerRefusal)
    if index == len(entries) - 1:
        assert outcome.reason_codes == (LedgerReason.HEAD_MISMATCH,)
    else:
        assert outcome.position == index + 1
        assert LedgerReason.SEQUENCE_BROKEN in outcome.reason_codes


@pytest.mark.parametrize("index", range(len(PAYLOADS) - 1))
def test_every_swap_is_caught(index: int) -> None:
    """Swapping two neighbouring entries is caught at the first of them."""
    entries = raw(chain(PAYLOADS))
    tampered = list(entries)
    tampered[index], tampered[index + 1] = tampered[index + 1], tampered[index]
    outcome = verify_chain(tampered, recorded_head=head_of(entries))
    assert isinstance(outcome, LedgerRefusal)
    assert outcome.position == index + 1


@pytest.mark.parametrize("index", range(len(PAYLOADS) + 1))
def test_every_insertion_is_caught(index: int) -> None:
    """Inserting a well-formed entry anywhere (renumbered or not) is caught."""
    entries = raw(chain(PAYLOADS))
    previous = entries[index - 1].entry_id if index else GENESIS_ID
    forged = next_entry(
        LedgerHead(seq=index, entry_id=str(previous)), EntryKind.PROMOTION, {"forged": True}
    )
    tampered = [*entries[:index], *raw([forged]), *entries[index:]]
    outcome = verify_chain(tampered, recorded_head=head_of(entries))
    assert isinstance(outcome, LedgerRefusal)
    # The forged entry itself links correctly; the entry after it (or the head) cannot.
    assert outcome.position == index + 2


def test_resealed_rewrite_of_the_tail_caught_by_anchor() -> None:
    """Rebuilding the tail with valid ids (and the head) passes L1-L6 but not an
    outside anchor: that is what a promotion trailer's entry id is for."""
    entries = chain(PAYLOADS)
    anchor = LedgerHead(seq=entries[-1].seq, entry_id=entries[-1].entry_id)
    rewritten = raw(chain([*PAYLOADS[:-1], {"n": "forged"}]))
    assert isinstance(verify_chain(rewritten, recorded_head=head_of(rewritten)), LedgerVerified)
    outcome = verify_chain(rewritten, recorded_head=head_of(rewritten), expected_head=anchor)
    assert isinstance(outcome, LedgerRefusal)
    assert outcome.reason_codes == (LedgerReason.HEAD_MISMATCH,)


def test_recorded_head_garbage_is_a_mismatch() -> None:
    """A recorded head of the wrong type never matches."""
    entries = raw(chain(PAYLOADS))
    for bad in [(str(len(entries)), entries[-1].entry_id), (None, None), (True, GENESIS_ID)]:
        outcome = verify_chain(entries, recorded_head=bad)
        assert isinstance(outcome, LedgerRefusal)
        assert outcome.reason_codes == (LedgerReason.HEAD_MISMATCH,)


def test_broken_refusal_id_recomputed() -> None:
    """A LedgerRefusal's id self-seals over position, entry id and codes."""
    entries = raw(chain(PAYLOADS))
    tampered = [entries[0]._replace(payload="{}"), *entries[1:]]
    outcome = verify_chain(tampered, recorded_head=None)
    assert isinstance(outcome, LedgerRefusal)
    assert outcome.reason_codes == (LedgerReason.PAYLOAD_EDITED,)
    assert outcome.refusal_id == stdlib_sha(
        {
            "refusal_id": "",
            "position": 1,
            "entry_id": entries[0].entry_id,
            "reason_codes": ["payload_edited"],
        }
    )
    assert "entry 1" in outcome.explanation


def narrow(entries: list[RawEntry]) -> list[RawEntry]:
    """Entries as a store that keeps no prev_id nor payload_digest returns them."""
    return [e._replace(prev_id=None, payload_digest=None) for e in entries]


@given(st.lists(st.integers(0, 5), min_size=1, max_size=3), st.data(), st.booleans())
def test_any_payload_edit_is_caught(
    indexes: list[int], data: st.DataObject, narrow_rows: bool
) -> None:
    """For all payload rewrites of any entry, verification fails at the first edited
    one, whether the store keeps each entry's prev_id and payload_digest or not."""
    entries = narrow(raw(chain(PAYLOADS))) if narrow_rows else raw(chain(PAYLOADS))
    tampered = list(entries)
    for index in indexes:
        new = data.draw(st.dictionaries(texts(), json_values(4), min_size=1, max_size=3))
        if new != {"n": index}:
            tampered[index] = tampered[index]._replace(
                payload=json.dumps(new, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
            )
    changed = [i for i in range(len(entries)) if tampered[i] != entries[i]]
    outcome = verify_chain(tampered, recorded_head=head_of(entries))
    if changed:
        assert isinstance(outcome, LedgerRefusal)
        assert outcome.position == changed[0] + 1
    else:
        assert isinstance(outcome, LedgerVerified)


@given(
    st.integers(min_value=0, max_value=2**53 - 1),
    digests(),
    st.sampled_from(EntryKind),
    digests(),
)
def test_written_out_id_equals_the_definition(
    seq: int, prev_id: str, kind: EntryKind, payload_digest: str
) -> None:
    """For all admitted shapes, the written-out canonical bytes give the defined id."""
    expected = stdlib_sha(
        {
            "entry_id": "",
            "kind": kind.value,
            "payload_digest": payload_digest,
            "prev_id": prev_id,
            "seq": seq,
        }
    )
    assert entry_id_of(seq, prev_id, kind.value, payload_digest) == expected
    # Shapes outside the fast path still follow the definition.
    assert entry_id_of(seq, prev_id, "Other", payload_digest) == stdlib_sha(
        {"entry_id": "", "kind": "Other", "payload_digest": payload_digest,
         "prev_id": prev_id, "seq": seq}
    )  # fmt: skip


def test_new_entry_refuses_misuse() -> None:
    """A bad head or kind is a programmer error."""
    with pytest.raises(ParameterValueError, match=r"new_entry\(\): head: expected a ledger head"):
        new_entry((0, "x"), EntryKind.ADMISSION, {})
    with pytest.raises(ParameterTypeError, match=r"new_entry\(\): kind: expected an EntryKind"):
        new_entry((0, GENESIS_ID), "admission", {})  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="payload: expected a dict, got list"):
        new_entry((0, GENESIS_ID), EntryKind.ADMISSION, [])  # type: ignore[arg-type]
    entry = new_entry((0, GENESIS_ID), EntryKind.ADMISSION, {"a": 1})
    record = next_entry(LedgerHead.empty(), EntryKind.ADMISSION, {"a": 1})
    assert entry._asdict() == {f: getattr(record, f) for f in entry._fields}
    tree = TreeBuilder()
    with pytest.raises(ParameterTypeError, match=r"new_entry\(\): kind: expected an EntryKind"):
        entry_row_after(tree, GENESIS_ID, "admission", {})  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="payload: expected a dict, got list"):
        entry_row_after(tree, GENESIS_ID, EntryKind.ADMISSION, [])  # type: ignore[arg-type]
    assert tree.size == 0


@given(st.lists(st.tuples(st.sampled_from(EntryKind), st.dictionaries(texts(), json_values(3))),
                max_size=9))  # fmt: skip
def test_a_stores_row_is_new_entry_and_its_merkle_roots(
    steps: list[tuple[EntryKind, dict[str, object]]],
) -> None:
    """For all kind/payload sequences, `entry_row_after` (a store's append) makes the
    row of `new_entry` after the same head, and the roots `TreeBuilder.append` of its
    `leaf_hash` completes; its tree grows as that one."""
    fast, slow, head = TreeBuilder(), TreeBuilder(), (0, GENESIS_ID)
    for kind, payload in steps:
        row = entry_row_after(fast, head[1], kind, payload)
        entry = new_entry(head, kind, payload)
        completed = b"".join(slow.append(leaf_hash(entry.entry_id))) or None
        assert row == (*entry[:3], kind.value, *entry[4:], completed)
        assert (fast.size, fast.frontier) == (slow.size, slow.frontier)
        head = (entry.seq, entry.entry_id)


# -- branches: payloads stored as bytes, fields with no canonical form -------------------


def test_a_chain_whose_payloads_are_stored_as_bytes_verifies() -> None:
    entries = [e._replace(payload=str(e.payload).encode()) for e in raw(chain(PAYLOADS[:3]))]
    assert all(type(e.payload) is bytes for e in entries)
    assert isinstance(verify_chain(entries, recorded_head=head_of(entries)), LedgerVerified)
    stored = [str(e.payload) for e in raw(chain(PAYLOADS[:3]))]
    edited = [entries[0], entries[1]._replace(payload=stored[1].encode() + b" "), entries[2]]
    outcome = verify_chain(edited, recorded_head=head_of(entries))
    assert isinstance(outcome, LedgerRefusal)
    assert outcome.position == 2
    assert LedgerReason.PAYLOAD_EDITED in outcome.reason_codes


@pytest.mark.parametrize("field", ["kind", "seq"])
def test_an_entry_field_with_no_canonical_form_is_an_id_mismatch_not_a_crash(field: str) -> None:
    entries = raw(chain(PAYLOADS[:2]))
    bad = "\ud800" if field == "kind" else 2**60
    tampered = [entries[0]._replace(**{field: bad}), entries[1]]
    outcome = verify_chain(tampered, recorded_head=head_of(entries))
    assert isinstance(outcome, LedgerRefusal)
    assert outcome.position == 1
    assert LedgerReason.ENTRY_ID_MISMATCH in outcome.reason_codes


def test_entries_built_by_new_entry_and_next_entry_verify() -> None:
    """Issue 22: an `EntryKind` is its own value, not an unknown kind."""
    records = chain(PAYLOADS)
    assert verify_chain(records, recorded_head=None) == LedgerVerified(
        count=len(records), head=LedgerHead(seq=records[-1].seq, entry_id=records[-1].entry_id)
    )
    made = [new_entry((0, GENESIS_ID), EntryKind.DECISION, {"n": 1})]
    made.append(new_entry((1, made[0].entry_id), EntryKind.PROMOTION, {"n": 2}))
    assert isinstance(verify_chain(made, recorded_head=(2, made[1].entry_id)), LedgerVerified)
    assert entry_id_of(1, GENESIS_ID, EntryKind.DECISION, made[0].payload_digest) == (
        made[0].entry_id
    )


def test_verify_chain_refuses_what_is_no_chain() -> None:
    for bad in [5, "entries", b"x", {"a": 1}]:
        with pytest.raises(ParameterTypeError, match="entries"):
            verify_chain(bad, recorded_head=None)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match=r"entries\[0\]"):
        verify_chain([("short",)], recorded_head=None)
    with pytest.raises(ParameterTypeError, match="recorded_head"):
        verify_chain([], recorded_head=5)  # type: ignore[arg-type]


def test_a_broken_entry_says_what_was_expected_and_found() -> None:
    entries = raw(chain(PAYLOADS))
    tampered = [entries[0], entries[1]._replace(seq=7, kind="other"), *entries[2:]]
    outcome = verify_chain(tampered, recorded_head=None)
    assert isinstance(outcome, LedgerRefusal)
    assert "seq expected 2, found 7" in outcome.explanation
    assert "kind expected one of" in outcome.explanation
    tampered = [entries[0], entries[1]._replace(prev_id=GENESIS_ID, payload=5)]
    outcome = verify_chain(tampered, recorded_head=None)
    assert isinstance(outcome, LedgerRefusal)
    assert f"prev_id expected {str(entries[0].entry_id)[:12]}" in outcome.explanation
    assert "found no text" in outcome.explanation
    outcome = verify_chain(entries, recorded_head=(1, entries[0].entry_id))
    assert isinstance(outcome, LedgerRefusal)
    assert "expected the recorded head, seq 1" in outcome.explanation


def test_resealed_rewrite_of_the_tail_caught_by_a_merkle_anchor() -> None:
    """A promotion trailer anchors the tree at its size: a tail rewritten with
    recomputed ids and head no longer has that root (L7)."""
    entries = chain(PAYLOADS)
    intact = verify_chain(entries[:3], recorded_head=None, anchors={})
    assert isinstance(intact, LedgerVerified)
    assert intact.root_hash is not None
    anchors = {3: intact.root_hash}
    assert isinstance(verify_chain(entries, recorded_head=None, anchors=anchors), LedgerVerified)
    rewritten = raw(chain([*PAYLOADS[:2], {"n": "forged"}, *PAYLOADS[3:]]))
    outcome = verify_chain(rewritten, recorded_head=head_of(rewritten), anchors=anchors)
    assert isinstance(outcome, LedgerRefusal)
    assert outcome.reason_codes == (LedgerReason.ANCHOR_MISMATCH,)
    assert outcome.position == 3
    truncated = raw(chain(PAYLOADS[:2]))
    outcome = verify_chain(truncated, recorded_head=head_of(truncated), anchors=anchors)
    assert isinstance(outcome, LedgerRefusal)
    assert outcome.reason_codes == (LedgerReason.ANCHOR_MISMATCH,)
    assert outcome.position == 3
    assert verify_chain([], recorded_head=None).root_hash is None  # type: ignore[union-attr]


# -- rows that keep no prev_id nor payload_digest (SQLite's narrow row) ------------------


def test_a_chain_of_narrow_rows_verifies() -> None:
    """None for prev_id and payload_digest stands for the previous id and the
    payload's hash: the chain verifies as the full rows do, to the same head."""
    entries = raw(chain(PAYLOADS))
    full = verify_chain(entries, recorded_head=head_of(entries), anchors={})
    outcome = verify_chain(narrow(entries), recorded_head=head_of(entries), anchors={})
    assert isinstance(outcome, LedgerVerified)
    assert outcome == full


Tamper = Callable[[list[RawEntry]], list[RawEntry]]
NARROW_BREAKS: dict[str, tuple[Tamper, int, list[LedgerReason]]] = {
    # The id covers the previous id and the payload's hash: it is what fails.
    "payload edited": (lambda es: [*es[:2], es[2]._replace(payload='{"n":9}'), *es[3:]], 3,
                       [LedgerReason.ENTRY_ID_MISMATCH]),
    "entry removed": (lambda es: [*es[:2], *es[3:]], 3,
                      [LedgerReason.SEQUENCE_BROKEN, LedgerReason.ENTRY_ID_MISMATCH]),
    "payload not text": (lambda es: [es[0]._replace(payload=5), *es[1:]], 1,
                         [LedgerReason.PAYLOAD_EDITED, LedgerReason.ENTRY_ID_MISMATCH]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(NARROW_BREAKS))
def test_a_narrow_row_break_is_named(name: str) -> None:
    """Each break of a narrow chain is caught at its entry with the codes it fails,
    and says what was expected."""
    tamper, position, codes = NARROW_BREAKS[name]
    entries = narrow(raw(chain(PAYLOADS)))
    outcome = verify_chain(tamper(entries), recorded_head=None)
    assert isinstance(outcome, LedgerRefusal)
    assert (outcome.position, list(outcome.reason_codes)) == (position, codes)
    if name == "payload not text":
        assert "payload expected text, found no text" in outcome.explanation
