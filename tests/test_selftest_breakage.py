"""`kernel self-test` catches what each check is named for: every check, given a core
broken the way it guards against (a report builder that relabels an attempt, a decision
recorder that accepts the report's vocabulary, a binding that drifts from the reference
chain, ...), fails with what it saw. A check that passed whatever the core did would
hold nothing."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from kernel.corroboration.commit_admission import Branch, Draft, VerifierOutcome, admit_to_commit
from kernel.decide.decision import DecisionReason
from kernel.effects.cli import main
from kernel.effects.commands import bind_selftest, report_selftest, selftest
from kernel.errors import SelfTestFailure
from kernel.run.report import (
    EvidenceState,
    ReportReason,
    RunEvidenceReport,
    check_evidence_report,
)
from kernel.search.records import CandidateOperatorResult, GeometricSearchRun

Patches = dict[str, Any]
R = report_selftest
REAL = {
    name: getattr(R, name)
    for name in ("_runs", "build_evidence_report", "record_decision", "verify_decision")
}
REAL_BIND = {
    name: getattr(bind_selftest, name)
    for name in ("reference_chain", "bind_candidate_attempt_to_run", "build_consensus")
}


def good() -> tuple[Any, RunEvidenceReport]:
    """The run and report of the self-test's good-vs-bad config, as the real core makes them."""
    run = REAL["_runs"]()["good-vs-bad"]
    report = REAL["build_evidence_report"](run)
    assert isinstance(report, RunEvidenceReport)
    return run, report


def reporting(change: Callable[[RunEvidenceReport], RunEvidenceReport]) -> Patches:
    """A report builder whose every report is the real one, changed by ``change``."""
    return {"build_evidence_report": lambda run: change(REAL["build_evidence_report"](run))}


def attempts(report: RunEvidenceReport, index: int, **fields: Any) -> RunEvidenceReport:
    """``report`` with its attempt ``index`` changed by ``fields``."""
    changed = list(report.attempts)
    changed[index] = attrs.evolve(changed[index], **fields)
    return attrs.evolve(report, attempts=tuple(changed))


def summary(**fields: Any) -> Patches:
    """A report builder whose summaries are changed by ``fields``."""
    return reporting(lambda r: attrs.evolve(r, summary=attrs.evolve(r.summary, **fields)))


def recoded(real: Callable[..., Any], code: object) -> Callable[..., Any]:
    """``real``, whose refusals name ``code`` instead of their own reason."""

    def call(*args: Any, **kwargs: Any) -> Any:
        outcome = real(*args, **kwargs)
        if hasattr(outcome, "reason_codes"):
            return attrs.evolve(outcome, reason_codes=(code,))
        return outcome

    return call


def recording(**override: Any) -> Patches:
    """A decision recorder that records with ``override`` in place of what it was asked."""
    return {
        "record_decision": lambda report, **kwargs: REAL["record_decision"](
            report, **{**kwargs, **override}
        )
    }


def good_report_only(**override: Any) -> Patches:
    """A decision recorder that records on the real good report, whatever it was given."""
    return {
        "record_decision": lambda _report, **kwargs: REAL["record_decision"](
            good()[1], **{**kwargs, **override}
        )
    }


def runs(replay_of: str) -> Patches:
    """Runs whose replay of good-vs-bad is the run of ``replay_of``."""
    real = REAL["_runs"]()
    return {"_runs": lambda: {**real, "good-vs-bad/replay": real[replay_of]}}


def reported(report: object) -> Patches:
    """Every check's good-vs-bad report is ``report`` (a stand-in where a record would
    refuse the breakage)."""
    return {"_report": lambda _config: (good()[0], report)}


def unverified_first_attempt() -> Patches:
    """A run whose first attempt has no verification (a run record refuses to be built
    so: a stand-in)."""
    run = types.SimpleNamespace(attempts=(types.SimpleNamespace(verification=None),))
    return {"_report": lambda _config: (run, good()[1])}


