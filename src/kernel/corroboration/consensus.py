"""Corroboration by independent reruns: run captures -> `Consensus` | `NoConsensus`.

Pure: no I/O, no clock, no randomness, no environment. The effect shell
(`kernel.effects.sandbox`, `kernel.effects.rerun`) launches the runs and hands their
observations here.

Rules enforced (seed "Corroborate by independent reruns"):

- C1 ``N >= 1``: zero launched runs is refused (``no_runs_launched``), never a vacuous
  agreement; the observations are the launched runs, indexed ``0..N-1`` in order
  (``run_indexes_not_sequential`` otherwise).
- C2 a failed run (non-zero exit, signal, timeout, sandbox or capture error: any
  status but ``ok``) counts as launched and joins no group.
- C3 a no-change run (output empty, or byte-identical to the given baseline output)
  is excluded from grouping and never carries consensus.
- C4 the remaining outputs are grouped by byte identity (their SHA-256 digest).
- C5 consensus needs one group that is a strict majority of the *launched* runs
  (``count * 2 > N``), never a plurality; otherwise `NoConsensus` with every group.
- C6 the candidate being corroborated is an input: the outcome says whether the
  majority output is byte-identical to it and which runs reproduced it exactly.
- C7 byte identity is a corroboration signal, never a correctness claim: no record
  here carries a correctness field.

A self-sealed id is not a signature: anyone can edit a document and reseal it. So
`Consensus`, `NoConsensus` and `CorroborationReport` re-derive C1-C6 from their own
``runs`` at construction (``from_dict`` included): a record whose groups, indexes,
majority or candidate fields are not what its runs yield cannot exist, and a report
must rebuild to the outcome named by its ``outcome_id``.

Identity payloads (SHA-256 of canonical JSON; ``explanation`` never enters):

- `Consensus`: every field, ``consensus_id`` blanked to ``""`` (self-sealed).
- `NoConsensus`: every field, ``no_consensus_id`` blanked (self-sealed).
- `ConsensusRefusal`: ``reason_codes``, ``runs_launched``, ``refusal_id`` blanked.
- `CorroborationReport`: every field but ``explanation``, ``report_id`` blanked.
- `RunObservation`, `ClassifiedRun`: nested form, every field but ``duration_ms`` and
  ``limits``; `OutputGroup`: nested form, every field. Wall time and host facts (the
  limits and how this host applied them) never enter an id: N reruns of the same
  command give the same consensus, report and outcome ids, and a report written
  before ``limits`` existed keeps its ids (it reads as ``limits: null``).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Sequence
from typing import Any, Final

import attrs

from kernel.errors import KernelError
from kernel.records.codec import UNSEALED, Identity, Record, field_error, seal, short_repr
from kernel.records.identity import is_digest
from kernel.records.values import Count, Digest, OptionalDigest, Refusal, boundary
from kernel.run.verification import Isolation, SandboxLimit, weakest_isolation

__all__ = [
    "EMPTY_SHA256",
    "CaptureMode",
    "CaptureStatus",
    "ClassifiedRun",
    "Consensus",
    "ConsensusOutcome",
    "ConsensusRefusal",
    "ConsensusReason",
    "CorroborationReport",
    "Isolation",
    "NoConsensus",
    "NoConsensusReason",
    "OutputGroup",
    "RunObservation",
    "RunStatus",
    "build_consensus",
    "build_corroboration_report",
]

EMPTY_SHA256: Final = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
"""SHA-256 of zero bytes: an empty output is a no-change output (rule C3)."""

CORROBORATION_NOTICE: Final = (
    "Byte identity across reruns is a corroboration signal, not a correctness claim."
)


class CaptureMode(enum.StrEnum):
    """What a run's output is."""

    STDOUT = "stdout"
    """The bytes the command wrote to standard output."""
    PATCH = "patch"
    """A byte-stable diff of the run's final tree against the baseline."""


