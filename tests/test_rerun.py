"""Tests for kernel.effects.rerun: N isolated runs through any executor -> consensus."""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernel.corroboration.consensus import (
    CaptureMode,
    Consensus,
    ConsensusRefusal,
    Isolation,
    NoConsensus,
    NoConsensusReason,
    RunStatus,
    build_consensus,
)
from kernel.effects.rerun import corroborate, digest_of
from kernel.effects.sandbox import LimitKind, Limits, Variation, scratch_root
from kernel.effects.sandbox.scratch import MOUNT_POINTS
from kernel.errors import ConfigError, EffectError, RefusedError


def _owned_elsewhere(name: str) -> bool:
    """True when scratch dir ``name`` (``<kind>-<pid>-<random>``) belongs to a live
    process that is neither this test process nor one of its descendants (another
    session's runner on the same machine). A dead owner's dir is a leftover."""
    parts = name.split("-")
    if len(parts) < 3 or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    while pid > 1:
        if pid == os.getpid():
            return False
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return True


@pytest.fixture(autouse=True)
def no_scratch_left() -> Any:
    """No sandbox scratch dir of this test survives it.

    Only dirs made during the test count: one left by an earlier, killed runner is
    swept by the next sandbox, and must not turn this test red.
    """
    root = scratch_root()
    before = {p.name for p in root.iterdir()} if root.exists() else set()
    yield
    after = {p.name for p in root.iterdir()} if root.exists() else set()
    left = sorted(name for name in after - before - {MOUNT_POINTS} if not _owned_elsewhere(name))
    assert left == []


def test_unanimous_stdout_consensus_with_candidate() -> None:
    """Three identical outputs corroborate the candidate; bytes are returned."""
    result = corroborate(["echo", "answer"], runs=3, candidate=b"answer\n")
    assert isinstance(result.outcome, Consensus)
    assert result.report.agreement_count == 3
    assert result.report.candidate_matches_majority is True
    assert result.report.candidate_reproduced_by == (0, 1, 2)
    assert result.majority_output == b"answer\n"
    assert [c.run_index for c in result.captures] == [0, 1, 2]


def test_default_spill_folder_is_private_and_hidden_from_runs() -> None:
    """Spills live under the scratch root, which no sandboxed run can list."""
    seen: list[str] = []
    result = corroborate(
        ["sh", "-c", f"ls -A {scratch_root()}; echo end"],
        runs=3,
        on_capture=lambda c: seen.append(c.stdout_path),
    )
    assert isinstance(result.outcome, Consensus)
    assert result.majority_output == b"end\n"
    assert all(Path(path).parent.parent == scratch_root() for path in seen)
    assert all(Path(path).parent.name.startswith("spill-") for path in seen)


def test_run_index_decorrelates_outputs() -> None:
    """Each run sees its own KERNEL_RUN_INDEX; distinct outputs give no consensus."""
    result = corroborate(["sh", "-c", 'echo "$KERNEL_RUN_INDEX"'], runs=3)
    assert isinstance(result.outcome, NoConsensus)
    assert result.outcome.reason is NoConsensusReason.NO_STRICT_MAJORITY
    assert len(result.report.groups) == 3
    assert result.majority_output is None


def test_patch_consensus_writes_majority_atomically(tmp_path: Path) -> None:
    """Patch capture over a baseline: the majority patch is copied out before cleanup."""
    base = tmp_path / "base"
    base.mkdir()
    (base / "f.txt").write_text("v1\n")
    target = tmp_path / "out" / "majority.patch"
    result = corroborate(
        ["sh", "-c", "echo v2 > f.txt"],
        runs=3,
        baseline=base,
        capture=CaptureMode.PATCH,
        majority_output_path=target,
    )
    assert isinstance(result.outcome, Consensus)
    assert target.read_bytes() == result.majority_output
    assert b"+v2" in target.read_bytes()
    assert (base / "f.txt").read_text() == "v1\n"
    assert result.report.isolation is Isolation.OVERLAY


def test_baseline_output_marks_no_change() -> None:
    """Runs that reproduce the baseline output are no-change and carry no consensus."""
    result = corroborate(["echo", "same"], runs=2, baseline_output=b"same\n")
    assert isinstance(result.outcome, NoConsensus)
    assert result.outcome.reason is NoConsensusReason.NO_CANDIDATE_OUTPUT
    assert result.report.no_change_run_indexes == (0, 1)


def test_timeouts_are_failed_runs() -> None:
    """A run that times out counts as launched and joins no group."""
    script = 'if [ "$KERNEL_RUN_INDEX" = 2 ]; then sleep 30; fi; echo ok'
    result = corroborate(["sh", "-c", script], runs=3, timeout_s=2.0)
    assert isinstance(result.outcome, Consensus)
    assert result.report.agreement_count == 2
    assert result.report.runs[2].status is RunStatus.TIMEOUT
    assert result.report.failed_run_indexes == (2,)


