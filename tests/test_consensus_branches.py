"""Every refusal branch of the consensus records, attacked one at a time.

Each test builds a genuine outcome, then changes exactly one thing a forger or a
buggy caller could change, and checks the record refuses it with the reason that
names the broken rule (not merely "some error").
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from kernel.corroboration.consensus import (
    CaptureMode,
    CaptureStatus,
    ClassifiedRun,
    Consensus,
    CorroborationReport,
    Isolation,
    NoConsensus,
    NoConsensusReason,
    OutputGroup,
    RunObservation,
    RunStatus,
    build_consensus,
    build_corroboration_report,
)
from kernel.errors import FieldError

A, B, C = "a" * 64, "b" * 64, "c" * 64


def ok(index: int, digest: str, **changes: Any) -> RunObservation:
    fields: dict[str, Any] = {
        "index": index,
        "status": CaptureStatus.OK,
        "exit_code": 0,
        "output_digest": digest,
        "output_size": 5,
        "isolation": Isolation.OVERLAY,
        "duration_ms": 3,
    }
    return RunObservation(**(fields | changes))


def consensus() -> Consensus:
    outcome = build_consensus((ok(0, A), ok(1, B), ok(2, A)), candidate_digest=A)
    assert isinstance(outcome, Consensus)
    return outcome


def no_consensus() -> NoConsensus:
    outcome = build_consensus((ok(0, A), ok(1, B), ok(2, C)), candidate_digest=A)
    assert isinstance(outcome, NoConsensus)
    return outcome


def report(outcome: Consensus | NoConsensus) -> CorroborationReport:
    return build_corroboration_report(
        outcome, command=("x",), capture_mode=CaptureMode.STDOUT, network=False, timeout_ms=None
    )


# -- per-run variation: sorted, unique (name, value) string pairs ----------------------


def test_variation_pairs_are_recorded_and_enter_the_classified_run() -> None:
    variation = (("LANG", "C"), ("TZ", ""))
    outcome = build_consensus((ok(0, A, variation=variation),))
    assert isinstance(outcome, Consensus)
    assert outcome.runs[0].variation == variation


@pytest.mark.parametrize(
    ("variation", "message"),
    [
        ([("TZ", "UTC")], r"variation: expected a tuple, got list"),
        ((("TZ",),), r"variation\[0\]: expected 2 items, got 1"),
        ((("TZ", 1),), r"variation\[0\]\[1\]: expected str, got int"),
        ((("", "x"),), r"variation\[0\]\[0\]: expected a non-empty name, got ''"),
        ((("TZ", "a"), ("LANG", "b")), r"variation\[1\]: names must be unique and ascending"),
        ((("TZ", "a"), ("TZ", "b")), r"variation\[1\]: names must be unique and ascending"),
    ],
)
def test_malformed_variation_is_refused(variation: object, message: str) -> None:
    with pytest.raises(FieldError, match=message):
        ok(0, A, variation=variation)


# -- field validators ------------------------------------------------------------------


@pytest.mark.parametrize("indexes", [(1, 0), (0, 0)])
def test_group_run_indexes_must_ascend(indexes: tuple[int, ...]) -> None:
    with pytest.raises(FieldError, match="run_indexes: run indexes must be ascending"):
        OutputGroup(digest=A, size=5, run_indexes=indexes)


def test_group_run_indexes_are_counts() -> None:
    with pytest.raises(
        FieldError,
        match=r"OutputGroup\.run_indexes\[0\]: expected an integer in 0\.\.2\*\*53-1, got -1",
    ):
        OutputGroup(digest=A, size=5, run_indexes=(-1, 0))


def test_exit_code_must_be_an_int_or_none() -> None:
    with pytest.raises(
        FieldError, match=r"exit_code: expected an integer within \+/-\(2\*\*53 - 1\) or None"
    ):
        ok(0, A, exit_code="0")
    assert ok(0, A, status=CaptureStatus.FAILED, exit_code=None).exit_code is None


def test_exit_code_is_a_safe_int_and_duration_a_count() -> None:
    # A signal's negative code is admitted; an int no JSON reader keeps exactly is
    # refused when the run is recorded, not later when an id is computed over it.
    assert ok(0, A, status=CaptureStatus.FAILED, exit_code=-9).exit_code == -9
    with pytest.raises(FieldError, match=r"RunObservation\.exit_code: expected an integer within"):
        ok(0, A, status=CaptureStatus.FAILED, exit_code=2**53)
    # Wall time never enters an id, so only its kind guards it.
    with pytest.raises(
        FieldError, match=r"RunObservation\.duration_ms: expected an integer in 0\.\.2\*\*53-1"
    ):
        ok(0, A, duration_ms=-1)


def test_candidate_flag_must_be_a_bool_or_none() -> None:
    with pytest.raises(
        FieldError, match="candidate_matches_majority: expected bool or None, got int"
    ):
        attrs.evolve(consensus(), candidate_matches_majority=1)  # type: ignore[arg-type]


def test_report_reason_must_be_a_reason_or_none() -> None:
    with pytest.raises(
        FieldError, match="no_consensus_reason: expected a NoConsensusReason or None"
    ):
        attrs.evolve(report(no_consensus()), no_consensus_reason="no_strict_majority")  # type: ignore[arg-type]


# -- Consensus / NoConsensus: their fields are what their runs yield -------------------


@pytest.mark.parametrize(
    "changes", [{"agreement_count": 3}, {"majority_digest": B}, {"majority_size": 6}]
)
def test_consensus_majority_must_be_the_largest_group(changes: dict[str, Any]) -> None:
    with pytest.raises(FieldError, match="the majority is not the runs' largest group"):
        attrs.evolve(consensus(), **changes)


def _as_no_consensus(outcome: Consensus, **changes: Any) -> NoConsensus:
    fields = attrs.asdict(outcome, recurse=False)
    for name in ("consensus_id", "agreement_count", "majority_digest", "majority_size"):
        del fields[name]
    fields |= {"reason": NoConsensusReason.NO_STRICT_MAJORITY, "candidate_matches_majority": False}
    return NoConsensus(**(fields | changes))


def test_a_strict_majority_cannot_be_a_no_consensus() -> None:
    with pytest.raises(FieldError, match="a group is a strict majority: that is a consensus"):
        _as_no_consensus(consensus())


def test_no_consensus_reason_must_be_what_the_groups_yield() -> None:
    with pytest.raises(FieldError, match="the runs yield no_strict_majority"):
        attrs.evolve(no_consensus(), reason=NoConsensusReason.NO_CANDIDATE_OUTPUT)


def test_no_consensus_never_claims_the_candidate_matches() -> None:
    with pytest.raises(FieldError, match="the runs yield False"):
        attrs.evolve(no_consensus(), candidate_matches_majority=True)
    # Without a candidate the flag is None, not False.
    plain = build_consensus((ok(0, A), ok(1, B)))
    assert isinstance(plain, NoConsensus)
    with pytest.raises(FieldError, match="the runs yield None"):
        attrs.evolve(plain, candidate_matches_majority=False)


def _with_run(outcome: Consensus, index: int, **changes: Any) -> tuple[ClassifiedRun, ...]:
    runs = list(outcome.runs)
    runs[index] = attrs.evolve(runs[index], **changes)
    return tuple(runs)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"output_size": None}, "output digest and size go together"),
        ({"output_size": 6}, "two captures share a digest but not a size"),
        ({"exit_code": 1}, "an ok or no-change run exits 0 and has a captured output"),
        (
            {"status": RunStatus.NO_CHANGE, "exit_code": 0},
            "a run's no-change status contradicts its output",
        ),
    ],
)
def test_runs_contradicting_their_captures_are_refused(
    changes: dict[str, Any], message: str
) -> None:
    outcome = consensus()
    with pytest.raises(FieldError, match=message):
        attrs.evolve(outcome, runs=_with_run(outcome, 2, **changes))


class _Impostor(RunObservation):
    """A subclass passes the boundary's isinstance check but may override anything."""


