"""Tests for kernel.importers.idkmesh: IDKMesh v0.1 run records report with IDKMesh's states."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.decide.decision import DecisionReason
from kernel.errors import RecordError
from kernel.importers.idkmesh import parse_prefixed_digest, run_record_from_idkmesh
from kernel.importers.idkmesh_config import (
    IdkmeshConfig,
    idkmesh_digest,
    idkmesh_provenance_differences,
    read_idkmesh_config,
    read_idkmesh_verifier_policy,
    read_idkmesh_work_unit,
)
from kernel.importers.idkmesh_reports import (
    read_idkmesh_decision,
    read_idkmesh_report,
    verify_idkmesh_decision,
)
from kernel.run.report import RunEvidenceReport, build_evidence_report

IDKMESH = Path(__file__).resolve().parents[1] / "fixtures" / "idkmesh"


def _load(name: str) -> Any:
    return json.loads((IDKMESH / name).read_text())


def _report(document: Any) -> RunEvidenceReport:
    report = build_evidence_report(run_record_from_idkmesh(document))
    assert isinstance(report, RunEvidenceReport)
    return report


def test_same_states_and_counts_as_idkmesh() -> None:
    """The demo run reports exactly the states and counts of IDKMesh's own report."""
    theirs = _load("demo.evidence.json")
    ours = _report(_load("demo.run.json"))
    assert [a.evidence_state.value for a in ours.attempts] == [
        a["evidence_state"] for a in theirs["attempts"]
    ]
    assert [a.state.value for a in ours.attempts] == [a["state"] for a in theirs["attempts"]]
    for key in ("attempt_count", "supported", "rejected", "inconclusive", "control_errors"):
        assert getattr(ours.summary, key) == theirs["summary"][key], key
    assert ours.summary.verification_disagreement is theirs["summary"]["verification_disagreement"]
    assert ours.summary.control_failure_present is theirs["summary"]["control_failure_present"]


def test_imported_from_is_idkmesh_source_digest() -> None:
    """imported_from.digest equals IDKMesh's own source_run_digest of the same document."""
    ours = _report(_load("demo.run.json"))
    theirs = _load("demo.evidence.json")
    assert ours.imported_from is not None
    assert "sha256:" + ours.imported_from.digest == theirs["source_run_digest"]
    assert "sha256:" + ours.source_config_digest == theirs["source_config_digest"]


def test_failure_run_keeps_the_worker_error() -> None:
    """The failure run: one supported, one worker_error, control failure present."""
    report = _report(_load("failure.run.json"))
    assert [a.evidence_state.value for a in report.attempts] == ["supported", "worker_error"]
    assert report.summary.control_errors == 1


def test_absolute_paths_in_errors_are_redacted() -> None:
    """An IDKMesh error string with an absolute path is kept, path redacted."""
    document = _load("failure.run.json")
    document["attempts"][1]["error"] = "could not read /home/alice/idkmesh/x.json"
    attempt = run_record_from_idkmesh(document).attempts[1]
    assert attempt.error is not None
    assert attempt.error.message == "could not read <path>"


@pytest.mark.parametrize(
    "value",
    [
        "sha256:" + "A" * 64,
        "sha256:" + "a" * 63,
        "a" * 64,
        "sha512:" + "a" * 64,
        "sha256:" + "a" * 64 + "\n",
        7,
    ],
)
def test_digests_are_parsed_strictly(value: object) -> None:
    """Only exactly sha256: + 64 lowercase hex is admitted."""
    with pytest.raises(RecordError) as info:
        parse_prefixed_digest(value, "$.x")
    assert info.value.path == "$.x"


def _edit(path: list[Any], value: Any) -> Any:
    document = copy.deepcopy(_load("demo.run.json"))
    target = document
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return document


