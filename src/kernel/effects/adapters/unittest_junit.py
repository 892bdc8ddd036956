"""The verifier's test runner: runs named unittest tests, writes JUnit XML to a private fd.

Run inside a verifier sandbox as ``python3 -I <this file> TEST_ID...`` from the
kernel installation, which the sandbox shows read-only: the candidate can neither
replace it nor shadow what it imports. Standard library only (the sandbox's
interpreter is not the runner's virtual environment).

Rules enforced:

- ``-I`` (isolated mode): no ``PYTHON*`` variables, no user site, and neither the
  script's folder nor the work tree on ``sys.path`` at start-up, so a work tree's
  ``sitecustomize.py``, ``usercustomize.py``, ``.pth`` file, ``unittest.py`` or
  ``conftest.py`` is never imported by start-up; the work tree is appended to
  ``sys.path`` only after everything the runner needs is imported, and *after* the
  standard library, so it cannot shadow a standard module either;
- the result channel: before any test module is imported, the runner duplicates
  its stdout to a private descriptor and points fd 1 at stderr, so what tests print
  never lands in the result; the verifier captures that stdout fresh for each check
  in its own folder, which no sandbox sees;
- the result carries the per-check nonce the verifier put in ``KERNEL_RESULT_NONCE``;
  the runner reads it, wipes it from its environment (also the bytes
  ``/proc/self/environ`` shows), and a result without it is not this run's result;
- the result is written only after every test ran: a process that exits early
  (``os._exit(0)`` on import) leaves no result; each named test is reported once:
  passed, failure, error or skipped (a name that does not load is an error);
- the runner notes, before and after each test, the identity of every attribute of
  `unittest.TestCase` and `unittest.TestResult`; a test run that replaced one
  (an assertion turned into a no-op) is reported as tampered.

What it cannot stop: code under test runs in this process, so a candidate written to
attack this runner (reading its memory for the nonce) could forge a result. The
verifier's other defences (fresh sandbox, read-only runner, isolation level recorded)
bound what such a candidate reaches, and the threat model says so.
"""

from __future__ import annotations

import ctypes
import os
import sys
import traceback
import unittest
from xml.sax.saxutils import quoteattr

__all__ = ["NONCE_ENV", "main"]

NONCE_ENV = "KERNEL_RESULT_NONCE"
"""The environment variable that carries the per-check nonce."""

_MESSAGE_LIMIT = 2000


def _take_nonce() -> str:
    """Read the nonce, then wipe it: from os.environ and from the process's env block."""
    nonce = os.environ.get(NONCE_ENV, "")
    if nonce:
        try:
            libc = ctypes.CDLL(None)
            libc.getenv.restype = ctypes.c_void_p
            address = libc.getenv(NONCE_ENV.encode())
            if address:
                ctypes.memset(address, ord("0"), len(nonce.encode()))
        except (OSError, AttributeError):
            pass  # best effort: without libc the variable is still removed below
        del os.environ[NONCE_ENV]
    return nonce


def _snapshot() -> dict[str, int]:
    return {
        f"{cls.__name__}.{name}": id(value)
        for cls in (unittest.TestCase, unittest.TestResult)
        for name, value in vars(cls).items()
    }


class _Result(unittest.TestResult):
    """Per-test outcomes, in run order, plus tamper detection around each test."""

    def __init__(self, baseline: dict[str, int]) -> None:
        super().__init__()
        self.baseline = baseline
        self.outcomes: list[tuple[str, str, str]] = []
        self.tampered = False

    def startTest(self, test: unittest.TestCase) -> None:
        self.tampered |= _snapshot() != self.baseline
        super().startTest(test)

    def stopTest(self, test: unittest.TestCase) -> None:
        self.tampered |= _snapshot() != self.baseline
        super().stopTest(test)

    def addSuccess(self, test: unittest.TestCase) -> None:
        self.outcomes.append((test.id(), "passed", ""))

    def addFailure(self, test: unittest.TestCase, err: object) -> None:
        self.outcomes.append((test.id(), "failure", _text(err)))

    def addError(self, test: unittest.TestCase, err: object) -> None:
        self.outcomes.append((test.id(), "error", _text(err)))

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        self.outcomes.append((test.id(), "skipped", reason))

    def addExpectedFailure(self, test: unittest.TestCase, err: object) -> None:
        # An expected failure is not the named behaviour passing.
        self.outcomes.append((test.id(), "skipped", "expected failure"))

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:
        self.outcomes.append((test.id(), "failure", "unexpected success"))

    def addSubTest(self, test: unittest.TestCase, subtest: object, err: object) -> None:
        if err is not None:
            self.outcomes.append((test.id(), "failure", _text(err)))


