"""Admission over a run: the evidence class of each candidate group, as a report section.

Pure: no I/O, no clock, no environment. Built from a `RunEvidenceReport`, the patch
digest of each attempt that produced a candidate, the provenance (context) digest of
each attempt's worker, and the corroboration reports of reruns of the workers.

Rules enforced by `build_run_admission`:

- G1 attempts with a candidate are grouped by candidate (patch) digest, groups in the
  launch order of their first attempt; attempts without a candidate (worker or
  manifest errors) join no group and stay in the report as they are;
- G2 the verifier outcome of a group is ``failed`` when any independent verification
  of its attempts rejected it (fail closed, whatever else passed), else ``passed`` when
  one supported it, else ``none``;
- G3 drafts are the group's attempts plus the changed outputs of the reruns; an attempt
  whose worker context is unknown shares one "unknown" context with every other such
  attempt (correlated: unknown is never counted as independent); a no-change candidate
  (empty patch) contributes no draft, so it is never admitted and carries no consensus;
- G4 each group's branch goes through
  `kernel.corroboration.commit_admission.admit_to_commit`: ``verified`` only
  through the independent verifier, ``corroborated_only`` when only reruns agree,
  otherwise the refusal's reason codes;
- G5 the section is not a selection: ``human_decision`` stays pending, every authority
  flag false, and it binds to the report by ``report_digest``;
- G6 isolation is evidence: a group's ``isolation`` is the weakest level of its
  attempts' sandboxed runs (worker and verifier checks). When it is below ``overlay``
  and the run's isolation policy does not accept that (``accept_below_overlay``), a
  verifier pass is not counted (``verifier_pass_discounted``): the group is never
  ``verified`` on such evidence, and the section says why. A rejection still counts;
- G7 trust is evidence: a group's ``trust_levels`` are the `TrustLevel` of every check
  that passed for one of its attempts (``oracle``: the kernel compared output with an
  answer the sandbox never saw; ``in_process_tests``: a runner beside the candidate's
  code reported), shown as a column; `kernel.decide.gate` can require one for promotion;
- G8 per-test evidence: a group carries each declared test's outcome (FAIL_TO_PASS and
  PASS_TO_PASS: passed, failed, error, skipped, missing, tampered) from its first
  attempt whose checks declare tests;
- G9 a non-pass is never stageable: a group one of whose attempts has a verifier check
  that ended with any reason but ``exit_status_only`` (tampered, no or an unusable
  result, a declared test missing or skipped, a timeout, a resource limit, a start
  failure) has the verifier outcome ``failed``, so it is neither ``verified`` nor
  ``corroborated_only`` and nothing stages it; only a check that proves nothing either
  way (a plain command that exited 0) leaves a group to its reruns.

Identity: ``RunAdmission.admission_id`` self-seals over every field (``report_digest``
and every group's class included); `RunAdmission.from_dict` refuses a document whose id
does not reproduce. A resealed edit reproduces its own id, so a consumer never trusts
the stored classes: `kernel.decide.gate.derive_run_admission` re-derives the document from the
run, the report and the corroboration reports and compares ids (ADR-0006 §3).
``RunAdmission.digest`` is SHA-256 over the canonical JSON of the whole document.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Final, Literal

import attrs

from kernel.corroboration.commit_admission import (
    Admission,
    Branch,
    CommitReason,
    Draft,
    EvidenceClass,
    VerifierOutcome,
    admit_to_commit,
    branch_from_corroboration,
)
from kernel.corroboration.consensus import EMPTY_SHA256, CorroborationReport
from kernel.errors import ParameterValueError
from kernel.records.codec import UNSEALED, Identity, Record, document_digest, field_error, seal
from kernel.records.identity import sha256_hex
from kernel.records.values import Count, Digest, NonBlank, OptionalDigest, boundary
from kernel.run.record import DeclaredTestResult, RunAuthority, TrustLevel
from kernel.run.report import EvidenceState, PendingDecision, RunEvidenceReport
from kernel.run.verification import CheckReason, Isolation, weakest_isolation

__all__ = [
    "RUN_ADMISSION_KIND",
    "CandidateGroup",
    "RunAdmission",
    "build_run_admission",
]

RUN_ADMISSION_KIND: Final = "kernel-run-admission"
UNKNOWN_CONTEXT: Final = sha256_hex({"context": "unknown"})
"""The one context shared by every attempt whose worker context is unknown (G3)."""


@attrs.frozen(kw_only=True)
class CandidateGroup(Record):
    """Attempts whose candidates are byte-identical, and what their evidence is."""

    candidate_digest: Digest
    """SHA-256 of the candidate (patch) bytes."""
    no_change: bool
    """The candidate is empty: the worker changed nothing."""
    attempt_ids: tuple[str, ...]
    """Attempts in the group, launch order."""
    evidence_states: tuple[EvidenceState, ...]
    """Each attempt's evidence state, same order."""
    verifier: VerifierOutcome
    """Independent verifier outcome of the group (G2)."""
    reruns_launched: Count
    """Reruns of the group's worker (0 when none ran)."""
    reruns_reproduced: Count
    """Reruns whose output is byte-identical to the candidate."""
    rerun_consensus: bool
    """A strict majority of the reruns agreed byte for byte (on any output)."""
    corroboration_report_id: OptionalDigest
    """The corroboration report of the reruns, when they ran."""
    evidence_class: EvidenceClass | None
    """``verified`` or ``corroborated_only``; None when admission refused the group."""
    refusal_reasons: tuple[CommitReason, ...]
    """Why admission refused the group (empty when it has a class)."""
    admission_digest: Digest
    """``admission_id`` or ``refusal_id`` of the admission outcome."""
    isolation: Isolation | None = None
    """The weakest isolation of the group's sandboxed evidence (None: none was sandboxed)."""
    verifier_pass_discounted: bool = False
    """G6: the verifier passed, but on evidence below ``overlay`` that the run's config
    does not accept, so admission did not count the pass."""
    trust_levels: tuple[TrustLevel, ...] = ()
    """G7: the trust levels of the checks that passed for the group's attempts, strongest
    first (``oracle`` before ``in_process_tests``); empty when none is recorded."""
    declared_tests: tuple[DeclaredTestResult, ...] = ()
    """G8: each declared test's outcome in the group's first attempt whose checks declare
    tests (its attempts ran the same candidate bytes; the report keeps every attempt's)."""

    def __attrs_post_init__(self) -> None:
        if (self.evidence_class is None) == (not self.refusal_reasons):
            raise field_error("evidence_class", "a group has a class or refusal reasons")
        if len(self.attempt_ids) != len(self.evidence_states) or not self.attempt_ids:
            raise field_error("evidence_states", "one state per attempt, at least one")


