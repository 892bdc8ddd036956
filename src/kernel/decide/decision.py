"""`HumanDecisionRecord`: a human's decision on exactly one evidence report.

A decision record documents that a decision was made; it executes nothing (its
authority block is all false). It names the report it decides on by kind, schema
version, run id and the canonical digest of the *whole* report document, never by a
file name, so a swapped, edited or regenerated report fails `verify_decision`.

`record_decision` (pure; ``decided_at`` is passed in, the CLI's clock lives in
effects) refuses, with `DecisionReason` codes in check order:

- a report that fails `kernel.run.report.check_evidence_report` (``report_inconsistent``);
- the report's own vocabulary (``accept_candidate``...) as a decision
  (``report_vocabulary``), any other value outside accept|reject|escalate
  (``unknown_decision``);
- a blank decision id, rationale or decider id; one that is not valid Unicode (a lone
  surrogate, as undecodable command-line bytes give: ``unencodable_text``); an unknown
  decider type;
- ``decided_at`` that is not RFC 3339 UTC ``YYYY-MM-DDTHH:MM:SS[.fff]Z`` (ASCII digits);
- a selected attempt the report does not contain (``unknown_attempt``); an ``accept``
  without a selected attempt, or selecting an attempt with no verification.

`verify_decision` re-applies the checks that involve the report (the selection rules
included): a record's self-sealed id is not a signature, so a resealed edit that
`record_decision` would have refused must not verify either.

Identity: ``record_id`` self-seals over every field, rationale included: the rationale
is the decider's own statement and part of what was decided, so editing it must change
the id (this is the one record where free text enters an identity, on purpose).
"""

from __future__ import annotations

import enum
from typing import Final, Literal

import attrs

from kernel.records.codec import UNSEALED, Identity, Record, compute_id, seal, short_repr
from kernel.records.identity import is_canonical_str
from kernel.records.values import (
    Digest,
    NonBlank,
    OptionalDigest,
    Refusal,
    Timestamp,
    boundary,
    rfc3339_utc_problem,
)
from kernel.run.record import AttemptState
from kernel.run.report import (
    REPORT_KIND,
    ReportVerified,
    RunEvidenceReport,
    check_evidence_report,
)
from kernel.run.verification import Recommendation

__all__ = [
    "DECISION_KIND",
    "DECISION_SCHEMA_VERSION",
    "Decider",
    "DeciderType",
    "Decision",
    "DecisionAuthority",
    "DecisionReason",
    "DecisionRefusal",
    "DecisionVerified",
    "EvidenceReportRef",
    "HumanDecisionRecord",
    "record_decision",
    "rfc3339_utc_problem",
    "upgrade_decision_document",
    "verify_decision",
]

DECISION_KIND: Final = "kernel-human-decision-record"
DECISION_SCHEMA_VERSION: Final = "1"


class Decision(enum.StrEnum):
    """A human's decision: deliberately not the report's recommendation vocabulary."""

    ACCEPT = "accept"
    REJECT = "reject"
    ESCALATE = "escalate"


class DeciderType(enum.StrEnum):
    """Who decided."""

    HUMAN = "human"
    GOVERNANCE_BODY = "governance_body"


@attrs.frozen(kw_only=True)
class Decider(Record):
    """The decider's identity."""

    id: NonBlank
    """Decider id (e-mail, handle, body name)."""
    type: DeciderType
    """Human or governance body."""
    display_name: NonBlank | None = None
    """How the decider is shown to people (IDKMesh's ``display_name``), or None."""


@attrs.frozen(kw_only=True)
class EvidenceReportRef(Record):
    """Which report was decided on: by content, never by file name."""

    kind: NonBlank
    """The report's kind."""
    schema_version: NonBlank
    """The report's schema version."""
    run_id: NonBlank
    """The report's run id."""
    digest: Digest
    """SHA-256 of the canonical JSON of the whole report document."""


@attrs.frozen(kw_only=True)
class DecisionAuthority(Record):
    """What a decision record may do: nothing. Every field is false."""

    canonical_state_write: Literal[False]
    """May write canonical project state."""
    git_push: Literal[False]
    """May push."""
    merge: Literal[False]
    """May merge."""


