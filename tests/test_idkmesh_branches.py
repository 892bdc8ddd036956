"""The IDKMesh importer's refusal and comparison branches, one edit at a time.

Each case edits one field of a genuine IDKMesh fixture and checks what the importer
does with exactly that edit: the RecordError path it names, the decision reason it
gives, or the provenance difference it reports.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernel.decide.decision import DecisionReason
from kernel.errors import RecordError
from kernel.importers.idkmesh import is_idkmesh_document, is_idkmesh_run, run_record_from_idkmesh
from kernel.importers.idkmesh_config import (
    idkmesh_provenance_differences,
    is_idkmesh_config,
    read_idkmesh_config,
    read_idkmesh_verifier_policy,
    read_idkmesh_work_unit,
)
from kernel.importers.idkmesh_reports import (
    read_idkmesh_decision,
    read_idkmesh_report,
    verify_idkmesh_decision,
)

IDKMESH = Path(__file__).resolve().parents[1] / "fixtures" / "idkmesh"
REPO = IDKMESH / "repo"
GOOD_CONFIG = REPO / "examples/orchestration/two-attempt-good-vs-bad.json"
WORK_UNIT = REPO / "examples/work-units/local-verifier-smoke.work-unit.json"
POLICY = REPO / "verification/fixtures/verifier-smoke-policy.json"

Edit = Callable[[Any], object]


def _load(path: Path) -> Any:
    return json.loads(path.read_text())


def _edited(path: Path, edit: Edit) -> Any:
    document = copy.deepcopy(_load(path))
    edit(document)
    return document


def _path_of(read: Callable[[Any], object], document: Any) -> str:
    with pytest.raises(RecordError) as info:
        read(document)
    return info.value.path


# -- run records -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda d: d.update(work_unit=[]), "$.work_unit"),
        (lambda d: d.update(run_id=" "), "$.run_id"),
        (lambda d: d.update(attempts={}), "$.attempts"),
        (lambda d: d.update(attempts=[], attempt_order=[]), "$.attempts"),
        (lambda d: d["verification_control"].update(kind="policy"), "$.verification_control.kind"),
        (lambda d: d["work_unit"].update(version=2**53), "$.work_unit.version"),
    ],
)
def test_malformed_run_records_name_the_field(edit: Edit, path: str) -> None:
    assert _path_of(run_record_from_idkmesh, _edited(IDKMESH / "demo.run.json", edit)) == path


# -- evidence reports --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda d: d["warnings"].append(0.5), "$.warnings["),
        (lambda d: d.update(source_run_kind="idkmesh-other"), "$.source_run_kind"),
        (lambda d: d["authority"].update(git_push=True), "$.authority.git_push"),
        (lambda d: d["attempts"][1].update(order=1), "$.attempts[1].order"),
        (lambda d: d["attempts"][0].update(verifier=[]), "$.attempts[0].verifier"),
        (lambda d: d.update(attempts=[]), "$.attempts"),
        (lambda d: d["summary"].update(supported="1"), "$.summary.supported"),
    ],
)
def test_malformed_reports_name_the_field(edit: Edit, path: str) -> None:
    document = _edited(IDKMESH / "demo.evidence.json", edit)
    assert _path_of(read_idkmesh_report, document).startswith(path)


# -- decision records --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda d: d.update(decision_id="Not An Id"), "$.decision_id"),
        (lambda d: d["decider"].update(display_name=5), "$.decider.display_name"),
    ],
)
def test_malformed_decisions_name_the_field(edit: Edit, path: str) -> None:
    assert _path_of(read_idkmesh_decision, _edited(IDKMESH / "demo.decision.json", edit)) == path


def _reasons(
    decision_edit: Edit = lambda d: None, report_edit: Edit = lambda d: None
) -> tuple[DecisionReason, ...]:
    decision = read_idkmesh_decision(_edited(IDKMESH / "demo.decision.json", decision_edit))
    report = read_idkmesh_report(_edited(IDKMESH / "demo.evidence.json", report_edit))
    return verify_idkmesh_decision(decision, report)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda d: d["evidence_report"].update(kind="idkmesh-other"), DecisionReason.REPORT_KIND),
        (lambda d: d["evidence_report"].update(schema_version="0.2"), DecisionReason.REPORT_KIND),
        (lambda d: d["evidence_report"].update(run_id="other/run"), DecisionReason.REPORT_RUN_ID),
        (lambda d: d.update(selected_attempt_id="attempt-009"), DecisionReason.UNKNOWN_ATTEMPT),
    ],
)
def test_a_decision_naming_something_else_is_refused_with_its_reason(
    edit: Edit, reason: DecisionReason
) -> None:
    assert _reasons(decision_edit=edit) == (reason,)


def _escalated(d: Any) -> None:
    """attempt-002 escalated instead of rejecting: IDKMesh calls that inconclusive."""
    d["attempts"][1]["verifier"]["recommendation"] = "escalate"
    d["attempts"][1]["evidence_state"] = "inconclusive"
    d["summary"].update(rejected=0, inconclusive=1)


def test_an_escalated_verified_attempt_is_inconclusive_not_inconsistent() -> None:
    # The report was edited, so its digest no longer matches; but it is self-consistent.
    assert _reasons(report_edit=_escalated) == (DecisionReason.REPORT_DIGEST,)

    def mislabelled_edit(d: Any) -> None:
        _escalated(d)
        d["attempts"][1]["evidence_state"] = "rejected"

    mislabelled = _reasons(report_edit=mislabelled_edit)
    assert DecisionReason.REPORT_INCONSISTENT in mislabelled


def test_a_report_listing_one_attempt_twice_is_inconsistent() -> None:
    def duplicated(d: Any) -> None:
        d["attempts"][1] = copy.deepcopy(d["attempts"][0]) | {"order": 2}
        d["summary"].update(supported=2, rejected=0, verification_disagreement=False)

    assert DecisionReason.REPORT_INCONSISTENT in _reasons(report_edit=duplicated)


# -- orchestration configs and provenance replay ----------------------------------------


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda d: d["attempts"].__setitem__(0, "attempt-001"), "$.attempts[0]"),
        (lambda d: d.update(attempts=[]), "$.attempts"),
        (lambda d: d.update(run_id=0.5), "$.run_id"),
    ],
)
def test_malformed_configs_name_the_field(edit: Edit, path: str) -> None:
    assert _path_of(read_idkmesh_config, _edited(GOOD_CONFIG, edit)) == path


def _documents(config_doc: Any) -> dict[str, object]:
    config = read_idkmesh_config(config_doc)
    paths = [config.work_unit, config.verifier_policy]
    paths += [s.result_manifest for s in config.attempts if s.result_manifest]
    return {p: _load(REPO / p) for p in paths}


def _replay(
    config_edit: Edit = lambda d: None,
    run_edit: Edit = lambda d: None,
    documents_edit: Edit = lambda d: None,
) -> list[str]:
    """Differences of the demo run against an edited config, the run resealed to the
    edited config's digest so the comparison goes past the config digest."""
    config_doc = _edited(GOOD_CONFIG, config_edit)
    documents = _documents(config_doc)
    documents_edit(documents)
    config = read_idkmesh_config(config_doc)
    run = _edited(IDKMESH / "demo.run.json", run_edit)
    run["config_digest"] = "sha256:" + config.digest
    return idkmesh_provenance_differences(config, documents, run)