@attrs.frozen(kw_only=True)
class RunAdmission(Record):
    """The evidence classes of a run's candidate groups. ``admission_id`` self-seals over
    every field (so it covers ``report_digest``); ``digest``: the whole document."""

    __identity__ = Identity(field="admission_id", seals=True)

    kind: Literal["kernel-run-admission"] = RUN_ADMISSION_KIND
    """Document kind."""
    schema_version: Literal["1"] = "1"
    """Document schema version."""
    admission_id: Digest = UNSEALED
    """Self-sealed SHA-256 over every field: an edited class no longer reproduces it,
    and a resealed one no longer matches the re-derivation (ADR-0006 §3)."""
    run_id: NonBlank
    """The run."""
    source_run_digest: Digest
    """The run record's digest."""
    report_digest: Digest
    """The evidence report this section belongs to."""
    groups: tuple[CandidateGroup, ...]
    """Candidate groups, launch order of their first attempt."""
    human_decision: PendingDecision
    """Always pending."""
    authority: RunAuthority
    """All false."""

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of ``to_dict()``."""
        return document_digest(self)


_INCONCLUSIVE_ONLY: Final = frozenset({CheckReason.EXIT_STATUS_ONLY})
"""The one non-pass reason that leaves a group to its reruns (G9): exit 0 of a plain
command is no evidence either way. Every other reason disqualifies the candidate."""


def _disqualified(reasons: Iterable[CheckReason | None]) -> bool:
    """True when a check that ended with one of ``reasons`` disqualifies its candidate (G9)."""
    return any(r is not None and r not in _INCONCLUSIVE_ONLY for r in reasons)


def _verifier(states: tuple[EvidenceState, ...], *, disqualifying: bool) -> VerifierOutcome:
    # G2: a rejection wins (fail closed); a pass needs a supporting verification.
    # G9: a check that ended tampered, without a result, timed out or at a limit is a
    # rejection too: such a candidate must never reach staging as corroborated_only.
    if EvidenceState.REJECTED in states or disqualifying:
        return VerifierOutcome.FAILED
    if EvidenceState.SUPPORTED in states:
        return VerifierOutcome.PASSED
    return VerifierOutcome.NONE


def _group(
    candidate: str,
    attempt_ids: tuple[str, ...],
    states: tuple[EvidenceState, ...],
    contexts: Mapping[str, str],
    corroboration: CorroborationReport | None,
    *,
    isolation: Isolation | None,
    accept_below_overlay: bool,
    trust_levels: tuple[TrustLevel, ...],
    declared_tests: tuple[DeclaredTestResult, ...],
    disqualifying: bool,
) -> CandidateGroup:
    no_change = candidate == EMPTY_SHA256
    verifier = _verifier(states, disqualifying=disqualifying)
    # G6: a pass gathered below overlay counts only when the config accepts it.
    discounted = (
        verifier is VerifierOutcome.PASSED
        and isolation not in (None, Isolation.OVERLAY)
        and not accept_below_overlay
    )
    first_context = contexts.get(attempt_ids[0], UNKNOWN_CONTEXT)
    # G3: the attempts' own drafts (none for a no-change candidate) ...
    drafts: list[Draft] = (
        []
        if no_change
        else [
            Draft(
                output_digest=candidate,
                context_digest=contexts.get(a, UNKNOWN_CONTEXT),
                tools=(),
            )
            for a in attempt_ids
        ]
    )
    # ... plus the reruns' changed outputs (reruns of one worker share its context).
    if corroboration is not None:
        reruns = branch_from_corroboration(
            corroboration, branch_id=candidate, context_digest=first_context
        )
        drafts += list(reruns.drafts)
    branch = Branch(
        branch_id=candidate,
        drafts=tuple(drafts),
        verifier=VerifierOutcome.NONE if discounted else verifier,
    )
    # G4: the only way to a class is the admission boundary.
    outcome = admit_to_commit(branch)
    if isinstance(outcome, Admission):
        evidence_class: EvidenceClass | None = outcome.evidence_class
        reasons: tuple[CommitReason, ...] = ()
        outcome_digest = outcome.admission_id
    else:
        evidence_class, reasons, outcome_digest = None, outcome.reason_codes, outcome.refusal_id
    return CandidateGroup(
        candidate_digest=candidate,
        no_change=no_change,
        attempt_ids=attempt_ids,
        evidence_states=states,
        verifier=verifier,
        reruns_launched=0 if corroboration is None else corroboration.runs_launched,
        reruns_reproduced=0
        if corroboration is None
        else len(corroboration.candidate_reproduced_by),
        rerun_consensus=corroboration is not None and corroboration.consensus,
        corroboration_report_id=None if corroboration is None else corroboration.report_id,
        evidence_class=evidence_class,
        refusal_reasons=reasons,
        admission_digest=outcome_digest,
        isolation=isolation,
        verifier_pass_discounted=discounted,
        trust_levels=trust_levels,
        declared_tests=declared_tests,
    )


@boundary
def build_run_admission(
    report: RunEvidenceReport,
    *,
    candidates: Mapping[str, str],
    contexts: Mapping[str, str],
    corroborations: Mapping[str, CorroborationReport],
) -> RunAdmission:
    """The admission section of ``report`` (rules G1-G9 in the module docstring).

    Args:
        report: the run's evidence report.
        candidates: attempt id -> candidate (patch) digest, for attempts with a candidate.
        contexts: attempt id -> digest of the worker's context (its command provenance).
        corroborations: candidate digest -> corroboration report of reruns.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
        ParameterValueError: a candidate names an attempt the report does not have
            (misuse; a ``ValueError``).
    """
    states = {a.attempt_id: a.evidence_state for a in report.attempts}
    unknown = sorted(set(candidates) - set(states))
    if unknown:
        raise ParameterValueError(
            "build_run_admission",
            "candidates",
            "attempt ids the report has",
            f"attempts the report does not have: {unknown}",
        )
    members: dict[str, list[str]] = {}
    # G1: group by candidate digest, in launch order.
    for attempt in report.attempts:
        candidate = candidates.get(attempt.attempt_id)
        if candidate is not None:
            members.setdefault(candidate, []).append(attempt.attempt_id)
    isolation = {a.attempt_id: a.weakest_isolation for a in report.attempts}
    # G7: who computed the verdicts behind the group's passes.
    passed = {
        a.attempt_id: {r.trust for r in a.check_runs if r.reason is None} for a in report.attempts
    }
    # G8: the per-test evidence of each group (SWE-bench's per-test report).
    tests = {
        a.attempt_id: next((r.tests for r in a.check_runs if r.tests), ()) for a in report.attempts
    }
    reasons = {a.attempt_id: [r.reason for r in a.check_runs] for a in report.attempts}
    policy = report.isolation_policy
    groups = tuple(
        _group(
            candidate,
            tuple(ids),
            tuple(states[a] for a in ids),
            contexts,
            corroborations.get(candidate),
            isolation=_weakest(isolation[a] for a in ids),
            accept_below_overlay=policy is not None and policy.accept_below_overlay,
            trust_levels=tuple(t for t in TrustLevel if any(t in passed[a] for a in ids)),
            declared_tests=next((tests[a] for a in ids if tests[a]), ()),
            disqualifying=_disqualified(r for a in ids for r in reasons[a]),
        )
        for candidate, ids in members.items()
    )
    # G5: a section, not a selection.
    return seal(
        RunAdmission,
        run_id=report.run_id,
        source_run_digest=report.source_run_digest,
        report_digest=report.digest,
        groups=groups,
        human_decision=PendingDecision(),
        authority=RunAuthority.none(),
    )


def _weakest(levels: Iterable[Isolation | None]) -> Isolation | None:
    known = [level for level in levels if level is not None]
    return weakest_isolation(known) if known else None
