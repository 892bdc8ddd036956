"""Benchmark: run evidence report build + render for 10, 1,000 and 100,000 attempts.

For each size N a synthetic run record (every attempt state, binding digests) is
written to a temporary file, then measured:

- floor:    read the file + ``RunRecord.from_dict`` + canonical SHA-256 of the document
            (what any consumer of a run record must do at least);
- raw:      read the file + canonical SHA-256 only (no record parsing), for reference;
- pipeline: read + ``RunRecord.from_dict`` + ``build_evidence_report`` (which hashes the run) +
            ``render_json`` + ``render_markdown``.

Time is the best of a few repeats (without tracemalloc); peak memory is measured in a
separate pass with tracemalloc. Figures are per attempt; the ratio is pipeline / floor.

Usage: ``python bench/report.py [--sizes 10,1000,100000] [--check]`` (``--check`` exits 1
when the pipeline exceeds 3x the floor at any size).
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from kernel.effects.files import load_json, write_canonical_json
from kernel.records.identity import sha256_hex
from kernel.run.record import (
    AttemptError,
    AttemptErrorCode,
    AttemptRecord,
    AttemptState,
    CheckSummary,
    ManifestSummary,
    RunAuthority,
    RunRecord,
    VerificationSummary,
    WorkUnitRef,
)
from kernel.run.report import RunEvidenceReport, build_evidence_report
from kernel.run.verification import CheckStatus, Recommendation, VerificationStatus, WorkerStatus
from kernel.views import render_json, render_markdown

WORK_UNIT = WorkUnitRef(id="bench/work-unit", version=1, digest="a" * 64)
RECOMMENDATIONS = tuple(Recommendation)


def _attempt(i: int) -> AttemptRecord:
    order = i + 1
    kind = i % 6
    manifest = ManifestSummary(
        id=f"bench/manifest/{order}",
        digest=f"{order:064x}",
        work_unit_digest=WORK_UNIT.digest,
        worker_id=f"worker-{i % 17}",
        worker_status=WorkerStatus.SUCCEEDED,
        attempt=1,
    )
    if kind in (0, 1, 2, 3):
        verification = VerificationSummary(
            id=f"bench/verification/{order}",
            verifier_id="bench-verifier",
            status=VerificationStatus.PASSED if kind == 0 else VerificationStatus.FAILED,
            recommendation=RECOMMENDATIONS[kind],
            checks=tuple(
                CheckSummary(
                    id=name,
                    required=True,
                    status=CheckStatus.PASSED if kind == 0 or j < 2 else CheckStatus.FAILED,
                )
                for j, name in enumerate(("artifact-digest", "candidate-scope", "acceptance"))
            ),
            result_manifest_digest=manifest.digest,
            work_unit_digest=WORK_UNIT.digest,
            semantic_digest=f"{order:064x}"[::-1],
        )
        return AttemptRecord(
            attempt_id=f"attempt-{order:06d}",
            order=order,
            adapter="fixture-result",
            adapter_version="1",
            state=AttemptState.VERIFIED,
            manifest=manifest,
            verification=verification,
            error=None,
        )
    state = AttemptState.WORKER_ERROR if kind == 4 else AttemptState.VERIFICATION_ERROR
    return AttemptRecord(
        attempt_id=f"attempt-{order:06d}",
        order=order,
        adapter="fixture-failure" if kind == 4 else "fixture-result",
        adapter_version="1",
        state=state,
        manifest=None if kind == 4 else manifest,
        verification=None,
        error=AttemptError(
            code=AttemptErrorCode.WORKER_FAILED if kind == 4 else AttemptErrorCode.VERIFIER_FAILED,
            message=f"simulated failure {order}",
        ),
    )


def synthetic_run(n: int) -> RunRecord:
    """A run of ``n`` attempts cycling through every state and recommendation."""
    return RunRecord(
        run_id=f"bench/run-{n}",
        orchestrator="bench/1",
        work_unit=WORK_UNIT,
        config_digest="b" * 64,
        verifier_policy_digest="c" * 64,
        imported_from=None,
        attempts=tuple(_attempt(i) for i in range(n)),
        authority=RunAuthority.none(),
    )


def floor(path: Path) -> None:
    """Read + strict parse + canonical hash."""
    document = load_json(path)
    RunRecord.from_dict(document)
    sha256_hex(document)


def raw(path: Path) -> None:
    """Read + canonical hash only."""
    sha256_hex(load_json(path))


def pipeline(path: Path) -> None:
    """Read + parse + build (hashes the run) + render JSON and Markdown."""
    run = RunRecord.from_dict(load_json(path))
    report = build_evidence_report(run)
    assert isinstance(report, RunEvidenceReport)
    render_json(report)
    render_markdown(report)


def _seconds(step: Callable[[Path], None], path: Path, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        step(path)
        best = min(best, time.perf_counter() - start)
    return best


def _peak(step: Callable[[Path], None], path: Path) -> int:
    gc.collect()
    tracemalloc.start()
    step(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main(argv: list[str] | None = None) -> int:
    """Print the table; with --check exit 1 when pipeline > 3x floor."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,1000,100000")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"{'attempts':>9} {'file MB':>8} | {'raw us/att':>10} {'floor us/att':>12} "
        f"{'pipe us/att':>11} {'ratio':>6} | {'floor B/att':>11} {'pipe B/att':>10}"
    )
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"run-{n}.json"
            write_canonical_json(path, synthetic_run(n).to_dict())
            repeats = 7 if n <= 1000 else 3
            t_raw = _seconds(raw, path, repeats)
            t_floor = _seconds(floor, path, repeats)
            t_pipe = _seconds(pipeline, path, repeats)
            m_floor = _peak(floor, path)
            m_pipe = _peak(pipeline, path)
            ratio = t_pipe / t_floor
            worst = max(worst, ratio)
            print(
                f"{n:>9,} {path.stat().st_size / 1e6:>8.2f} | {t_raw / n * 1e6:>10.2f} "
                f"{t_floor / n * 1e6:>12.2f} {t_pipe / n * 1e6:>11.2f} {ratio:>6.2f} | "
                f"{m_floor / n:>11,.0f} {m_pipe / n:>10,.0f}"
            )
    print(f"worst pipeline/floor ratio: {worst:.2f} (limit 3.00)")
    return 1 if args.check and worst > 3.0 else 0


if __name__ == "__main__":
    sys.exit(main())
