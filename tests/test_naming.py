"""One naming pattern for outcomes (docs/naming.md), held by walking `kernel.__all__`.

A refusal is ``<Thing>Refusal`` and its reason enum ``<Thing>Reason``; the success of a
check of an existing record is ``<Thing>Verified`` or a stored document named by its kind.
The one exception is ADR-0232's binding, whose names are the reference's public names.
"""

from __future__ import annotations

import enum
import typing

import pytest

import kernel
from kernel.records.values import Refusal

# ADR-0232 keeps the reference implementation's `__all__` so its users' imports port as-is.
_REFERENCE_NAMES = {"CandidateAttemptRunBindingRefusal": "RunAttemptBindingRefusalReason"}
_REFUSALS = sorted(
    name
    for name in kernel.__all__
    if isinstance(getattr(kernel, name), type)
    and issubclass(getattr(kernel, name), Refusal)
    and getattr(kernel, name) is not Refusal  # the base: its codes are any closed enum
)


def _reason_enum(refusal: type[Refusal]) -> type[enum.StrEnum]:
    hint = typing.get_type_hints(refusal)["reason_codes"]
    (reason, _ellipsis) = typing.get_args(hint)
    assert issubclass(reason, enum.StrEnum)
    return typing.cast("type[enum.StrEnum]", reason)


def test_every_public_refusal_is_found() -> None:
    # The walk must see the refusals the pattern is about, or it proves nothing.
    assert {"LedgerRefusal", "CommitRefusal", "GateRefusal", "ReportRefusal"} <= set(_REFUSALS)


@pytest.mark.parametrize("name", _REFUSALS)
def test_a_refusals_reason_enum_is_named_after_it(name: str) -> None:
    assert name.endswith("Refusal")
    expected = _REFERENCE_NAMES.get(name, name.removesuffix("Refusal") + "Reason")
    assert _reason_enum(getattr(kernel, name)).__name__ == expected


def test_no_public_name_keeps_an_old_spelling() -> None:
    old = {"CommitRefusalReason", "ConsensusRefusalReason", "ReportCheck", "LedgerIntact"}
    assert not old & set(kernel.__all__)
    assert not [n for n in kernel.__all__ if n.endswith("Broken")]
