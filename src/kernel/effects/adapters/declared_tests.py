"""Declared-tests checks: the plan, the known-answer controls, and the trusted collector.

A declared-tests check (``{"id": ..., "tests": {"fail_to_pass": [...], "pass_to_pass":
[...]}, "python": "python3"}``) runs ``python -I -B <kernel bootstrap> PLAN`` in the
candidate's sandbox (`kernel.effects.adapters.tests_bootstrap`, read-only from the
kernel installation). Everything a verdict depends on stays here, in the kernel's own
process, which never imports the candidate tree:

- `prepare` writes, into a folder the sandbox copies into the tree before the patch is
  applied, kernel-written control tests (`Control`: one must pass, one must fail, one
  must error) in a test module of a random name beside the first declared test's module,
  and the plan: every module to import (the declared tests' and the controls', in a
  random order: every test process imports all of them), and every test, declared and
  control, in a random order. The sandbox learns neither which test is a control nor
  what any test is expected to do;
- `collect` reads the bootstrap's stream (the check's stdout, captured in the
  verifier's folder) and `judge` decides. Tampering (``runner_tampered``, a failed
  check: it rejects its candidate) is any of: a stream without its closing mark or out
  of order; a test process that did not end with its own closing mark and exit status
  0, reported another test or more than one outcome; an audit finding or a namespace,
  module or test-method finding streamed by a test process; a module whose source
  differs between two test processes or a control whose source is not the one the
  kernel wrote; a control with another outcome than its known answer. Each finding is
  described (what, where; control names replaced by their role) in the volatile note
  ``check:<id>:tamper``;
- a test whose module cannot be imported is an error reported at the import stage, with
  the missing module's name (`Collected.imports`: calibration blames exactly those tests,
  an environment error); another module's failure does not stop a test. A check with
  any such test is ``expected_test_failed`` and its controls are not judged;
- otherwise the declared tests' outcomes are judged as `kernel.effects.adapters.junit`
  `judge_tests` says.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Final

import attrs

from kernel.effects.adapters.base import ConfigSource, note
from kernel.effects.adapters.junit import MAX_RESULT_BYTES, TestOutcome, judge_tests
from kernel.effects.sandbox import Capture, read_output
from kernel.errors import EffectError
from kernel.records.codec import Record
from kernel.records.identity import keyed_tag_matches, sha256_bytes
from kernel.run.record import redact_absolute_paths
from kernel.run.verification import CheckReason, CheckStatus

__all__ = [
    "CONTROL_KINDS",
    "Collected",
    "Control",
    "Plan",
    "collect",
    "RUNNERS",
    "TestsEntry",
    "declared",
    "judge",
    "module_of",
    "prepare",
    "summary",
    "verdict",
]

CONTROL_KINDS: Final = ("passed", "failure", "error")
"""The known answers of a check's controls, one control each."""
_RANDOM: Final = random.SystemRandom()
_TEST_ID: Final = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", re.ASCII)
_MAX_FINDINGS: Final = 20

# Bodies of the controls, one drawn per control: each goes through what a hack bends
# (assertion helpers and their failure reporting, builtins, __eq__, class creation).
_PASS_BODIES: Final = (
    "self.assertEqual(sorted([{a}, {b}, {c}]), {sorted_abc})",
    "self.assertEqual(min([{a}, {b}, {c}]), {min_abc})",
    "self.assertTrue(max({a}, {b}, {c}) == {max_abc})",
    "self.assertEqual(_Value({a}), _Value({a}))",
)
_FAIL_BODIES: Final = (
    "self.assertEqual(sorted([{a}, {b}, {c}]), {unsorted})",
    "self.assertEqual(min([{a}, {b}, {c}]), {max_abc})",
    "self.assertTrue(max({a}, {b}, {c}) == {min_abc})",
    "self.assertEqual(_Value({a}), _Value({b}))",
)
_ERROR_BODIES: Final = (
    "{{}}[{a}]",
    "[{a}, {b}][{c}]",
    "int({word!r})",
)
_PYTEST_PASS: Final = (
    "assert sorted([{a}, {b}, {c}]) == {sorted_abc}",
    "assert min([{a}, {b}, {c}]) == {min_abc}",
    "assert _Value({a}) == _Value({a})",
)
_PYTEST_FAIL: Final = (
    "assert sorted([{a}, {b}, {c}]) == {unsorted}",
    "assert min([{a}, {b}, {c}]) == {max_abc}",
    "assert _Value({a}) == _Value({b})",
)
_VALUE_CLASS: Final = (
    "class _Value:\n"
    "    def __init__(self, value):\n"
    "        self.value = value\n\n"
    "    def __eq__(self, other):\n"
    "        return isinstance(other, _Value) and other.value == self.value\n\n"
    "    def __repr__(self):\n"
    "        return f'_Value({self.value!r})'\n"
)


