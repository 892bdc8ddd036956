"""Tests for kernel.corroboration.consensus: every corroboration rule (C1-C7), ids, round trips."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.corroboration.consensus import (
    EMPTY_SHA256,
    CaptureMode,
    CaptureStatus,
    Consensus,
    ConsensusReason,
    ConsensusRefusal,
    CorroborationReport,
    Isolation,
    NoConsensus,
    NoConsensusReason,
    RunObservation,
    RunStatus,
    build_consensus,
    build_corroboration_report,
)
from kernel.effects.run_folder import with_run_limits
from kernel.errors import RecordError
from kernel.records.codec import compute_id, identity_payload
from kernel.strategies import run_observations

A, B, C = "a" * 64, "b" * 64, "c" * 64


def stdlib_id(payload: dict[str, Any]) -> str:
    """The id definition, recomputed with the stdlib only (never the library helper)."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ok(index: int, digest: str, size: int = 5) -> RunObservation:
    """A successful run with output ``digest``."""
    return RunObservation(
        index=index,
        status=CaptureStatus.OK,
        exit_code=0,
        output_digest=digest,
        output_size=size,
        isolation=Isolation.OVERLAY,
        duration_ms=3,
    )


def bad(index: int, status: CaptureStatus, exit_code: int | None = 1) -> RunObservation:
    """A failed run (joins no group)."""
    return RunObservation(
        index=index,
        status=status,
        exit_code=exit_code,
        output_digest=None,
        output_size=None,
        isolation=Isolation.OVERLAY,
        duration_ms=3,
    )


def runs(*specs: str) -> tuple[RunObservation, ...]:
    """Observations from short specs: a digest letter, 'fail', 'timeout', 'sbx', 'empty'."""
    out: list[RunObservation] = []
    for i, spec in enumerate(specs):
        if spec == "fail":
            out.append(bad(i, CaptureStatus.FAILED))
        elif spec == "timeout":
            out.append(bad(i, CaptureStatus.TIMEOUT, None))
        elif spec == "sbx":
            out.append(bad(i, CaptureStatus.SANDBOX_ERROR, None))
        elif spec == "empty":
            out.append(ok(i, EMPTY_SHA256, 0))
        else:
            out.append(ok(i, spec * 64))
    return tuple(out)


# -- C5: strict majority of launched runs, never a plurality ---------------------------

CONSENSUS_TABLE = [
    ("n1-one-output", ("a",), A, 1),
    ("unanimous", ("a", "a", "a"), A, 3),
    ("two-of-three", ("a", "b", "a"), A, 2),
    ("majority-despite-a-failure", ("a", "a", "fail"), A, 2),
    ("three-of-five-with-timeout", ("a", "timeout", "a", "b", "a"), A, 3),
]


@pytest.mark.parametrize(("name", "specs", "digest", "count"), CONSENSUS_TABLE)
def test_strict_majority_gives_consensus(
    name: str, specs: tuple[str, ...], digest: str, count: int
) -> None:
    """A group with more than N/2 of the launched runs is the consensus."""
    outcome = build_consensus(runs(*specs))
    assert isinstance(outcome, Consensus), name
    assert outcome.majority_digest == digest
    assert outcome.agreement_count == count
    assert outcome.runs_launched == len(specs)


NSM = NoConsensusReason.NO_STRICT_MAJORITY
NCO = NoConsensusReason.NO_CANDIDATE_OUTPUT

NO_CONSENSUS_TABLE = [
    ("tie-two-two", ("a", "a", "b", "b"), NSM),
    ("half-is-not-majority", ("a", "fail"), NSM),
    ("plurality-is-not-majority", ("a", "a", "b", "c", "fail"), NSM),
    ("failures-count-as-launched", ("a", "a", "fail", "fail"), NSM),
    ("all-different", ("a", "b", "c"), NSM),
    ("n1-failed", ("fail",), NCO),
    ("all-failed", ("fail", "timeout", "sbx"), NCO),
    ("all-no-change", ("empty", "empty", "empty"), NCO),
    ("no-change-and-failed", ("empty", "fail"), NCO),
]


@pytest.mark.parametrize(("name", "specs", "reason"), NO_CONSENSUS_TABLE)
def test_no_strict_majority_gives_no_consensus(
    name: str, specs: tuple[str, ...], reason: NoConsensusReason
) -> None:
    """Ties, pluralities, all-failed and all-no-change never carry consensus."""
    outcome = build_consensus(runs(*specs))
    assert isinstance(outcome, NoConsensus), name
    assert outcome.reason is reason
    assert outcome.runs_launched == len(specs)


