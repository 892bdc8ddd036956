"""kernel.effects.calibration: calibration before judgement in a plain `kernel run`.

Each test works on its own copy of the demo (a repository with a bug, its declared
tests, five attempts): the valid instance is calibrated and judged as before; a wrong
test id, a missing dependency, a reference patch that does not fix it and a lost
calibration task each stop the run before any attempt, with the per-test table.
"""

from __future__ import annotations

import concurrent.futures
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernel import Calibration, CalibrationReason, RunRecord
from kernel.effects.calibration import not_valid
from kernel.effects.cli import main
from kernel.effects.orchestrate import load_config, run_detailed
from kernel.effects.pipeline import run_pipeline
from kernel.errors import ConfigError, EffectError, RefusedError
from kernel.run.report import RunEvidenceReport

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = json.loads((ROOT / "fixtures/suite-demo/instances.json").read_text())[0]["patch"]
WRONG_FIX = next(
    json.loads(line)["model_patch"]
    for line in (ROOT / "fixtures/suite-demo/predictions.jsonl").read_text().splitlines()
    if json.loads(line)["model_name_or_path"] == "model-b"
)


def _demo(tmp_path: Path, edit: Callable[[dict[str, Any]], None] = lambda _c: None) -> Path:
    """A copy of the demo with its config edited by ``edit``; returns the config path."""
    shutil.copytree(ROOT / "fixtures/demo", tmp_path / "demo")
    config = tmp_path / "demo/config.json"
    document = json.loads(config.read_text())
    edit(document)
    config.write_text(json.dumps(document))
    return config


def _refused(config: Path) -> Calibration:
    with pytest.raises(RefusedError) as info:
        run_detailed(load_config(config))
    assert isinstance(info.value.refusal, Calibration)
    assert "no attempt was judged" in str(info.value)
    return info.value.refusal


def test_the_demo_is_calibrated_and_its_story_is_unchanged(tmp_path: Path) -> None:
    """The demo's declared tests on the baseline: the FAIL_TO_PASS test fails, the
    PASS_TO_PASS tests pass: valid, recorded in run.json and the report (every view),
    and the attempts are judged as before (correct fix supported, wrong fix rejected)."""
    config = _demo(tmp_path)
    result = run_pipeline(
        config,
        tmp_path / "results/demo",
        results_root=tmp_path / "results",
        reruns=0,
        replay_mode="none",
    )
    s = result.report.summary
    assert (s.supported, s.rejected, s.control_errors) == (2, 2, 1)
    calibration = result.outcome.record.calibration
    assert calibration is not None
    assert calibration.valid
    assert [(str(t.kind), str(t.baseline), t.reference, t.reason) for t in calibration.tests] == [
        ("fail_to_pass", "failed", None, None),
        *[("pass_to_pass", "passed", None, None)] * 3,
    ]
    saved = RunRecord.from_dict(json.loads(result.files["run.json"].read_text()))
    assert saved.calibration == calibration
    report = RunEvidenceReport.from_dict(json.loads(result.files["evidence.json"].read_text()))
    assert report.calibration == calibration
    for name in ("evidence.md", "evidence.html"):
        assert "This instance: valid." in result.files[name].read_text()
    assert not (tmp_path / "results/demo/calibration.json").exists()
    # The calibration attempts are not attempts of the run.
    assert [a.attempt_id for a in saved.attempts] == [f"attempt-{i}" for i in range(1, 6)]


def _second_check(fail_to_pass: str) -> Callable[[dict[str, Any]], None]:
    """An edit adding the declared-tests check ``more-tests`` (``fail_to_pass`` must
    fail, ``test_median_odd`` pass) and keeping the correct fix's attempt alone."""

    def edit(c: dict[str, Any]) -> None:
        c["verifier"]["checks"].append(
            {
                "id": "more-tests",
                "timeout_s": 60,
                "tests": {
                    "fail_to_pass": [f"test_stats.StatsTest.{fail_to_pass}"],
                    "pass_to_pass": ["test_stats.StatsTest.test_median_odd"],
                },
            }
        )
        c["attempts"] = c["attempts"][:1]

    return edit


