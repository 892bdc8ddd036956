"""A real instance from a public project's history (`fixtures/suite-parse/`, see its
README): the suite's verdicts are the instance's written truth."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from kernel.effects.adapters.patch import PatchRefusal, parse_patch
from kernel.effects.adapters.screen import candidate_policy, screen_changes
from kernel.effects.suite import run_suite

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "suite-parse"


def test_the_verdicts_are_the_written_truth(tmp_path: Path) -> None:
    """Upstream fix resolved and verified; wrong fix, no-op and test rewrite unresolved;
    empty patch apart; the misspelt instance refused at calibration, nothing judged."""
    truth = json.loads((FIXTURE / "truth.json").read_text())
    outcome = run_suite(
        FIXTURE / "instances.json",
        FIXTURE / "predictions.jsonl",
        tmp_path / "results/suite",
        results_root=tmp_path / "results",
        max_workers=2,
    )
    for result in outcome.summary.instances:
        expected = truth[result.instance_id]
        assert result.calibration.valid is expected["valid"], result.instance_id
        assert list(result.calibration.reasons) == expected.get("reasons", [])
        got = {
            p.model: [str(p.status), p.resolution and str(p.resolution)] for p in result.predictions
        }
        assert got == expected["predictions"], result.instance_id
    upstream = outcome.summary.instances[0].predictions[0]
    assert str(upstream.evidence_class) == "verified"
    assert set(truth) == {r.instance_id for r in outcome.summary.instances}


def _patch(old: str, new: str) -> bytes:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), "a/mod.py", "b/mod.py"
    )
    return ("diff --git a/mod.py b/mod.py\n" + "".join(lines)).encode()


def test_the_screen_flags_what_a_patch_brings_not_the_repositorys_own_code(
    tmp_path: Path,
) -> None:
    """A real fix to a file that already holds ``return locals()`` (as upstream parse.py
    does) brings no finding; a patch that adds one more does, counted per line."""
    old = "def spec():\n    x = 1\n    return locals()\n\n\ndef value():\n    return 41\n"
    (tmp_path / "mod.py").write_text(old)

    def screen(new: str) -> list[str]:
        parsed = parse_patch(_patch(old, new))
        assert not isinstance(parsed, PatchRefusal)
        found = screen_changes(parsed, tmp_path, candidate_policy())
        return [f"{f.rule}:{f.line}" for f in found]

    assert screen(old.replace("return 41", "return 42")) == []
    added = old.replace("    return 41", "    return locals()")
    assert [f.split(":")[1] for f in screen(added)] == ["7"]
