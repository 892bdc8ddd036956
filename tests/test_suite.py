"""kernel.run.suite: calibration, one prediction's result, the suite summary and its views."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.corroboration.commit_admission import EvidenceClass
from kernel.effects.orchestrate import run_config
from kernel.errors import ParameterValueError
from kernel.run.record import (
    AttemptError,
    AttemptErrorCode,
    AttemptRecord,
    AttemptState,
    Calibration,
    CalibrationReason,
    CheckRun,
    DeclaredTestKind,
    DeclaredTestOutcome,
    DeclaredTestResult,
)
from kernel.run.report import EvidenceState, RunEvidenceReport, build_evidence_report
from kernel.run.suite import (
    InstanceResult,
    PredictionResult,
    PredictionStatus,
    Resolution,
    SuiteSummary,
    calibrate,
    calibrate_checks,
    declared_tests_of,
    judge_prediction,
    summarize_suite,
)
from kernel.strategies import records_of
from kernel.views import render_html, render_markdown
from kernel.views.suite import render_suite_html, render_suite_markdown
from kernel.views.views import calibration_section, declared_tests_section

F2P, P2P = DeclaredTestKind.FAIL_TO_PASS, DeclaredTestKind.PASS_TO_PASS
OUT = DeclaredTestOutcome


def _tests(
    *rows: tuple[str, DeclaredTestKind, DeclaredTestOutcome],
) -> tuple[DeclaredTestResult, ...]:
    return tuple(DeclaredTestResult(test_id=t, kind=k, outcome=o) for t, k, o in rows)


BASELINE = _tests(("m.T.f", F2P, OUT.FAILED), ("m.T.e", F2P, OUT.ERROR), ("m.T.p", P2P, OUT.PASSED))
FIXED = _tests(("m.T.f", F2P, OUT.PASSED), ("m.T.e", F2P, OUT.PASSED), ("m.T.p", P2P, OUT.PASSED))


def _replace(
    tests: tuple[DeclaredTestResult, ...], test_id: str, outcome: DeclaredTestOutcome
) -> tuple[DeclaredTestResult, ...]:
    return tuple(
        DeclaredTestResult(test_id=t.test_id, kind=t.kind, outcome=outcome)
        if t.test_id == test_id
        else t
        for t in tests
    )


# --- calibration ------------------------------------------------------------------------


def test_a_valid_instance_has_no_reason_and_its_table() -> None:
    """F2P failing or erroring and P2P passing on the baseline, the reference passing all:
    valid, one row per declared test with both outcomes."""
    calibration = calibrate("i", BASELINE, FIXED, has_reference=True)
    assert calibration.valid
    assert calibration.reasons == ()
    assert [(t.test_id, t.baseline, t.reference, t.reason) for t in calibration.tests] == [
        ("m.T.f", OUT.FAILED, OUT.PASSED, None),
        ("m.T.e", OUT.ERROR, OUT.PASSED, None),
        ("m.T.p", OUT.PASSED, OUT.PASSED, None),
    ]
    without = calibrate("i", BASELINE, None, has_reference=False)
    assert without.valid
    assert {t.reference for t in without.tests} == {None}


@pytest.mark.parametrize(
    ("baseline", "reference", "has_reference", "unknown", "reasons"),
    [
        pytest.param(
            _replace(BASELINE, "m.T.f", OUT.PASSED),
            FIXED,
            True,
            (),
            (CalibrationReason.FAIL_TO_PASS_PASSES,),
            id="f2p-passes-on-baseline",
        ),
        pytest.param(
            _replace(BASELINE, "m.T.p", OUT.ERROR),
            FIXED,
            True,
            (),
            (CalibrationReason.PASS_TO_PASS_NOT_PASSING,),
            id="p2p-errors (a missing dependency)",
        ),
        pytest.param(
            _replace(BASELINE, "m.T.p", OUT.FAILED),
            None,
            False,
            (),
            (CalibrationReason.PASS_TO_PASS_NOT_PASSING,),
            id="p2p-fails",
        ),
        pytest.param(
            _replace(BASELINE, "m.T.f", OUT.MISSING),
            FIXED,
            True,
            (),
            (CalibrationReason.TEST_NOT_RUN,),
            id="f2p-missing",
        ),
        pytest.param(
            _replace(BASELINE, "m.T.p", OUT.SKIPPED),
            None,
            False,
            (),
            (CalibrationReason.TEST_NOT_RUN,),
            id="p2p-skipped",
        ),
        pytest.param(
            _replace(BASELINE, "m.T.p", OUT.TAMPERED),
            None,
            False,
            (),
            (CalibrationReason.TEST_NOT_RUN,),
            id="tampered",
        ),
        pytest.param(
            BASELINE,
            _replace(FIXED, "m.T.e", OUT.FAILED),
            True,
            (),
            (CalibrationReason.REFERENCE_NOT_PASSING,),
            id="reference-fails",
        ),
        pytest.param(
            BASELINE,
            FIXED[:2],
            True,
            (),
            (CalibrationReason.REFERENCE_NOT_PASSING,),
            id="reference-misses-a-test",
        ),
        pytest.param(
            None, None, False, (), (CalibrationReason.CALIBRATION_ERROR,), id="no-baseline"
        ),
        pytest.param(
            (), None, False, (), (CalibrationReason.CALIBRATION_ERROR,), id="empty-baseline"
        ),
        pytest.param(
            BASELINE,
            None,
            True,
            (),
            (CalibrationReason.CALIBRATION_ERROR,),
            id="no-reference-result",
        ),
        pytest.param(
            tuple(
                DeclaredTestResult(test_id=t.test_id, kind=t.kind, outcome=OUT.MISSING)
                for t in BASELINE
            ),
            None,
            False,
            ("m.T.e",),
            (CalibrationReason.UNKNOWN_TEST_ID,),
            id="unknown-id",
        ),
    ],
)
def test_an_invalid_instance_says_why(
    baseline: tuple[DeclaredTestResult, ...] | None,
    reference: tuple[DeclaredTestResult, ...] | None,
    has_reference: bool,
    unknown: tuple[str, ...],
    reasons: tuple[CalibrationReason, ...],
) -> None:
    """Each calibration rule refuses with its own reason, in the enum's order."""
    calibration = calibrate(
        "i", baseline, reference, has_reference=has_reference, unknown_tests=unknown
    )
    assert not calibration.valid
    assert calibration.reasons == reasons