def test_variations_are_recorded_per_run() -> None:
    """Each run's variation is in the report."""
    result = corroborate(["true"], runs=2, variations=[Variation.TZ, Variation.SEED])
    assert result.report.runs[0].variation == (
        ("KERNEL_RUN_SEED", "1"),
        ("PYTHONHASHSEED", "1"),
        ("TZ", "UTC"),
    )
    assert result.report.runs[1].variation[2] == ("TZ", "America/New_York")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"runs": 0}, ConfigError),
        ({"runs": True}, ConfigError),
        ({"runs": 1, "baseline": "/nonexistent/baseline"}, EffectError),
        ({"runs": 1, "baseline_output": Path("/nonexistent/out")}, EffectError),
    ],
)
def test_bad_input_raises_before_launching(kwargs: dict[str, Any], error: type[Exception]) -> None:
    """N < 1, a missing baseline or unreadable baseline output fail before any run."""
    with pytest.raises(error):
        corroborate(["true"], **kwargs)


def test_no_command_is_refused_before_launching() -> None:
    """An empty command is a usage error, not N failed runs."""
    with pytest.raises(ConfigError, match="no command given"):
        corroborate([], runs=2)


def test_a_majority_output_that_cannot_be_written_is_an_effect_error(tmp_path: Path) -> None:
    """The majority output under a file, or onto a folder, is an effect error naming
    it; nothing is left beside it (no temporary file)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("keep")
    with pytest.raises(EffectError, match="cannot write"):
        corroborate(["echo", "x"], runs=1, majority_output_path=blocker / "majority.out")
    folder = tmp_path / "a-folder"
    folder.mkdir()
    with pytest.raises(EffectError, match=f"{folder}: write failed"):
        corroborate(["echo", "x"], runs=1, majority_output_path=folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "a-folder"]
    assert list(folder.iterdir()) == []


def test_command_that_cannot_start() -> None:
    """A command missing everywhere is refused; one missing only inside the sandbox too."""
    with pytest.raises(EffectError):
        corroborate(["kernel-no-such-program"], runs=2)
    with pytest.raises(EffectError):
        corroborate(["./missing-script"], runs=2)


class _Exploding(concurrent.futures.Executor):
    """An executor whose run 1 raises: that run must become a sandbox error."""

    def __init__(self) -> None:
        self.inner = concurrent.futures.ThreadPoolExecutor(2)

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        if args[0].run_index == 1:
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            future.set_exception(RuntimeError("worker lost"))
            return future
        return self.inner.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.inner.shutdown(wait=wait, cancel_futures=cancel_futures)


def test_lost_run_is_a_sandbox_error_not_dropped() -> None:
    """A run whose future raises is still launched: a sandbox_error, never dropped."""
    with _Exploding() as pool:
        result = corroborate(["echo", "x"], runs=3, executor=pool)
    assert result.report.runs[1].status is RunStatus.SANDBOX_ERROR
    assert result.report.agreement_count == 2
    assert result.report.runs_launched == 3


def test_digest_of_streams_files(tmp_path: Path) -> None:
    """digest_of hashes bytes and files identically."""
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 3_000_000)
    assert digest_of(path) == digest_of(b"x" * 3_000_000)
    assert digest_of(b"abc") == hashlib.sha256(b"abc").hexdigest()


@pytest.mark.slow
def test_dask_local_cluster_executor_runs_unchanged(tmp_path: Path) -> None:
    """A Dask distributed client's executor runs the reruns without code changes."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # any free port: another run may hold 8787
            silence_logs=50,
        ) as cluster,
        Client(cluster) as client,  # type: ignore[no-untyped-call]
    ):
        executor = client.get_executor()
        result = corroborate(["echo", "dask"], runs=3, executor=executor, spill_root=tmp_path)
    assert isinstance(result.outcome, Consensus)
    assert result.majority_output == b"dask\n"
    assert result.report.isolation is Isolation.OVERLAY


def test_a_consensus_refusal_is_raised_not_returned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal of the consensus (impossible with checked inputs) raises RefusedError
    carrying the refusal, also under ``python -O`` (no assert)."""

    def refusing(observations: Any, **_kwargs: Any) -> Any:
        return build_consensus(observations, baseline_output_digest="not-a-digest")

    monkeypatch.setattr("kernel.effects.rerun.build_consensus", refusing)
    with pytest.raises(RefusedError, match="invalid_baseline_output_digest") as raised:
        corroborate(["true"], runs=1, spill_root=tmp_path)
    assert isinstance(raised.value.refusal, ConsensusRefusal)


def test_each_rerun_records_its_limits(tmp_path: Path) -> None:
    """Every rerun of a corroboration carries its limits and how they were applied."""
    limits = Limits(memory_bytes=512 << 20, processes=64)
    result = corroborate(["echo", "same"], runs=2, limits=limits, spill_root=tmp_path)
    for run in result.outcome.runs:
        assert run.limits is not None
        applied = {limit.kind: limit for limit in run.limits}
        assert [limit.kind for limit in run.limits] == [str(k) for k in LimitKind]
        assert applied["memory"].value == 512 << 20
        assert applied["memory"].mechanism in ("cgroup_v1", "rlimit_private")
        assert applied["processes"].value == 64
