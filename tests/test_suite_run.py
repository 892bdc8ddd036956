"""kernel.effects.suite and `kernel suite`: instances and predictions in SWE-bench formats,
calibration before judgement, one evidence folder per instance, resumable, the summary."""

from __future__ import annotations

import concurrent.futures
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernel.effects.cli import main
from kernel.effects.environments import CACHE_ENV
from kernel.effects.suite import SuiteOutcome, load_instances, run_suite
from kernel.errors import ConfigError
from kernel.run.record import CalibrationReason, RunRecord
from kernel.run.suite import InstanceResult, PredictionStatus, Resolution

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "suite-demo"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SuiteOutcome]:
    """The bundled demo suite (two instances x three models), judged once."""
    base = tmp_path_factory.mktemp("suite")
    outcome = run_suite(
        DEMO / "instances.json",
        DEMO / "predictions.jsonl",
        base / "results/suite",
        results_root=base / "results",
        max_workers=2,
    )
    return base, outcome


def _statuses(outcome: SuiteOutcome) -> dict[tuple[str, str], tuple[str, str | None]]:
    return {
        (p.instance_id, p.model): (str(p.status), p.resolution and str(p.resolution))
        for r in outcome.summary.instances
        for p in r.predictions
    }


def test_each_prediction_is_judged_by_its_tests_and_the_verifier(
    demo: tuple[Path, SuiteOutcome],
) -> None:
    """The truth of the demo suite: the correct fix resolves, the wrong fix does not (with
    its failing tests), the empty patch is counted apart on the valid instance, and
    every prediction on the instance with a wrong test id, the empty one included, is an
    error (the instance is not judged)."""
    _, outcome = demo
    assert _statuses(outcome) == {
        ("demo__median-even", "model-a"): ("resolved", "FULL"),
        ("demo__median-even", "model-b"): ("unresolved", "NO"),
        ("demo__median-even", "model-c"): ("empty_patch", None),
        ("demo__wrong-test-id", "model-a"): ("error", None),
        ("demo__wrong-test-id", "model-b"): ("error", None),
        ("demo__wrong-test-id", "model-c"): ("error", None),
    }
    wrong = outcome.summary.instances[0].predictions[1]
    assert wrong.failing_tests == (
        "test_stats.StatsTest.test_median_even",
        "test_stats.StatsTest.test_median_unsorted_input_untouched",
    )
    counts = {
        m.model: (m.resolved, m.unresolved, m.error, m.empty_patch) for m in outcome.summary.models
    }
    assert counts == {"model-a": (1, 0, 1, 0), "model-b": (0, 1, 1, 0), "model-c": (0, 0, 1, 1)}


def test_calibration_is_recorded_and_refuses_a_wrong_test_id(
    demo: tuple[Path, SuiteOutcome],
) -> None:
    """The valid instance's table shows F2P failing and P2P passing on the baseline and
    all passing with the reference; the wrong test id is found before anything runs."""
    base, outcome = demo
    valid, invalid = (r.calibration for r in outcome.summary.instances)
    assert valid.valid
    assert [(str(t.baseline), str(t.reference)) for t in valid.tests] == [
        ("failed", "passed"),
        *[("passed", "passed")] * 3,
    ]
    assert not invalid.valid
    assert invalid.reasons == (CalibrationReason.UNKNOWN_TEST_ID,)
    # Only the misspelt id carries the reason; the others were not run because of it.
    assert [(t.test_id.rpartition(".")[2], t.reason) for t in invalid.tests] == [
        ("test_median_evenn", CalibrationReason.UNKNOWN_TEST_ID),
        ("test_mean", CalibrationReason.REFUSED_FOR_ANOTHER_TEST),
        ("test_median_odd", CalibrationReason.REFUSED_FOR_ANOTHER_TEST),
        ("test_median_unsorted_input_untouched", CalibrationReason.REFUSED_FOR_ANOTHER_TEST),
    ]
    folder = base / "results/suite/instances"
    assert not (folder / "demo__wrong-test-id/run.json").exists()
    saved = json.loads((folder / "demo__median-even/calibration.json").read_text())
    assert saved == valid.to_dict()