# check -> (id, what breaks the core, what the failure says)
REPORT_BREAKAGES: list[tuple[str, Callable[[], None], Callable[[], Patches], str]] = [
    ("report refused", R._disagreement_visible,
     lambda: {"build_evidence_report": lambda run: "a refusal"}, "report refused: a refusal"),
    ("bad attempt supported", R._one_support_one_rejection,
     lambda: reporting(lambda r: attempts(r, 1, evidence_state=EvidenceState.SUPPORTED)),
     "SUPPORTED.*SUPPORTED"),
    ("summary miscounts", R._one_support_one_rejection, lambda: summary(supported=2),
     "supported=2"),
    ("disagreement hidden", R._disagreement_visible,
     lambda: summary(verification_disagreement=False), "verification_disagreement=False"),
    ("decision not pending", R._decision_pending,
     lambda: reported(types.SimpleNamespace(human_decision=types.SimpleNamespace(
         status="accepted", selected_attempt_id=None))), "accepted"),
    ("attempt preselected", R._decision_pending,
     lambda: reported(types.SimpleNamespace(human_decision=types.SimpleNamespace(
         status="pending", selected_attempt_id="attempt-001"))), "attempt-001"),
    ("selection enabled", R._no_automatic_selection,
     lambda: reported(types.SimpleNamespace(authority=types.SimpleNamespace(
         automatic_candidate_selection=True,
         to_dict=lambda: {"automatic_candidate_selection": True}))),
     "automatic_candidate_selection=True"),
    ("worker failure hidden", R._worker_failure_visible,
     lambda: reporting(lambda r: attempts(r, 1, evidence_state=EvidenceState.REJECTED)),
     "REJECTED"),
    ("control error uncounted", R._worker_failure_visible, lambda: summary(control_errors=0),
     "control_errors=0"),
    ("surviving evidence dropped", R._worker_failure_visible,
     lambda: reporting(lambda r: attempts(r, 0, verification=None)),
     "surviving evidence was dropped"),
    ("replay differs", R._replay_matches, lambda: runs("worker-failure"), "bytes differ"),
    ("replay digest differs", R._replay_matches,
     lambda: {**runs("worker-failure"), "canonical_json": lambda value: b"{}"},
     "first.digest == second.digest"),
    ("tamper unseen", R._tamper_fails_replay,
     lambda: {"sha256_hex": lambda value: good()[0].digest}, "a tampered run record still matches"),
    ("verification missing", R._drift_rejected, unverified_first_attempt,
     "attempt.verification is not None"),
    ("drift reported", R._drift_rejected,
     lambda: {"build_evidence_report": lambda run: good()[1]}, "drift produced a report"),
    ("drift misnamed", R._drift_rejected,
     lambda: {"build_evidence_report": recoded(REAL["build_evidence_report"],
                                               ReportReason.EVIDENCE_STATE)},
     "EVIDENCE_STATE"),
    ("accept refused", R._decision_binds, lambda: recording(decision="accept_candidate"),
     "REPORT_VOCABULARY"),
    ("decision bound elsewhere", R._decision_binds,
     lambda: {"record_decision": lambda report, **kwargs: REAL["record_decision"](
         attrs.evolve(report, run_id="self-test/elsewhere"), **kwargs)},
     "record.evidence_report.digest == report.digest"),
    ("decision unverified", R._decision_binds,
     lambda: {"verify_decision": lambda record, report: REAL["verify_decision"](
         record, attrs.evolve(report, run_id="self-test/elsewhere"))},
     "verify_decision"),
    ("reject refused", R._edited_report_fails_verify,
     lambda: recording(decision="accept_candidate"), "REPORT_VOCABULARY"),
    ("edited report verifies", R._edited_report_fails_verify,
     lambda: {"verify_decision": lambda record, report: REAL["verify_decision"](record, good()[1])},
     "an edited report verified"),
    ("edit misnamed", R._edited_report_fails_verify,
     lambda: {"verify_decision": recoded(REAL["verify_decision"], DecisionReason.UNKNOWN_ATTEMPT)},
     "UNKNOWN_ATTEMPT"),
    ("vocabulary recorded", R._report_vocabulary_refused, lambda: recording(decision="accept"),
     "report vocabulary was recorded"),
    ("vocabulary misnamed", R._report_vocabulary_refused,
     lambda: {"record_decision": recoded(REAL["record_decision"], DecisionReason.UNKNOWN_ATTEMPT)},
     "UNKNOWN_ATTEMPT"),
    ("relabel checks", R._forged_report_refused,
     lambda: {"check_evidence_report": lambda report: None}, "a relabelled report checked"),
    ("relabel misnamed", R._forged_report_refused,
     lambda: {"check_evidence_report": recoded(check_evidence_report,
                                               ReportReason.ATTEMPT_ORDER)},
     "ATTEMPT_ORDER"),
    ("forged decided", R._forged_report_refused,
     lambda: good_report_only(selected_attempt_id="attempt-001"),
     "a forged report was decided on"),
    ("forgery misnamed", R._forged_report_refused,
     lambda: {"record_decision": recoded(REAL["record_decision"], DecisionReason.UNKNOWN_ATTEMPT)},
     "UNKNOWN_ATTEMPT"),
    ("unknown attempt recorded", R._unknown_attempt_refused,
     lambda: recording(selected_attempt_id="attempt-001"), "an unknown attempt was recorded"),
    ("unknown attempt misnamed", R._unknown_attempt_refused,
     lambda: {"record_decision": recoded(REAL["record_decision"],
                                         DecisionReason.REPORT_VOCABULARY)},
     "REPORT_VOCABULARY"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("check", "breakage", "says"),
    [
        pytest.param(check, breakage, says, id=name)
        for name, check, breakage, says in REPORT_BREAKAGES
    ],
)
def test_each_report_check_catches_its_breakage(
    check: Callable[[], None],
    breakage: Callable[[], Patches],
    says: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A report or decision check fails, saying what it saw, on the core it guards."""
    check()  # the real core passes
    for name, broken in breakage().items():
        monkeypatch.setattr(R, name, broken)
    with pytest.raises(SelfTestFailure, match=says):
        check()


def chain_with(**fields: Any) -> Patches:
    """A packaged reference chain with ``fields`` replaced."""
    chain = REAL_BIND["reference_chain"]()
    return {"reference_chain": lambda: {**chain, **fields}}


def refusal_reference(**fields: Any) -> Patches:
    """A reference chain whose refusal case's expected refusal has ``fields`` replaced."""
    chain = REAL_BIND["reference_chain"]()
    case = chain["refusal_case"]
    return chain_with(refusal_case={**case, "refusal": {**case["refusal"], **fields}})


def always(name: str, *observed: str | None) -> Patches:
    """``build_consensus`` answering every question as the real one answers the runs
    whose outputs are ``observed`` (None: a failed run)."""
    outcome = REAL_BIND["build_consensus"](
        tuple(B._observation(i, d) for i, d in enumerate(observed))
    )
    return {name: lambda _observations: outcome}


def admitting(verifier: bool) -> Patches:
    """``admit_to_commit`` answering every branch as the real one answers three clones
    with (``verifier``) or without an independent verifier's pass."""
    clone = Draft(output_digest="a" * 64, context_digest="1" * 64, tools=("shell",))
    outcome = admit_to_commit(
        Branch(
            branch_id="b",
            drafts=(clone, clone, clone),
            verifier=VerifierOutcome.PASSED if verifier else VerifierOutcome.NONE,
        )
    )
    return {"admit_to_commit": lambda _branch: outcome}


def binding_bound() -> Patches:
    """A binder that binds everything as it binds the reference chain."""
    chain = REAL_BIND["reference_chain"]()
    bound = REAL_BIND["bind_candidate_attempt_to_run"](
        original_run=GeometricSearchRun.from_dict(chain["geometric_search_run"]),
        candidate_operator_result=CandidateOperatorResult.from_dict(
            chain["candidate_operator_result"]
        ),
    )
    return {"bind_candidate_attempt_to_run": lambda **_kwargs: bound}


def binding_refused() -> Patches:
    """A binder that refuses everything, as it refuses the chain's refusal case."""
    chain = REAL_BIND["reference_chain"]()
    case = chain["refusal_case"]
    document = {**chain["candidate_operator_result"], **case["candidate_operator_result_change"]}
    refused = REAL_BIND["bind_candidate_attempt_to_run"](
        original_run=GeometricSearchRun.from_dict(chain["geometric_search_run"]),
        candidate_operator_result=CandidateOperatorResult.from_dict(document, verify_ids=False),
    )
    return {"bind_candidate_attempt_to_run": lambda **_kwargs: refused}


B = bind_selftest
S = selftest
# module, check -> (id, what breaks the core, what the failure says)
OTHER_BREAKAGES: list[tuple[str, object, Callable[[], None], Callable[[], Patches], str]] = [
    ("chain not an object", B, B._reference_binding,
     lambda: {"load_json": lambda path, what: ["not", "an", "object"]},
     "not a JSON object"),
    ("chain does not bind", B, B._reference_binding, binding_refused, "did not bind"),
    ("binding drifts", B, B._reference_binding,
     lambda: chain_with(binding={**REAL_BIND["reference_chain"]()["binding"], "binding_id": "0"}),
     "differs from the reference"),
    ("other run bound", B, B._reference_refusal, binding_bound,
     "a result naming another run was bound"),
    ("refusal id drifts", B, B._reference_refusal,
     lambda: refusal_reference(binding_refusal_id="0" * 64), "differs from the reference"),
    ("refusal prose drifts", B, B._reference_refusal,
     lambda: refusal_reference(explanation="another sentence"), "differs from the reference"),
    ("plurality corroborates", B, B._plurality_is_not_consensus,
     lambda: always("build_consensus", "a" * 64, "a" * 64, "a" * 64, "b" * 64),
     "2 of 4 launched runs gave Consensus"),
    ("majority does not", B, B._plurality_is_not_consensus,
     lambda: always("build_consensus", "a" * 64, "a" * 64, "b" * 64, None),
     "3 of 4 identical outputs did not corroborate"),
    ("clones admitted", B, B._correlated_unanimity_is_refused, lambda: admitting(True),
     "unanimous correlated drafters were admitted"),
    ("verifier ignored", B, B._correlated_unanimity_is_refused, lambda: admitting(False),
     "an independent verifier's pass did not make the branch verified"),
    ("canonical bytes", S, S._identity_vector, lambda: {"canonical_json": lambda v: b"{}"},
     "canonical bytes b'{}'"),
    ("digest length", S, S._identity_vector, lambda: {"sha256_hex": lambda v: "abc"}, "abc"),
    ("float admitted", S, S._identity_refuses_float,
     lambda: {"canonical_json": lambda v: b"{}"}, r"not refused at \$\.score \(got None\)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("module", "check", "breakage", "says"),
    [pytest.param(*row[1:], id=row[0]) for row in OTHER_BREAKAGES],
)
def test_each_identity_and_binding_check_catches_its_breakage(
    module: object,
    check: Callable[[], None],
    breakage: Callable[[], Patches],
    says: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An identity, binding, corroboration or admission check fails, saying what it
    saw, on the core it guards."""
    check()
    for name, broken in breakage().items():
        monkeypatch.setattr(module, name, broken)
    with pytest.raises(SelfTestFailure, match=says):
        check()


def test_a_broken_report_core_fails_the_verb(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through `kernel self-test`: a report builder that relabels the rejected attempt
    fails every check that reads the good-vs-bad report (exit 1), and no other."""
    for name, broken in reporting(
        lambda r: attempts(r, 1, evidence_state=EvidenceState.SUPPORTED)
    ).items():
        monkeypatch.setattr(R, name, broken)
    assert main(["self-test"]) == 1
    failed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL")]
    assert failed
    assert all("report:" in line or "decision:" in line for line in failed)
