"""The commit gate: may this candidate be staged, or promoted onto this branch? (ADR-0006)

Pure: every fact about the world (the signature check, the branch tip's tree, the
ledger's verification) is passed in as data by `kernel.effects`. Nothing stored is
trusted: the admission is re-derived from the run, the report and the corroboration
reports (`derive_run_admission`), and the claimed one must reproduce it exactly.

`decide_promotion` reports every failed check, in this order (`GateReason`):

- P1 ``report_run_mismatch``: the report is not exactly the run's report;
- P2 ``admission_mismatch``: the claimed admission's id is not the re-derived one
  (an edited or resealed class, another report);
- P3 ``no_candidate``: the attempt produced no candidate (or is not in the run);
- P4 ``not_verified``: the attempt's candidate group is not ``verified`` by the
  held-out verifier; ``corroborated_only`` never is, whatever the reruns say. One
  exception, for a human to take: a group held back only by the static screen
  (``candidate-screen`` inconclusive with ``suspicious_code``, every other required
  check passed, the worker reported success) passes P4 when the accept decision's
  rationale names every finding id (``rule:path:line``) of every attempt of the group
  and the admission re-derived as if those screen checks had passed is ``verified``;
- P4b ``trust_not_met``: the promotion policy requires a `TrustLevel` (``oracle``)
  and no check of that level passed for the group;
- P5 ``no_accept_decision``: no ``accept`` decision that selects this attempt and
  verifies on exactly this report;
- P6 ``decision_unsigned`` / ``signature_invalid`` / ``signer_not_allowed``: the
  decision's SSH signature, which must be over this record's canonical bytes and
  checked for the principal ``decider.id``;
- P7 ``branch_not_baseline``: the branch tip's tree is not the git tree of the
  baseline the run was verified on (or the run names none);
- P8 ``ledger_broken``: the ledger does not verify.

Three codes the effects layer produces itself, after the gate's answer and before
anything moves (or as the compare-and-swap loses): ``branch_moved`` (the branch moved
before its update), ``candidate_unsafe`` (the candidate adds or changes
``.gitattributes``/``.gitmodules``, a submodule or an escaping symlink) and
``work_tree_blocked`` (the checked-out work tree cannot take the update).

`decide_staging` (the reversible area) applies P1-P3, S1 ``not_stageable`` (the
group was refused by admission: a verifier rejected it, or correlated drafters agree
unanimously), P7 against the staging base and P8.

Identities: ``permit_id`` of `PromotionPermit` and `StagingPermit` and ``refusal_id``
of `GateRefusal` self-seal over every field (``explanation`` aside).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final, Literal

import attrs

from kernel.corroboration.commit_admission import EvidenceClass
from kernel.corroboration.consensus import CorroborationReport
from kernel.corroboration.run_admission import CandidateGroup, RunAdmission, build_run_admission
from kernel.decide.decision import Decision, DecisionRefusal, HumanDecisionRecord, verify_decision
from kernel.decide.ledger import LedgerRefusal, LedgerVerified
from kernel.records.codec import UNSEALED, Identity, Record, compute_id, field_error, seal
from kernel.records.identity import canonical_json, sha256_bytes
from kernel.records.values import Digest, NonBlank, OptionalDigest, Refusal, boundary
from kernel.run.record import SCREEN_CHECK_ID, RunRecord, TrustLevel
from kernel.run.report import (
    EvidenceState,
    ReportAttempt,
    ReportVerified,
    RunEvidenceReport,
    check_evidence_report,
)
from kernel.run.verification import CheckReason, CheckStatus, WorkerStatus

__all__ = [
    "DECISION_SIGNATURE_NAMESPACE",
    "GateReason",
    "GateRefusal",
    "PromotionPermit",
    "SignatureCheck",
    "SignatureStatus",
    "StagingPermit",
    "candidates_of",
    "contexts_of",
    "decide_promotion",
    "decide_staging",
    "decision_message",
    "derive_run_admission",
]

DECISION_SIGNATURE_NAMESPACE: Final = "kernel-decision"
"""The ``ssh-keygen -Y`` namespace of decision signatures (ADR-0006 §2)."""


class SignatureStatus(enum.StrEnum):
    """What checking a decision's signature found."""

    VALID = "valid"
    """A valid signature by a key allowed for the decider's principal."""
    UNSIGNED = "unsigned"
    """No signature was presented."""
    INVALID = "invalid"
    """The signature does not verify for the message (edited record, other namespace)."""
    SIGNER_NOT_ALLOWED = "signer_not_allowed"
    """A valid signature, by a key not allowed for the decider's principal."""