def test_a_run_of_another_config_differs_in_its_config_digest_only() -> None:
    config = read_idkmesh_config(_load(GOOD_CONFIG))
    run = _edited(IDKMESH / "demo.run.json", lambda d: d.update(run_id="other"))
    run["config_digest"] = "sha256:" + "0" * 64
    differences = idkmesh_provenance_differences(config, _documents(_load(GOOD_CONFIG)), run)
    assert len(differences) == 1
    assert differences[0].startswith("$.config_digest: replayed 'sha256:")


def test_a_config_with_fewer_attempts_stops_at_the_attempt_count() -> None:
    differences = _replay(config_edit=lambda d: d["attempts"].pop())
    assert differences[-1] == "$.attempts: replayed 1 attempts, saved 2"


def test_an_attempt_without_a_manifest_replays_as_a_worker_error() -> None:
    differences = _replay(config_edit=lambda d: d["attempts"][0].pop("result_manifest"))
    assert differences == ["$.attempts[0].state: replayed 'worker_error', saved 'verified'"]


def test_an_unreadable_manifest_replays_as_a_result_manifest_error() -> None:
    manifest = read_idkmesh_config(_load(GOOD_CONFIG)).attempts[0].result_manifest
    differences = _replay(documents_edit=lambda d: d.update({manifest: None}))
    assert differences == [
        "$.attempts[0].state: replayed 'result_manifest_error', saved 'verified'"
    ]


