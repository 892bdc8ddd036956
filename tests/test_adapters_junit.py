"""Tests for kernel.effects.adapters.junit (per-test verdicts) and the declared-tests
runner: the in-sandbox bootstrap (kernel.effects.adapters.tests_bootstrap) and the trusted
collector (kernel.effects.adapters.declared_tests), run here without a sandbox."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.effects.adapters import declared_tests, tests_bootstrap
from kernel.effects.adapters.command import PYTEST_PROTECTED, CommandVerifier
from kernel.effects.adapters.declared_tests import (
    CONTROL_KINDS,
    Collected,
    Plan,
    collect,
    judge,
    module_of,
    prepare,
)
from kernel.effects.adapters.junit import declared_test_results, judge_tests
from kernel.effects.orchestrate import load_config
from kernel.errors import ConfigError
from kernel.run.verification import CheckReason, CheckStatus

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo"
BOOTSTRAP = Path(tests_bootstrap.__file__).resolve()

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


# --- the declared-tests runner (bootstrap + collector, no sandbox) --------------------

TESTS = """
import unittest


class T(unittest.TestCase):
    count = 0

    def test_ok(self):
        print("noise on stdout")
        T.count += 1
        self.assertEqual(T.count, 1)

    def test_again(self):
        T.count += 1
        self.assertEqual(T.count, 1)

    def test_bad(self):
        self.assertEqual(1, 2)

    def test_boom(self):
        raise KeyError("boom")

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