def test_one_evidence_folder_per_instance_and_the_summary_files(
    demo: tuple[Path, SuiteOutcome],
) -> None:
    """Each judged instance has its run record (with per-test outcomes), report views and
    its instance result; the summary is written as JSON, Markdown and HTML."""
    base, outcome = demo
    folder = base / "results/suite/instances/demo__median-even"
    for name in ("run.json", "evidence.json", "evidence.md", "evidence.html", "instance.json"):
        assert (folder / name).is_file(), name
    run = RunRecord.from_dict(json.loads((folder / "run.json").read_text()))
    saved = InstanceResult.from_dict(json.loads((folder / "instance.json").read_text()))
    assert saved.run_digest == run.digest
    assert {a.attempt_id for a in run.attempts} == {"model-a", "model-b"}
    summary = json.loads((base / "results/suite/summary.json").read_text())
    assert summary == outcome.summary.to_dict()
    assert "Calibration" in (base / "results/suite/summary.html").read_text()
    assert not (base / "results/suite/.work").exists()


def test_a_resumed_suite_runs_nothing_and_writes_the_same_bytes(
    demo: tuple[Path, SuiteOutcome],
) -> None:
    """Instances already judged with the same input digests are not run again."""
    base, outcome = demo
    before = (base / "results/suite/summary.json").read_bytes()
    again = run_suite(
        DEMO / "instances.json",
        DEMO / "predictions.jsonl",
        base / "results/suite",
        results_root=base / "results",
    )
    assert again.judged == 0
    assert (base / "results/suite/summary.json").read_bytes() == before
    assert again.summary == outcome.summary


