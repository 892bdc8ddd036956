"""Tests for the ``command`` worker and verifier adapters (sandboxed real commands)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernel.effects.adapters import command, command_worker
from kernel.effects.adapters.command import PROTECTED_CHECK, tree_digest
from kernel.effects.adapters.screen import SCREEN_CHECK
from kernel.effects.orchestrate import load_config, run_detailed
from kernel.effects.pipeline import run_pipeline
from kernel.effects.sandbox import run_sandboxed
from kernel.errors import EffectError
from kernel.run.record import AttemptErrorCode
from kernel.run.report import EvidenceState, RunEvidenceReport, build_evidence_report
from kernel.run.verification import CheckStatus
from kernel.views import render_html, render_markdown
from kernel.views.admission import admission_section

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo"
MARKUP = (
    "<script>alert(1)</script> | **bold** [x](javascript:alert(1)) <img src=x onerror=alert(2)>"
)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A demo copy in the system temp dir (usually /tmp: sandboxes see it read-only)."""
    base = Path(tempfile.mkdtemp(prefix="kernel-test-"))
    try:
        shutil.copytree(DEMO, base / "demo")
        yield base
    finally:
        shutil.rmtree(base)


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _config(base: Path, attempts: list[dict[str, Any]], **verifier: Any) -> Path:
    demo = json.loads((DEMO / "config.json").read_text())
    checks = verifier.pop("checks", demo["verifier"]["checks"])
    document = {
        "kind": "kernel-orchestration-config",
        "schema_version": "1",
        "run_id": "test/run",
        "work_unit": "work-unit.json",
        "verifier": {
            "adapter": "command",
            "verifier_id": "test-verifier",
            "baseline": "repo",
            "checks": checks,
            "protected": ["test_*.py"],
            **verifier,
        },
        "attempts": [
            {"adapter": "command", "baseline": "repo", "timeout_s": 30, **a} for a in attempts
        ],
    }
    path = base / "demo" / "test-config.json"
    path.write_text(json.dumps(document))
    return path


def _report(config: Path) -> RunEvidenceReport:
    report = build_evidence_report(run_detailed(load_config(config)).record)
    assert isinstance(report, RunEvidenceReport)
    return report


def _attempt(aid: str, worker: str, script: str) -> dict[str, Any]:
    return {"attempt_id": aid, "worker_id": worker, "command": [script]}


def test_worker_timeout_is_a_worker_error(scratch: Path) -> None:
    """A worker past its time limit is worker_error / worker-timeout, peers unaffected."""
    _script(scratch / "demo/workers/slow.sh", "sleep 30\n")
    slow = {**_attempt("slow", "w-slow", "workers/slow.sh"), "timeout_s": 1}
    config = _config(scratch, [slow, _attempt("good", "w-good", "workers/correct_fix.sh")])
    report = _report(config)
    first, second = report.attempts
    assert first.evidence_state is EvidenceState.WORKER_ERROR
    assert first.error is not None
    assert first.error.code is AttemptErrorCode.WORKER_TIMEOUT
    assert second.evidence_state is EvidenceState.SUPPORTED


