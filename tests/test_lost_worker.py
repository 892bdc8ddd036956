"""A task that runs twice (a lost Dask worker) starts clean; a task that does not complete
is a control error of the run (``infrastructure_fault``), never the worker's failure."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernel.effects import orchestrate
from kernel.effects.orchestrate import load_config, run_detailed
from kernel.run.record import AttemptErrorCode, AttemptState

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "orchestration"
CONFIG = FIXTURES / "nine-attempt-all-states.json"


class _RetryingExecutor(concurrent.futures.Executor):
    """Runs each task twice in the same scratch, as a scheduler does after losing the
    worker that ran the first try (whose leftovers stay behind)."""

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        fn(*args, **kwargs)
        future.set_result(fn(*args, **kwargs))
        return future


class _LostExecutor(concurrent.futures.Executor):
    """Every task is lost (as a KilledWorker after the scheduler's retries)."""

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_exception(RuntimeError("worker lost"))
        return future


def test_a_retried_attempt_starts_from_clean_scratch(monkeypatch: Any) -> None:
    """A second try of the same attempt in the same run scratch does not fail on what
    the first try left (it was `FileExistsError` on ``attempt-N``), and the record is
    the one a single try gives."""
    kept: list[Path] = []
    real = orchestrate._run_attempt

    def leave_leftovers(*args: Any) -> Any:
        scratch: Path = args[-1]
        kept.append(scratch)
        (scratch / "leftover").write_text("from a lost try")
        return real(*args)

    loaded = load_config(CONFIG)
    once = run_detailed(loaded).record
    monkeypatch.setattr(orchestrate, "_run_attempt", leave_leftovers)
    twice = run_detailed(loaded, executor=_RetryingExecutor()).record
    assert twice == once
    assert all(
        a.error is None or a.error.code is not AttemptErrorCode.INFRASTRUCTURE_FAULT
        for a in twice.attempts
    )
    # Each try had a folder of its own.
    assert len(set(kept)) == len(kept) == 2 * len(loaded.attempts)


def test_a_lost_task_is_an_infrastructure_fault() -> None:
    """An attempt whose task never completes is kept, as a control error with its own
    code, not as the worker's failure."""
    loaded = load_config(CONFIG)
    record = run_detailed(loaded, executor=_LostExecutor()).record
    assert len(record.attempts) == len(loaded.attempts)
    for attempt in record.attempts:
        assert attempt.state is AttemptState.WORKER_ERROR
        assert attempt.error is not None
        assert attempt.error.code is AttemptErrorCode.INFRASTRUCTURE_FAULT
        assert "worker lost" in attempt.error.message