def test_the_verb_prints_the_resolved_rate(
    demo: tuple[Path, SuiteOutcome],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`kernel suite` prints each model's resolved rate and exits 1 when an instance
    was not judged."""
    base, _ = demo
    monkeypatch.chdir(base)
    code = main(
        [
            "suite",
            "--instances",
            str(DEMO / "instances.json"),
            "--predictions",
            str(DEMO / "predictions.jsonl"),
            "-q",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "model-a: resolved 1/2 (50.0%), unresolved 0, error 1, empty patch 0" in out
    assert "not judged: demo__wrong-test-id" in out


def _write(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return path


def _instances(tmp_path: Path, **changes: Any) -> Path:
    items = json.loads((DEMO / "instances.json").read_text())[:1]
    items[0]["repo"] = str(ROOT / "fixtures/demo/repo")
    items[0].update(changes)
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(items))
    return path


@pytest.mark.parametrize(
    ("instance", "predictions", "message"),
    [
        (
            {},
            [{"instance_id": "nope", "model_name_or_path": "m", "model_patch": ""}],
            "unknown instance 'nope'",
        ),
        (
            {},
            [{"instance_id": "demo__median-even", "model_name_or_path": "m", "model_patch": ""}]
            * 2,
            "predicts 'demo__median-even' twice",
        ),
        ({"python": "no-such-python3"}, [], "python"),
        ({"instance_id": "../escape"}, [], "instance_id"),
        ({"FAIL_TO_PASS": "[not json"}, [], "FAIL_TO_PASS"),
        ({"repo": "absent"}, [], "repo: not a folder"),
        ({"repo": 5}, [], "[demo__median-even].repo: expected a string or null"),
        ({"repo": ""}, [], "[demo__median-even].repo: missing repository"),
        ({"environment": "requirements.txt"}, [], '.environment: expected {"requirements": PATH}'),
        ({"environment": {"requirements": "r.txt", "pip": "x"}}, [], ".environment: expected"),
        ({"python": "/usr/bin/python3"}, [], ".python: expected an interpreter name on PATH"),
        ({"protected": ["tests/*", ""]}, [], ".protected: expected an array of globs"),
        ({"timeout_s": 0}, [], ".timeout_s: expected an integer >= 1"),
        ({"timeout_s": True}, [], ".timeout_s: expected an integer >= 1"),
        ({"FAIL_TO_PASS": ["test_a", 1]}, [], ".FAIL_TO_PASS: expected an array of test ids"),
        ({"PASS_TO_PASS": [" "]}, [], ".PASS_TO_PASS: expected an array of test ids"),
        ({"notes": {"score": 0.5}}, [], "[demo__median-even]: $.notes.score"),
        (
            {},
            [{"instance_id": "demo__median-even", "model_name_or_path": " ", "model_patch": ""}],
            "[0].model_name_or_path: expected a name",
        ),
        (
            {},
            [{"instance_id": "demo__median-even", "model_name_or_path": "m", "model_patch": 5}],
            "[0].model_patch: expected a string or null",
        ),
    ],
)
def test_unusable_inputs_stop_before_anything_runs(
    tmp_path: Path,
    instance: dict[str, Any],
    predictions: list[dict[str, Any]],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A bad instance or prediction exits 2 with one line, and nothing is written."""
    monkeypatch.chdir(tmp_path)
    path = _instances(tmp_path, **instance)
    preds = _write(
        tmp_path / "p.jsonl",
        predictions
        or [{"instance_id": "demo__median-even", "model_name_or_path": "m", "model_patch": ""}],
    )
    assert main(["suite", "--instances", str(path), "--predictions", str(preds)]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "results").exists()


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_a_git_repository_at_a_base_commit_with_a_test_patch(tmp_path: Path) -> None:
    """``repo`` a git repository: the baseline is ``base_commit`` (not the newer tip),
    the ``test_patch`` adds the FAIL_TO_PASS test, and a test missing from the baseline
    import (a dependency the sandbox lacks) makes the instance invalid, not the patch."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "fixtures/demo/repo", repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / "stats.py").write_text("raise SystemExit('the tip is not the baseline')\n")
    _git(repo, "commit", "-qam", "tip")
    test_patch = (
        "diff --git a/test_even.py b/test_even.py\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/test_even.py\n@@ -0,0 +1,6 @@\n"
        "+import unittest\n+import stats\n+\n+class EvenTest(unittest.TestCase):\n"
        "+    def test_even(self):\n+        self.assertEqual(stats.median([1, 2, 3, 4]), 2.5)\n"
    )
    demo = json.loads((DEMO / "instances.json").read_text())[0]
    predictions = [
        json.loads(line) for line in (DEMO / "predictions.jsonl").read_text().splitlines()
    ]
    items = [
        {
            "instance_id": "git-1",
            "repo": "repo",
            "base_commit": base,
            "test_patch": test_patch,
            "FAIL_TO_PASS": ["test_even.EvenTest.test_even"],
            "PASS_TO_PASS": demo["PASS_TO_PASS"],
            "patch": demo["patch"],
        },
        {
            "instance_id": "missing-dependency",
            "repo": "repo",
            "base_commit": base,
            "test_patch": test_patch.replace("import stats", "import numpy_absent_here"),
            "FAIL_TO_PASS": ["test_even.EvenTest.test_even"],
            "PASS_TO_PASS": demo["PASS_TO_PASS"],
            "patch": demo["patch"],
        },
    ]
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps(items))
    preds = _write(
        tmp_path / "p.jsonl",
        [
            {**p, "instance_id": iid}
            for iid in ("git-1", "missing-dependency")
            for p in predictions[:2]
        ],
    )
    outcome = run_suite(instances, preds, tmp_path / "results/s", results_root=tmp_path / "results")
    assert _statuses(outcome) == {
        ("git-1", "model-a"): ("resolved", "FULL"),
        ("git-1", "model-b"): ("unresolved", "NO"),
        ("missing-dependency", "model-a"): ("error", None),
        ("missing-dependency", "model-b"): ("error", None),
    }
    missing = outcome.summary.instances[1].calibration
    # The FAIL_TO_PASS test's module cannot import what it needs: it errors at import,
    # which is no failing test but an environment error naming the module; the
    # PASS_TO_PASS tests of the other module run and pass, and are not blamed.
    assert missing.reasons == (CalibrationReason.TEST_MODULE_NOT_IMPORTABLE,)
    assert str(missing.tests[0].reference) == "error"
    assert [(t.reason, t.missing_module) for t in missing.tests] == [
        (CalibrationReason.TEST_MODULE_NOT_IMPORTABLE, "numpy_absent_here"),
        *[(None, None)] * (len(missing.tests) - 1),
    ]


class _Lost(concurrent.futures.ThreadPoolExecutor):
    """Loses the second instance's task (a worker killed past the scheduler's retries)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if args and getattr(args[0], "instance_id", "") == "demo__wrong-test-id":
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            future.set_exception(RuntimeError("KilledWorker"))
            return future
        return super().submit(fn, *args, **kwargs)


