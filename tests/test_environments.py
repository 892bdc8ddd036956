"""Environments (issue 19 item 2): hash-pinned dependencies built once outside any sandbox,
cached by content digest, used read-only by a declared-tests check, offline."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from kernel.effects import environments
from kernel.effects.environments import (
    CACHE_ENV,
    built_environment,
    cache_root,
    prepare_environment,
)
from kernel.effects.orchestrate import load_config, run_detailed
from kernel.errors import ConfigError, EffectError, RefusedError
from kernel.run.record import Calibration, CalibrationReason, DeclaredTestOutcome
from kernel.run.suite import declared_tests_of

ROOT = Path(__file__).resolve().parents[1]


def _wheel(folder: Path, name: str = "tinydep", version: str = "1.0") -> Path:
    """A minimal pure-Python wheel, made here (no index, no build backend)."""
    files = {f"{name}/__init__.py": b"VALUE = 42\n"}
    info = f"{name}-{version}.dist-info"
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    )
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )

    def entry(path: str, data: bytes) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"{path},sha256={digest},{len(data)}"

    record = "\n".join([*(entry(p, d) for p, d in files.items()), f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for item, data in {**files, f"{info}/RECORD": record.encode()}.items():
            archive.writestr(item, data)
    return path


def _requirements(folder: Path, *, hashed: bool = True) -> Path:
    wheels = folder / "wheels"
    wheels.mkdir(exist_ok=True)
    wheel = _wheel(wheels)
    pin = f"tinydep==1.0 --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}"
    path = folder / "requirements.txt"
    path.write_text(f"--no-index\n--find-links wheels\n{pin if hashed else 'tinydep==1.0'}\n")
    return path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache root of the test's own."""
    root = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(root))
    return root


def test_an_environment_is_built_once_and_cached_by_digest(tmp_path: Path, cache: Path) -> None:
    """The same interpreter and requirements give the same digest and folder, built once;
    other requirement bytes give another digest."""
    assert cache_root() == cache
    requirements = _requirements(tmp_path)
    first = prepare_environment("python3", requirements)
    marker = first.root / "kernel-environment.json"
    before = marker.stat().st_mtime_ns
    again = prepare_environment("python3", requirements)
    assert (again.digest, again.root) == (first.digest, first.root)
    assert marker.stat().st_mtime_ns == before
    assert first.root.parent == cache
    assert (first.root / "bin" / "python").exists()
    requirements.write_text(requirements.read_text() + "# changed\n")
    assert prepare_environment("python3", requirements).digest != first.digest


@pytest.mark.parametrize(
    ("python", "hashed", "message"),
    [
        ("python3", False, "require-hashes"),
        ("no-such-python", True, "not on PATH"),
    ],
)
def test_an_unusable_environment_is_a_config_error(
    tmp_path: Path, cache: Path, python: str, hashed: bool, message: str
) -> None:
    """A requirement without its hash, or a missing interpreter: refused before anything
    runs, and nothing half-built is left in the cache."""
    with pytest.raises(ConfigError, match=message):
        prepare_environment(python, _requirements(tmp_path, hashed=hashed))
    assert not cache.exists() or not any(cache.iterdir())