def test_no_consensus_lists_every_group() -> None:
    """No consensus reports the per-run groups, largest first, then by digest."""
    outcome = build_consensus(runs("b", "a", "c", "b", "a", "fail"))
    assert isinstance(outcome, NoConsensus)
    assert [(g.digest, g.run_indexes) for g in outcome.groups] == [
        (A, (1, 4)),
        (B, (0, 3)),
        (C, (2,)),
    ]
    assert outcome.failed_run_indexes == (5,)


# -- C2, C3: failed and no-change runs -------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (CaptureStatus.FAILED, RunStatus.FAILED),
        (CaptureStatus.TIMEOUT, RunStatus.TIMEOUT),
        (CaptureStatus.SANDBOX_ERROR, RunStatus.SANDBOX_ERROR),
    ],
)
def test_failed_runs_join_no_group_even_with_output(
    status: CaptureStatus, expected: RunStatus
) -> None:
    """A failed run whose output matches the majority's still joins no group (C2)."""
    failing = RunObservation(
        index=2,
        status=status,
        exit_code=3,
        output_digest=A,
        output_size=5,
        isolation=Isolation.COPY,
        duration_ms=1,
    )
    outcome = build_consensus((ok(0, A), ok(1, B), failing))
    assert isinstance(outcome, NoConsensus)
    assert outcome.runs[2].status is expected
    assert outcome.failed_run_indexes == (2,)
    assert all(2 not in g.run_indexes for g in outcome.groups)


def test_output_equal_to_baseline_output_is_no_change() -> None:
    """Runs byte-identical to the baseline output never carry consensus (C3)."""
    outcome = build_consensus(runs("a", "a", "b"), baseline_output_digest=A)
    assert isinstance(outcome, NoConsensus)
    assert outcome.no_change_run_indexes == (0, 1)
    assert [g.digest for g in outcome.groups] == [B]
    assert outcome.reason is NoConsensusReason.NO_STRICT_MAJORITY


def test_empty_output_is_no_change() -> None:
    """An empty output is a no-change run, excluded but still launched (C3)."""
    outcome = build_consensus(runs("a", "empty", "a"))
    assert isinstance(outcome, Consensus)
    assert outcome.no_change_run_indexes == (1,)
    assert outcome.runs[1].status is RunStatus.NO_CHANGE
    assert outcome.agreement_count == 2


# -- C1: refusals ----------------------------------------------------------------------

REFUSAL_TABLE = [
    ("zero-runs", (), {}, (ConsensusReason.NO_RUNS_LAUNCHED,)),
    (
        "gap-in-indexes",
        (ok(0, A), ok(2, A)),
        {},
        (ConsensusReason.RUN_INDEXES_NOT_SEQUENTIAL,),
    ),
    (
        "out-of-order",
        (ok(1, A), ok(0, A)),
        {},
        (ConsensusReason.RUN_INDEXES_NOT_SEQUENTIAL,),
    ),
    (
        "bad-digests",
        (ok(0, A),),
        {"baseline_output_digest": "ABC", "candidate_digest": "sha256:" + A},
        (
            ConsensusReason.INVALID_BASELINE_OUTPUT_DIGEST,
            ConsensusReason.INVALID_CANDIDATE_DIGEST,
        ),
    ),
]


@pytest.mark.parametrize(("name", "observations", "kwargs", "codes"), REFUSAL_TABLE)
def test_refusals(
    name: str,
    observations: tuple[RunObservation, ...],
    kwargs: dict[str, str],
    codes: tuple[ConsensusReason, ...],
) -> None:
    """Unjudgeable input is refused with codes in check order, never raised."""
    outcome = build_consensus(observations, **kwargs)
    assert isinstance(outcome, ConsensusRefusal), name
    assert outcome.reason_codes == codes
    assert outcome.refusal_id == stdlib_id(identity_payload(outcome))
    assert ConsensusRefusal.from_dict(outcome.to_dict()) == outcome


