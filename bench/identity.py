"""Canonical identity speed, as ratios against baselines run in this same process.

(a) stdlib definition vs kernel.canonical_json (every refusal check on) on a
    realistic 30-field dict (3-4 KB canonical) and on a 10,000-record list.
(b) a frozen record's id, end to end (construct + seal), vs the stdlib definition
    (json.dumps(attrs.asdict(x), ...) + sha256) and vs the floor (orjson of a
    prebuilt dict + sha256); and a repeated read of a record's id.
(c) construction: the same record (every field checked by its annotation, id given)
    vs a plain attrs class with the same fields and no checks; and a `SourceSpan`.

Targets (issue 2): (a) >= 2.5x the stdlib; (b) >= 6x the stdlib and <= 2x the floor
for a fresh id; a repeated read < 0.1 us. (c) is reported, not held to a target.

    python bench/identity.py
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
import timeit
from collections.abc import Callable
from typing import Any

import attrs
import orjson

from kernel.records.codec import UNSEALED, Identity, Record, compute_id, seal
from kernel.records.identity import canonical_json
from kernel.records.values import (
    Count,
    Digest,
    Digests,
    OptionalDigest,
    SourceSpan,
    Text,
    VersionPairsField,
)


def stdlib(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def best(fn: Callable[[], object], number: int) -> float:
    """Best-of-15 CPU seconds per call (this process's CPU time, and the best run: the
    one least disturbed by other processes of a shared machine)."""
    runs = max(1, number // 3)
    return min(timeit.Timer(fn, timer=time.process_time).repeat(number=runs, repeat=15)) / runs


def paired(slow: Callable[[], object], fast: Callable[[], object], number: int) -> float:
    """``slow``'s time over ``fast``'s: the median of 15 ratios, each of the two timed
    one right after the other (so both see the same load of a shared machine)."""
    runs = max(1, number // 3)
    ratios = []
    for _ in range(15):
        a = timeit.Timer(slow, timer=time.process_time).timeit(runs)
        b = timeit.Timer(fast, timer=time.process_time).timeit(runs)
        ratios.append(a / b)
    return statistics.median(ratios)


def realistic_dict(i: int = 0) -> dict[str, Any]:
    value: dict[str, Any] = {
        "attempt_id": f"{i:064x}",
        "run_id": "ab" * 32,
        "operator_id": "missing_role_candidate",
        "operator_version": "missing_role_candidate.v1",
        "attempt_index": i,
        "depth": 1,
        "step_index": 0,
        "replay_status": "replay_pending",
        "replay_blockers": [],
        "parent_attempt_id": None,
        "exhausted": False,
        "budget_charge": {"candidates": 1, "steps": 1},
        "evidence_spans": [
            {
                "text": f"évidence span {j} \U0001f600",
                "start": j * 10,
                "end": j * 10 + 8,
                "sentence_index": j,
            }
            for j in range(6)
        ],
        "residual_ids": [f"{j:064x}" for j in range(8)],
        "schema_versions": [["a.schema", "v1"], ["b.schema", "v2"]],
    }
    for j in range(15):
        value[f"field_{j:02d}"] = f"value {j} with some prose ✓ " * 3
    return value


@attrs.frozen(kw_only=True)
class BenchRecord(Record):
    """A 30-field record comparable to the realistic dict; annotations alone say what
    each field admits (checked at construction by the codec)."""

    __identity__ = Identity(field="record_id")

    record_id: Digest = UNSEALED
    run_id: Digest
    operator_id: Text
    operator_version: Text
    attempt_index: Count
    depth: Count
    step_index: Count
    replay_status: Text
    replay_blockers: tuple[str, ...]
    parent_attempt_id: OptionalDigest
    exhausted: bool
    evidence_spans: tuple[SourceSpan, ...]
    residual_ids: Digests
    schema_versions: VersionPairsField
    f00: str
    f01: str
    f02: str
    f03: str
    f04: str
    f05: str
    f06: str
    f07: str
    f08: str
    f09: str
    f10: str
    f11: str
    f12: str
    f13: str
    f14: str
    explanation: str = ""


@attrs.frozen(kw_only=True)
class BareRecord:
    """`BenchRecord`'s fields in a plain attrs class: no checks at all (the baseline)."""

    record_id: str = UNSEALED
    run_id: str
    operator_id: str
    operator_version: str
    attempt_index: int
    depth: int
    step_index: int
    replay_status: str
    replay_blockers: tuple[str, ...]
    parent_attempt_id: str | None
    exhausted: bool
    evidence_spans: tuple[SourceSpan, ...]
    residual_ids: tuple[str, ...]
    schema_versions: tuple[tuple[str, str], ...]
    f00: str
    f01: str
    f02: str
    f03: str
    f04: str
    f05: str
    f06: str
    f07: str
    f08: str
    f09: str
    f10: str
    f11: str
    f12: str
    f13: str
    f14: str
    explanation: str = ""


