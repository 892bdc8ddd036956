"""A suite on a real two-process Dask `LocalCluster`, one worker process killed mid-run:
the suite summary and every record are byte-identical to a local run (issue 19 item 6)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from kernel.effects.suite import run_suite

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "suite-demo"


def _suite(tmp_path: Path) -> tuple[Path, Path]:
    """The demo suite with the valid instance four times (enough to be mid-run)."""
    items = json.loads((DEMO / "instances.json").read_text())
    predictions = [
        json.loads(line) for line in (DEMO / "predictions.jsonl").read_text().splitlines()
    ]
    instances, preds = [], []
    for n in range(4):
        instance = {
            **items[0],
            "instance_id": f"median-{n}",
            "repo": str(ROOT / "fixtures/demo/repo"),
        }
        instances.append(instance)
        preds += [{**p, "instance_id": instance["instance_id"]} for p in predictions[:3]]
    instances.append({**items[1], "repo": str(ROOT / "fixtures/demo/repo")})
    preds += predictions[3:]
    (tmp_path / "instances.json").write_text(json.dumps(instances))
    (tmp_path / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    return tmp_path / "instances.json", tmp_path / "predictions.jsonl"


def _records(folder: Path) -> dict[str, bytes]:
    names = ("summary.json",)
    found = {n: (folder / n).read_bytes() for n in names}
    for path in sorted((folder / "instances").glob("*/*.json")):
        if path.name != "run.volatile.json":
            found[str(path.relative_to(folder))] = path.read_bytes()
    return found


@pytest.mark.slow
def test_a_worker_killed_mid_suite_changes_no_byte(tmp_path: Path) -> None:
    """Local pool vs a two-process LocalCluster whose busy worker is SIGKILLed after the
    first instance finished: the scheduler retries the lost task on a fresh worker, the
    retry starts from clean scratch, and every record and the summary are the same."""
    distributed = pytest.importorskip("distributed")
    instances, predictions = _suite(tmp_path)
    local = run_suite(
        instances,
        predictions,
        tmp_path / "results/local",
        results_root=tmp_path / "results",
        max_workers=1,
    )
    killed: list[int] = []
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # any free port: None still asks for 8787
            silence_logs=50,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        pids: dict[str, int] = client.run(os.getpid)

        def kill_a_busy_worker(_line: str) -> None:
            if killed:
                return
            busy = [w for w, keys in client.processing().items() if keys and w in pids]
            if busy:
                killed.append(pids[busy[0]])
                os.kill(pids[busy[0]], signal.SIGKILL)

        dask = run_suite(
            instances,
            predictions,
            tmp_path / "results/dask",
            results_root=tmp_path / "results",
            executor=client.get_executor(),
            on_progress=kill_a_busy_worker,
        )
    assert killed, "no worker was busy after the first instance: nothing was killed"
    assert dask.summary == local.summary
    assert _records(tmp_path / "results/dask") == _records(tmp_path / "results/local")
    resolved: dict[str, Any] = {m.model: m.resolved for m in dask.summary.models}
    assert resolved == {"model-a": 4, "model-b": 0, "model-c": 0}