class CaptureStatus(enum.StrEnum):
    """How a launched run ended, as the sandbox saw it."""

    OK = "ok"
    """Exit status 0 and the output was captured whole."""
    FAILED = "failed"
    """Non-zero exit, killed by a signal, or the command could not start."""
    TIMEOUT = "timeout"
    """The run hit its time limit; its whole process tree was killed."""
    LIMIT_EXCEEDED = "limit_exceeded"
    """The run hit a resource limit (memory, processes, CPU, output, disk); the capture
    names which."""
    SANDBOX_ERROR = "sandbox_error"
    """The sandbox could not be set up or the output could not be captured."""


class RunStatus(enum.StrEnum):
    """A run's status in a consensus: `CaptureStatus` plus ``no_change`` (rule C3)."""

    OK = "ok"
    NO_CHANGE = "no_change"
    FAILED = "failed"
    TIMEOUT = "timeout"
    LIMIT_EXCEEDED = "limit_exceeded"
    SANDBOX_ERROR = "sandbox_error"


class NoConsensusReason(enum.StrEnum):
    """Why a set of runs has no consensus."""

    NO_CANDIDATE_OUTPUT = "no_candidate_output"
    """Every launched run failed or made no change: there is nothing to group (C2, C3)."""
    NO_STRICT_MAJORITY = "no_strict_majority"
    """Outputs exist but no byte-identical group has more than N/2 runs (C5)."""


class ConsensusReason(enum.StrEnum):
    """Closed reason codes of `ConsensusRefusal`, in check order."""

    NO_RUNS_LAUNCHED = "no_runs_launched"
    """C1: zero observations."""
    RUN_INDEXES_NOT_SEQUENTIAL = "run_indexes_not_sequential"
    """C1: the observations are not runs ``0..N-1`` in order."""
    INVALID_BASELINE_OUTPUT_DIGEST = "invalid_baseline_output_digest"
    """C3: the baseline output digest is not a 64-char lowercase hex digest."""
    INVALID_CANDIDATE_DIGEST = "invalid_candidate_digest"
    """C6: the candidate digest is not a 64-char lowercase hex digest."""
    DIGEST_SIZE_CONFLICT = "digest_size_conflict"
    """C4: two captured outputs share a digest but not a size: the captures were
    tampered with or mis-recorded, so byte identity cannot be judged."""


def _pairs(
    _instance: object,
    attribute: attrs.Attribute[tuple[tuple[str, str], ...]],
    value: tuple[tuple[str, str], ...],
) -> None:
    """Names are non-empty, unique and ascending (values may be empty)."""
    previous: str | None = None
    for index, (name, _value) in enumerate(value):
        if not name:
            raise field_error(f"{attribute.name}[{index}][0]", "expected a non-empty name, got ''")
        if previous is not None and name <= previous:
            raise field_error(f"{attribute.name}[{index}]", "names must be unique and ascending")
        previous = name


def _ascending_indexes(
    _instance: object, attribute: attrs.Attribute[tuple[int, ...]], value: tuple[int, ...]
) -> None:
    """Run indexes ascend strictly (each run once, in order)."""
    if any(a >= b for a, b in itertools.pairwise(value)):
        raise field_error(attribute.name, "run indexes must be ascending")


