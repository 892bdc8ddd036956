"""Per-test verdicts: the declared tests' outcomes judged, and kept in the run record.

`judge_tests` turns the outcomes the trusted collector
(`kernel.effects.adapters.declared_tests`) observed and the check's declared tests
(SWE-bench's FAIL_TO_PASS and PASS_TO_PASS: both must pass after the patch) into a
check status and one `kernel.run.verification.CheckReason`; `declared_test_results` keeps
each declared test's outcome for the run record.

Rules enforced:

- a check passes only when every declared test is present and passed: a failed or
  erroring one fails the check (``expected_test_failed``); a missing or skipped one
  makes it inconclusive (``expected_test_missing``, ``expected_test_skipped``); no
  usable result is its reason whatever the exit status; a result that says all passed
  from a runner that then exited non-zero is ``runner_exit_nonzero``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from kernel.run.record import DeclaredTestKind, DeclaredTestOutcome, DeclaredTestResult
from kernel.run.verification import CheckReason, CheckStatus

__all__ = [
    "MAX_RESULT_BYTES",
    "TestOutcome",
    "declared_test_results",
    "judge_tests",
]

MAX_RESULT_BYTES: Final = 16 << 20
"""The largest result stream read (a larger one is ``result_unreadable``)."""

TestOutcome = str
"""``passed``, ``failure``, ``error`` or ``skipped``."""


def judge_tests(
    declared: Sequence[str], result: Mapping[str, TestOutcome] | CheckReason, exit_code: int | None
) -> tuple[CheckStatus, CheckReason | None]:
    """The check's status and reason from its declared tests and the runner's result."""
    if isinstance(result, CheckReason):
        return CheckStatus.INCONCLUSIVE, result
    if not declared:
        # Vacuous input is refused: a check that names no test proves nothing.
        return CheckStatus.INCONCLUSIVE, CheckReason.NO_TESTS_FOUND
    observed = [result.get(test) for test in declared]
    if any(o in ("failure", "error") for o in observed):
        return CheckStatus.FAILED, CheckReason.EXPECTED_TEST_FAILED
    if any(o is None for o in observed):
        return CheckStatus.INCONCLUSIVE, CheckReason.EXPECTED_TEST_MISSING
    if any(o == "skipped" for o in observed):
        return CheckStatus.INCONCLUSIVE, CheckReason.EXPECTED_TEST_SKIPPED
    if exit_code != 0:
        return CheckStatus.INCONCLUSIVE, CheckReason.RUNNER_EXIT_NONZERO
    return CheckStatus.PASSED, None


_RECORDED: Final = {
    "passed": DeclaredTestOutcome.PASSED,
    "failure": DeclaredTestOutcome.FAILED,
    "error": DeclaredTestOutcome.ERROR,
    "skipped": DeclaredTestOutcome.SKIPPED,
}
# A result this run did not write, or a runner that saw tampering: nothing it says counts.
_UNTRUSTED: Final = frozenset({CheckReason.RESULT_FORGED, CheckReason.RUNNER_TAMPERED})


def declared_test_results(
    declared: Sequence[str],
    fail_to_pass: Sequence[str],
    result: Mapping[str, TestOutcome] | CheckReason,
    imports: Mapping[str, str | None] | None = None,
) -> tuple[DeclaredTestResult, ...]:
    """Each declared test's outcome, as the run record keeps it (declaration order).

    A test the result does not name is ``missing``; every test of a forged or tampered
    result is ``tampered``; of any other unusable result (none, unreadable, a timeout),
    ``missing``. A test in ``imports`` (its module failed to import) carries that, and
    the module whose absence caused it, unless the result is untrusted.
    """
    failing = frozenset(fail_to_pass)
    outcomes: list[DeclaredTestResult] = []
    for test in declared:
        if isinstance(result, CheckReason):
            outcome = (
                DeclaredTestOutcome.TAMPERED
                if result in _UNTRUSTED
                else DeclaredTestOutcome.MISSING
            )
        else:
            outcome = _RECORDED.get(result.get(test, ""), DeclaredTestOutcome.MISSING)
        kind = DeclaredTestKind.FAIL_TO_PASS if test in failing else DeclaredTestKind.PASS_TO_PASS
        failed = imports is not None and test in imports and not isinstance(result, CheckReason)
        outcomes.append(
            DeclaredTestResult(
                test_id=test,
                kind=kind,
                outcome=outcome,
                import_failed=failed,
                missing_module=imports.get(test) if failed and imports is not None else None,
            )
        )
    return tuple(outcomes)
