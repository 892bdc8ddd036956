"""A suite of task instances and model predictions: calibration, per-prediction results,
and the suite summary (SWE-bench's resolved table), as records.

Pure: records in, records out (the runner is `kernel.effects.suite`). Rules enforced:

- **calibration** (`calibrate`; `calibrate_checks` for every declared-tests check of a
  verifier: each check's rows under its id, the reasons of all): before any candidate
  is judged, the declared tests run on the baseline (and on the optional reference
  patch). A test whose module cannot be
  imported on the baseline never ran: ``environment_error_test_module_not_importable``
  (a missing dependency, an id naming no module; the row names the missing module),
  whichever list it is in, and only that (not the reference's failing it too). Every
  other FAIL_TO_PASS test must fail or error on the baseline
  (``fail_to_pass_passes_on_baseline``), every PASS_TO_PASS test must pass
  (``pass_to_pass_not_passing_on_baseline``), a test the baseline run did not report,
  skipped or reported from a tampered result is ``test_not_run`` (a wrong test id, a
  test that cannot be collected), the reference
  must pass every test (``reference_not_passing``), and a calibration run that reached
  no per-test result at all is ``calibration_error`` (a control error: a sandbox, an
  environment). An instance with any reason is invalid: it is not judged. Each row of
  the table carries the reason its own test gives (an instance refused before anything
  ran for an unknown test id: that id ``unknown_test_id``, the others
  ``not_run_refused_for_another_test``); the records are `kernel.run.record`'s, as a
  plain run records its calibration too;
- **one prediction** (`judge_prediction`): a prediction on an invalid instance, an
  empty one included, or whose attempt ended in a control error, is ``error`` (never
  the patch's fault); an empty patch on a valid instance is ``empty_patch`` (not run);
  otherwise the declared tests give SWE-bench's
  resolution (``FULL``: every test passed; ``PARTIAL``: every PASS_TO_PASS and some
  FAIL_TO_PASS passed; ``NO``: otherwise), and the prediction is ``resolved`` only when
  the resolution is FULL *and* the independent verifier supported it (its other required
  checks, e.g. ``protected-paths``, passed): passing tests by rewriting them is not
  resolving;
- **the summary** (`summarize_suite`): per model (sorted by name) the counts of resolved,
  unresolved, error and empty-patch predictions over the instances it predicted; the
  instances in the order given; the calibration table. ``SuiteSummary.digest`` covers
  the whole document: the same inputs give the same bytes whichever executor ran them.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from kernel.corroboration.commit_admission import EvidenceClass
from kernel.errors import ParameterValueError
from kernel.records.codec import Record, document_digest
from kernel.records.values import Count, Digest, NonBlank, OptionalDigest
from kernel.run.record import (
    AttemptRecord,
    AttemptState,
    Calibration,
    CalibrationReason,
    CalibrationTest,
    DeclaredTestKind,
    DeclaredTestOutcome,
    DeclaredTestResult,
)
from kernel.run.report import EvidenceState

__all__ = [
    "SUITE_SUMMARY_KIND",
    "InstanceResult",
    "ModelCounts",
    "PredictionResult",
    "PredictionStatus",
    "Resolution",
    "SuiteSummary",
    "calibrate",
    "calibrate_checks",
    "judge_prediction",
    "summarize_suite",
    "declared_tests_of",
]

SUITE_SUMMARY_KIND: Final = "kernel-suite-summary"

_PASSED: Final = DeclaredTestOutcome.PASSED
_FAILING: Final = frozenset({DeclaredTestOutcome.FAILED, DeclaredTestOutcome.ERROR})


class PredictionStatus(enum.StrEnum):
    """What became of one model's prediction on one instance."""

    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    ERROR = "error"
    EMPTY_PATCH = "empty_patch"


class Resolution(enum.StrEnum):
    """SWE-bench's resolution of a patch by its declared tests."""

    FULL = "FULL"
    PARTIAL = "PARTIAL"
    NO = "NO"


