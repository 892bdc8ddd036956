"""Tests for kernel.effects.orchestrate: fixture adapters, determinism, config errors."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from kernel.effects.adapters.base import AdapterRegistry, VerifierAdapter
from kernel.effects.orchestrate import (
    AttemptContext,
    ConfigSource,
    WorkerAdapter,
    WorkerFailed,
    WorkerProduced,
    builtin_registry,
    load_config,
    run_config,
)
from kernel.effects.run_config import AttemptEntry
from kernel.errors import ConfigError, DuplicateAdapterError, EffectError
from kernel.run.record import AttemptErrorCode, AttemptState
from kernel.run.verification import (
    Recommendation,
    ResultManifest,
    VerificationResult,
    WorkUnit,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "orchestration"


def test_same_config_same_bytes_wherever_the_checkout_lives(tmp_path: Path) -> None:
    """A copy of the fixtures elsewhere gives the identical run record (no absolute paths)."""
    copy = tmp_path / "somewhere" / "else"
    shutil.copytree(FIXTURES, copy)
    for name in ("two-attempt-good-vs-bad", "nine-attempt-all-states"):
        here = run_config(FIXTURES / f"{name}.json")
        there = run_config(copy / f"{name}.json")
        assert here.to_dict() == there.to_dict()
        assert str(tmp_path) not in json.dumps(there.to_dict())


def test_every_failure_point_has_its_state_and_code() -> None:
    """The nine-attempt fixture covers each control failure with its own code."""
    run = run_config(FIXTURES / "nine-attempt-all-states.json")
    got = [(a.state, a.error.code if a.error else None) for a in run.attempts]
    assert got == [
        (AttemptState.VERIFIED, None),
        (AttemptState.VERIFIED, None),
        (AttemptState.WORKER_ERROR, AttemptErrorCode.WORKER_FAILED),
        (AttemptState.RESULT_MANIFEST_ERROR, AttemptErrorCode.MANIFEST_INVALID),
        (AttemptState.RESULT_MANIFEST_ERROR, AttemptErrorCode.MANIFEST_UNREADABLE),
        (AttemptState.RESULT_MANIFEST_ERROR, AttemptErrorCode.MANIFEST_BINDING),
        (AttemptState.VERIFICATION_ERROR, AttemptErrorCode.VERIFIER_FAILED),
        (AttemptState.VERIFIED, None),
        (AttemptState.VERIFIED, None),
    ]
    recommendations = [a.verification.recommendation for a in run.attempts if a.verification]
    assert recommendations == [
        Recommendation.ACCEPT_CANDIDATE,
        Recommendation.REJECT_CANDIDATE,
        Recommendation.INSUFFICIENT_EVIDENCE,
        Recommendation.ESCALATE,
    ]


def test_larger_n_runs() -> None:
    """N is not fixed at two: the hundred-attempt fixture keeps all hundred attempts."""
    run = run_config(FIXTURES / "hundred-attempt-mixed.json")
    assert len(run.attempts) == 100
    assert [a.order for a in run.attempts] == list(range(1, 101))


def test_missing_manifest_is_a_result_manifest_error(tmp_path: Path) -> None:
    """A worker that names a manifest that does not exist yields manifest-missing."""
    shutil.copytree(FIXTURES, tmp_path / "f")
    (tmp_path / "f" / "candidates" / "bad" / "result-manifest.json").unlink()
    run = run_config(tmp_path / "f" / "two-attempt-good-vs-bad.json")
    error = run.attempts[1].error
    assert error is not None
    assert error.code is AttemptErrorCode.MANIFEST_MISSING


def test_a_new_adapter_kind_plugs_in_through_the_registry(tmp_path: Path) -> None:
    """A later adapter kind (e.g. "command") registers a factory; the run records it."""

    class Refusing:
        kind = "test-refusing"
        version = "0"

        def run(self, context: AttemptContext) -> WorkerProduced | WorkerFailed:
            return WorkerFailed(message=f"{context.attempt_id} refused at /tmp/secret")

    def factory(entry: Mapping[str, object], source: ConfigSource) -> WorkerAdapter:
        source.parse(AttemptEntry, entry, "attempt")
        return Refusing()

    registry = builtin_registry()
    registry.add_worker("test-refusing", factory)
    shutil.copytree(FIXTURES, tmp_path / "f")
    config = json.loads((FIXTURES / "two-attempt-good-vs-bad.json").read_text())
    config["attempts"][1] = {"attempt_id": "attempt-002", "adapter": "test-refusing"}
    (tmp_path / "f" / "c.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="unknown worker adapter 'test-refusing'"):
        run_config(tmp_path / "f" / "c.json")
    run = run_config(tmp_path / "f" / "c.json", registry=registry)
    attempt = run.attempts[1]
    assert (attempt.adapter, attempt.adapter_version) == ("test-refusing", "0")
    assert attempt.error is not None
    assert attempt.error.message == "attempt-002 refused at <path>"


def test_each_run_gets_the_verifier_its_for_run_gives(tmp_path: Path) -> None:
    """`VerifierAdapter.for_run` is part of the protocol: a verifier that keeps nothing
    inherits the default (itself); one that keeps state between attempts gives each
    run a fresh copy, and the run judges with that copy, never with the loaded one."""
    fixture = load_config(FIXTURES / "two-attempt-good-vs-bad.json").verifier
    assert fixture.for_run() is fixture
    copies: list[VerifierAdapter] = []
    judged_by_fresh: list[bool] = []

    @attrs.frozen
    class Scoped(VerifierAdapter):
        inner: VerifierAdapter
        fresh: bool = False
        kind: str = "scoped"
        version: str = "0"

        def verify(
            self, work_unit: WorkUnit, manifest: ResultManifest, produced: WorkerProduced
        ) -> VerificationResult:
            judged_by_fresh.append(self.fresh)
            return self.inner.verify(work_unit, manifest, produced)

        def for_run(self) -> VerifierAdapter:
            copies.append(attrs.evolve(self, fresh=True))
            return copies[-1]

    registry = builtin_registry()
    fixture_policy = registry.verifier("fixture-policy")
    assert fixture_policy is not None

    def factory(entry: Mapping[str, object], source: ConfigSource) -> tuple[VerifierAdapter, str]:
        inner, digest = fixture_policy({**entry, "adapter": "fixture-policy"}, source)
        return Scoped(inner), digest

    registry.add_verifier("scoped", factory)
    shutil.copytree(FIXTURES, tmp_path / "f")
    config = json.loads((FIXTURES / "two-attempt-good-vs-bad.json").read_text())
    config["verifier"]["adapter"] = "scoped"
    (tmp_path / "f" / "c.json").write_text(json.dumps(config))
    first = run_config(tmp_path / "f" / "c.json", registry=registry)
    second = run_config(tmp_path / "f" / "c.json", registry=registry)
    assert len(copies) == 2
    assert judged_by_fresh == [True] * 4
    assert first.to_dict() == second.to_dict()


def test_a_duplicate_registration_is_an_error() -> None:
    """A second factory for a registered kind is refused, never a silent replacement."""
    registry = builtin_registry()
    worker = registry.worker("command")
    verifier = registry.verifier("fixture-policy")
    if worker is None or verifier is None:
        pytest.fail("the built-in registry lacks its adapters")
    with pytest.raises(DuplicateAdapterError, match="worker adapter 'command'"):
        registry.add_worker("command", worker)
    with pytest.raises(DuplicateAdapterError, match="verifier adapter 'fixture-policy'"):
        registry.add_verifier("fixture-policy", verifier)
    assert registry.worker("command") is worker
    empty = AdapterRegistry()
    assert empty.worker("command") is None
    assert empty.verifier("command") is None


def test_importing_the_adapters_registers_nothing_globally() -> None:
    """Each registry is built by its caller: two builds are independent objects."""
    one, two = builtin_registry(), builtin_registry()
    worker = one.worker("command")
    if worker is None:
        pytest.fail("the built-in registry lacks the command worker")
    one.add_worker("only-in-one", worker)
    assert two.worker("only-in-one") is None


CONFIG_ERRORS: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "unknown-key": (lambda c: c.update(extra=1), "$.extra"),
    "missing-key": (lambda c: c.pop("attempts"), "$.attempts"),
    "wrong-kind": (lambda c: c.update(kind="idkmesh"), "$.kind"),
    "no-attempts": (lambda c: c.update(attempts=[]), "$.attempts"),
    "duplicate-attempt": (
        lambda c: c["attempts"][1].update(attempt_id="attempt-001"),
        "$.attempts[1].attempt_id",
    ),
    "unknown-adapter": (
        lambda c: c["attempts"][0].update(adapter="magic"),
        "$.attempts[0].adapter",
    ),
    "escaping-path": (lambda c: c.update(work_unit="../x.json"), "$.work_unit"),
    "absolute-path": (lambda c: c.update(work_unit="/etc/passwd"), "$.work_unit"),
    "float": (lambda c: c.update(run_id=1.5), "$.run_id"),
    "unknown-verifier": (lambda c: c["verifier"].update(adapter="x"), "$.verifier.adapter"),
}


@pytest.mark.parametrize("name", sorted(CONFIG_ERRORS))
def test_unusable_configs_are_refused_naming_file_and_key(name: str, tmp_path: Path) -> None:
    """Config errors raise ConfigError naming the file and the key."""
    shutil.copytree(FIXTURES, tmp_path / "f")
    config = json.loads((FIXTURES / "two-attempt-good-vs-bad.json").read_text())
    edit, key = CONFIG_ERRORS[name]
    edit(config)
    path = tmp_path / "f" / "c.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ")
    assert key in str(info.value)


def test_missing_config_is_an_effect_error(tmp_path: Path) -> None:
    """A missing config file is an EffectError naming it."""
    with pytest.raises(EffectError) as info:
        load_config(tmp_path / "nope.json")
    assert "nope.json" in str(info.value)


def test_a_required_validator_the_verifier_lacks_stops_the_load(tmp_path: Path) -> None:
    """A work unit requiring a check id the command verifier does not have is refused when
    the config loads (one line naming the id), not after every attempt ran."""
    demo = Path(__file__).resolve().parents[1] / "fixtures" / "demo"
    shutil.copytree(demo, tmp_path / "demo")
    unit = tmp_path / "demo" / "work-unit.json"
    document = json.loads(unit.read_text())
    document["required_validators"] = ["protected-paths", "unit-test"]
    unit.write_text(json.dumps(document))
    with pytest.raises(ConfigError, match="'unit-test' is not a check of the verifier"):
        load_config(tmp_path / "demo" / "config.json")


def test_a_misspelt_test_id_stops_the_load(tmp_path: Path) -> None:
    """A declared test the baseline statically does not define is refused when the config
    loads (one line naming it), not a check that fails every attempt."""
    demo = Path(__file__).resolve().parents[1] / "fixtures" / "demo"
    shutil.copytree(demo, tmp_path / "demo")
    config = tmp_path / "demo" / "config.json"
    document = json.loads(config.read_text())
    document["verifier"]["checks"][0]["tests"]["fail_to_pass"] = [
        "test_stats.StatsTest.test_median_evenn"
    ]
    config.write_text(json.dumps(document))
    with pytest.raises(
        ConfigError, match=r"unknown test id 'test_stats\.StatsTest\.test_median_evenn'"
    ):
        load_config(config)


@pytest.mark.parametrize(
    ("node_id", "why"),
    [
        ("test_stats.py::StatsTest::test_median_evenn", "defines no such test"),
        ("test_stats.py::StatsTest::test_median_evenn[1]", "defines no such test"),
        ("test_statz.py::StatsTest::test_median_even", "defines no such test"),
    ],
)
def test_a_misspelt_pytest_node_id_stops_the_load(tmp_path: Path, node_id: str, why: str) -> None:
    """pytest node ids are checked at load too (issue 19): a file the baseline lacks, or
    a class, method or parametrized function it does not define, is refused with one
    line naming the id, before anything runs."""
    demo = Path(__file__).resolve().parents[1] / "fixtures" / "demo"
    shutil.copytree(demo, tmp_path / "demo")
    config = tmp_path / "demo" / "config.json"
    document = json.loads(config.read_text())
    document["verifier"]["checks"][0]["tests"] = {
        "fail_to_pass": [node_id],
        "pass_to_pass": ["test_stats.py::StatsTest::test_mean"],
    }
    config.write_text(json.dumps(document))
    with pytest.raises(ConfigError, match=rf"unknown test id '{re.escape(node_id)}'.*{why}"):
        load_config(config)
    document["verifier"]["checks"][0]["tests"]["fail_to_pass"] = [
        "test_stats.py::StatsTest::test_median_even"
    ]
    config.write_text(json.dumps(document))
    assert load_config(config).run_id == "demo/median-fix"


def test_the_fixture_verifier_holds_a_candidate_to_its_manifest(tmp_path: Path) -> None:
    """A candidate whose bytes are not JSON is never accepted (acceptance inconclusive,
    its digest still checked); a manifest whose locator leaves the candidate folder
    (pointing at the good candidate) gets no bytes read through it: digest failed,
    acceptance inconclusive, never supported."""
    shutil.copytree(FIXTURES, tmp_path / "f")
    bad = tmp_path / "f" / "candidates" / "bad"
    garbled = b'{"answer": 42, "status": "ready"'
    (bad / "candidate-root" / "candidate.json").write_bytes(garbled)
    manifest = json.loads((bad / "result-manifest.json").read_text())
    manifest["artifacts"][0]["digest"] = hashlib.sha256(garbled).hexdigest()
    (bad / "result-manifest.json").write_text(json.dumps(manifest))
    good = tmp_path / "f" / "candidates" / "good"
    escaping = json.loads((good / "result-manifest.json").read_text())
    escaping["artifacts"][0]["locator"] = "../../good/candidate-root/candidate.json"
    (good / "result-manifest.json").write_text(json.dumps(escaping))
    run = run_config(tmp_path / "f" / "two-attempt-good-vs-bad.json")
    statuses = {}
    for attempt in run.attempts:
        assert attempt.verification is not None
        statuses[attempt.attempt_id] = {c.id: str(c.status) for c in attempt.verification.checks}
        assert attempt.verification.recommendation is not Recommendation.ACCEPT_CANDIDATE
    assert statuses["attempt-002"]["artifact-digest"] == "passed"
    assert statuses["attempt-002"]["independent-acceptance"] == "inconclusive"
    assert statuses["attempt-001"]["artifact-digest"] == "failed"
    assert statuses["attempt-001"]["independent-acceptance"] == "inconclusive"