@attrs.frozen(kw_only=True)
class HumanDecisionRecord(Record):
    """A recorded human decision. ``record_id`` self-seals over every field."""

    __identity__ = Identity(field="record_id", seals=True, exclude=frozenset())

    kind: Literal["kernel-human-decision-record"] = DECISION_KIND
    """Document kind."""
    schema_version: Literal["1"] = DECISION_SCHEMA_VERSION
    """Document schema version."""
    record_id: Digest = UNSEALED
    """Self-sealed id over every field."""
    decision_id: NonBlank
    """The decider's id for this decision."""
    decision: Decision
    """accept, reject or escalate."""
    rationale: NonBlank
    """Why (the decider's words)."""
    decider: Decider
    """Who decided."""
    decided_at: Timestamp
    """When, RFC 3339 UTC (passed in by the caller)."""
    selected_attempt_id: NonBlank | None
    """The attempt decided on, or None."""
    evidence_report: EvidenceReportRef
    """The report decided on."""
    authority: DecisionAuthority
    """All false."""


class DecisionReason(enum.StrEnum):
    """Why a decision is not recorded or does not verify (check order)."""

    REPORT_INCONSISTENT = "report_inconsistent"
    """The report fails `check_evidence_report` (e.g. a relabelled attempt)."""
    REPORT_KIND = "report_kind_mismatch"
    """The decision names another report kind or schema version."""
    REPORT_RUN_ID = "report_run_id_mismatch"
    """The decision names another run."""
    REPORT_DIGEST = "report_digest_mismatch"
    """The report's canonical digest is not the one decided on."""
    RECORD_ID = "record_id_mismatch"
    """The decision record's id does not reproduce (the record was edited)."""
    BLANK_DECISION_ID = "blank_decision_id"
    """The decision id is blank."""
    REPORT_VOCABULARY = "report_vocabulary"
    """The decision echoes a verifier recommendation instead of accept|reject|escalate."""
    UNKNOWN_DECISION = "unknown_decision"
    """The decision is not accept, reject or escalate."""
    BLANK_RATIONALE = "blank_rationale"
    """The rationale is blank."""
    BLANK_DECIDER = "blank_decider"
    """The decider id, or a display name that is given, is blank."""
    UNENCODABLE_TEXT = "unencodable_text"
    """The decision id, rationale or decider id is not valid Unicode (a lone surrogate):
    it has no canonical JSON form, so no record could be sealed over it."""
    UNKNOWN_DECIDER_TYPE = "unknown_decider_type"
    """The decider type is not human or governance_body."""
    BAD_TIMESTAMP = "bad_decided_at"
    """``decided_at`` is not RFC 3339 UTC."""
    UNKNOWN_ATTEMPT = "unknown_attempt"
    """The selected attempt is not in the report."""
    ACCEPT_WITHOUT_SELECTION = "accept_without_selection"
    """``accept`` names no attempt: there is nothing to accept."""
    SELECTED_WITHOUT_EVIDENCE = "selected_attempt_without_verification"
    """``accept`` names an attempt that has no independent verification."""


@attrs.frozen(kw_only=True)
class DecisionRefusal(Refusal):
    """A decision not recorded, or one that does not verify. ``refusal_id`` self-seals
    over every field but ``explanation``."""

    __identity__ = Identity(field="refusal_id", seals=True)

    refusal_id: Digest = UNSEALED
    """Self-sealed id."""
    report_digest: OptionalDigest
    """The canonical digest of the report presented."""
    decision_id: str
    """The decision id presented (may be blank: that is one of the refusals)."""
    reason_codes: tuple[DecisionReason, ...]
    """Failed checks in check order."""


@attrs.frozen(kw_only=True)
class DecisionVerified(Record):
    """A decision record that verifies against the report presented."""

    record_id: Digest = UNSEALED
    """The decision record's id."""
    report_digest: Digest
    """The report's canonical digest (equal to the one decided on)."""


_Problems = list[tuple[DecisionReason, str]]
"""Failed checks, each with what was expected and what was found."""


def _refuse(report_digest: str | None, decision_id: str, problems: _Problems) -> DecisionRefusal:
    said = dict(problems)
    codes = tuple(r for r in DecisionReason if r in said)
    return seal(
        DecisionRefusal,
        report_digest=report_digest,
        decision_id=decision_id,
        reason_codes=codes,
        explanation="decision refused: " + "; ".join(f"{said[c]} [{c}]" for c in codes),
    )


def _names(values: list[str], limit: int = 5) -> str:
    """A bounded list of ids for a message."""
    shown = ", ".join(short_repr(value) for value in values[:limit])
    more = f", ... ({len(values)} in all)" if len(values) > limit else ""
    return (shown + more) or "none"


def _text_found(value: object) -> str:
    """What a text field holds, for a message (blank text named as such)."""
    if type(value) is str and not value.strip():
        return f"blank text {short_repr(value)}"
    return short_repr(value)