def test_every_declared_tests_check_is_calibrated(tmp_path: Path) -> None:
    """Not only the first: each declared-tests check's baseline outcome per test, under
    its check, in run.json, evidence.json and every view."""
    config = _demo(tmp_path, _second_check("test_median_even"))
    result = run_pipeline(
        config,
        tmp_path / "results/two",
        results_root=tmp_path / "results",
        reruns=0,
        replay_mode="none",
    )
    calibration = result.outcome.record.calibration
    assert calibration is not None
    assert calibration.valid
    rows = [(t.check_id, t.test_id.rpartition(".")[2], str(t.baseline)) for t in calibration.tests]
    assert rows == [
        ("unit-tests", "test_median_even", "failed"),
        ("unit-tests", "test_mean", "passed"),
        ("unit-tests", "test_median_odd", "passed"),
        ("unit-tests", "test_median_unsorted_input_untouched", "passed"),
        ("more-tests", "test_median_even", "failed"),
        ("more-tests", "test_median_odd", "passed"),
    ]
    saved = RunRecord.from_dict(json.loads(result.files["run.json"].read_text()))
    assert saved.calibration == calibration
    report = RunEvidenceReport.from_dict(json.loads(result.files["evidence.json"].read_text()))
    assert report.calibration == calibration
    for name in ("evidence.md", "evidence.html"):
        page = result.files[name].read_text()
        calibration_part = page[page.index("Calibration") :]
        assert "more-tests" in calibration_part
        assert "unit-tests" in calibration_part


def test_an_invalid_second_check_stops_the_run(tmp_path: Path) -> None:
    """A second declared-tests check whose FAIL_TO_PASS test already passes on the
    baseline: the instance is invalid, that row (under its check) says why, and no
    attempt is judged."""
    calibration = _refused(_demo(tmp_path, _second_check("test_mean")))
    assert calibration.reasons == (CalibrationReason.FAIL_TO_PASS_PASSES,)
    blamed = [(t.check_id, t.test_id, t.reason) for t in calibration.tests if t.reason]
    assert blamed == [
        ("more-tests", "test_stats.StatsTest.test_mean", CalibrationReason.FAIL_TO_PASS_PASSES)
    ]
    assert {t.check_id for t in calibration.tests} == {"unit-tests", "more-tests"}
    # The one line names the check of each blamed test (a test may be in two checks).
    line = "more-tests: test_stats.StatsTest.test_mean (fail_to_pass_passes_on_baseline)"
    assert line in not_valid(calibration)