def _check(tree: Path, *declared: str, runner: str = "unittest") -> tuple[Collected, Plan, bytes]:
    """Prepare a check in ``tree`` (controls and plan written there, as the sandbox's
    preload would), run the bootstrap there and collect its stream (the interpreter of
    these tests: it has pytest)."""
    plan = prepare(tree, declared, tree, runner)
    done = subprocess.run(
        [sys.executable, "-I", "-B", str(BOOTSTRAP), plan.file_name],
        cwd=tree,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return collect(done.stdout, plan), plan, done.stdout


def test_each_test_runs_in_its_own_process_and_reports_its_outcome(tmp_path: Path) -> None:
    """Each named test has one outcome; two tests sharing a class counter both see 1, so
    each ran in a fresh process; the controls ended as the kernel knows; stdout noise of
    a test never reaches the channel."""
    (tmp_path / "test_m.py").write_text(TESTS)
    names = ("ok", "again", "bad", "boom", "skip", "xfail", "sub", "nothing")
    declared = tuple(f"test_m.T.test_{n}" for n in names)
    collected, plan, stream = _check(tmp_path, *declared)
    assert collected.findings == ()
    assert not collected.import_failed
    assert {t: collected.outcomes[t] for t in declared} == {
        "test_m.T.test_ok": "passed",
        "test_m.T.test_again": "passed",
        "test_m.T.test_bad": "failure",
        "test_m.T.test_boom": "error",
        "test_m.T.test_skip": "skipped",
        "test_m.T.test_xfail": "skipped",
        "test_m.T.test_sub": "failure",
        "test_m.T.test_nothing": "error",
    }
    assert {collected.outcomes[c.test_id] for c in plan.controls} == {"passed", "failure", "error"}
    assert b"noise on stdout" not in stream
    assert not list(tmp_path.glob(".kernel-plan-*")), "the plan is deleted before any test"
    assert judge(declared[:2], collected)[:2] == (CheckStatus.PASSED, None)
    assert judge(declared, collected)[:2] == (CheckStatus.FAILED, CheckReason.EXPECTED_TEST_FAILED)
    text = declared_tests.summary(declared, collected)
    assert "FAIL: test_bad (test_m.T.test_bad)\nAssertionError: 1 != 2" in text
    assert text.rstrip().endswith("ran 2 passed, 3 failure, 3 error, 2 skipped") or "ran " in text
    assert all(c.test_id not in text for c in plan.controls)


def test_controls_look_like_the_declared_tests(tmp_path: Path) -> None:
    """The controls are a test module beside the first declared test's module (same
    package), random names per check, and every module is imported by every process."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "test_m.py").write_text(TESTS)
    first = prepare(tmp_path, ("pkg.test_m.T.test_ok",), tmp_path / "a")
    second = prepare(tmp_path, ("pkg.test_m.T.test_ok",), tmp_path / "b")
    assert first.control_module.startswith("pkg.test_")
    assert (tmp_path / "a" / "pkg" / f"{first.control_module.split('.')[1]}.py").is_file()
    assert first.control_module != second.control_module
    assert set(first.modules) == {"pkg.test_m", first.control_module}
    assert len(first.tests) == 4


def test_a_tree_that_cannot_import_its_tests_fails_the_check(tmp_path: Path) -> None:
    """An import error of a declared module makes its tests errors at the import stage,
    naming the missing module: the check fails, it is not called tampered."""
    (tmp_path / "test_m.py").write_text("import missing_module_xyz\n" + TESTS)
    collected, _plan, _stream = _check(tmp_path, "test_m.T.test_ok")
    assert collected.import_failed
    assert collected.imports == {"test_m.T.test_ok": "missing_module_xyz"}
    assert judge(("test_m.T.test_ok",), collected)[:2] == (
        CheckStatus.FAILED,
        CheckReason.EXPECTED_TEST_FAILED,
    )


def test_only_the_tests_of_a_module_that_cannot_import_are_import_errors(
    tmp_path: Path,
) -> None:
    """Issue 19 item 3: one module lacks a dependency, one id names a module that does
    not exist, one module raises its own ImportError: each of their tests is an error
    at import naming the missing module (none for an ImportError that is not a missing
    module), and the tests of the module that imports run as usual. The record's rows
    carry it."""
    (tmp_path / "test_m.py").write_text(TESTS)
    (tmp_path / "test_dep.py").write_text("import missing_module_xyz\n" + TESTS)
    (tmp_path / "test_own.py").write_text("from test_m import no_such_name\n" + TESTS)
    declared = (
        "test_m.T.test_ok",
        "test_dep.T.test_ok",
        "test_nowhere.T.test_ok",
        "test_own.T.test_ok",
        "test_m.T.test_bad",
    )
    collected, _plan, _stream = _check(tmp_path, *declared)
    assert collected.findings == ()
    assert collected.imports == {
        "test_dep.T.test_ok": "missing_module_xyz",
        "test_nowhere.T.test_ok": "test_nowhere",
        "test_own.T.test_ok": None,
    }
    assert [collected.outcomes[t] for t in declared] == [
        "passed",
        "error",
        "error",
        "error",
        "failure",
    ]
    assert "No module named 'missing_module_xyz'" in collected.messages["test_dep.T.test_ok"]
    status, _reason, tests = judge(declared, collected)
    assert status is CheckStatus.FAILED
    imports = collected.imports
    rows = declared_test_results(declared, declared[:1], tests, imports)
    assert [(r.import_failed, r.missing_module) for r in rows] == [
        (False, None),
        (True, "missing_module_xyz"),
        (True, "test_nowhere"),
        (True, None),
        (False, None),
    ]
    # An untrusted result keeps nothing of what the runner said.
    tampered = declared_test_results(declared, (), CheckReason.RUNNER_TAMPERED, imports)
    assert {(r.import_failed, r.missing_module) for r in tampered} == {(False, None)}


def test_bytecode_in_the_tree_is_never_loaded(tmp_path: Path) -> None:
    """An unchecked-hash .pyc in __pycache__ for a module whose source differs, and a
    sourceless module: the source wins, the sourceless module does not import."""
    (tmp_path / "mod.py").write_text("VALUE = 'source'\n")
    (tmp_path / "evil.py").write_text("VALUE = 'bytecode'\n")
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import py_compile; py_compile.compile('evil.py', "
            "cfile='__pycache__/mod.cpython-%d%d.pyc' % __import__('sys').version_info[:2], "
            "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH); "
            "py_compile.compile('evil.py', cfile='sourceless.pyc')",
        ],
        cwd=tmp_path,
        check=True,
    )
    (tmp_path / "evil.py").unlink()
    (tmp_path / "test_m.py").write_text(
        "import unittest\nimport mod\n\n\nclass T(unittest.TestCase):\n"
        "    def test_source(self):\n        self.assertEqual(mod.VALUE, 'source')\n\n"
        "    def test_sourceless(self):\n        import sourceless  # noqa\n"
    )
    collected, _plan, _stream = _check(tmp_path, "test_m.T.test_source", "test_m.T.test_sourceless")
    assert collected.outcomes["test_m.T.test_source"] == "passed"
    assert collected.outcomes["test_m.T.test_sourceless"] == "error"


def test_the_tree_cannot_shadow_the_standard_library(tmp_path: Path) -> None:
    """A unittest.py or json.py in the tree is never imported by the bootstrap."""
    (tmp_path / "unittest.py").write_text("raise SystemExit(3)\n")
    (tmp_path / "json.py").write_text("raise SystemExit(3)\n")
    (tmp_path / "test_m.py").write_text(TESTS)
    collected, _plan, _stream = _check(tmp_path, "test_m.T.test_ok")
    assert collected.findings == ()
    assert collected.outcomes["test_m.T.test_ok"] == "passed"


AUDITED = {
    "settrace": "import sys\nsys.settrace(lambda *a: None)",
    "frames": "import sys\nsys._getframe(1)",
    "gc": "import gc\ngc.get_objects()",
    "code-swap": "def f():\n    pass\nf.__code__ = (lambda: 1).__code__",
    "ctypes": "import ctypes\nctypes.CDLL(None)",
    "proc-mem": "open('/proc/self/mem', 'rb')",
    "kill-parent": "import os, signal\nos.kill(os.getppid(), signal.SIGCONT)",
    "builtins": "import builtins\nbuiltins.min = max",
    "framework": "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None",
    "module-swap": "import sys, types\nsys.modules['test_m'] = types.ModuleType('test_m')",
    "exit": "import os\nos._exit(0)",
    # /proc reached by names that are not /proc's: a link, .. after a link, a folder that
    # a descriptor-relative open would start from.
    "proc-mem-via-dev-fd": "open('/dev/fd/../mem', 'rb')",
    "proc-link-made": "import os\nos.symlink('/proc/self', 'p')",
    "proc-folder": "import os\nos.open('/proc/self', os.O_RDONLY)",
    # Frames through a standard-library helper that hands them back.
    "frames-via-traceback": "import traceback\nlist(traceback.walk_stack(None))",
    # The runner's module reached through the loader's globals: its veto rebound (the
    # runner runs from a sealed copy), its event writer called with a forged outcome.
    "runner-veto-rebound": (
        "import sys\n"
        "g = type(sys.modules['test_m'].__loader__).get_code.__globals__\n"
        "g['_finding'] = lambda event, args: None\n"
        "sys.settrace(lambda *a: None)"
    ),
    "runner-emit-called": (
        "import sys\n"
        "g = type(sys.modules['test_m'].__loader__).get_code.__globals__\n"
        "g['_emit']({'e': 'ran', 'test': 'test_m.T.test_x', 'outcome': 'passed'})"
    ),
    # An event raised by the tree with a name of a str subclass: comparing it would run
    # the subclass's code inside the hook (where the hook's frame is on the stack).
    "str-subclass-name": (
        "import sys\n"
        "class S(str):\n"
        "    __hash__ = str.__hash__\n"
        "    def __eq__(self, other):\n"
        "        return sys._getframe(1)\n"
        "sys.audit('object.__getattr__', None, S('tb_frame'))"
    ),
}


@pytest.mark.parametrize("name", sorted(AUDITED))
def test_tampering_in_a_test_process_is_found(tmp_path: Path, name: str) -> None:
    """Each of these, run by the tree in a test process, is a finding: the check is
    tampered (failed), whatever the test reported."""
    body = "\n".join("        " + line for line in AUDITED[name].splitlines())
    (tmp_path / "test_m.py").write_text(
        "import unittest\n\n\nclass T(unittest.TestCase):\n"
        f"    def test_x(self):\n        try:\n    {body.replace(chr(10), chr(10) + '    ')}\n"
        "        except RuntimeError:\n            pass\n"
    )
    collected, _plan, _stream = _check(tmp_path, "test_m.T.test_x")
    assert collected.findings, collected
    assert judge(("test_m.T.test_x",), collected)[:2] == (
        CheckStatus.FAILED,
        CheckReason.RUNNER_TAMPERED,
    )


HONEST_FRAMES = """
import collections, enum, logging, traceback, typing, unittest, warnings

Pair = collections.namedtuple("Pair", "a b")
T = typing.TypeVar("T")
Colour = enum.Enum("Colour", "red green")


class H(unittest.TestCase):
    def test_x(self):
        logging.getLogger("m").warning("a warning with its caller's file and line")
        logging.getLogger("m").warning("with the stack", stack_info=True)
        warnings.warn("a warning", UserWarning)
        try:
            raise ValueError("x")
        except ValueError:
            text = traceback.format_exc()
        traceback.print_stack()
        self.assertIn("ValueError", text)
        self.assertEqual(Pair(1, 2).b, 2)
"""


def test_honest_frame_users_are_not_tampering(tmp_path: Path) -> None:
    """Standard-library helpers that ask for frames on their caller's behalf and keep
    them (logging's caller and stack, namedtuple's and TypeVar's module, enum, warnings,
    a formatted traceback or stack) are no finding with tree code on the stack."""
    (tmp_path / "test_m.py").write_text(HONEST_FRAMES)
    collected, _plan, _stream = _check(tmp_path, "test_m.H.test_x")
    assert collected.findings == ()
    assert collected.outcomes["test_m.H.test_x"] == "passed"


ASYNC_AND_MOCK = """
import asyncio, types, unittest, unittest.mock


@types.coroutine
def tick():
    yield


class H(unittest.TestCase):
    def test_x(self):
        self.assertEqual(unittest.mock.Mock(return_value=3)(), 3)
        self.assertEqual(asyncio.run(asyncio.sleep(0, result=4)), 4)
"""

SWAP_THROUGH_COROUTINE = """
import types, unittest


def gen():
    yield


def swap():
    gen.__code__ = (lambda: (yield)).__code__


class H(unittest.TestCase):
    def test_x(self):
        types.coroutine(gen)  # allowed: only a flag of gen's own code
        swap()  # a swap from tree code is still a finding
"""


def test_importing_asyncio_or_mock_is_not_tampering(tmp_path: Path) -> None:
    """`types.coroutine` replaces a generator function's code with a copy flagged as a
    coroutine (asyncio does at import, and unittest.mock imports asyncio): no finding.
    A real code swap beside it still is."""
    (tmp_path / "test_m.py").write_text(ASYNC_AND_MOCK)
    collected, _plan, _stream = _check(tmp_path, "test_m.H.test_x")
    assert collected.findings == ()
    assert collected.outcomes["test_m.H.test_x"] == "passed"
    (tmp_path / "test_m.py").write_text(SWAP_THROUGH_COROUTINE)
    collected, _plan, _stream = _check(tmp_path, "test_m.H.test_x")
    assert any("__code__" in f for f in collected.findings), collected.findings


# An object posing as a function (``__class__`` a property) whose ``__setattr__`` is a C
# callable bound to another function: through types.coroutine's frame it would swap that
# function's code with no Python frame of its own.
POSING_AS_A_FUNCTION = """
import functools, types, unittest


def lenient(*a, **k):
    yield


class Posing:
    __class__ = property(lambda s: types.FunctionType)
    __code__ = lenient.__code__
    __setattr__ = functools.partial(setattr, unittest.TestCase.assertEqual)

    def __call__(self):
        pass


class H(unittest.TestCase):
    def test_x(self):
        types.coroutine(Posing())
        self.assertEqual(1, 2)
"""


def test_an_object_posing_as_a_function_through_types_coroutine_is_tampering(
    tmp_path: Path,
) -> None:
    """The coroutine exemption holds only for a real function and its own code."""
    (tmp_path / "test_m.py").write_text(POSING_AS_A_FUNCTION)
    collected, _plan, _stream = _check(tmp_path, "test_m.H.test_x")
    assert collected.findings, collected
    assert collected.outcomes.get("test_m.H.test_x") != "passed"


# The runner's record of executed modules (a class attribute of the loader) and
# sys.modules pointed at a module built from another tree file name, whose T passes: the
# loader's exec_module swapped and put back by its own next call.
RECORDS_REBOUND = """
import os, sys
loader = type(__loader__)
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "anything.py")