BAD = {
    "not-an-object": ([], "$"),
    "loose-digest": (_edit(["config_digest"], "sha256:XYZ"), "$.config_digest"),
    "bad-state": (_edit(["attempts", 0, "state"], "great"), "$.attempts[0].state"),
    "missing-field": (
        _edit(["attempts", 1, "verification"], KeyError),
        "$.attempts[1].verification",
    ),
    "unknown-field": (_edit(["attempts", 0, "score"], 1), "$.attempts[0].score"),
    "authority": (_edit(["authority", "merge"], True), "$.authority.merge"),
    "order": (_edit(["attempts", 1, "order"], 5), "$.attempts[1].order"),
    "attempt-order": (_edit(["attempt_order"], ["attempt-002", "attempt-001"]), "$.attempt_order"),
    "shape": (_edit(["attempts", 0, "verification"], None), "$.attempts[0].state"),
    "float": (
        _edit(["attempts", 0, "result_manifest", "attempt"], 1.0),
        "$.attempts[0].result_manifest.attempt",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_malformed_idkmesh_runs_are_refused_with_a_path(name: str) -> None:
    """Malformed input is a RecordError naming the path, never a traceback."""
    document, path = BAD[name]
    with pytest.raises(RecordError) as info:
        run_record_from_idkmesh(document)
    assert info.value.path == path


def test_drifted_idkmesh_run_is_refused_by_the_report() -> None:
    """IDKMesh's binding rule holds: verification/manifest drift refuses the report."""
    document = _edit(
        ["attempts", 0, "verification", "result_manifest_digest"], "sha256:" + "0" * 64
    )
    outcome = build_evidence_report(run_record_from_idkmesh(document))
    assert not isinstance(outcome, RunEvidenceReport)


# --- orchestrator versions, kinds, duplicates, location independence -------------------


def test_orchestrator_0_1_record_reads_like_0_2() -> None:
    """IDKMesh's 0.1 orchestrator omits verification_control; the same demo reads with
    the same states and counts as the 0.2 record (both declare kind/schema 0.1)."""
    old = _report(_load("demo.orchestrator-0.1.run.json"))
    new = _report(_load("demo.run.json"))
    assert [a.evidence_state for a in old.attempts] == [a.evidence_state for a in new.attempts]
    assert old.summary == new.summary
    assert old.orchestrator == "idkmesh/0.1"


@pytest.mark.parametrize(
    ("name", "edit", "path"),
    [
        ("0.2 without control", lambda d: d.pop("verification_control"), "$.verification_control"),
        (
            "0.1 with control",
            lambda d: d.update(orchestrator_version="0.1"),
            "$.verification_control",
        ),
        (
            "unknown version",
            lambda d: d.update(orchestrator_version="0.3"),
            "$.orchestrator_version",
        ),
        (
            "control names another policy",
            lambda d: d["verification_control"].update(digest="sha256:" + "1" * 64),
            "$.verification_control.digest",
        ),
        (
            "hand-edited count",
            lambda d: d["summary"].update(candidates_supported=2),
            "$.summary.candidates_supported",
        ),
        ("run state", lambda d: d.update(run_state="completed_with_failures"), "$.run_state"),
    ],
)
def test_orchestrator_versions_are_read_strictly(name: str, edit: Any, path: str) -> None:
    """verification_control is required exactly from orchestrator 0.2 on, names the
    run's policy; an unknown orchestrator version and a summary that disagrees with the
    attempts are refused naming the field."""
    document = copy.deepcopy(_load("demo.run.json"))
    edit(document)
    with pytest.raises(RecordError) as info:
        run_record_from_idkmesh(document)
    assert info.value.path == path, name


@pytest.mark.parametrize(
    ("kind", "version"),
    [
        ("idkmesh-run-evidence-report", "0.1"),
        ("idkmesh-two-attempt-run", "0.2"),
        ("idkmesh-human-decision-record", "0.1"),
    ],
)
def test_another_kind_or_version_is_refused_by_name(kind: str, version: str) -> None:
    """A document that is not an IDKMesh v0.1 run record is refused naming its kind and
    version (never read as if it were one)."""
    document = {**_load("demo.run.json"), "kind": kind, "schema_version": version}
    with pytest.raises(RecordError, match=f"'{kind}' schema_version '{version}'"):
        run_record_from_idkmesh(document)


def test_duplicate_attempt_ids_are_a_clean_error() -> None:
    """Regression: duplicate attempt ids ended in a ValueError traceback; now a
    RecordError names the second attempt."""
    document = _load("demo.run.json")
    document["attempts"][1]["attempt_id"] = "attempt-001"
    document["attempt_order"] = ["attempt-001", "attempt-001"]
    with pytest.raises(RecordError, match="duplicate attempt id") as info:
        run_record_from_idkmesh(document)
    assert info.value.path == "$.attempts[1].attempt_id"


def _failure_run_from(folder: str) -> Any:
    document = _load("failure.run.json")
    document["attempts"][1]["error"] = f"FileNotFoundError: [Errno 2] {folder}/manifest.json"
    document["attempts"][0]["candidate_root"] = f"{folder}/examples/verifier/good/candidate-root"
    return document


def test_imported_digests_do_not_depend_on_the_folder_idkmesh_ran_in() -> None:
    """Regression: the same failure run written by IDKMesh in two checkouts had two
    imported digests (its error strings and candidate roots embed absolute paths)."""
    one = run_record_from_idkmesh(_failure_run_from("/home/alice/idkmesh"))
    two = run_record_from_idkmesh(_failure_run_from("/srv/ci/build-17/idkmesh"))
    assert one.imported_from == two.imported_from
    assert one.digest == two.digest
    assert one.attempts[1].error is not None
    assert "<path>" in one.attempts[1].error.message


# --- parity: records written in IDKMesh's formats, states and counts by IDKMesh's rules --

_CHECK_IDS = ("artifact-digest", "candidate-scope", "independent-acceptance")
_H = "sha256:" + "ab" * 32


def _idkmesh_attempt(index: int, kind: str) -> dict[str, Any]:
    """One attempt as IDKMesh's orchestrator writes it (schema of its run record)."""
    attempt_id = f"attempt-{index + 1:03d}"
    base: dict[str, Any] = {"attempt_id": attempt_id, "order": index + 1}
    manifest = {
        "attempt": 1,
        "digest": _H,
        "id": f"m/{attempt_id}",
        "worker_id": f"w-{index}",
        "worker_status": "succeeded",
    }
    if kind == "worker_error":
        return {**base, "worker_adapter": "fixture-failure", "state": kind, "error": "boom",
                "result_manifest": None, "verification": None}  # fmt: skip
    if kind == "result_manifest_error":
        return {**base, "worker_adapter": "fixture-result", "state": kind,
                "error": "JSONDecodeError: x", "result_manifest": None,
                "verification": None}  # fmt: skip
    if kind == "verification_error":
        return {**base, "worker_adapter": "fixture-result", "state": kind,
                "error": "VerifierError: y", "candidate_root": "c", "result_manifest": manifest,
                "verification": None}  # fmt: skip
    recommendation = kind
    passed = recommendation == "accept_candidate"
    checks = [
        {"id": c, "required": True, "status": "passed" if passed or i < 2 else "failed"}
        for i, c in enumerate(_CHECK_IDS)
    ]
    return {**base, "worker_adapter": "fixture-result", "state": "verified", "error": None,
            "candidate_root": "c", "result_manifest": manifest,
            "verification": {"checks": checks, "id": f"v/{attempt_id}",
                             "recommendation": recommendation,
                             "result_manifest_digest": _H, "semantic_digest": _H,
                             "status": "passed" if passed else "failed",
                             "verifier_id": "idkmesh-local-verifier",
                             "work_unit_digest": _H}}  # fmt: skip


def _idkmesh_run(kinds: list[str], version: str) -> dict[str, Any]:
    attempts = [_idkmesh_attempt(i, k) for i, k in enumerate(kinds)]
    verified = [a["verification"]["recommendation"] for a in attempts if a["verification"]]
    failures = sum(a["state"] != "verified" for a in attempts)
    document = {
        "schema_version": "0.1", "kind": "idkmesh-two-attempt-run", "run_id": "parity/run",
        "orchestrator_version": version, "config_digest": _H,
        "work_unit": {"id": "wu", "version": 1, "digest": _H},
        "verifier_policy_digest": _H,
        "attempt_order": [a["attempt_id"] for a in attempts], "attempts": attempts,
        "summary": {"attempt_count": len(attempts), "control_failures": failures,
                    "candidates_supported": verified.count("accept_candidate"),
                    "candidates_rejected": verified.count("reject_candidate")},
        "run_state": "completed_with_failures" if failures else "completed",
        "authority": {"canonical_state_write": False, "git_push": False, "merge": False,
                      "automatic_candidate_selection": False},
    }  # fmt: skip
    if version == "0.2":
        document["verification_control"] = {"backend": "legacy_fixture_policy", "digest": _H,
                                            "id": "p", "kind": "verifier_policy",
                                            "schema_version": "0.1"}  # fmt: skip
    return document


_IDKMESH_STATE = {
    "accept_candidate": "supported",
    "reject_candidate": "rejected",
    "escalate": "inconclusive",
    "insufficient_evidence": "inconclusive",
    "worker_error": "worker_error",
    "result_manifest_error": "result_manifest_error",
    "verification_error": "verification_error",
}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(sorted(_IDKMESH_STATE)), min_size=1, max_size=9),
    st.sampled_from(["0.1", "0.2"]),
)
def test_parity_states_and_counts_follow_idkmesh_rules(kinds: list[str], version: str) -> None:
    """For every mix of attempt outcomes written in IDKMesh's format (both orchestrator
    versions), the kernel report has IDKMesh's evidence state per attempt and its
    counts; disagreement counts only attempts that have a verification."""
    report = _report(_idkmesh_run(kinds, version))
    states = [_IDKMESH_STATE[k] for k in kinds]
    assert [str(a.evidence_state) for a in report.attempts] == states
    assert report.summary.attempt_count == len(kinds)
    assert report.summary.supported == states.count("supported")
    assert report.summary.rejected == states.count("rejected")
    assert report.summary.inconclusive == states.count("inconclusive")
    errors = {"worker_error", "result_manifest_error", "verification_error"}
    assert report.summary.control_errors == sum(s in errors for s in states)
    recommendations = {k for k in kinds if k not in errors}
    assert report.summary.verification_disagreement is (len(recommendations) > 1)


