"""Corroborate by N independent reruns: launch, capture, judge, report.

`corroborate` submits N `kernel.effects.sandbox.run_sandboxed` calls to any
`concurrent.futures.Executor` (default: a local thread pool sized to the machine;
``distributed.Client(...).get_executor()`` runs them on a Dask cluster unchanged),
turns the captures into observations, asks `kernel.corroboration.consensus.build_consensus`, and
renders the `CorroborationReport`.

Rules enforced:

- N >= 1, an existing baseline directory and a command that can start are checked
  before anything is launched (`EffectError`/`ConfigError`, nothing written);
- every launched run is judged: a run whose future raised is a ``sandbox_error``
  run, never dropped; a command that could not start in any run is a usage error;
- each run gets its own ``KERNEL_RUN_INDEX`` and recorded variation;
- the majority output is copied out atomically (temp file in the destination
  folder, fsync, rename) before the spill directory is discarded;
- spill files and sandboxes never outlive `corroborate`, also on failure; by default
  the spill folder is a `kernel.effects.sandbox.private_tempdir`, which no sandboxed
  run can see (a run never reads another run's output).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from kernel.corroboration.consensus import (
    CaptureMode,
    CaptureStatus,
    Consensus,
    ConsensusRefusal,
    CorroborationReport,
    Isolation,
    NoConsensus,
    build_consensus,
    build_corroboration_report,
)
from kernel.effects.files import open_input
from kernel.effects.sandbox import (
    Capture,
    Limits,
    SandboxSpec,
    Variation,
    applied_limits,
    base_env,
    check_command_starts,
    observation,
    private_tempdir,
    run_sandboxed,
    variation_env,
)
from kernel.errors import ConfigError, EffectError, RefusedError
from kernel.records.identity import Sha256Stream

__all__ = ["Corroboration", "corroborate", "digest_of"]

DEFAULT_MAX_MAJORITY_BYTES: Final = 64 << 20
DEFAULT_LIMITS: Final = Limits()


@attrs.frozen(kw_only=True)
class Corroboration:
    """What `corroborate` returns. Never a correctness claim."""

    report: CorroborationReport
    """The self-sealed report (what ``kernel corroborate`` writes)."""
    outcome: Consensus | NoConsensus
    """The consensus outcome the report renders."""
    captures: tuple[Capture, ...]
    """Every run's capture, by index (their spill paths no longer exist)."""
    majority_output: bytes | None
    """The majority output bytes, when there is one and it is not larger than the limit."""


def digest_of(data: bytes | Path) -> str:
    """SHA-256 of bytes, or of a file's bytes streamed from disk.

    Raises:
        EffectError: the file cannot be read or is not a regular file (a FIFO would
            block; message names it).
    """
    stream = Sha256Stream()
    if isinstance(data, bytes):
        stream.update(data)
        return stream.hexdigest()
    with open_input(data, what="input") as handle:
        try:
            while chunk := handle.read(1 << 20):
                stream.update(chunk)
        except OSError as e:
            raise EffectError(f"{data}: cannot read: {e.strerror}") from e
    return stream.hexdigest()


def corroborate(
    command: Sequence[str],
    *,
    runs: int,
    baseline: Path | str | None = None,
    capture: CaptureMode = CaptureMode.STDOUT,
    candidate: bytes | Path | None = None,
    baseline_output: bytes | Path | None = None,
    timeout_s: float | None = None,
    network: bool = False,
    variations: Sequence[Variation] = (),
    env: Mapping[str, str] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    isolation: Isolation | None = None,
    executor: concurrent.futures.Executor | None = None,
    spill_root: Path | str | None = None,
    majority_output_path: Path | str | None = None,
    max_majority_bytes: int = DEFAULT_MAX_MAJORITY_BYTES,
    on_capture: Callable[[Capture], None] | None = None,
) -> Corroboration:
    """Run ``command`` N times in isolated sandboxes and judge byte agreement.

    Args:
        command: argv every run executes.
        runs: N >= 1, the number of runs launched.
        baseline: the directory each run starts from (None: an empty one).
        capture: ``stdout`` bytes or a ``patch`` of the final tree.
        candidate: the candidate being corroborated (bytes or a file), optional.
        baseline_output: output that marks a run as no-change (bytes or a file).
        timeout_s: per-run time limit.
        network: give runs the runner's network.
        variations: per-run environment variations (recorded in each run).
        env: names added to every run's minimal environment (`base_env`); nothing
            else of the runner's environment reaches a run.
        limits: resource limits of every run (recorded in each capture).
        isolation: require this isolation level (None: the strongest available).
        executor: where runs execute (None: a local thread pool).
        spill_root: where outputs spill, removed before returning (visible to the
            executor's workers; None: a private scratch folder no sandbox sees).
        majority_output_path: write the majority output here, atomically.
        max_majority_bytes: keep the majority bytes in memory only up to this size.
        on_capture: called with each capture as it completes (progress).

    Raises:
        ConfigError: N < 1 or an empty command.
        EffectError: missing baseline, unreadable candidate or baseline output, a
            command that cannot start, or the majority output cannot be written.
        RefusedError: the consensus refused the observations (a defect of
            this module: its inputs are checked first).
    """
    base = _checked(command, runs, baseline, env)
    candidate_digest = None if candidate is None else digest_of(candidate)
    baseline_output_digest = None if baseline_output is None else digest_of(baseline_output)
    timeout_ms = None if timeout_s is None else int(timeout_s * 1000)
    shared = SandboxSpec(
        command=tuple(command),
        baseline=None if base is None else str(base.resolve()),
        capture=capture,
        timeout_s=timeout_s,
        network=network,
        env=None if env is None else tuple(sorted(env.items())),
        limits=limits,
        isolation=isolation,
    )
    specs = _per_run(shared, runs, variations)
    with _spill(spill_root) as spill:
        captures = _launch(specs, Path(spill), executor, on_capture)
        outcome, majority = _agreement(
            command,
            captures,
            digests=(baseline_output_digest, candidate_digest),
            majority_output_path=majority_output_path,
            max_majority_bytes=max_majority_bytes,
        )
    report = build_corroboration_report(
        outcome, command=command, capture_mode=capture, network=network, timeout_ms=timeout_ms
    )
    return Corroboration(
        report=report, outcome=outcome, captures=tuple(captures), majority_output=majority
    )


