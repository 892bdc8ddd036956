"""Judge a suite of task instances and model predictions (SWE-bench formats): `run_suite`.

For each instance, as one task on the executor: materialize its baseline (a folder, or
``base_commit`` of a git repository, then its ``test_patch``), calibrate it (the
declared tests on the baseline and with the reference ``patch``: `kernel.run.suite.calibrate`),
and, when it is valid, judge every non-empty prediction directly (worker ``patch``, no
worker script) through `kernel.effects.pipeline.run_pipeline` with the instance's own
evidence folder. The summary is the pure `kernel.run.suite.summarize_suite` over the
instances' results, written as JSON, Markdown and HTML. `kernel suite` only calls this
and prints.

Instances file: a JSON array or JSON lines of objects (other keys, such as SWE-bench's
``problem_statement``, are kept in the input digest and otherwise ignored)::

    {"instance_id": "owner__repo-1", "repo": "<folder or git repository>",
     "base_commit": "<commit>" | null, "FAIL_TO_PASS": [...], "PASS_TO_PASS": [...],
     "patch": "<reference diff>", "test_patch": "<diff>",       (optional)
     "python": "python3", "protected": ["test_*.py"], "timeout_s": 300}   (optional)

``FAIL_TO_PASS``/``PASS_TO_PASS`` may be arrays or JSON-encoded arrays (as SWE-bench
ships them); ``repo`` is relative to the instances file. Predictions file: JSON lines
(or an array) of ``{"instance_id", "model_name_or_path", "model_patch"}``.

Output folder::

    summary.json summary.md summary.html      the suite summary
    instances/<instance_id>/                  one evidence folder per instance:
        instance.json calibration.json calibration-run.json
        run.json evidence.{json,md,html} ...   (when judged)

Rules enforced:

- parallelism is across instances: each instance task runs its calibration and its
  predictions one after another (one core per task), ``max_workers`` tasks at once
  locally, as many as the executor has workers on Dask;
- every input problem (unreadable file, unknown key type, an instance id twice, a
  prediction for an unknown instance or a model twice for one instance, an unsafe
  instance id) is a `ConfigError` before anything runs;
- resumable: an instance whose ``instance.json`` holds the same input digest (the
  instance document, its baseline's content, its predictions' patch digests) is not
  run again;
- each instance works in a scratch folder of its own per try (a task retried after a
  lost worker starts clean), removed when it ends; a task that does not complete is a
  control error of that instance (its predictions are ``error``), never a verdict.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from kernel.effects import console
from kernel.effects.adapters.command import BASE_ENV, tree_digest
from kernel.effects.environments import prepare_environment
from kernel.effects.files import (
    DEFAULT_OUTPUT_ROOT,
    OutputRoot,
    atomic_write_bytes,
    load_json,
    read_input,
    write_canonical_json,
)
from kernel.effects.git import Repo
from kernel.effects.orchestrate import load_config, run_detailed
from kernel.effects.pipeline import REPLAY_NONE, run_pipeline
from kernel.effects.sandbox import check_command_starts
from kernel.effects.testids import unknown_test_ids
from kernel.errors import ConfigError, EffectError, RecordError
from kernel.records.identity import sha256_bytes, sha256_hex
from kernel.run.record import (
    Calibration,
    CalibrationReason,
    DeclaredTestKind,
    DeclaredTestOutcome,
    DeclaredTestResult,
)
from kernel.run.suite import (
    InstanceResult,
    PredictionResult,
    SuiteSummary,
    calibrate,
    calibrate_checks,
    judge_prediction,
    summarize_suite,
)
from kernel.views.suite import render_suite_html, render_suite_markdown

__all__ = [
    "Prediction",
    "SuiteInstance",
    "SuiteOutcome",
    "load_instances",
    "load_predictions",
    "run_suite",
]

RUNNER_VERSION: Final = "kernel.effects.suite/2"
_SAFE_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")
_TESTS_CHECK: Final = "tests"
_PROTECTED_CHECK: Final = "protected-paths"
DEFAULT_PROTECTED: Final = ("test_*.py", "*_test.py", "conftest.py")


@attrs.frozen(kw_only=True)
class SuiteInstance:
    """One task instance, as read (paths resolved)."""

    instance_id: str
    repo: Path
    base_commit: str | None
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    reference_patch: bytes | None
    test_patch: bytes | None
    python: str
    protected: tuple[str, ...]
    timeout_s: int
    document_digest: str
    requirements: Path | None = None
    """The instance's hash-pinned requirements (`kernel.effects.environments`), if any."""
    environment_digest: str | None = None
    """The digest of its built environment (set by `run_suite` before any task runs)."""
    unknown_tests: tuple[str, ...] = ()
    """Declared ids the materialized baseline statically does not define (found by the
    instance's task): not run, not judged."""