def test_a_wrong_test_id_left_to_calibration_stops_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A declared id in a module the baseline lacks (not decidable at load: it may be
    generated or installed) is refused at calibration: `kernel run` exits 1 with one
    line and the per-test table, the folder holds only calibration.json, nothing was
    judged."""

    def edit(c: dict[str, Any]) -> None:
        c["verifier"]["checks"][0]["tests"]["pass_to_pass"][0] = "test_statz.StatsTest.test_mean"

    config = _demo(tmp_path, edit)
    out = tmp_path / "results/wrong"
    code = main(
        [
            "run",
            "--config",
            str(config),
            "--output-dir",
            str(out),
            "--results-root",
            str(tmp_path / "results"),
            "--reruns",
            "0",
            "--replay",
            "none",
        ]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "refused: calibration: demo/median-fix is not valid:" in err
    # Only the test whose module is missing is blamed, as an environment error naming
    # that module; the other tests ran as the baseline has them.
    blamed = (
        "test_statz.StatsTest.test_mean (environment_error_test_module_not_importable:"
        " no module named 'test_statz')"
    )
    assert f"environment_error_test_module_not_importable; {blamed}; no attempt" in err
    assert sorted(p.name for p in out.iterdir()) == ["calibration.json"]
    saved = Calibration.from_dict(json.loads((out / "calibration.json").read_text()))
    assert not saved.valid
    assert saved.reasons == (CalibrationReason.TEST_MODULE_NOT_IMPORTABLE,)
    assert [(str(t.baseline), t.reason, t.missing_module) for t in saved.tests] == [
        ("failed", None, None),
        ("error", CalibrationReason.TEST_MODULE_NOT_IMPORTABLE, "test_statz"),
        ("passed", None, None),
        ("passed", None, None),
    ]
    assert saved.tests[1].test_id == "test_statz.StatsTest.test_mean"


def test_a_missing_dependency_is_refused_at_calibration_not_blamed_on_a_patch(
    tmp_path: Path,
) -> None:
    """The declared tests' module imports a module the sandbox lacks: every test errors
    at its import on the baseline, the FAIL_TO_PASS test included (it did not fail
    inside the test), so each is blamed as an environment error naming the missing
    module and the instance is refused before any patch is judged (never a rejected
    patch)."""
    config = _demo(tmp_path)
    tests = tmp_path / "demo/repo/test_stats.py"
    tests.write_text("import numpy_absent_here\n" + tests.read_text())
    calibration = _refused(config)
    assert calibration.reasons == (CalibrationReason.TEST_MODULE_NOT_IMPORTABLE,)
    assert [(str(t.baseline), t.reason, t.missing_module) for t in calibration.tests] == [
        ("error", CalibrationReason.TEST_MODULE_NOT_IMPORTABLE, "numpy_absent_here")
    ] * 4


def test_a_missing_dependency_blames_only_the_tests_of_the_module_that_needs_it(
    tmp_path: Path,
) -> None:
    """One declared module imports a module the sandbox lacks, the other does not: only
    the test of the module that cannot import is blamed (naming the missing module);
    the demo's own tests run and are as calibration expects."""

    def edit(c: dict[str, Any]) -> None:
        c["verifier"]["checks"][0]["tests"]["pass_to_pass"].append("test_extra.ExtraTest.test_x")

    config = _demo(tmp_path, edit)
    (tmp_path / "demo/repo/test_extra.py").write_text(
        "import unittest\n\nimport numpy_absent_here\n\n\n"
        "class ExtraTest(unittest.TestCase):\n    def test_x(self):\n"
        "        self.assertTrue(numpy_absent_here)\n"
    )
    calibration = _refused(config)
    assert calibration.reasons == (CalibrationReason.TEST_MODULE_NOT_IMPORTABLE,)
    rows = [(str(t.baseline), t.reason, t.missing_module) for t in calibration.tests]
    assert rows == [
        ("failed", None, None),
        *[("passed", None, None)] * 3,
        ("error", CalibrationReason.TEST_MODULE_NOT_IMPORTABLE, "numpy_absent_here"),
    ]


def test_a_fail_to_pass_test_that_cannot_import_is_not_a_failing_test(tmp_path: Path) -> None:
    """No PASS_TO_PASS test and no reference patch: the FAIL_TO_PASS test's module cannot
    import (its own import error, not a missing module) and so never fails inside the
    test: the instance is refused, not calibrated as "fails as expected"."""

    def edit(c: dict[str, Any]) -> None:
        c["verifier"]["checks"][0]["tests"] = {
            "fail_to_pass": ["test_stats.StatsTest.test_median_even"]
        }

    config = _demo(tmp_path, edit)
    tests = tmp_path / "demo/repo/test_stats.py"
    tests.write_text("from stats import no_such_name\n" + tests.read_text())
    calibration = _refused(config)
    assert calibration.reasons == (CalibrationReason.TEST_MODULE_NOT_IMPORTABLE,)
    ((kind, baseline, reason, missing),) = [
        (str(t.kind), str(t.baseline), t.reason, t.missing_module) for t in calibration.tests
    ]
    assert (kind, baseline, reason, missing) == (
        "fail_to_pass",
        "error",
        CalibrationReason.TEST_MODULE_NOT_IMPORTABLE,
        None,
    )