def _blank(value: object) -> bool:
    return type(value) is not str or not value.strip()


def _unencodable(value: object) -> bool:
    return type(value) is str and not is_canonical_str(value)


def _selection_problems(
    report: RunEvidenceReport, chosen: Decision | None, selected_attempt_id: object
) -> _Problems:
    """The checks that tie a decision's selection to the report (record and verify)."""
    problems: _Problems = []
    attempts = {a.attempt_id: a for a in report.attempts}
    selected = attempts.get(selected_attempt_id) if type(selected_attempt_id) is str else None
    if selected_attempt_id is not None and (selected is None or _blank(selected_attempt_id)):
        problems.append(
            (
                DecisionReason.UNKNOWN_ATTEMPT,
                f"selected_attempt_id: {_text_found(selected_attempt_id)} names no attempt"
                f" of the report (attempts: {_names(list(attempts))})",
            )
        )
    if chosen is Decision.ACCEPT and selected_attempt_id is None:
        problems.append(
            (
                DecisionReason.ACCEPT_WITHOUT_SELECTION,
                "selected_attempt_id: expected the attempt an accept accepts, got None",
            )
        )
    if (
        chosen is Decision.ACCEPT
        and selected is not None
        and (selected.state is not AttemptState.VERIFIED or selected.verification is None)
    ):
        verification = "none" if selected.verification is None else "present"
        problems.append(
            (
                DecisionReason.SELECTED_WITHOUT_EVIDENCE,
                f"selected_attempt_id: expected a verified attempt with a verification,"
                f" got {short_repr(selected.attempt_id)} in state {selected.state}"
                f" (verification: {verification})",
            )
        )
    return problems


def _report_problem(report: RunEvidenceReport) -> tuple[DecisionReason, str] | None:
    checked = check_evidence_report(report)
    if isinstance(checked, ReportVerified):
        return None
    return (
        DecisionReason.REPORT_INCONSISTENT,
        f"report: expected a report that passes check_evidence_report, got run"
        f" {short_repr(report.run_id)} refused ({checked.explanation})",
    )


def _field_problems(
    decision_id: str,
    decision: str,
    rationale: str,
    decider_id: str,
    decider_display_name: str | None,
) -> tuple[Decision | None, _Problems]:
    """The decision (None: not one of the three) and what is wrong with the texts, in
    the order the refusal lists them."""
    problems: _Problems = []
    if _blank(decision_id):
        problems.append(
            (
                DecisionReason.BLANK_DECISION_ID,
                f"decision_id: expected non-blank text, got {_text_found(decision_id)}",
            )
        )
    chosen = Decision(decision) if decision in Decision.__members__.values() else None
    if chosen is None:
        expected = f"decision: expected accept, reject or escalate, got {short_repr(decision)}"
        problems.append(
            (DecisionReason.REPORT_VOCABULARY, f"{expected} (a verifier recommendation)")
            if decision in Recommendation.__members__.values()
            else (DecisionReason.UNKNOWN_DECISION, expected)
        )
    if _blank(rationale):
        problems.append(
            (
                DecisionReason.BLANK_RATIONALE,
                f"rationale: expected non-blank text, got {_text_found(rationale)}",
            )
        )
    blank_decider = [
        f"{name}: expected non-blank text, got {_text_found(value)}"
        for name, value in (
            ("decider_id", decider_id),
            ("decider_display_name", decider_display_name),
        )
        if (value is not None or name == "decider_id") and _blank(value)
    ]
    if blank_decider:
        problems.append((DecisionReason.BLANK_DECIDER, "; ".join(blank_decider)))
    texts = {
        "decision_id": decision_id,
        "rationale": rationale,
        "decider_id": decider_id,
        "decider_display_name": decider_display_name or "",
    }
    unencodable = [name for name, text in texts.items() if _unencodable(text)]
    if unencodable:
        problems.append(
            (
                DecisionReason.UNENCODABLE_TEXT,
                f"{', '.join(unencodable)}: expected valid Unicode text, got a string"
                " holding a lone surrogate",
            )
        )
    return chosen, problems


