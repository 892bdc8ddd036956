"""Commit admission: verified branches versus merely corroborated ones.

Pure: no I/O, no clock, no randomness, no environment.

Seed "verified vs corroborated-only": a branch is *verified* when an independent
verifier the drafters did not produce and cannot influence passed it; it is
*corroborated* when other drafts agree. Agreement among drafters that share a
context prefix and a tool surface is correlated: it carries about the information of
one draft, and unanimity under correlation is the highest-risk signal.

Rules enforced by `admit_to_commit` (decision boundary of the seed), in order:

- A1 a branch without drafts is refused (``no_drafts``): never a vacuous admission;
- A2 verifier passed -> `Admission` of class ``verified``, commit permitted;
- A3 verifier failed -> refused (``verifier_rejected``) whatever the agreement;
- A4 no verifier, unanimous (more than one draft, all byte-identical) and correlated
  drafters -> refused (``unanimous_correlated_drafts``): corroboration treated as
  verification is the boundary failure;
- A5 otherwise no verifier -> `Admission` of class ``corroborated_only``: staging
  only, commit not permitted, human or downstream confirmation required. Adding
  drafts never crosses into ``verified``: only the verifier outcome does.

Rule enforced by `verify_admission`:

- V1 a stored outcome verifies only when it is exactly what `admit_to_commit` derives
  from the branch (``outcome_mismatch`` otherwise): a resealed id is not a signature.

Callers who prefer exceptions write ``unwrap(admit_to_commit(branch))``: a
`CommitRefusal` is raised as `CommitBoundaryError`.

Decorrelation (`drafts_are_decorrelated`): no two drafters share both their context
digest and their tool set.

Identity payloads (SHA-256 of canonical JSON; ``explanation`` never enters):

- `Admission`: every field, ``admission_id`` blanked (self-sealed);
- `CommitRefusal`: ``branch_id``, ``branch_digest``, ``reason_codes``, ``refusal_id``
  blanked (self-sealed);
- ``branch_digest``: SHA-256 of the branch's canonical ``to_dict()``.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Sequence
from typing import Any

import attrs

from kernel.corroboration.consensus import CorroborationReport, RunStatus
from kernel.errors import CommitBoundaryError
from kernel.records.codec import (
    UNSEALED,
    Identity,
    Record,
    compute_id,
    document_digest,
    field_error,
    seal,
)
from kernel.records.identity import sha256_hex
from kernel.records.values import Digest, OptionalDigest, Refusal, boundary

__all__ = [
    "Admission",
    "AdmissionVerified",
    "Branch",
    "CommitBoundaryError",
    "CommitRefusal",
    "CommitReason",
    "Draft",
    "EvidenceClass",
    "VerifierOutcome",
    "admit_to_commit",
    "branch_from_corroboration",
    "drafts_are_decorrelated",
    "verify_admission",
]


class EvidenceClass(enum.StrEnum):
    """What a branch's evidence is."""

    VERIFIED = "verified"
    """Checked by a held-out verifier the drafters could not influence."""
    CORROBORATED_ONLY = "corroborated_only"
    """Agreement among (possibly correlated) drafts; staging only."""


class VerifierOutcome(enum.StrEnum):
    """The independent verifier's verdict on a branch."""

    PASSED = "passed"
    FAILED = "failed"
    NONE = "none"
    """No independent verifier ran."""


class CommitReason(enum.StrEnum):
    """Closed reason codes of `CommitRefusal` (one per rule)."""

    NO_DRAFTS = "no_drafts"
    """A1: the branch has no drafts."""
    VERIFIER_REJECTED = "verifier_rejected"
    """A3: the independent verifier failed the branch; rollback required."""
    UNANIMOUS_CORRELATED_DRAFTS = "unanimous_correlated_drafts"
    """A4: unanimous agreement among correlated drafters, no verifier."""
    OUTCOME_MISMATCH = "outcome_mismatch"
    """V1: a stored outcome is not what `admit_to_commit` derives from the branch."""


