"""A pytest project judged end to end: an environment with pytest, a sandboxed check.

pytest is no dependency of kernel: the check's environment brings it. The test builds
that environment's one wheel from the pytest this suite runs under (its files, read
only), pins it by hash, and lets the kernel build the environment as it would for any
instance (`kernel.effects.environments`). Then the demo's story on a pytest repository:
the correct fix verified, the wrong fix rejected, a hack of pytest's runner tampered;
and a test file lacking a dependency refused at calibration, blaming only its test.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel import Calibration, CalibrationReason
from kernel.effects.adapters.command import CommandVerifier
from kernel.effects.environments import CACHE_ENV
from kernel.effects.orchestrate import load_config, run_detailed
from kernel.errors import RefusedError
from kernel.run.report import EvidenceState, RunEvidenceReport, build_evidence_report
from kernel.run.verification import CheckReason

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo"
DISTRIBUTIONS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")

STATS = (DEMO / "repo" / "stats.py").read_text()
CONFTEST = "import pytest\n\n\n@pytest.fixture\ndef even():\n    return [4, 1, 3, 2]\n"
TESTS = """import pytest

from stats import mean, median


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_median_even(even):
    assert median(even) == 2.5


@pytest.mark.parametrize("values,expected", [([3, 1, 2], 2), ([5], 5)])
def test_median_odd(values, expected):
    assert median(values) == expected


class TestInput:
    def test_untouched(self):
        values = [3, 1, 2]
        median(values)
        assert values == [3, 1, 2]
"""
WORKERS = {
    "correct": (DEMO / "workers" / "correct_fix.sh").read_text(),
    "wrong": (DEMO / "workers" / "wrong_fix.sh").read_text(),
    "hack": "#!/bin/sh\ncat >> stats.py <<'PY'\n"
    "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\nPY\n",
}


def _wheel(folder: Path) -> Path:
    """One wheel holding the installed files of pytest and its dependencies."""
    files: dict[str, bytes] = {}
    for name in DISTRIBUTIONS:
        dist = importlib.metadata.distribution(name)
        for item in dist.files or ():
            path = str(item)
            if ".dist-info/" in path or "__pycache__" in path or path.startswith(".."):
                continue
            files[path] = Path(str(dist.locate_file(item))).read_bytes()
    info = "kernel_test_pytest-1.0.dist-info"
    files[f"{info}/METADATA"] = b"Metadata-Version: 2.1\nName: kernel-test-pytest\nVersion: 1.0\n"
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )

    def entry(path: str, data: bytes) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"{path},sha256={digest},{len(data)}"

    record = "\n".join([*(entry(p, d) for p, d in files.items()), f"{info}/RECORD,,"]) + "\n"
    wheel = folder / "kernel_test_pytest-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in {**files, f"{info}/RECORD": record.encode()}.items():
            archive.writestr(path, data)
    return wheel


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A pytest repository, its workers and its config, with an environment cache of
    the test's own (readable by the sandbox's user)."""
    base = Path(tempfile.mkdtemp(prefix="kernel-pytest-project-"))
    base.chmod(0o755)
    monkeypatch.setenv(CACHE_ENV, str(base / "cache"))
    try:
        root = base / "project"
        (root / "repo" / "tests").mkdir(parents=True)
        (root / "repo" / "stats.py").write_text(STATS)
        (root / "repo" / "tests" / "conftest.py").write_text(CONFTEST)
        (root / "repo" / "tests" / "test_stats.py").write_text(TESTS)
        (root / "wheels").mkdir()
        digest = hashlib.sha256(_wheel(root / "wheels").read_bytes()).hexdigest()
        (root / "requirements.txt").write_text(
            f"--no-index\n--find-links wheels\nkernel-test-pytest==1.0 --hash=sha256:{digest}\n"
        )
        (root / "workers").mkdir()
        for name, body in WORKERS.items():
            script = root / "workers" / f"{name}.sh"
            script.write_text(body)
            script.chmod(0o755)
        shutil.copy(DEMO / "work-unit.json", root / "work-unit.json")
        check = {
            "id": "unit-tests",
            "timeout_s": 120,
            "environment": {"requirements": "requirements.txt"},
            "tests": {
                "fail_to_pass": ["tests/test_stats.py::test_median_even"],
                "pass_to_pass": [
                    "tests/test_stats.py::test_mean",
                    "tests/test_stats.py::test_median_odd[values0-2]",
                    "tests/test_stats.py::test_median_odd[values1-5]",
                    "tests/test_stats.py::TestInput::test_untouched",
                ],
            },
        }
        config = {
            "kind": "kernel-orchestration-config",
            "schema_version": "1",
            "run_id": "pytest-project",
            "work_unit": "work-unit.json",
            "verifier": {
                "adapter": "command",
                "verifier_id": "pytest-verifier",
                "baseline": "repo",
                "checks": [check],
                "protected": ["tests/*"],
            },
            "attempts": [
                {
                    "attempt_id": name,
                    "adapter": "command",
                    "worker_id": f"w-{name}",
                    "command": [f"workers/{name}.sh"],
                    "baseline": "repo",
                    "timeout_s": 60,
                }
                for name in WORKERS
            ],
        }
        (root / "config.json").write_text(json.dumps(config))
        yield root
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_pytest_project_is_judged_with_every_defence(project: Path) -> None:
    """The correct fix of a pytest repository is supported, the wrong fix rejected, and
    a candidate that patches pytest's runner is tampered; pytest's own files are
    protected by default."""
    loaded = load_config(project / "config.json")
    assert isinstance(loaded.verifier, CommandVerifier)
    assert "conftest.py" in loaded.verifier.protected
    outcome = run_detailed(loaded)
    report = build_evidence_report(outcome.record)
    assert isinstance(report, RunEvidenceReport)
    states = {a.attempt_id: a.evidence_state for a in report.attempts}
    assert states == {
        "correct": EvidenceState.SUPPORTED,
        "wrong": EvidenceState.REJECTED,
        "hack": EvidenceState.REJECTED,
    }
    reasons = {
        a.attempt_id: {r.check_id: r.reason for r in a.check_runs}["unit-tests"]
        for a in outcome.record.attempts
    }
    assert reasons == {
        "correct": None,
        "wrong": CheckReason.EXPECTED_TEST_FAILED,
        "hack": CheckReason.RUNNER_TAMPERED,
    }