@attrs.frozen(kw_only=True)
class RunObservation(Record):
    """One launched run as the effect shell captured it (the input of `build_consensus`).

    Nested form: every field but ``duration_ms`` and ``limits`` (time and host facts
    never enter an id).
    Invariants: an ``ok`` run exited 0 and has an output digest and size; digest and
    size are both present or both absent.
    """

    __identity__ = Identity(exclude=frozenset({"explanation", "duration_ms", "limits"}))

    index: Count
    """``KERNEL_RUN_INDEX`` of the run, ``0..N-1``."""
    status: CaptureStatus
    """How the run ended."""
    exit_code: int | None
    """Exit status; negative for a signal (``-9``); None when it never ran to an end."""
    output_digest: OptionalDigest
    """SHA-256 of the captured output bytes, when captured."""
    output_size: Count | None
    """Size in bytes of the captured output, when captured."""
    isolation: Isolation
    """Isolation level the run actually obtained."""
    duration_ms: Count
    """Wall time of the run in milliseconds."""
    variation: tuple[tuple[str, str], ...] = attrs.field(default=(), validator=_pairs)
    """Per-run environment variation, sorted ``(name, value)`` pairs (e.g. ``TZ``)."""
    limits: tuple[SandboxLimit, ...] | None = None
    """Every resource limit of the run and how it was applied (None: not recorded)."""

    def __attrs_post_init__(self) -> None:
        if (self.output_digest is None) != (self.output_size is None):
            raise field_error("output_size", "output digest and size go together")
        if self.status is CaptureStatus.OK and (self.exit_code != 0 or self.output_digest is None):
            raise field_error("status", "an ok run exits 0 and has a captured output")


@attrs.frozen(kw_only=True)
class ClassifiedRun(Record):
    """One run after classification (rules C2, C3).

    Nested form: every field but ``duration_ms`` and ``limits`` (wall time differs on
    every rerun and how limits apply is a host fact; neither enters an id, so rerunning
    the same command yields the same ids).
    """

    __identity__ = Identity(exclude=frozenset({"explanation", "duration_ms", "limits"}))

    index: Count
    """Run index."""
    status: RunStatus
    """``ok`` (joins a group), ``no_change``, or a failure status."""
    exit_code: int | None
    """Exit status as observed."""
    output_digest: OptionalDigest
    """SHA-256 of the output, when captured."""
    output_size: Count | None
    """Output size in bytes, when captured."""
    isolation: Isolation
    """Isolation level obtained."""
    duration_ms: Count
    """Wall time in milliseconds."""
    variation: tuple[tuple[str, str], ...] = attrs.field(validator=_pairs)
    """Per-run environment variation."""
    limits: tuple[SandboxLimit, ...] | None = None
    """Every resource limit of the run and how it was applied (None: not recorded, as
    in a report written before limits were)."""


@attrs.frozen(kw_only=True)
class OutputGroup(Record):
    """Runs whose outputs are byte-identical (rule C4). Nested form: every field."""

    digest: Digest
    """SHA-256 of the shared output."""
    size: Count
    """Output size in bytes."""
    run_indexes: tuple[Count, ...] = attrs.field(validator=_ascending_indexes)
    """Runs that produced it, ascending."""


@attrs.frozen(kw_only=True)
class Consensus(Record):
    """A strict majority of the launched runs produced byte-identical output (C5).

    Identity payload: every field, ``consensus_id`` blanked (self-sealed). This is
    a corroboration signal only; nothing here claims the majority output is correct.
    """

    __identity__ = Identity(field="consensus_id", seals=True)

    consensus_id: Digest = UNSEALED
    """Self-sealed SHA-256 of the identity payload."""
    runs_launched: Count
    """N, every launched run (failed ones included)."""
    agreement_count: Count
    """Runs in the majority group (``agreement_count * 2 > runs_launched``)."""
    majority_digest: Digest
    """SHA-256 of the majority output."""
    majority_size: Count
    """Size in bytes of the majority output."""
    groups: tuple[OutputGroup, ...]
    """Every group, largest first then by digest."""
    runs: tuple[ClassifiedRun, ...]
    """Every launched run, by index."""
    no_change_run_indexes: tuple[Count, ...] = attrs.field(validator=_ascending_indexes)
    """Runs excluded as no-change (C3)."""
    failed_run_indexes: tuple[Count, ...] = attrs.field(validator=_ascending_indexes)
    """Runs that failed, timed out or hit a sandbox error (C2)."""
    baseline_output_digest: OptionalDigest
    """Digest of the baseline output no-change runs were classified against."""
    candidate_digest: OptionalDigest
    """Digest of the candidate being corroborated, when one was given (C6)."""
    candidate_matches_majority: bool | None
    """Whether the majority output is byte-identical to the candidate; None without one."""
    candidate_reproduced_by: tuple[Count, ...] = attrs.field(validator=_ascending_indexes)
    """Runs whose output is byte-identical to the candidate."""

    def __attrs_post_init__(self) -> None:
        top = _check_derivation(self)
        # C5: a strict majority of the launched runs, never a plurality.
        if top is None:
            raise field_error("agreement_count", "no group is a strict majority of the runs")
        if (
            self.agreement_count != len(top.run_indexes)
            or self.majority_digest != top.digest
            or self.majority_size != top.size
        ):
            raise field_error("agreement_count", "the majority is not the runs' largest group")
        # C6: the candidate flag is what the majority output says.
        expected = None if self.candidate_digest is None else self.candidate_digest == top.digest
        if self.candidate_matches_majority != expected:
            raise field_error("candidate_matches_majority", f"the runs yield {expected!r}")