def test_wrong_type_is_a_programmer_error() -> None:
    """Passing something that is not an observation raises TypeError."""
    with pytest.raises(TypeError):
        build_consensus(["not an observation"])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"status": CaptureStatus.OK, "exit_code": 1, "output_digest": A, "output_size": 1},
        {"status": CaptureStatus.OK, "exit_code": 0, "output_digest": None, "output_size": None},
        {"status": CaptureStatus.FAILED, "exit_code": 1, "output_digest": A, "output_size": None},
    ],
)
def test_inconsistent_observations_cannot_exist(kwargs: dict[str, Any]) -> None:
    """An ok run exits 0 with an output; digest and size come together."""
    with pytest.raises(ValueError):  # noqa: PT011 - every validator error is a ValueError
        RunObservation(index=0, isolation=Isolation.OVERLAY, duration_ms=0, **kwargs)


# -- C6: the candidate is an input -----------------------------------------------------


def test_candidate_matching_majority() -> None:
    """With a candidate, the outcome says whether the majority equals it and who reproduced it."""
    outcome = build_consensus(runs("a", "b", "a"), candidate_digest=A)
    assert isinstance(outcome, Consensus)
    assert outcome.candidate_matches_majority is True
    assert outcome.candidate_reproduced_by == (0, 2)


def test_candidate_in_minority() -> None:
    """A candidate reproduced only by a minority does not match the majority."""
    outcome = build_consensus(runs("a", "b", "a"), candidate_digest=B)
    assert isinstance(outcome, Consensus)
    assert outcome.candidate_matches_majority is False
    assert outcome.candidate_reproduced_by == (1,)


def test_candidate_without_consensus() -> None:
    """Without consensus a candidate never matches a majority."""
    outcome = build_consensus(runs("a", "b"), candidate_digest=A)
    assert isinstance(outcome, NoConsensus)
    assert outcome.candidate_matches_majority is False
    assert outcome.candidate_reproduced_by == (0,)


def test_no_candidate_reports_majority_alone() -> None:
    """Without a candidate the candidate fields are null."""
    outcome = build_consensus(runs("a", "a"))
    assert isinstance(outcome, Consensus)
    assert outcome.candidate_digest is None
    assert outcome.candidate_matches_majority is None


# -- C7 and identity -------------------------------------------------------------------


def test_no_record_carries_a_correctness_field() -> None:
    """Byte identity is never a correctness claim: no field says 'correct' or 'verified'."""
    for cls in (Consensus, NoConsensus, CorroborationReport):
        names = {f.name for f in attrs.fields(cls)}
        assert not {n for n in names if "correct" in n or "verified" in n or "valid" in n}


@settings(max_examples=60, deadline=None)
@given(run_observations(), st.none() | st.sampled_from([A, B]))
def test_outcome_ids_reproduce_and_round_trip(
    observations: tuple[RunObservation, ...], candidate: str | None
) -> None:
    """Every outcome self-seals with the stdlib definition and round-trips strictly."""
    outcome = build_consensus(observations, candidate_digest=candidate)
    assert not isinstance(outcome, ConsensusRefusal)
    assert type(outcome).from_dict(outcome.to_dict()) == outcome
    own_id = outcome.consensus_id if isinstance(outcome, Consensus) else outcome.no_consensus_id
    assert own_id == stdlib_id(identity_payload(outcome))
    report = build_corroboration_report(
        outcome, command=("x",), capture_mode=CaptureMode.STDOUT, network=False, timeout_ms=5
    )
    assert CorroborationReport.from_dict(report.to_dict()) == report
    assert report.report_id == stdlib_id(identity_payload(report))
    assert "explanation" not in identity_payload(report)


def _signature(outcome: Consensus | NoConsensus | ConsensusRefusal) -> tuple[object, ...]:
    assert not isinstance(outcome, ConsensusRefusal)
    groups = sorted((g.digest, g.size, len(g.run_indexes)) for g in outcome.groups)
    if isinstance(outcome, Consensus):
        return ("consensus", outcome.majority_digest, outcome.agreement_count, tuple(groups))
    return ("none", outcome.reason, tuple(groups))


@settings(max_examples=80, deadline=None)
@given(run_observations(min_runs=1, max_runs=7), st.randoms(use_true_random=False))
def test_result_depends_only_on_the_multiset_of_status_and_digest(
    observations: tuple[RunObservation, ...], rnd: Any
) -> None:
    """Reordering runs (re-indexing them) never changes the verdict, majority or groups."""
    shuffled = list(observations)
    rnd.shuffle(shuffled)
    reindexed = tuple(attrs.evolve(o, index=i) for i, o in enumerate(shuffled))
    assert Counter((o.status, o.output_digest) for o in reindexed) == Counter(
        (o.status, o.output_digest) for o in observations
    )
    assert _signature(build_consensus(observations)) == _signature(build_consensus(reindexed))