def test_sandbox_failure_is_a_worker_error(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox that cannot run becomes worker_error / sandbox-error, never a dropped attempt."""

    def broken(*_args: object, **_kwargs: object) -> object:
        raise EffectError("no namespaces today")

    config = _config(scratch, [_attempt("a", "w", "workers/correct_fix.sh")])
    # The attempt's own path (calibration would stop the run first: tests/test_calibration_run).
    config.write_text(json.dumps({**json.loads(config.read_text()), "calibration": False}))
    loaded = load_config(config)
    monkeypatch.setattr(command_worker, "run_sandboxed", broken)
    record = run_detailed(loaded).record
    (attempt,) = record.attempts
    assert attempt.error is not None
    assert attempt.error.code is AttemptErrorCode.SANDBOX_ERROR
    assert "no namespaces today" in attempt.error.message


def test_check_timeout_is_inconclusive(scratch: Path) -> None:
    """A check that times out is an error check: insufficient evidence, inconclusive."""
    checks = [{"id": "unit-tests", "command": ["sleep", "30"], "timeout_s": 1}]
    config = _config(scratch, [_attempt("a", "w", "workers/correct_fix.sh")], checks=checks)
    (attempt,) = _report(config).attempts
    assert attempt.evidence_state is EvidenceState.INCONCLUSIVE
    assert attempt.verification is not None
    statuses = {c.id: c.status for c in attempt.verification.checks}
    assert statuses == {
        PROTECTED_CHECK: CheckStatus.PASSED,
        SCREEN_CHECK: CheckStatus.PASSED,
        "unit-tests": CheckStatus.ERROR,
    }


def test_verifier_sees_only_the_patch(scratch: Path) -> None:
    """A worker's side files outside its patch never reach the verifier's sandbox."""
    # The worker leaves a file in its private /tmp layer that would make the check pass.
    _script(scratch / "demo/workers/leak.sh", "echo ok > /tmp/leak\n")
    checks = [{"id": "unit-tests", "command": ["test", "-e", "/tmp/leak"]}]
    config = _config(scratch, [_attempt("a", "w", "workers/leak.sh")], checks=checks)
    (attempt,) = _report(config).attempts
    assert attempt.evidence_state is EvidenceState.REJECTED


def test_hostile_worker_changes_nothing_outside_its_attempt(scratch: Path) -> None:
    """Writes outside, test tampering and markup: confined, rejected, rendered inert."""
    outside = scratch / "outside"
    outside.mkdir()
    (outside / "verifier-file.txt").write_text("original\n")
    baseline = scratch / "demo/repo"
    before = tree_digest(baseline)
    _script(
        scratch / "demo/workers/tamper.sh",
        f"""echo pwned > "$OUTSIDE/new-file" 2>/dev/null
echo pwned >> "$OUTSIDE/verifier-file.txt" 2>/dev/null
echo pwned >> "$BASELINE/stats.py" 2>/dev/null
printf 'import unittest\\n' > test_stats.py
printf '%s\\n' '{MARKUP}'
exit 0
""",
    )
    _script(
        scratch / "demo/workers/markup.sh",
        f"printf '%s\\n' '{MARKUP}'\nprintf '%s\\n' '{MARKUP}' >&2\nexit 3\n",
    )
    env = {"OUTSIDE": str(outside), "BASELINE": str(baseline)}
    attempts = [
        _attempt("good", "w-good", "workers/correct_fix.sh"),
        {**_attempt("tamper", "w-tamper", "workers/tamper.sh"), "env": env},
        _attempt(MARKUP, "w-markup", "workers/markup.sh"),
    ]
    config = _config(scratch, attempts)
    result = run_pipeline(
        config, scratch / "results/run", reruns=2, results_root=scratch / "results"
    )
    # Nothing outside the attempt changed: baseline, the other folder, the peers.
    assert tree_digest(baseline) == before
    assert sorted(p.name for p in outside.iterdir()) == ["verifier-file.txt"]
    assert (outside / "verifier-file.txt").read_text() == "original\n"
    good, tamper, markup = result.report.attempts
    assert good.evidence_state is EvidenceState.SUPPORTED
    # Rewriting the tests is caught by the verifier's protected-paths check.
    assert tamper.evidence_state is EvidenceState.REJECTED
    assert tamper.verification is not None
    assert {c.id: c.status for c in tamper.verification.checks}[PROTECTED_CHECK] == "failed"
    assert markup.evidence_state is EvidenceState.WORKER_ERROR
    assert markup.error is not None
    assert "<script>" in markup.error.message
    # Rendered inert: no markup survives in HTML, no raw HTML or table break in Markdown.
    sections = [admission_section(result.admission)]
    html = render_html(result.report, sections)
    assert "<script" not in html
    assert "<img" not in html
    assert "&lt;script&gt;" in html
    markdown = render_markdown(result.report, sections)
    assert "<script" not in markdown
    assert "<img" not in markdown
    row = next(line for line in markdown.splitlines() if "w-markup" in line or "onerror" in line)
    assert row.count(" | ") == 10  # eleven cells: the hostile "|" is escaped
    on_disk = (scratch / "results/run/evidence.html").read_text()
    assert "<script" not in on_disk


PROTECTED_CASES: dict[str, tuple[str, CheckStatus]] = {
    "adds-a-helper": ("printf 'X = 1\\n' > helper.py\n", CheckStatus.PASSED),
    "adds-an-empty-file": (": > empty.txt\n", CheckStatus.PASSED),
    "adds-binary": ("printf '\\000\\001' > data.bin\n", CheckStatus.PASSED),
    "mode-change": ("chmod +x stats.py\n", CheckStatus.PASSED),
    "deletes-readme": ("rm README.md\n", CheckStatus.PASSED),
    "deletes-tests": ("rm test_stats.py\n", CheckStatus.FAILED),
    "adds-a-test": ("mkdir sub && printf 'x\\n' > sub/test_more.py\n", CheckStatus.FAILED),
    "renames-tests": ("mv test_stats.py renamed.py\n", CheckStatus.FAILED),
    "symlinks-a-test": ("ln -s stats.py test_link.py\n", CheckStatus.FAILED),
    "chmods-tests": ("chmod +x test_stats.py\n", CheckStatus.FAILED),
    # Patch hygiene (issue 18 item 4): same check, each with its own reason code.
    "stats-links-outside": ("rm stats.py && ln -s /etc/hostname stats.py\n", CheckStatus.FAILED),
    "adds-bytecode": (
        "mkdir __pycache__ && printf '\\000' > __pycache__/s.pyc\n",
        CheckStatus.FAILED,
    ),
    "shadows-tests": ("mkdir test_stats && : > test_stats/__init__.pyc\n", CheckStatus.FAILED),
    "adds-gitattributes": ("printf '* filter=x\\n' > .gitattributes\n", CheckStatus.FAILED),
}


def test_protected_paths_read_every_kind_of_change(scratch: Path) -> None:
    """Adds, deletions, binary and mode changes pass unless they touch a protected path.

    The patches are the real ones the sandbox's pinned git diff writes for each worker.
    """
    attempts = []
    for name, (body, _expected) in sorted(PROTECTED_CASES.items()):
        _script(scratch / f"demo/workers/{name}.sh", "set -eu\n" + body)
        attempts.append(_attempt(name, f"w-{name}", f"workers/{name}.sh"))
    record = run_detailed(load_config(_config(scratch, attempts))).record
    observed = {}
    for attempt in record.attempts:
        assert attempt.verification is not None, attempt
        checks = {c.id: c.status for c in attempt.verification.checks}
        observed[attempt.attempt_id] = checks[PROTECTED_CHECK]
    assert observed == {name: expected for name, (_body, expected) in PROTECTED_CASES.items()}


def test_tree_digest_sees_content_mode_and_links(tmp_path: Path) -> None:
    """The tree digest changes with content, the executable bit and symlink targets."""
    (tmp_path / "f").write_text("x")
    first = tree_digest(tmp_path)
    (tmp_path / "f").chmod(0o755)
    second = tree_digest(tmp_path)
    (tmp_path / "l").symlink_to("f")
    third = tree_digest(tmp_path)
    assert len({first, second, third}) == 3
    assert tree_digest(tmp_path) == third


def test_the_checks_of_identical_patches_run_once_per_verifier(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two attempts whose patches are the same bytes (two predictions with the same
    ``model_patch``): the sandboxed checks run once, the second attempt's record carries
    the same check runs and results (evidence is a function of the patch digest), and
    its volatile notes name the attempt whose checks ran. Another patch runs its own."""
    calls: list[str] = []
    real = run_sandboxed

    def counted(spec: Any, **kwargs: Any) -> Any:
        calls.append(str(spec.apply_patch))
        return real(spec, **kwargs)

    monkeypatch.setattr(command, "run_sandboxed", counted)  # what verify calls
    config = _config(
        scratch,
        [
            _attempt("fix", "w-fix", "workers/correct_fix.sh"),
            _attempt("fix-again", "w-fix-again", "workers/correct_fix.sh"),
            _attempt("wrong", "w-wrong", "workers/wrong_fix.sh"),
        ],
    )
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        outcome = run_detailed(load_config(config), executor=pool)
    checks = len(json.loads(config.read_text())["verifier"]["checks"])
    # Calibration ran the declared tests on the baseline (no patch); then two patches.
    assert calls.count("None") == 1
    assert len(calls) - 1 == 2 * checks
    records = {a.attempt_id: a for a in outcome.record.attempts}
    assert records["fix-again"].check_runs == records["fix"].check_runs
    assert records["fix-again"].verification is not None
    assert records["fix"].verification is not None
    assert records["fix-again"].verification.checks == records["fix"].verification.checks
    assert records["wrong"].check_runs != records["fix"].check_runs
    notes = {a.record.attempt_id: a.notes for a in outcome.attempts}
    assert "checks_shared_from" not in notes["fix"]
    assert "checks_shared_from" not in notes["wrong"]
    shared = notes["fix-again"]["checks_shared_from"]
    assert isinstance(shared, str)
    assert shared
    report = build_evidence_report(outcome.record)
    assert isinstance(report, RunEvidenceReport)
    states = {a.attempt_id: a.evidence_state for a in report.attempts}
    assert states == {
        "fix": EvidenceState.SUPPORTED,
        "fix-again": EvidenceState.SUPPORTED,
        "wrong": EvidenceState.REJECTED,
    }


def test_a_second_run_of_the_same_loaded_config_runs_its_checks_again(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What one run shared never reaches another: the pipeline's replay runs the same
    loaded config again, and must judge afresh (fresh controls, fresh sandboxes)."""
    calls: list[str] = []
    real = run_sandboxed

    def counted(spec: Any, **kwargs: Any) -> Any:
        calls.append(str(spec.apply_patch))
        return real(spec, **kwargs)

    monkeypatch.setattr(command, "run_sandboxed", counted)
    config = _config(
        scratch,
        [
            _attempt("fix", "w-fix", "workers/correct_fix.sh"),
            _attempt("fix-again", "w-fix-again", "workers/correct_fix.sh"),
        ],
    )
    loaded = load_config(config)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        run_detailed(loaded, executor=pool)
        first = len(calls)
        second = run_detailed(loaded, executor=pool)
    assert first > 1
    assert len(calls) == 2 * first  # calibration and the patch's checks, run again
    notes = {a.record.attempt_id: a.notes for a in second.attempts}
    assert "checks_shared_from" not in notes["fix"]
    assert "checks_shared_from" in notes["fix-again"]


def test_a_failed_worker_is_named_by_how_it_ended(scratch: Path) -> None:
    """A worker that exits non-zero, or is killed by a signal (a named one or a
    real-time one), is a worker error whose message says how it ended, with its last
    stderr line; its peers are judged as usual."""
    workers = {
        "exits": "echo 'first line' >&2\necho 'it broke' >&2\nexit 3\n",
        "killed": "kill -KILL $$\n",
        "realtime": "kill -s 40 $$\n",
    }
    attempts = []
    for name, body in workers.items():
        _script(scratch / f"demo/workers/{name}.sh", body)
        attempts.append(_attempt(name, f"w-{name}", f"workers/{name}.sh"))
    attempts.append(_attempt("good", "w-good", "workers/correct_fix.sh"))
    report = _report(_config(scratch, attempts))
    messages = {}
    for attempt in report.attempts[:3]:
        assert attempt.evidence_state is EvidenceState.WORKER_ERROR
        assert attempt.error is not None
        assert attempt.error.code is AttemptErrorCode.WORKER_FAILED
        messages[attempt.attempt_id] = attempt.error.message
    assert messages["exits"] == "worker failed: exit status 3; stderr: it broke"
    assert messages["killed"] == "worker failed: killed by signal SIGKILL"
    assert messages["realtime"] == "worker failed: killed by signal 40"
    assert report.attempts[3].evidence_state is EvidenceState.SUPPORTED


def _handed_in(
    base: Path, name: str, patch: bytes, artifact: dict[str, Any] | None
) -> dict[str, Any]:
    """A fixture-result attempt: a result manifest handed in with its candidate folder
    (``fix.patch`` holding ``patch``), naming ``artifact`` (None: no patch artifact)."""
    from kernel.run.verification import WorkUnit

    unit = WorkUnit.from_dict(json.loads((base / "demo/work-unit.json").read_text()))
    root = base / "demo/handed" / name
    (root / "candidate").mkdir(parents=True)
    (root / "candidate/fix.patch").write_bytes(patch)
    manifest = {
        "id": f"handed/{name}",
        "work_unit_id": unit.id,
        "work_unit_version": unit.version,
        "work_unit_digest": unit.digest,
        "attempt": 1,
        "worker": {"id": f"w-{name}", "type": "system", "adapter": "fixture-result",
                   "adapter_version": "1"},
        "status": "succeeded",
        "artifacts": [] if artifact is None else [artifact],
        "claims": ["a fix"],
    }  # fmt: skip
    (root / "result-manifest.json").write_text(json.dumps(manifest))
    return {
        "attempt_id": name,
        "adapter": "fixture-result",
        "result_manifest": f"handed/{name}/result-manifest.json",
        "candidate_root": f"handed/{name}/candidate",
    }


def test_the_verifier_takes_only_the_patch_bytes_the_manifest_binds(scratch: Path) -> None:
    """A result manifest handed in with its candidate (not written by the kernel) is
    held to what it claims: no patch artifact, a locator leaving the candidate folder,
    a patch file that is not there, or bytes that do not match the digest the manifest
    binds are each a verifier failure naming it; none is verified."""
    patch = (scratch / "demo/workers/correct_fix.sh").read_bytes()
    digest = hashlib.sha256(patch).hexdigest()

    def artifact(locator: str, sha: str = digest) -> dict[str, Any]:
        return {"id": "patch", "locator": locator, "digest": sha, "media_type": "text/x-diff"}

    attempts = [
        _handed_in(scratch, "no-patch", patch, None),
        _handed_in(scratch, "escapes", patch, artifact("../../no-patch/candidate/fix.patch")),
        _handed_in(scratch, "missing", patch, artifact("gone.patch")),
        _handed_in(scratch, "edited", patch + b"# edited\n", artifact("fix.patch")),
    ]
    config = _config(scratch, [])
    document = json.loads(config.read_text())
    config.write_text(json.dumps({**document, "attempts": attempts, "calibration": False}))
    record = run_detailed(load_config(config)).record
    said = {}
    for attempt in record.attempts:
        assert attempt.verification is None
        assert attempt.error is not None
        assert attempt.error.code is AttemptErrorCode.VERIFIER_FAILED
        said[attempt.attempt_id] = attempt.error.message
    assert said == {
        "no-patch": "handed/no-patch: the manifest names no patch artifact",
        "escapes": "handed/escapes: patch locator escapes the candidate",
        "missing": "handed/missing/candidate: patch file is missing",
        "edited": "handed/edited/candidate: patch does not match its digest",
    }