@attrs.frozen(kw_only=True)
class SignatureCheck(Record):
    """The result of checking a decision record's signature (made by the effects layer)."""

    status: SignatureStatus
    """What the check found."""
    principal: str
    """The principal the signature was checked for (the decider id)."""
    message_digest: Digest
    """SHA-256 of the bytes checked (`decision_message` of the record)."""


class GateReason(enum.StrEnum):
    """Closed reason codes of `GateRefusal` (module docstring, in check order)."""

    REPORT_RUN_MISMATCH = "report_run_mismatch"
    """P1: the report is not exactly the run's report."""
    ADMISSION_MISMATCH = "admission_mismatch"
    """P2: the claimed admission does not re-derive."""
    NO_CANDIDATE = "no_candidate"
    """P3: the attempt produced no candidate."""
    NOT_STAGEABLE = "not_stageable"
    """S1: admission refused the attempt's group (staging)."""
    NOT_VERIFIED = "not_verified"
    """P4: the group is not verified by the held-out verifier (promotion)."""
    TRUST_NOT_MET = "trust_not_met"
    """P4b: no check of the trust level the promotion policy requires passed."""
    NO_ACCEPT_DECISION = "no_accept_decision"
    """P5: no accept decision on this attempt and exactly this report."""
    DECISION_UNSIGNED = "decision_unsigned"
    """P6: the decision carries no signature."""
    SIGNATURE_INVALID = "signature_invalid"
    """P6: the signature does not verify over this record."""
    SIGNER_NOT_ALLOWED = "signer_not_allowed"
    """P6: the signing key is not allowed for the decider."""
    BRANCH_NOT_BASELINE = "branch_not_baseline"
    """P7: the branch tip (or staging base) is not the run's baseline tree."""
    LEDGER_BROKEN = "ledger_broken"
    """P8: the ledger does not verify."""
    BRANCH_MOVED = "branch_moved"
    """Effects: the branch moved before its compare-and-swap update."""
    CANDIDATE_UNSAFE = "candidate_unsafe"
    """Effects: the candidate adds or changes ``.gitattributes`` or ``.gitmodules``, a
    submodule, or a symlink that leaves the tree."""
    WORK_TREE_BLOCKED = "work_tree_blocked"
    """Effects: the branch is checked out where it cannot be updated (uncommitted
    changes, untracked files in the way, another work tree)."""


def _sealed(permit: StagingPermit | PromotionPermit) -> None:
    """A permit's id is its content: one built with an id its fields do not yield
    (``attrs.evolve`` of a sealed permit keeps the old id) is refused, never acted on."""
    if permit.permit_id != UNSEALED and compute_id(permit) != permit.permit_id:
        raise field_error(
            "permit_id",
            f"expected the id its fields yield, {compute_id(permit)[:12]}, found "
            f"{permit.permit_id[:12]} (changed after it was sealed? seal it again)",
        )


@attrs.frozen(kw_only=True)
class StagingPermit(Record):
    """A candidate that may be committed to the reversible staging area."""

    __identity__ = Identity(field="permit_id", seals=True)

    permit_id: Digest = UNSEALED
    """Self-sealed id."""
    run_id: NonBlank
    """The run."""
    report_digest: Digest
    """The report the admission is bound to."""
    admission_id: Digest
    """The re-derived admission."""
    attempt_id: NonBlank
    """The attempt staged."""
    candidate_digest: Digest
    """SHA-256 of the candidate patch."""
    evidence_class: EvidenceClass
    """``verified`` or ``corroborated_only`` (the staged commit says which)."""
    baseline_git_tree: NonBlank
    """The baseline tree the candidate applies to."""

    def __attrs_post_init__(self) -> None:
        _sealed(self)


@attrs.frozen(kw_only=True)
class PromotionPermit(Record):
    """A candidate that may be promoted onto a branch whose tip holds the baseline."""

    __identity__ = Identity(field="permit_id", seals=True)

    permit_id: Digest = UNSEALED
    """Self-sealed id."""
    run_id: NonBlank
    """The run."""
    run_digest: Digest
    """The run record's digest."""
    report_digest: Digest
    """The report decided on."""
    admission_id: Digest
    """The re-derived admission."""
    attempt_id: NonBlank
    """The attempt promoted."""
    candidate_digest: Digest
    """SHA-256 of the candidate patch."""
    decision_record_id: Digest
    """The accept decision's record id."""
    decider_id: NonBlank
    """Who decided (and signed)."""
    baseline_git_tree: NonBlank
    """The branch tip's tree: the baseline the run was verified on."""
    ledger_head_id: Digest
    """The ledger head the gate saw intact."""

    def __attrs_post_init__(self) -> None:
        _sealed(self)


