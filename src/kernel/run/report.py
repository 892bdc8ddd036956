"""`RunEvidenceReport`: what the evidence of one run says, attempt by attempt.

A report is a read-only aggregation of a `RunRecord`. It never selects, ranks or
votes: ``human_decision`` is always pending with no selected attempt and every
authority flag is false (both are fixed by the record types themselves).

Evidence states (exactly one per attempt, `evidence_state_of`):

=====================  =====================================================
supported              verified; recommendation ``accept_candidate`` and every
                       required check passed
rejected               verified; recommendation ``reject_candidate``
inconclusive           verified; ``escalate`` / ``insufficient_evidence``, or an
                       acceptance that contradicts an unpassed required check
worker_error           the worker failed before producing a manifest
result_manifest_error  the manifest could not be collected, parsed or bound
verification_error     a candidate exists but the verifier control path failed
=====================  =====================================================

``verification_disagreement`` is true when the verified attempts carry more than one
distinct recommendation (IDKMesh's field, kept for parity): recommendations differ
*across candidates*, which is what judging a wrong and a right patch yields. Real
disagreement is `candidate_disagreements`: the *same* candidate (byte-identical patch,
reproduced by several attempts) judged differently by two of its verifications, in its
recommendation or in the status of one check. Errored attempts are kept; nothing is
dropped.

`build_evidence_report` refuses (`ReportRefusal`) on digest drift between a verification and
its manifest or the run's work unit, and between a manifest and the work unit.
`check_evidence_report` re-derives every state, count, flag and warning from the report's own
attempt data and refuses a report that is not self-consistent; given the run record,
it also refuses a report that is not exactly the one that record yields.

``RunEvidenceReport.digest`` is SHA-256 over the canonical JSON of the whole document:
the value a `kernel.decide.decision.HumanDecisionRecord` binds to.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal

import attrs

from kernel.records.codec import UNSEALED, Identity, Record, document_digest, seal, short_repr
from kernel.records.values import Count, Digest, NonBlank, Positive, Refusal, boundary
from kernel.run.record import (
    AttemptError,
    AttemptRecord,
    AttemptState,
    Calibration,
    CheckRun,
    ImportedFrom,
    IsolationPolicy,
    ManifestSummary,
    RunAuthority,
    RunRecord,
    SandboxRun,
    VerificationSummary,
    WorkUnitRef,
    attempt_shape_problem,
    evidence_isolation,
)
from kernel.run.verification import CheckStatus, Isolation, Recommendation, WorkerStatus

__all__ = [
    "REPORT_KIND",
    "REPORT_SCHEMA_VERSION",
    "EvidenceState",
    "PendingDecision",
    "ReportAttempt",
    "ReportVerified",
    "ReportReason",
    "ReportRefusal",
    "ReportSummary",
    "ReportWarning",
    "RunEvidenceReport",
    "CandidateDisagreement",
    "build_evidence_report",
    "candidate_disagreements",
    "check_evidence_report",
    "evidence_state_of",
]

REPORT_KIND: Final = "kernel-run-evidence-report"
REPORT_SCHEMA_VERSION: Final = "1"


class EvidenceState(enum.StrEnum):
    """The one evidence state of an attempt (see the module table)."""

    SUPPORTED = "supported"
    REJECTED = "rejected"
    INCONCLUSIVE = "inconclusive"
    WORKER_ERROR = "worker_error"
    RESULT_MANIFEST_ERROR = "result_manifest_error"
    VERIFICATION_ERROR = "verification_error"


class ReportWarning(enum.StrEnum):
    """Warnings a report carries, in this order (codes; render turns them into prose)."""

    DECISION_SUPPORT_ONLY = "decision_support_only"
    """Always present: the report selects, accepts and merges nothing."""
    VERIFICATION_DISAGREEMENT = "verification_disagreement"
    """Verified attempts carry more than one distinct recommendation."""
    CONTROL_FAILURE = "control_failure_present"
    """At least one attempt stopped on a worker, manifest or verifier failure."""
    WORKER_SUCCESS_NOT_VERIFIED = "worker_success_not_verified"
    """A worker reported success and its independent verifier rejected the candidate."""
    RECOMMENDATION_CONTRADICTS_CHECKS = "recommendation_contradicts_checks"
    """A verifier recommended acceptance although a required check did not pass."""
    NO_SUPPORTED_ATTEMPT = "no_supported_attempt"
    """No attempt is supported by independent evidence."""


class ReportReason(enum.StrEnum):
    """Why a report is not built or not self-consistent (check order)."""

    MANIFEST_WORK_UNIT_DRIFT = "manifest_work_unit_digest_drift"
    """A manifest binds to another work unit digest than the run's."""
    VERIFICATION_MANIFEST_DRIFT = "verification_manifest_digest_drift"
    """A verification binds to another manifest digest than the attempt's manifest."""
    VERIFICATION_WORK_UNIT_DRIFT = "verification_work_unit_digest_drift"
    """A verification binds to another work unit digest than the run's."""
    ATTEMPT_ORDER = "attempt_order_invalid"
    """Attempt orders are not 1..N in sequence."""
    DUPLICATE_ATTEMPT = "duplicate_attempt_id"
    """Two attempts share an id."""
    ATTEMPT_SHAPE = "attempt_shape_invalid"
    """An attempt carries what its state forbids (or lacks what it needs)."""
    EVIDENCE_STATE = "evidence_state_mismatch"
    """An attempt's evidence state is not the one its data yields."""
    SUMMARY_COUNTS = "summary_count_mismatch"
    """A summary count is not the count of the attempts' states."""
    DISAGREEMENT = "disagreement_mismatch"
    """The disagreement flag or the recommendation list does not match the attempts."""
    WARNINGS = "warnings_mismatch"
    """The warnings are not the ones the attempts yield."""
    SOURCE = "source_mismatch"
    """The report is not exactly the report the given run record yields."""