@attrs.frozen(kw_only=True)
class Control:
    """One kernel-written test and its known answer."""

    test_id: str
    """Its unittest id."""
    expected: TestOutcome
    """``passed``, ``failure`` or ``error``."""


@attrs.frozen(kw_only=True)
class Plan:
    """What one check runs; only ``file_name`` and the files reach the sandbox."""

    file_name: str
    """The plan file's name in the tree (the bootstrap reads and deletes it)."""
    tests: tuple[str, ...]
    """Every test in run order (declared and controls mixed)."""
    modules: tuple[str, ...]
    """Every module each test process imports, in order."""
    controls: tuple[Control, ...]
    """The controls (their ids are among ``tests``)."""
    control_module: str
    """The controls' module."""
    control_digest: str
    """SHA-256 of the controls' module source as the kernel wrote it."""
    control_file: str
    """The controls' file, relative to the tree."""


def module_of(baseline: Path, test_id: str) -> str:
    """The module a unittest id names in ``baseline`` (longest dotted prefix that is a
    ``.py`` file or a package there); ``module.Class.test`` shape when none is, or when
    the longest is a package that leaves more than ``Class.test`` of the id (the id names
    a module of it that does not exist: importing that one fails, naming it, where the
    package's missing attribute would read as a failing test)."""
    parts = test_id.split(".")
    shape = len(parts) - 2 if len(parts) > 2 else 1
    for cut in range(len(parts) - 1, 0, -1):
        path = baseline.joinpath(*parts[:cut])
        if path.with_suffix(".py").is_file():
            return ".".join(parts[:cut])
        if (path / "__init__.py").is_file():
            return ".".join(parts[: max(cut, shape)])
    return ".".join(parts[:shape])


def _word(length: int) -> str:
    return "".join(_RANDOM.choice(string.ascii_lowercase) for _ in range(length))


def _values() -> dict[str, object]:
    a, b, c = _RANDOM.sample(range(2, 99), 3)
    return {
        "a": a,
        "b": b,
        "c": c,
        "sorted_abc": sorted([a, b, c]),
        "unsorted": [a, b, c] if [a, b, c] != sorted([a, b, c]) else [c, b, a],
        "min_abc": min(a, b, c),
        "max_abc": max(a, b, c),
        "word": _word(6),
    }


def _control_source(names: Mapping[TestOutcome, str], class_name: str) -> str:
    values = _values()
    bodies = {
        "passed": _RANDOM.choice(_PASS_BODIES),
        "failure": _RANDOM.choice(_FAIL_BODIES),
        "error": _RANDOM.choice(_ERROR_BODIES),
    }
    methods = [
        f"    def {names[kind]}(self):\n        {bodies[kind].format(**values)}\n"
        for kind in _RANDOM.sample(CONTROL_KINDS, len(CONTROL_KINDS))
    ]
    return (
        "import unittest\n\n\n"
        + _VALUE_CLASS
        + f"\n\nclass {class_name}(unittest.TestCase):\n"
        + "\n".join(methods)
    )