def test_a_test_whose_module_cannot_import_blames_the_environment_not_the_instance() -> None:
    """Gaps of issue 19 item 3: a test whose module failed to import on the baseline is
    an environment error naming the missing module, whichever list it is in (a
    FAIL_TO_PASS test that "fails" by not importing is no failing test), and only that:
    the reference failing it too is not the reference's fault; the other tests are
    judged as they ran. A reference whose own run cannot import a test that the
    baseline imported is a reference that does not pass."""

    def unimportable(test: DeclaredTestResult, missing: str | None) -> DeclaredTestResult:
        return attrs.evolve(test, outcome=OUT.ERROR, import_failed=True, missing_module=missing)

    baseline = (unimportable(BASELINE[0], "numpy"), BASELINE[1], unimportable(BASELINE[2], None))
    reference = (unimportable(FIXED[0], "numpy"), *FIXED[1:])
    table = calibrate("i", baseline, reference, has_reference=True)
    assert not table.valid
    assert table.reasons == (CalibrationReason.TEST_MODULE_NOT_IMPORTABLE,)
    assert [(t.test_id, t.reason, t.missing_module) for t in table.tests] == [
        ("m.T.f", CalibrationReason.TEST_MODULE_NOT_IMPORTABLE, "numpy"),
        ("m.T.e", None, None),
        ("m.T.p", CalibrationReason.TEST_MODULE_NOT_IMPORTABLE, None),
    ]
    # Every view shows the row's reason with the missing module when one is why.
    assert [t.blame for t in table.tests] == [
        "environment_error_test_module_not_importable: no module named 'numpy'",
        None,
        "environment_error_test_module_not_importable",
    ]
    alone = calibrate("i", baseline[:1], None, has_reference=False)
    assert alone.reasons == (CalibrationReason.TEST_MODULE_NOT_IMPORTABLE,)
    # A missing module is only kept on a row whose import failed.
    stray = (attrs.evolve(BASELINE[0], missing_module="numpy"), *BASELINE[1:])
    assert calibrate("i", stray, None, has_reference=False).tests[0].missing_module is None
    broken = calibrate(
        "i", BASELINE, (unimportable(FIXED[0], "numpy"), *FIXED[1:]), has_reference=True
    )
    assert broken.reasons == (CalibrationReason.REFERENCE_NOT_PASSING,)
    assert broken.tests[0].reason is CalibrationReason.REFERENCE_NOT_PASSING


