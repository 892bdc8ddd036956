"""A baseline: the findings a repository already had when it adopted the guard.

Rules this module enforces:

- a baseline is a JSON document ``{"kernel-guard-baseline": 1, "findings": [...]}``
  whose entries are ``{"path", "code", "rule", "message"}``: no line or column, so an
  edit above a known finding does not make it new;
- entries are a multiset: two identical findings need two entries; a finding beyond
  the baseline's count is reported;
- a baseline that cannot be read or does not have this shape is a `ConfigError`
  naming the file and the key (never an empty baseline that hides nothing by accident).
"""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

from kernel.errors import ConfigError
from kernel.guard.model import GuardReport, Violation

__all__ = ["apply_baseline", "baseline_document", "read_baseline", "write_baseline"]

_KEY = "kernel-guard-baseline"
_FIELDS = ("path", "code", "rule", "message")

Entry = tuple[str, str, str, str]


def _entry(v: Violation) -> Entry:
    return (v.path, v.code.value, v.rule, v.message)


def baseline_document(report: GuardReport) -> str:
    """The baseline JSON for every finding of ``report`` (sorted, one per line)."""
    findings = [dict(zip(_FIELDS, _entry(v), strict=True)) for v in report.violations]
    doc = {_KEY: 1, "findings": findings}
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def read_baseline(path: Path | str) -> collections.Counter[Entry]:
    """The entries of a baseline file.

    Raises:
        ConfigError: unreadable, not JSON, or not a baseline (names the key).
    """
    from kernel.effects.files import read_input  # refuses a FIFO or device unread
    from kernel.errors import EffectError

    try:
        doc = json.loads(read_input(path, what="baseline").decode("utf-8"))
    except EffectError as e:
        raise ConfigError(str(e)) from e
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ConfigError(f"{path}: cannot read baseline: {e}") from e
    if not isinstance(doc, dict) or doc.get(_KEY) != 1 or set(doc) != {_KEY, "findings"}:
        raise ConfigError(f"{path}: {_KEY}: not a kernel guard baseline (version 1)")
    findings = doc["findings"]
    if not isinstance(findings, list):
        raise ConfigError(f"{path}: findings: expected a list")
    out: collections.Counter[Entry] = collections.Counter()
    for i, item in enumerate(findings):
        if (
            not isinstance(item, dict)
            or set(item) != set(_FIELDS)
            or not all(isinstance(item[k], str) for k in _FIELDS)
        ):
            raise ConfigError(f"{path}: findings[{i}]: expected strings {list(_FIELDS)}")
        out[(item["path"], item["code"], item["rule"], item["message"])] += 1
    return out


def apply_baseline(report: GuardReport, known: collections.Counter[Entry]) -> GuardReport:
    """``report`` without the findings the baseline already lists."""
    left = collections.Counter(known)
    kept = []
    for v in report.violations:
        key = _entry(v)
        if left[key] > 0:
            left[key] -= 1
            continue
        kept.append(v)
    return GuardReport(
        violations=tuple(kept),
        files_checked=report.files_checked,
        files_cached=report.files_cached,
    )


def write_baseline(path: Path | str, report: GuardReport) -> None:
    """Write the baseline of ``report`` to ``path`` atomically.

    Raises:
        ConfigError: ``path`` is a folder, a FIFO or a device (refused before anything
            is written: ``/dev/full`` is never replaced), or the write failed.
    """
    from kernel.effects.files import atomic_write_bytes, check_input
    from kernel.errors import EffectError

    try:
        if os.path.lexists(path):
            check_input(path, what="baseline")  # the target must be a regular file
        atomic_write_bytes(path, baseline_document(report).encode("utf-8"))
    except EffectError as e:
        raise ConfigError(f"cannot write baseline: {e}") from e
