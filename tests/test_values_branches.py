"""Branches of kernel.records.values and commit admission the main tests do not reach: a refusal
without codes or prose, the boundary's checks of extra keywords and mistyped tuples, and
an admission whose flags contradict its class."""

from __future__ import annotations

import enum
from collections.abc import Callable

import attrs
import pytest

from kernel.corroboration.commit_admission import (
    Admission,
    Branch,
    Draft,
    EvidenceClass,
    VerifierOutcome,
    admit_to_commit,
)
from kernel.errors import FieldError, ParameterTypeError
from kernel.records.values import Refusal, boundary, short_digest


class Code(enum.StrEnum):
    BROKEN = "broken"


@attrs.frozen(kw_only=True)
class _Refused(Refusal):
    pass


def test_a_refusal_needs_a_code_and_an_explanation() -> None:
    assert _Refused(reason_codes=(Code.BROKEN,), explanation="expected x, found y")
    with pytest.raises(FieldError, match="a _Refused needs at least one reason code"):
        _Refused(reason_codes=(), explanation="expected x, found y")
    with pytest.raises(FieldError, match=r"a _Refused needs an explanation \(expected/found\)"):
        _Refused(reason_codes=(Code.BROKEN,), explanation="  \n")


@boundary
def _sized(items: tuple[int, ...], *, label: str = "", **extra: object) -> int:
    return len(items) + len(label) + len(extra)


def test_the_boundary_checks_tuples_and_known_keywords_only() -> None:
    assert _sized((1, 2), label="ab", anything=object()) == 5
    with pytest.raises(ParameterTypeError, match="items") as info:
        _sized([1, 2])  # type: ignore[arg-type]
    assert "list" in str(info.value)
    with pytest.raises(ParameterTypeError, match="label"):
        _sized((1,), label=1)  # type: ignore[arg-type]


@boundary
def _called(hook: Callable[[int], int], value: int) -> int:
    return hook(value)


def test_the_boundary_leaves_a_callable_to_the_function() -> None:
    """A Callable parameter is not checked by the boundary (the function calls it), while
    the parameters beside it still are."""
    assert _called(abs, -3) == 3
    assert _called(lambda v: v * 2, 4) == 8
    with pytest.raises(ParameterTypeError, match="value"):
        _called(abs, "1")  # type: ignore[arg-type]


def test_an_admission_whose_flags_contradict_its_class_is_refused() -> None:
    draft = Draft(output_digest="a" * 64, context_digest="1" * 64, tools=("shell",))
    admission = admit_to_commit(
        Branch(branch_id="b1", drafts=(draft,), verifier=VerifierOutcome.PASSED)
    )
    assert isinstance(admission, Admission)
    assert admission.evidence_class is EvidenceClass.VERIFIED
    with pytest.raises(FieldError, match="only a verified branch may be committed"):
        attrs.evolve(admission, commit_permitted=False)
    with pytest.raises(FieldError, match="only a verified branch may be committed"):
        attrs.evolve(admission, staging_only=True)


def test_short_digest_shortens_only_what_is_longer_than_asked() -> None:
    """A digest is cut to its first ``size`` characters and an ellipsis; a value no
    longer than that is shown whole (no ellipsis promising more than there is)."""
    digest = "ab" * 32
    assert short_digest(digest) == "ababababababa"[:12] + "\u2026"
    assert short_digest(digest, 4) == "abab\u2026"
    assert short_digest("abc") == "abc"
    assert short_digest("a" * 12) == "a" * 12
