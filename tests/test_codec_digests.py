"""`kernel.records.codec.document_digest` is the digest of ``to_dict()`` as canonical JSON."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.errors import ParameterTypeError
from kernel.records.codec import Record, _document_default, document_digest
from kernel.records.identity import sha256_hex
from kernel.strategies import (
    binding_pairs,
    branches,
    reports,
    result_manifests,
    run_observations,
    run_records,
    verification_results,
    work_units,
)

RECORDS = st.one_of(
    work_units(),
    result_manifests(),
    verification_results(),
    run_records(max_attempts=4),
    reports(max_attempts=3),
    branches(),
    binding_pairs().map(lambda pair: pair[1]),
    run_observations().map(lambda observations: observations[0]),
)


@given(RECORDS)
def test_document_digest_is_the_digest_of_to_dict(record: Record) -> None:
    """For all records: the fast digest equals the definition (enums by value, tuples
    as arrays, nested records as their documents, every field)."""
    assert document_digest(record) == sha256_hex(record.to_dict())


def test_document_digest_refuses_what_is_not_a_record() -> None:
    with pytest.raises(ParameterTypeError, match="document_digest"):
        document_digest({"a": 1})  # type: ignore[arg-type]


def test_a_nested_value_that_is_not_a_record_is_refused_by_the_hook() -> None:
    """Only a record altered after construction could hold one: it is not digested."""
    with pytest.raises(TypeError, match="is not a record"):
        _document_default(object())
