"""Tests for kernel.effects.adapters.junit and the runner kernel.effects.adapters.unittest_junit."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.effects.adapters import unittest_junit
from kernel.effects.adapters.junit import (
    MAX_RESULT_BYTES,
    declared_test_results,
    judge_tests,
    read_junit,
)
from kernel.verification import CheckReason, CheckStatus

NONCE = "n0nce"
RUNNER = Path(unittest_junit.__file__).resolve()


def _doc(cases: str, nonce: str = NONCE, tampered: str = "false") -> bytes:
    return (
        f'<testsuites kernel-nonce="{nonce}" tampered="{tampered}">'
        f'<testsuite name="s">{cases}</testsuite></testsuites>'
    ).encode()


PASS = '<testcase classname="m.C" name="t"/>'

UNUSABLE: dict[str, tuple[bytes, CheckReason]] = {
    "empty": (b"", CheckReason.RESULT_MISSING),
    "not-xml": (b"OK\n", CheckReason.RESULT_UNREADABLE),
    "doctype": (b"<!DOCTYPE x [<!ENTITY a 'b'>]>" + _doc(PASS), CheckReason.RESULT_UNREADABLE),
    "entity-bomb": (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
        + _doc(PASS),
        CheckReason.RESULT_UNREADABLE,
    ),
    "processing-instruction": (b"<?evil x?>" + _doc(PASS), CheckReason.RESULT_UNREADABLE),
    "comment": (_doc(PASS + "<!-- x -->"), CheckReason.RESULT_UNREADABLE),
    "too-big": (_doc(PASS) + b" " * MAX_RESULT_BYTES, CheckReason.RESULT_UNREADABLE),
    "wrong-nonce": (_doc(PASS, nonce="guess"), CheckReason.RESULT_FORGED),
    "no-nonce": (b"<testsuites><testsuite/></testsuites>", CheckReason.RESULT_FORGED),
    "other-root": (b'<testsuite kernel-nonce="n0nce"/>', CheckReason.RESULT_FORGED),
    "tampered": (_doc(PASS, tampered="true"), CheckReason.RUNNER_TAMPERED),
    "duplicate": (_doc(PASS + PASS), CheckReason.RESULT_AMBIGUOUS),
    "no-tests": (_doc(""), CheckReason.NO_TESTS_FOUND),
    "unknown-child": (
        _doc('<testcase classname="m.C" name="t"><x/></testcase>'),
        CheckReason.RESULT_UNREADABLE,
    ),
    "unnamed-case": (_doc('<testcase name="t"/>'), CheckReason.RESULT_UNREADABLE),
    "unknown-element": (
        f'<testsuites kernel-nonce="{NONCE}" tampered="false"><x/></testsuites>'.encode(),
        CheckReason.RESULT_UNREADABLE,
    ),
}


@pytest.mark.parametrize("name", sorted(UNUSABLE))
def test_unusable_results_are_refused_with_their_reason(name: str) -> None:
    """DTDs, entities, forgeries, duplicates, tampering and empty results are not evidence."""
    data, reason = UNUSABLE[name]
    assert read_junit(data, NONCE) is reason


def test_outcomes_are_read_per_test() -> None:
    """Each testcase's outcome is read by its id."""
    data = _doc(
        PASS
        + '<testcase classname="m.C" name="f"><failure message="x"/></testcase>'
        + '<testcase classname="m.C" name="e"><error message="x"/></testcase>'
        + '<testcase classname="m.C" name="s"><skipped message="x"/></testcase>'
    )
    assert read_junit(data, NONCE) == {
        "m.C.t": "passed",
        "m.C.f": "failure",
        "m.C.e": "error",
        "m.C.s": "skipped",
    }


JUDGED: dict[str, tuple[dict[str, str] | CheckReason, int, CheckStatus, CheckReason | None]] = {
    "all-passed": ({"a.B.c": "passed", "a.B.d": "passed"}, 0, CheckStatus.PASSED, None),
    "one-failed": (
        {"a.B.c": "failure", "a.B.d": "passed"},
        1,
        CheckStatus.FAILED,
        CheckReason.EXPECTED_TEST_FAILED,
    ),
    "one-missing": (
        {"a.B.c": "passed", "x.Y.z": "passed"},
        0,
        CheckStatus.INCONCLUSIVE,
        CheckReason.EXPECTED_TEST_MISSING,
    ),
    "one-skipped": (
        {"a.B.c": "passed", "a.B.d": "skipped"},
        0,
        CheckStatus.INCONCLUSIVE,
        CheckReason.EXPECTED_TEST_SKIPPED,
    ),
    "nonzero-after-pass": (
        {"a.B.c": "passed", "a.B.d": "passed"},
        3,
        CheckStatus.INCONCLUSIVE,
        CheckReason.RUNNER_EXIT_NONZERO,
    ),
    "missing-result-exit-0": (
        CheckReason.RESULT_MISSING,
        0,
        CheckStatus.INCONCLUSIVE,
        CheckReason.RESULT_MISSING,
    ),
}