@attrs.frozen(kw_only=True)
class PredictionResult(Record):
    """One model's prediction on one instance."""

    instance_id: NonBlank
    """The instance."""
    model: NonBlank
    """``model_name_or_path``."""
    status: PredictionStatus
    """Resolved, unresolved, error or empty patch."""
    resolution: Resolution | None
    """FULL / PARTIAL / NO by the declared tests (None: not judged)."""
    failing_tests: tuple[str, ...]
    """The declared tests that did not pass, in declaration order."""
    evidence_class: EvidenceClass | None
    """The candidate group's evidence class (None: not admitted or not judged)."""
    error: str | None
    """Why the status is ``error`` (a calibration or control reason), else None."""


@attrs.frozen(kw_only=True)
class InstanceResult(Record):
    """Everything a suite keeps of one instance (its evidence folder holds the rest)."""

    instance_id: NonBlank
    """The instance."""
    input_digest: Digest
    """SHA-256 of what judging it read (instance, baseline, predictions): a resumed
    suite does not re-run an instance whose input digest is unchanged."""
    environment_digest: OptionalDigest
    """The digest of the instance's environment (None: the sandbox's interpreter)."""
    calibration: Calibration
    """The calibration."""
    run_digest: OptionalDigest
    """The digest of the instance's run record (None: nothing was judged)."""
    predictions: tuple[PredictionResult, ...]
    """Each prediction, in the order the predictions file gives them."""


@attrs.frozen(kw_only=True)
class ModelCounts(Record):
    """One model's counts over the instances it predicted."""

    model: NonBlank
    """``model_name_or_path``."""
    predictions: Count
    """How many predictions it made."""
    resolved: Count
    """Resolved."""
    unresolved: Count
    """Judged and not resolved."""
    error: Count
    """Not judged: an invalid instance or a control error."""
    empty_patch: Count
    """An empty patch (not run)."""