def test_only_the_wrong_test_carries_the_reason() -> None:
    """Issue 19 item 3: in the per-test table, each row names the reason its own test
    gives; a test that is as calibration expects carries none, and an instance refused
    for an unknown id marks only that id ``unknown_test_id``, the others not run because
    of another test (never ``test_not_run`` for all)."""
    baseline = _replace(BASELINE, "m.T.p", OUT.ERROR)
    reference = _replace(FIXED, "m.T.e", OUT.FAILED)
    table = calibrate("i", baseline, reference, has_reference=True)
    assert table.reasons == (
        CalibrationReason.PASS_TO_PASS_NOT_PASSING,
        CalibrationReason.REFERENCE_NOT_PASSING,
    )
    assert [(t.test_id, t.reason) for t in table.tests] == [
        ("m.T.f", None),
        ("m.T.e", CalibrationReason.REFERENCE_NOT_PASSING),
        ("m.T.p", CalibrationReason.PASS_TO_PASS_NOT_PASSING),
    ]
    skipped = calibrate("i", _replace(BASELINE, "m.T.f", OUT.SKIPPED), None, has_reference=False)
    assert [t.reason for t in skipped.tests] == [CalibrationReason.TEST_NOT_RUN, None, None]
    not_run = tuple(attrs.evolve(t, outcome=OUT.MISSING) for t in BASELINE)
    refused = calibrate("i", not_run, None, has_reference=False, unknown_tests=("m.T.e",))
    assert [(t.test_id, t.reason) for t in refused.tests] == [
        ("m.T.f", CalibrationReason.REFUSED_FOR_ANOTHER_TEST),
        ("m.T.e", CalibrationReason.UNKNOWN_TEST_ID),
        ("m.T.p", CalibrationReason.REFUSED_FOR_ANOTHER_TEST),
    ]
    markdown = render_suite_markdown(
        summarize_suite(
            [
                InstanceResult(
                    instance_id="i",
                    input_digest="0" * 64,
                    environment_digest=None,
                    calibration=refused,
                    run_digest=None,
                    predictions=(),
                )
            ]
        )
    )
    row = r"| m.T.e | fail\_to\_pass | missing | - | unknown\_test\_id |"
    assert r"| i | invalid: unknown\_test\_id " + row in markdown
    assert (
        r"| m.T.f | fail\_to\_pass | missing | - | not\_run\_refused\_for\_another\_test |"
        in markdown
    )


# --- one prediction ---------------------------------------------------------------------

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
VERIFIED = run_config(FIXTURES / "orchestration/two-attempt-good-vs-bad.json").attempts[0]
VALID = calibrate("i", BASELINE, FIXED, has_reference=True)


def _attempt(tests: tuple[DeclaredTestResult, ...] | None, *, lost: bool = False) -> AttemptRecord:
    """A verified attempt (or a lost one) whose check runs carry ``tests``."""
    runs: tuple[CheckRun, ...] = (CheckRun(check_id="protected-paths", sandbox=None, reason=None),)
    if tests is not None:
        runs += (CheckRun(check_id="tests", sandbox=None, reason=None, tests=tests),)
    if lost:
        return attrs.evolve(
            VERIFIED,
            state=AttemptState.WORKER_ERROR,
            manifest=None,
            verification=None,
            error=AttemptError(code=AttemptErrorCode.INFRASTRUCTURE_FAULT, message="lost"),
            check_runs=runs,
        )
    return attrs.evolve(VERIFIED, check_runs=runs)


def _judge(
    attempt: AttemptRecord | None,
    *,
    state: EvidenceState | None = EvidenceState.SUPPORTED,
    calibration: Calibration = VALID,
    empty: bool = False,
) -> PredictionResult:
    return judge_prediction(
        instance_id="i",
        model="m",
        calibration=calibration,
        empty_patch=empty,
        attempt=attempt,
        evidence_state=state,
        evidence_class=EvidenceClass.VERIFIED,
    )