def test_a_lost_instance_task_is_a_control_error(tmp_path: Path) -> None:
    """A task that never completes makes its instance's predictions (empty ones too)
    ``error`` with the reason ``infrastructure_fault``; the other instances are judged as usual."""
    with _Lost(max_workers=1) as pool:
        outcome = run_suite(
            DEMO / "instances.json",
            DEMO / "predictions.jsonl",
            tmp_path / "results/s",
            results_root=tmp_path / "results",
            executor=pool,
        )
    lost = outcome.summary.instances[1]
    assert lost.calibration.reasons == (CalibrationReason.INFRASTRUCTURE_FAULT,)
    # Nothing of it was judged: its empty patch too is an error, not an empty patch.
    assert {p.status for p in lost.predictions} == {PredictionStatus.ERROR}
    assert outcome.summary.instances[0].predictions[0].resolution is Resolution.FULL


def test_load_instances_reads_swe_bench_lists_encoded_as_strings() -> None:
    """SWE-bench ships FAIL_TO_PASS and PASS_TO_PASS as JSON-encoded strings."""
    first = load_instances(DEMO / "instances.json")[0]
    assert first.fail_to_pass == ("test_stats.StatsTest.test_median_even",)
    assert len(first.pass_to_pass) == 3


def _git_copy(tmp_path: Path) -> Path:
    """A git repository of the demo's baseline, one commit."""
    repo = tmp_path / "git-repo"
    shutil.copytree(ROOT / "fixtures/demo/repo", repo)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "baseline"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
            cwd=repo,
            check=True,
            capture_output=True,
        )
    return repo


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("test patch", "test_patch does not apply"),
        ("base commit", "demo__median-even: base commit 0123abcd not found"),
        ("environment", "[demo__median-even].environment: environment: pip install"),
    ],
)
def test_an_instance_whose_baseline_cannot_be_made_stops_the_suite(
    case: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A test patch that does not apply to the baseline, a base commit the repository
    does not have, or an environment that cannot be built is the suite's input error
    (exit 2, naming the instance), never a verdict on a prediction."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "environments"))
    cases: dict[str, dict[str, Any]] = {
        "test patch": {
            "test_patch": "diff --git a/absent.py b/absent.py\n--- a/absent.py\n"
            "+++ b/absent.py\n@@ -1 +1 @@\n-old\n+new\n"
        },
        "base commit": {"repo": str(_git_copy(tmp_path)), "base_commit": "0123abcd"},
        "environment": {"environment": {"requirements": "requirements.txt"}},
    }
    changes = cases[case]
    (tmp_path / "requirements.txt").write_text("--no-index\nunpinned-package\n")
    path = _instances(tmp_path, **changes)
    preds = _write(
        tmp_path / "p.jsonl",
        [{"instance_id": "demo__median-even", "model_name_or_path": "m", "model_patch": ""}],
    )
    assert main(["suite", "--instances", str(path), "--predictions", str(preds)]) == 2
    assert message in capsys.readouterr().err
    assert not list((tmp_path / "results").rglob("instance.json"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a non-empty array (or lines) of instance objects"),
        ("[]", "expected a non-empty array (or lines) of instance objects"),
        ("[1, 2]", "expected a non-empty array (or lines) of instance objects"),
        ('"one"\n', "expected a non-empty array (or lines) of instance objects"),
        ('{"instance_id": "a"}\n\n{not json\n', "line 3: not JSON"),
    ],
)
def test_an_instances_file_holds_objects(tmp_path: Path, text: str, message: str) -> None:
    """An instances file is a JSON array of objects or JSON lines of objects: anything
    else, or nothing, is refused naming the file (and the line that is not JSON)."""
    path = tmp_path / "instances.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {message}")):
        load_instances(path)


def test_an_instance_listed_twice_is_refused(tmp_path: Path) -> None:
    """Two instances with one id would share one evidence folder: refused by name."""
    path = _instances(tmp_path)
    path.write_text(json.dumps(json.loads(path.read_text()) * 2))
    with pytest.raises(ConfigError, match="instance 'demo__median-even' appears twice"):
        load_instances(path)


def test_max_workers_below_one_is_refused(tmp_path: Path) -> None:
    """--max-workers 0 is a usage error."""
    with pytest.raises(ConfigError, match="max-workers"):
        run_suite(
            DEMO / "instances.json",
            DEMO / "predictions.jsonl",
            tmp_path / "r",
            results_root=tmp_path,
            max_workers=0,
        )