@settings(max_examples=80, deadline=None)
@given(run_observations())
def test_consensus_is_exactly_a_strict_majority(observations: tuple[RunObservation, ...]) -> None:
    """Consensus iff one changed, successful digest has more than N/2 runs (oracle)."""
    counts = Counter(
        o.output_digest
        for o in observations
        if o.status is CaptureStatus.OK and o.output_size != 0 and o.output_digest != EMPTY_SHA256
    )
    n = len(observations)
    winners = [d for d, count in counts.items() if count * 2 > n]
    outcome = build_consensus(observations)
    if winners:
        assert isinstance(outcome, Consensus)
        assert outcome.majority_digest == winners[0]
    else:
        assert isinstance(outcome, NoConsensus)


def test_report_isolation_is_the_weakest_level() -> None:
    """One run that fell back to a copy makes the whole report say 'copy'."""
    weak = attrs.evolve(ok(1, A), isolation=Isolation.COPY)
    outcome = build_consensus((ok(0, A), weak, ok(2, A)))
    assert not isinstance(outcome, ConsensusRefusal)
    report = build_corroboration_report(
        outcome, command=("x",), capture_mode=CaptureMode.PATCH, network=False, timeout_ms=None
    )
    assert report.isolation is Isolation.COPY
    assert report.consensus is True
    assert report.no_consensus_reason is None


def test_one_digest_with_two_sizes_is_refused() -> None:
    """Two captures sharing a digest but not a size cannot be judged: refusal, not a verdict.

    Regression: the multiset property once failed because group sizes came from
    whichever run was seen last.
    """
    other_size = attrs.evolve(ok(1, A), output_size=99)
    outcome = build_consensus((ok(0, A), other_size, ok(2, A)))
    assert isinstance(outcome, ConsensusRefusal)
    assert outcome.reason_codes == (ConsensusReason.DIGEST_SIZE_CONFLICT,)


# -- forged outcomes: a self-sealed id is not a signature ------------------------------


def _resealed(document: dict[str, Any], id_field: str) -> dict[str, Any]:
    """``document`` with its self-sealed id recomputed (what any forger can do)."""
    document[id_field] = ""
    document[id_field] = stdlib_id(document)
    return document


def _as_consensus(outcome: NoConsensus, **changes: Any) -> dict[str, Any]:
    """A Consensus document forged from a NoConsensus (its first group as the majority)."""
    document = outcome.to_dict()
    del document["no_consensus_id"], document["reason"]
    top: dict[str, Any] = document["groups"][0]
    document |= {
        "consensus_id": "",
        "agreement_count": len(top.get("run_indexes", [])),
        "majority_digest": top["digest"],
        "majority_size": top["size"],
    }
    document |= changes
    return _resealed(document, "consensus_id")


def test_a_plurality_cannot_be_parsed_as_a_consensus() -> None:
    """Regression: Consensus.from_dict accepted a resealed document whose 'majority' was
    a plurality (2 of 5); every record invariant of C5 is now checked at construction."""
    outcome = build_consensus(runs("a", "a", "b", "c", "fail"))
    assert isinstance(outcome, NoConsensus)
    with pytest.raises(RecordError):
        Consensus.from_dict(_as_consensus(outcome))
    with pytest.raises(RecordError):
        Consensus.from_dict(_as_consensus(outcome, runs_launched=3))


def test_no_change_runs_cannot_be_relabelled_into_a_consensus() -> None:
    """Regression: relabelling baseline-identical runs 'ok' and grouping them gave a
    Consensus.from_dict accepted (C3: no-change runs never carry consensus)."""
    outcome = build_consensus(runs("a", "a", "a"), baseline_output_digest=A)
    assert isinstance(outcome, NoConsensus)
    document = outcome.to_dict()
    for run in document["runs"]:
        run["status"] = "ok"
    document["no_change_run_indexes"] = []
    document["groups"] = [{"digest": A, "size": 5, "run_indexes": [0, 1, 2]}]
    del document["no_consensus_id"], document["reason"]
    document |= {"agreement_count": 3, "majority_digest": A, "majority_size": 5}
    with pytest.raises(RecordError):
        Consensus.from_dict(_resealed(document | {"consensus_id": ""}, "consensus_id"))


