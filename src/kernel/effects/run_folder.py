"""A `kernel run` output folder read back as records: what staging, promotion and
attestation are decided on (ADR-0006).

The folder holds ``run.json``, ``evidence.json``, ``admission.json``,
``corroboration.json`` and ``patches/<digest>.patch``. Every document is parsed
strictly (ids verified on the way in); nothing read here is trusted by the gate,
which re-derives the admission from the run, the report and the corroborations.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from kernel.corroboration.consensus import CorroborationReport
from kernel.corroboration.run_admission import RunAdmission
from kernel.effects.documents import load_report, load_run_record
from kernel.effects.files import load_json, read_input
from kernel.errors import ConfigError, EffectError, RecordError
from kernel.records.codec import Record
from kernel.records.identity import sha256_bytes
from kernel.run.record import RunRecord
from kernel.run.report import RunEvidenceReport

__all__ = ["RunFolder", "load_run_folder", "parse_document", "with_run_limits"]


@attrs.frozen(kw_only=True)
class RunFolder:
    """The documents of one `kernel run` output folder."""

    path: Path
    run: RunRecord
    report: RunEvidenceReport
    admission: RunAdmission
    corroborations: dict[str, CorroborationReport]

    def patch(self, digest: str) -> bytes:
        """The candidate patch with this digest, checked against it.

        Raises:
            EffectError: missing, unreadable or not matching its digest.
        """
        path = self.path / "patches" / f"{digest}.patch"
        data = read_input(path, what="candidate patch")
        if sha256_bytes(data) != digest:
            raise EffectError(f"{path}: the patch does not hash to its name (edited?)")
        return data


def parse_document(cls: type[Record], path: Path, what: str) -> Record:
    """Read ``path`` as a record of ``cls``.

    Raises:
        EffectError: missing or unreadable.
        ConfigError: not JSON or not a valid record (the message names file and field).
    """
    try:
        return cls.from_dict(load_json(path, what=what))
    except RecordError as e:
        raise ConfigError(f"{path}: {e}") from e


def load_run_folder(folder: Path | str) -> RunFolder:
    """Read and strictly parse a run folder (ids verified on the way in).

    Raises:
        EffectError, ConfigError: a file is missing, unreadable or invalid.
    """
    path = Path(folder)
    try:
        found = path.is_dir()
    except OSError as e:
        raise EffectError(f"{str(path)[:200]}: unusable path ({e.strerror})") from e
    if not found:
        raise EffectError(f"{str(path)[:200]}: run folder not found")
    admission = parse_document(RunAdmission, path / "admission.json", "admission")
    sets = load_json(path / "corroboration.json", what="corroboration set")
    if type(sets) is not dict or type(sets.get("reports")) is not dict:
        raise ConfigError(f"{path / 'corroboration.json'}: not a corroboration set")
    corroborations: dict[str, CorroborationReport] = {}
    for key, value in sets["reports"].items():
        try:
            corroborations[key] = CorroborationReport.from_dict(with_run_limits(value))
        except RecordError as e:
            raise ConfigError(f"{path / 'corroboration.json'}: reports.{key}: {e}") from e
    return RunFolder(
        path=path,
        run=load_run_record(path / "run.json"),
        report=load_report(path / "evidence.json"),
        admission=admission,  # type: ignore[arg-type]
        corroborations=corroborations,
    )


def with_run_limits(report: object) -> object:
    """A corroboration report written before each run recorded its ``limits`` reads
    them as ``null`` (not recorded); they never entered its ids."""
    if not isinstance(report, dict) or not isinstance(report.get("runs"), list):
        return report
    runs = [{"limits": None, **r} if isinstance(r, dict) else r for r in report["runs"]]
    return {**report, "runs": runs}
