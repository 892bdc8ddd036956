"""Every public strategy of `kernel.strategies` draws valid records, and its helpers
refuse to present a wrong outcome as the one they promise."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel.strategies as ks
from kernel.records.codec import Record
from kernel.strategies._seeded import Stream
from kernel.strategies.report import provenances
from kernel.strategies.search import CORRUPTED_FIELDS, _corrupted, _pair_of, _refused

_RECORDS = [
    ks.actors,
    ks.attempt_records,
    ks.branches,
    ks.drafts,
    ks.work_units,
    ks.budget_charges,
    ks.budget_consumed,
    ks.candidate_reconstructions,
    provenances,
]


@pytest.mark.parametrize("strategy", _RECORDS, ids=lambda make: make.__name__)
@settings(max_examples=25)
@given(data=st.data())
def test_record_strategies_draw_records_that_round_trip(strategy: Any, data: Any) -> None:
    """For all drawn records: the document reads back as the same record (every field
    valid, every recomputable id reproducing)."""
    record = data.draw(strategy())
    assert isinstance(record, Record)
    assert type(record).from_dict(record.to_dict()) == record


@given(ks.identifiers(), ks.tool_sets())
def test_identifiers_are_non_blank_and_tool_sets_sorted_and_unique(
    identifier: str, tools: tuple[str, ...]
) -> None:
    assert identifier.strip()
    assert list(tools) == sorted(set(tools))


def test_a_corrupted_pair_that_would_bind_is_never_presented_as_a_refusal() -> None:
    run, result = _pair_of(1, Stream(7))
    with pytest.raises(TypeError, match="was not refused"):
        _refused((run, result, _corrupted(CORRUPTED_FIELDS[0], Stream(7))[2]))


def test_without_hypothesis_the_import_says_which_extra_brings_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user without the ``testing`` extra is told how to get it, not only what is missing."""
    for name in [
        m for m in sys.modules if m == "kernel.strategies" or m.startswith("kernel.strategies.")
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "hypothesis", None)
    with pytest.raises(ModuleNotFoundError, match=r"evidence-kernel\[testing\]") as caught:
        importlib.import_module("kernel.strategies")
    assert caught.value.name == "hypothesis"
