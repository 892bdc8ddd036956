"""Per-test evidence: the verifier's reading of a JUnit XML result, and its verdict.

`read_junit` parses the bytes the kernel's runner (`unittest_junit`) wrote for one
check; `judge_tests` turns them and the check's declared tests (SWE-bench's
FAIL_TO_PASS and PASS_TO_PASS: both must pass after the patch) into a check status and
one `kernel.verification.CheckReason`.

Rules enforced:

- the result is untrusted bytes: at most `MAX_RESULT_BYTES`; any markup declaration
  (``<!DOCTYPE``, ``<!ENTITY``, comments, CDATA) or processing instruction other than
  the XML declaration is refused before parsing, so no entity is ever expanded
  (``result_unreadable``);
- the root is ``testsuites`` carrying this check's nonce; any other value is a result
  this run did not write (``result_forged``); ``tampered="true"`` from the runner is
  ``runner_tampered``;
- each test appears at most once (``result_ambiguous``), and the result names at
  least one test (``no_tests_found``);
- a check passes only when every declared test is present and passed: a failed or
  erroring one fails the check (``expected_test_failed``); a missing or skipped one
  makes it inconclusive (``expected_test_missing``, ``expected_test_skipped``); no
  result at all is ``result_missing`` whatever the exit status; a result that says
  all passed from a runner that then exited non-zero is ``runner_exit_nonzero``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Final

from kernel.runrecord import DeclaredTestKind, DeclaredTestOutcome, DeclaredTestResult
from kernel.verification import CheckReason, CheckStatus

__all__ = [
    "MAX_RESULT_BYTES",
    "TestOutcome",
    "declared_test_results",
    "judge_tests",
    "read_junit",
]

MAX_RESULT_BYTES: Final = 16 << 20
"""The largest result read (a larger one is ``result_unreadable``)."""

TestOutcome = str
"""``passed``, ``failure``, ``error`` or ``skipped``."""

_DECLARATION: Final = re.compile(rb"<!|<\?(?!xml[ \t\r\n])")
_OUTCOMES: Final = frozenset({"failure", "error", "skipped"})


def read_junit(data: bytes, nonce: str) -> dict[str, TestOutcome] | CheckReason:
    """Test id -> outcome from a runner result, or the reason it is not usable evidence."""
    if not data:
        return CheckReason.RESULT_MISSING
    if len(data) > MAX_RESULT_BYTES or _DECLARATION.search(data):
        return CheckReason.RESULT_UNREADABLE
    try:
        root = ET.fromstring(data)  # noqa: S314 - no DTD, no entity can reach the parser
    except ET.ParseError:
        return CheckReason.RESULT_UNREADABLE
    if root.tag != "testsuites" or root.get("kernel-nonce") != nonce or not nonce:
        return CheckReason.RESULT_FORGED
    if root.get("tampered") != "false":
        return CheckReason.RUNNER_TAMPERED
    outcomes: dict[str, TestOutcome] = {}
    for suite in root:
        if suite.tag != "testsuite":
            return CheckReason.RESULT_UNREADABLE
        for case in suite:
            classname, name = case.get("classname"), case.get("name")
            if case.tag != "testcase" or not classname or not name or len(case) > 1:
                return CheckReason.RESULT_UNREADABLE
            test_id = f"{classname}.{name}"
            if test_id in outcomes:
                return CheckReason.RESULT_AMBIGUOUS
            if len(case) == 0:
                outcomes[test_id] = "passed"
            elif case[0].tag in _OUTCOMES:
                outcomes[test_id] = case[0].tag
            else:
                return CheckReason.RESULT_UNREADABLE
    if not outcomes:
        return CheckReason.NO_TESTS_FOUND
    return outcomes


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
) -> tuple[DeclaredTestResult, ...]:
    """Each declared test's outcome, as the run record keeps it (declaration order).

    A test the result does not name is ``missing``; every test of a forged or tampered
    result is ``tampered``; of any other unusable result (none, unreadable, a timeout),
    ``missing``.
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
        outcomes.append(DeclaredTestResult(test_id=test, kind=kind, outcome=outcome))
    return tuple(outcomes)
