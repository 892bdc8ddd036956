"""Orchestration overhead of a verified run: 8 attempts on a 50 MB repository.

Run: ``.venv/bin/python bench/run.py [--quick]``.

The repository is the demo's (``stats.py`` with its bug, ``test_stats.py``) plus 50 MB
of other files (500 files of 100 kB). Each attempt's worker burns a fixed amount of CPU
then fixes the bug; the verifier's one check burns CPU then runs the unit tests. So the
commands do real, known work, and everything else is orchestration: sandboxes
(namespaces, overlay mount, teardown), patch capture (``git diff`` of the 50 MB tree),
hashing, manifests, verification plumbing and the record.

Figures:

1. ``own``: the sum of the commands' own times: every worker and every check run
   directly (no sandbox), one after another, in a plain copy of the repository;
2. ``sequential``: the wall time of `run_detailed` with a one-thread executor (the
   same commands, one after another, each in its sandbox), and the overhead
   ``sequential / own - 1``. Target: <= 10 % with overlay sandboxes. Figures 1 and 2
   are measured interleaved ``--repeats`` times (default 3) after one warm-up run, and
   the best of each is kept;
3. ``parallel``: the wall time with the default executor (one thread per core), against
   ``own / cores`` (for information: the machine's cores are shared by the commands);
4. ``pipeline with defaults``: the whole ``kernel run`` pipeline (`run_pipeline`) with
   its default settings, stated: 3 reruns of each distinct candidate's worker and an
   exact replay (the whole config once more), on a one-thread executor, against the
   commands' own time for the same work (2 x ``own`` + 3 worker runs for the one
   candidate group all eight attempts share). Target: <= 10 %;
5. ``dask``: figure 3's run on a Dask ``LocalCluster`` of 2 worker processes (after one
   warm-up run on the cluster), against figure 3. Target: <= 1.5x.

Prints one line per figure and a PASS/MISS line per target; exit status 1 on a miss.
The machine's load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernel.effects.executors import open_executor
from kernel.effects.orchestrate import load_config, run_detailed
from kernel.effects.pipeline import DEFAULT_RERUNS, run_pipeline
from kernel.effects.sandbox import available_isolation
from kernel.run.report import RunEvidenceReport, build_evidence_report

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo"
ATTEMPTS = 8
TARGET = 0.10
DASK_TARGET = 1.5

BURN = """import sys, time
end = time.process_time() + float(sys.argv[1])
x = 0
while time.process_time() < end:
    x += 1
"""


BURN_TEST = """import time
import unittest


class BurnTest(unittest.TestCase):
    def test_burn(self):
        end = time.process_time() + {seconds}
        x = 0
        while time.process_time() < end:
            x += 1
        self.assertGreater(x, 0)
"""


def make_repository(root: Path, total_mb: int, check_s: float) -> Path:
    """The demo repository plus ``total_mb`` MB in 100 kB files, and a test that burns
    ``check_s`` seconds of CPU (the verifier's own work beside the demo's tests)."""
    repo = root / "repo"
    shutil.copytree(DEMO / "repo", repo)
    (repo / "test_burn.py").write_text(BURN_TEST.format(seconds=check_s))
    chunk = bytes(range(256)) * 400
    for index in range(total_mb * 10):
        folder = repo / "data" / f"d{index // 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{index:04d}.bin").write_bytes(chunk[:100_000])
    return repo


def make_config(root: Path, worker_s: float, check_s: float) -> Path:
    """A config of 8 command attempts and a one-check command verifier."""
    (root / "burn.py").write_text(BURN)
    fix = (DEMO / "workers" / "correct_fix.sh").read_text().split("set -eu\n", 1)[1]
    worker = root / "worker.sh"
    worker.write_text(f'#!/bin/sh\nset -eu\npython3 "{root}/burn.py" {worker_s}\n{fix}')
    worker.chmod(0o755)
    # What the verifier's check runs, run directly (the own-time baseline).
    check = root / "check.sh"
    check.write_text(
        "#!/bin/sh\nset -eu\nexec python3 -m unittest -q test_stats test_burn 2>/dev/null\n"
    )
    check.chmod(0o755)
    (root / "work-unit.json").write_text(
        json.dumps(
            {
                "id": "bench/median",
                "version": 1,
                "objective": "fix median",
                "inputs": [],
                "required_validators": ["unit-tests"],
            }
        )
    )
    config = {
        "kind": "kernel-orchestration-config",
        "schema_version": "1",
        "run_id": "bench/run",
        "work_unit": "work-unit.json",
        # The figures compare orchestration with the commands' own time: the calibration
        # run of the declared tests (one more check) is measured by bench/suite.py.
        "calibration": False,
        "verifier": {
            "adapter": "command",
            "verifier_id": "bench-verifier",
            "baseline": "repo",
            "checks": [
                {
                    "id": "unit-tests",
                    "tests": {
                        "fail_to_pass": ["test_stats.StatsTest.test_median_even"],
                        "pass_to_pass": [
                            "test_stats.StatsTest.test_mean",
                            "test_stats.StatsTest.test_median_odd",
                            "test_burn.BurnTest.test_burn",
                        ],
                    },
                }
            ],
        },
        "attempts": [
            {
                "attempt_id": f"attempt-{i}",
                "adapter": "command",
                "worker_id": f"worker-{i}",
                "command": ["./worker.sh"],
                "baseline": "repo",
            }
            for i in range(1, ATTEMPTS + 1)
        ],
    }
    path = root / "config.json"
    path.write_text(json.dumps(config))
    return path


def own_time(root: Path, repo: Path) -> float:
    """Seconds for every worker and check run directly, one after another."""
    total = 0.0
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    for index in range(ATTEMPTS):
        tree = root / f"plain-{index}"
        shutil.copytree(repo, tree)
        for script in ("worker.sh", "check.sh"):
            started = time.perf_counter()
            subprocess.run(
                [str(root / script)], cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL
            )
            total += time.perf_counter() - started
        shutil.rmtree(tree)
    return total


def worker_own_time(root: Path, repo: Path) -> float:
    """Seconds for one worker run directly (what one corroboration rerun costs)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    tree = root / "plain-rerun"
    shutil.copytree(repo, tree)
    started = time.perf_counter()
    subprocess.run(
        [str(root / "worker.sh")], cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL
    )
    wall = time.perf_counter() - started
    shutil.rmtree(tree)
    return wall


