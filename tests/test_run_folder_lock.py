"""A run folder is one run (issue 22 item 3): a lock naming its holder, outputs staged
and published whole, a killed run's leftovers swept by the next run and only then.

Killing is done for real (SIGKILL of a child process holding a run folder, and of a
`kernel run`), never simulated by skipping code."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernel.effects.cli import main
from kernel.effects.run_folder_lock import (
    RunFolder,
    holding_run_folder,
    sweep_run_folders,
)
from kernel.effects.sandbox.scratch import private_tempdir, scratch_root
from kernel.errors import EffectError, RunFolderBusy
from kernel.importers.idkmesh import run_record_from_idkmesh
from kernel.run.report import RunEvidenceReport, build_evidence_report
from kernel.views import render_json

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo"
HOST = os.uname().nodename


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _temporaries(parent: Path) -> list[str]:
    return sorted(n for n in os.listdir(parent) if ".staging-" in n or ".old-" in n)


def test_a_second_run_into_a_held_folder_is_refused_naming_the_holder(tmp_path: Path) -> None:
    """While one run holds the folder, another is refused at once, naming pid and host;
    once the first is done the folder is free again."""
    target = tmp_path / "results" / "demo"
    busy = pytest.raises(RunFolderBusy, match=rf"pid {os.getpid()} host {HOST}")
    with RunFolder(target), busy:
        RunFolder(target).__enter__()
    with RunFolder(target) as again:
        again.publish()
    assert target.is_dir()


def test_kernel_run_into_a_held_folder_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kernel run` into a folder another run holds: exit 2, one line naming the holder,
    nothing run or written (the lock is taken before the first worker starts)."""
    shutil.copytree(DEMO, tmp_path / "demo")
    results = tmp_path / "results"
    target = results / "demo"
    argv = ["run", "--config", str(tmp_path / "demo/config.json"), "--output-dir", str(target)]
    with RunFolder(target):
        code = main([*argv, "--results-root", str(results), "--reruns", "0", "--replay", "none"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert f"another run is writing this output folder (pid {os.getpid()} host {HOST})" in err
    assert not target.exists()
    assert _temporaries(results) == []


_HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from kernel.effects.run_folder_lock import RunFolder
    target = Path(sys.argv[1])
    with RunFolder(target, owned=("run.json",)) as folder:
        folder.staged(target / "run.json").write_text("half")
        print("staged", flush=True)
        time.sleep(120)
    """
)


def _kill_while_staging(target: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(target)], stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "staged\n"
        finally:
            child.kill()
            child.wait()


def test_a_killed_run_leaves_no_folder_and_its_staging_is_swept(tmp_path: Path) -> None:
    """SIGKILL while writing: the output folder does not exist (nothing looks complete);
    the staging folder is left, and the next run into the parent removes it."""
    target = tmp_path / "results" / "demo"
    _kill_while_staging(target)
    assert not target.exists()
    assert len(_temporaries(target.parent)) == 1
    with RunFolder(target, owned=("run.json",)) as folder:
        assert _temporaries(target.parent) == [folder.staging.name]
        folder.staged(target / "run.json").write_text("whole")
        folder.publish()
    assert (target / "run.json").read_text() == "whole"
    assert _temporaries(target.parent) == []


def test_a_killed_rerun_leaves_the_previous_run_whole(tmp_path: Path) -> None:
    """SIGKILL during a run into a folder holding an earlier run: the earlier run is
    still there, byte for byte."""
    target = tmp_path / "results" / "demo"
    with RunFolder(target, owned=("run.json",)) as folder:
        folder.staged(target / "run.json").write_text("first")
        folder.publish()
    _kill_while_staging(target)
    assert (target / "run.json").read_text() == "first"
    assert os.listdir(target) == ["run.json"]


def test_publishing_replaces_the_run_and_keeps_the_users_files(tmp_path: Path) -> None:
    """A new run replaces every file of the old run (an old patch does not linger) and
    carries over what is not a run's own (a decision recorded beside the report)."""
    target = tmp_path / "results" / "demo"
    (target / "patches").mkdir(parents=True)
    (target / "patches" / "old.patch").write_text("old")
    (target / "run.json").write_text("old")
    (target / "decision.json").write_text("signed")
    with RunFolder(target, owned=("run.json", "patches", "checks")) as folder:
        folder.staged(target / "run.json").write_text("new")
        folder.publish()
    assert sorted(os.listdir(target)) == ["decision.json", "run.json"]
    assert (target / "run.json").read_text() == "new"
    assert (target / "decision.json").read_text() == "signed"
    assert _temporaries(target.parent) == []


def test_leaving_without_publishing_changes_nothing(tmp_path: Path) -> None:
    """A run that fails (an exception) removes its staging folder; the old run stays."""
    target = tmp_path / "results" / "demo"
    target.mkdir(parents=True)
    (target / "run.json").write_text("old")

    def failing_run() -> None:
        with RunFolder(target) as folder:
            folder.staged(target / "run.json").write_text("new")
            raise RuntimeError("a step failed")

    with pytest.raises(RuntimeError, match="a step failed"):
        failing_run()
    assert (target / "run.json").read_text() == "old"
    assert _temporaries(target.parent) == []


def test_the_sweep_removes_only_dead_runs_own_folders(tmp_path: Path) -> None:
    """Removed: a dead run's staging and set-aside folders. Kept: a live run's folder (a
    live pid, or a held lock under a recycled dead pid), another user's folder, a
    symlink named like one (never followed), and anything not named like one."""
    parent = tmp_path / "results"
    parent.mkdir()
    dead = _dead_pid()
    gone = [parent / f".demo.staging-{dead}-0123abcd", parent / f".demo.old-{dead}-89abcdef"]
    for folder in gone:
        folder.mkdir()
        (folder / "run.json").write_text("partial")
    live = parent / f".demo.staging-{os.getpid()}-00000000"
    live.mkdir()
    other = parent / f".other.staging-{dead}-11111111"
    other.mkdir()
    os.chown(other, 65534, 65534)
    outside = parent.parent / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    link = parent / f".link.staging-{dead}-22222222"
    link.symlink_to(outside)
    plain = parent / "demo"
    plain.mkdir()
    held = parent / f".held.staging-{dead}-33333333"
    held.mkdir()
    lock = os.open(held / ".lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a live writer under a recycled pid
        removed = sweep_run_folders(parent)
    finally:
        os.close(lock)
    assert sorted(removed) == sorted(gone)
    for kept in (live, other, link, plain, held):
        assert os.path.lexists(kept), kept
    assert (outside / "keep").read_text() == "keep"
    assert stat.S_ISLNK(link.lstat().st_mode)


def test_a_killed_kernel_run_is_swept_by_the_next_run(tmp_path: Path) -> None:
    """End to end: `kernel run` killed (SIGKILL, whole process group) while its worker
    runs leaves no output folder; the next `kernel run` sweeps the staging folder and
    publishes a complete one."""
    base = tmp_path / "demo"
    shutil.copytree(DEMO, base)
    slow = base / "workers" / "slow.sh"
    slow.write_text("#!/bin/sh\nsleep 60\n")
    slow.chmod(0o755)
    config = base / "config.json"
    original = config.read_text()
    config.write_text(original.replace('"workers/noop.sh"', '"workers/slow.sh"'))
    results = tmp_path / "results"
    target = results / "demo"
    argv = [
        sys.executable, "-m", "kernel", "run", "--config", str(config), "--output-dir",
        str(target), "--results-root", str(results), "--reruns", "0", "--replay", "none",
    ]  # fmt: skip
    child = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if results.is_dir() and _temporaries(results):
                break
            time.sleep(0.05)
        assert _temporaries(results), "the run never started staging"
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert not target.exists()
    assert len(_temporaries(results)) == 1
    config.write_text(original)
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert _temporaries(results) == []
    assert {"run.json", "evidence.html", "evidence.json"} <= set(os.listdir(target))


def test_a_dead_verbs_scratch_folder_is_swept_by_the_next(tmp_path: Path) -> None:
    """Temporary folders of git index builds and signature checks are kernel scratch
    folders: named with their owner's pid, locked, and swept by the next scratch folder
    once the owner is dead (issue 22: `kernel-index-*`, `kernel-sig-*` were never)."""
    dead = _dead_pid()
    root = scratch_root()
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    leftovers = [root / f"index-{dead}-abcd1234", root / f"sig-{dead}-abcd1234"]
    for folder in leftovers:
        folder.mkdir()
        (folder / ".lock").write_text("")
    with private_tempdir("sig") as live:
        assert live.name.startswith(f"sig-{os.getpid()}-")
        for folder in leftovers:
            assert not folder.exists()


def test_a_decision_is_not_written_into_a_folder_a_run_is_publishing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kernel decision record` beside a run's report takes the run's lock: while a run
    holds the folder it is refused (exit 2, naming the run), so the decision cannot be
    lost when the run swaps the folder; once the run is done it is written."""
    results = tmp_path / "results"
    target = results / "demo"
    with RunFolder(target) as folder:
        folder.publish()
    run = run_record_from_idkmesh(json.loads((DEMO.parent / "idkmesh/demo.run.json").read_text()))
    report = build_evidence_report(run)
    assert isinstance(report, RunEvidenceReport)
    evidence = tmp_path / "evidence.json"
    evidence.write_bytes(render_json(report))
    argv = [
        "decision", "record", "--evidence-report", str(evidence),
        "--output", str(target / "decision.json"), "--results-root", str(results),
        "--decision-id", "d-1", "--decision", "escalate", "--rationale", "r", "--decider-id", "a",
    ]  # fmt: skip
    with RunFolder(target):
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"a run is writing this folder (pid {os.getpid()} host {HOST})" in err
    assert not (target / "decision.json").exists()
    assert main(argv) == 0
    assert (target / "decision.json").is_file()
    with holding_run_folder(tmp_path / "elsewhere" / "x.json"):  # not a run folder: no lock
        pass


def test_the_sweep_keeps_a_folder_whose_lock_it_cannot_open(tmp_path: Path) -> None:
    """A dead run's folder whose ``.lock`` is a symlink (never followed, so never
    proven free) is kept; a parent that cannot be listed sweeps nothing."""
    parent = tmp_path / "results"
    parent.mkdir()
    folder = parent / f".demo.staging-{_dead_pid()}-44444444"
    folder.mkdir()
    (folder / ".lock").symlink_to(tmp_path / "elsewhere")
    assert sweep_run_folders(parent) == []
    assert folder.is_dir()
    assert sweep_run_folders(tmp_path / "absent") == []


def test_an_output_folder_that_cannot_be_made_or_replaced_is_an_effect_error(
    tmp_path: Path,
) -> None:
    """A run folder under a file (its lock cannot be made) is refused at once; a run
    whose output path is a file cannot be published: the file is kept, no staging
    folder is left."""
    blocker = tmp_path / "a-file"
    blocker.write_text("keep")
    with pytest.raises(EffectError, match="cannot open the run lock"), RunFolder(blocker / "run"):
        pass
    with RunFolder(blocker) as folder:
        (folder.staging / "run.json").write_text("{}")
        with pytest.raises(EffectError, match=f"{blocker}: cannot publish the run"):
            folder.publish()
    assert blocker.read_text() == "keep"
    assert _temporaries(tmp_path) == []


def test_a_run_lock_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    """Writing beside a run's outputs takes the run lock; a lock that is a symlink is
    not followed: an effect error, nothing written."""
    folder = tmp_path / "results" / "demo"
    folder.mkdir(parents=True)
    (folder.parent / ".demo.lock").symlink_to(tmp_path / "elsewhere")
    with (
        pytest.raises(EffectError, match="cannot open the run lock"),
        holding_run_folder(folder / "decision.json"),
    ):
        (folder / "decision.json").write_text("{}")
    assert not (folder / "decision.json").exists()
    assert not (tmp_path / "elsewhere").exists()
