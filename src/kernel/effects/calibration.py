"""Calibration before judgement in a `kernel run` (issue 19): the plan and its outcome.

Before any candidate of a config is judged, its declared tests run on the baseline:
FAIL_TO_PASS must fail, PASS_TO_PASS must pass, and an optional reference patch must
pass them all (the pure rules are `kernel.run.suite.calibrate`). Nothing here has a code
path of its own: the baseline (the empty patch) and the reference patch are attempts of
the ``patch`` worker (`kernel.effects.adapters.prediction`), run by the orchestrator
like any attempt (same executor, same scratch rules, same sandboxes), and checked by
the config's own verifier reduced to its declared-tests checks (the static screen and
the protected paths run as well; they are in-process and cheap).

Config (optional key of the orchestration config)::

    "calibration": {"reference_patch": "<path>"}   (a reference fix; optional)
    "calibration": false                           (off: a caller that calibrates
                                                    itself, as `kernel.effects.suite`)

Rules enforced:

- calibration is on by default for a ``command`` verifier with declared-tests checks;
  every such check is calibrated, each with its own rows (`kernel.run.suite.calibrate_checks`):
  one invalid check stops the run;
- a ``calibration`` entry on a verifier that declares no tests is a `ConfigError`;
- an attempt that did not complete gives no per-test result: ``calibration_error``, a
  control error, never a verdict;
- an invalid calibration stops the run before any attempt: `calibrate_run` returns it
  and the orchestrator raises `kernel.errors.RefusedError` carrying it (`not_valid`
  says why on one line).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Final, Literal

import attrs

from kernel.effects import console
from kernel.effects.adapters.base import ConfigSource, VerifierAdapter, WorkerAdapter
from kernel.effects.adapters.command import CommandVerifier
from kernel.effects.adapters.prediction import PatchWorker
from kernel.effects.files import read_input
from kernel.effects.run_config import CalibrationEntry
from kernel.run.record import AttemptRecord, Calibration
from kernel.run.suite import calibrate_checks

__all__ = [
    "CALIBRATION_BASELINE",
    "CALIBRATION_REFERENCE",
    "CalibrationPlan",
    "calibrate_run",
    "calibration_plan",
    "not_valid",
]

CALIBRATION_BASELINE: Final = "calibration-baseline"
"""The calibration attempt of the baseline (the empty patch)."""
CALIBRATION_REFERENCE: Final = "calibration-reference"
"""The calibration attempt of the config's reference patch."""


@attrs.frozen(kw_only=True)
class CalibrationPlan:
    """The calibration of a config: its declared tests on the baseline (the empty patch)
    and on the optional reference patch, as attempts of the ``patch`` worker checked by
    the config's own verifier reduced to its declared-tests checks."""

    verifier: VerifierAdapter
    """The config's verifier with only its declared-tests checks."""
    checks: tuple[str, ...]
    """The ids of those checks, in the verifier's order (each is calibrated)."""
    attempts: tuple[tuple[str, WorkerAdapter], ...]
    """``calibration-baseline``, then ``calibration-reference`` when there is one."""


def calibration_plan(
    entry: CalibrationEntry | Literal[False] | None,
    source: ConfigSource,
    verifier: VerifierAdapter,
) -> CalibrationPlan | None:
    """The config's calibration (module rules), or None when it has none.

    Args:
        entry: the config's ``calibration`` entry (None: left out).
        source: the config, for its folder and its errors.
        verifier: the config's verifier.

    Raises:
        ConfigError: an entry is given but the verifier declares no tests.
        EffectError: the reference patch cannot be read.
    """
    if entry is False:
        return None
    command = verifier if isinstance(verifier, CommandVerifier) else None
    declared = tuple(c for c in command.checks if c.tests) if command is not None else ()
    if command is None or not declared:
        if entry is not None:
            raise source.error("$.calibration", "the verifier declares no tests to calibrate")
        return None
    baseline = PatchWorker(attempt_id=CALIBRATION_BASELINE, worker_id="baseline", patch=b"")
    attempts: list[tuple[str, WorkerAdapter]] = [(CALIBRATION_BASELINE, baseline)]
    if entry is not None and entry.reference_patch is not None:
        locator = entry.reference_patch
        data = read_input(source.reads(source.base_dir / locator), what="reference patch")
        reference = PatchWorker(attempt_id=CALIBRATION_REFERENCE, worker_id="reference", patch=data)
        attempts.append((CALIBRATION_REFERENCE, reference))
    return CalibrationPlan(
        verifier=attrs.evolve(command, checks=declared),
        checks=tuple(c.id for c in declared),
        attempts=tuple(attempts),
    )


def calibrate_run(
    run_id: str,
    plan: CalibrationPlan,
    submit: Callable[[int, str, WorkerAdapter], concurrent.futures.Future[AttemptRecord]],
) -> Calibration:
    """Run the plan's attempts through ``submit(order, attempt_id, worker)`` (the
    orchestrator's own attempt task on its executor) and calibrate from their
    declared-test outcomes."""
    futures = [
        submit(order, attempt_id, worker)
        for order, (attempt_id, worker) in enumerate(plan.attempts, start=1)
    ]
    records: dict[str, AttemptRecord] = {}
    for (attempt_id, _worker), future in zip(plan.attempts, futures, strict=True):
        try:
            records[attempt_id] = future.result()
        except Exception as e:
            # A task that did not complete gives no per-test result: calibration_error,
            # a control error, never a verdict.
            console.progress(f"calibration {attempt_id}: did not complete: {type(e).__name__}")
    return calibrate_checks(
        run_id,
        plan.checks,
        records.get(CALIBRATION_BASELINE),
        records.get(CALIBRATION_REFERENCE),
        has_reference=len(plan.attempts) > 1,
    )


def not_valid(calibration: Calibration) -> str:
    """The one line that says why a run was not judged: the instance's reasons, then
    each test that gives one."""
    # Rows of several checks name their check (a test id may be declared by two).
    several = len({t.check_id for t in calibration.tests}) > 1
    blamed = [
        f"{t.check_id}: {t.test_id} ({t.blame})" if several else f"{t.test_id} ({t.blame})"
        for t in calibration.tests
        if t.blame is not None
    ]
    return (
        f"calibration: {calibration.instance_id} is not valid: "
        + ", ".join(calibration.reasons)
        + (f"; {'; '.join(blamed)}" if blamed else "")
        + "; no attempt was judged"
    )
