"""Tests for kernel.effects.adapters.oracle: verdicts the kernel computes from output
compared with an answer the sandbox never sees (issue 18 item 6).

The comparison rules are tested directly (bytes, JSON by value and type, unreadable and
huge output); whole runs of the demo show the oracle check in the run record with its
trust level, an ``__eq__``-always-true ``median`` that passes the declared tests but
not the oracle, a Python call written as data, and the config errors.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.decide.gate import derive_run_admission
from kernel.effects.adapters.oracle import (
    MAX_ORACLE_BYTES,
    OracleSpec,
    json_same,
    judge_oracle,
    parse_json_output,
)
from kernel.effects.orchestrate import load_config, run_detailed
from kernel.errors import ConfigError
from kernel.run.record import TrustLevel
from kernel.run.report import (
    EvidenceState,
    RunEvidenceReport,
    build_evidence_report,
    evidence_state_of,
)
from kernel.run.verification import CheckReason, CheckStatus
from kernel.views import render_html, render_markdown
from kernel.views.admission import admission_section

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo"

JSON = OracleSpec(compare="json", expected_locator="e.json", expected=b"[2.5, 3, 7.0, true]\n")
BYTES = OracleSpec(compare="bytes", expected_locator="e.txt", expected=b"2.5\n")


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (b"[2.5,3,7.0,true]", (CheckStatus.PASSED, None)),
        (b"\n [2.5, 3, 7.0, true] \n", (CheckStatus.PASSED, None)),
        # Type confusion: 3.0 for 3, 7 for 7.0, 1 for true, "2.5" for 2.5.
        (b"[2.5, 3.0, 7.0, true]", (CheckStatus.FAILED, CheckReason.ORACLE_MISMATCH)),
        (b"[2.5, 3, 7, true]", (CheckStatus.FAILED, CheckReason.ORACLE_MISMATCH)),
        (b"[2.5, 3, 7.0, 1]", (CheckStatus.FAILED, CheckReason.ORACLE_MISMATCH)),
        (b'["2.5", 3, 7.0, true]', (CheckStatus.FAILED, CheckReason.ORACLE_MISMATCH)),
        (b"[2.5, 3, 7.0]", (CheckStatus.FAILED, CheckReason.ORACLE_MISMATCH)),
        (b"", (CheckStatus.FAILED, CheckReason.ORACLE_OUTPUT_UNREADABLE)),
        (b"[2.5, 3, 7.0, true] []", (CheckStatus.FAILED, CheckReason.ORACLE_OUTPUT_UNREADABLE)),
        (b"[NaN]", (CheckStatus.FAILED, CheckReason.ORACLE_OUTPUT_UNREADABLE)),
        (b'{"a": 1, "a": 2}', (CheckStatus.FAILED, CheckReason.ORACLE_OUTPUT_UNREADABLE)),
        (b"\xff\xfe", (CheckStatus.FAILED, CheckReason.ORACLE_OUTPUT_UNREADABLE)),
        (None, (CheckStatus.FAILED, CheckReason.ORACLE_OUTPUT_UNREADABLE)),
    ],
)
def test_json_oracle_compares_value_and_type(output: bytes | None, expected: object) -> None:
    """``1``, ``1.0``, ``true`` and ``"1"`` all differ; unreadable output fails."""
    assert judge_oracle(JSON, output, 0) == expected


def test_bytes_oracle_is_exact() -> None:
    """Bytes mode: one byte of difference (a missing newline) is a mismatch."""
    assert judge_oracle(BYTES, b"2.5\n", 0) == (CheckStatus.PASSED, None)
    assert judge_oracle(BYTES, b"2.5", 0) == (CheckStatus.FAILED, CheckReason.ORACLE_MISMATCH)
    assert judge_oracle(BYTES, None, 0)[1] is CheckReason.ORACLE_OUTPUT_UNREADABLE


def test_a_non_zero_exit_fails_whatever_the_output() -> None:
    """The right answer printed before a crash is no pass."""
    assert judge_oracle(BYTES, b"2.5\n", 1) == (CheckStatus.FAILED, CheckReason.NONZERO_EXIT)
    assert judge_oracle(BYTES, b"2.5\n", None)[1] is CheckReason.NONZERO_EXIT


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(_JSON_VALUES)
def test_json_same_is_reflexive_through_a_round_trip(value: Any) -> None:
    """For all JSON values: printed and parsed back, a value is the same as itself."""
    readable, parsed = parse_json_output(json.dumps(value).encode())
    assert readable
    assert json_same(parsed, value)


@given(st.integers(min_value=-(10**6), max_value=10**6))
def test_an_int_is_never_the_same_as_its_float_or_bool(number: int) -> None:
    """For all ints n: n, float(n) and a bool never compare the same."""
    assert not json_same(number, float(number))
    assert not json_same(number, number == 1)
    assert not json_same([number], [float(number)])
    assert not json_same({"k": number}, {"k": float(number)})
    assert not json_same({"k": number}, {"j": number})


# --- whole runs ------------------------------------------------------------------------


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A private copy of the demo."""
    base = Path(tempfile.mkdtemp(prefix="kernel-oracle-test-"))
    try:
        shutil.copytree(DEMO, base / "demo")
        yield base
    finally:
        shutil.rmtree(base)