def _config(tmp_path: Path, *, environment: bool) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_dep.py").write_text(
        "import unittest\nimport tinydep\n\n\nclass DepTest(unittest.TestCase):\n"
        "    def test_value(self):\n        self.assertEqual(tinydep.VALUE, 42)\n"
    )
    (tmp_path / "empty.patch").write_bytes(b"")
    (tmp_path / "work-unit.json").write_text(
        json.dumps(
            {
                "id": "dep",
                "version": 1,
                "objective": "o",
                "inputs": [],
                "required_validators": ["tests"],
            }
        )
    )
    check: dict[str, object] = {
        "id": "tests",
        "timeout_s": 60,
        "tests": {"pass_to_pass": ["test_dep.DepTest.test_value"]},
    }
    if environment:
        _requirements(tmp_path)
        check["environment"] = {"requirements": "requirements.txt"}
    config = {
        "kind": "kernel-orchestration-config",
        "schema_version": "1",
        "run_id": "dep",
        "work_unit": "work-unit.json",
        "verifier": {
            "adapter": "command",
            "verifier_id": "v",
            "baseline": "repo",
            "checks": [check],
        },
        "attempts": [
            {"attempt_id": "a", "adapter": "patch", "worker_id": "w", "patch": "empty.patch"}
        ],
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_a_check_runs_in_its_environment_without_network(tmp_path: Path, cache: Path) -> None:
    """With its environment the test imports its dependency and passes; the environment's
    digest is in the run's provenance (not its path). Without it, the same test errors on
    the baseline and the run is refused at calibration, no patch judged."""
    with_env = tmp_path / "with"
    with_env.mkdir()
    outcome = run_detailed(load_config(_config(with_env, environment=True)))
    tests = declared_tests_of(outcome.record.attempts[0])
    assert tests is not None
    assert [t.outcome for t in tests] == [DeclaredTestOutcome.PASSED]
    provenance = outcome.record.provenance
    assert provenance is not None
    digests = {i.name: i.digest for i in provenance.inputs}
    (built,) = [p for p in cache.iterdir() if not p.name.startswith(".")]
    assert digests["environment:tests"] == built.name
    assert str(cache) not in json.dumps(outcome.record.to_dict())
    (check,) = [r for r in outcome.record.attempts[0].check_runs if r.check_id == "tests"]
    assert check.environment_digest == built.name
    without = tmp_path / "without"
    without.mkdir()
    # Without it the test cannot import its dependency: the run is refused at
    # calibration (an environment error), before any patch is judged.
    with pytest.raises(RefusedError) as info:
        run_detailed(load_config(_config(without, environment=False)))
    calibration = info.value.refusal
    assert isinstance(calibration, Calibration)
    assert calibration.reasons == (CalibrationReason.TEST_MODULE_NOT_IMPORTABLE,)
    assert [(t.baseline, t.reason, t.missing_module) for t in calibration.tests] == [
        (DeclaredTestOutcome.ERROR, CalibrationReason.TEST_MODULE_NOT_IMPORTABLE, "tinydep")
    ]
    shutil.rmtree(cache)


def test_a_suite_instance_declares_its_environment(tmp_path: Path, cache: Path) -> None:
    """A suite instance whose tests import a pinned dependency: with its environment the
    upstream-style fix resolves; the environment's digest is in the instance's result and
    the run's provenance. Without the environment the instance is refused at calibration
    (its PASS_TO_PASS cannot import), never a rejection of the patch."""
    from kernel.effects.suite import run_suite

    _config(tmp_path, environment=True)  # the repo and the requirements
    (tmp_path / "repo" / "dep.py").write_text("def value():\n    return 41\n")
    (tmp_path / "repo" / "test_fix.py").write_text(
        "import unittest\nimport dep\n\n\nclass FixTest(unittest.TestCase):\n"
        "    def test_fixed(self):\n        self.assertEqual(dep.value(), 42)\n"
    )
    fix = (
        "diff --git a/dep.py b/dep.py\n--- a/dep.py\n+++ b/dep.py\n@@ -1,2 +1,2 @@\n"
        " def value():\n-    return 41\n+    return 42\n"
    )
    base = {
        "repo": "repo",
        "FAIL_TO_PASS": ["test_fix.FixTest.test_fixed"],
        "PASS_TO_PASS": ["test_dep.DepTest.test_value"],
        "patch": fix,
    }
    instances = tmp_path / "instances.json"
    instances.write_text(
        json.dumps(
            [
                {
                    **base,
                    "instance_id": "with-env",
                    "environment": {"requirements": "requirements.txt"},
                },
                {**base, "instance_id": "no-env"},
            ]
        )
    )
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(
        "".join(
            json.dumps({"instance_id": i, "model_name_or_path": "m", "model_patch": fix}) + "\n"
            for i in ("with-env", "no-env")
        )
    )
    outcome = run_suite(
        instances, predictions, tmp_path / "results/s", results_root=tmp_path / "results"
    )
    with_env, no_env = outcome.summary.instances
    assert with_env.predictions[0].status.value == "resolved"
    (built,) = [p.name for p in cache.iterdir() if not p.name.startswith(".")]
    assert with_env.environment_digest == built
    run = json.loads((tmp_path / "results/s/instances/with-env/run.json").read_text())
    assert {"name": "environment:tests", "digest": built} in run["provenance"]["inputs"]
    assert not no_env.calibration.valid
    # Only the test whose module needs the dependency is blamed, naming it.
    assert no_env.calibration.reasons == (CalibrationReason.TEST_MODULE_NOT_IMPORTABLE,)
    assert [(t.test_id, t.reason, t.missing_module) for t in no_env.calibration.tests] == [
        ("test_fix.FixTest.test_fixed", None, None),
        ("test_dep.DepTest.test_value", CalibrationReason.TEST_MODULE_NOT_IMPORTABLE, "tinydep"),
    ]
    assert [p.status.value for p in no_env.predictions] == ["error"]


def test_the_cache_root_is_the_users_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the override, environments live in ``$XDG_CACHE_HOME``, else in
    ``~/.cache``, under ``evidence-kernel/environments``."""
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "evidence-kernel" / "environments"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "evidence-kernel" / "environments"


def test_a_built_environment_is_found_by_its_digest_only(tmp_path: Path, cache: Path) -> None:
    """`built_environment` returns what `prepare_environment` built; a digest that is not
    SHA-256 hex, or one not built (or half built: no ready marker), is a config error."""
    built = prepare_environment("python3", _requirements(tmp_path))
    assert built_environment(built.digest) == built
    with pytest.raises(ConfigError, match=re.escape("'../escape' is not a SHA-256 digest")):
        built_environment("../escape")
    with pytest.raises(ConfigError, match="is not a SHA-256 digest"):
        built_environment(built.digest.upper())
    other = "0" * 64
    (cache / other).mkdir()  # a folder without its ready marker is not an environment
    with pytest.raises(ConfigError, match=f"000000000000 is not built in {cache}"):
        built_environment(other)


def test_a_check_names_its_environment_by_digest(tmp_path: Path, cache: Path) -> None:
    """A check may name an environment built before by its digest: the run uses it; a
    digest not in the cache, or an entry with both a digest and requirements, is refused
    naming the config key."""
    built = prepare_environment("python3", _requirements(tmp_path))
    folder = tmp_path / "run"
    folder.mkdir()
    config = _config(folder, environment=False)
    document = json.loads(config.read_text())
    check = document["verifier"]["checks"][0]
    check["environment"] = {"digest": built.digest}
    config.write_text(json.dumps(document))
    outcome = run_detailed(load_config(config))
    (run,) = [r for r in outcome.record.attempts[0].check_runs if r.check_id == "tests"]
    assert run.environment_digest == built.digest
    for entry, says in (
        ({"digest": "1" * 64}, "checks[0].environment: environment: 111111111111 is not built"),
        (
            {"digest": built.digest, "requirements": "r.txt"},
            "exactly one of requirements or digest",
        ),
        ({}, "exactly one of requirements or digest"),
    ):
        check["environment"] = entry
        config.write_text(json.dumps(document))
        with pytest.raises(ConfigError, match=re.escape(says)):
            load_config(config)


def test_unreadable_requirements_and_an_unusable_cache_are_effect_errors(
    tmp_path: Path, cache: Path
) -> None:
    """A requirements file that cannot be read, or a cache folder that cannot be made
    (a file stands where it would go), is an effect error naming the path."""
    with pytest.raises(EffectError, match=re.escape("missing.txt: cannot read requirements")):
        prepare_environment("python3", tmp_path / "missing.txt")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(EffectError, match="cannot create the environment cache"):
        prepare_environment("python3", _requirements(tmp_path), root=blocker / "cache")


def test_an_interpreter_that_cannot_start_is_a_config_error(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interpreter on PATH whose program cannot be executed (its ``#!`` names no
    program) is refused with what failed, nothing built."""
    folder = tmp_path / "bin"
    folder.mkdir()
    broken = folder / "brokenpython"
    broken.write_text("#!/nonexistent/interpreter\n")
    broken.chmod(0o755)
    monkeypatch.setattr(environments, "_PATH", str(folder))
    with pytest.raises(ConfigError, match="environment: brokenpython could not run"):
        prepare_environment("brokenpython", _requirements(tmp_path))
    assert not cache.exists()


def test_a_concurrent_build_of_the_same_digest_is_used(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two builds of one digest race: the one that renames second finds the winner's
    complete environment in place and uses it, leaving no half build; a folder in the
    way that is not a complete environment is an effect error, and is left alone."""
    requirements = _requirements(tmp_path)
    first = prepare_environment("python3", requirements)
    aside = tmp_path / "winner"
    first.root.rename(aside)
    real = environments._readable

    def other_build_finishes(root: Path) -> None:
        real(root)
        aside.rename(first.root)

    monkeypatch.setattr(environments, "_readable", other_build_finishes)
    assert prepare_environment("python3", requirements) == first
    assert [p.name for p in cache.iterdir()] == [first.digest]

    shutil.rmtree(first.root)

    def something_else_in_the_way(root: Path) -> None:
        real(root)
        first.root.mkdir()
        (first.root / "unrelated").write_text("")

    monkeypatch.setattr(environments, "_readable", something_else_in_the_way)
    with pytest.raises(EffectError, match="cannot store the environment"):
        prepare_environment("python3", requirements)
    assert [p.name for p in cache.iterdir()] == [first.digest]
    assert [p.name for p in first.root.iterdir()] == ["unrelated"]


def test_the_index_named_in_the_environment_is_passed_to_pip(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PIP_INDEX_URL`` reaches the build's pip (an index the requirements do not
    name): a hash-pinned requirement is found on a local simple index."""
    wheel = _wheel(tmp_path)
    project = tmp_path / "simple" / "tinydep"
    project.mkdir(parents=True)
    shutil.copy(wheel, project / wheel.name)
    (project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"tinydep==1.0 --hash=sha256:{digest}\n")
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    built = prepare_environment("python3", requirements)
    assert list(built.root.glob("lib/python*/site-packages/tinydep/__init__.py"))