def full_pipeline(config: Path, root: Path) -> float:
    """Wall seconds of `run_pipeline` with its default reruns and replay, one thread."""
    out = root / "results"
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        result = run_pipeline(config, out / "run", results_root=out, executor=pool)
    wall = time.perf_counter() - started
    if result.replay is None or not result.replay.match:
        raise SystemExit(f"replay did not match: {result.replay}")
    shutil.rmtree(out)
    return wall


def pipeline(
    config: Path, workers: int | None, executor: concurrent.futures.Executor | None = None
) -> float:
    """Wall seconds of one run; checks every attempt is supported."""
    loaded = load_config(config)
    started = time.perf_counter()
    if executor is not None:
        outcome = run_detailed(loaded, executor=executor)
    elif workers is None:
        outcome = run_detailed(loaded)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            outcome = run_detailed(loaded, executor=pool)
    wall = time.perf_counter() - started
    report = build_evidence_report(outcome.record)
    assert isinstance(report, RunEvidenceReport)
    assert report.summary.supported == ATTEMPTS, report.summary
    return wall


def main() -> int:
    """Run the benchmark; exit 1 when the overhead target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter commands, one repeat")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (best of)")
    parser.add_argument("--no-dask", action="store_true", help="skip the Dask figure")
    args = parser.parse_args()
    worker_s, check_s = (0.4, 0.2) if args.quick else (1.0, 0.5)
    if args.quick:
        args.repeats = 1
    level = available_isolation()
    root = Path(tempfile.mkdtemp(prefix="kernel-bench-run-", dir="/var/tmp"))
    # The sandbox runs commands as an unprivileged uid: they must reach the scripts.
    root.chmod(0o755)
    try:
        repo = make_repository(root, 50, check_s)
        config = make_config(root, worker_s, check_s)
        os.sync()
        pipeline(config, 1)  # warm-up: page cache, probe, imports
        owns, sequentials = [], []
        # Interleaved repeats, best of each: load from elsewhere hits both sides alike.
        for _ in range(args.repeats):
            owns.append(own_time(root, repo))
            sequentials.append(pipeline(config, 1))
        own, sequential = min(owns), min(sequentials)
        parallel = pipeline(config, None)
        rerun_own = worker_own_time(root, repo)
        full = full_pipeline(config, root)
        dask = None
        if not args.no_dask:
            with open_executor("dask-local:2") as executor:
                pipeline(config, None, executor)  # warm-up: imports in the worker processes
                dask = pipeline(config, None, executor)
            parallel = min(parallel, pipeline(config, None))
        load = os.getloadavg()
    finally:
        shutil.rmtree(root)
    cores = os.cpu_count() or 1
    overhead = sequential / own - 1
    print(f"isolation {level}; {ATTEMPTS} attempts on a 50 MB repository")
    print(f"own time of worker and verifier commands: {own:.2f} s")
    print(f"sequential pipeline wall time: {sequential:.2f} s (overhead {overhead:+.1%})")
    print(
        f"parallel pipeline wall time ({cores} cores): {parallel:.2f} s "
        f"(own / cores = {own / cores:.2f} s, ratio {parallel / (own / cores):.2f})"
    )
    full_own = 2 * own + DEFAULT_RERUNS * rerun_own
    full_overhead = full / full_own - 1
    print(
        f"pipeline with defaults (reruns {DEFAULT_RERUNS}, exact replay), one thread: "
        f"{full:.2f} s against own {full_own:.2f} s (overhead {full_overhead:+.1%})"
    )
    ok = overhead <= TARGET
    print(f"{'PASS' if ok else 'MISS'} overhead <= {TARGET:.0%} ({overhead:+.1%})")
    full_ok = full_overhead <= TARGET
    print(
        f"{'PASS' if full_ok else 'MISS'} pipeline-with-defaults overhead <= {TARGET:.0%} "
        f"({full_overhead:+.1%})"
    )
    dask_ok = True
    if dask is not None:
        ratio = dask / parallel
        dask_ok = ratio <= DASK_TARGET
        print(f"dask LocalCluster (2 processes) wall time: {dask:.2f} s")
        print(f"{'PASS' if dask_ok else 'MISS'} dask / local pool <= {DASK_TARGET}x ({ratio:.2f}x)")
    print(f"load average while measuring: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0 if ok and full_ok and dask_ok else 1


if __name__ == "__main__":
    sys.exit(main())
