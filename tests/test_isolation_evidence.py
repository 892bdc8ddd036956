"""Isolation is evidence: levels and limits of every sandboxed run in run.json, the report
views and the admission; a config's minimum level; below overlay never verified by default."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.corroboration.commit_admission import EvidenceClass
from kernel.corroboration.consensus import CaptureMode
from kernel.corroboration.run_admission import build_run_admission
from kernel.effects import orchestrate, pipeline
from kernel.effects.adapters import command, command_worker
from kernel.effects.cli import main
from kernel.effects.documents import load_run_record
from kernel.effects.orchestrate import load_config, run_detailed
from kernel.effects.pipeline import run_pipeline
from kernel.effects.rerun import corroborate
from kernel.effects.sandbox import run_sandboxed
from kernel.run.record import (
    AttemptErrorCode,
    AttemptState,
    CheckRun,
    IsolationPolicy,
    RunRecord,
    SandboxLimit,
    SandboxRun,
)
from kernel.run.report import RunEvidenceReport, build_evidence_report
from kernel.run.verification import CheckReason, Isolation
from kernel.views.admission import admission_section

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo"


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A scratch project holding a demo copy (cwd)."""
    base = Path(tempfile.mkdtemp(prefix="kernel-isolation-test-", dir="/var/tmp"))
    try:
        shutil.copytree(DEMO, base / "demo")
        monkeypatch.chdir(base)
        yield base
    finally:
        shutil.rmtree(base)


def _config(work: Path, **changes: Any) -> Path:
    document = json.loads((work / "demo" / "config.json").read_text())
    document.update(changes)
    path = work / "demo" / "edited.json"
    path.write_text(json.dumps(document))
    return path


def test_every_attempt_and_check_records_its_isolation_and_limits(work: Path) -> None:
    """run.json, evidence.json, the Markdown/HTML views and admission.json all carry them."""
    config = _config(work, limits={"cpu_seconds": 120})
    result = run_pipeline(
        config,
        work / "results" / "demo",
        reruns=1,
        results_root=work / "results",
        limit_overrides={"processes": 64},
    )
    run = json.loads(result.files["run.json"].read_text())
    offered = run["isolation_policy"]["minimum"]
    assert offered in {i.value for i in Isolation}
    assert run["isolation_policy"]["accept_below_overlay"] is False
    for attempt in run["attempts"]:
        if attempt["attempt_id"] == "attempt-3":
            # The crash: its worker ran (and failed) in a sandbox all the same.
            assert attempt["check_runs"] == []
        limits = {x["kind"]: x["value"] for x in attempt["worker_sandbox"]["limits"]}
        assert limits["processes"] == 64
        assert limits["cpu"] == 120
        assert attempt["worker_sandbox"]["isolation"] == offered
        if attempt["verification"] is not None:
            runs = {r["check_id"]: r for r in attempt["check_runs"]}
            assert runs["protected-paths"]["sandbox"] is None
            unit = runs["unit-tests"]["sandbox"]
            assert unit["isolation"] == offered
            assert {x["kind"]: x["value"] for x in unit["limits"]}["processes"] == 64
    wrong = next(a for a in run["attempts"] if a["attempt_id"] == "attempt-2")
    reasons = {r["check_id"]: r["reason"] for r in wrong["check_runs"]}
    assert reasons == {
        "protected-paths": None,
        "candidate-screen": None,
        "unit-tests": "expected_test_failed",
        "median-oracle": "oracle_mismatch",
    }
    evidence = json.loads(result.files["evidence.json"].read_text())
    assert evidence["isolation_policy"] == run["isolation_policy"]
    assert [a["worker_sandbox"] for a in evidence["attempts"]] == [
        a["worker_sandbox"] for a in run["attempts"]
    ]
    for view in ("evidence.md", "evidence.html"):
        text = result.files[view].read_text()
        assert "Isolation" in text
        assert offered in text
    admission = json.loads(result.files["admission.json"].read_text())
    assert {g["isolation"] for g in admission["groups"]} == {offered}