@attrs.frozen(kw_only=True)
class BareSpan:
    """`SourceSpan`'s fields, unchecked."""

    text: str
    start: int
    end: int
    sentence_index: int | None = None


def record_fields() -> dict[str, Any]:
    d = realistic_dict(7)
    fields: dict[str, Any] = {
        "run_id": d["run_id"],
        "operator_id": d["operator_id"],
        "operator_version": d["operator_version"],
        "attempt_index": 7,
        "depth": 1,
        "step_index": 0,
        "replay_status": "replay_pending",
        "replay_blockers": (),
        "parent_attempt_id": None,
        "exhausted": False,
        "evidence_spans": tuple(SourceSpan(**s) for s in d["evidence_spans"]),
        "residual_ids": tuple(d["residual_ids"]),
        "schema_versions": (("a.schema", "v1"), ("b.schema", "v2")),
    }
    for j in range(15):
        fields[f"f{j:02d}"] = d[f"field_{j:02d}"]
    return fields


def main() -> None:
    one = realistic_dict()
    many = [realistic_dict(i) for i in range(10_000)]
    assert canonical_json(one) == stdlib(one)
    print(f"realistic dict: {len(canonical_json(one))} canonical bytes")

    t_std = best(lambda: stdlib(one), 2000)
    t_k = best(lambda: canonical_json(one), 2000)
    t_raw = best(lambda: orjson.dumps(one, option=orjson.OPT_SORT_KEYS), 2000)
    print(
        f"(a) 30-field dict: stdlib {t_std * 1e6:.2f} us, kernel {t_k * 1e6:.2f} us "
        f"(checks on) -> {t_std / t_k:.2f}x stdlib; bare orjson {t_raw * 1e6:.2f} us"
    )
    t_std_many = best(lambda: stdlib(many), 3)
    t_k_many = best(lambda: canonical_json(many), 3)
    print(
        f"(a) 10,000 records: stdlib {t_std_many * 1e3:.1f} ms, kernel {t_k_many * 1e3:.1f} ms "
        f"-> {t_std_many / t_k_many:.2f}x stdlib"
    )

    fields = record_fields()
    record = seal(BenchRecord, **fields)
    prebuilt = record.to_dict()

    def stdlib_id() -> str:
        return hashlib.sha256(stdlib(attrs.asdict(record))).hexdigest()

    def floor_id() -> str:
        return hashlib.sha256(orjson.dumps(prebuilt, option=orjson.OPT_SORT_KEYS)).hexdigest()

    t_id = best(lambda: compute_id(record), 2000)
    t_seal = best(lambda: seal(BenchRecord, **fields), 2000)
    t_std_id = best(stdlib_id, 2000)
    t_floor = best(floor_id, 2000)
    t_read = best(lambda: record.record_id, 200_000)
    vs_stdlib = paired(stdlib_id, lambda: compute_id(record), 2000)
    vs_floor = paired(lambda: compute_id(record), floor_id, 2000)
    print(
        f"(b) fresh id of a record (compute_id): {t_id * 1e6:.2f} us; stdlib definition "
        f"{t_std_id * 1e6:.2f} us -> {vs_stdlib:.2f}x stdlib; floor "
        f"{t_floor * 1e6:.2f} us -> {vs_floor:.2f}x floor (ratios: median of paired runs)"
    )
    print(f"(b) construct + validate + seal a new record: {t_seal * 1e6:.2f} us")
    given = {**fields, "record_id": record.record_id}
    span_fields: dict[str, Any] = {"text": "évidence", "start": 3, "end": 9, "sentence_index": 1}
    t_new = best(lambda: BenchRecord(**given), 2000)
    t_bare = best(lambda: BareRecord(**given), 2000)
    t_span = best(lambda: SourceSpan(**span_fields), 5000)
    t_span_bare = best(lambda: BareSpan(**span_fields), 5000)
    construct = paired(lambda: BenchRecord(**given), lambda: BareRecord(**given), 2000)
    span = paired(lambda: SourceSpan(**span_fields), lambda: BareSpan(**span_fields), 5000)
    print(
        f"(c) construct (every field checked, id given): {t_new * 1e6:.2f} us vs plain attrs "
        f"{t_bare * 1e6:.2f} us -> {construct:.2f}x; a span {t_span * 1e6:.2f} us vs "
        f"{t_span_bare * 1e6:.2f} us -> {span:.2f}x"
    )
    print(f"(b) repeated read of the id (stored field): {t_read * 1e9:.1f} ns")


if __name__ == "__main__":
    main()