@boundary
def record_decision(
    report: RunEvidenceReport,
    *,
    decision_id: str,
    decision: str,
    rationale: str,
    decider_id: str,
    decided_at: str,
    decider_type: str = DeciderType.HUMAN,
    selected_attempt_id: str | None = None,
    decider_display_name: str | None = None,
) -> HumanDecisionRecord | DecisionRefusal:
    """Record a human decision on ``report``; refuse per the module rules.

    Args:
        report: the evidence report decided on; must pass `check_evidence_report`.
        decision: ``accept``, ``reject`` or ``escalate`` (strings, so that the report's
            own vocabulary can be refused with its own code).
        decided_at: RFC 3339 UTC timestamp, supplied by the caller's clock.

    Returns:
        The sealed record, or a `DecisionRefusal` listing every failed check.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    problems: _Problems = []
    report_digest = report.digest
    if (inconsistent := _report_problem(report)) is not None:
        problems.append(inconsistent)
    chosen, named = _field_problems(
        decision_id, decision, rationale, decider_id, decider_display_name
    )
    problems += named
    kind = DeciderType(decider_type) if decider_type in DeciderType.__members__.values() else None
    if kind is None:
        problems.append(
            (
                DecisionReason.UNKNOWN_DECIDER_TYPE,
                f"decider_type: expected human or governance_body, got {short_repr(decider_type)}",
            )
        )
    if (timestamp_problem := rfc3339_utc_problem(decided_at)) is not None:
        problems.append((DecisionReason.BAD_TIMESTAMP, f"decided_at: {timestamp_problem}"))
    problems += _selection_problems(report, chosen, selected_attempt_id)
    if problems or chosen is None or kind is None:
        # The refusal repeats the decision id only when it can enter an identity.
        shown = decision_id if is_canonical_str(decision_id) else ""
        return _refuse(report_digest, shown, problems)
    return seal(
        HumanDecisionRecord,
        decision_id=decision_id,
        decision=chosen,
        rationale=rationale,
        decider=Decider(id=decider_id, type=kind, display_name=decider_display_name),
        decided_at=decided_at,
        selected_attempt_id=selected_attempt_id,
        evidence_report=EvidenceReportRef(
            kind=report.kind,
            schema_version=report.schema_version,
            run_id=report.run_id,
            digest=report_digest,
        ),
        authority=DecisionAuthority(canonical_state_write=False, git_push=False, merge=False),
    )


def upgrade_decision_document(document: object) -> object:
    """A kernel decision record written before ``decider.display_name`` existed reads
    with ``display_name: null`` (documents stay readable; nothing else is filled in)."""
    if (
        isinstance(document, dict)
        and document.get("kind") == DECISION_KIND
        and isinstance(document.get("decider"), dict)
        and "display_name" not in document["decider"]
    ):
        return {**document, "decider": {**document["decider"], "display_name": None}}
    return document


@boundary
def verify_decision(
    record: HumanDecisionRecord, report: RunEvidenceReport
) -> DecisionVerified | DecisionRefusal:
    """Check that ``record`` decides on exactly ``report``; fail closed otherwise.

    Checks, in order: the report is self-consistent; the decision names this report's
    kind and schema version, run id and canonical digest; the record's own id
    reproduces; the selected attempt (if any) is in the report; an ``accept`` names an
    attempt, and one with independent verification (as `record_decision` requires).

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    problems: _Problems = []
    report_digest = report.digest
    ref = record.evidence_report
    if (inconsistent := _report_problem(report)) is not None:
        problems.append(inconsistent)
    if ref.kind != REPORT_KIND or ref.schema_version != report.schema_version:
        problems.append(
            (
                DecisionReason.REPORT_KIND,
                f"evidence_report: expected kind {REPORT_KIND!r} schema version"
                f" {short_repr(report.schema_version)}, got kind {short_repr(ref.kind)}"
                f" schema version {short_repr(ref.schema_version)}",
            )
        )
    if ref.run_id != report.run_id:
        problems.append(
            (
                DecisionReason.REPORT_RUN_ID,
                f"evidence_report.run_id: expected the report's run {short_repr(report.run_id)},"
                f" got {short_repr(ref.run_id)}",
            )
        )
    if ref.digest != report_digest:
        problems.append(
            (
                DecisionReason.REPORT_DIGEST,
                f"evidence_report.digest: expected the presented report's digest"
                f" {short_repr(report_digest)}, got {short_repr(ref.digest)}",
            )
        )
    if (recomputed := compute_id(record)) != record.record_id:
        problems.append(
            (
                DecisionReason.RECORD_ID,
                f"record_id: expected {short_repr(recomputed)} (recomputed over the record),"
                f" got {short_repr(record.record_id)}",
            )
        )
    problems += _selection_problems(report, record.decision, record.selected_attempt_id)
    if problems:
        return _refuse(report_digest, record.decision_id, problems)
    return DecisionVerified(record_id=record.record_id, report_digest=report_digest)