@attrs.frozen(kw_only=True)
class NoConsensus(Record):
    """No byte-identical group is a strict majority of the launched runs (C5).

    Identity payload: every field, ``no_consensus_id`` blanked (self-sealed).
    """

    __identity__ = Identity(field="no_consensus_id", seals=True)

    no_consensus_id: Digest = UNSEALED
    """Self-sealed SHA-256 of the identity payload."""
    reason: NoConsensusReason
    """Why there is no consensus."""
    runs_launched: Count
    """N, every launched run."""
    groups: tuple[OutputGroup, ...]
    """Every group, largest first then by digest (possibly none)."""
    runs: tuple[ClassifiedRun, ...]
    """Every launched run, by index."""
    no_change_run_indexes: tuple[Count, ...] = attrs.field(validator=_ascending_indexes)
    """Runs excluded as no-change."""
    failed_run_indexes: tuple[Count, ...] = attrs.field(validator=_ascending_indexes)
    """Runs that failed, timed out or hit a sandbox error."""
    baseline_output_digest: OptionalDigest
    """Digest of the baseline output, when given."""
    candidate_digest: OptionalDigest
    """Digest of the candidate, when given."""
    candidate_matches_majority: bool | None
    """False when a candidate was given (there is no majority), else None."""
    candidate_reproduced_by: tuple[Count, ...] = attrs.field(validator=_ascending_indexes)
    """Runs whose output is byte-identical to the candidate."""

    def __attrs_post_init__(self) -> None:
        # C5: with a strict majority this would be a Consensus.
        if _check_derivation(self) is not None:
            raise field_error("groups", "a group is a strict majority: that is a consensus")
        if self.reason is not _no_consensus_reason(self.groups):
            raise field_error("reason", f"the runs yield {_no_consensus_reason(self.groups)}")
        expected = None if self.candidate_digest is None else False
        if self.candidate_matches_majority is not expected:
            raise field_error("candidate_matches_majority", f"the runs yield {expected!r}")


