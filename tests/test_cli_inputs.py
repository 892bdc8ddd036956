"""Unusable CLI input on any verb: exit 2 with one line, never a block, a hang or a
traceback (issue 10 item 6; issue 22 item 5).

One table: every path argument of `run`, `report`, `decision`, `corroborate`, `bind` and
`schemas` against every hostile kind of path (a 5,000-character name, `/dev/full`, a
FIFO nobody writes to, a folder, `/dev/urandom`, a file of random bytes); every number
against non-ASCII digits and the rest of the absurd; and every verb, `self-test`
included, printing onto a full device. Each case runs in a child process with a
timeout: a FIFO that blocked would hit it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel.importers.idkmesh import run_record_from_idkmesh
from kernel.run.report import RunEvidenceReport, build_evidence_report
from kernel.views import render_json

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
KERNEL = [sys.executable, "-m", "kernel.effects.cli"]


def kernel(
    cwd: Path, *argv: str, stdout: int | None = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    """Run ``kernel argv`` in a child; a FIFO that blocked would hit the timeout."""
    return subprocess.run(
        [*KERNEL, *argv],
        cwd=cwd,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )


def _hostile(tmp_path: Path, kind: str, *, output: bool) -> str:
    """A path of the hostile ``kind``; an output one lies inside ``results/`` when the
    kind allows, so it is the kind, not the confinement, that is refused."""
    base = tmp_path / "results" if output else tmp_path
    base.mkdir(exist_ok=True)
    if kind == "long":
        return str(base / ("x" * 5000))
    if kind == "long-parts":
        return str(base / "/".join(["y" * 200] * 25) / "out.json")
    if kind == "fifo":
        path = base / "fifo.json"
        os.mkfifo(path)
        return str(path)
    if kind == "folder":
        path = base / "folder.json"
        path.mkdir()
        return str(path)
    if kind == "random":
        path = base / "random.json"
        path.write_bytes(os.urandom(4096))
        return str(path)
    return kind  # /dev/full, /dev/urandom: the devices themselves


INPUT_KINDS = ["long", "long-parts", "/dev/full", "fifo", "folder", "/dev/urandom", "random"]
OUTPUT_KINDS = ["long", "long-parts", "/dev/full", "fifo", "folder"]

_RUN_RECORD = str(FIXTURES / "idkmesh/demo.run.json")
_REPORT = str(FIXTURES / "idkmesh/demo.evidence.json")
_DECISION = str(FIXTURES / "idkmesh/demo.decision.json")
_CONFIG = str(FIXTURES / "orchestration/two-attempt-good-vs-bad.json")
_DECIDE = [
    "--decision-id", "d-1", "--decision", "escalate", "--rationale", "r", "--decider-id", "a",
]  # fmt: skip

# verb -> argv with one slot, {in} (an input path) or {out} (an output path).
SLOTS: dict[str, list[str]] = {
    "run --config": ["run", "--config", "{in}", "--output-dir", "results/run"],
    "run --output-dir": ["run", "--config", _CONFIG, "--output-dir", "{out}", "--replay", "none"],
    "report generate --config": [
        "report", "generate", "--config", "{in}", "--run-output", "results/run.json",
        "--report-json", "results/r.json", "--report-markdown", "results/r.md",
    ],
    "report render --run-record": [
        "report", "render", "--run-record", "{in}", "--report-json", "results/r.json",
        "--report-markdown", "results/r.md",
    ],
    "report render --report-json": [
        "report", "render", "--run-record", _RUN_RECORD, "--report-json", "{out}",
        "--report-markdown", "results/r.md",
    ],
    "report replay-check --run-record": [
        "report", "replay-check", "--config", _CONFIG, "--run-record", "{in}",
    ],
    "report replay-check --output": [
        "report", "replay-check", "--config", _CONFIG, "--run-record", _RUN_RECORD,
        "--output", "{out}",
    ],
    "decision record --evidence-report": [
        "decision", "record", "--evidence-report", "{in}", "--output", "results/d.json",
        *_DECIDE,
    ],
    "decision record --output": [
        "decision", "record", "--evidence-report", "{report}", "--output", "{out}", *_DECIDE,
    ],
    "decision verify --decision-record": [
        "decision", "verify", "--decision-record", "{in}", "--evidence-report", _REPORT,
    ],
    "decision verify --evidence-report": [
        "decision", "verify", "--decision-record", _DECISION, "--evidence-report", "{in}",
    ],
    "corroborate --candidate": ["corroborate", "-n", "1", "--candidate", "{in}", "--", "true"],
    "corroborate --baseline-output": [
        "corroborate", "-n", "1", "--baseline-output", "{in}", "--", "true",
    ],
    "corroborate --output": ["corroborate", "-n", "1", "--output", "{out}", "--", "true"],
    "bind --run": ["bind", "--run", "{in}", "--operator-result", "{result}"],
    "bind --operator-result": ["bind", "--run", "{run}", "--operator-result", "{in}"],
    "bind verify --binding": [
        "bind", "verify", "--run", "{run}", "--operator-result", "{result}", "--binding", "{in}",
    ],
    "bind --output": [
        "bind", "--run", "{run}", "--operator-result", "{result}", "--output", "{out}",
    ],
    "report generate --run-output": [
        "report", "generate", "--config", _CONFIG, "--run-output", "{out}",
        "--report-json", "results/r.json", "--report-markdown", "results/r.md",
    ],
    "run --results-root": [
        "run", "--config", _CONFIG, "--output-dir", "{out}/run", "--results-root", "{out}",
    ],
}  # fmt: skip

# What a slot accepts is not hostile to it: a folder is what --output-dir and
# --results-root name, and a candidate or a baseline output is any bytes.
ACCEPTED = {
    "run --output-dir": {"folder"},
    "run --results-root": {"folder"},
    "corroborate --candidate": {"random"},
    "corroborate --baseline-output": {"random"},
}
CASES = [
    pytest.param(slot, kind, id=f"{slot}:{kind}")
    for slot, argv in SLOTS.items()
    for kind in (INPUT_KINDS if "{in}" in argv else OUTPUT_KINDS)
    if kind not in ACCEPTED.get(slot, set())
]


@pytest.mark.parametrize(("slot", "kind"), CASES)
def test_hostile_path_is_exit_2_and_one_line(tmp_path: Path, slot: str, kind: str) -> None:
    """Every path argument of every verb against every hostile kind of path: exit 2,
    one line on stderr, no traceback, no hang, and no output left in ``results/``."""
    argv = SLOTS[slot]
    output = "{out}" in argv
    path = _hostile(tmp_path, kind, output=output)
    # The binding's other inputs are real (ADR-0232's reference chain), so the hostile
    # argument is the one refused.
    chain = json.loads((FIXTURES / "binding/reference-chain.json").read_text())
    documents = {"{run}": "geometric_search_run", "{result}": "candidate_operator_result"}
    for slot_name, key in documents.items():
        (tmp_path / f"{key}.json").write_text(json.dumps(chain[key]))
        argv = [a.replace(slot_name, str(tmp_path / f"{key}.json")) for a in argv]
    # A kernel evidence report to decide on (IDKMesh's cannot be decided on directly).
    report = build_evidence_report(
        run_record_from_idkmesh(json.loads(Path(_RUN_RECORD).read_text()))
    )
    assert isinstance(report, RunEvidenceReport)
    (tmp_path / "evidence.json").write_bytes(render_json(report))
    argv = [a.replace("{report}", str(tmp_path / "evidence.json")) for a in argv]
    result = kernel(tmp_path, *(a.replace("{in}", path).replace("{out}", path) for a in argv))
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kernel "), lines
    written = [p for p in (tmp_path / "results").rglob("*") if p.is_file() and not p.is_fifo()]
    assert [p for p in written if p.name != "random.json"] == []


@pytest.mark.parametrize(
    "argv",
    [
        ["corroborate", "-n", "\u0663", "--", "true"],  # ARABIC-INDIC DIGIT THREE
        ["corroborate", "-n", "\uff13", "--", "true"],  # FULLWIDTH DIGIT THREE
        ["corroborate", "-n", "1_0", "--", "true"],
        ["corroborate", "-n", "1", "--timeout", "\u0661.\u0665", "--", "true"],
        ["corroborate", "-n", "1", "--timeout", "nan", "--", "true"],
        ["corroborate", "-n", "1", "--timeout", "inf", "--", "true"],
        ["corroborate", "-n", "1", "--timeout", "1e308", "--", "true"],
        ["corroborate", "-n", "1", "--timeout", "-1", "--", "true"],
        ["corroborate", "-n", "1e9", "--", "true"],
        ["corroborate", "-n", "99999999999999999999", "--", "true"],
        ["corroborate", "-n", "1", "--limit", "memory=\u0663", "--", "true"],
        ["run", "--config", "c.json", "--reruns", "\u0663"],
        ["run", "--config", "c.json", "--reruns", "nan"],
        ["run", "--config", "c.json", "--reruns", "99999999999999999999"],
        ["run", "--config", "c.json", "--reruns", "-3"],
        ["run", "--config", _CONFIG, "--limit", "memory=\u0663"],
    ],
)
def test_absurd_numbers_are_exit_2_and_one_line(tmp_path: Path, argv: list[str]) -> None:
    """Non-ASCII digits, underscores, NaN, infinities, absurd and negative numbers are
    usage errors (exit 2), never read as a number."""
    result = kernel(tmp_path, *argv)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    # argparse prints its usage line before the one error line.
    assert result.stderr.strip().splitlines()[-1].startswith("kernel ")
    assert "error" in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["schemas", "list"],
        ["schemas", "show", "run-record"],
        ["self-test"],
        ["decision", "verify", "--decision-record", _DECISION, "--evidence-report", _REPORT],
        [
            "report",
            "render",
            "--run-record",
            _RUN_RECORD,
            "--report-json",
            "results/r.json",
            "--report-markdown",
            "results/r.md",
        ],
    ],
    ids=["schemas-list", "schemas-show", "self-test", "decision-verify", "report-render"],
)
def test_stdout_on_a_full_device_is_one_line_not_a_traceback(
    tmp_path: Path, argv: list[str]
) -> None:
    """Printing onto /dev/full (or a closed pipe) ends with one error line and a
    non-zero exit, never Python's "Exception ignored" traceback."""
    with open("/dev/full", "w") as full:
        result = kernel(tmp_path, *argv, stdout=full.fileno())
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "Exception ignored" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "cannot write" in lines[0]
