"""`--executor`: the same run on a local pool and on a Dask LocalCluster of two worker
processes gives the same run record, report and evidence classes."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from kernel.effects.executors import open_executor
from kernel.effects.pipeline import run_pipeline
from kernel.errors import ConfigError
from kernel.records.identity import canonical_json

ROOT = Path(__file__).resolve().parents[1]


def test_local_is_the_default_pool() -> None:
    """local (and no spec) means the local pools: no executor object is made."""
    for spec in (None, "local"):
        with open_executor(spec) as executor:
            assert executor is None


@pytest.mark.parametrize(
    "spec", ["dask://", "dask://host", "http://x:1", "dask-local:0", "dask-local:x", "thread"]
)
def test_unknown_executor_specs_are_usage_errors(spec: str) -> None:
    """A spec that is not local, dask://HOST:PORT or dask-local:N is refused."""
    with pytest.raises(ConfigError, match="--executor"), open_executor(spec):
        pass


def test_dask_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking for Dask without distributed installed names the extra to install."""
    monkeypatch.setitem(sys.modules, "distributed", None)
    with (
        pytest.raises(ConfigError, match=r"evidence-kernel\[dask\]"),
        open_executor("dask-local:2"),
    ):
        pass


@pytest.mark.slow
def test_run_record_is_identical_on_a_two_process_local_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo (three attempts, one rerun, exact replay) on a local pool and on a
    two-process Dask LocalCluster: same run record bytes, same report, same classes,
    and the replay on the cluster matches."""
    shutil.copytree(ROOT / "fixtures" / "demo", tmp_path / "demo")
    config = tmp_path / "demo" / "config.json"
    document = json.loads(config.read_text())
    document["attempts"] = document["attempts"][:3]
    config.write_text(json.dumps(document))
    monkeypatch.chdir(tmp_path)
    local = run_pipeline(config, "results/local", reruns=1)
    with open_executor("dask-local:2") as executor:
        assert executor is not None
        dask = run_pipeline(config, "results/dask", reruns=1, executor=executor)
    assert canonical_json(dask.outcome.record.to_dict()) == canonical_json(
        local.outcome.record.to_dict()
    )
    assert dask.report == local.report
    assert [g.evidence_class for g in dask.admission.groups] == [
        g.evidence_class for g in local.admission.groups
    ]
    assert dask.replay is not None
    assert dask.replay.match
    assert (tmp_path / "results/dask/run.json").read_bytes() == (
        tmp_path / "results/local/run.json"
    ).read_bytes()