@attrs.frozen(kw_only=True)
class GateRefusal(Refusal):
    """A stage or promotion refused. Self-sealed ``refusal_id``."""

    __identity__ = Identity(field="refusal_id", seals=True)

    refusal_id: Digest = UNSEALED
    """Self-sealed id."""
    action: Literal["stage", "promote"]
    """What was asked."""
    run_id: str
    """The run named by the run record."""
    attempt_id: str
    """The attempt asked about."""
    report_digest: OptionalDigest
    """The report presented."""
    reason_codes: tuple[GateReason, ...]
    """Every failed check, in check order."""


def decision_message(record: HumanDecisionRecord) -> bytes:
    """The bytes a decision signature covers: the record's canonical JSON (ADR-0006 §2)."""
    return canonical_json(record.to_dict())


def candidates_of(run: RunRecord) -> dict[str, str]:
    """Attempt id -> candidate (patch) digest, from the run record's manifest summaries."""
    return {
        a.attempt_id: a.manifest.candidate_digest
        for a in run.attempts
        if a.manifest is not None and a.manifest.candidate_digest is not None
    }


def contexts_of(run: RunRecord) -> dict[str, str]:
    """Attempt id -> worker context digest (its ``worker:<id>`` provenance input)."""
    if run.provenance is None:
        return {}
    return {
        i.name.removeprefix("worker:"): i.digest
        for i in run.provenance.inputs
        if i.name.startswith("worker:")
    }


def derive_run_admission(
    run: RunRecord,
    report: RunEvidenceReport,
    corroborations: Mapping[str, CorroborationReport],
) -> RunAdmission | None:
    """The admission the run, its report and the corroborations imply (None when the
    run names candidates of attempts the report does not have: they do not match)."""
    try:
        return build_run_admission(
            report,
            candidates=candidates_of(run),
            contexts=contexts_of(run),
            corroborations=corroborations,
        )
    except ValueError:
        return None


def _group(admission: RunAdmission | None, attempt_id: str) -> CandidateGroup | None:
    if admission is None:
        return None
    return next((g for g in admission.groups if attempt_id in g.attempt_ids), None)


def _evidence(
    reasons: dict[GateReason, str],
    *,
    run: RunRecord,
    report: RunEvidenceReport,
    admission: RunAdmission,
    corroborations: Mapping[str, CorroborationReport],
    attempt_id: str,
) -> tuple[RunAdmission | None, CandidateGroup | None]:
    # P1: the report must be exactly the run's report.
    checked = check_evidence_report(report, run=run)
    if not isinstance(checked, ReportVerified):
        reasons[GateReason.REPORT_RUN_MISMATCH] = f"found: {checked.explanation}"
    # P2: the stored admission is re-derived, never trusted.
    derived = derive_run_admission(run, report, corroborations)
    if (
        derived is None
        or compute_id(admission) != admission.admission_id
        or derived.admission_id != admission.admission_id
    ):
        expected = (
            "none (the run and report do not match)"
            if derived is None
            else derived.admission_id[:12]
        )
        reasons[GateReason.ADMISSION_MISMATCH] = (
            f"expected admission {expected}, found {admission.admission_id[:12]}"
        )
    # P3: from the derived document only.
    group = _group(derived, attempt_id)
    if group is None or group.no_change:
        reasons[GateReason.NO_CANDIDATE] = (
            f"found no candidate of {attempt_id!r}"
            if group is None
            else f"found {attempt_id!r} changes nothing"
        )
        group = None
    return derived, group


def _screen_cleared(attempt: ReportAttempt, acknowledged: frozenset[str]) -> ReportAttempt | None:
    """``attempt`` as it would read had its suspicious screen check passed, when every
    finding is acknowledged and nothing else held it back (None otherwise)."""
    verification, manifest = attempt.verification, attempt.manifest
    screen = next((r for r in attempt.check_runs if r.check_id == SCREEN_CHECK_ID), None)
    if (
        verification is None
        or manifest is None
        or manifest.worker_status is not WorkerStatus.SUCCEEDED
        or screen is None
        or screen.reason is not CheckReason.SUSPICIOUS_CODE
        or not screen.findings
        or any(f.finding_id not in acknowledged for f in screen.findings)
        or any(
            c.required and c.status is not CheckStatus.PASSED and c.id != SCREEN_CHECK_ID
            for c in verification.checks
        )
    ):
        return None
    runs = tuple(attrs.evolve(r, reason=None) if r is screen else r for r in attempt.check_runs)
    return attrs.evolve(attempt, evidence_state=EvidenceState.SUPPORTED, check_runs=runs)