def test_full_and_supported_is_resolved() -> None:
    """Every declared test passed and the verifier supported the patch: resolved."""
    result = _judge(_attempt(FIXED))
    assert (result.status, result.resolution, result.failing_tests) == (
        PredictionStatus.RESOLVED,
        Resolution.FULL,
        (),
    )
    assert result.evidence_class is EvidenceClass.VERIFIED


def test_passing_tests_without_the_verifiers_support_is_not_resolved() -> None:
    """All tests pass but another required check failed (e.g. protected-paths: the patch
    rewrote a test): FULL by the tests, yet unresolved."""
    result = _judge(_attempt(FIXED), state=EvidenceState.REJECTED)
    assert (result.status, result.resolution) == (PredictionStatus.UNRESOLVED, Resolution.FULL)


@pytest.mark.parametrize(
    ("tests", "resolution", "failing"),
    [
        (_replace(FIXED, "m.T.f", OUT.FAILED), Resolution.PARTIAL, ("m.T.f",)),
        (BASELINE, Resolution.NO, ("m.T.f", "m.T.e")),
        (_replace(FIXED, "m.T.p", OUT.FAILED), Resolution.NO, ("m.T.p",)),
        (_replace(FIXED, "m.T.p", OUT.TAMPERED), Resolution.NO, ("m.T.p",)),
    ],
)
def test_unresolved_predictions_name_their_failing_tests(
    tests: tuple[DeclaredTestResult, ...], resolution: Resolution, failing: tuple[str, ...]
) -> None:
    """SWE-bench's FULL / PARTIAL / NO, with the declared tests that did not pass."""
    result = _judge(_attempt(tests), state=EvidenceState.REJECTED)
    assert (result.status, result.resolution, result.failing_tests) == (
        PredictionStatus.UNRESOLVED,
        resolution,
        failing,
    )


def test_an_empty_patch_is_counted_apart() -> None:
    """An empty patch on a valid instance is not run and not judged: ``empty_patch``; on
    an invalid instance nothing was judged, so it is an ``error`` like every other
    prediction there (issue 19 item 4)."""
    result = _judge(None, empty=True, state=None)
    assert (result.status, result.resolution, result.error) == (
        PredictionStatus.EMPTY_PATCH,
        None,
        None,
    )
    invalid = calibrate("i", None, None, has_reference=False)
    result = _judge(None, empty=True, state=None, calibration=invalid)
    assert (result.status, result.resolution, result.error) == (
        PredictionStatus.ERROR,
        None,
        "instance not valid: calibration_error",
    )


@pytest.mark.parametrize(
    ("attempt", "calibration", "error"),
    [
        (
            None,
            calibrate("i", None, None, has_reference=False),
            "instance not valid: calibration_error",
        ),
        (None, VALID, "control error: no_test_result"),
        (_attempt(None), VALID, "control error: no_test_result"),
        (_attempt(FIXED, lost=True), VALID, "control error: infrastructure_fault"),
    ],
)
def test_a_prediction_that_was_not_judged_is_an_error(
    attempt: AttemptRecord | None, calibration: Calibration, error: str
) -> None:
    """An invalid instance, a missing attempt, no per-test result or a control error:
    ``error`` with its reason, never a verdict on the patch."""
    result = _judge(attempt, calibration=calibration)
    assert (result.status, result.resolution, result.error) == (PredictionStatus.ERROR, None, error)


def test_tests_of_reads_the_first_check_that_declares_tests() -> None:
    """None without an attempt or without a check that declares tests."""
    assert declared_tests_of(None) is None
    assert declared_tests_of(_attempt(None)) is None
    assert declared_tests_of(_attempt(FIXED)) == FIXED


def _two_checks(
    first: tuple[DeclaredTestResult, ...], second: tuple[DeclaredTestResult, ...]
) -> AttemptRecord:
    """An attempt whose checks ``tests`` and ``more`` ran ``first`` and ``second``."""
    more = CheckRun(check_id="more", sandbox=None, reason=None, tests=second)
    attempt = _attempt(first)
    return attrs.evolve(attempt, check_runs=(*attempt.check_runs, more))


