"""Tests for kernel.decide.decision: recording, every refusal, and verification."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.decide.decision import (
    DecisionReason,
    DecisionRefusal,
    DecisionVerified,
    HumanDecisionRecord,
    record_decision,
    upgrade_decision_document,
    verify_decision,
)
from kernel.effects.orchestrate import run_config
from kernel.errors import RecordError
from kernel.records.codec import identity_payload
from kernel.run.report import EvidenceState, RunEvidenceReport, build_evidence_report
from kernel.strategies import decisions

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "orchestration"


def _report(name: str = "two-attempt-good-vs-bad") -> RunEvidenceReport:
    report = build_evidence_report(run_config(FIXTURES / f"{name}.json"))
    assert isinstance(report, RunEvidenceReport)
    return report


REPORT = _report()
GOOD: dict[str, Any] = {
    "decision_id": "orchestration/demo.decision.001",
    "decision": "accept",
    "rationale": "attempt-001 passed every required check",
    "decider_id": "reviewer-1",
    "decided_at": "2026-01-01T00:00:00Z",
    "selected_attempt_id": "attempt-001",
}


def _record(**changes: Any) -> HumanDecisionRecord | DecisionRefusal:
    return record_decision(REPORT, **{**GOOD, **changes})


def test_record_binds_to_the_whole_report_digest() -> None:
    """The record names the report by kind, version, run id and canonical digest."""
    record = _record()
    assert isinstance(record, HumanDecisionRecord)
    text = json.dumps(REPORT.to_dict(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert record.evidence_report.digest == hashlib.sha256(text.encode()).hexdigest()
    assert record.evidence_report.kind == "kernel-run-evidence-report"
    assert record.evidence_report.run_id == REPORT.run_id
    assert not any(record.authority.to_dict().values())
    assert verify_decision(record, REPORT) == DecisionVerified(
        record_id=record.record_id, report_digest=REPORT.digest
    )


def test_record_id_recomputes_with_the_stdlib_and_covers_the_rationale() -> None:
    """record_id is SHA-256 over every field with record_id blanked (rationale included)."""
    record = _record()
    assert isinstance(record, HumanDecisionRecord)
    payload = record.to_dict()
    payload["record_id"] = ""
    assert identity_payload(record) == payload
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert record.record_id == hashlib.sha256(text.encode()).hexdigest()
    document = record.to_dict()
    document["rationale"] = "edited afterwards"
    with pytest.raises(RecordError) as info:
        HumanDecisionRecord.from_dict(document)
    assert info.value.path == "record_id"


def _forged_report() -> RunEvidenceReport:
    forged = attrs.evolve(REPORT.attempts[1], evidence_state=EvidenceState.SUPPORTED)
    return attrs.evolve(
        REPORT,
        attempts=(REPORT.attempts[0], forged),
        summary=attrs.evolve(REPORT.summary, supported=2, rejected=0),
    )


REFUSALS: dict[str, tuple[dict[str, Any], tuple[DecisionReason, ...]]] = {
    "blank_decision_id": ({"decision_id": "  "}, (DecisionReason.BLANK_DECISION_ID,)),
    "report_vocabulary": ({"decision": "accept_candidate"}, (DecisionReason.REPORT_VOCABULARY,)),
    "report-vocabulary-escalate-like": (
        {"decision": "insufficient_evidence"},
        (DecisionReason.REPORT_VOCABULARY,),
    ),
    "unknown_decision": ({"decision": "merge"}, (DecisionReason.UNKNOWN_DECISION,)),
    "blank_rationale": ({"rationale": "\t\n"}, (DecisionReason.BLANK_RATIONALE,)),
    "blank_decider": ({"decider_id": ""}, (DecisionReason.BLANK_DECIDER,)),
    "unknown_decider_type": ({"decider_type": "bot"}, (DecisionReason.UNKNOWN_DECIDER_TYPE,)),
    "bad-decided-at-offset": (
        {"decided_at": "2026-01-01T00:00:00+02:00"},
        (DecisionReason.BAD_TIMESTAMP,),
    ),
    "bad-decided-at-date": (
        {"decided_at": "2026-02-30T00:00:00Z"},
        (DecisionReason.BAD_TIMESTAMP,),
    ),
    "unknown_attempt": ({"selected_attempt_id": "attempt-999"}, (DecisionReason.UNKNOWN_ATTEMPT,)),
    "accept_without_selection": (
        {"selected_attempt_id": None},
        (DecisionReason.ACCEPT_WITHOUT_SELECTION,),
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_record_refusals(name: str) -> None:
    """Each bad argument is refused with exactly its own reason code."""
    changes, codes = REFUSALS[name]
    outcome = _record(**changes)
    assert isinstance(outcome, DecisionRefusal)
    assert outcome.reason_codes == codes
    assert DecisionRefusal.from_dict(outcome.to_dict()) == outcome


def test_forged_report_is_refused() -> None:
    """A relabelled report with adjusted counts cannot be decided on."""
    outcome = record_decision(_forged_report(), **{**GOOD, "selected_attempt_id": "attempt-002"})
    assert isinstance(outcome, DecisionRefusal)
    assert outcome.reason_codes == (DecisionReason.REPORT_INCONSISTENT,)


def test_accepting_an_attempt_without_verification_is_refused() -> None:
    """accept must name an attempt that has independent verification."""
    report = _report("two-attempt-worker-failure")
    outcome = record_decision(report, **{**GOOD, "selected_attempt_id": "attempt-002"})
    assert isinstance(outcome, DecisionRefusal)
    assert outcome.reason_codes == (DecisionReason.SELECTED_WITHOUT_EVIDENCE,)
    reject = record_decision(
        report, **{**GOOD, "decision": "reject", "selected_attempt_id": "attempt-002"}
    )
    assert isinstance(reject, HumanDecisionRecord)


def test_escalate_without_selection_is_recorded() -> None:
    """escalate and reject may name no attempt."""
    assert isinstance(_record(decision="escalate", selected_attempt_id=None), HumanDecisionRecord)


VERIFY_REFUSALS: dict[str, tuple[Callable[[], RunEvidenceReport], None]] = {
    "swapped": (lambda: _report("nine-attempt-all-states"), None),
    "regenerated-differently": (lambda: _report("two-attempt-worker-failure"), None),
    "edited": (lambda: attrs.evolve(REPORT, orchestrator="someone/else"), None),
}


@pytest.mark.parametrize("name", sorted(VERIFY_REFUSALS))
def test_verify_fails_closed_on_another_report(name: str) -> None:
    """A swapped, regenerated or edited report fails verification."""
    record = _record()
    assert isinstance(record, HumanDecisionRecord)
    other, _ = VERIFY_REFUSALS[name]
    outcome = verify_decision(record, other())
    assert isinstance(outcome, DecisionRefusal)
    assert DecisionReason.REPORT_DIGEST in outcome.reason_codes


def test_verify_refuses_forged_report_and_edited_record() -> None:
    """verify re-checks the report and the record's own id."""
    record = _record()
    assert isinstance(record, HumanDecisionRecord)
    forged = verify_decision(record, _forged_report())
    assert isinstance(forged, DecisionRefusal)
    assert forged.reason_codes == (DecisionReason.REPORT_INCONSISTENT, DecisionReason.REPORT_DIGEST)
    edited = attrs.evolve(record, rationale="something else")
    outcome = verify_decision(edited, REPORT)
    assert isinstance(outcome, DecisionRefusal)
    assert outcome.reason_codes == (DecisionReason.RECORD_ID,)