@attrs.frozen(kw_only=True)
class Prediction:
    """One model's patch for one instance."""

    model: str
    patch: bytes


@attrs.frozen(kw_only=True)
class SuiteOutcome:
    """What `run_suite` produced."""

    summary: SuiteSummary
    files: Mapping[str, Path]
    judged: int
    """Instances run in this call (the others were resumed from their folder)."""
    wall_ms: int


def _records(path: Path, what: str) -> list[dict[str, object]]:
    """A JSON array of objects, or JSON lines of objects."""
    data = read_input(path, what=what)
    text = data.decode("utf-8", "replace")
    if text.lstrip().startswith("["):
        items = load_json(path, what=what)
    else:
        items = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as e:
                # Each line is parsed alone: the error's own line number is always 1.
                raise ConfigError(f"{path}: line {number}: not JSON: {e.msg}") from e
    if type(items) is not list or not items or not all(type(i) is dict for i in items):
        raise ConfigError(f"{path}: expected a non-empty array (or lines) of {what} objects")
    return items


def _tests(path: Path, where: str, value: object) -> tuple[str, ...]:
    if type(value) is str:
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: {where}: not a JSON-encoded array") from e
    if type(value) is not list or not all(type(v) is str and v.strip() for v in value):
        raise ConfigError(f"{path}: {where}: expected an array of test ids")
    return tuple(str(v) for v in value)


def _text(path: Path, item: Mapping[str, object], key: str, where: str) -> str | None:
    value = item.get(key)
    if value is not None and type(value) is not str:
        raise ConfigError(f"{path}: {where}.{key}: expected a string or null")
    return value


def _instance(path: Path, index: int, item: Mapping[str, object]) -> SuiteInstance:
    where = f"[{index}]"
    instance_id = item.get("instance_id")
    if type(instance_id) is not str or not _SAFE_ID.fullmatch(instance_id):
        raise ConfigError(
            f"{path}: {where}.instance_id: expected letters, digits, '.', '_', '+', '-'"
        )
    where = f"[{instance_id}]"
    repo = _text(path, item, "repo", where)
    if not repo:
        raise ConfigError(f"{path}: {where}.repo: missing repository")
    python = item.get("python", "python3")
    protected = item.get("protected", list(DEFAULT_PROTECTED))
    timeout = item.get("timeout_s", 300)
    environment = item.get("environment")
    requirements = None
    if environment is not None:
        if type(environment) is not dict or set(environment) != {"requirements"}:
            raise ConfigError(f'{path}: {where}.environment: expected {{"requirements": PATH}}')
        requirements = (path.parent / str(environment["requirements"])).resolve()
    if type(python) is not str or not python or "/" in python:
        raise ConfigError(f"{path}: {where}.python: expected an interpreter name on PATH")
    if type(protected) is not list or not all(type(p) is str and p for p in protected):
        raise ConfigError(f"{path}: {where}.protected: expected an array of globs")
    if type(timeout) is not int or timeout < 1:
        raise ConfigError(f"{path}: {where}.timeout_s: expected an integer >= 1")
    fail_to_pass = _tests(path, f"{where}.FAIL_TO_PASS", item.get("FAIL_TO_PASS"))
    pass_to_pass = _tests(path, f"{where}.PASS_TO_PASS", item.get("PASS_TO_PASS", []))
    reference, test_patch = (_text(path, item, k, where) for k in ("patch", "test_patch"))
    try:
        digest = sha256_hex(item)
    except ValueError as e:
        raise ConfigError(f"{path}: {where}: {e}") from e
    return SuiteInstance(
        instance_id=instance_id,
        repo=(path.parent / repo).resolve(),
        base_commit=_text(path, item, "base_commit", where) or None,
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        reference_patch=reference.encode() if reference else None,
        test_patch=test_patch.encode() if test_patch else None,
        python=python,
        protected=tuple(str(p) for p in protected),
        timeout_s=timeout,
        document_digest=digest,
        requirements=requirements,
    )