def _pytest_source(names: Mapping[TestOutcome, str], fixture: str) -> str:
    """pytest controls: an assertion that holds, one that does not, and a fixture that
    raises (pytest's ``error`` is a failure outside the test's call)."""
    values = _values()
    bodies = {
        "passed": (f"def {names['passed']}():", _RANDOM.choice(_PYTEST_PASS)),
        "failure": (f"def {names['failure']}():", _RANDOM.choice(_PYTEST_FAIL)),
        "error": (f"def {names['error']}({fixture}):", "pass"),
    }
    functions = [
        f"{head}\n    {body.format(**values)}\n"
        for head, body in (bodies[k] for k in _RANDOM.sample(CONTROL_KINDS, 3))
    ]
    return (
        "import pytest\n\n\n"
        + _VALUE_CLASS
        + f"\n\n@pytest.fixture\ndef {fixture}():\n    raise LookupError({values['a']})\n\n\n"
        + "\n\n".join(functions)
    )


def _prepare_pytest(declared: Sequence[str], into: Path) -> Plan:
    """`prepare` for pytest node ids (``path.py::name...``)."""
    files = list(dict.fromkeys(t.split("::", 1)[0] for t in declared))
    folder = files[0].rpartition("/")[0]
    path = f"{folder}/test_{_word(8)}.py" if folder else f"test_{_word(8)}.py"
    names = {kind: f"test_{_word(8)}" for kind in CONTROL_KINDS}
    source = _pytest_source(names, _word(8)).encode()
    (into / path).parent.mkdir(parents=True, exist_ok=True)
    (into / path).write_bytes(source)
    controls = tuple(Control(test_id=f"{path}::{names[k]}", expected=k) for k in CONTROL_KINDS)
    tests = [*declared, *(c.test_id for c in controls)]
    _RANDOM.shuffle(tests)
    order = [*files, path]
    _RANDOM.shuffle(order)
    file_name = f".kernel-plan-{_word(12)}"
    plan = {"runner": "pytest", "modules": [], "files": order, "tests": tests}
    (into / file_name).write_bytes(json.dumps(plan).encode())
    return Plan(
        file_name=file_name,
        tests=tuple(tests),
        modules=tuple(order),
        controls=controls,
        control_module=path.removesuffix(".py").replace("/", "."),
        control_digest=sha256_bytes(source),
        control_file=path,
    )


def prepare(baseline: Path, declared: Sequence[str], into: Path, runner: str = "unittest") -> Plan:
    """Write the controls and the plan of one check into ``into`` (copied over the tree).

    Raises:
        OSError: a file cannot be written (the verifier's own folder).
    """
    if runner == "pytest":
        return _prepare_pytest(declared, into)
    modules = list(dict.fromkeys(module_of(baseline, t) for t in declared))
    package = modules[0].rpartition(".")[0]
    folder = into.joinpath(*package.split(".")) if package else into
    stem = f"test_{_word(8)}"
    control_module = f"{package}.{stem}" if package else stem
    class_name = _word(1).upper() + _word(7) + "Test"
    names = {kind: f"test_{_word(8)}" for kind in CONTROL_KINDS}
    source = _control_source(names, class_name).encode()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.py").write_bytes(source)
    controls = tuple(
        Control(test_id=f"{control_module}.{class_name}.{names[kind]}", expected=kind)
        for kind in CONTROL_KINDS
    )
    tests = [*declared, *(c.test_id for c in controls)]
    _RANDOM.shuffle(tests)
    order = [*modules, control_module]
    _RANDOM.shuffle(order)
    file_name = f".kernel-plan-{_word(12)}"
    (into / file_name).write_bytes(
        json.dumps({"runner": "unittest", "modules": order, "tests": tests}).encode()
    )
    return Plan(
        file_name=file_name,
        tests=tuple(tests),
        modules=tuple(order),
        controls=controls,
        control_module=control_module,
        control_digest=sha256_bytes(source),
        control_file=f"{control_module.replace('.', '/')}.py",
    )


@attrs.frozen(kw_only=True)
class Collected:
    """What the collector observed of one check."""

    outcomes: dict[str, TestOutcome]
    """Each test's (declared and control) reported outcome."""
    messages: dict[str, str]
    """Each test's reported message (failure or error text; untrusted, for a reader)."""
    findings: tuple[str, ...]
    """Tampering found (what and where); empty when none."""
    imports: dict[str, str | None]
    """Each test whose module could not be imported (it did not run), with the module
    whose absence caused it (``ModuleNotFoundError.name``), if that was the cause."""

    @property
    def import_failed(self) -> bool:
        """A test's module could not be imported (that test could not run)."""
        return bool(self.imports)