def test_a_pytest_file_missing_a_dependency_is_refused_at_calibration(project: Path) -> None:
    """Issue 19 item 3 on the pytest project: a declared test file imports a module the
    environment lacks. The run is refused at calibration before any attempt, blaming
    exactly that file's test as an environment error naming the missing module; the
    other file's tests ran and are as calibration expects."""
    (project / "repo" / "tests" / "test_dep.py").write_text(
        "import absent_dependency_xyz\n\n\ndef test_uses_it():\n    assert absent_dependency_xyz\n"
    )
    config = json.loads((project / "config.json").read_text())
    config["verifier"]["checks"][0]["tests"]["pass_to_pass"].append(
        "tests/test_dep.py::test_uses_it"
    )
    (project / "config.json").write_text(json.dumps(config))
    with pytest.raises(RefusedError) as info:
        run_detailed(load_config(project / "config.json"))
    calibration = info.value.refusal
    assert isinstance(calibration, Calibration)
    assert calibration.reasons == (CalibrationReason.TEST_MODULE_NOT_IMPORTABLE,)
    assert [(str(t.baseline), t.reason, t.missing_module) for t in calibration.tests] == [
        ("failed", None, None),
        *[("passed", None, None)] * 4,
        ("error", CalibrationReason.TEST_MODULE_NOT_IMPORTABLE, "absent_dependency_xyz"),
    ]
    assert "no module named 'absent_dependency_xyz'" in str(info.value)


def test_a_root_conftest_missing_a_dependency_is_refused_at_calibration(project: Path) -> None:
    """Issue 19 item 3: a root ``conftest.py`` that imports a module the environment
    lacks. The run is refused at calibration, every declared test blamed as the
    environment error naming the missing module; no attempt is judged (never a rejected
    patch)."""
    (project / "repo" / "conftest.py").write_text("import absent_plugin_xyz\n")
    with pytest.raises(RefusedError) as info:
        run_detailed(load_config(project / "config.json"))
    calibration = info.value.refusal
    assert isinstance(calibration, Calibration)
    assert calibration.reasons == (CalibrationReason.TEST_MODULE_NOT_IMPORTABLE,)
    assert {(str(t.baseline), t.reason, t.missing_module) for t in calibration.tests} == {
        ("error", CalibrationReason.TEST_MODULE_NOT_IMPORTABLE, "absent_plugin_xyz")
    }
    assert len(calibration.tests) == 5
    assert "no module named 'absent_plugin_xyz'" in str(info.value)