def exec_module(self, module, real=vars(loader)["exec_module"]):
    loader.exec_module = real
    real(self, module)
    fake = type(sys)("test_m")
    fake.__file__ = path
    source = "import unittest\\nclass T(unittest.TestCase):\\n"
    source += "    def test_x(self):\\n        pass\\n"
    exec(compile(source, path, "exec"), vars(fake))
    fake.T.__module__ = "test_m"
    loader.executed["test_m"] = fake
    sys.modules["test_m"] = fake


loader.exec_module = exec_module
"""


@pytest.mark.parametrize("test_module_first", [True, False])
def test_the_runners_module_record_rebound_is_tampering(
    tmp_path: Path, test_module_first: bool
) -> None:
    """Whichever order the plan imports the test module and the controls in, a test
    module swapped in the runner's record is refused: after the controls' import, by
    the file the name resolved to before any tree code ran; before it, by the loader's
    method left swapped."""
    (tmp_path / "hack.py").write_text(RECORDS_REBOUND)
    (tmp_path / "test_m.py").write_text(
        "import unittest\nimport hack\n\n\nclass T(unittest.TestCase):\n"
        "    def test_x(self):\n        self.assertEqual(1, 2)\n"
    )
    plan = prepare(tmp_path, ("test_m.T.test_x",), tmp_path)
    order = ["test_m", plan.control_module]
    written = json.loads((tmp_path / plan.file_name).read_text())
    written["modules"] = order if test_module_first else order[::-1]
    (tmp_path / plan.file_name).write_text(json.dumps(written))
    done = subprocess.run(
        [sys.executable, "-I", "-B", str(BOOTSTRAP), plan.file_name],
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        capture_output=True,
        check=False,
    )
    collected = collect(done.stdout, plan)
    expected = "test module not loaded from its file" if test_module_first else "namespace"
    assert any(expected in finding for finding in collected.findings), collected.findings
    assert judge(("test_m.T.test_x",), collected)[1] is CheckReason.RUNNER_TAMPERED


def test_a_cut_or_altered_stream_is_tampering(tmp_path: Path) -> None:
    """Without its closing mark, with a control's outcome flipped, or with a test's
    outcome reported twice, the stream is tampering."""
    (tmp_path / "test_m.py").write_text(TESTS)
    collected, plan, stream = _check(tmp_path, "test_m.T.test_ok")
    assert collected.findings == ()
    cut = collect(stream[: stream.rindex(b"E\n")], plan)
    assert "stream: ended without its closing mark" in cut.findings
    failing = next(c for c in plan.controls if c.expected == "failure")
    index = plan.tests.index(failing.test_id)
    head, _, rest = stream.partition(b"S %d " % index)
    key, frame_end = bytes.fromhex(rest[:64].decode()), rest.index(b"X %d" % index)
    flipped = rest[:frame_end].replace(b'"outcome": "failure"', b'"outcome": "passed"')
    forged = collect(head + b"S %d " % index + flipped + rest[frame_end:], plan)
    assert "stream: a test process's event is not the runner's (tag or order)" in forged.findings
    # The same flip signed with the process's own key: the control's known answer.
    lines = [line.partition(b" ")[2] for line in _bodies(rest[65:frame_end])]
    lines = [line.replace(b'"outcome": "failure"', b'"outcome": "passed"') for line in lines]
    resigned = _signed(key, lines)
    frame = b"%s\nD %d %d\n%s" % (rest[:64], index, len(resigned), resigned)
    forged = collect(head + b"S %d " % index + frame + rest[frame_end:], plan)
    assert "control failure: ended passed (the check is tampered)" in forged.findings
    assert collect(b"", plan).findings


def _tag(key: bytes, data: bytes) -> bytes:
    """The keyed BLAKE2b a test process's audit hook writes before each event."""
    return hashlib.blake2b(data, key=key, digest_size=16).hexdigest().encode()