# --- IDKMesh evidence reports and decision records -------------------------------------


def _decision_check(
    decision_doc: Any, report_doc: Any, run_doc: Any = None
) -> tuple[DecisionReason, ...]:
    run = None if run_doc is None else run_record_from_idkmesh(run_doc)
    return verify_idkmesh_decision(
        read_idkmesh_decision(decision_doc), read_idkmesh_report(report_doc), run
    )


def test_idkmesh_decision_verifies_against_its_report_and_run() -> None:
    """IDKMesh's own decision on its own report verifies, with and without the run; the
    display name is kept; the report digest is IDKMesh's canonical_digest."""
    decision = read_idkmesh_decision(_load("demo.decision.json"))
    assert decision.decider.display_name == "Reviewer One"
    report = read_idkmesh_report(_load("demo.evidence.json"))
    assert "sha256:" + report.digest == _load("demo.decision.json")["evidence_report"]["digest"]
    assert _decision_check(_load("demo.decision.json"), _load("demo.evidence.json")) == ()
    assert (
        _decision_check(
            _load("demo.decision.json"), _load("demo.evidence.json"), _load("demo.run.json")
        )
        == ()
    )


def _relabelled_report() -> Any:
    """IDKMesh v0.1's weakness: a hand-edited report whose counts agree with its edit."""
    report = _load("demo.evidence.json")
    bad = report["attempts"][1]
    bad["evidence_state"] = "supported"
    bad["verifier"]["recommendation"] = "accept_candidate"
    report["summary"].update(supported=2, rejected=0, verification_disagreement=False)
    return report


