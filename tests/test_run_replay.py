"""Tests for `kernel.run.replay` (modes exact/provenance/semantic/nondeterministic) and the CLI."""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings

from kernel.effects.cli import main
from kernel.effects.orchestrate import load_config, run_loaded
from kernel.errors import ParameterValueError, RefusedError
from kernel.records.codec import compute_id
from kernel.records.values import unwrap
from kernel.run.record import DeclaredReplay, ProvenanceInput, RunProvenance, RunRecord
from kernel.run.replay import (
    ReplayCheck,
    ReplayMode,
    ReplayReason,
    ReplayRefusal,
    check_replay,
    default_mode,
)
from kernel.strategies.report import run_records

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
D = "d" * 64


def _fixture_run() -> RunRecord:
    return run_loaded(load_config(FIXTURES / "orchestration/two-attempt-good-vs-bad.json"))


def _with_provenance(run: RunRecord, digest: str = D) -> RunRecord:
    provenance = RunProvenance(
        declared_replay=DeclaredReplay.DETERMINISTIC,
        inputs=(ProvenanceInput(name="baseline:repo", digest=digest),),
    )
    return attrs.evolve(run, provenance=provenance)


def _check(
    saved: Any, replayed: RunRecord, mode: ReplayMode, declared: DeclaredReplay | None = None
) -> ReplayCheck:
    outcome = check_replay(
        saved,
        replayed,
        mode=mode,
        declared=declared or DeclaredReplay.DETERMINISTIC,
        config_digest=replayed.config_digest,
    )
    return _document(outcome)


def _document(outcome: ReplayCheck | ReplayRefusal) -> ReplayCheck:
    """The replay-check document: the match itself, or the check a refusal holds."""
    if isinstance(outcome, ReplayRefusal):
        assert outcome.reason_codes == outcome.check.reason_codes
        assert outcome.refusal_id == compute_id(outcome)
        assert outcome.check.mode in outcome.explanation
        return outcome.check
    assert outcome.match
    return outcome


def test_identical_records_match_in_every_mode() -> None:
    """The same record matches in exact, provenance and semantic mode, each named."""
    run = _with_provenance(_fixture_run())
    for mode in (ReplayMode.EXACT, ReplayMode.PROVENANCE, ReplayMode.SEMANTIC):
        check = _check(run.to_dict(), run, mode)
        assert check.match
        assert check.mode is mode
        assert check.outputs_compared
        assert check.saved_digest == run.digest


def test_candidate_bytes_differ_only_exact_fails() -> None:
    """Different manifest digests: exact fails, semantic and provenance match."""
    run = _fixture_run()
    saved = run.to_dict()
    saved["attempts"][0]["manifest"]["digest"] = D
    saved["attempts"][0]["verification"]["semantic_digest"] = D
    exact = _check(saved, run, ReplayMode.EXACT)
    assert not exact.match
    assert exact.reason_codes == (ReplayReason.RECORD_MISMATCH,)
    assert exact.first_difference == "$.attempts[0].manifest.digest"
    assert _check(saved, run, ReplayMode.SEMANTIC).match
    assert _check(saved, run, ReplayMode.PROVENANCE).match


def test_semantics_differ_semantic_fails_provenance_matches() -> None:
    """A different recommendation fails semantic mode; provenance mode does not look."""
    run = _fixture_run()
    saved = run.to_dict()
    saved["attempts"][1]["verification"]["recommendation"] = "accept_candidate"
    semantic = _check(saved, run, ReplayMode.SEMANTIC)
    assert not semantic.match
    assert semantic.first_difference == "$.attempts[1].verification.recommendation"
    assert _check(saved, run, ReplayMode.PROVENANCE).match


def test_provenance_differs_every_mode_fails() -> None:
    """A different baseline digest fails provenance, semantic and exact alike."""
    run = _with_provenance(_fixture_run())
    saved = _with_provenance(_fixture_run(), digest="e" * 64).to_dict()
    for mode in (ReplayMode.EXACT, ReplayMode.PROVENANCE, ReplayMode.SEMANTIC):
        check = _check(saved, run, mode)
        assert not check.match
        assert check.first_difference == "$.provenance.inputs[0].digest"


def test_nondeterministic_needs_the_declaration() -> None:
    """nondeterministic on an undeclared run is refused by reason, never a silent match."""
    run = _fixture_run()
    check = _check(run.to_dict(), run, ReplayMode.NONDETERMINISTIC)
    assert not check.match
    assert ReplayReason.MODE_NOT_DECLARED in check.reason_codes


def test_nondeterministic_records_outputs_without_comparing() -> None:
    """Declared nondeterministic: outputs may differ, provenance must not."""
    run = _fixture_run()
    saved = run.to_dict()
    saved["attempts"][0]["verification"]["recommendation"] = "escalate"
    declared = DeclaredReplay.NONDETERMINISTIC
    check = _check(saved, run, ReplayMode.NONDETERMINISTIC, declared)
    assert check.match
    assert not check.outputs_compared
    assert check.saved_digest != check.replayed_digest  # both recorded
    saved["run_id"] = "another"
    assert not _check(saved, run, ReplayMode.NONDETERMINISTIC, declared).match
    assert default_mode(declared) is ReplayMode.NONDETERMINISTIC
    assert default_mode(DeclaredReplay.DETERMINISTIC) is ReplayMode.EXACT


def test_config_digest_checked_first_and_not_rerun() -> None:
    """A record of another config fails R1; without a re-run nothing else is compared."""
    run = _fixture_run()
    saved = run.to_dict()
    saved["config_digest"] = D
    outcome = check_replay(
        saved,
        None,
        mode=ReplayMode.EXACT,
        declared=DeclaredReplay.DETERMINISTIC,
        config_digest=run.config_digest,
    )
    assert isinstance(outcome, ReplayRefusal)
    with pytest.raises(RefusedError, match="config_digest_mismatch"):
        unwrap(outcome)
    check = _document(outcome)
    assert check.reason_codes == (ReplayReason.CONFIG_DIGEST,)
    assert check.replayed_digest is None