def _bodies(frames: bytes) -> list[bytes]:
    """The event lines of one test process's ``D`` frames."""
    data, position = b"", 0
    while position < len(frames):
        end = frames.index(b"\n", position)
        size = int(frames[position:end].split()[2])
        data += frames[end + 1 : end + 1 + size]
        position = end + 1 + size
    return data.splitlines()


def _signed(key: bytes, bodies: list[bytes]) -> bytes:
    """Event lines as a test process's audit hook writes them: tag, space, JSON."""
    return b"".join(
        _tag(key, seq.to_bytes(8, "big") + body) + b" " + body + b"\n"
        for seq, body in enumerate(bodies)
    )


@given(st.binary(max_size=400))
def test_the_collector_never_raises(data: bytes) -> None:
    """For all bytes on the channel: a verdict (usually tampering), never an exception."""
    plan = Plan(
        file_name="p",
        tests=("m.T.a", "m.T.b"),
        modules=("m",),
        controls=(),
        control_module="c",
        control_digest="0" * 64,
        control_file="c.py",
    )
    collected = collect(b"H {}\nS 0 " + b"ab" * 32 + b"\n" + data, plan)
    judge(("m.T.a",), collected)


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


PYTEST_TESTS = """
import pytest

from helper import double


@pytest.fixture
def base():
    return 2


def test_plain():
    assert double(2) == 4


def test_fixture(base, shared):
    assert double(base) == shared


@pytest.mark.parametrize("value,expected", [(1, 2), (2, 5)])
def test_param(value, expected):
    assert double(value) == expected


class TestGroup:
    def test_method(self):
        assert double(0) == 0

    @pytest.mark.skip(reason="later")
    def test_skipped(self):
        pass


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


def test_setup_error(broken):
    pass
"""