@pytest.mark.parametrize(
    ("name", "report", "run", "reason"),
    [
        ("edited report", "edited", None, "report_digest_mismatch"),
        ("self-consistent edit, run given", "relabelled", "demo.run.json", "report_inconsistent"),
        ("report of another run", "demo.evidence.json", "failure.run.json", "report_inconsistent"),
    ],
)
def test_idkmesh_decision_fails_closed(
    name: str, report: str, run: str | None, reason: str
) -> None:
    """An edited report no longer matches the decision's digest; a relabelled report
    that IDKMesh v0.1 accepts (self-consistent counts) is refused against its run."""
    if report == "edited":
        document = _load("demo.evidence.json")
        document["warnings"].append("edited")
    elif report == "relabelled":
        document = _relabelled_report()
    else:
        document = _load(report)
    reasons = _decision_check(
        _load("demo.decision.json"), document, None if run is None else _load(run)
    )
    assert reason in reasons, name


def test_report_whose_states_contradict_its_counts_is_inconsistent() -> None:
    """A report whose summary disagrees with its attempts is inconsistent even alone."""
    document = _load("demo.evidence.json")
    document["summary"]["supported"] = 2
    reasons = _decision_check(_load("demo.decision.json"), document)
    assert DecisionReason.REPORT_INCONSISTENT in reasons


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda d: d.update(decision="accept_candidate"), "$.decision"),
        (lambda d: d["authority"].update(merge=True), "$.authority.merge"),
        (lambda d: d.update(decided_at="yesterday"), "$.decided_at"),
        (lambda d: d["decider"].update(nickname="x"), "$.decider.nickname"),
        (lambda d: d.update(schema_version="0.2"), "$.kind"),
        (lambda d: d["evidence_report"].update(digest="sha256:XY"), "$.evidence_report.digest"),
    ],
)
def test_malformed_idkmesh_decisions_name_the_field(edit: Any, path: str) -> None:
    """Every malformed decision record is a RecordError naming its field."""
    document = _load("demo.decision.json")
    edit(document)
    with pytest.raises(RecordError) as info:
        read_idkmesh_decision(document)
    assert info.value.path == path


