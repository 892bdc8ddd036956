"""Worker ``patch``: a prediction's patch is the candidate, judged by the verifier."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernel.effects.orchestrate import load_config, run_detailed
from kernel.errors import ConfigError
from kernel.run.record import AttemptState
from kernel.run.verification import Recommendation

ROOT = Path(__file__).resolve().parents[1]


def _config(tmp_path: Path, attempts: list[dict[str, object]]) -> Path:
    shutil.copytree(ROOT / "fixtures/demo/repo", tmp_path / "repo")
    shutil.copytree(ROOT / "fixtures/demo/oracle", tmp_path / "oracle")
    lines = (ROOT / "fixtures/suite-demo/predictions.jsonl").read_text().splitlines()
    patches = {p["model_name_or_path"]: p["model_patch"] for p in map(json.loads, lines[:2])}
    (tmp_path / "correct.patch").write_text(patches["model-a"])
    (tmp_path / "wrong.patch").write_text(patches["model-b"])
    (tmp_path / "empty.patch").write_bytes(b"")
    demo = json.loads((ROOT / "fixtures/demo/config.json").read_text())
    shutil.copy(ROOT / "fixtures/demo/work-unit.json", tmp_path / "work-unit.json")
    document = {**demo, "attempts": attempts}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    return path


def test_patches_are_judged_directly(tmp_path: Path) -> None:
    """No worker script: the correct patch is accepted, the wrong one and the empty
    one rejected, each with the patch's digest as its candidate."""
    config = _config(
        tmp_path,
        [
            {
                "attempt_id": f"m-{name}",
                "adapter": "patch",
                "worker_id": f"model-{name}",
                "patch": f"{name}.patch",
            }
            for name in ("correct", "wrong", "empty")
        ],
    )
    outcome = run_detailed(load_config(config))
    states = [
        (a.attempt_id, a.state, a.verification and a.verification.recommendation)
        for a in outcome.record.attempts
    ]
    assert states == [
        ("m-correct", AttemptState.VERIFIED, Recommendation.ACCEPT_CANDIDATE),
        ("m-wrong", AttemptState.VERIFIED, Recommendation.REJECT_CANDIDATE),
        ("m-empty", AttemptState.VERIFIED, Recommendation.REJECT_CANDIDATE),
    ]
    correct = outcome.record.attempts[0].manifest
    assert correct is not None
    assert correct.worker_id == "model-correct"
    assert outcome.record.provenance is not None
    assert "worker:m-correct" in {i.name for i in outcome.record.provenance.inputs}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"patch": "absent.patch"}, r"patch: 'absent.patch'"),
        ({"patch": "/etc/passwd"}, "relative path"),
        ({"patch": "correct.patch", "command": ["x"]}, "command: unknown field"),
        ({}, "patch: missing field"),
    ],
)
def test_a_bad_patch_entry_is_a_config_error(
    tmp_path: Path, entry: dict[str, object], message: str
) -> None:
    """A patch that cannot be read, or an entry with wrong keys, stops the load."""
    config = _config(tmp_path, [{"attempt_id": "a", "adapter": "patch", "worker_id": "w", **entry}])
    with pytest.raises(ConfigError, match=message):
        load_config(config)