def _pytest_tree(tree: Path) -> None:
    (tree / "tests").mkdir()
    (tree / "helper.py").write_text("def double(x):\n    return 2 * x\n")
    (tree / "tests" / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.fixture\ndef shared():\n    return 4\n"
    )
    (tree / "tests" / "test_p.py").write_text(PYTEST_TESTS)
    (tree / "pytest.ini").write_text("[pytest]\naddopts = -k nothing_matches\n")


def test_an_id_naming_a_missing_module_of_a_package_is_an_import_error(tmp_path: Path) -> None:
    """A unittest id whose package exists but whose module does not: the id's module is
    imported (and fails, naming it), not the package, whose missing attribute would read
    as a test that ran and errored."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "test_m.py").write_text(TESTS)
    declared = ("pkg.test_m.T.test_ok", "pkg.test_gone.T.test_ok")
    assert [module_of(tmp_path, t) for t in declared] == ["pkg.test_m", "pkg.test_gone"]
    assert module_of(tmp_path, "pkg.T.test_ok") == "pkg"
    assert module_of(tmp_path, "nowhere.T.test_ok") == "nowhere"
    collected, _plan, _stream = _check(tmp_path, *declared)
    assert collected.findings == ()
    assert collected.imports == {"pkg.test_gone.T.test_ok": "pkg.test_gone"}
    assert collected.outcomes["pkg.test_m.T.test_ok"] == "passed"


def test_a_pytest_file_that_cannot_import_errors_only_its_own_tests(tmp_path: Path) -> None:
    """Issue 19 item 3 under pytest: a test file lacking a dependency and one that does
    not compile fail to collect; only their tests are errors at import (the missing
    module named when there is one), and the other file's tests run as usual."""
    _pytest_tree(tmp_path)
    (tmp_path / "tests" / "test_dep.py").write_text(
        "import missing_module_xyz\n\n\ndef test_x():\n    assert missing_module_xyz\n"
    )
    (tmp_path / "tests" / "test_syntax.py").write_text("def test_y(:\n    pass\n")
    declared = (
        "tests/test_p.py::test_plain",
        "tests/test_dep.py::test_x",
        "tests/test_syntax.py::test_y",
        "tests/test_p.py::test_param[2-5]",
    )
    collected, _plan, _stream = _check(tmp_path, *declared, runner="pytest")
    assert collected.findings == ()
    assert collected.imports == {
        "tests/test_dep.py::test_x": "missing_module_xyz",
        "tests/test_syntax.py::test_y": None,
    }
    assert [collected.outcomes[t] for t in declared] == ["passed", "error", "error", "failure"]
    assert "missing_module_xyz" in collected.messages["tests/test_dep.py::test_x"]