def test_malformed_idkmesh_reports_name_the_field() -> None:
    """A report with a selected attempt or granted authority is not a generated report."""
    document = _load("demo.evidence.json")
    document["human_decision"]["selected_attempt_id"] = "attempt-001"
    with pytest.raises(RecordError, match="pending"):
        read_idkmesh_report(document)
    document = _load("demo.evidence.json")
    document["attempts"][0]["evidence_state"] = "winner"
    with pytest.raises(RecordError) as info:
        read_idkmesh_report(document)
    assert info.value.path == "$.attempts[0].evidence_state"


# --- provenance replay of saved IDKMesh runs against their IDKMesh configs -------------

REPO = IDKMESH / "repo"
GOOD_CONFIG = REPO / "examples/orchestration/two-attempt-good-vs-bad.json"
FAILURE_CONFIG = REPO / "examples/orchestration/two-attempt-worker-failure.json"


def _documents(config: IdkmeshConfig, root: Path = REPO) -> dict[str, object]:
    paths = [config.work_unit, config.verifier_policy]
    paths += [s.result_manifest for s in config.attempts if s.result_manifest]
    return {p: json.loads((root / p).read_text()) for p in paths}


def _differences(config_path: Path, run: Any, root: Path = REPO) -> list[str]:
    config = read_idkmesh_config(json.loads(config_path.read_text()))
    run_record_from_idkmesh(run)
    return idkmesh_provenance_differences(config, _documents(config, root), run)


def test_idkmesh_digests_are_reproduced_from_idkmesh_files() -> None:
    """IDKMesh's config, work-unit (floats included), policy and manifest digests are
    reproduced byte for byte from its own files, as its saved run records them."""
    run = _load("demo.run.json")
    config = read_idkmesh_config(json.loads(GOOD_CONFIG.read_text()))
    assert "sha256:" + config.digest == run["config_digest"]
    documents = _documents(config)
    assert (
        "sha256:" + idkmesh_digest(documents[config.work_unit], "u") == (run["work_unit"]["digest"])
    )
    good = config.attempts[0].result_manifest
    assert good is not None
    assert (
        "sha256:" + idkmesh_digest(documents[good], "m")
        == (run["attempts"][0]["result_manifest"]["digest"])
    )


@pytest.mark.parametrize(
    ("config", "run"),
    [
        (GOOD_CONFIG, "demo.run.json"),
        (GOOD_CONFIG, "demo.orchestrator-0.1.run.json"),
        (FAILURE_CONFIG, "failure.run.json"),
    ],
)
def test_saved_idkmesh_runs_replay_in_provenance_mode(config: Path, run: str) -> None:
    """Each saved IDKMesh run (both orchestrator versions, the failure run) is a run of
    its config: nothing differs."""
    assert _differences(config, _load(run)) == []


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda d: d.update(run_id="other"), "$.run_id"),
        (lambda d: d["work_unit"].update(version=2), "$.work_unit"),
        (
            lambda d: d["attempts"][1]["result_manifest"].update(worker_status="failed"),
            "$.attempts[1].result_manifest",
        ),
        (
            lambda d: d["attempts"][0]["verification"].update(
                work_unit_digest="sha256:" + "0" * 64
            ),
            "$.attempts[0].verification",
        ),
        (lambda d: d["attempts"][0].update(candidate_root="elsewhere"), "$.attempts[0]"),
    ],
)
def test_a_tampered_saved_idkmesh_run_names_the_first_difference(edit: Any, path: str) -> None:
    """A field of the saved run that its config's files contradict is named."""
    run = _load("demo.run.json")
    edit(run)
    differences = _differences(GOOD_CONFIG, run)
    assert differences
    assert differences[0].startswith(path)