def test_an_observation_subclass_is_a_type_error_naming_its_type() -> None:
    impostor = _Impostor(**attrs.asdict(ok(1, A), recurse=False))
    with pytest.raises(TypeError, match="expected RunObservation, got _Impostor"):
        build_consensus([ok(0, A), impostor])


# -- CorroborationReport ---------------------------------------------------------------


def test_report_reason_is_set_exactly_without_consensus() -> None:
    with pytest.raises(FieldError, match="set exactly when there is no consensus"):
        attrs.evolve(report(consensus()), no_consensus_reason=NoConsensusReason.NO_STRICT_MAJORITY)
    with pytest.raises(FieldError, match="set exactly when there is no consensus"):
        attrs.evolve(report(no_consensus()), no_consensus_reason=None)


def test_report_isolation_cannot_be_stronger_than_its_runs() -> None:
    genuine = report(consensus())
    assert genuine.isolation is Isolation.OVERLAY
    stronger = next(level for level in Isolation if level is not Isolation.OVERLAY)
    with pytest.raises(FieldError, match="not the weakest isolation any run obtained"):
        attrs.evolve(genuine, isolation=stronger)


@pytest.mark.parametrize(
    "changes", [{"agreement_count": 1}, {"majority_digest": A}, {"majority_size": 5}]
)
def test_a_report_without_consensus_has_no_majority(changes: dict[str, Any]) -> None:
    with pytest.raises(FieldError, match="a report without consensus has no majority"):
        attrs.evolve(report(no_consensus()), **changes)