def _unknown_tests(instance: SuiteInstance, tree: Path) -> tuple[str, ...]:
    """The declared ids the materialized baseline (``test_patch`` applied) statically
    does not define."""

    def read(relative: str) -> str | None:
        try:
            return (tree / relative).read_text("utf-8", "replace")
        except OSError:
            return None

    return unknown_test_ids((*instance.fail_to_pass, *instance.pass_to_pass), read)


def load_instances(path: Path | str) -> tuple[SuiteInstance, ...]:
    """Read and check an instances file (module docstring).

    Raises:
        EffectError: the file cannot be read.
        ConfigError: a document or field is unusable (message names file and field).
    """
    source = Path(path)
    instances = [_instance(source, i, item) for i, item in enumerate(_records(source, "instance"))]
    seen: set[str] = set()
    for instance in instances:
        if instance.instance_id in seen:
            raise ConfigError(f"{source}: instance {instance.instance_id!r} appears twice")
        seen.add(instance.instance_id)
        where = f"{source}: [{instance.instance_id}]"
        if not instance.repo.is_dir():
            raise ConfigError(f"{where}.repo: not a folder")
        try:
            check_command_starts([instance.python], env=BASE_ENV)
        except EffectError as e:
            raise ConfigError(f"{where}.python: {e}") from e
    return tuple(instances)


def load_predictions(
    path: Path | str, instances: Sequence[SuiteInstance]
) -> dict[str, tuple[Prediction, ...]]:
    """Read a predictions file: instance id -> its predictions, in file order.

    Raises:
        EffectError: the file cannot be read.
        ConfigError: a prediction is unusable, names an unknown instance, or a model
            predicts one instance twice.
    """
    source = Path(path)
    known = {i.instance_id for i in instances}
    found: dict[str, list[Prediction]] = {i.instance_id: [] for i in instances}
    for index, item in enumerate(_records(source, "prediction")):
        instance_id, model = item.get("instance_id"), item.get("model_name_or_path")
        patch = item.get("model_patch")
        if instance_id not in known:
            raise ConfigError(f"{source}: [{index}].instance_id: unknown instance {instance_id!r}")
        if type(model) is not str or not model.strip():
            raise ConfigError(f"{source}: [{index}].model_name_or_path: expected a name")
        if patch is not None and type(patch) is not str:
            raise ConfigError(f"{source}: [{index}].model_patch: expected a string or null")
        entries = found[str(instance_id)]
        if any(p.model == model for p in entries):
            raise ConfigError(f"{source}: [{index}]: {model!r} predicts {instance_id!r} twice")
        entries.append(Prediction(model=model, patch=(patch or "").encode()))
    return {k: tuple(v) for k, v in found.items()}


# --- one instance -----------------------------------------------------------------------