@attrs.frozen(kw_only=True)
class ReportAttempt(Record):
    """One attempt as a report shows it.

    Cross-field consistency (state vs. what the attempt carries, evidence state vs.
    recommendation) is deliberately *not* enforced at construction: `check_evidence_report`
    refuses an inconsistent report with reason codes instead.
    """

    attempt_id: NonBlank
    """Attempt id."""
    order: Positive
    """1-based launch position."""
    adapter: NonBlank
    """Worker adapter kind."""
    adapter_version: NonBlank | None
    """Worker adapter version."""
    state: AttemptState
    """Control-path state."""
    evidence_state: EvidenceState
    """Evidence state."""
    manifest: ManifestSummary | None
    """Manifest summary."""
    verification: VerificationSummary | None
    """Verification summary."""
    error: AttemptError | None
    """Control failure."""
    worker_sandbox: SandboxRun | None = None
    """The worker's sandbox: isolation level and limits (as the run recorded them)."""
    check_runs: tuple[CheckRun, ...] = ()
    """Each verifier check's sandbox and reason (as the run recorded them)."""

    @property
    def weakest_isolation(self) -> Isolation | None:
        """The weakest isolation of the attempt's sandboxed evidence (None: none was)."""
        return evidence_isolation(self.worker_sandbox, self.check_runs)


@attrs.frozen(kw_only=True)
class ReportSummary(Record):
    """Counts and flags, all re-derivable from the attempts."""

    attempt_count: Positive
    """Number of attempts."""
    supported: Count
    """Attempts in state supported."""
    rejected: Count
    """Attempts in state rejected."""
    inconclusive: Count
    """Attempts in state inconclusive."""
    worker_errors: Count
    """Attempts in state worker_error."""
    result_manifest_errors: Count
    """Attempts in state result_manifest_error."""
    verification_errors: Count
    """Attempts in state verification_error."""
    control_errors: Count
    """Sum of the three error counts."""
    control_failure_present: bool
    """``control_errors > 0``."""
    recommendations: tuple[Recommendation, ...]
    """Distinct recommendations among verified attempts, in vocabulary order."""
    verification_disagreement: bool
    """More than one distinct recommendation among verified attempts."""