def test_non_canonical_saved_record() -> None:
    """A saved document with a float is not canonical: a mismatch with its own reason."""
    run = _fixture_run()
    saved = run.to_dict()
    saved["attempts"][0]["order"] = 1.5
    check = _check(saved, run, ReplayMode.EXACT)
    assert check.reason_codes == (ReplayReason.NOT_CANONICAL,)


@settings(max_examples=40, deadline=None)
@given(run_records(max_attempts=4))
def test_property_modes_are_ordered(run: RunRecord) -> None:
    """exact match implies semantic match implies provenance match (never the reverse)."""
    other = copy.deepcopy(run.to_dict())
    other["attempts"][0]["adapter_version"] = "changed"
    for saved in (run.to_dict(), other):
        exact, semantic, provenance = (
            _check(saved, run, m).match
            for m in (ReplayMode.EXACT, ReplayMode.SEMANTIC, ReplayMode.PROVENANCE)
        )
        assert not exact or semantic
        assert not semantic or provenance
    assert ReplayCheck.from_dict(_check(other, run, ReplayMode.SEMANTIC).to_dict())


@pytest.fixture
def demo_work(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The demo copied to /var/tmp (outside the system temp dir), cwd set there."""
    base = Path(tempfile.mkdtemp(prefix="kernel-test-", dir="/var/tmp"))
    try:
        shutil.copytree(FIXTURES / "demo", base / "demo")
        monkeypatch.chdir(base)
        yield base
    finally:
        shutil.rmtree(base)


def test_cli_modes_on_a_real_run(demo_work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """replay-check --mode on a command run: each mode printed and written; undeclared
    nondeterministic refused with exit 2 and nothing written."""
    run = run_loaded(load_config("demo/config.json"))
    saved = demo_work / "results/run.json"
    saved.parent.mkdir()
    saved.write_text(json.dumps(run.to_dict()))
    base = ["report", "replay-check", "--config", "demo/config.json", "--run-record", str(saved)]
    for mode in ("exact", "provenance", "semantic"):
        out = f"results/replay-{mode}.json"
        assert main([*base, "--mode", mode, "--output", out]) == 0
        assert f"replay match (mode {mode})" in capsys.readouterr().out
        assert json.loads((demo_work / out).read_text())["mode"] == mode
    assert main([*base, "--mode", "nondeterministic", "--output", "results/nd.json"]) == 2
    assert "declare" in capsys.readouterr().err
    assert not (demo_work / "results/nd.json").exists()
    # A changed worker script changes provenance: every mode fails from then on.
    script = demo_work / "demo/workers/noop.sh"
    script.write_text(script.read_text() + "# edited\n")
    assert main([*base, "--mode", "provenance"]) == 1
    assert "first difference at $.config_digest" not in capsys.readouterr().out


def test_cli_declared_nondeterministic(demo_work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A config declaring nondeterministic replays in that mode by default, outputs unread."""
    config = demo_work / "demo/config.json"
    document = json.loads(config.read_text())
    document["replay"] = "nondeterministic"
    document["attempts"] = document["attempts"][:1]
    config.write_text(json.dumps(document))
    run = run_loaded(load_config(config)).to_dict()
    run["attempts"][0]["manifest"]["digest"] = D  # outputs differ: never compared
    run["attempts"][0]["verification"]["result_manifest_digest"] = D
    saved = demo_work / "results/run.json"
    saved.parent.mkdir()
    saved.write_text(json.dumps(run))
    code = main(["report", "replay-check", "--config", str(config), "--run-record", str(saved)])
    assert code == 0
    assert "mode nondeterministic, outputs not compared" in capsys.readouterr().out


# -- branches: records that cannot hold together, a missing replay ----------------------


def test_a_missing_replay_with_passing_preflight_is_a_programmer_error() -> None:
    run = _fixture_run()
    with pytest.raises(ParameterValueError, match="replayed may be None only when the preflight"):
        check_replay(
            run.to_dict(),
            None,
            mode=ReplayMode.EXACT,
            declared=DeclaredReplay.DETERMINISTIC,
            config_digest=run.config_digest,
        )


def test_a_check_matches_exactly_when_it_has_no_reason() -> None:
    run = _fixture_run()
    matched = _check(run.to_dict(), run, ReplayMode.EXACT)
    with pytest.raises(ValueError, match="matches exactly when it has no reason"):
        attrs.evolve(matched, match=False)
    with pytest.raises(ValueError, match="matches exactly when it has no reason"):
        attrs.evolve(matched, reason_codes=(ReplayReason.CONFIG_DIGEST,))


def test_a_refusal_holds_its_own_failing_check() -> None:
    run = _fixture_run()
    refusal = check_replay(
        run.to_dict(),
        run,
        mode=ReplayMode.EXACT,
        declared=DeclaredReplay.DETERMINISTIC,
        config_digest=D,
    )
    assert isinstance(refusal, ReplayRefusal)
    matched = _check(run.to_dict(), run, ReplayMode.EXACT)
    with pytest.raises(ValueError, match="a replay refusal holds a mismatching check, same codes"):
        attrs.evolve(refusal, check=matched)
    other = tuple(r for r in ReplayReason if r not in refusal.reason_codes)[:1]
    with pytest.raises(ValueError, match="a replay refusal holds a mismatching check, same codes"):
        attrs.evolve(refusal, reason_codes=refusal.reason_codes + other)