def test_a_reference_patch_must_pass_every_declared_test(tmp_path: Path) -> None:
    """``"calibration": {"reference_patch": PATH}``: the upstream fix passes every test
    (valid, the reference column filled in); the wrong fix as reference leaves the
    unsorted-input test failing: refused, that test carrying ``reference_not_passing``."""
    config = _demo(tmp_path, lambda c: c.update(calibration={"reference_patch": "ref.patch"}))
    (tmp_path / "demo/ref.patch").write_text(WRONG_FIX)
    refused = _refused(config)
    assert refused.reasons == (CalibrationReason.REFERENCE_NOT_PASSING,)
    blamed = {t.test_id.rpartition(".")[2]: t.reason for t in refused.tests if t.reason}
    assert blamed == {
        "test_median_even": CalibrationReason.REFERENCE_NOT_PASSING,
        "test_median_unsorted_input_untouched": CalibrationReason.REFERENCE_NOT_PASSING,
    }
    (tmp_path / "demo/ref.patch").write_text(REFERENCE)
    loaded = load_config(config)
    assert loaded.calibration is not None
    assert [aid for aid, _ in loaded.calibration.attempts] == [
        "calibration-baseline",
        "calibration-reference",
    ]
    assert tmp_path / "demo/ref.patch" in loaded.inputs


@pytest.mark.parametrize(
    ("entry", "error", "message"),
    [
        (3, ConfigError, r"\$\.calibration: expected an object or one of \[False\], got 3"),
        ({"reference": "x"}, ConfigError, r"\$\.calibration.*reference"),
        ({"reference_patch": "absent.patch"}, EffectError, "absent.patch"),
    ],
)
def test_a_bad_calibration_entry_stops_the_load(
    tmp_path: Path, entry: object, error: type[Exception], message: str
) -> None:
    """An unusable ``calibration`` entry stops the load (exit 2), naming it."""
    config = _demo(tmp_path, lambda c: c.update(calibration=entry))
    with pytest.raises(error, match=message):
        load_config(config)


def test_calibration_needs_declared_tests_and_can_be_turned_off(tmp_path: Path) -> None:
    """A verifier with no declared tests has nothing to calibrate (an entry asking for it
    is refused); ``"calibration": false`` turns it off (no calibration in the record)."""
    fixture = ROOT / "fixtures/orchestration/two-attempt-good-vs-bad.json"
    assert load_config(fixture).calibration is None
    shutil.copytree(fixture.parent, tmp_path / "orchestration")
    copy = tmp_path / "orchestration" / fixture.name
    document = json.loads(copy.read_text())
    copy.write_text(json.dumps({**document, "calibration": {}}))
    with pytest.raises(ConfigError, match="declares no tests to calibrate"):
        load_config(copy)
    config = _demo(tmp_path, lambda c: c.update(calibration=False, attempts=c["attempts"][3:4]))
    loaded = load_config(config)
    assert loaded.calibration is None
    assert run_detailed(loaded).record.calibration is None


class _LosesCalibration(concurrent.futures.ThreadPoolExecutor):
    """Loses every calibration task (a worker killed past the scheduler's retries)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if fn.__name__ == "_calibration_attempt":
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            future.set_exception(RuntimeError("KilledWorker"))
            return future
        return super().submit(fn, *args, **kwargs)


def test_a_lost_calibration_task_is_a_control_error(tmp_path: Path) -> None:
    """No per-test result from the baseline (its task never completed): the instance is
    refused with ``calibration_error``, a control error, and no attempt is judged."""
    config = _demo(tmp_path)
    with _LosesCalibration(max_workers=1) as pool, pytest.raises(RefusedError) as info:
        run_detailed(load_config(config), executor=pool)
    calibration = info.value.refusal
    assert isinstance(calibration, Calibration)
    assert calibration.reasons == (CalibrationReason.CALIBRATION_ERROR,)
    assert calibration.tests == ()