def _per_run(spec: SandboxSpec, runs: int, variations: Sequence[Variation]) -> list[SandboxSpec]:
    """``runs`` copies of ``spec``, each with its index and its recorded variation."""
    return [
        attrs.evolve(spec, run_index=i, variation=variation_env(i, variations)) for i in range(runs)
    ]


def _checked(
    command: Sequence[str], runs: object, baseline: Path | str | None, env: Mapping[str, str] | None
) -> Path | None:
    """`corroborate`'s inputs checked before anything runs; the baseline folder.

    Raises:
        ConfigError: N < 1 or an empty command.
        EffectError: a missing baseline or a command that cannot start.
    """
    if type(runs) is not int or runs < 1:
        raise ConfigError(f"the number of runs must be an integer >= 1, got {runs!r}")
    if not command:
        raise ConfigError("no command given")
    base = None if baseline is None else Path(baseline)
    if base is not None and not base.is_dir():
        raise EffectError(f"{base}: baseline directory not found")
    check_command_starts(command, env={**base_env(), **(env or {})})
    return base


def _spill(spill_root: Path | str | None) -> contextlib.AbstractContextManager[str | Path]:
    """Where `corroborate`'s runs spill their outputs (removed on exit)."""
    if spill_root is None:
        return private_tempdir("spill")
    return tempfile.TemporaryDirectory(prefix="kernel-corroborate-", dir=spill_root)


def _agreement(
    command: Sequence[str],
    captures: Sequence[Capture],
    *,
    digests: tuple[str | None, str | None],
    majority_output_path: Path | str | None,
    max_majority_bytes: int,
) -> tuple[Consensus | NoConsensus, bytes | None]:
    """The consensus of the runs (``digests``: the baseline output's and the
    candidate's), and the majority output's bytes when kept in memory (copied to
    ``majority_output_path`` when asked; None without a majority or when too large).

    Raises:
        EffectError: no run could start.
        RefusedError: the consensus refused the observations (a defect of `corroborate`:
            its inputs are checked first), raised with the refusal rather than passed on.
    """
    if all(c.start_failed for c in captures):
        raise EffectError(f"{command[0]}: command could not start ({captures[0].error})")
    outcome = build_consensus(
        [observation(c) for c in captures],
        baseline_output_digest=digests[0],
        candidate_digest=digests[1],
    )
    if isinstance(outcome, ConsensusRefusal):
        codes = ", ".join(outcome.reason_codes)
        raise RefusedError(outcome, f"consensus refused ({codes}): {outcome.explanation}")
    if not isinstance(outcome, Consensus):
        return outcome, None
    source = next(
        Path(c.output_path)
        for c in captures
        if c.output_digest == outcome.majority_digest and c.output_path is not None
    )
    if majority_output_path is not None:
        _atomic_copy(source, Path(majority_output_path))
    return outcome, source.read_bytes() if outcome.majority_size <= max_majority_bytes else None


def _launch(
    specs: Sequence[SandboxSpec],
    spill: Path,
    executor: concurrent.futures.Executor | None,
    on_capture: Callable[[Capture], None] | None,
) -> list[Capture]:
    own = executor is None
    pool = executor or concurrent.futures.ThreadPoolExecutor(
        max_workers=max(1, min(len(specs), os.cpu_count() or 1))
    )
    try:
        futures = {pool.submit(run_sandboxed, spec, spill_dir=spill): spec for spec in specs}
        captures: dict[int, Capture] = {}
        for future in concurrent.futures.as_completed(futures):
            spec = futures[future]
            try:
                capture = future.result()
            except Exception as e:
                capture = _sandbox_error(spec, f"{type(e).__name__}: {e}")
            captures[spec.run_index] = capture
            if on_capture is not None:
                on_capture(capture)
    finally:
        if own:
            pool.shutdown(wait=True, cancel_futures=True)
    return [captures[spec.run_index] for spec in specs]


def _sandbox_error(spec: SandboxSpec, error: str) -> Capture:
    empty = Sha256Stream().hexdigest()
    return Capture(
        run_index=spec.run_index,
        status=CaptureStatus.SANDBOX_ERROR,
        exit_code=None,
        start_failed=False,
        duration_ms=0,
        isolation=spec.isolation or Isolation.COPY,
        capture_mode=spec.capture,
        network=spec.network,
        variation=spec.variation,
        output_digest=None,
        output_size=None,
        output_path=None,
        stdout_digest=empty,
        stdout_size=0,
        stdout_path="",
        stderr_digest=empty,
        stderr_size=0,
        stderr_path="",
        error=error,
        limits=applied_limits(spec.limits, {}),
    )


def _atomic_copy(source: Path, target: Path) -> None:
    """Stream ``source`` to ``target`` atomically (temp file, fsync, rename)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise EffectError(f"{target}: cannot write: {e.strerror}") from e
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise EffectError(f"{target}: write failed: {e.strerror}") from e
        raise