@attrs.frozen(kw_only=True)
class PendingDecision(Record):
    """The human decision slot of a generated report: always pending, nothing selected."""

    status: Literal["pending"] = "pending"
    """Always ``pending``."""
    selected_attempt_id: None = None
    """Always null: a report never selects."""
    integration_authority: Literal["external_human_or_governance"] = "external_human_or_governance"
    """Who may decide: someone outside the report."""


@attrs.frozen(kw_only=True)
class RunEvidenceReport(Record):
    """The evidence report of one run. ``digest``: SHA-256 of the whole document."""

    kind: Literal["kernel-run-evidence-report"] = REPORT_KIND
    """Document kind."""
    schema_version: Literal["1"] = REPORT_SCHEMA_VERSION
    """Document schema version."""
    run_id: NonBlank
    """Run id."""
    source_run_kind: NonBlank
    """Kind of the run record reported on."""
    source_run_digest: Digest
    """Digest of the whole run record reported on."""
    source_config_digest: Digest
    """The run's orchestration config digest."""
    imported_from: ImportedFrom | None
    """The foreign document the run record was converted from, if any."""
    orchestrator: NonBlank
    """The run's orchestrator."""
    work_unit: WorkUnitRef
    """The run's work unit."""
    verifier_policy_digest: Digest
    """The run's verifier policy digest."""
    attempts: tuple[ReportAttempt, ...]
    """Every attempt, in launch order."""
    summary: ReportSummary
    """Counts and flags."""
    warnings: tuple[ReportWarning, ...]
    """Warning codes in `ReportWarning` order."""
    human_decision: PendingDecision
    """Always pending."""
    authority: RunAuthority
    """All false."""
    isolation_policy: IsolationPolicy | None = None
    """The isolation the run's config accepted (as the run recorded it)."""
    calibration: Calibration | None = None
    """The declared tests on the baseline before any attempt was judged (as the run
    recorded it)."""

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of ``to_dict()``."""
        return document_digest(self)


@attrs.frozen(kw_only=True)
class ReportRefusal(Refusal):
    """No report, or a report that does not check. ``refusal_id`` self-seals over every
    field but ``explanation``."""

    __identity__ = Identity(field="refusal_id", seals=True)

    refusal_id: Digest = UNSEALED
    """Self-sealed id."""
    run_id: str
    """The run concerned."""
    source_run_digest: Digest
    """The run record (or the report's recorded source) concerned."""
    attempt_ids: tuple[str, ...]
    """Attempts where a check failed, first failure order, no duplicates."""
    reason_codes: tuple[ReportReason, ...]
    """Failed checks, in `ReportReason` order."""


@attrs.frozen(kw_only=True)
class ReportVerified(Record):
    """A report that checks: its digest and the run it reports on."""

    report_digest: Digest
    """The checked report's digest."""
    source_run_digest: Digest
    """The run record it reports on."""


_ACCEPT: Final = Recommendation.ACCEPT_CANDIDATE
_REJECT: Final = Recommendation.REJECT_CANDIDATE
_ERROR_STATES: Final = {
    AttemptState.WORKER_ERROR: EvidenceState.WORKER_ERROR,
    AttemptState.RESULT_MANIFEST_ERROR: EvidenceState.RESULT_MANIFEST_ERROR,
    AttemptState.VERIFICATION_ERROR: EvidenceState.VERIFICATION_ERROR,
}
_RECOMMENDATION_ORDER: Final = {r: i for i, r in enumerate(Recommendation)}


def _contradicts(verification: VerificationSummary) -> bool:
    """Acceptance recommended although a required check did not pass."""
    return verification.recommendation is _ACCEPT and any(
        c.required and c.status is not CheckStatus.PASSED for c in verification.checks
    )


def evidence_state_of(
    state: AttemptState, verification: VerificationSummary | None
) -> EvidenceState:
    """The evidence state of an attempt (module table). Pure, total."""
    if state is not AttemptState.VERIFIED or verification is None:
        return _ERROR_STATES.get(state, EvidenceState.INCONCLUSIVE)
    if verification.recommendation is _ACCEPT:
        return EvidenceState.INCONCLUSIVE if _contradicts(verification) else EvidenceState.SUPPORTED
    if verification.recommendation is _REJECT:
        return EvidenceState.REJECTED
    return EvidenceState.INCONCLUSIVE


def _summarize(
    attempts: Sequence[ReportAttempt], states: Sequence[EvidenceState]
) -> tuple[ReportSummary, tuple[ReportWarning, ...]]:
    counts = dict.fromkeys(EvidenceState, 0)
    for state in states:
        counts[state] += 1
    seen: set[Recommendation] = set()
    worker_success_rejected = contradiction = False
    for attempt, state in zip(attempts, states, strict=True):
        verification = attempt.verification
        if attempt.state is AttemptState.VERIFIED and verification is not None:
            seen.add(verification.recommendation)
            contradiction = contradiction or _contradicts(verification)
            worker_success_rejected = worker_success_rejected or (
                state is EvidenceState.REJECTED
                and attempt.manifest is not None
                and attempt.manifest.worker_status is WorkerStatus.SUCCEEDED
            )
    control = (
        counts[EvidenceState.WORKER_ERROR]
        + counts[EvidenceState.RESULT_MANIFEST_ERROR]
        + counts[EvidenceState.VERIFICATION_ERROR]
    )
    disagreement = len(seen) > 1
    summary = ReportSummary(
        attempt_count=len(attempts) or 1,
        supported=counts[EvidenceState.SUPPORTED],
        rejected=counts[EvidenceState.REJECTED],
        inconclusive=counts[EvidenceState.INCONCLUSIVE],
        worker_errors=counts[EvidenceState.WORKER_ERROR],
        result_manifest_errors=counts[EvidenceState.RESULT_MANIFEST_ERROR],
        verification_errors=counts[EvidenceState.VERIFICATION_ERROR],
        control_errors=control,
        control_failure_present=control > 0,
        recommendations=tuple(sorted(seen, key=_RECOMMENDATION_ORDER.__getitem__)),
        verification_disagreement=disagreement,
    )
    flags = {
        ReportWarning.DECISION_SUPPORT_ONLY: True,
        ReportWarning.VERIFICATION_DISAGREEMENT: disagreement,
        ReportWarning.CONTROL_FAILURE: control > 0,
        ReportWarning.WORKER_SUCCESS_NOT_VERIFIED: worker_success_rejected,
        ReportWarning.RECOMMENDATION_CONTRADICTS_CHECKS: contradiction,
        ReportWarning.NO_SUPPORTED_ATTEMPT: counts[EvidenceState.SUPPORTED] == 0,
    }
    return summary, tuple(w for w in ReportWarning if flags[w])


_Said = list[tuple["ReportReason", str]]
"""Failed checks, each with what was expected and what was found."""

_SHOWN_PER_CODE: Final = 3
"""Phrases shown per reason code; the rest are counted (a report may have many attempts)."""


def _drift(
    work_unit_digest: str,
    manifest: ManifestSummary | None,
    verification: VerificationSummary | None,
    where: str,
) -> _Said:
    said: _Said = []
    if (
        manifest is not None
        and manifest.work_unit_digest is not None
        and manifest.work_unit_digest != work_unit_digest
    ):
        said.append(
            (
                ReportReason.MANIFEST_WORK_UNIT_DRIFT,
                f"{where} manifest.work_unit_digest: expected the run's work unit digest"
                f" {short_repr(work_unit_digest)}, got {short_repr(manifest.work_unit_digest)}",
            )
        )
    if verification is not None:
        # IDKMesh rule: VerificationResult.result_manifest_digest == summarized manifest digest.
        if manifest is None or verification.result_manifest_digest != manifest.digest:
            expected = (
                "a manifest (the attempt has none)"
                if manifest is None
                else f"the attempt's manifest digest {short_repr(manifest.digest)}"
            )
            said.append(
                (
                    ReportReason.VERIFICATION_MANIFEST_DRIFT,
                    f"{where} verification.result_manifest_digest: expected {expected},"
                    f" got {short_repr(verification.result_manifest_digest)}",
                )
            )
        # IDKMesh rule: VerificationResult.work_unit_digest == run work unit digest.
        if verification.work_unit_digest != work_unit_digest:
            said.append(
                (
                    ReportReason.VERIFICATION_WORK_UNIT_DRIFT,
                    f"{where} verification.work_unit_digest: expected the run's work unit"
                    f" digest {short_repr(work_unit_digest)},"
                    f" got {short_repr(verification.work_unit_digest)}",
                )
            )
    return said


class _Problems:
    """Collects reason codes with what each check expected and found, and attempt ids;
    emits them in canonical order."""

    def __init__(self) -> None:
        self.said: dict[ReportReason, list[str]] = {}
        self.attempt_ids: dict[str, None] = {}

    def add(self, said: Iterable[tuple[ReportReason, str]], attempt_id: str | None = None) -> None:
        for reason, phrase in said:
            self.said.setdefault(reason, []).append(phrase)
            if attempt_id is not None:
                self.attempt_ids.setdefault(attempt_id)

    def refusal(self, run_id: str, source_run_digest: str) -> ReportRefusal | None:
        if not self.said:
            return None
        codes = tuple(r for r in ReportReason if r in self.said)
        parts = []
        for code in codes:
            phrases = self.said[code]
            more = len(phrases) - _SHOWN_PER_CODE
            shown = "; ".join(phrases[:_SHOWN_PER_CODE])
            parts.append(f"{shown}{f' (and {more} more)' if more > 0 else ''} [{code}]")
        return seal(
            ReportRefusal,
            run_id=run_id,
            source_run_digest=source_run_digest,
            attempt_ids=tuple(self.attempt_ids),
            reason_codes=codes,
            explanation="report refused: " + "; ".join(parts),
        )


def _attempt(attempt_id: str) -> str:
    return f"attempt {short_repr(attempt_id)}"


def _report_attempt(attempt: AttemptRecord) -> ReportAttempt:
    return ReportAttempt(
        attempt_id=attempt.attempt_id,
        order=attempt.order,
        adapter=attempt.adapter,
        adapter_version=attempt.adapter_version,
        state=attempt.state,
        evidence_state=evidence_state_of(attempt.state, attempt.verification),
        manifest=attempt.manifest,
        verification=attempt.verification,
        error=attempt.error,
        worker_sandbox=attempt.worker_sandbox,
        check_runs=attempt.check_runs,
    )


@boundary
def build_evidence_report(run: RunRecord) -> RunEvidenceReport | ReportRefusal:
    """Build the evidence report of ``run``; refuse on digest drift.

    Args:
        run: a well-formed run record (its construction already guarantees N >= 1,
            unique ids, launch order and per-state shape).

    Returns:
        The report, or a `ReportRefusal` naming every drifted attempt. No partial report.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    problems = _Problems()
    wu_digest = run.work_unit.digest
    for attempt in run.attempts:
        where = _attempt(attempt.attempt_id)
        problems.add(
            _drift(wu_digest, attempt.manifest, attempt.verification, where), attempt.attempt_id
        )
    run_digest = run.digest
    refusal = problems.refusal(run.run_id, run_digest)
    if refusal is not None:
        return refusal
    attempts = tuple(_report_attempt(a) for a in run.attempts)
    summary, warnings = _summarize(attempts, [a.evidence_state for a in attempts])
    return RunEvidenceReport(
        run_id=run.run_id,
        source_run_kind=run.kind,
        source_run_digest=run_digest,
        source_config_digest=run.config_digest,
        imported_from=run.imported_from,
        orchestrator=run.orchestrator,
        work_unit=run.work_unit,
        verifier_policy_digest=run.verifier_policy_digest,
        attempts=attempts,
        summary=summary,
        warnings=warnings,
        human_decision=PendingDecision(),
        authority=RunAuthority.none(),
        isolation_policy=run.isolation_policy,
        calibration=run.calibration,
    )


def _attempt_problems(report: RunEvidenceReport, problems: _Problems) -> list[EvidenceState]:
    """Each attempt's digests, order, id, shape and evidence state; the states derived."""
    wu_digest = report.work_unit.digest
    seen: set[str] = set()
    derived: list[EvidenceState] = []
    for index, attempt in enumerate(report.attempts):
        aid = attempt.attempt_id
        where = _attempt(aid)
        problems.add(_drift(wu_digest, attempt.manifest, attempt.verification, where), aid)
        if attempt.order != index + 1:
            problems.add(
                [
                    (
                        ReportReason.ATTEMPT_ORDER,
                        f"attempts[{index}] ({where}) order: expected {index + 1},"
                        f" got {short_repr(attempt.order)}",
                    )
                ],
                aid,
            )
        if aid in seen:
            problems.add(
                [(ReportReason.DUPLICATE_ATTEMPT, f"attempts[{index}].attempt_id: {where} again")],
                aid,
            )
        seen.add(aid)
        has_manifest = attempt.manifest is not None
        has_verification = attempt.verification is not None
        shape = attempt_shape_problem(attempt.state, has_manifest, has_verification, attempt.error)
        if shape:
            found = (
                f"manifest {'present' if has_manifest else 'none'}, verification"
                f" {'present' if has_verification else 'none'}, error"
                f" {'none' if attempt.error is None else 'present'}"
            )
            problems.add(
                [(ReportReason.ATTEMPT_SHAPE, f"{where}: expected {shape}, got {found}")], aid
            )
        state = evidence_state_of(attempt.state, attempt.verification)
        derived.append(state)
        if state is not attempt.evidence_state:
            problems.add(
                [
                    (
                        ReportReason.EVIDENCE_STATE,
                        f"{where} evidence_state: expected {state} (from state"
                        f" {attempt.state} and its verification), got {attempt.evidence_state}",
                    )
                ],
                aid,
            )
    return derived


def _summary_problems(
    report: RunEvidenceReport, derived: list[EvidenceState], problems: _Problems
) -> None:
    """The summary's counts, disagreement flag and recommendations, and the warnings."""
    summary, warnings = _summarize(report.attempts, derived)
    claimed = report.summary
    if _counts(claimed) != _counts(summary) or not report.attempts:
        differ = [
            f"summary.{name}: expected {short_repr(want)}, got {short_repr(got)}"
            for name, want, got in zip(
                _COUNT_FIELDS, _counts(summary), _counts(claimed), strict=True
            )
            if want != got
        ] or [
            f"summary.attempt_count: expected at least 1, got {short_repr(claimed.attempt_count)}"
        ]
        problems.add((ReportReason.SUMMARY_COUNTS, phrase) for phrase in differ)
    if claimed.verification_disagreement != summary.verification_disagreement:
        problems.add(
            [
                (
                    ReportReason.DISAGREEMENT,
                    f"summary.verification_disagreement: expected"
                    f" {summary.verification_disagreement},"
                    f" got {claimed.verification_disagreement}",
                )
            ]
        )
    if claimed.recommendations != summary.recommendations:
        problems.add(
            [
                (
                    ReportReason.DISAGREEMENT,
                    f"summary.recommendations: expected {_listed(summary.recommendations)},"
                    f" got {_listed(claimed.recommendations)}",
                )
            ]
        )
    if report.warnings != warnings:
        problems.add(
            [
                (
                    ReportReason.WARNINGS,
                    f"warnings: expected {_listed(warnings)}, got {_listed(report.warnings)}",
                )
            ]
        )


def _source_problems(report: RunEvidenceReport, run: RunRecord, problems: _Problems) -> None:
    """The report is exactly the one ``run`` yields."""
    rebuilt = build_evidence_report(run)
    if not isinstance(rebuilt, RunEvidenceReport):
        problems.add(
            [
                (
                    ReportReason.SOURCE,
                    f"run: expected a run whose report builds, got one refused"
                    f" ({', '.join(rebuilt.reason_codes)})",
                )
            ]
        )
    elif rebuilt != report:
        fields = [
            field.name
            for field in attrs.fields(RunEvidenceReport)
            if getattr(rebuilt, field.name) != getattr(report, field.name)
        ]
        problems.add(
            [
                (
                    ReportReason.SOURCE,
                    f"report: expected exactly the report run {short_repr(run.run_id)} yields,"
                    f" got one differing in {', '.join(fields) or 'its fields'}",
                )
            ]
        )


@boundary
def check_evidence_report(
    report: RunEvidenceReport, *, run: RunRecord | None = None
) -> ReportVerified | ReportRefusal:
    """Re-derive everything a report claims from its own attempt data.

    Checks, in `ReportReason` order: digest drift per attempt; attempt orders 1..N;
    unique attempt ids; per-state shape; each evidence state; every summary count; the
    disagreement flag and recommendation list; the warnings; and, when ``run`` is
    given, that the report is exactly ``build_evidence_report(run)``.

    Returns:
        `ReportVerified` when the report is self-consistent, else `ReportRefusal`.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    problems = _Problems()
    # Vacuous input is refused: a report with no attempt reports nothing.
    if not report.attempts:
        problems.add([(ReportReason.ATTEMPT_ORDER, "attempts: expected at least one, got 0")])
    derived = _attempt_problems(report, problems)
    _summary_problems(report, derived, problems)
    if run is not None:
        _source_problems(report, run, problems)
    refusal = problems.refusal(report.run_id, report.source_run_digest)
    if refusal is not None:
        return refusal
    return ReportVerified(report_digest=report.digest, source_run_digest=report.source_run_digest)


@attrs.frozen(kw_only=True)
class CandidateDisagreement:
    """One candidate judged differently by two of its verifications (a view, no document)."""

    candidate_digest: str
    """SHA-256 of the candidate patch."""
    attempt_ids: tuple[str, ...]
    """The verified attempts that produced this candidate, launch order."""
    recommendations: tuple[Recommendation, ...]
    """Distinct recommendations given to the candidate, vocabulary order (more than one
    when the recommendations differ)."""
    checks: tuple[str, ...]
    """Ids of the checks whose status differs between two verifications of the candidate,
    first-seen order."""


@boundary
def candidate_disagreements(report: RunEvidenceReport) -> tuple[CandidateDisagreement, ...]:
    """The candidates of ``report`` judged differently by two of their verifications.

    A candidate is a patch digest; every verified attempt whose manifest names it is one
    judgment of it (attempts reproducing a patch are reruns of that candidate). It
    disagrees when two judgments differ in recommendation or in one check's status.
    A candidate judged once cannot disagree. Pure, total, launch order.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    judged: dict[str, list[tuple[str, VerificationSummary]]] = {}
    for attempt in report.attempts:
        manifest, verification = attempt.manifest, attempt.verification
        if attempt.state is not AttemptState.VERIFIED or verification is None:
            continue
        if manifest is None or manifest.candidate_digest is None:
            continue
        judged.setdefault(manifest.candidate_digest, []).append((attempt.attempt_id, verification))
    found = []
    for digest, judgments in judged.items():
        recommendations = {v.recommendation for _, v in judgments}
        statuses: dict[str, set[CheckStatus]] = {}
        for _, verification in judgments:
            for check in verification.checks:
                statuses.setdefault(check.id, set()).add(check.status)
        checks = tuple(check for check, seen in statuses.items() if len(seen) > 1)
        if len(recommendations) > 1 or checks:
            found.append(
                CandidateDisagreement(
                    candidate_digest=digest,
                    attempt_ids=tuple(aid for aid, _ in judgments),
                    recommendations=tuple(
                        sorted(recommendations, key=_RECOMMENDATION_ORDER.__getitem__)
                    ),
                    checks=checks,
                )
            )
    return tuple(found)


_COUNT_FIELDS: Final = (
    "attempt_count",
    "supported",
    "rejected",
    "inconclusive",
    "worker_errors",
    "result_manifest_errors",
    "verification_errors",
    "control_errors",
    "control_failure_present",
)


def _listed(values: Sequence[object]) -> str:
    """A bounded list of enum values for a message."""
    shown = ", ".join(str(value) for value in values[: _SHOWN_PER_CODE * 2])
    return f"[{shown}{', ...' if len(values) > _SHOWN_PER_CODE * 2 else ''}]"


def _counts(summary: ReportSummary) -> tuple[Any, ...]:
    return tuple(getattr(summary, name) for name in _COUNT_FIELDS)
