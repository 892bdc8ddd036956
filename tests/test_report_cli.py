"""Tests for `kernel report generate|render|replay-check`: outputs, confinement, bad input."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.effects.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
SCHEMAS = ROOT / "src/kernel/schemas"


def _validate(kind: str, path: Path) -> dict[str, Any]:
    schema = json.loads((SCHEMAS / f"{kind}.schema.json").read_text())
    document: dict[str, Any] = json.loads(path.read_text())
    jsonschema.Draft202012Validator(schema).validate(document)
    return document


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch project: fixtures copied in, cwd set, results/ as the output root."""
    shutil.copytree(FIXTURES / "orchestration", tmp_path / "orchestration")
    shutil.copytree(FIXTURES / "idkmesh", tmp_path / "idkmesh")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _generate(
    config: str = "orchestration/two-attempt-good-vs-bad.json", out: str = "results/demo"
) -> int:
    return main(
        [
            "report", "generate", "--config", config,
            "--run-output", f"{out}/run.json",
            "--report-json", f"{out}/evidence.json",
            "--report-markdown", f"{out}/evidence.md",
            "--report-html", f"{out}/evidence.html",
        ]
    )  # fmt: skip


def test_generate_writes_valid_documents(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """generate writes the run record, JSON, Markdown and HTML; JSON validates."""
    assert _generate() == 0
    run = _validate("run-record", work / "results/demo/run.json")
    report = _validate("run-evidence-report", work / "results/demo/evidence.json")
    assert report["source_run_digest"] != run["config_digest"]
    assert report["summary"]["verification_disagreement"] is True
    assert (work / "results/demo/evidence.md").read_text().startswith("# Run Evidence Report")
    assert (work / "results/demo/evidence.html").read_text().startswith("<!DOCTYPE html>")
    assert "decision pending" in capsys.readouterr().out


def test_generate_every_fixture_validates(work: Path) -> None:
    """Every shipped config generates schema-valid documents."""
    for config in sorted((work / "orchestration").glob("*.json")):
        out = f"results/{config.stem}"
        assert _generate(f"orchestration/{config.name}", out) == 0, config
        _validate("run-record", work / out / "run.json")
        _validate("run-evidence-report", work / out / "evidence.json")


def test_render_reads_kernel_and_idkmesh_run_records(work: Path) -> None:
    """render accepts a saved kernel run record and an IDKMesh v0.1 run record."""
    assert _generate() == 0
    for source, out in (("results/demo/run.json", "again"), ("idkmesh/demo.run.json", "idk")):
        code = main(
            [
                "report", "render", "--run-record", source,
                "--report-json", f"results/{out}.json",
                "--report-markdown", f"results/{out}.md",
                "--report-html", f"results/{out}.html",
            ]
        )  # fmt: skip
        assert code == 0
        _validate("run-evidence-report", work / f"results/{out}.json")
    again = (work / "results/again.json").read_bytes()
    assert again == (work / "results/demo/evidence.json").read_bytes()
    idk = json.loads((work / "results/idk.json").read_text())
    assert idk["imported_from"]["kind"] == "idkmesh-two-attempt-run"


def _replay(
    record: str = "results/demo/run.json",
    config: str = "orchestration/two-attempt-good-vs-bad.json",
) -> int:
    return main(["report", "replay-check", "--config", config, "--run-record", record])


def test_replay_check_match_and_config_mismatch(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """replay-check: 0 on match; 1 when the config is not the record's config (checked first)."""
    assert _generate() == 0
    capsys.readouterr()
    assert _replay() == 0
    assert "replay match" in capsys.readouterr().out
    assert _replay(config="orchestration/two-attempt-worker-failure.json") == 1
    assert "config_digest" in capsys.readouterr().out


def test_replay_check_names_the_first_differing_path(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tampered record fails with the first differing path named."""
    assert _generate() == 0
    path = work / "results/demo/run.json"
    document = json.loads(path.read_text())
    document["attempts"][1]["verification"]["recommendation"] = "accept_candidate"
    path.write_text(json.dumps(document))
    capsys.readouterr()
    assert _replay() == 1
    assert "$.attempts[1].verification.recommendation" in capsys.readouterr().out


def _scalar_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    items = value.items() if isinstance(value, dict) else enumerate(value)
    out: list[tuple[Any, ...]] = []
    for key, item in items:
        if isinstance(item, dict | list) and item:
            out += _scalar_paths(item, (*prefix, key))
        else:
            out.append((*prefix, key))
    return out


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_property_any_single_field_tamper_fails_replay_check(
    work: Path, data: st.DataObject
) -> None:
    """Any single-field tamper of a saved run record fails replay-check (exit != 0)."""
    if not (work / "results/saved.json").exists():
        assert _generate(out="results/gen") == 0
        shutil.copy(work / "results/gen/run.json", work / "results/saved.json")
    document = json.loads((work / "results/saved.json").read_text())
    path = data.draw(st.sampled_from(_scalar_paths(document)))
    target = document
    for key in path[:-1]:
        target = target[key]
    old = target[path[-1]]
    new = data.draw(
        st.sampled_from(["x", 0, 2, True, False, None, "0" * 64, 1.5]).filter(
            lambda v: v != old or type(v) is not type(old)
        )
    )
    target[path[-1]] = new
    (work / "results/tampered.json").write_text(json.dumps(document))
    assert _replay("results/tampered.json") != 0


BAD_INPUTS = {
    "missing": None,
    "not-json": b"{ not json",
    "schema-violating": b'{"kind": "kernel-run-record"}',
    "wrong-type": b"[1, 2]",
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_run_record_is_one_line_exit_2_nothing_written(
    name: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Missing, non-JSON or schema-violating input: exit 2, one line naming the file."""
    data = BAD_INPUTS[name]
    if data is not None:
        (work / "input.json").write_bytes(data)
    code = main(
        ["report", "render", "--run-record", "input.json",
         "--report-json", "results/r.json", "--report-markdown", "results/r.md"]
    )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "input.json" in err
    assert "Traceback" not in err
    assert not (work / "results").exists() or not any((work / "results").iterdir())


def test_digest_drifted_run_record_is_refused(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run record whose verification drifted from its manifest: exit 2, nothing written."""
    assert _generate() == 0
    document = json.loads((work / "results/demo/run.json").read_text())
    document["attempts"][0]["verification"]["result_manifest_digest"] = "0" * 64
    (work / "drifted.json").write_text(json.dumps(document))
    capsys.readouterr()
    code = main(
        ["report", "render", "--run-record", "drifted.json",
         "--report-json", "results/d.json", "--report-markdown", "results/d.md"]
    )  # fmt: skip
    assert code == 2
    assert "verification_manifest_digest_drift" in capsys.readouterr().err
    assert not (work / "results/d.json").exists()


@pytest.mark.parametrize(
    "target", ["../escape.json", "/tmp/kernel-escape.json", "elsewhere/x.json"]
)
def test_outputs_are_confined_to_the_root(target: str, work: Path) -> None:
    """An output outside results/ is refused before anything is written."""
    code = _generate_to(target)
    assert code == 2
    assert not (work / "results").exists() or not any((work / "results").rglob("*.json"))
    assert not (work / target).exists()


def _generate_to(report_json: str) -> int:
    return main(
        ["report", "generate", "--config", "orchestration/two-attempt-good-vs-bad.json",
         "--run-output", "results/run.json", "--report-json", report_json,
         "--report-markdown", "results/r.md"]
    )  # fmt: skip


def test_symlink_in_the_root_is_refused(work: Path, tmp_path: Path) -> None:
    """A symlink inside results/ pointing elsewhere is refused."""
    (work / "results").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, work / "results" / "link")
    assert _generate_to("results/link/r.json") == 2
    assert not any(outside.iterdir())


def test_output_may_not_overwrite_an_input(work: Path) -> None:
    """An output naming the run record input is refused."""
    assert _generate() == 0
    before = (work / "results/demo/run.json").read_bytes()
    code = main(
        ["report", "render", "--run-record", "results/demo/run.json",
         "--report-json", "results/demo/run.json", "--report-markdown", "results/x.md"]
    )  # fmt: skip
    assert code == 2
    assert (work / "results/demo/run.json").read_bytes() == before


def test_output_may_not_land_inside_an_input_folder(work: Path) -> None:
    """An output under a folder the run reads (a candidate tree) is refused before
    anything is written, even as a new file (no path or inode to compare)."""
    folder = work / "orchestration/candidates/good/candidate-root"
    before = sorted(p.name for p in folder.rglob("*"))
    code = main(
        ["report", "generate", "--config", "orchestration/two-attempt-good-vs-bad.json",
         "--results-root", "orchestration",
         "--run-output", "orchestration/candidates/good/candidate-root/run.json",
         "--report-json", "orchestration/evidence.json",
         "--report-markdown", "orchestration/evidence.md"]
    )  # fmt: skip
    assert code == 2
    assert sorted(p.name for p in folder.rglob("*")) == before
    assert not (work / "orchestration/evidence.json").exists()


_KILLED_WRITER = """
import os, sys, time
from kernel.effects import files
real_fsync = os.fsync
def stall(fd):
    print("writing", flush=True)
    time.sleep(60)
os.fsync = stall
files.atomic_write_bytes(sys.argv[1], b"NEW" * 1_000_000)
"""


def test_a_writer_killed_mid_write_leaves_the_old_file(tmp_path: Path) -> None:
    """Killing the writer mid-write leaves the old report intact (or none at all)."""
    target = tmp_path / "results" / "evidence.json"
    target.parent.mkdir()
    target.write_bytes(b'{"old": true}\n')
    fresh = tmp_path / "results" / "fresh.json"
    for path in (target, fresh):
        with subprocess.Popen(
            [sys.executable, "-c", _KILLED_WRITER, str(path)], stdout=subprocess.PIPE, text=True
        ) as child:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "writing"
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
    time.sleep(0.05)
    assert target.read_bytes() == b'{"old": true}\n'
    assert not fresh.exists()


def test_output_below_an_existing_file_is_refused_before_any_write(work: Path) -> None:
    """Regression: an output whose parent is a file was refused only at write time, after
    the earlier outputs were already written (exit 2 with a partial set of files)."""
    (work / "results").mkdir()
    (work / "results/plain.json").write_bytes(b"{}\n")
    code = main(
        ["report", "generate", "--config", "orchestration/two-attempt-good-vs-bad.json",
         "--run-output", "results/run.json", "--report-json", "results/r.json",
         "--report-markdown", "results/plain.json/r.md"]
    )  # fmt: skip
    assert code == 2
    assert sorted(p.name for p in (work / "results").iterdir()) == ["plain.json"]


def test_overlong_output_name_is_one_line_exit_2_nothing_written(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: an output name longer than the filesystem allows escaped as a raw
    OSError traceback instead of one line and exit 2."""
    code = main(
        ["report", "generate", "--config", "orchestration/two-attempt-good-vs-bad.json",
         "--run-output", "results/run.json", "--report-json", "results/r.json",
         "--report-markdown", "results/" + "m" * 300]
    )  # fmt: skip
    assert code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (work / "results").exists() or not any((work / "results").iterdir())


def test_longest_valid_output_name_is_written(work: Path) -> None:
    """Regression: a 250-byte name (valid) was too long once wrapped into the temporary
    file's name, so its write failed after the earlier outputs were written."""
    name = "m" * 250
    code = main(
        ["report", "generate", "--config", "orchestration/two-attempt-good-vs-bad.json",
         "--run-output", "results/run.json", "--report-json", "results/r.json",
         "--report-markdown", f"results/{name}"]
    )  # fmt: skip
    assert code == 0
    assert sorted(p.name for p in (work / "results").iterdir()) == sorted(
        ["run.json", "r.json", name]
    )


@pytest.mark.parametrize(
    "document",
    [
        b'{"a": 1, "a": 2}',
        b'{"kind": "kernel-run-evidence-report", "x": {"state": "rejected", "state": "supported"}}',
    ],
)
def test_duplicate_keys_are_refused_at_load(document: bytes, tmp_path: Path) -> None:
    """Regression: duplicate object keys were read silently (the last one wins), while
    another JSON parser may keep the first: the same file would mean two different
    documents to kernel and to a reviewer's tool (I-JSON requires unique names)."""
    from kernel.effects.files import load_json
    from kernel.errors import ConfigError

    path = tmp_path / "dup.json"
    path.write_bytes(document)
    with pytest.raises(ConfigError, match="duplicate key"):
        load_json(path)


def test_canonical_and_hand_written_documents_still_load(tmp_path: Path) -> None:
    """Unique keys load alike whether the file is canonical or hand-formatted."""
    from kernel.effects.files import load_json

    path = tmp_path / "doc.json"
    for data in (b'{"a":[{"b":1},{"b":2}]}\n', b'{ "a": [ {"b": 1}, {"b": 2} ] }'):
        path.write_bytes(data)
        assert load_json(path) == {"a": [{"b": 1}, {"b": 2}]}


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.pop("attempts"),
        lambda d: d["attempts"][0].update(order="1"),
        lambda d: d.update(kind="kernel-something-else"),
        lambda d: d["attempts"][1].update(attempt_id=d["attempts"][0]["attempt_id"]),
    ],
)
def test_replay_check_of_a_malformed_saved_record_is_exit_2_one_line(
    edit: Any, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: a saved record that is not a valid run record (a field removed, a
    wrong type, another kind, duplicate attempt ids) was reported as a replay
    "mismatch" with exit 1; it is unusable input: exit 2, one line naming file and
    field, nothing re-run."""
    assert _generate() == 0
    path = work / "results/demo/run.json"
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document))
    capsys.readouterr()
    assert _replay() == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "results/demo/run.json: " in captured.err
    assert "attempts" in captured.err or "kind" in captured.err
    assert "Traceback" not in captured.err


IDKMESH = ROOT / "fixtures" / "idkmesh"


def _replay_idkmesh(run: Path | str, *extra: str) -> int:
    config = IDKMESH / "repo/examples/orchestration/two-attempt-good-vs-bad.json"
    return main(
        ["report", "replay-check", "--config", str(config), "--run-record", str(run), *extra]
    )


def test_replay_check_of_a_saved_idkmesh_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An IDKMesh user replay-checks IDKMesh's saved run with its IDKMesh config: match
    (exit 0); a tampered copy: mismatch naming the field (exit 1); a malformed copy:
    exit 2 with one line; a kernel-only mode is refused (exit 2)."""
    assert _replay_idkmesh(IDKMESH / "demo.run.json") == 0
    assert "replay match (IDKMesh provenance replay" in capsys.readouterr().out
    document = json.loads((IDKMESH / "demo.run.json").read_text())
    document["work_unit"]["version"] = 7
    (tmp_path / "tampered.json").write_text(json.dumps(document))
    assert _replay_idkmesh(tmp_path / "tampered.json") == 1
    assert "first difference at $.work_unit" in capsys.readouterr().out
    del document["attempts"]
    (tmp_path / "malformed.json").write_text(json.dumps(document))
    assert _replay_idkmesh(tmp_path / "malformed.json") == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert _replay_idkmesh(IDKMESH / "demo.run.json", "--mode", "exact") == 2
    assert "provenance" in capsys.readouterr().err


def _idkmesh_checkout(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the IDKMesh checkout; its good-vs-bad config."""
    root = tmp_path / "idkmesh-checkout"
    shutil.copytree(IDKMESH / "repo", root)
    return root, root / "examples/orchestration/two-attempt-good-vs-bad.json"


def test_an_idkmesh_replay_finds_its_checkout_or_says_what_it_cannot_use(
    work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checkout is the folder above the config that holds its work unit, or
    ``--idkmesh-root``; a config that moved out of it, a config that does not read, a
    kernel run record, ``--output``, and a work unit or policy that does not read are
    unusable input (exit 2, one line naming it); a result manifest gone from the
    checkout is a difference (exit 1)."""
    run = str(IDKMESH / "demo.run.json")
    root, config = _idkmesh_checkout(tmp_path)
    moved = tmp_path / "moved.json"
    shutil.copy(config, moved)

    def replay(config_path: Path, *extra: str, record: str = run) -> tuple[int, str]:
        capsys.readouterr()
        argv = ["report", "replay-check", "--config", str(config_path), "--run-record", record]
        code = main([*argv, *extra])
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    assert replay(moved, "--idkmesh-root", str(root))[0] == 0
    code, said = replay(moved)
    assert code == 2
    assert "no folder above it holds examples/work-units/" in said
    assert replay(config, "--output", str(tmp_path / "replay.json")) == (
        2,
        "kernel report: error: --output writes kernel replay checks; an IDKMesh replay prints\n",
    )
    assert _generate() == 0
    code, said = replay(config, record=str(work / "results/demo/run.json"))
    assert (code, said.count("\n")) == (2, 1)
    assert "an IDKMesh config replays an IDKMesh run record" in said
    document = json.loads(config.read_text())
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({**document, "attempts": "none"}))
    code, said = replay(broken, "--idkmesh-root", str(root))
    assert (code, said.count("\n")) == (2, 1)
    assert f"{broken}: " in said
    policy = root / document["verifier_policy"]
    policy.write_text(json.dumps({"not": "a policy"}))
    code, said = replay(config)
    assert (code, said.count("\n")) == (2, 1)
    assert f"{policy}: " in said
    shutil.copy(IDKMESH / "repo" / document["verifier_policy"], policy)
    (root / document["attempts"][1]["result_manifest"]).unlink()
    code, said = replay(config)
    assert code == 1
    assert "replay mismatch (IDKMesh provenance replay" in said