@pytest.mark.parametrize(
    ("name", "edit"),
    [
        ("group-not-from-runs", lambda d: d["groups"][0].update(run_indexes=[0, 1, 2])),
        ("failed-run-hidden", lambda d: d.update(failed_run_indexes=[])),
        ("candidate-flag-flipped", lambda d: d.update(candidate_matches_majority=False)),
        ("reproduced-by-invented", lambda d: d.update(candidate_reproduced_by=[0, 1, 2, 3])),
        ("runs-dropped", lambda d: d.update(runs=d["runs"][:3])),
    ],
)
def test_resealed_consensus_edits_are_refused(name: str, edit: Any) -> None:
    """Regression: any edit of a Consensus that its runs contradict, resealed, parsed."""
    outcome = build_consensus(runs("a", "b", "a", "a", "fail"), candidate_digest=A)
    assert isinstance(outcome, Consensus)
    document = outcome.to_dict()
    edit(document)
    with pytest.raises(RecordError):
        Consensus.from_dict(_resealed(document, "consensus_id"))


def test_a_report_cannot_claim_consensus_its_runs_do_not_show() -> None:
    """Regression: CorroborationReport.from_dict accepted consensus=true resealed over a
    plurality; downstream (run admission) reads that flag."""
    outcome = build_consensus(runs("a", "a", "b", "c", "fail"))
    assert isinstance(outcome, NoConsensus)
    report = build_corroboration_report(
        outcome, command=("x",), capture_mode=CaptureMode.STDOUT, network=False, timeout_ms=None
    )
    document = report.to_dict() | {
        "consensus": True,
        "no_consensus_reason": None,
        "agreement_count": 2,
        "majority_digest": A,
        "majority_size": 5,
    }
    with pytest.raises(RecordError):
        CorroborationReport.from_dict(_resealed(document, "report_id"))
    weaker = report.to_dict() | {"isolation": "overlay"}
    weaker["runs"][0]["isolation"] = "copy"
    with pytest.raises(RecordError):
        CorroborationReport.from_dict(_resealed(weaker, "report_id"))


@settings(max_examples=50)
@given(run_observations(), st.lists(st.integers(min_value=0, max_value=10**9), min_size=7))
def test_ids_do_not_depend_on_run_durations(
    runs: tuple[RunObservation, ...], durations: list[int]
) -> None:
    """Rerunning the same command (same outputs, other wall times) gives the same
    consensus, outcome and report ids: time never enters an id."""
    slower = tuple(attrs.evolve(run, duration_ms=durations[run.index]) for run in runs)
    first, second = build_consensus(runs), build_consensus(slower)
    assert not isinstance(first, ConsensusRefusal)
    assert not isinstance(second, ConsensusRefusal)
    assert compute_id(first) == compute_id(second)
    options: dict[str, Any] = {
        "command": ("make", "test"),
        "capture_mode": CaptureMode.STDOUT,
        "network": False,
        "timeout_ms": 1000,
    }
    one = build_corroboration_report(first, **options)
    two = build_corroboration_report(second, **options)
    assert one.outcome_id == two.outcome_id
    assert one.report_id == two.report_id
    assert "duration_ms" not in json.dumps(identity_payload(one))
    assert [run.duration_ms for run in two.runs] == [durations[r.index] for r in runs]


@settings(max_examples=60, deadline=None)
@given(run_observations())
def test_run_limits_are_kept_but_never_enter_an_id(
    observations: tuple[RunObservation, ...],
) -> None:
    """Each run's limits reach the report (and its document), but no id depends on them;
    a report written before runs recorded limits reads as ``limits: null`` and keeps
    its ids."""
    outcome = build_consensus(observations)
    assert not isinstance(outcome, ConsensusRefusal)
    assert [r.limits for r in outcome.runs] == [o.limits for o in observations]
    bare = build_consensus(tuple(attrs.evolve(o, limits=None) for o in observations))
    assert not isinstance(bare, ConsensusRefusal)
    assert identity_payload(bare) == identity_payload(outcome)
    report = build_corroboration_report(
        outcome, command=("x",), capture_mode=CaptureMode.STDOUT, network=False, timeout_ms=5
    )
    document = report.to_dict()
    assert [r["limits"] for r in document["runs"]] == [
        None if o.limits is None else [x.to_dict() for x in o.limits] for o in observations
    ]
    older = {
        **document,
        "runs": [{k: v for k, v in r.items() if k != "limits"} for r in document["runs"]],
    }
    with pytest.raises(RecordError, match="limits"):
        CorroborationReport.from_dict(older)
    read = CorroborationReport.from_dict(with_run_limits(older))
    assert read.report_id == report.report_id
    assert all(r.limits is None for r in read.runs)
