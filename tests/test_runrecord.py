"""Tests for kernel.run.record: run record invariants, digests and first_difference."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.effects.orchestrate import run_config
from kernel.effects.run_config import RunConfig, filled
from kernel.errors import RecordError
from kernel.records.codec import short_repr
from kernel.run.record import (
    RunRecord,
    first_difference,
    has_absolute_path,
    redact_absolute_paths,
)
from kernel.strategies import json_values, run_records

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "orchestration"


def _run() -> dict[str, Any]:
    return run_config(FIXTURES / "two-attempt-worker-failure.json").to_dict()


def test_digest_recomputes_with_the_stdlib() -> None:
    """RunRecord.digest is SHA-256 of the stdlib canonical JSON of the whole document."""
    run = run_config(FIXTURES / "two-attempt-good-vs-bad.json")
    text = json.dumps(run.to_dict(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert run.digest == hashlib.sha256(text.encode()).hexdigest()


INVALID: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "no-attempts": (lambda d: d.update(attempts=[]), "attempts"),
    "order-gap": (lambda d: d["attempts"][1].update(order=3), "attempts[1].order"),
    "duplicate-id": (
        lambda d: d["attempts"][1].update(attempt_id="attempt-001"),
        "attempts[1].attempt_id",
    ),
    "verified-without-verification": (
        lambda d: d["attempts"][0].update(verification=None),
        "attempts[0].state",
    ),
    "worker-error-without-error": (
        lambda d: d["attempts"][1].update(error=None),
        "attempts[1].state",
    ),
    "absolute-path-message": (
        lambda d: d["attempts"][1]["error"].update(message="failed at /home/me/x"),
        "attempts[1].error.message",
    ),
    "authority-granted": (lambda d: d["authority"].update(merge=True), "authority.merge"),
    "wrong-kind": (lambda d: d.update(kind="idkmesh-two-attempt-run"), "kind"),
    "prefixed-digest": (
        lambda d: d.update(config_digest="sha256:" + d["config_digest"]),
        "config_digest",
    ),
    "unknown-field": (lambda d: d.update(timestamp="2026-01-01T00:00:00Z"), "timestamp"),
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_run_records_are_refused_with_the_path(name: str) -> None:
    """Every invariant violation is refused by from_dict, naming the field path."""
    edit, path = INVALID[name]
    document = _run()
    edit(document)
    with pytest.raises(RecordError) as info:
        RunRecord.from_dict(document)
    assert info.value.path == path


@pytest.mark.parametrize(
    ("text", "absolute"),
    [
        ("/etc/passwd: bad", True),
        ('cannot read "/home/x/y"', True),
        ("C:\\Users\\x", True),
        ("file:///tmp/x", True),
        ("x=/tmp/y", True),
        ("candidates/good/result-manifest.json: missing", False),
        ("ratio 1/2 and <i>html</i>", False),
    ],
)
def test_absolute_path_detection_and_redaction(text: str, absolute: bool) -> None:
    """Absolute paths are detected, and redaction removes every one of them."""
    assert has_absolute_path(text) is absolute
    redacted = redact_absolute_paths(text)
    assert not has_absolute_path(redacted)
    assert (redacted == text) is not absolute


def test_first_difference_names_the_path() -> None:
    """first_difference walks keys in sorted order and arrays by index."""
    left = {"a": [1, {"b": True}], "c": 1}
    assert first_difference(left, left) is None
    assert first_difference(left, {"a": [1, {"b": 1}], "c": 1}) == "$.a[1].b"
    assert first_difference(left, {"a": [1], "c": 1}) == "$.a[1]"
    assert first_difference(left, {"a": [1, {"b": True}]}) == "$.c"
    assert first_difference([1], (1,)) == "$"


@settings(max_examples=60, deadline=None)
@given(json_values(), json_values())
def test_first_difference_agrees_with_equality(left: object, right: object) -> None:
    """first_difference is None exactly when the canonical documents are equal.

    Documents as read from JSON hold lists, never tuples (first_difference compares
    types exactly, so ``[[]]`` and ``[()]`` differ): both sides are read back first.
    """
    left, right = json.loads(json.dumps(left)), json.loads(json.dumps(right))
    same = json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)
    assert (first_difference(left, right) is None) is same
    assert first_difference(left, left) is None


@settings(max_examples=40, deadline=None)
@given(run_records())
def test_round_trip_and_digest_stability(run: RunRecord) -> None:
    """from_dict(to_dict(r)) == r and the digest survives the round trip."""
    again = RunRecord.from_dict(run.to_dict())
    assert again == run
    assert again.digest == run.digest


@settings(max_examples=30, deadline=None)
@given(run_records(max_attempts=4), st.data())
def test_any_single_field_tamper_changes_the_digest(run: RunRecord, data: st.DataObject) -> None:
    """Changing any one scalar of a run record changes its canonical digest."""
    document = run.to_dict()
    paths = list(_scalar_paths(document))
    container, key = data.draw(st.sampled_from(paths))
    container[key] = _tampered(container[key])
    text = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert hashlib.sha256(text.encode()).hexdigest() != run.digest


def _scalar_paths(value: Any) -> Any:
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if isinstance(item, dict | list) and item:
            yield from _scalar_paths(item)
        else:
            yield value, key


def _tampered(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if value is None:
        return "x"
    return None


def test_a_run_and_its_config_refuse_a_repeated_attempt_id_alike() -> None:
    """One rule, one helper: a run record and a run config name the second of two equal
    attempt ids with the same words, the id shown bounded (a long id is cut)."""
    repeated = "attempt-" + "x" * 100
    run = _run()
    for attempt in run["attempts"]:
        attempt["attempt_id"] = repeated
    with pytest.raises(RecordError) as from_run:
        RunRecord.from_dict(run, verify_ids=False)
    config = json.loads((FIXTURES / "two-attempt-worker-failure.json").read_text())
    for attempt in config["attempts"]:
        attempt["attempt_id"] = repeated
    with pytest.raises(RecordError) as from_config:
        RunConfig.from_dict(filled(RunConfig, config))
    assert from_run.value.path == from_config.value.path == "attempts[1].attempt_id"
    assert from_run.value.reason == from_config.value.reason
    assert from_run.value.reason == f"duplicate attempt id {short_repr(repeated)}"
    assert len(from_run.value.reason) < 70