def test_a_saved_unverified_state_of_a_manifest_attempt_is_a_difference() -> None:
    differences = _replay(run_edit=lambda d: d["attempts"][0].update(state="worker_error"))
    assert differences == [
        "$.attempts[0].state: replayed verified or verification_error, saved 'worker_error'"
    ]


def test_a_verification_error_without_a_verification_has_no_binding_to_compare() -> None:
    differences = _replay(
        run_edit=lambda d: d["attempts"][0].update(state="verification_error", verification=None)
    )
    assert differences == []


# -- work units and verifier policies ----------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda d: d.update(id="Not An Id"), "$.id"),
        (lambda d: d["validators"].__setitem__(0, "artifact-digest"), "$.validators[0]"),
        (lambda d: d["validators"][0].update(required="yes"), "$.validators[0].required"),
    ],
)
def test_malformed_work_units_name_the_field(edit: Edit, path: str) -> None:
    assert _path_of(read_idkmesh_work_unit, _edited(WORK_UNIT, edit)) == path


def test_an_optional_validator_is_not_required() -> None:
    unit = read_idkmesh_work_unit(
        _edited(WORK_UNIT, lambda d: d["validators"][0].update(required=False))
    )
    assert unit.required_validators == ("candidate-scope", "independent-acceptance")


@pytest.mark.parametrize("read", [read_idkmesh_work_unit, read_idkmesh_verifier_policy])
def test_a_non_object_is_refused_at_the_root(read: Callable[[Any], object]) -> None:
    assert _path_of(read, ["schema_version", "0.1"]) == "$"


def test_a_policy_whose_required_json_is_not_an_object_is_refused() -> None:
    document = _edited(POLICY, lambda d: d.update(required_json=[]))
    assert _path_of(read_idkmesh_verifier_policy, document) == "$.required_json"


# -- sniffing: which reader a document goes to -------------------------------------------


def test_documents_are_sniffed_by_their_declared_kind() -> None:
    run, config = _load(IDKMESH / "demo.run.json"), _load(GOOD_CONFIG)
    report = _load(IDKMESH / "demo.evidence.json")
    assert (is_idkmesh_run(run), is_idkmesh_document(run), is_idkmesh_config(run)) == (
        True,
        True,
        False,
    )
    assert (is_idkmesh_run(report), is_idkmesh_document(report)) == (False, True)
    assert (is_idkmesh_run(config), is_idkmesh_document(config), is_idkmesh_config(config)) == (
        False,
        False,
        True,
    )
    for other in ([run], {"kind": 1}, {"kind": "kernel-run-record"}, "idkmesh-run"):
        assert not is_idkmesh_run(other)
        assert not is_idkmesh_document(other)
        assert not is_idkmesh_config(other)
    assert not is_idkmesh_config({k: v for k, v in config.items() if k != "attempts"})