@attrs.frozen(kw_only=True)
class _Import:
    """A test process's report that its test's module failed to import."""

    missing: str | None


_HEADER: Final = re.compile(rb"([HSDXE])(?: (.*))?")


_KEY: Final = re.compile(rb"[0-9a-f]{64}")


@attrs.frozen(kw_only=True)
class _Framed:
    """The bootstrap's stream split per test process."""

    streams: dict[int, bytes]
    keys: dict[int, bytes]
    exits: dict[int, int]
    findings: list[str]


def _frames(data: bytes, count: int) -> _Framed:
    """Split the bootstrap's stream into each test process's bytes, key and exit status."""
    streams: dict[int, bytes] = {}
    keys: dict[int, bytes] = {}
    exits: dict[int, int] = {}
    findings: list[str] = []
    position, current, closed = 0, -1, False
    while position < len(data):
        end = data.find(b"\n", position)
        match = _HEADER.fullmatch(data[position : end if end >= 0 else len(data)])
        if end < 0 or match is None or closed:
            return _Framed(streams=streams, keys=keys, exits=exits, findings=["stream: malformed"])
        position = end + 1
        kind, rest = match.group(1), (match.group(2) or b"").split()
        if (
            kind == b"S"
            and len(rest) == 2
            and rest[0] == str(current + 1).encode()
            and _KEY.fullmatch(rest[1])
        ):
            current += 1
            streams[current] = b""
            keys[current] = bytes.fromhex(rest[1].decode())
        elif kind == b"D" and len(rest) == 2 and rest[0] == str(current).encode():
            size = int(rest[1])
            streams[current] += data[position : position + size]
            position += size
        elif kind == b"X" and len(rest) == 2 and rest[0] == str(current).encode():
            exits[current] = int(rest[1])
        elif kind == b"E":
            closed = True
        elif kind != b"H":
            return _Framed(
                streams=streams, keys=keys, exits=exits, findings=["stream: out of order"]
            )
    if not closed:
        findings.append("stream: ended without its closing mark")
    if closed and (current + 1 != count or len(exits) != count):
        findings.append("stream: not every test ran")
    return _Framed(streams=streams, keys=keys, exits=exits, findings=findings)


def _events(raw: bytes, key: bytes) -> tuple[list[dict[str, object]], str | None]:
    """A test process's events, each checked against its tag and number; the first line
    that breaks them ends the list (with why)."""
    events: list[dict[str, object]] = []
    for seq, line in enumerate(raw.splitlines()):
        tag, _, body = line.partition(b" ")
        if not keyed_tag_matches(key, seq.to_bytes(8, "big") + body, tag):
            return events, "stream: a test process's event is not the runner's (tag or order)"
        try:
            event = json.loads(body)
        except ValueError:
            return events, "stream: a test process wrote a malformed event"
        if type(event) is not dict:
            return events, "stream: a test process wrote a malformed event"
        events.append(event)
    return events, None


def _one_process(
    test_id: str, raw: bytes, key: bytes, exit_code: int | None, sources: dict[str, set[str]]
) -> tuple[TestOutcome | None, str, _Import | None, list[str]]:
    """A test process's outcome, whether its test's module failed to import (and which
    module was missing), and its findings (each source it compiled goes into
    ``sources``: path -> digests)."""
    events, broken = _events(raw, key)
    if broken is not None:
        return None, "", None, [broken]
    findings = []
    ran = [e for e in events if e.get("e") == "ran"]
    for event in events:
        if event.get("e") in ("audit", "finding"):
            details = {k: v for k, v in sorted(event.items()) if k != "e"}
            findings.append(json.dumps(details, sort_keys=True)[:400])
        elif event.get("e") == "source":
            sources.setdefault(str(event.get("path")), set()).add(str(event.get("sha256")))
    if not events or events[-1] != {"e": "end"} or exit_code != 0:
        findings.append(f"a test process ended without its closing mark (exit {exit_code})")
    if len(ran) != 1 or ran[0].get("test") != test_id:
        findings.append(f"a test process reported {len(ran)} outcomes, not its test's one")
        return None, "", None, findings
    outcome, message = ran[0].get("outcome"), ran[0].get("message")
    if outcome not in ("passed", "failure", "error", "skipped"):
        return None, "", None, [*findings, "a test process reported an unknown outcome"]
    missing = ran[0].get("missing")
    failed = (
        _Import(missing=missing[:200] if type(missing) is str and missing.strip() else None)
        if ran[0].get("stage") == "import"
        else None
    )
    return str(outcome), str(message)[:2000], failed, findings