def test_tests_of_a_named_check_are_that_checks_own() -> None:
    """With a check id, the outcomes of that check alone (None when it ran no tests)."""
    attempt = _two_checks(BASELINE, FIXED)
    assert declared_tests_of(attempt, "tests") == BASELINE
    assert declared_tests_of(attempt, "more") == FIXED
    assert declared_tests_of(attempt, "protected-paths") is None
    assert declared_tests_of(attempt, "absent") is None


def test_every_declared_tests_check_is_calibrated_with_its_own_rows() -> None:
    """Each check's rows, in the order given and named by check; one invalid check (here
    the second, whose FAIL_TO_PASS test passes on the baseline) makes the instance
    invalid, and only its row is blamed."""
    second = _tests(("m.T.p", F2P, OUT.PASSED), ("m.T.f", P2P, OUT.FAILED))
    valid = calibrate_checks(
        "i", ("tests",), _two_checks(BASELINE, second), None, has_reference=False
    )
    assert valid.valid
    assert [(t.check_id, t.test_id) for t in valid.tests] == [
        ("tests", "m.T.f"),
        ("tests", "m.T.e"),
        ("tests", "m.T.p"),
    ]
    both = calibrate_checks(
        "i", ("tests", "more"), _two_checks(BASELINE, second), None, has_reference=False
    )
    assert not both.valid
    assert both.reasons == (
        CalibrationReason.FAIL_TO_PASS_PASSES,
        CalibrationReason.PASS_TO_PASS_NOT_PASSING,
    )
    assert [(t.check_id, t.test_id, t.reason) for t in both.tests] == [
        ("tests", "m.T.f", None),
        ("tests", "m.T.e", None),
        ("tests", "m.T.p", None),
        ("more", "m.T.p", CalibrationReason.FAIL_TO_PASS_PASSES),
        ("more", "m.T.f", CalibrationReason.PASS_TO_PASS_NOT_PASSING),
    ]


def test_a_check_without_its_tests_or_its_reference_is_a_calibration_error() -> None:
    """A declared-tests check that gave no per-test result on the baseline (or, with a
    reference patch, on the reference) is ``calibration_error``, whatever the others
    gave."""
    attempt = _two_checks(BASELINE, FIXED)
    lost = calibrate_checks("i", ("tests", "absent"), attempt, None, has_reference=False)
    assert lost.reasons == (CalibrationReason.CALIBRATION_ERROR,)
    no_reference = calibrate_checks(
        "i", ("tests", "more"), attempt, _attempt(FIXED), has_reference=True
    )
    assert CalibrationReason.CALIBRATION_ERROR in no_reference.reasons
    fixed = _two_checks(FIXED, FIXED)
    with_reference = calibrate_checks(
        "i", ("tests",), _attempt(BASELINE), fixed, has_reference=True
    )
    assert with_reference.valid
    assert [t.reference for t in with_reference.tests] == [OUT.PASSED] * 3


@pytest.mark.parametrize("check_ids", [(), ("tests", "tests")])
def test_calibrating_no_check_or_one_twice_is_misuse(check_ids: tuple[str, ...]) -> None:
    """Vacuous input is refused: a calibration of no check would be valid for nothing."""
    with pytest.raises(ParameterValueError, match="check_ids"):
        calibrate_checks("i", check_ids, _attempt(BASELINE), None, has_reference=False)


# --- the summary ------------------------------------------------------------------------


def _instance(instance_id: str, *predictions: PredictionResult) -> InstanceResult:
    return InstanceResult(
        instance_id=instance_id,
        input_digest="0" * 64,
        environment_digest=None,
        calibration=VALID,
        run_digest=None,
        predictions=predictions,
    )


def _prediction(model: str, status: PredictionStatus) -> PredictionResult:
    return PredictionResult(
        instance_id="i",
        model=model,
        status=status,
        resolution=None,
        failing_tests=(),
        evidence_class=None,
        error=None,
    )