def _tools(_instance: object, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    if any(a >= b for a, b in itertools.pairwise(value)):
        raise field_error(attribute.name, "tool names must be unique and sorted")


@attrs.frozen(kw_only=True)
class Draft(Record):
    """One drafter's output and what it shared with others. Nested form: every field."""

    output_digest: Digest
    """SHA-256 of the draft's output bytes."""
    context_digest: Digest
    """SHA-256 of the drafter's context (shared prefix, retrieval path)."""
    tools: tuple[str, ...] = attrs.field(validator=_tools)
    """The drafter's tool surface, sorted and unique."""


@attrs.frozen(kw_only=True)
class Branch(Record):
    """A speculative branch up for commit. Nested form: every field."""

    branch_id: str
    """The orchestrator's name for the branch."""
    drafts: tuple[Draft, ...]
    """Every draft of the branch."""
    verifier: VerifierOutcome
    """Outcome of the independent, held-out verifier (``none`` when none ran)."""
    verifier_evidence_digest: OptionalDigest = None
    """Digest of the verifier's own evidence record, when there is one."""


@attrs.frozen(kw_only=True)
class Admission(Record):
    """A branch admitted, with its evidence class. Self-sealed ``admission_id``."""

    __identity__ = Identity(field="admission_id", seals=True)

    admission_id: Digest = UNSEALED
    """Self-sealed SHA-256 of the identity payload."""
    branch_id: str
    """The branch admitted."""
    branch_digest: Digest
    """SHA-256 of the branch's canonical JSON."""
    evidence_class: EvidenceClass
    """``verified`` or ``corroborated_only``."""
    commit_permitted: bool
    """True only for ``verified``."""
    staging_only: bool
    """True for ``corroborated_only``: reversible staging, confirmation required."""
    unanimous: bool
    """More than one draft and all byte-identical."""
    decorrelated: bool
    """No two drafters share both context and tools."""

    def __attrs_post_init__(self) -> None:
        verified = self.evidence_class is EvidenceClass.VERIFIED
        if self.commit_permitted != verified or self.staging_only == verified:
            raise field_error("commit_permitted", "only a verified branch may be committed")


@attrs.frozen(kw_only=True)
class CommitRefusal(Refusal):
    """A branch that must not be admitted. Self-sealed ``refusal_id``."""

    __identity__ = Identity(field="refusal_id", seals=True)
    __error__ = CommitBoundaryError

    refusal_id: Digest = UNSEALED
    """Self-sealed SHA-256 of the identity payload."""
    branch_id: str
    """The branch refused."""
    branch_digest: Digest
    """SHA-256 of the branch's canonical JSON."""
    reason_codes: tuple[CommitReason, ...]
    """The rule that refused it."""


@attrs.frozen(kw_only=True)
class AdmissionVerified(Record):
    """`verify_admission`'s success: the stored outcome is what the branch yields.

    Nested form: every field. No id of its own: it restates verified identities.
    """

    branch_id: str
    """The branch whose outcome was re-derived."""
    branch_digest: Digest
    """SHA-256 of the branch's canonical JSON."""
    outcome_id: Digest
    """The verified ``admission_id`` or ``refusal_id``."""
    admitted: bool
    """True when the verified outcome is an `Admission`, False for a `CommitRefusal`."""


@boundary
def drafts_are_decorrelated(branch: Branch) -> bool:
    """True when no two drafters share both their context digest and their tool set.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for draft in branch.drafts:
        key = (draft.context_digest, draft.tools)
        if key in seen:
            return False
        seen.add(key)
    return True


@boundary
def admit_to_commit(branch: Branch) -> Admission | CommitRefusal:
    """Apply the seed's decision boundary (rules A1-A5 in the module docstring).

    Raises:
        ParameterTypeError: ``branch`` is not a `Branch` (a programmer error).
    """
    branch_digest = document_digest(branch)
    unanimous = len(branch.drafts) > 1 and len({d.output_digest for d in branch.drafts}) == 1
    decorrelated = drafts_are_decorrelated(branch)

    def refuse(reason: CommitReason, why: str) -> CommitRefusal:
        return seal(
            CommitRefusal,
            branch_id=branch.branch_id,
            branch_digest=branch_digest,
            reason_codes=(reason,),
            explanation=f"branch {branch.branch_id}: {why}",
        )

    # A1: vacuous input is refused.
    if not branch.drafts:
        return refuse(CommitReason.NO_DRAFTS, "no drafts to admit")
    # A2: the only way to `verified` is an independent verifier's pass.
    if branch.verifier is VerifierOutcome.PASSED:
        evidence = EvidenceClass.VERIFIED
    # A3: a verifier rejection wins over any agreement.
    elif branch.verifier is VerifierOutcome.FAILED:
        return refuse(
            CommitReason.VERIFIER_REJECTED,
            "independent verifier rejected the branch; rollback required",
        )
    # A4: unanimity among correlated drafters is the highest-risk signal.
    elif unanimous and not decorrelated:
        return refuse(
            CommitReason.UNANIMOUS_CORRELATED_DRAFTS,
            "unanimous agreement among correlated drafters is not verification",
        )
    # A5: agreement without a verifier stages only.
    else:
        evidence = EvidenceClass.CORROBORATED_ONLY
    verified = evidence is EvidenceClass.VERIFIED
    return seal(
        Admission,
        branch_id=branch.branch_id,
        branch_digest=branch_digest,
        evidence_class=evidence,
        commit_permitted=verified,
        staging_only=not verified,
        unanimous=unanimous,
        decorrelated=decorrelated,
    )


@boundary
def verify_admission(
    outcome: Admission | CommitRefusal, branch: Branch
) -> AdmissionVerified | CommitRefusal:
    """Check that ``outcome`` is exactly what `admit_to_commit` gives for ``branch`` (V1).

    A self-sealed id is not a signature: anyone can edit an `Admission` document to
    ``verified`` and reseal it. This re-derives the outcome from the branch itself and
    compares identities (prose aside), so a stored admission can be trusted only
    together with the branch it claims to admit.

    Returns:
        `AdmissionVerified`, or a `CommitRefusal` with ``outcome_mismatch`` whose
        explanation names the expected and the found outcome.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    derived = admit_to_commit(branch)
    expected_id = derived.admission_id if isinstance(derived, Admission) else derived.refusal_id
    found_id = outcome.admission_id if isinstance(outcome, Admission) else outcome.refusal_id
    # The stored id proves nothing by itself: a record built or evolved with its old id
    # (``attrs.evolve(admission, evidence_class=VERIFIED)``) keeps it. Its fields, as
    # they are now, must give that id too.
    held_id = compute_id(outcome, cached=False)
    if held_id == found_id and type(derived) is type(outcome) and expected_id == found_id:
        return AdmissionVerified(
            branch_id=branch.branch_id,
            branch_digest=derived.branch_digest,
            outcome_id=found_id,
            admitted=isinstance(outcome, Admission),
        )
    if held_id != found_id:
        found = (
            f"the {type(outcome).__name__}'s fields give the id {held_id}, but it carries "
            f"{found_id} (altered after it was sealed)"
        )
    else:
        found = (
            f"expected the {type(derived).__name__} {expected_id} that admit_to_commit "
            f"derives from the branch, found the {type(outcome).__name__} {found_id}"
        )
    return seal(
        CommitRefusal,
        branch_id=branch.branch_id,
        branch_digest=derived.branch_digest,
        reason_codes=(CommitReason.OUTCOME_MISMATCH,),
        explanation=f"branch {branch.branch_id}: {found}",
    )


@boundary
def branch_from_corroboration(
    report: CorroborationReport,
    *,
    branch_id: str,
    context_digest: str | None = None,
    tools: Sequence[str] = (),
    verifier: VerifierOutcome = VerifierOutcome.NONE,
    verifier_evidence_digest: str | None = None,
) -> Branch:
    """The branch whose drafts are the changed outputs of N reruns of one command.

    Reruns of one command share its context and tools: they are correlated by
    construction, so every draft gets the same context digest (default: the digest
    of the report's command, capture mode and network flag) and the same tool set.
    The branch can therefore only be ``verified`` through ``verifier``.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    if context_digest is None:
        context_digest = sha256_hex(
            {
                "command": list(report.command),
                "capture_mode": report.capture_mode.value,
                "network": report.network,
            }
        )
    tool_set = tuple(sorted(set(tools)))
    drafts = tuple(
        Draft(output_digest=run.output_digest, context_digest=context_digest, tools=tool_set)
        for run in report.runs
        if run.status is RunStatus.OK and run.output_digest is not None
    )
    return Branch(
        branch_id=branch_id,
        drafts=drafts,
        verifier=verifier,
        verifier_evidence_digest=verifier_evidence_digest,
    )