@pytest.mark.parametrize("name", sorted(JUDGED))
def test_a_check_passes_only_on_positive_per_test_evidence(name: str) -> None:
    """Every declared test present and passed, runner exit 0: the only way to pass."""
    result, exit_code, status, reason = JUDGED[name]
    assert judge_tests(("a.B.c", "a.B.d"), result, exit_code) == (status, reason)


def test_no_declared_test_is_never_a_pass() -> None:
    """An empty declaration proves nothing (vacuous input refused)."""
    assert judge_tests((), {"a.B.c": "passed"}, 0) == (
        CheckStatus.INCONCLUSIVE,
        CheckReason.NO_TESTS_FOUND,
    )


@given(st.binary(max_size=300))
def test_read_junit_never_raises(data: bytes) -> None:
    """For all bytes: outcomes or a reason, never an exception."""
    read_junit(data, NONCE)


@given(
    st.dictionaries(
        st.sampled_from(["a.B.c", "a.B.d", "x.Y.z"]),
        st.sampled_from(["passed", "failure", "error", "skipped"]),
    ),
    st.integers(-9, 9),
)
def test_a_pass_implies_every_declared_test_passed(outcomes: dict[str, str], code: int) -> None:
    """For all results: PASSED only if every declared test passed and the runner exited 0."""
    status, _reason = judge_tests(("a.B.c", "a.B.d"), outcomes, code)
    if status is CheckStatus.PASSED:
        assert outcomes.get("a.B.c") == outcomes.get("a.B.d") == "passed"
        assert code == 0


# --- the runner -----------------------------------------------------------------------

TESTS = """
import unittest


class T(unittest.TestCase):
    def test_ok(self):
        print("noise on stdout")
        self.assertEqual(1, 1)

    def test_bad(self):
        self.assertEqual(1, 2)

    @unittest.skip("later")
    def test_skip(self):
        pass

    @unittest.expectedFailure
    def test_xfail(self):
        self.assertEqual(1, 2)

    def test_sub(self):
        for i in range(2):
            with self.subTest(i=i):
                self.assertEqual(i, 0)
"""


def _run_runner(tree: Path, *tests: str, nonce: str = NONCE) -> subprocess.CompletedProcess[bytes]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "KERNEL_RESULT_NONCE": nonce}
    return subprocess.run(
        [sys.executable, "-I", str(RUNNER), *tests],
        cwd=tree,
        env=env,
        capture_output=True,
        check=False,
    )


def test_the_runner_reports_each_named_test_once(tmp_path: Path) -> None:
    """Passed, failure, skipped, expected failure, subtests, unknown names; noise to stderr."""
    (tmp_path / "test_m.py").write_text(TESTS)
    proc = _run_runner(
        tmp_path,
        "test_m.T.test_ok",
        "test_m.T.test_bad",
        "test_m.T.test_skip",
        "test_m.T.test_xfail",
        "test_m.T.test_sub",
        "test_m.T.test_nope",
        "test_m.T",
        "no_module.T.test",
    )
    assert proc.returncode == 0, proc.stderr
    assert b"noise on stdout" in proc.stderr
    assert read_junit(proc.stdout, NONCE) == {
        "test_m.T.test_ok": "passed",
        "test_m.T.test_bad": "failure",
        "test_m.T.test_skip": "skipped",
        "test_m.T.test_xfail": "skipped",
        "test_m.T.test_sub": "failure",
        "test_m.T.test_nope": "error",
        "test_m.T": "error",
        "no_module.T.test": "error",
    }


def test_the_runner_hides_the_nonce_from_the_tests(tmp_path: Path) -> None:
    """Neither os.environ nor /proc/self/environ shows the nonce to code under test."""
    (tmp_path / "test_n.py").write_text(
        "import os, unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_env(self):\n"
        "        self.assertNotIn('KERNEL_RESULT_NONCE', os.environ)\n"
        "        with open('/proc/self/environ', 'rb') as f:\n"
        "            self.assertNotIn(b'secret-nonce-value', f.read())\n"
    )
    proc = _run_runner(tmp_path, "test_n.T.test_env", nonce="secret-nonce-value")
    assert read_junit(proc.stdout, "secret-nonce-value") == {"test_n.T.test_env": "passed"}


def test_the_work_tree_cannot_shadow_the_standard_library(tmp_path: Path) -> None:
    """A work-tree unittest.py / xml package is not what the runner imports."""
    (tmp_path / "unittest.py").write_text("raise SystemExit(0)\n")
    (tmp_path / "sitecustomize.py").write_text("import os\nos._exit(0)\n")
    (tmp_path / "test_s.py").write_text(
        "import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n"
    )
    proc = _run_runner(tmp_path, "test_s.T.test_a")
    assert read_junit(proc.stdout, NONCE) == {"test_s.T.test_a": "passed"}


