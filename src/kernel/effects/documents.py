"""Reading kernel documents from files, and planning where outputs go.

Every reader is strict: a missing or unreadable file is an `EffectError`, a document
that is not JSON or not a valid record is a `ConfigError` naming the file and field.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kernel.decide.decision import HumanDecisionRecord, upgrade_decision_document
from kernel.effects.files import OutputRoot, load_json
from kernel.errors import ConfigError, EffectError, KernelError, RecordError
from kernel.importers.idkmesh import is_idkmesh_document, run_record_from_idkmesh
from kernel.run.record import RunRecord
from kernel.run.report import ReportRefusal, RunEvidenceReport, build_evidence_report

__all__ = [
    "load_report",
    "load_run_record",
    "parse_run_record",
    "plan_outputs",
    "report_of",
    "stale_decisions",
    "with_defaults",
]


def load_run_record(path: Path | str) -> RunRecord:
    """Read a kernel run record, or an IDKMesh v0.1 run record (converted).

    Raises:
        EffectError: missing or unreadable file.
        ConfigError: not JSON, or not a valid run record (message names file and field).
    """
    return parse_run_record(load_json(path, what="run record"), path)


def parse_run_record(document: object, path: Path | str) -> RunRecord:
    """A decoded kernel or IDKMesh v0.1 run record (any other IDKMesh document is
    refused naming its kind and version).

    Raises:
        ConfigError: not a valid run record (message names file and field).
    """
    document = with_defaults(document)
    try:
        if is_idkmesh_document(document):
            return run_record_from_idkmesh(document)
        return RunRecord.from_dict(document)
    except RecordError as e:
        raise ConfigError(f"{path}: {e}") from e


def with_defaults(document: object) -> object:
    """A kernel run record written before ``provenance`` (or the isolation evidence:
    ``isolation_policy``, ``calibration``, each attempt's ``worker_sandbox`` and
    ``check_runs``) existed
    reads them as their defaults (``null``, ``[]``); any other document is returned as is."""
    if not isinstance(document, dict) or document.get("kind") != "kernel-run-record":
        return document
    filled = {"provenance": None, "isolation_policy": None, "calibration": None, **document}
    attempts = filled.get("attempts")
    if isinstance(attempts, list):
        filled["attempts"] = [
            {"worker_sandbox": None, "check_runs": [], **a} if isinstance(a, dict) else a
            for a in attempts
        ]
    return filled


def load_report(path: Path | str) -> RunEvidenceReport:
    """Read a run evidence report (strict).

    Raises:
        EffectError: missing or unreadable file.
        ConfigError: not JSON, or not a valid report (message names file and field).
    """
    document = load_json(path, what="evidence report")
    try:
        return RunEvidenceReport.from_dict(document)
    except RecordError as e:
        raise ConfigError(f"{path}: {e}") from e


def report_of(run: RunRecord, source: Path | str) -> RunEvidenceReport:
    """The evidence report of ``run``, read from ``source``.

    Raises:
        ConfigError: the report is refused (its codes and attempts named).
    """
    outcome = build_evidence_report(run)
    if isinstance(outcome, ReportRefusal):
        attempts = ", ".join(outcome.attempt_ids)
        codes = ", ".join(outcome.reason_codes)
        raise ConfigError(f"{source}: report refused ({codes}) at attempts {attempts}")
    return outcome


def plan_outputs(
    root: Path | str, outputs: Sequence[Path | str | None], inputs: Sequence[Path | str]
) -> list[Path | None]:
    """Confine every requested output before anything is written (None stays None).

    Raises:
        EffectError: an output escapes the root, names an input, or two outputs collide.
    """
    confined = OutputRoot(root)
    planned: list[Path | None] = []
    seen: set[Path] = set()
    for requested in outputs:
        if requested is None:
            planned.append(None)
            continue
        target = confined.resolve(requested, inputs=inputs)
        if target in seen:
            raise EffectError(f"{requested}: named twice as an output")
        seen.add(target)
        planned.append(target)
    return planned


def stale_decisions(folder: Path, report: RunEvidenceReport) -> list[str]:
    """One warning per decision record in ``folder`` (``decision.json`` or
    ``*.decision.json``) that decides on another report of the same run: a decision
    older than the report beside it is stale, never silently carried over."""
    warnings = []
    for path in sorted({*folder.glob("decision.json"), *folder.glob("*.decision.json")}):
        try:
            document = upgrade_decision_document(load_json(path, what="decision record"))
            record = HumanDecisionRecord.from_dict(document)
        except (KernelError, RecordError):
            continue  # not a kernel decision record: nothing to say about it here
        ref = record.evidence_report
        if ref.run_id == report.run_id and ref.digest != report.digest:
            warnings.append(
                f"warning: {path} is stale: it decides on report {ref.digest}, "
                f"not on this report {report.digest} (record a new decision)"
            )
    return warnings