def test_a_root_conftest_that_cannot_import_is_an_import_error_of_every_test(
    tmp_path: Path,
) -> None:
    """Issue 19 item 3: a root ``conftest.py`` lacking a dependency stops pytest before
    any collection. Every test (controls too) is an error at import naming the missing
    module, as a test module that cannot import is: the check fails as
    ``expected_test_failed`` (calibration blames the environment), never tampered."""
    _pytest_tree(tmp_path)
    (tmp_path / "conftest.py").write_text("import missing_dependency_xyz\n")
    declared = ("tests/test_p.py::test_plain", "tests/test_p.py::test_fixture")
    collected, plan, _stream = _check(tmp_path, *declared, runner="pytest")
    assert collected.findings == ()
    every = (*declared, *(c.test_id for c in plan.controls))
    assert collected.imports == dict.fromkeys(every, "missing_dependency_xyz")
    assert {collected.outcomes[t] for t in every} == {"error"}
    assert "conftest.py" in collected.messages[declared[0]]
    assert judge(declared, collected)[:2] == (CheckStatus.FAILED, CheckReason.EXPECTED_TEST_FAILED)


def test_pytest_node_ids_run_each_in_its_own_process(tmp_path: Path) -> None:
    """pytest node ids (functions, fixtures from a conftest, parametrized ids, classes)
    each run in their own process with the same controls and defences; the project's
    addopts cannot deselect them; a setup error is an error, a failed call a failure."""
    _pytest_tree(tmp_path)
    ids = {
        "tests/test_p.py::test_plain": "passed",
        "tests/test_p.py::test_fixture": "passed",
        "tests/test_p.py::test_param[1-2]": "passed",
        "tests/test_p.py::test_param[2-5]": "failure",
        "tests/test_p.py::TestGroup::test_method": "passed",
        "tests/test_p.py::TestGroup::test_skipped": "skipped",
        "tests/test_p.py::test_setup_error": "error",
        "tests/test_p.py::test_absent": "error",
    }
    collected, plan, _stream = _check(tmp_path, *ids, runner="pytest")
    assert collected.findings == ()
    assert {t: collected.outcomes[t] for t in ids} == ids
    assert {collected.outcomes[c.test_id] for c in plan.controls} == {"passed", "failure", "error"}
    assert all(c.test_id.startswith("tests/test_") for c in plan.controls)


def test_pytest_framework_tampering_is_found(tmp_path: Path) -> None:
    """The module under test patching pytest's report (every failure a pass) is a
    namespace finding and the must-fail control passes: the check is tampered."""
    _pytest_tree(tmp_path)
    (tmp_path / "helper.py").write_text(
        "import _pytest.reports\n"
        "_pytest.reports.TestReport.passed = property(lambda self: True)\n"
        "def double(x):\n    return 2 * x\n"
    )
    collected, _plan, _stream = _check(tmp_path, "tests/test_p.py::test_plain", runner="pytest")
    assert any("_pytest.reports.TestReport.passed" in f for f in collected.findings)
    assert judge(("tests/test_p.py::test_plain",), collected)[:2] == (
        CheckStatus.FAILED,
        CheckReason.RUNNER_TAMPERED,
    )