def test_an_edited_idkmesh_manifest_is_a_difference(tmp_path: Path) -> None:
    """A result manifest edited after the run no longer has the saved digest."""
    shutil.copytree(REPO, tmp_path / "repo")
    manifest = tmp_path / "repo/examples/verifier/bad/result-manifest.json"
    document = json.loads(manifest.read_text())
    document["status"] = "failed"
    manifest.write_text(json.dumps(document))
    differences = _differences(GOOD_CONFIG, _load("demo.run.json"), tmp_path / "repo")
    assert differences[0].startswith("$.attempts[1].result_manifest")


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (
            lambda d: d["attempts"][0].update(worker_adapter="docker"),
            "$.attempts[0].worker_adapter",
        ),
        (lambda d: d.update(work_unit="/etc/passwd"), "$.work_unit"),
        (lambda d: d["attempts"][1].update(result_manifest="../x.json"), "$.attempts[1]"),
        (lambda d: d["attempts"][1].update(attempt_id="attempt-001"), "$.attempts[1].attempt_id"),
        (lambda d: d.update(schema_version="0.2"), "$.schema_version"),
    ],
)
def test_malformed_idkmesh_configs_name_the_field(edit: Any, path: str) -> None:
    """Unknown adapters, paths outside the repository and duplicate ids are refused."""
    document = json.loads(GOOD_CONFIG.read_text())
    edit(document)
    with pytest.raises(RecordError) as info:
        read_idkmesh_config(document)
    assert info.value.path.startswith(path)


def test_float_digests_refuse_nan() -> None:
    """IDKMesh's digest definition admits floats but not NaN (no JSON form)."""
    assert idkmesh_digest({"x": 1.0}, "$") == hashlib.sha256(b'{"x":1.0}').hexdigest()
    with pytest.raises(RecordError):
        idkmesh_digest({"x": float("nan")}, "$")


def test_idkmesh_work_units_and_policies_are_read_strictly() -> None:
    """IDKMesh's work unit (schema 0.2) and verifier policy (0.1) are read with their
    required validators and digests; another version is refused by name and version."""
    unit_doc = json.loads(
        (REPO / "examples/work-units/local-verifier-smoke.work-unit.json").read_text()
    )
    unit = read_idkmesh_work_unit(unit_doc)
    assert (unit.id, unit.version) == ("verification/local-smoke", 1)
    assert unit.required_validators == (
        "artifact-digest",
        "candidate-scope",
        "independent-acceptance",
    )
    assert "sha256:" + unit.digest == _load("demo.run.json")["work_unit"]["digest"]
    policy_doc = json.loads((REPO / "verification/fixtures/verifier-smoke-policy.json").read_text())
    policy = read_idkmesh_verifier_policy(policy_doc)
    assert "sha256:" + policy.digest == _load("demo.run.json")["verifier_policy_digest"]
    with pytest.raises(RecordError, match=r"'0\.1\.0'"):
        read_idkmesh_work_unit({**unit_doc, "schema_version": "0.1.0"})
    with pytest.raises(RecordError) as info:
        read_idkmesh_work_unit({**unit_doc, "owner": "x"})
    assert info.value.path == "$.owner"
    with pytest.raises(RecordError, match="schema_version"):
        read_idkmesh_verifier_policy({**policy_doc, "schema_version": "0.2"})
    with pytest.raises(RecordError) as info:
        read_idkmesh_verifier_policy({**policy_doc, "max_candidate_bytes": "4096"})
    assert info.value.path == "$.max_candidate_bytes"