def test_the_runner_needs_a_test_name(tmp_path: Path) -> None:
    """No test named: exit 2, no result."""
    proc = _run_runner(tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == b""


def test_the_runner_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """main() in this process (measured by coverage): tamper detection included."""
    (tmp_path / "test_p.py").write_text(
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_a(self):\n"
        "        unittest.TestCase.assertTrue = lambda *a: None\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(unittest_junit.NONCE_ENV, NONCE)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    original = unittest.TestCase.assertTrue
    saved = os.dup(1)
    try:
        assert unittest_junit.main(["test_p.T.test_a"]) == 0
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        unittest.TestCase.assertTrue = original  # type: ignore[method-assign]
        sys.modules.pop("test_p", None)
    out = capfd.readouterr().out.encode()
    assert read_junit(out, NONCE) is CheckReason.RUNNER_TAMPERED


def test_the_runner_result_records_each_outcome_kind() -> None:
    """In process: every unittest outcome maps to one JUnit outcome; the worst one wins."""

    class T(unittest.TestCase):
        def test_ok(self) -> None:
            pass

        def test_fail(self) -> None:
            self.fail("no")

        def test_error(self) -> None:
            raise RuntimeError("boom")

        @unittest.skip("later")
        def test_skip(self) -> None:
            pass

        @unittest.expectedFailure
        def test_xfail(self) -> None:
            self.fail("expected")

        @unittest.expectedFailure
        def test_xpass(self) -> None:
            pass

        def test_sub(self) -> None:
            for i in range(2):
                with self.subTest(i=i):
                    self.assertEqual(i, 0)  # noqa: PT009 - a unittest case run by the runner

    result = unittest_junit._Result(unittest_junit._snapshot())
    unittest.defaultTestLoader.loadTestsFromTestCase(T).run(result)
    outcomes: dict[str, set[str]] = {}
    for test_id, status, _message in result.outcomes:
        outcomes.setdefault(test_id.rpartition(".")[2], set()).add(status)
    assert outcomes == {
        "test_ok": {"passed"},
        "test_fail": {"failure"},
        "test_error": {"error"},
        "test_skip": {"skipped"},
        "test_xfail": {"skipped"},
        "test_xpass": {"failure"},
        "test_sub": {"failure"},
    }
    assert not result.tampered
    name = f"{T.__module__}.{T.__qualname__}.test_sub"
    sub = [o for o in result.outcomes if o[0] == name]
    assert unittest_junit._one(name, sub)[1] == "failure"
    assert unittest_junit._one("x.Y.z", [])[1] == "error"
    assert unittest_junit._one("x.Y", [("x.Y.a", "passed", "")])[1] == "error"


def test_the_runner_summary_names_what_did_not_pass(capsys: pytest.CaptureFixture[str]) -> None:
    """The stderr summary: one block per non-pass, then the counts."""
    unittest_junit._summary(
        [
            ("m.C.a", "passed", ""),
            ("m.C.b", "failure", "AssertionError: 1 != 2"),
            ("m.C.c", "skipped", "later"),
        ]
    )
    err = capsys.readouterr().err
    assert "FAIL: b (m.C.b)\nAssertionError: 1 != 2" in err
    assert "SKIP: c (m.C.c)" in err
    assert err.strip().endswith("ran 1 passed, 1 failure, 1 skipped")


def test_the_nonce_is_taken_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a nonce the runner writes an empty one (a result no verifier accepts)."""
    monkeypatch.delenv(unittest_junit.NONCE_ENV, raising=False)
    assert unittest_junit._take_nonce() == ""
    assert read_junit(unittest_junit._xml("", [("m.C.t", "passed", "")], False), "") is (
        CheckReason.RESULT_FORGED
    )


def test_declared_test_results_name_every_declared_test() -> None:
    """Each declared test gets one outcome in declaration order: a test the result does
    not name is missing, a forged or tampered result makes every test tampered, any
    other unusable result makes every test missing."""
    declared = ("m.A.f2p", "m.A.p2p", "m.A.skip", "m.A.err", "m.A.gone")
    result = {
        "m.A.f2p": "failure",
        "m.A.p2p": "passed",
        "m.A.skip": "skipped",
        "m.A.err": "error",
        "m.A.other": "passed",
    }
    rows = declared_test_results(declared, ("m.A.f2p",), result)
    assert [(r.test_id, str(r.kind), str(r.outcome)) for r in rows] == [
        ("m.A.f2p", "fail_to_pass", "failed"),
        ("m.A.p2p", "pass_to_pass", "passed"),
        ("m.A.skip", "pass_to_pass", "skipped"),
        ("m.A.err", "pass_to_pass", "error"),
        ("m.A.gone", "pass_to_pass", "missing"),
    ]
    for reason, outcome in (
        (CheckReason.RESULT_FORGED, "tampered"),
        (CheckReason.RUNNER_TAMPERED, "tampered"),
        (CheckReason.RESULT_MISSING, "missing"),
        (CheckReason.RESULT_UNREADABLE, "missing"),
    ):
        rows = declared_test_results(declared, (), reason)
        assert {str(r.outcome) for r in rows} == {outcome}