# A median whose value compares equal to anything: the declared tests' assertEqual
# passes; the oracle prints the real (wrong) number and rejects it.
ALWAYS_EQUAL = """cat > stats.py <<'PY'
class _Median(float):
    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


def mean(values):
    return sum(values) / len(values)


def median(values):
    return _Median(sorted(values)[len(values) // 2])
PY
"""
# The same trick on a value that is not a float: the oracle's JSON printer refuses it.
ALWAYS_EQUAL_OBJECT = ALWAYS_EQUAL.replace("(float)", "").replace(
    "    __hash__ = float.__hash__\n", ""
)


def _config(base: Path, workers: dict[str, str], **verifier: Any) -> Path:
    demo = base / "demo"
    config = json.loads((demo / "config.json").read_text())
    attempts = []
    for name, body in workers.items():
        script = demo / "workers" / f"{name}.sh"
        script.write_text("#!/bin/sh\nset -eu\n" + body)
        script.chmod(0o755)
        attempts.append({**config["attempts"][0], "attempt_id": name, "worker_id": name})
        attempts[-1]["command"] = [f"workers/{name}.sh"]
    config["attempts"] = attempts
    config["verifier"].update(verifier)
    path = demo / "oracle-config.json"
    path.write_text(json.dumps(config))
    return path


def test_an_always_equal_median_passes_the_tests_and_fails_the_oracle(scratch: Path) -> None:
    """The issue's ``__eq__``-always-true family: declared tests pass (the runner's
    assertEqual asks the value itself), the oracle compares printed values and rejects."""
    fix = (DEMO / "workers" / "correct_fix.sh").read_text().split("set -eu\n", 1)[1]
    path = _config(
        scratch, {"always-equal": ALWAYS_EQUAL, "object": ALWAYS_EQUAL_OBJECT, "honest": fix}
    )
    record = run_detailed(load_config(path)).record
    by_id = {a.attempt_id: a for a in record.attempts}
    for name in ("always-equal", "object"):
        attempt = by_id[name]
        assert attempt.verification is not None
        statuses = {c.id: c.status for c in attempt.verification.checks}
        assert statuses["median-oracle"] is CheckStatus.FAILED, name
        runs = {r.check_id: r for r in attempt.check_runs}
        assert runs["median-oracle"].trust is TrustLevel.ORACLE
        expected = CheckReason.ORACLE_MISMATCH if name == "always-equal" else None
        assert runs["median-oracle"].reason in (expected, CheckReason.NONZERO_EXIT)
        state = evidence_state_of(attempt.state, attempt.verification)
        assert state is EvidenceState.REJECTED
    assert {c.id: c.status for c in by_id["always-equal"].verification.checks}[  # type: ignore[union-attr]
        "unit-tests"
    ] is CheckStatus.PASSED
    honest = by_id["honest"]
    assert evidence_state_of(honest.state, honest.verification) is EvidenceState.SUPPORTED
    trust = {r.check_id: r.trust for r in honest.check_runs}
    assert trust == {
        "protected-paths": TrustLevel.STATIC,
        "candidate-screen": TrustLevel.STATIC,
        "unit-tests": TrustLevel.IN_PROCESS_TESTS,
        "median-oracle": TrustLevel.ORACLE,
    }
    # The trust levels are in run.json, and in the report views' admission section.
    document = record.to_dict()
    runs = document["attempts"][2]["check_runs"]
    assert [r["trust"] for r in runs] == ["static", "static", "in_process_tests", "oracle"]
    report = build_evidence_report(record)
    assert isinstance(report, RunEvidenceReport)
    admission = derive_run_admission(record, report, {})
    assert admission is not None
    section = admission_section(admission)
    markdown = render_markdown(report, [section])
    assert "| Trust |" in markdown
    assert "| oracle, in\\_process\\_tests, static |" in markdown
    html = render_html(report, [section])
    assert 'data-label="Trust"' in html
    assert ">oracle,</span>" in html