def _derive(
    runs: tuple[ClassifiedRun, ...], baseline: str | None, candidate: str | None
) -> dict[str, Any] | str:
    """What rules C2-C4 and C6 make of classified runs: groups and index lists, or
    why the runs' statuses contradict their captures."""
    members: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}
    for run in runs:
        digest_, size = run.output_digest, run.output_size
        if (digest_ is None) != (size is None):
            return "output digest and size go together"
        # C4: one digest names one byte string, so it has exactly one size.
        if digest_ is not None and sizes.setdefault(digest_, size) != size:  # type: ignore[arg-type]
            return "two captures share a digest but not a size"
        if run.status is RunStatus.OK or run.status is RunStatus.NO_CHANGE:
            if run.exit_code != 0 or digest_ is None:
                return "an ok or no-change run exits 0 and has a captured output"
            # C3: empty, or byte-identical to the baseline output.
            no_change = size == 0 or digest_ in (EMPTY_SHA256, baseline)
            if no_change != (run.status is RunStatus.NO_CHANGE):
                return "a run's no-change status contradicts its output"
            if not no_change:
                members.setdefault(digest_, []).append(run.index)
    groups = tuple(
        OutputGroup(digest=d, size=sizes[d], run_indexes=tuple(indexes))
        for d, indexes in sorted(members.items(), key=lambda item: (-len(item[1]), item[0]))
    )
    return {
        "groups": groups,
        "no_change_run_indexes": tuple(r.index for r in runs if r.status is RunStatus.NO_CHANGE),
        # C2: any failure counts as launched and joins no group.
        "failed_run_indexes": tuple(
            r.index for r in runs if r.status not in (RunStatus.OK, RunStatus.NO_CHANGE)
        ),
        # C6: the runs that reproduced the candidate exactly.
        "candidate_reproduced_by": ()
        if candidate is None
        else tuple(
            r.index for r in runs if r.status is RunStatus.OK and r.output_digest == candidate
        ),
    }


def _majority(groups: tuple[OutputGroup, ...], runs_launched: int) -> OutputGroup | None:
    """C5: the first (largest) group when it is a strict majority of the launched runs."""
    top = groups[0] if groups else None
    return top if top is not None and len(top.run_indexes) * 2 > runs_launched else None


def _no_consensus_reason(groups: tuple[OutputGroup, ...]) -> NoConsensusReason:
    return NoConsensusReason.NO_STRICT_MAJORITY if groups else NoConsensusReason.NO_CANDIDATE_OUTPUT


def _check_derivation(outcome: Consensus | NoConsensus | CorroborationReport) -> OutputGroup | None:
    """Raise unless ``outcome``'s fields are what its own runs yield (C1-C4, C6);
    return its strict-majority group, if any (C5)."""
    n = outcome.runs_launched
    # C1: N >= 1 launched runs, exactly the runs 0..N-1 in order.
    if n < 1 or len(outcome.runs) != n or any(r.index != i for i, r in enumerate(outcome.runs)):
        raise field_error("runs", "the runs are not the launched runs 0..N-1 (N >= 1)")
    derived = _derive(outcome.runs, outcome.baseline_output_digest, outcome.candidate_digest)
    if isinstance(derived, str):
        raise field_error("runs", derived)
    for name, value in derived.items():
        if getattr(outcome, name) != value:
            raise field_error(name, "not what the runs yield")
    return _majority(outcome.groups, n)


@attrs.frozen(kw_only=True)
class ConsensusRefusal(Refusal):
    """The observations cannot be judged at all. Identity payload: see module docstring."""

    __identity__ = Identity(field="refusal_id", seals=True)

    refusal_id: Digest = UNSEALED
    """Self-sealed SHA-256 of the identity payload."""
    runs_launched: Count
    """Number of observations given."""
    reason_codes: tuple[ConsensusReason, ...]
    """Failed checks, in check order."""


ConsensusOutcome = Consensus | NoConsensus
"""What `build_consensus` returns when it does not refuse."""