@settings(max_examples=40, deadline=None)
@given(decisions())
def test_property_round_trip(record: HumanDecisionRecord) -> None:
    """from_dict(to_dict(r)) == r for generated decisions."""
    assert HumanDecisionRecord.from_dict(record.to_dict()) == record


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    items = value.items() if isinstance(value, dict) else enumerate(value)
    out = []
    for key, item in items:
        if isinstance(item, dict | list) and item:
            out += _paths(item, (*prefix, key))
        else:
            out.append((*prefix, key))
    return out


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_property_any_edit_of_a_report_fails_verify(data: st.DataObject) -> None:
    """Any single-field edit of the saved report: unparseable, or verify refuses."""
    record = _record()
    assert isinstance(record, HumanDecisionRecord)
    document = REPORT.to_dict()
    path = data.draw(st.sampled_from(_paths(document)))
    target = document
    for key in path[:-1]:
        target = target[key]
    old = target[path[-1]]
    target[path[-1]] = data.draw(
        st.sampled_from(["x", 0, 1, True, False, None, "0" * 64]).filter(
            lambda new: new != old or type(new) is not type(old)
        )
    )
    try:
        edited = RunEvidenceReport.from_dict(document)
    except RecordError:
        return
    assert isinstance(verify_decision(record, edited), DecisionRefusal)


def _resealed_record(record: HumanDecisionRecord, **changes: Any) -> HumanDecisionRecord:
    """``record`` edited and resealed with the stdlib (what any forger can do)."""
    document = record.to_dict() | changes | {"record_id": ""}
    text = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    document["record_id"] = hashlib.sha256(text.encode()).hexdigest()
    return HumanDecisionRecord.from_dict(document)