def _screen_acknowledged(
    run: RunRecord,
    report: RunEvidenceReport,
    corroborations: Mapping[str, CorroborationReport],
    group: CandidateGroup,
    decision: HumanDecisionRecord | None,
) -> bool:
    """P4's exception: the group is verified once the decision's acknowledged screen
    findings are set aside (module docstring)."""
    if decision is None or decision.decision is not Decision.ACCEPT:
        return False
    acknowledged = frozenset(decision.rationale.replace(",", " ").replace(";", " ").split())
    attempts = []
    for attempt in report.attempts:
        cleared = (
            _screen_cleared(attempt, acknowledged)
            if attempt.attempt_id in group.attempt_ids
            else attempt
        )
        if cleared is None:
            return False
        attempts.append(cleared)
    derived = derive_run_admission(
        run, attrs.evolve(report, attempts=tuple(attempts)), corroborations
    )
    cleared_group = _group(derived, group.attempt_ids[0])
    return cleared_group is not None and cleared_group.evidence_class is EvidenceClass.VERIFIED


def _base(reasons: dict[GateReason, str], run: RunRecord, tree: str | None) -> str | None:
    # P7: the branch tip (or staging base) holds exactly the baseline's tree.
    baseline = None if run.provenance is None else run.provenance.baseline_git_tree
    if baseline is None or tree != baseline:
        reasons[GateReason.BRANCH_NOT_BASELINE] = (
            f"expected the baseline tree {baseline or '(the run names none)'}, found {tree}"
        )
        return None
    return baseline


def _refuse(
    action: Literal["stage", "promote"],
    run: RunRecord,
    report: RunEvidenceReport,
    attempt_id: str,
    reasons: dict[GateReason, str],
) -> GateRefusal:
    codes = tuple(r for r in GateReason if r in reasons)
    said = [f"{code}: {reasons[code]}" for code in codes]
    return seal(
        GateRefusal,
        action=action,
        run_id=run.run_id,
        attempt_id=attempt_id,
        report_digest=report.digest,
        reason_codes=codes,
        explanation=f"{action} of {attempt_id} refused: " + "; ".join(said),
    )


@boundary
def decide_staging(
    *,
    run: RunRecord,
    report: RunEvidenceReport,
    admission: RunAdmission,
    corroborations: Mapping[str, CorroborationReport],
    attempt_id: str,
    base_tree: str | None,
    ledger: LedgerVerified | LedgerRefusal,
) -> StagingPermit | GateRefusal:
    """May ``attempt_id``'s candidate be committed to the staging area on ``base_tree``?

    Raises:
        ParameterTypeError: an argument is not of its annotated type (the message names
            the parameter, what was expected and what was found).
    """
    reasons: dict[GateReason, str] = {}
    derived, group = _evidence(
        reasons,
        run=run,
        report=report,
        admission=admission,
        corroborations=corroborations,
        attempt_id=attempt_id,
    )
    # S1: a group admission refused has no class: nothing to stage.
    if group is not None and group.evidence_class is None:
        reasons[GateReason.NOT_STAGEABLE] = (
            f"expected a group admission classed, found it refused "
            f"({', '.join(group.refusal_reasons) or 'no class'})"
        )
    baseline = _base(reasons, run, base_tree)
    # P8
    if isinstance(ledger, LedgerRefusal):
        reasons[GateReason.LEDGER_BROKEN] = f"expected an intact ledger, found {ledger.explanation}"
    if (
        reasons
        or derived is None
        or group is None
        or group.evidence_class is None
        or baseline is None
    ):
        return _refuse("stage", run, report, attempt_id, reasons)
    return seal(
        StagingPermit,
        run_id=run.run_id,
        report_digest=report.digest,
        admission_id=derived.admission_id,
        attempt_id=attempt_id,
        candidate_digest=group.candidate_digest,
        evidence_class=group.evidence_class,
        baseline_git_tree=baseline,
    )