def _input_problems(
    runs: tuple[RunObservation, ...],
    baseline_output_digest: str | None,
    candidate_digest: str | None,
) -> list[tuple[ConsensusReason, str]]:
    """Why these runs cannot be judged at all (C1, the digests, C4), in order."""
    n = len(runs)
    problems: list[tuple[ConsensusReason, str]] = []
    # C1: N >= 1, and the observations are exactly the launched runs 0..N-1.
    if n == 0:
        problems.append(
            (
                ConsensusReason.NO_RUNS_LAUNCHED,
                "observations: expected at least one launched run, got 0",
            )
        )
    elif tuple(run.index for run in runs) != tuple(range(n)):
        position = next(i for i, run in enumerate(runs) if run.index != i)
        problems.append(
            (
                ConsensusReason.RUN_INDEXES_NOT_SEQUENTIAL,
                f"observations[{position}].index: expected {position} (runs 0..{n - 1}"
                f" in order), got {short_repr(runs[position].index)}",
            )
        )
    if baseline_output_digest is not None and not is_digest(baseline_output_digest):
        problems.append(
            (
                ConsensusReason.INVALID_BASELINE_OUTPUT_DIGEST,
                _not_a_digest("baseline_output_digest", baseline_output_digest),
            )
        )
    if candidate_digest is not None and not is_digest(candidate_digest):
        problems.append(
            (
                ConsensusReason.INVALID_CANDIDATE_DIGEST,
                _not_a_digest("candidate_digest", candidate_digest),
            )
        )
    # C4: one digest names one byte string, so it has exactly one size.
    seen_sizes: dict[str, tuple[int, int]] = {}
    for observed in runs:
        if observed.output_digest is None or observed.output_size is None:
            continue
        first_index, first_size = seen_sizes.setdefault(
            observed.output_digest, (observed.index, observed.output_size)
        )
        if first_size != observed.output_size:
            problems.append(
                (
                    ConsensusReason.DIGEST_SIZE_CONFLICT,
                    f"run {short_repr(observed.index)} output_size: expected"
                    f" {short_repr(first_size)} (run {short_repr(first_index)} captured"
                    f" output digest {short_repr(observed.output_digest)} with that size),"
                    f" got {short_repr(observed.output_size)}",
                )
            )
            break
    return problems


@boundary
def build_consensus(
    observations: Sequence[RunObservation],
    *,
    baseline_output_digest: str | None = None,
    candidate_digest: str | None = None,
) -> Consensus | NoConsensus | ConsensusRefusal:
    """Classify N launched runs and find a strict-majority byte-identical output.

    Args:
        observations: every launched run, indexed ``0..N-1`` in order.
        baseline_output_digest: SHA-256 of the baseline output; a run whose output
            has this digest is a no-change run (C3).
        candidate_digest: SHA-256 of the candidate being corroborated (C6).

    Returns:
        `Consensus` when one group has more than N/2 runs, else `NoConsensus`;
        `ConsensusRefusal` when the input cannot be judged (C1, bad digests).

    Raises:
        TypeError: ``observations`` holds something that is not a `RunObservation`
            (a programmer error, not bad data).
    """
    runs = tuple(observations)
    for item in runs:
        if type(item) is not RunObservation:
            raise TypeError(f"expected RunObservation, got {type(item).__name__}")
    n = len(runs)
    problems = _input_problems(runs, baseline_output_digest, candidate_digest)
    if problems:
        return seal(
            ConsensusRefusal,
            runs_launched=n,
            reason_codes=tuple(code for code, _ in problems),
            explanation="cannot judge these runs: "
            + "; ".join(f"{said} [{code}]" for code, said in problems),
        )

    classified = tuple(_classify(run, baseline_output_digest) for run in runs)
    # C2-C4, C6: the same derivation every outcome record re-checks at construction
    # (the observations were checked above, so it cannot find a contradiction).
    derived = _derive(classified, baseline_output_digest, candidate_digest)
    if isinstance(derived, str):  # pragma: no cover - unreachable after C1's checks
        raise KernelError(f"consensus derivation contradicted checked runs: {derived}")
    groups: tuple[OutputGroup, ...] = derived["groups"]
    common: dict[str, Any] = {
        "runs_launched": n,
        "runs": classified,
        "baseline_output_digest": baseline_output_digest,
        "candidate_digest": candidate_digest,
        **derived,
    }
    # C5: a strict majority of the launched runs (count > N/2), never a plurality.
    top = _majority(groups, n)
    if top is not None:
        return seal(
            Consensus,
            agreement_count=len(top.run_indexes),
            majority_digest=top.digest,
            majority_size=top.size,
            candidate_matches_majority=(
                None if candidate_digest is None else candidate_digest == top.digest
            ),
            **common,
        )
    return seal(
        NoConsensus,
        reason=_no_consensus_reason(groups),
        candidate_matches_majority=None if candidate_digest is None else False,
        **common,
    )