def _baseline(instance: SuiteInstance, into: Path) -> str:
    """Materialize the instance's baseline at ``into``; return what pins its content."""
    if instance.base_commit is None:
        shutil.copytree(instance.repo, into, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        pinned = tree_digest(into)
    else:
        repo = Repo(instance.repo)
        commit = repo.resolve(instance.base_commit)
        if commit is None:
            raise EffectError(
                f"{instance.instance_id}: base commit {instance.base_commit} not found"
            )
        archive = into.parent / "baseline.tar"
        repo.git("archive", "--format=tar", "-o", str(archive), commit)
        into.mkdir()
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
        archive.unlink()
        pinned = commit
    if instance.test_patch:
        _apply(instance.test_patch, into)
    return pinned


def _apply(patch: bytes, tree: Path) -> None:
    """Apply the instance's test patch to its baseline (outside any repository)."""
    git = shutil.which("git")
    if git is None:
        raise EffectError("git not found: install git")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "GIT_CEILING_DIRECTORIES": str(tree.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(tree.parent),
        "LC_ALL": "C",
    }
    done = subprocess.run(
        [git, "apply", "--whitespace=nowarn", "-"],
        cwd=tree,
        input=patch,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        raise EffectError(f"test_patch does not apply: {' '.join(why)}")


def _configs(
    instance: SuiteInstance, work: Path, predictions: Sequence[Prediction]
) -> tuple[Path, Path | None]:
    """Write the instance's work unit, patches and the two configs (calibration, judging)."""
    required = [_PROTECTED_CHECK, _TESTS_CHECK] if instance.protected else [_TESTS_CHECK]
    unit = {
        "id": instance.instance_id,
        "version": 1,
        "objective": f"Resolve task instance {instance.instance_id}: its FAIL_TO_PASS tests "
        "pass and its PASS_TO_PASS tests keep passing.",
        "inputs": [],
        "required_validators": required,
    }
    check: dict[str, object] = {
        "id": _TESTS_CHECK,
        "timeout_s": instance.timeout_s,
        "python": instance.python,
        "tests": {
            "fail_to_pass": list(instance.fail_to_pass),
            "pass_to_pass": list(instance.pass_to_pass),
        },
    }
    if instance.environment_digest is not None:
        check["environment"] = {"digest": instance.environment_digest}
    verifier: dict[str, object] = {
        "adapter": "command",
        "verifier_id": "suite-tests",
        "baseline": "repo",
        "checks": [check],
    }
    if instance.protected:
        verifier["protected"] = list(instance.protected)
    patches = work / "patches"
    patches.mkdir()
    (work / "work-unit.json").write_text(json.dumps(unit))
    calibration = [("baseline", "calibration-baseline", b"")]
    if instance.reference_patch is not None:
        calibration.append(("reference", "calibration-reference", instance.reference_patch))
    judged = [(p.model, p.model, p.patch) for p in predictions if p.patch.strip()]
    paths: list[Path | None] = []
    for name, entries in (("calibration", calibration), ("judge", judged)):
        attempts = []
        for index, (attempt_id, worker_id, data) in enumerate(entries):
            (patches / f"{name}-{index}.patch").write_bytes(data)
            attempts.append(
                {
                    "attempt_id": attempt_id,
                    "adapter": "patch",
                    "worker_id": worker_id,
                    "patch": f"patches/{name}-{index}.patch",
                }
            )
        if not attempts:
            paths.append(None)
            continue
        config = {
            "kind": "kernel-orchestration-config",
            "schema_version": "1",
            "run_id": f"{instance.instance_id}/{name}",
            "work_unit": "work-unit.json",
            "replay": "deterministic",
            # The suite calibrates itself (its calibration config's attempts are the
            # baseline and the reference): its configs do not calibrate again.
            "calibration": False,
            "verifier": verifier,
            "attempts": attempts,
        }
        (work / f"{name}.json").write_text(json.dumps(config))
        paths.append(work / f"{name}.json")
    calibration_path = paths[0]
    if calibration_path is None:  # pragma: no cover - the baseline attempt is always there
        raise EffectError("no calibration config")
    return calibration_path, paths[1]


def _input_digest(instance: SuiteInstance, pinned: str, predictions: Sequence[Prediction]) -> str:
    return sha256_hex(
        {
            "runner": RUNNER_VERSION,
            "instance": instance.document_digest,
            "baseline": pinned,
            "environment": instance.environment_digest,
            "predictions": [[p.model, sha256_bytes(p.patch)] for p in predictions],
        }
    )


def _resumed(folder: Path, digest: str) -> InstanceResult | None:
    try:
        saved = InstanceResult.from_dict(load_json(folder / "instance.json", what="instance"))
    except (EffectError, ConfigError, RecordError):
        return None
    return saved if saved.input_digest == digest else None


def judge_instance(
    instance: SuiteInstance,
    predictions: Sequence[Prediction],
    output_dir: Path,
    results_root: Path,
) -> tuple[InstanceResult, bool]:
    """Calibrate and judge one instance into ``output_dir/instances/<id>``; True when it
    ran (False: resumed from the folder).

    Raises:
        ConfigError: the generated configs are unusable (an interpreter not on PATH).
        EffectError: the baseline cannot be materialized or an output cannot be written.
    """
    folder = output_dir / "instances" / instance.instance_id
    root = OutputRoot(results_root)
    scratch_parent = output_dir / ".work"
    scratch_parent.mkdir(parents=True, exist_ok=True)
    # Unique per try: a retried task never meets what a lost try left behind.
    work = Path(tempfile.mkdtemp(prefix=f"{instance.instance_id}-", dir=scratch_parent))
    try:
        pinned = _baseline(instance, work / "repo")
        digest = _input_digest(instance, pinned, predictions)
        resumed = _resumed(folder, digest)
        if resumed is not None:
            return resumed, False
        instance = attrs.evolve(instance, unknown_tests=_unknown_tests(instance, work / "repo"))
        calibration_config, judge_config = _configs(instance, work, predictions)
        calibration, calibration_run = _calibrate(instance, calibration_config)
        results, run_digest = _judge(
            instance,
            predictions,
            calibration,
            config=judge_config,
            folder=folder,
            results_root=results_root,
        )
        # After the judging run, which publishes the folder whole (its own files only).
        write_canonical_json(root.resolve(folder / "calibration.json"), calibration.to_dict())
        if calibration_run is not None:
            write_canonical_json(root.resolve(folder / "calibration-run.json"), calibration_run)
        result = InstanceResult(
            instance_id=instance.instance_id,
            input_digest=digest,
            environment_digest=instance.environment_digest,
            calibration=calibration,
            run_digest=run_digest,
            predictions=results,
        )
        write_canonical_json(root.resolve(folder / "instance.json"), result.to_dict())
        return result, True
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _one_at_a_time() -> concurrent.futures.ThreadPoolExecutor:
    """An instance's own attempts run one after another: the suite's parallelism is
    across instances (``max_workers`` locally, the executor's workers on Dask), so one
    knob sizes the load and an instance task holds one core."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=1)


def _calibrate(
    instance: SuiteInstance, config: Path
) -> tuple[Calibration, dict[str, object] | None]:
    if instance.unknown_tests:
        # Found before anything runs: the instance is not run, its table says why.
        failing = set(instance.fail_to_pass)
        missing = tuple(
            DeclaredTestResult(
                test_id=t,
                kind=DeclaredTestKind.FAIL_TO_PASS
                if t in failing
                else DeclaredTestKind.PASS_TO_PASS,
                outcome=DeclaredTestOutcome.MISSING,
            )
            for t in (*instance.fail_to_pass, *instance.pass_to_pass)
        )
        calibration = calibrate(
            instance.instance_id,
            missing,
            None,
            has_reference=False,
            unknown_tests=instance.unknown_tests,
            check_id=_TESTS_CHECK,
        )
        return calibration, None
    with _one_at_a_time() as pool:
        outcome = run_detailed(load_config(config), executor=pool)
    attempts = {a.attempt_id: a for a in outcome.record.attempts}
    has_reference = instance.reference_patch is not None
    calibration = calibrate_checks(
        instance.instance_id,
        (_TESTS_CHECK,),
        attempts.get("baseline"),
        attempts.get("reference"),
        has_reference=has_reference,
    )
    return calibration, outcome.record.to_dict()


def _judge(
    instance: SuiteInstance,
    predictions: Sequence[Prediction],
    calibration: Calibration,
    *,
    config: Path | None,
    folder: Path,
    results_root: Path,
) -> tuple[tuple[PredictionResult, ...], str | None]:
    attempts = states = classes = None
    run_digest = None
    if calibration.valid and config is not None:
        with _one_at_a_time() as pool:
            result = run_pipeline(
                config,
                folder,
                reruns=0,
                replay_mode=REPLAY_NONE,
                results_root=results_root,
                executor=pool,
            )
        run_digest = result.outcome.record.digest
        attempts = {a.attempt_id: a for a in result.outcome.record.attempts}
        states = {a.attempt_id: a.evidence_state for a in result.report.attempts}
        classes = {aid: g.evidence_class for g in result.admission.groups for aid in g.attempt_ids}
    return tuple(
        judge_prediction(
            instance_id=instance.instance_id,
            model=p.model,
            calibration=calibration,
            empty_patch=not p.patch.strip(),
            attempt=(attempts or {}).get(p.model),
            evidence_state=(states or {}).get(p.model),
            evidence_class=(classes or {}).get(p.model),
        )
        for p in predictions
    ), run_digest


def _lost(
    instance: SuiteInstance, predictions: Sequence[Prediction], error: BaseException
) -> InstanceResult:
    """An instance whose task did not complete: a control error, never a verdict."""
    calibration = Calibration(
        instance_id=instance.instance_id,
        valid=False,
        reasons=(CalibrationReason.INFRASTRUCTURE_FAULT,),
        tests=(),
    )
    console.progress(f"instance {instance.instance_id}: did not complete: {type(error).__name__}")
    return InstanceResult(
        instance_id=instance.instance_id,
        input_digest=sha256_hex({"lost": instance.document_digest}),
        environment_digest=None,
        calibration=calibration,
        run_digest=None,
        predictions=tuple(
            judge_prediction(
                instance_id=instance.instance_id,
                model=p.model,
                calibration=calibration,
                empty_patch=not p.patch.strip(),
                attempt=None,
                evidence_state=None,
                evidence_class=None,
            )
            for p in predictions
        ),
    )


# --- the suite --------------------------------------------------------------------------


def _eta(done: int, total: int, started: float) -> str:
    elapsed = time.monotonic() - started
    left = int(elapsed / done * (total - done)) if done else 0
    return f"suite: {done}/{total} instances, {int(elapsed)} s elapsed, ETA {left} s"


def _with_environments(instances: Sequence[SuiteInstance]) -> tuple[SuiteInstance, ...]:
    """Build every instance's environment once, before any task runs: a build failure
    (an unhashed requirement, a missing interpreter) stops the suite at load time."""
    built: dict[tuple[str, Path], str] = {}
    ready = []
    for instance in instances:
        if instance.requirements is not None:
            key = (instance.python, instance.requirements)
            if key not in built:
                try:
                    built[key] = prepare_environment(*key).digest
                except ConfigError as e:
                    raise ConfigError(f"[{instance.instance_id}].environment: {e}") from e
            ready.append(attrs.evolve(instance, environment_digest=built[key]))
        else:
            ready.append(instance)
    return tuple(ready)


def _judge_all(
    loaded: Sequence[SuiteInstance],
    by_instance: Mapping[str, Sequence[Prediction]],
    pool: concurrent.futures.Executor,
    *,
    folder: Path,
    results_root: Path,
    show: Callable[[str], None],
) -> tuple[list[InstanceResult], int]:
    """Every instance as one task on ``pool``: the results in the order given, and how
    many instances ran (the others were resumed)."""
    started = time.monotonic()
    futures = {
        pool.submit(judge_instance, i, by_instance[i.instance_id], folder, results_root): index
        for index, i in enumerate(loaded)
    }
    results: dict[int, InstanceResult] = {}
    judged = 0
    for done, future in enumerate(concurrent.futures.as_completed(futures), start=1):
        index = futures[future]
        try:
            result, ran = future.result()
            judged += ran
        except (ConfigError, EffectError):
            raise
        except Exception as e:
            # A lost task (an infrastructure fault) is a control error, kept.
            result = _lost(loaded[index], by_instance[loaded[index].instance_id], e)
        results[index] = result
        show(_eta(done, len(loaded), started))
    return [results[i] for i in range(len(loaded))], judged


def run_suite(
    instances: Path | str,
    predictions: Path | str,
    output_dir: Path | str,
    *,
    results_root: Path | str = DEFAULT_OUTPUT_ROOT,
    max_workers: int = 1,
    executor: concurrent.futures.Executor | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> SuiteOutcome:
    """Judge every prediction of every instance and write the suite summary.

    Args:
        instances: the instances file (module docstring).
        predictions: the predictions file.
        output_dir: the suite's folder (inside ``results_root``).
        results_root: where outputs may go.
        max_workers: instances judged at once on the local pool (ignored with
            ``executor``, whose size rules).
        executor: where instance tasks run (None: a local pool of ``max_workers``).
        on_progress: called with a progress line (done/total, ETA) after each instance
            (default: `kernel.effects.console.progress`).

    Raises:
        ConfigError: an input is unusable, or ``max_workers`` < 1.
        EffectError: a file cannot be read or written, or an output escapes the root.
    """
    started = time.monotonic()
    if type(max_workers) is not int or max_workers < 1:
        raise ConfigError(f"--max-workers must be an integer >= 1, got {max_workers!r}")
    loaded = _with_environments(load_instances(instances))
    by_instance = load_predictions(predictions, loaded)
    folder = Path(output_dir)
    root = OutputRoot(results_root)
    inputs = [Path(instances), Path(predictions), *(i.repo for i in loaded)]
    files = {
        name: root.resolve(folder / name, inputs=inputs)
        for name in ("summary.json", "summary.md", "summary.html")
    }
    own = executor is None
    pool = executor or concurrent.futures.ThreadPoolExecutor(max_workers=max_workers)
    try:
        results, judged = _judge_all(
            loaded,
            by_instance,
            pool,
            folder=folder.resolve(),
            results_root=Path(results_root).resolve(),
            show=on_progress or console.progress,
        )
    finally:
        if own:
            pool.shutdown(wait=True, cancel_futures=True)
    summary = summarize_suite(results)
    write_canonical_json(files["summary.json"], summary.to_dict())
    atomic_write_bytes(files["summary.md"], render_suite_markdown(summary).encode())
    atomic_write_bytes(files["summary.html"], render_suite_html(summary).encode())
    shutil.rmtree(folder / ".work", ignore_errors=True)
    return SuiteOutcome(
        summary=summary,
        files=files,
        judged=judged,
        wall_ms=int((time.monotonic() - started) * 1000),
    )
