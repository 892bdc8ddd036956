"""A real instance from a public project's history (`fixtures/suite-parse/`, see its
README): the suite's verdicts are the instance's written truth."""

from __future__ import annotations

import difflib
import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.effects.adapters.patch import PatchRefusal, parse_patch
from kernel.effects.adapters.screen import candidate_policy, screen_changes
from kernel.effects.environments import CACHE_ENV
from kernel.effects.suite import run_suite
from test_pytest_project import _wheel  # type: ignore[import-not-found]  # sibling test module

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "suite-parse"


def test_the_verdicts_are_the_written_truth(tmp_path: Path) -> None:
    """Upstream fix resolved and verified; wrong fix, no-op and test rewrite unresolved;
    empty patch apart; the misspelt instance refused at calibration, nothing judged."""
    truth = json.loads((FIXTURE / "truth.json").read_text())
    outcome = run_suite(
        FIXTURE / "instances.json",
        FIXTURE / "predictions.jsonl",
        tmp_path / "results/suite",
        results_root=tmp_path / "results",
        max_workers=2,
    )
    for result in outcome.summary.instances:
        expected = truth[result.instance_id]
        assert result.calibration.valid is expected["valid"], result.instance_id
        assert list(result.calibration.reasons) == expected.get("reasons", [])
        got = {
            p.model: [str(p.status), p.resolution and str(p.resolution)] for p in result.predictions
        }
        assert got == expected["predictions"], result.instance_id
    upstream = outcome.summary.instances[0].predictions[0]
    assert str(upstream.evidence_class) == "verified"
    # Every instance of instances.json has its truth (the pytest one has its own test).
    assert set(truth) - {"r1chardj0n3s__parse-86"} == {
        r.instance_id for r in outcome.summary.instances
    }


def _patch(old: str, new: str) -> bytes:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), "a/mod.py", "b/mod.py"
    )
    return ("diff --git a/mod.py b/mod.py\n" + "".join(lines)).encode()


def test_the_screen_flags_what_a_patch_brings_not_the_repositorys_own_code(
    tmp_path: Path,
) -> None:
    """A real fix to a file that already holds ``return locals()`` (as upstream parse.py
    does) brings no finding; a patch that adds one more does, counted per line."""
    old = "def spec():\n    x = 1\n    return locals()\n\n\ndef value():\n    return 41\n"
    (tmp_path / "mod.py").write_text(old)

    def screen(new: str) -> list[str]:
        parsed = parse_patch(_patch(old, new))
        assert not isinstance(parsed, PatchRefusal)
        found = screen_changes(parsed, tmp_path, candidate_policy())
        return [f"{f.rule}:{f.line}" for f in found]

    assert screen(old.replace("return 41", "return 42")) == []
    added = old.replace("    return 41", "    return locals()")
    assert [f.split(":")[1] for f in screen(added)] == ["7"]


@pytest.fixture
def pytest_instance(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The pytest instance's folder copied where the sandbox's user can read, with its
    environment's requirements (pytest, pinned by hash, from a wheel built here)."""
    base = Path(tempfile.mkdtemp(prefix="kernel-suite-pytest-"))
    base.chmod(0o755)
    monkeypatch.setenv(CACHE_ENV, str(base / "cache"))
    try:
        folder = base / "suite-parse"
        shutil.copytree(FIXTURE, folder)
        (folder / "wheels").mkdir()
        digest = hashlib.sha256(_wheel(folder / "wheels").read_bytes()).hexdigest()
        (folder / "requirements-pytest.txt").write_text(
            f"--no-index\n--find-links wheels\nkernel-test-pytest==1.0 --hash=sha256:{digest}\n"
        )
        yield folder
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_pytest_instance_verdicts_are_the_written_truth(pytest_instance: Path) -> None:
    """A real pytest project (node ids, its own environment): the upstream fix resolves and
    is verified, the partial fix and the no-op do not, the empty patch is apart; the
    environment's digest is in the instance's result."""
    truth = json.loads((FIXTURE / "truth.json").read_text())
    outcome = run_suite(
        pytest_instance / "instances-pytest.json",
        pytest_instance / "predictions-pytest.jsonl",
        pytest_instance / "results/suite",
        results_root=pytest_instance / "results",
    )
    (result,) = outcome.summary.instances
    expected = truth[result.instance_id]
    assert result.calibration.valid is expected["valid"]
    got = {p.model: [str(p.status), p.resolution and str(p.resolution)] for p in result.predictions}
    assert got == expected["predictions"]
    assert str(result.predictions[0].evidence_class) == "verified"
    assert result.environment_digest is not None