def _not_a_digest(name: str, value: str) -> str:
    return (
        f"{name}: expected a SHA-256 digest (64 lowercase hex characters), got"
        f" {short_repr(value)} ({len(value)} characters)"
    )


def _classify(run: RunObservation, baseline_output_digest: str | None) -> ClassifiedRun:
    status: RunStatus
    if run.status is not CaptureStatus.OK:
        # C2: any failure counts as launched and joins no group.
        status = RunStatus(run.status.value)
    elif run.output_size == 0 or run.output_digest in (EMPTY_SHA256, baseline_output_digest):
        # C3: empty, or byte-identical to the baseline output.
        status = RunStatus.NO_CHANGE
    else:
        status = RunStatus.OK
    return ClassifiedRun(
        index=run.index,
        status=status,
        exit_code=run.exit_code,
        output_digest=run.output_digest,
        output_size=run.output_size,
        isolation=run.isolation,
        duration_ms=run.duration_ms,
        variation=run.variation,
        limits=run.limits,
    )


@attrs.frozen(kw_only=True)
class CorroborationReport(Record):
    """The `kernel corroborate` report: one consensus outcome plus how it was obtained.

    Identity payload: every field but ``explanation``, ``report_id`` blanked
    (self-sealed). ``consensus`` is about byte agreement only; the report carries
    no correctness field (C7).
    """

    __identity__ = Identity(field="report_id", seals=True)

    report_id: Digest = UNSEALED
    """Self-sealed SHA-256 of the identity payload."""
    consensus: bool
    """True when a strict majority of the launched runs agreed byte for byte."""
    agreement_count: Count | None
    """Runs in the majority group, or None without consensus."""
    runs_launched: Count
    """N."""
    majority_digest: OptionalDigest
    """SHA-256 of the majority output, or None."""
    majority_size: Count | None
    """Size of the majority output, or None."""
    no_consensus_reason: NoConsensusReason | None
    """Why there is no consensus, or None when there is one."""
    outcome_id: Digest
    """``consensus_id`` or ``no_consensus_id`` of the outcome this report renders."""
    groups: tuple[OutputGroup, ...]
    """Every byte-identical group."""
    runs: tuple[ClassifiedRun, ...]
    """Every launched run, by index."""
    no_change_run_indexes: tuple[Count, ...] = attrs.field(validator=_ascending_indexes)
    """Runs excluded as no-change."""
    failed_run_indexes: tuple[Count, ...] = attrs.field(validator=_ascending_indexes)
    """Runs that failed."""
    baseline_output_digest: OptionalDigest
    """Digest of the baseline output, when given."""
    candidate_digest: OptionalDigest
    """Digest of the candidate, when given."""
    candidate_matches_majority: bool | None
    """Whether the majority output equals the candidate (None without a candidate)."""
    candidate_reproduced_by: tuple[Count, ...] = attrs.field(validator=_ascending_indexes)
    """Runs that reproduced the candidate exactly."""
    capture_mode: CaptureMode
    """What each run's output is."""
    command: tuple[str, ...]
    """The argv every run executed."""
    network: bool
    """Whether runs had network access."""
    timeout_ms: Count | None
    """Per-run time limit, or None."""
    isolation: Isolation
    """The weakest isolation level any run obtained."""
    explanation: str = CORROBORATION_NOTICE
    """Prose (never in the id)."""

    def __attrs_post_init__(self) -> None:
        if self.consensus != (self.no_consensus_reason is None):
            raise field_error("no_consensus_reason", "set exactly when there is no consensus")
        # The report renders exactly one outcome: rebuilding it from the report's own
        # fields runs that outcome's checks (C1-C6) and must give ``outcome_id``.
        rebuilt = _outcome_of(self)
        rebuilt_id = (
            rebuilt.consensus_id if isinstance(rebuilt, Consensus) else rebuilt.no_consensus_id
        )
        if rebuilt_id != self.outcome_id:
            raise field_error("outcome_id", "not the id of the outcome this report renders")
        if self.isolation is not _weakest(self.runs):
            raise field_error("isolation", "not the weakest isolation any run obtained")