def collect(data: bytes, plan: Plan) -> Collected:
    """What the bootstrap's stream shows about each test of ``plan``."""
    framed = _frames(data, len(plan.tests))
    findings = framed.findings
    outcomes: dict[str, TestOutcome] = {}
    messages: dict[str, str] = {}
    sources: dict[str, set[str]] = {}
    imports: dict[str, str | None] = {}
    for index, raw in framed.streams.items():
        test_id = plan.tests[index] if index < len(plan.tests) else ""
        mine: dict[str, set[str]] = {}
        outcome, message, failed, found = _one_process(
            test_id, raw, framed.keys[index], framed.exits.get(index), mine
        )
        if failed is not None:
            imports[test_id] = failed.missing
        findings += found
        for path, digests in mine.items():
            sources.setdefault(path, set()).update(digests)
        # Every test process imports the controls (the same imports everywhere): each
        # must have compiled the source the kernel wrote, and nothing else under its name.
        if (
            failed is None
            and outcome is not None
            and mine.get(plan.control_file) != {plan.control_digest}
        ):
            findings.append("the controls' source is not the one the kernel wrote")
        if outcome is not None:
            outcomes[test_id], messages[test_id] = outcome, message
    for path, digests in sorted(sources.items()):
        if len(digests) > 1:
            findings.append(f"{path}: its source changed between test processes")
    if not imports:
        for control in plan.controls:
            found_outcome = outcomes.get(control.test_id)
            if found_outcome is not None and found_outcome != control.expected:
                findings.append(
                    f"control {control.expected}: ended {found_outcome} (the check is tampered)"
                )
    # Each process reports what it saw: one line per distinct finding, paths redacted.
    anonymous = list(dict.fromkeys(redact_absolute_paths(_anonymize(f, plan)) for f in findings))
    return Collected(
        outcomes=outcomes,
        messages=messages,
        findings=tuple(anonymous[:_MAX_FINDINGS]),
        imports=imports,
    )


def _anonymize(finding: str, plan: Plan) -> str:
    """A finding with the controls' random names replaced by their role."""
    for control in plan.controls:
        finding = finding.replace(control.test_id, f"<control {control.expected}>")
    return finding.replace(plan.control_module, "<controls>")


def judge(
    declared: Sequence[str], collected: Collected
) -> tuple[CheckStatus, CheckReason | None, dict[str, TestOutcome]]:
    """The check's status, reason and each declared test's outcome."""
    tests = {t: collected.outcomes.get(t, "missing") for t in declared}
    if collected.findings:
        return CheckStatus.FAILED, CheckReason.RUNNER_TAMPERED, tests
    if collected.import_failed:
        return CheckStatus.FAILED, CheckReason.EXPECTED_TEST_FAILED, tests
    status, reason = judge_tests(declared, {t: o for t, o in tests.items() if o != "missing"}, 0)
    return status, reason, tests


_LABELS: Final = {"failure": "FAIL", "error": "ERROR", "skipped": "SKIP", "missing": "MISSING"}


