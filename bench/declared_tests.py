"""Declared-tests check cost: controls and a process per test vs one plain unittest run.

Run: ``.venv/bin/python bench/declared_tests.py [--quick]``.

On the demo's baseline, in the same sandbox, interleaved pairs of:

- the kernel's check: controls and plan written (`declared_tests.prepare`), the
  bootstrap run (`python3 -I -B <bootstrap> PLAN`: 4 declared tests and 3 controls,
  each in a process forked from the pre-import state), the stream collected and judged;
- the same 4 tests in one plain ``python3 -m unittest`` run.

Also the same pair without a sandbox (plain subprocesses), to separate the runner's
cost from the sandbox's. Prints the machine's load, the medians, the ratio (target:
<= 3x in the sandbox) and the overhead per declared test; exit status 1 on a miss.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernel.corroboration.consensus import CaptureMode, CaptureStatus
from kernel.effects.adapters import declared_tests, tests_bootstrap
from kernel.effects.sandbox import SandboxSpec, read_output, run_sandboxed

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "fixtures" / "demo" / "repo"
TESTS = (
    "test_stats.StatsTest.test_median_even",
    "test_stats.StatsTest.test_mean",
    "test_stats.StatsTest.test_median_odd",
    "test_stats.StatsTest.test_median_unsorted_input_untouched",
)
BOOTSTRAP = str(Path(tests_bootstrap.__file__).resolve())
PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"


def kernel_check(work: Path, index: int) -> float:
    """Seconds for one whole declared-tests check in a sandbox (prepare to verdict)."""
    started = time.perf_counter()
    preload = work / f"tree-{index}"
    plan = declared_tests.prepare(BASELINE, TESTS, preload)
    spill = work / f"spill-{index}"
    spill.mkdir()
    capture = run_sandboxed(
        SandboxSpec(
            command=(PYTHON, "-I", "-B", BOOTSTRAP, plan.file_name),
            baseline=str(BASELINE),
            capture=CaptureMode.STDOUT,
            preload=str(preload),
        ),
        spill_dir=spill,
    )
    collected = declared_tests.collect(read_output(capture, max_bytes=1 << 24), plan)
    verdict = declared_tests.judge(TESTS, collected)
    elapsed = time.perf_counter() - started
    assert capture.status is CaptureStatus.OK, capture.error
    assert not collected.findings, collected.findings
    assert verdict[2]["test_stats.StatsTest.test_median_even"] == "failure", verdict
    return elapsed


def plain_unittest(work: Path, index: int) -> float:
    """Seconds for the same tests in one ``python3 -m unittest`` run in a sandbox."""
    spill = work / f"plain-{index}"
    spill.mkdir()
    started = time.perf_counter()
    capture = run_sandboxed(
        SandboxSpec(
            command=(PYTHON, "-m", "unittest", *TESTS),
            baseline=str(BASELINE),
            capture=CaptureMode.STDOUT,
        ),
        spill_dir=spill,
    )
    elapsed = time.perf_counter() - started
    assert capture.exit_code == 1, capture  # test_median_even fails on the baseline
    return elapsed


def unsandboxed(work: Path, index: int) -> tuple[float, float]:
    """The same pair as plain subprocesses in a copy of the baseline."""
    tree = work / f"copy-{index}"
    shutil.copytree(BASELINE, tree)
    plan = declared_tests.prepare(tree, TESTS, tree)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    started = time.perf_counter()
    done = subprocess.run(
        [PYTHON, "-I", "-B", BOOTSTRAP, plan.file_name],
        cwd=tree,
        env=env,
        capture_output=True,
        check=True,
    )
    declared_tests.judge(TESTS, declared_tests.collect(done.stdout, plan))
    middle = time.perf_counter()
    subprocess.run(
        [PYTHON, "-B", "-m", "unittest", *TESTS],
        cwd=tree,
        env=env,
        capture_output=True,
        check=False,
    )
    return middle - started, time.perf_counter() - middle


def main() -> int:
    """Measure and print; 1 when the sandboxed ratio misses its target."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    repeats = 5 if parser.parse_args().quick else 15
    work = Path(tempfile.mkdtemp(prefix="kernel-bench-tests-"))
    try:
        kernel_check(work, -1)  # warm-up (page cache, interpreter files)
        pairs = [(kernel_check(work, i), plain_unittest(work, i)) for i in range(repeats)]
        raw = [unsandboxed(work, i) for i in range(repeats)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    ours = statistics.median(p[0] for p in pairs)
    plain = statistics.median(p[1] for p in pairs)
    ratio = statistics.median(p[0] / p[1] for p in pairs)
    raw_ratio = statistics.median(r[0] / r[1] for r in raw)
    per_test = (ours - plain) / len(TESTS)
    print(f"load average: {load} ({os.cpu_count()} cpus), {repeats} interleaved pairs")
    print(f"declared-tests check (4 tests + 3 controls, sandboxed): {ours * 1000:.1f} ms")
    print(f"plain python -m unittest (4 tests, sandboxed):            {plain * 1000:.1f} ms")
    print(
        f"ratio (median of pairs): {ratio:.2f}x; overhead per declared test: "
        f"{per_test * 1000:.1f} ms"
    )
    print(
        f"without a sandbox: ratio {raw_ratio:.2f}x "
        f"({statistics.median(r[0] for r in raw) * 1000:.1f} ms vs "
        f"{statistics.median(r[1] for r in raw) * 1000:.1f} ms)"
    )
    met = ratio <= 3.0
    print(f"{'PASS' if met else 'MISS'}: sandboxed ratio <= 3x")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