def _text(err: object) -> str:
    if isinstance(err, tuple) and len(err) == 3:
        text = "".join(traceback.format_exception_only(err[0], err[1]))
    else:
        text = str(err)
    return text[-_MESSAGE_LIMIT:]


_WORST = ("error", "failure", "skipped", "passed")


def _one(test_id: str, outcomes: list[tuple[str, str, str]]) -> tuple[str, str, str]:
    """The one outcome reported for a named test (its worst; a load failure is an error)."""
    own = [o for o in outcomes if o[0] == test_id]
    broken = [o for o in outcomes if o[1] in ("error", "failure")]
    if not own or len(own) != len(outcomes):
        # Not a single test under this name: a failed import, a class or a module.
        message = broken[0][2] if broken else "does not name exactly one test"
        return test_id, "error", message
    return min(own, key=lambda o: _WORST.index(o[1]))


_LABELS = {"failure": "FAIL", "error": "ERROR", "skipped": "SKIP"}


def _summary(reported: list[tuple[str, str, str]]) -> None:
    """For a reader of the check's output (stderr): what did not pass, and why."""
    for test_id, status, message in reported:
        if status != "passed":
            name = test_id.rpartition(".")[2]
            print(f"{_LABELS[status]}: {name} ({test_id})\n{message}", file=sys.stderr)
    counts = {s: sum(1 for r in reported if r[1] == s) for s in ("passed", *_LABELS)}
    print("ran " + ", ".join(f"{n} {s}" for s, n in counts.items() if n), file=sys.stderr)


def _xml(nonce: str, outcomes: list[tuple[str, str, str]], tampered: bool) -> bytes:
    lines = [
        f"<testsuites kernel-nonce={quoteattr(nonce)} tampered="
        f"{quoteattr('true' if tampered else 'false')}>",
        '<testsuite name="kernel-unittest">',
    ]
    for test_id, status, message in outcomes:
        classname, _, name = test_id.rpartition(".")
        head = f"<testcase classname={quoteattr(classname)} name={quoteattr(name)}"
        if status == "passed":
            lines.append(head + "/>")
        else:
            lines.append(f"{head}><{status} message={quoteattr(message)}/></testcase>")
    lines += ["</testsuite>", "</testsuites>", ""]
    return "\n".join(lines).encode("utf-8", "backslashreplace")


def main(argv: list[str]) -> int:
    """Run the tests named in ``argv``; write the JUnit XML result; return 0.

    Returns 2 (and writes nothing) when no test is named.
    """
    nonce = _take_nonce()
    if not argv:
        print("unittest_junit: name at least one test", file=sys.stderr)
        return 2
    # The result goes to a private copy of stdout; what tests print goes to stderr.
    result_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # After the standard library: the work tree cannot shadow it.
    sys.path.append(os.getcwd())
    baseline = _snapshot()
    result = _Result(baseline)
    loader = unittest.TestLoader()
    reported: list[tuple[str, str, str]] = []
    for test_id in argv:
        before = len(result.outcomes)
        try:
            suite = loader.loadTestsFromName(test_id)
            suite.run(result)
        except Exception as e:
            result.outcomes.append((test_id, "error", _text((type(e), e, None))))
        reported.append(_one(test_id, result.outcomes[before:]))
    _summary(reported)
    data = _xml(nonce, reported, result.tampered or _snapshot() != baseline)
    view = memoryview(data)
    while view:
        view = view[os.write(result_fd, view) :]
    os.close(result_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