def test_the_summary_counts_each_model_over_the_instances() -> None:
    """Per model (sorted by name): resolved, unresolved, error and empty-patch counts;
    instances in the order given; the digest is the stdlib SHA-256 of the document."""
    summary = summarize_suite(
        [
            _instance(
                "b",
                _prediction("z", PredictionStatus.RESOLVED),
                _prediction("a", PredictionStatus.ERROR),
            ),
            _instance(
                "a",
                _prediction("z", PredictionStatus.UNRESOLVED),
                _prediction("a", PredictionStatus.EMPTY_PATCH),
            ),
        ]
    )
    assert [r.instance_id for r in summary.instances] == ["b", "a"]
    assert [
        (m.model, m.predictions, m.resolved, m.unresolved, m.error, m.empty_patch)
        for m in summary.models
    ] == [("a", 2, 0, 0, 1, 1), ("z", 2, 1, 1, 0, 0)]
    text = json.dumps(summary.to_dict(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert summary.digest == hashlib.sha256(text.encode()).hexdigest()
    assert SuiteSummary.from_dict(summary.to_dict()) == summary


@pytest.mark.parametrize("instances", [[], [_instance("a"), _instance("a")]], ids=["none", "twice"])
def test_a_vacuous_or_ambiguous_suite_is_refused(instances: list[InstanceResult]) -> None:
    """No instance, or one instance id twice: a misuse, never an empty summary."""
    with pytest.raises(ParameterValueError, match="summarize_suite"):
        summarize_suite(instances)


def test_the_views_escape_every_cell_and_show_every_table() -> None:
    """Markdown and HTML show the three tables; a hostile model name is text, never
    markup; a model that predicted nothing shows no rate."""
    hostile = "<script>alert(1)</script>|x"
    invalid = calibrate("bad", None, None, has_reference=False)
    summary = summarize_suite(
        [
            _instance("i", _prediction(hostile, PredictionStatus.RESOLVED)),
            InstanceResult(
                instance_id="bad",
                input_digest="0" * 64,
                environment_digest=None,
                calibration=invalid,
                run_digest=None,
                predictions=(),
            ),
        ]
    )
    markdown = render_suite_markdown(summary)
    page = render_suite_html(summary)
    for title in ("Resolved per model", "Predictions", "Calibration"):
        assert title in markdown
        assert title in page
    assert "<script>" not in page
    assert "<script>" not in markdown
    assert "100.0%" in markdown
    assert r"| bad | invalid: calibration\_error | - | - | - | - | - |" in markdown
    zero = attrs.evolve(summary.models[0], predictions=0, resolved=0)
    assert "| - |" in render_suite_markdown(attrs.evolve(summary, models=(zero,)))


@given(records_of(SuiteSummary))
def test_a_summary_round_trips(summary: SuiteSummary) -> None:
    """from_dict(to_dict()) is the identity for every summary."""
    assert SuiteSummary.from_dict(summary.to_dict()) == summary


def test_every_report_view_shows_the_declared_tests_table() -> None:
    """The report views carry a per-test table (attempt, check, test, list, outcome) when
    a check declares tests, and none otherwise; cells are escaped like every section."""
    run = run_config(FIXTURES / "orchestration/two-attempt-good-vs-bad.json")
    report = build_evidence_report(run)
    assert isinstance(report, RunEvidenceReport)
    assert declared_tests_section(report) is None
    hostile = _replace(FIXED, "m.T.p", OUT.TAMPERED) + _tests(("<b>x</b>", P2P, OUT.MISSING))
    first = attrs.evolve(
        report.attempts[0],
        check_runs=(
            CheckRun(check_id="protected-paths", sandbox=None, reason=None),
            CheckRun(
                check_id="tests",
                sandbox=None,
                reason=None,
                tests=hostile,
                environment_digest="e" * 64,
            ),
        ),
    )
    with_tests = attrs.evolve(report, attempts=(first, *report.attempts[1:]))
    section = declared_tests_section(with_tests)
    assert section is not None
    assert section.rows[2] == (first.attempt_id, "tests", "m.T.p", "pass_to_pass", "tampered")
    assert f"Environment of check tests: {'e' * 64} (interpreter and pinned requirements)." in (
        section.notes
    )
    for page in (render_markdown(with_tests), render_html(with_tests)):
        assert "Declared tests" in page
        assert "<b>x</b>" not in page


_MIX = st.lists(
    st.tuples(
        st.booleans(),  # the instance is valid
        st.lists(
            st.tuples(
                st.sampled_from(["model-a", "model-b", "model-c"]),
                st.booleans(),  # empty patch
                st.sampled_from([None, FIXED, BASELINE]),  # its tests (None: no result)
                st.sampled_from([EvidenceState.SUPPORTED, EvidenceState.REJECTED]),
            ),
            max_size=4,
            unique_by=lambda p: p[0],
        ),
    ),
    min_size=1,
    max_size=5,
)


@given(_MIX)
def test_the_counts_add_up_per_model(mix: list[tuple[bool, list[Any]]]) -> None:
    """For all mixes of valid and invalid instances and predictions (empty, no result,
    fixed, unfixed; supported or not): each model's counts add up to its predictions;
    every prediction on an invalid instance, an empty one included, is an error; a
    resolved prediction is a non-empty FULL supported one on a valid instance."""
    invalid = calibrate("i", None, None, has_reference=False)
    instances = []
    for index, (valid, predictions) in enumerate(mix):
        calibration = VALID if valid else invalid
        instances.append(
            InstanceResult(
                instance_id=f"i{index}",
                input_digest="0" * 64,
                environment_digest=None,
                calibration=calibration,
                run_digest=None,
                predictions=tuple(
                    judge_prediction(
                        instance_id=f"i{index}",
                        model=model,
                        calibration=calibration,
                        empty_patch=empty,
                        attempt=None if empty or tests is None else _attempt(tests),
                        evidence_state=state,
                        evidence_class=None,
                    )
                    for model, empty, tests, state in predictions
                ),
            )
        )
    expected: dict[str, Counter[str]] = {}
    for valid, predictions in mix:
        for model, empty, tests, state in predictions:
            if not valid or (not empty and tests is None):
                status = "error"
            elif empty:
                status = "empty_patch"
            elif tests is FIXED and state is EvidenceState.SUPPORTED:
                status = "resolved"
            else:
                status = "unresolved"
            expected.setdefault(model, Counter())[status] += 1
    summary = summarize_suite(instances)
    assert [m.model for m in summary.models] == sorted(expected)
    for counts in summary.models:
        want = expected[counts.model]
        assert counts.resolved + counts.unresolved + counts.error + counts.empty_patch == (
            counts.predictions
        )
        assert counts.predictions == sum(want.values())
        assert (counts.resolved, counts.unresolved, counts.error, counts.empty_patch) == (
            want["resolved"],
            want["unresolved"],
            want["error"],
            want["empty_patch"],
        )


def test_every_report_view_shows_the_calibration_table() -> None:
    """A calibrated run's report carries its calibration (from the run record) and every
    view shows the per-test table with each test's reason; an uncalibrated run shows
    none."""
    run = run_config(FIXTURES / "orchestration/two-attempt-good-vs-bad.json")
    report = build_evidence_report(run)
    assert isinstance(report, RunEvidenceReport)
    assert report.calibration is None
    assert calibration_section(report) is None
    table = calibrate("run", _replace(BASELINE, "m.T.p", OUT.ERROR), None, has_reference=False)
    calibrated = build_evidence_report(attrs.evolve(run, calibration=table))
    assert isinstance(calibrated, RunEvidenceReport)
    assert calibrated.calibration == table
    section = calibration_section(calibrated)
    assert section is not None
    assert "This instance: invalid: pass_to_pass_not_passing_on_baseline." in section.notes[0]
    assert section.rows[2] == (
        "-",
        "m.T.p",
        "pass_to_pass",
        "error",
        "-",
        "pass_to_pass_not_passing_on_baseline",
    )
    # Rows of several checks, each under its check (every declared-tests check is
    # calibrated).
    second = _tests(("m.T.p", F2P, OUT.PASSED))
    both = calibrate_checks(
        "run", ("tests", "more"), _two_checks(BASELINE, second), None, has_reference=False
    )
    two = calibration_section(attrs.evolve(calibrated, calibration=both))
    assert two is not None
    assert two.headers[0] == "Check"
    assert [(row[0], row[1], row[-1]) for row in two.rows] == [
        ("tests", "m.T.f", "-"),
        ("tests", "m.T.e", "-"),
        ("tests", "m.T.p", "-"),
        ("more", "m.T.p", "fail_to_pass_passes_on_baseline"),
    ]
    valid = calibration_section(attrs.evolve(calibrated, calibration=VALID))
    assert valid is not None
    assert "This instance: valid." in valid.notes[0]
    for page in (render_markdown(calibrated), render_html(calibrated)):
        assert "Calibration" in page
        assert "pass_to_pass_not_passing_on_baseline" in page.replace("\\_", "_")