def _decision(
    reasons: dict[GateReason, str],
    report: RunEvidenceReport,
    attempt_id: str,
    decision: HumanDecisionRecord | None,
    signature: SignatureCheck,
) -> None:
    # P5: an accept selecting this attempt, on exactly this report.
    if (
        decision is None
        or decision.decision is not Decision.ACCEPT
        or decision.selected_attempt_id != attempt_id
        or isinstance(verify_decision(decision, report), DecisionRefusal)
    ):
        reasons[GateReason.NO_ACCEPT_DECISION] = _no_accept(decision, attempt_id, report)
    # P6: signed over this record's bytes, for the decider's principal.
    if decision is None or signature.status is SignatureStatus.UNSIGNED:
        reasons[GateReason.DECISION_UNSIGNED] = "expected a signed decision, found " + (
            "no decision record" if decision is None else "no signature"
        )
    elif (
        signature.status is SignatureStatus.INVALID
        or signature.principal != decision.decider.id
        or signature.message_digest != sha256_bytes(decision_message(decision))
    ):
        reasons[GateReason.SIGNATURE_INVALID] = (
            f"expected a signature over this record for {decision.decider.id!r}, found one "
            f"that is {signature.status} for {signature.principal!r}"
        )
    elif signature.status is SignatureStatus.SIGNER_NOT_ALLOWED:
        reasons[GateReason.SIGNER_NOT_ALLOWED] = (
            f"expected a key allowed for {decision.decider.id!r}, found a valid signature "
            "by another key"
        )


def _no_accept(
    decision: HumanDecisionRecord | None, attempt_id: str, report: RunEvidenceReport
) -> str:
    expected = f"expected an accept selecting {attempt_id!r} on report {report.digest[:12]}"
    if decision is None:
        return f"{expected}, found no decision record"
    return (
        f"{expected}, found {decision.decision} selecting "
        f"{decision.selected_attempt_id!r} on report {decision.evidence_report.digest[:12]}"
    )


@boundary
def decide_promotion(
    *,
    run: RunRecord,
    report: RunEvidenceReport,
    admission: RunAdmission,
    corroborations: Mapping[str, CorroborationReport],
    attempt_id: str,
    decision: HumanDecisionRecord | None,
    signature: SignatureCheck,
    branch_tree: str | None,
    ledger: LedgerVerified | LedgerRefusal,
    require_trust: TrustLevel | None = None,
) -> PromotionPermit | GateRefusal:
    """May ``attempt_id``'s candidate be promoted onto a branch whose tip holds
    ``branch_tree``? (checks P1-P8 of the module docstring, every failure reported).

    Args:
        signature: the effects layer's check of the decision's signature.
        branch_tree: the git tree id of the branch tip (None when there is no tip).
        ledger: the outcome of verifying the ledger the promotion will be recorded in.
        require_trust: the promotion policy's required trust level (P4b), if any.

    Raises:
        ParameterTypeError: an argument is not of its annotated type (the message names
            the parameter, what was expected and what was found).
    """
    reasons: dict[GateReason, str] = {}
    derived, group = _evidence(
        reasons,
        run=run,
        report=report,
        admission=admission,
        corroborations=corroborations,
        attempt_id=attempt_id,
    )
    # P4: only the held-out verifier's pass promotes (or a human's acknowledgement of
    # exactly the screen findings that held it back).
    if (
        group is not None
        and group.evidence_class is not EvidenceClass.VERIFIED
        and not _screen_acknowledged(run, report, corroborations, group, decision)
    ):
        reasons[GateReason.NOT_VERIFIED] = (
            f"expected a group verified by the held-out verifier, found {group.evidence_class}"
        )
    # P4b: the verdict kind the promotion policy requires.
    if group is not None and require_trust is not None and require_trust not in group.trust_levels:
        reasons[GateReason.TRUST_NOT_MET] = (
            f"expected a passed check of trust {require_trust}, found "
            f"{', '.join(group.trust_levels) or 'none'}"
        )
    _decision(reasons, report, attempt_id, decision, signature)
    baseline = _base(reasons, run, branch_tree)
    # P8
    if isinstance(ledger, LedgerRefusal):
        reasons[GateReason.LEDGER_BROKEN] = f"expected an intact ledger, found {ledger.explanation}"
    if (
        reasons
        or derived is None
        or group is None
        or decision is None
        or baseline is None
        or not isinstance(ledger, LedgerVerified)
    ):
        return _refuse("promote", run, report, attempt_id, reasons)
    return seal(
        PromotionPermit,
        run_id=run.run_id,
        run_digest=run.digest,
        report_digest=report.digest,
        admission_id=derived.admission_id,
        attempt_id=attempt_id,
        candidate_digest=group.candidate_digest,
        decision_record_id=decision.record_id,
        decider_id=decision.decider.id,
        baseline_git_tree=baseline,
        ledger_head_id=ledger.head.entry_id,
    )