def _weakest(runs: tuple[ClassifiedRun, ...]) -> Isolation:
    """The weakest isolation level any run obtained."""
    return weakest_isolation(run.isolation for run in runs)


def _outcome_of(report: CorroborationReport) -> Consensus | NoConsensus:
    """The outcome ``report`` renders, rebuilt (and so re-checked) from its fields."""
    fields: dict[str, Any] = {
        "runs_launched": report.runs_launched,
        "groups": report.groups,
        "runs": report.runs,
        "no_change_run_indexes": report.no_change_run_indexes,
        "failed_run_indexes": report.failed_run_indexes,
        "baseline_output_digest": report.baseline_output_digest,
        "candidate_digest": report.candidate_digest,
        "candidate_matches_majority": report.candidate_matches_majority,
        "candidate_reproduced_by": report.candidate_reproduced_by,
    }
    if report.consensus:
        # None here (a forged report) is refused by Consensus's field checks.
        majority: dict[str, Any] = {
            "agreement_count": report.agreement_count,
            "majority_digest": report.majority_digest,
            "majority_size": report.majority_size,
        }
        return seal(Consensus, **majority, **fields)
    if (
        report.agreement_count is not None
        or report.majority_digest is not None
        or report.majority_size is not None
    ):
        raise field_error("agreement_count", "a report without consensus has no majority")
    fields["reason"] = report.no_consensus_reason
    return seal(NoConsensus, **fields)


@boundary
def build_corroboration_report(
    outcome: Consensus | NoConsensus,
    *,
    command: Sequence[str],
    capture_mode: CaptureMode,
    network: bool,
    timeout_ms: int | None,
) -> CorroborationReport:
    """Render a consensus outcome as a self-sealed `CorroborationReport`.

    The report's ``isolation`` is the weakest level any run obtained, so a single run
    that fell back to a copy is never hidden behind the others.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    weakest = _weakest(outcome.runs)
    fields: dict[str, Any] = {
        "runs_launched": outcome.runs_launched,
        "groups": outcome.groups,
        "runs": outcome.runs,
        "no_change_run_indexes": outcome.no_change_run_indexes,
        "failed_run_indexes": outcome.failed_run_indexes,
        "baseline_output_digest": outcome.baseline_output_digest,
        "candidate_digest": outcome.candidate_digest,
        "candidate_matches_majority": outcome.candidate_matches_majority,
        "candidate_reproduced_by": outcome.candidate_reproduced_by,
        "capture_mode": capture_mode,
        "command": tuple(command),
        "network": network,
        "timeout_ms": timeout_ms,
        "isolation": weakest,
    }
    if isinstance(outcome, Consensus):
        return seal(
            CorroborationReport,
            consensus=True,
            agreement_count=outcome.agreement_count,
            majority_digest=outcome.majority_digest,
            majority_size=outcome.majority_size,
            no_consensus_reason=None,
            outcome_id=outcome.consensus_id,
            **fields,
        )
    return seal(
        CorroborationReport,
        consensus=False,
        agreement_count=None,
        majority_digest=None,
        majority_size=None,
        no_consensus_reason=outcome.reason,
        outcome_id=outcome.no_consensus_id,
        **fields,
    )