def _demo_config(tmp_path: Path, check: dict[str, object]) -> Path:
    shutil.copytree(DEMO, tmp_path / "demo")
    path = tmp_path / "demo" / "config.json"
    config = json.loads(path.read_text())
    config["verifier"]["checks"] = [{"id": "unit-tests", "timeout_s": 60, **check}]
    config["verifier"].pop("require_trust", None)
    path.write_text(json.dumps(config))
    return path


PYTEST_IDS = {"fail_to_pass": ["test_stats.py::StatsTest::test_median_even"], "pass_to_pass": []}
UNITTEST_IDS = {"fail_to_pass": ["test_stats.StatsTest.test_median_even"], "pass_to_pass": []}


def test_a_check_names_its_runner_or_has_it_detected(tmp_path: Path) -> None:
    """pytest node ids select pytest, dotted ids unittest; a pytest check protects
    pytest's configuration and fixtures (conftest.py, every configuration file name
    pytest 9 reads, tox.ini, setup.cfg, pyproject.toml) on top of the config's own
    protected paths."""
    loaded = load_config(_demo_config(tmp_path, {"tests": PYTEST_IDS}))
    verifier = loaded.verifier
    assert isinstance(verifier, CommandVerifier)
    (check,) = verifier.checks
    assert check.runner == "pytest"
    assert set(PYTEST_PROTECTED) <= set(verifier.protected)
    assert {".pytest.ini", "pytest.toml", ".pytest.toml"} <= set(verifier.protected)
    assert "test_*.py" in verifier.protected
    loaded = load_config(_demo_config(tmp_path / "u", {"tests": UNITTEST_IDS}))
    assert isinstance(loaded.verifier, CommandVerifier)
    assert loaded.verifier.checks[0].runner == "unittest"
    assert "conftest.py" not in loaded.verifier.protected


@pytest.mark.parametrize(
    ("runner", "tests", "message"),
    [
        ("unittest", PYTEST_IDS, "expected an array of test ids \\(unittest"),
        ("pytest", UNITTEST_IDS, "expected an array of test ids \\(pytest"),
        ("nose", UNITTEST_IDS, r"runner: expected one of \['unittest', 'pytest'\], got 'nose'"),
    ],
)
def test_a_runner_that_does_not_match_its_ids_is_refused_at_load(
    tmp_path: Path, runner: str, tests: dict[str, list[str]], message: str
) -> None:
    """A check whose runner does not match its test ids is a config error at load time."""
    path = _demo_config(tmp_path, {"tests": tests, "runner": runner})
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def _stream(plan: Plan, outcomes: dict[str, str], *, closed: bool = True) -> bytes:
    """The bootstrap's stream for ``plan`` with each test ending as ``outcomes`` says."""
    out = [b'H {"tests": %d}\n' % len(plan.tests)]
    for index, test in enumerate(plan.tests):
        events = [
            {"e": "start", "test": test},
            {"e": "source", "path": plan.control_file, "sha256": plan.control_digest},
            {"e": "ran", "test": test, "outcome": outcomes[test], "message": "", "stage": "test"},
            {"e": "end"},
        ]
        key = bytes([index]) * 32
        body = _signed(key, [json.dumps(e).encode() for e in events])
        out += [b"S %d %s\n" % (index, key.hex().encode()), b"D %d %d\n" % (index, len(body))]
        out += [body, b"X %d 0\n" % index]
    return b"".join(out) + (b"E\n" if closed else b"")


OUTCOMES = st.sampled_from(["passed", "failure", "error", "skipped"])