def test_a_python_call_written_as_data_and_huge_output(scratch: Path) -> None:
    """A call oracle (module, function, JSON args) judges the return value; a flood of
    output larger than the oracle reads is unreadable, never a pass."""
    demo = scratch / "demo"
    (demo / "oracle" / "even.json").write_text("2.5")
    (demo / "oracle" / "flood.txt").write_text("x")
    checks = [
        {
            "id": "call",
            "oracle": {
                "call": {"module": "stats", "function": "median", "args": [[4, 1, 3, 2]]},
                "expected": "oracle/even.json",
            },
        },
        {
            "id": "flood",
            "oracle": {
                "command": ["python3", "-c", f"print('x' * {MAX_ORACLE_BYTES + 10})"],
                "expected": "oracle/flood.txt",
                "compare": "bytes",
            },
        },
    ]
    fix = (DEMO / "workers" / "correct_fix.sh").read_text().split("set -eu\n", 1)[1]
    path = _config(scratch, {"honest": fix, "wrong": ALWAYS_EQUAL}, checks=checks)
    unit = json.loads((demo / "work-unit.json").read_text())
    (demo / "work-unit.json").write_text(json.dumps({**unit, "required_validators": []}))
    config = json.loads(path.read_text())
    config["verifier"].pop("require_trust")
    path.write_text(json.dumps(config))
    record = run_detailed(load_config(path)).record
    reasons = {a.attempt_id: {r.check_id: r.reason for r in a.check_runs} for a in record.attempts}
    assert reasons["honest"]["call"] is None
    assert reasons["wrong"]["call"] is CheckReason.ORACLE_MISMATCH
    assert reasons["honest"]["flood"] is CheckReason.ORACLE_OUTPUT_UNREADABLE


@pytest.mark.parametrize(
    ("oracle", "message"),
    [
        ({"command": ["python3"], "expected": "oracle/none.json"}, "expected"),
        ({"command": ["python3"], "expected": "oracle/bad.json"}, "not one strict JSON"),
        ({"expected": "oracle/median.json"}, "exactly one of command or call"),
        ({"command": ["python3"], "expected": "../x.json"}, "relative path"),
        ({"command": ["python3"], "expected": "oracle/median.json", "compare": "xml"}, "compare"),
        ({"call": {"module": "os;", "function": "f"}, "expected": "oracle/median.json"}, "names"),
        ({"call": {"module": "m", "function": "f", "args": {}}, "expected": "x.json"}, "args"),
        ({"call": [], "expected": "oracle/median.json"}, "expected an object"),
        ({"command": [], "expected": "oracle/median.json"}, "non-empty array"),
    ],
)  # fmt: skip
def test_config_errors_name_the_key(scratch: Path, oracle: object, message: str) -> None:
    """A missing expected file, an expected file that is not JSON, both or neither of
    command and call, an escaping path and malformed calls are exit-2 config errors."""
    (scratch / "demo" / "oracle" / "bad.json").write_text("{'no': json}")
    (scratch / "demo" / "x.json").write_text("1")
    unit = json.loads((scratch / "demo" / "work-unit.json").read_text())
    (scratch / "demo" / "work-unit.json").write_text(
        json.dumps({**unit, "required_validators": []})
    )
    checks = [{"id": "o", "oracle": oracle}]
    path = _config(scratch, {"noop": "true\n"}, checks=checks)
    config = json.loads(path.read_text())
    config["verifier"].pop("require_trust")
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_require_trust_needs_a_required_check_of_that_level(scratch: Path) -> None:
    """``require_trust: oracle`` without a required oracle check is refused at load."""
    demo_checks = json.loads((scratch / "demo" / "config.json").read_text())["verifier"]["checks"]
    optional = [{**c, "required": False} if "oracle" in c else c for c in demo_checks]
    for value, message in (
        ("oracle", "no required check has trust oracle"),
        (["nonsense"], "expected one of"),
        (3, "expected an array or one of"),
    ):
        path = _config(scratch, {"noop": "true\n"}, checks=optional, require_trust=value)
        with pytest.raises(ConfigError, match=message):
            load_config(path)
    path = _config(scratch, {"noop": "true\n"}, require_trust=["oracle", "in_process_tests"])
    load_config(path)


@pytest.mark.parametrize(
    ("expected", "program"),
    [
        ("workers/answers.json", None),  # beside a worker's program: the worker reads it
        ("repo/answers.json", None),  # in the baseline: the candidate's code reads it
        ("oracle/median.json", "oracle/probe.sh"),  # beside the oracle's own program
    ],
)
def test_an_expected_file_a_sandbox_would_show_is_refused(
    scratch: Path, expected: str, program: str | None
) -> None:
    """The answer is held outside every sandbox: a config that puts it where a namespace
    sandbox of the run shows it (a program's folder, the baseline) is exit 2."""
    demo = scratch / "demo"
    if not (demo / expected).exists():
        shutil.copy(demo / "oracle" / "median.json", demo / expected)
    command = ["python3", "-c", "print(1)"]
    if program is not None:
        (demo / program).write_text("#!/bin/sh\ncat median.json\n")
        (demo / program).chmod(0o755)
        command = [program]
    checks = [{"id": "o", "oracle": {"command": command, "expected": expected}}]
    fix = (DEMO / "workers" / "correct_fix.sh").read_text().split("set -eu\n", 1)[1]
    path = _config(scratch, {"honest": fix}, checks=checks)
    config = json.loads(path.read_text())
    config["verifier"].pop("require_trust")
    path.write_text(json.dumps(config))
    unit = json.loads((demo / "work-unit.json").read_text())
    (demo / "work-unit.json").write_text(json.dumps({**unit, "required_validators": []}))
    with pytest.raises(ConfigError, match="which a sandbox of this run shows"):
        load_config(path)
