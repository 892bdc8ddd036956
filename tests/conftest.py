"""Suite-wide test settings.

Hypothesis: no per-example deadline anywhere (the machines are small and shared, and a
slow example is not a wrong one). Under CI (``CI`` set, as `.ci/run` is run), examples
are derandomized so a run is reproducible; locally they stay random, which is where
new counterexamples are found (and then pinned as regression vectors).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from kernel.effects.orchestrate import RunOutcome, load_config, run_detailed

# The static-guard items (see addopts in pyproject.toml for why not the entry point).
pytest_plugins = ("kernel.guard.pytest_plugin",)

settings.register_profile("kernel", deadline=None)
settings.register_profile("kernel-ci", deadline=None, derandomize=True)
# `make test-fast`: fewer examples per property (the full count runs in `make check`).
settings.register_profile("kernel-fast", deadline=None, max_examples=10)
settings.load_profile("kernel-ci" if os.environ.get("CI") else "kernel")

# Test files that start processes (workers, sandboxes, git, ssh-keygen, a browser, a
# database, a Dask cluster, the `kernel` command): every test in them is marked
# `processes` and left out of `make test-fast`. A new such file joins this list.
PROCESS_TEST_FILES = frozenset(
    {
        "test_adapters_command",
        "test_adapters_junit",
        "test_adapters_patch",
        "test_adapters_prediction",
        "test_binding",
        "test_binding_api_boundary",
        "test_binding_fixtures",
        "test_browser",
        "test_calibration_run",
        "test_cli_conventions",
        "test_cli_inputs",
        "test_decision",
        "test_demo",
        "test_demo_admission",
        "test_environments",
        "test_evidence_report",
        "test_exceptions",
        "test_executors",
        "test_files",
        "test_function_size",
        "test_gate",
        "test_guard",
        "test_guard_effects",
        "test_guard_pytest_plugin",
        "test_guard_trace",
        "test_guard_trace_check",
        "test_identity",
        "test_idkmesh",
        "test_isolation_evidence",
        "test_ledger_postgres",
        "test_ledger_store",
        "test_lost_worker",
        "test_oracle",
        "test_orchestrate",
        "test_orchestrator",
        "test_packaging",
        "test_patch_hygiene",
        "test_promote",
        "test_promote_kill",
        "test_public_api",
        "test_pytest_project",
        "test_readme",
        "test_refusal_explanations",
        "test_render",
        "test_render_branches",
        "test_render_decision",
        "test_report_cli",
        "test_rerun",
        "test_reward_hacks",
        "test_reward_hacks_review",
        "test_run_admission_branches",
        "test_run_cli",
        "test_run_costs",
        "test_run_folder_lock",
        "test_run_replay",
        "test_runrecord",
        "test_runrecord_branches",
        "test_sandbox",
        "test_sandbox_hardening",
        "test_sandbox_unprivileged",
        "test_scratch",
        "test_screen",
        "test_screen_promote",
        "test_selftest",
        "test_signing",
        "test_suite",
        "test_suite_dask",
        "test_suite_parse",
        "test_suite_run",
    }
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast-lane",
        action="store_true",
        help="do not even collect the PROCESS_TEST_FILES (make test-fast: importing them"
        " costs seconds for tests the lane leaves out anyway)",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``--fast-lane`` the files of `PROCESS_TEST_FILES` are not collected."""
    if config.getoption("--fast-lane") and collection_path.stem in PROCESS_TEST_FILES:
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of `PROCESS_TEST_FILES` (one place, not a line in each file)."""
    for item in items:
        if Path(str(item.fspath)).stem in PROCESS_TEST_FILES:
            item.add_marker(pytest.mark.processes)


DemoWorkers = Callable[[dict[str, str], Callable[[dict[str, Any]], None]], RunOutcome]
"""Runs worker bodies as the attempts of the demo, its config edited by the second
argument: the whole pipeline, each worker a real sandboxed run."""


@pytest.fixture
def demo_workers() -> Iterator[DemoWorkers]:
    """The reward-hack harness: each call runs on the fixture's own copy of the demo (in
    the system temp dir, removed afterwards); a worker body is the script after
    ``set -u``, its name the attempt id."""
    base = Path(tempfile.mkdtemp(prefix="kernel-hack-test-"))
    demo = base / "demo"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "demo", demo)

    def run(workers: dict[str, str], edit: Callable[[dict[str, Any]], None]) -> RunOutcome:
        attempts: list[dict[str, Any]] = []
        for name, body in sorted(workers.items()):
            script = demo / "workers" / f"{name}.sh"
            script.write_text("#!/bin/sh\nset -u\n" + body)
            script.chmod(0o755)
            attempts.append(
                {
                    "attempt_id": name,
                    "adapter": "command",
                    "worker_id": f"w-{name}",
                    "command": [f"workers/{name}.sh"],
                    "baseline": "repo",
                    "timeout_s": 60,
                }
            )
        config = json.loads((demo / "config.json").read_text())
        config["attempts"] = attempts
        edit(config)
        path = demo / "hack-config.json"
        path.write_text(json.dumps(config))
        return run_detailed(load_config(path))

    try:
        yield run
    finally:
        shutil.rmtree(base)


ScriptRun = Callable[[list[str], str], tuple[subprocess.CompletedProcess[str], int]]


@pytest.fixture
def script_collections(tmp_path: Path) -> ScriptRun:
    """Run the ``kernel`` console script with ``words`` in ``tmp_path``, in a fresh
    interpreter whose cyclic collector has a probe: the finished process, and how many
    collections started once the module ``after`` was imported (the probe's marks are
    written beside ``tmp_path``, not in the tree the script reads)."""

    def run(words: list[str], after: str) -> tuple[subprocess.CompletedProcess[str], int]:
        marks = tmp_path.parent / f"{tmp_path.name}-collections"
        probe = (
            "import gc, sys\n"
            f"sys.argv = ['kernel', *{words!r}]\n"
            "def mark(phase, info):\n"
            f"    if phase == 'start' and {after!r} in sys.modules:\n"
            f"        open({str(marks)!r}, 'a').write('x')\n"
            "gc.callbacks.append(mark)\n"
            "from kernel.effects.entry import script\nsys.exit(script())\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        return proc, len(marks.read_text(encoding="utf-8")) if marks.exists() else 0

    return run