@given(
    declared=st.lists(st.just("passed") | OUTCOMES, min_size=1, max_size=4),
    controls=st.just(list(CONTROL_KINDS)) | st.lists(OUTCOMES, min_size=3, max_size=3),
    closed=st.booleans(),
)
def test_a_check_passes_only_with_every_control_right_and_every_test_passed(
    declared: list[str], controls: list[str], closed: bool
) -> None:
    """For all outcomes of the declared tests and the controls, and a stream closed or
    not: the check passes only when the stream is closed, every control ended with its
    known answer and every declared test passed; a wrong control is always tampering."""
    ids = tuple(f"m.T.test_{i}" for i in range(len(declared)))
    known = tuple(
        declared_tests.Control(test_id=f"c.C.test_{k}", expected=k) for k in CONTROL_KINDS
    )
    plan = Plan(
        file_name="p",
        tests=(*ids, *(c.test_id for c in known)),
        modules=("m", "c"),
        controls=known,
        control_module="c",
        control_digest="0" * 64,
        control_file="c.py",
    )
    outcomes = dict(zip(plan.tests, [*declared, *controls], strict=True))
    status, reason, _tests = judge(ids, collect(_stream(plan, outcomes, closed=closed), plan))
    controls_right = controls == list(CONTROL_KINDS)
    if not closed or not controls_right:
        assert (status, reason) == (CheckStatus.FAILED, CheckReason.RUNNER_TAMPERED)
    elif all(o == "passed" for o in declared):
        assert (status, reason) == (CheckStatus.PASSED, None)
    else:
        assert status is not CheckStatus.PASSED


FAILED_CHECK = CheckReason.EXPECTED_TEST_FAILED
PYTEST_HACKS = {
    # pytest's own test runner made a no-op: every test "passes".
    "runtest-noop": "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n",
    # The test class's methods wrapped while the test module is built, then the hook
    # removed again: the function that runs is not the one the source defines.
    "build-class": (
        "import builtins, functools\n"
        "_build = builtins.__build_class__\n"
        "def _wrap(method):\n"
        "    @functools.wraps(method)\n"
        "    def wrapper(self, *args, **kwargs):\n"
        "        try:\n"
        "            method(self, *args, **kwargs)\n"
        "        except AssertionError:\n"
        "            pass\n"
        "    return wrapper\n"
        "def _build_class(func, name, *bases, **kwargs):\n"
        "    cls = _build(func, name, *bases, **kwargs)\n"
        "    if name == 'TestGroup':\n"
        "        builtins.__build_class__ = _build\n"
        "        for attr, value in list(vars(cls).items()):\n"
        "            if attr.startswith('test_'):\n"
        "                setattr(cls, attr, _wrap(value))\n"
        "    return cls\n"
        "builtins.__build_class__ = _build_class\n"
    ),
    # Leave before any test reports.
    "exit-early": "import os\nos._exit(0)\n",
    # Skip everything from the code under test.
    "raise-skip": "import pytest\npytest.skip('later', allow_module_level=True)\n",
}


@pytest.mark.parametrize("name", sorted(PYTEST_HACKS))
def test_pytest_hacks_never_pass(tmp_path: Path, name: str) -> None:
    """Hacks of the code under test against pytest end tampered (or, for a module-level
    skip, as a collection error): never a pass of the failing test."""
    _pytest_tree(tmp_path)
    helper = tmp_path / "helper.py"
    helper.write_text(PYTEST_HACKS[name] + helper.read_text().replace("2 * x", "3 * x"))
    test = "tests/test_p.py::TestGroup::test_method"
    (tmp_path / "tests" / "test_p.py").write_text(
        PYTEST_TESTS.replace("assert double(0) == 0", "assert double(1) == 2")
    )
    collected, _plan, _stream = _check(tmp_path, test, runner="pytest")
    status, reason, _tests = judge((test,), collected)
    assert status is CheckStatus.FAILED, collected
    # A module-level skip is a collection error: the tests cannot run, the check fails.
    expected = FAILED_CHECK if name == "raise-skip" else CheckReason.RUNNER_TAMPERED
    assert reason is expected


def test_a_test_class_member_put_there_by_other_tree_code_is_tampering(tmp_path: Path) -> None:
    """The module under test makes the declared test's class lenient while it is built
    (a hook of TestCase.__init_subclass__, put back at once): the class's assertEqual
    comes from other tree code, a finding, though every framework namespace is intact."""
    (tmp_path / "lenient.py").write_text(
        "import unittest\n"
        "_orig = vars(unittest.TestCase)['__init_subclass__']\n"
        "def _hook(cls, **kwargs):\n"
        "    _orig.__get__(None, cls)(**kwargs)\n"
        "    if cls.__name__ == 'T':\n"
        "        cls.assertEqual = lambda self, first, second, msg=None: None\n"
        "        unittest.TestCase.__init_subclass__ = _orig\n"
        "unittest.TestCase.__init_subclass__ = classmethod(_hook)\n"
    )
    (tmp_path / "test_m.py").write_text("import lenient  # noqa: F401\n" + TESTS)
    collected, _plan, _stream = _check(tmp_path, "test_m.T.test_bad")
    assert any("T.assertEqual comes from" in f for f in collected.findings), collected
    assert judge(("test_m.T.test_bad",), collected)[:2] == (
        CheckStatus.FAILED,
        CheckReason.RUNNER_TAMPERED,
    )