def test_verify_refuses_a_resealed_accept_of_an_unverified_attempt() -> None:
    """Regression: record_decision refuses accepting an attempt without verification (or
    accepting nothing), but verify_decision passed such a record once its id was resealed."""
    report = _report("two-attempt-worker-failure")
    reject = record_decision(
        report, **{**GOOD, "decision": "reject", "selected_attempt_id": "attempt-002"}
    )
    assert isinstance(reject, HumanDecisionRecord)
    forged = _resealed_record(reject, decision="accept")
    outcome = verify_decision(forged, report)
    assert isinstance(outcome, DecisionRefusal)
    assert outcome.reason_codes == (DecisionReason.SELECTED_WITHOUT_EVIDENCE,)
    escalate = _record(decision="escalate", selected_attempt_id=None)
    assert isinstance(escalate, HumanDecisionRecord)
    nothing = verify_decision(_resealed_record(escalate, decision="accept"), REPORT)
    assert isinstance(nothing, DecisionRefusal)
    assert nothing.reason_codes == (DecisionReason.ACCEPT_WITHOUT_SELECTION,)


@pytest.mark.parametrize(
    "decided_at",
    [
        "\uff12\uff10\uff12\uff16-01-01T00:00:00Z",  # fullwidth year
        "\u0662\u0660\u0662\u0666-01-01T00:00:00Z",  # Arabic-Indic year
        "2026-01-01T00:00:00.\u0663Z",  # Arabic-Indic fraction
    ],
)
def test_decided_at_takes_ascii_digits_only(decided_at: str) -> None:
    """Regression: ``\\d`` matched any Unicode digit, so fullwidth or Arabic-Indic digits
    passed as RFC 3339 (a second spelling of one instant, and not RFC 3339 at all)."""
    outcome = _record(decided_at=decided_at)
    assert isinstance(outcome, DecisionRefusal)
    assert outcome.reason_codes == (DecisionReason.BAD_TIMESTAMP,)


@pytest.mark.parametrize("field", ["decision_id", "rationale", "decider_id", "selected_attempt_id"])
def test_text_that_cannot_be_canonical_is_refused_not_raised(field: str) -> None:
    """Regression: a lone surrogate (what argv decoding yields for invalid UTF-8) in any
    text argument made record_decision raise CanonicalizationError instead of refusing."""
    outcome = _record(**{field: "x\udcff"})
    assert isinstance(outcome, DecisionRefusal)
    expected = (
        DecisionReason.UNKNOWN_ATTEMPT
        if field == "selected_attempt_id"
        else DecisionReason.UNENCODABLE_TEXT
    )
    assert outcome.reason_codes == (expected,)
    assert DecisionRefusal.from_dict(outcome.to_dict()) == outcome


# -- branches: a stored record is re-checked field by field on reading -------------------


def _genuine() -> HumanDecisionRecord:
    record = _record()
    assert isinstance(record, HumanDecisionRecord)
    return record


@pytest.mark.parametrize("key", ["canonical_state_write", "git_push", "merge"])
def test_a_stored_record_granting_authority_is_refused(key: str) -> None:
    document = _genuine().to_dict()
    document["authority"][key] = True
    with pytest.raises(ValueError, match=rf"authority\.{key}: expected one of \[False\], got True"):
        HumanDecisionRecord.from_dict(document)


def test_a_stored_record_with_an_unreal_timestamp_is_refused() -> None:
    document = _genuine().to_dict() | {"decided_at": "2026-02-30T00:00:00Z"}
    with pytest.raises(ValueError, match="not a real date and time"):
        HumanDecisionRecord.from_dict(document)


def test_a_record_naming_another_report_kind_fails_verify() -> None:
    record = _genuine()
    ref = record.to_dict()["evidence_report"]
    forged = _resealed_record(record, evidence_report=ref | {"schema_version": "0"})
    outcome = verify_decision(forged, REPORT)
    assert isinstance(outcome, DecisionRefusal)
    assert DecisionReason.REPORT_KIND in outcome.reason_codes


def test_an_old_record_without_a_display_name_reads_with_null() -> None:
    document = _genuine().to_dict()
    del document["decider"]["display_name"]
    upgraded = upgrade_decision_document(document)
    assert isinstance(upgraded, dict)
    assert upgraded["decider"]["display_name"] is None
    assert HumanDecisionRecord.from_dict(upgraded) == _genuine()
    # Anything else passes through untouched (it is refused, if at all, by the reader).
    current = _genuine().to_dict()
    for other in (current, [current], {"kind": "other", "decider": {}}, current | {"decider": 1}):
        assert upgrade_decision_document(other) is other