def test_a_minimum_above_what_the_machine_offers_refuses_to_start(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Below the config's minimum the run does not start: exit 2, one line, nothing written."""
    monkeypatch.setattr(orchestrate, "available_isolation", lambda: Isolation.COPY)
    config = _config(work, isolation={"minimum": "overlay"})
    code = main(["run", "--config", str(config), "--output-dir", "results/demo"])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert "offers copy isolation, below the minimum overlay" in lines[0]
    assert not (work / "results").exists()


def test_the_default_minimum_is_what_the_machine_offers(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No isolation entry: the minimum recorded is the strongest level available."""
    monkeypatch.setattr(orchestrate, "available_isolation", lambda: Isolation.NAMESPACE_COPY)
    loaded = load_config(work / "demo" / "config.json")
    assert loaded.isolation_policy == IsolationPolicy(
        minimum=Isolation.NAMESPACE_COPY, accept_below_overlay=False
    )


BAD: dict[str, tuple[dict[str, Any], str]] = {
    "unknown-level": ({"isolation": {"minimum": "chroot"}}, "$.isolation.minimum"),
    "accept-not-bool": ({"isolation": {"accept_below_overlay": 1}}, "accept_below_overlay"),
    "unknown-isolation-key": ({"isolation": {"maximum": "copy"}}, "$.isolation.maximum"),
    "zero-limit": ({"limits": {"processes": 0}}, "$.limits"),
    "float-limit": ({"limits": {"memory_bytes": 1.5}}, "$.limits"),
    "unknown-limit": ({"limits": {"disk": 1}}, "$.limits.disk"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_isolation_and_limit_entries_are_refused(
    work: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each bad entry: exit 2 naming the key, nothing written."""
    changes, expected = BAD[case]
    config = _config(work, **changes)
    assert main(["run", "--config", str(config), "--output-dir", "results/demo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert expected in err[0]
    assert not (work / "results").exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e308", "0x10", "", "1.5", "١٢"])
def test_command_line_limits_must_be_plain_positive_integers(
    work: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--limit`` takes a positive decimal integer or none: anything else is exit 2."""
    code = main(["run", "--config", "demo/config.json", "--limit", f"memory_bytes={value}"])
    assert code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (work / "results").exists()


def _weakened(run: RunRecord, level: Isolation) -> RunRecord:
    def weaken(sandbox: SandboxRun | None) -> SandboxRun | None:
        return None if sandbox is None else attrs.evolve(sandbox, isolation=level)

    return attrs.evolve(
        run,
        attempts=tuple(
            attrs.evolve(
                a,
                worker_sandbox=weaken(a.worker_sandbox),
                check_runs=tuple(attrs.evolve(r, sandbox=weaken(r.sandbox)) for r in a.check_runs),
            )
            for a in run.attempts
        ),
    )


@pytest.mark.parametrize("level", [Isolation.NAMESPACE_COPY, Isolation.COPY])
def test_evidence_below_overlay_is_never_verified_unless_the_config_accepts_it(
    work: Path, level: Isolation
) -> None:
    """The correct fix is verified at overlay; the same evidence below it is not, and the
    section says why; a config that accepts it gets verified back."""
    outcome = run_detailed(load_config(work / "demo" / "config.json"), keep_artifacts=True)
    candidates = {
        a.record.attempt_id: next(x.digest for x in a.manifest.artifacts if x.id == "patch")
        for a in outcome.attempts
        if a.manifest is not None
    }
    fixed = candidates["attempt-1"]

    def group_of(run: RunRecord) -> tuple[Any, str]:
        report = build_evidence_report(run)
        assert isinstance(report, RunEvidenceReport)
        admission = build_run_admission(
            report, candidates=candidates, contexts={}, corroborations={}
        )
        group = next(g for g in admission.groups if g.candidate_digest == fixed)
        row = next(r for r in admission_section(admission).rows if r[1].startswith("attempt-1"))
        return group, row[-1]

    record = outcome.record
    if record.attempts[0].weakest_isolation is Isolation.OVERLAY:
        group, _text = group_of(record)
        assert group.evidence_class is EvidenceClass.VERIFIED
    weak = _weakened(record, level)
    group, text = group_of(weak)
    assert group.evidence_class is not EvidenceClass.VERIFIED
    assert group.verifier_pass_discounted
    assert group.isolation is level
    assert "below overlay" in text
    policy = IsolationPolicy(minimum=Isolation.COPY, accept_below_overlay=True)
    group, _text = group_of(attrs.evolve(weak, isolation_policy=policy))
    assert group.evidence_class is EvidenceClass.VERIFIED
    assert not group.verifier_pass_discounted


def test_a_run_record_written_before_the_isolation_fields_still_reads(tmp_path: Path) -> None:
    """Saved run.json without isolation_policy / worker_sandbox / check_runs: defaults."""
    record = run_detailed(load_config(ROOT / "fixtures/orchestration/two-attempt-good-vs-bad.json"))
    document = record.record.to_dict()
    document.pop("isolation_policy")
    for attempt in document["attempts"]:
        attempt.pop("worker_sandbox")
        attempt.pop("check_runs")
    path = tmp_path / "old.run.json"
    path.write_text(json.dumps(document))
    assert load_run_record(path) == record.record


sandboxes = st.builds(
    SandboxRun,
    isolation=st.sampled_from(Isolation),
    limits=st.lists(
        st.builds(
            SandboxLimit,
            kind=st.sampled_from(["memory", "processes", "cpu"]),
            value=st.none() | st.integers(1, 2**53 - 1),
            mechanism=st.sampled_from(["rlimit", "cgroup_v2", "none"]),
        ),
        max_size=3,
    ).map(tuple),
)


@given(
    st.lists(
        st.builds(
            CheckRun,
            check_id=st.text(min_size=1, max_size=5).filter(str.strip),
            sandbox=st.none() | sandboxes,
            reason=st.none() | st.sampled_from(CheckReason),
        ),
        max_size=3,
    ),
    st.builds(
        IsolationPolicy, minimum=st.sampled_from(Isolation), accept_below_overlay=st.booleans()
    ),
)
def test_isolation_records_round_trip(runs: list[CheckRun], policy: IsolationPolicy) -> None:
    """For all check runs and policies: from_dict(to_dict(x)) == x."""
    for run in runs:
        assert CheckRun.from_dict(run.to_dict()) == run
    assert IsolationPolicy.from_dict(policy.to_dict()) == policy


@pytest.mark.parametrize("weak_in", ["worker", "check"])
def test_a_sandbox_that_falls_below_the_minimum_at_run_time_is_no_evidence(
    work: Path, monkeypatch: pytest.MonkeyPatch, weak_in: str
) -> None:
    """A capture weaker than the run's minimum: the worker's is a sandbox_error, a check's a
    verification error; neither is evidence, and the weaker level is still recorded."""
    real = run_sandboxed
    loaded = load_config(work / "demo" / "config.json")
    if loaded.isolation_policy is None or loaded.isolation_policy.minimum is Isolation.COPY:
        pytest.fail("this machine offers no namespace sandbox: nothing can fall below it")

    def falls_back(spec: Any, **kwargs: Any) -> Any:
        capture = real(spec, **kwargs)
        weak = (spec.capture is CaptureMode.PATCH) == (weak_in == "worker")
        return attrs.evolve(capture, isolation=Isolation.COPY) if weak else capture

    monkeypatch.setattr(command, "run_sandboxed", falls_back)
    monkeypatch.setattr(command_worker, "run_sandboxed", falls_back)
    loaded = attrs.evolve(loaded, attempts=loaded.attempts[:1])
    (attempt,) = run_detailed(loaded).record.attempts
    assert attempt.error is not None
    assert "below the run's minimum" in attempt.error.message
    if weak_in == "worker":
        assert attempt.state is AttemptState.WORKER_ERROR
        assert attempt.error.code is AttemptErrorCode.SANDBOX_ERROR
        assert attempt.worker_sandbox is not None
        assert attempt.worker_sandbox.isolation is Isolation.COPY
    else:
        assert attempt.state is AttemptState.VERIFICATION_ERROR
        assert attempt.check_runs[-1].sandbox is not None
        assert attempt.check_runs[-1].sandbox.isolation is Isolation.COPY


def test_reruns_run_under_the_same_limits(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Corroboration reruns get the run's limits (config and command line), not defaults."""
    seen: list[Any] = []
    real = corroborate

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["limits"])
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "corroborate", spy)
    config = _config(work, limits={"cpu_seconds": 120})
    run_pipeline(
        config,
        work / "results" / "demo",
        reruns=1,
        results_root=work / "results",
        limit_overrides={"processes": 64},
        replay_mode="none",
    )
    assert seen
    assert {(x.cpu_seconds, x.processes) for x in seen} == {(120, 64)}