@attrs.frozen(kw_only=True)
class SuiteSummary(Record):
    """A whole suite: per-model counts, per-instance results, the calibration table."""

    kind: NonBlank
    """Always ``kernel-suite-summary``."""
    schema_version: NonBlank
    """Always ``1``."""
    models: tuple[ModelCounts, ...]
    """Per model, sorted by name."""
    instances: tuple[InstanceResult, ...]
    """Per instance, in the order given."""

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the whole document."""
        return document_digest(self)


def declared_tests_of(
    attempt: AttemptRecord | None, check_id: str | None = None
) -> tuple[DeclaredTestResult, ...] | None:
    """The declared-test outcomes of an attempt's check ``check_id`` (None: its first
    check that declares tests), or None when there is none (the check did not run its
    tests: a control error)."""
    if attempt is None:
        return None
    return next(
        (run.tests for run in attempt.check_runs if run.tests and check_id in (None, run.check_id)),
        None,
    )


def calibrate_checks(
    instance_id: str,
    check_ids: Sequence[str],
    baseline: AttemptRecord | None,
    reference: AttemptRecord | None,
    *,
    has_reference: bool,
) -> Calibration:
    """The calibration of every declared-tests check of a verifier (`calibrate` per
    check, module rules): each check's rows, in the order given, and the reasons of all
    of them; one invalid check makes the instance invalid.

    Args:
        instance_id: the instance.
        check_ids: the verifier's declared-tests checks (at least one).
        baseline: the baseline's calibration attempt (None: it did not complete).
        reference: the reference patch's calibration attempt (None: none, or it did not
            complete).
        has_reference: whether the instance has a reference patch.

    Raises:
        ParameterValueError: no check id, or one given twice.
    """
    # Vacuous input is refused: a calibration of no check would be valid for nothing.
    if not check_ids or len(set(check_ids)) != len(check_ids):
        raise ParameterValueError(
            "calibrate_checks", "check_ids", "at least one, each once", repr(tuple(check_ids))
        )
    parts = [
        calibrate(
            instance_id,
            declared_tests_of(baseline, check_id),
            declared_tests_of(reference, check_id) if has_reference else None,
            has_reference=has_reference,
            check_id=check_id,
        )
        for check_id in check_ids
    ]
    reasons = {reason for part in parts for reason in part.reasons}
    ordered = tuple(r for r in CalibrationReason if r in reasons)
    return Calibration(
        instance_id=instance_id,
        valid=not ordered,
        reasons=ordered,
        tests=tuple(test for part in parts for test in part.tests),
    )


def calibrate(
    instance_id: str,
    baseline: Sequence[DeclaredTestResult] | None,
    reference: Sequence[DeclaredTestResult] | None,
    *,
    has_reference: bool,
    unknown_tests: Sequence[str] = (),
    check_id: str | None = None,
) -> Calibration:
    """The calibration of an instance from its baseline and reference runs (module rules).

    Args:
        instance_id: the instance.
        baseline: the per-test outcomes on the baseline (None: no result). With
            ``unknown_tests``, the declared tests as not run (``missing``).
        reference: the per-test outcomes with the reference patch (None: no result).
        has_reference: whether the instance has a reference patch.
        unknown_tests: declared test ids the baseline does not define: the instance was
            refused before anything ran; only these tests carry ``unknown_test_id``, the
            others ``not_run_refused_for_another_test``.
        check_id: the declared-tests check the rows calibrate (`calibrate_checks`).
    """
    unknown = frozenset(unknown_tests)
    reasons: set[CalibrationReason] = {CalibrationReason.UNKNOWN_TEST_ID} if unknown else set()
    if not unknown and (not baseline or (has_reference and not reference)):
        reasons.add(CalibrationReason.CALIBRATION_ERROR)
    by_id = {t.test_id: t.outcome for t in reference or ()}
    rows: list[CalibrationTest] = []
    for test in baseline or ():
        after = by_id.get(test.test_id, DeclaredTestOutcome.MISSING) if reference else None
        reason = _test_reason(test, after, unknown)
        if reason is not None and reason is not CalibrationReason.REFUSED_FOR_ANOTHER_TEST:
            reasons.add(reason)
        if after is not None and after is not _PASSED and not test.import_failed:
            # The reference fails this test whatever the baseline did: the instance's
            # reason too, even when the row names the baseline's. A test whose module
            # cannot import on the baseline cannot pass with the reference either: the
            # environment is to blame, not the reference.
            reasons.add(CalibrationReason.REFERENCE_NOT_PASSING)
        rows.append(
            CalibrationTest(
                test_id=test.test_id,
                kind=test.kind,
                baseline=test.outcome,
                reference=after,
                reason=reason,
                missing_module=test.missing_module if test.import_failed else None,
                check_id=check_id,
            )
        )
    ordered = tuple(r for r in CalibrationReason if r in reasons)
    return Calibration(
        instance_id=instance_id, valid=not ordered, reasons=ordered, tests=tuple(rows)
    )


def _test_reason(
    test: DeclaredTestResult, after: DeclaredTestOutcome | None, unknown: frozenset[str]
) -> CalibrationReason | None:
    """The reason one test gives (the first that holds, module rules), or None."""
    outcome = test.outcome
    if unknown:
        # Refused before anything ran: only the wrong id is to blame.
        if test.test_id in unknown:
            return CalibrationReason.UNKNOWN_TEST_ID
        return CalibrationReason.REFUSED_FOR_ANOTHER_TEST
    if test.import_failed:
        # Its module did not import: the test never ran, so it says nothing of the
        # instance's bug (a FAIL_TO_PASS test "failing" so included); the environment,
        # or the id, is to blame.
        return CalibrationReason.TEST_MODULE_NOT_IMPORTABLE
    if outcome is _PASSED and test.kind is DeclaredTestKind.FAIL_TO_PASS:
        return CalibrationReason.FAIL_TO_PASS_PASSES
    if outcome in _FAILING and test.kind is DeclaredTestKind.PASS_TO_PASS:
        return CalibrationReason.PASS_TO_PASS_NOT_PASSING
    if outcome is not _PASSED and outcome not in _FAILING:
        return CalibrationReason.TEST_NOT_RUN
    if after is not None and after is not _PASSED:
        return CalibrationReason.REFERENCE_NOT_PASSING
    return None


def _resolution(tests: Sequence[DeclaredTestResult]) -> Resolution:
    f2p = [t.outcome is _PASSED for t in tests if t.kind is DeclaredTestKind.FAIL_TO_PASS]
    p2p = [t.outcome is _PASSED for t in tests if t.kind is DeclaredTestKind.PASS_TO_PASS]
    if all(p2p) and all(f2p):
        return Resolution.FULL
    if all(p2p) and any(f2p):
        return Resolution.PARTIAL
    return Resolution.NO


def judge_prediction(
    *,
    instance_id: str,
    model: str,
    calibration: Calibration,
    empty_patch: bool,
    attempt: AttemptRecord | None,
    evidence_state: EvidenceState | None,
    evidence_class: EvidenceClass | None,
) -> PredictionResult:
    """One prediction's result (module rules).

    Args:
        instance_id: the instance.
        model: the model that made the prediction.
        calibration: the instance's calibration.
        empty_patch: the prediction's patch is empty (it was not run).
        attempt: the prediction's attempt in the instance's run (None: not run).
        evidence_state: the attempt's evidence state in the run's report.
        evidence_class: the evidence class of the attempt's candidate group, if admitted.
    """
    # An invalid instance judges nothing: an empty patch on it is an error too (the
    # instance was not judged), so a model's counts never depend on the instance's fault.
    if empty_patch and calibration.valid:
        return PredictionResult(
            instance_id=instance_id,
            model=model,
            status=PredictionStatus.EMPTY_PATCH,
            resolution=None,
            failing_tests=(),
            evidence_class=None,
            error=None,
        )
    tests = None if empty_patch else declared_tests_of(attempt)
    error: str | None = None
    if not calibration.valid:
        error = "instance not valid: " + ", ".join(calibration.reasons)
    elif attempt is None or attempt.state is not AttemptState.VERIFIED or tests is None:
        code = attempt.error.code if attempt is not None and attempt.error else "no_test_result"
        error = f"control error: {code}"
    if error is not None or tests is None:
        return PredictionResult(
            instance_id=instance_id,
            model=model,
            status=PredictionStatus.ERROR,
            resolution=None,
            failing_tests=(),
            evidence_class=evidence_class,
            error=error or "control error: no_test_result",
        )
    resolution = _resolution(tests)
    resolved = resolution is Resolution.FULL and evidence_state is EvidenceState.SUPPORTED
    return PredictionResult(
        instance_id=instance_id,
        model=model,
        status=PredictionStatus.RESOLVED if resolved else PredictionStatus.UNRESOLVED,
        resolution=resolution,
        failing_tests=tuple(t.test_id for t in tests if t.outcome is not _PASSED),
        evidence_class=evidence_class,
        error=None,
    )


def summarize_suite(instances: Iterable[InstanceResult]) -> SuiteSummary:
    """The suite summary of ``instances`` (module rules).

    Raises:
        ParameterValueError: no instance, or an instance id given twice.
    """
    results = tuple(instances)
    # Vacuous input is refused: a suite of no instance has no resolved rate.
    if not results:
        raise ParameterValueError("summarize_suite", "instances", "at least one", "none")
    if len({r.instance_id for r in results}) != len(results):
        raise ParameterValueError(
            "summarize_suite", "instances", "distinct instance ids", "an id given twice"
        )
    counts: dict[str, dict[PredictionStatus, int]] = {}
    for result in results:
        for prediction in result.predictions:
            per = counts.setdefault(prediction.model, dict.fromkeys(PredictionStatus, 0))
            per[prediction.status] += 1
    models = tuple(
        ModelCounts(
            model=model,
            predictions=sum(per.values()),
            resolved=per[PredictionStatus.RESOLVED],
            unresolved=per[PredictionStatus.UNRESOLVED],
            error=per[PredictionStatus.ERROR],
            empty_patch=per[PredictionStatus.EMPTY_PATCH],
        )
        for model, per in sorted(counts.items())
    )
    return SuiteSummary(
        kind=SUITE_SUMMARY_KIND, schema_version="1", models=models, instances=results
    )
