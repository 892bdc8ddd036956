"""`kernel run` respects cost and time: --reruns 0, --replay modes and none, no unasked
replay of nondeterministic workers, progress only on a terminal or with -v."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernel.effects.cli import main
from kernel.effects.pipeline import run_pipeline
from kernel.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo copied into a scratch folder (the cwd), with two attempts only."""
    shutil.copytree(ROOT / "fixtures" / "demo", tmp_path / "demo")
    config = tmp_path / "demo" / "config.json"
    document = json.loads(config.read_text())
    document["attempts"] = document["attempts"][:2]
    config.write_text(json.dumps(document))
    monkeypatch.chdir(tmp_path)
    return config


def _declare_nondeterministic(config: Path) -> None:
    document = json.loads(config.read_text())
    document["replay"] = "nondeterministic"
    config.write_text(json.dumps(document))


def test_reruns_0_and_replay_none_run_each_worker_once(demo: Path) -> None:
    """--reruns 0 launches no rerun and --replay none no replay: no corroboration
    report, no replay.json, and the summary says the replay was skipped."""
    result = run_pipeline(demo, "results/run", reruns=0, replay_mode="none")
    assert result.corroborations == {}
    assert result.replay is None
    assert "replay.json" not in result.files
    assert not Path("results/run/replay.json").exists()
    assert result.report.summary.attempt_count == 2


def test_nondeterministic_workers_are_not_replayed_unless_asked(demo: Path) -> None:
    """A config declaring nondeterministic (model/agent) workers is not re-run for
    replay by default; --replay nondeterministic asks for it."""
    _declare_nondeterministic(demo)
    assert run_pipeline(demo, "results/a", reruns=0).replay is None
    asked = run_pipeline(demo, "results/b", reruns=0, replay_mode="nondeterministic")
    assert asked.replay is not None
    assert asked.replay.mode == "nondeterministic"


def test_costly_workers_are_not_replayed_unless_asked(demo: Path) -> None:
    """A config declaring costly (paid) workers skips the replay by default; asking for
    its declared mode replays it as usual."""
    document = json.loads(demo.read_text())
    document["costly"] = True
    demo.write_text(json.dumps(document))
    assert run_pipeline(demo, "results/a", reruns=0).replay is None
    asked = run_pipeline(demo, "results/b", reruns=0, replay_mode="exact")
    assert asked.replay is not None
    assert asked.replay.match


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_costly_must_be_a_boolean(demo: Path, value: object) -> None:
    """``costly`` is true or false; anything else names the key, nothing written."""
    document = json.loads(demo.read_text())
    document["costly"] = value
    demo.write_text(json.dumps(document))
    with pytest.raises(ConfigError, match=r"\$\.costly"):
        run_pipeline(demo, "results/run", reruns=0)
    assert not Path("results").exists()


def test_a_weaker_replay_mode_is_refused_before_anything_runs(demo: Path) -> None:
    """--replay nondeterministic on a deterministic config: ConfigError, nothing written."""
    with pytest.raises(ConfigError, match="nondeterministic"):
        run_pipeline(demo, "results/run", reruns=0, replay_mode="nondeterministic")
    assert not Path("results").exists()


def test_negative_reruns_are_refused(demo: Path) -> None:
    """--reruns -1 is unusable input."""
    with pytest.raises(ConfigError, match=">= 0"):
        run_pipeline(demo, "results/run", reruns=-1)


def test_progress_only_with_verbose(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without a terminal, kernel run is quiet on stderr; -v shows attempts started and
    finished, check results and the replay; -q leaves only the summary."""
    argv = ["run", "--config", str(demo), "--reruns", "1", "--output-dir", "results/r"]
    assert main(argv) == 0
    assert capsys.readouterr().err == ""
    assert main([*argv, "-v"]) == 0
    err = capsys.readouterr().err
    assert "attempt attempt-1: started" in err
    assert "attempt attempt-2: rejected" in err  # the evidence state, not "verified"
    assert "check unit-tests failed" in err
    assert "rerun of candidate" in err
    assert "replay: re-running the config" in err
    assert main([*argv, "-q"]) == 0
    out = capsys.readouterr().out
    assert "run.json" not in out
    assert out.startswith("run demo/median-fix")


def test_help_states_the_cost(capsys: pytest.CaptureFixture[str]) -> None:
    """kernel run --help states what reruns and replay cost, and lists the modes."""
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "{exact,provenance,semantic,nondeterministic,none}" in out
    assert "the cost of one more run" in out
    assert "0 skips corroboration" in out