def summary(declared: Sequence[str], collected: Collected) -> str:
    """For a reader of the check: each declared test that did not pass and why, then the
    counts and any tampering found (the controls are not named)."""
    lines = []
    counts: dict[str, int] = {}
    for test_id in declared:
        outcome = collected.outcomes.get(test_id, "missing")
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome != "passed":
            name = test_id.rpartition("::" if "::" in test_id else ".")[2]
            lines.append(f"{_LABELS[outcome]}: {name} ({test_id})")
            lines.append(collected.messages.get(test_id, "").rstrip("\n"))
    order = ("passed", *_LABELS)
    lines.append("ran " + ", ".join(f"{counts[o]} {o}" for o in order if o in counts))
    lines += [f"TAMPERED: {finding}" for finding in collected.findings]
    return "\n".join(lines) + "\n"


RUNNERS: Final = ("unittest", "pytest")
"""The test runners a declared-tests check can name (``"runner"``)."""
_PYTEST_ID: Final = re.compile(
    r"(?!/)(?!.*(?:^|/)\.\.(?:/|::))[^\s:]+\.py(?:::[^\s:\[\]]+(?:\[[^\n]*\])?)+"
)


@attrs.frozen(kw_only=True)
class TestsEntry(Record):
    """A check's ``tests``: the declared tests, FAIL_TO_PASS and PASS_TO_PASS."""

    __test__: ClassVar[bool] = False  # not a pytest test class
    fail_to_pass: tuple[str, ...] = ()
    """The tests the candidate must make pass."""
    pass_to_pass: tuple[str, ...] = ()
    """The tests that must keep passing."""


def declared(
    source: ConfigSource, tests: TestsEntry, runner: str | None, at: str
) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """A check's ``tests`` entry: its FAIL_TO_PASS and PASS_TO_PASS test ids and runner.

    The runner is the check's ``"runner"`` (``unittest`` or ``pytest``), else detected
    from the ids: pytest node ids (``path.py::name``) name pytest, dotted ids
    (``module.Class.test``) unittest. An id of the other runner's shape is refused.

    Raises:
        ConfigError: an id not of the runner's shape, no test, or a test named twice.
    """
    every = [*tests.fail_to_pass, *tests.pass_to_pass]
    if runner is None:
        runner = "pytest" if any("::" in n for n in every) else "unittest"
    shape = _PYTEST_ID if runner == "pytest" else _TEST_ID
    example = "path/test_x.py::test_name" if runner == "pytest" else "module.Class.test_name"
    for key, group in (("fail_to_pass", tests.fail_to_pass), ("pass_to_pass", tests.pass_to_pass)):
        if not all(shape.fullmatch(n) for n in group):
            raise source.error(
                f"{at}.tests.{key}", f"expected an array of test ids ({runner}: {example})"
            )
    # Vacuous input is refused: a check that names no test proves nothing.
    if not every:
        raise source.error(f"{at}.tests", "no tests: name at least one test that must pass")
    if len(set(every)) != len(every):
        raise source.error(f"{at}.tests", "a test is named twice")
    return tests.fail_to_pass, tests.pass_to_pass, runner


def verdict(
    check_id: str, declared_ids: Sequence[str], capture: Capture, plan: Plan
) -> tuple[CheckStatus, CheckReason | None, dict[str, TestOutcome], str, dict[str, str | None]]:
    """The collector's verdict on the bootstrap's stream (the check's stdout, captured in
    the verifier's folder): status, reason, each declared test's outcome, the summary
    for a reader, and the tests whose module failed to import (`Collected.imports`).
    The findings go to the volatile note ``check:<id>:tamper``."""
    if (capture.output_size or 0) > MAX_RESULT_BYTES or capture.output_path is None:
        return CheckStatus.INCONCLUSIVE, CheckReason.RESULT_UNREADABLE, {}, "", {}
    try:
        data = read_output(capture, max_bytes=MAX_RESULT_BYTES) if capture.output_size else b""
    except EffectError:
        return CheckStatus.INCONCLUSIVE, CheckReason.RESULT_UNREADABLE, {}, "", {}
    collected = collect(data, plan)
    note(f"check:{check_id}:tamper", list(collected.findings) or None)
    status, reason, tests = judge(declared_ids, collected)
    return status, reason, tests, summary(declared_ids, collected), collected.imports
