"""What both report views share: the records a caller passes (`TableSection`,
`Workspace` and its views), escaping for HTML, the warning prose, the decision headline,
real disagreement's wording, isolation and limits as text, and the JSON view.

Pure (ADR-0002); the rules are in the package docstring (`kernel.views`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from kernel.errors import FieldError
from kernel.records.codec import Record
from kernel.records.identity import canonical_json, sha256_bytes
from kernel.records.values import Digest, boundary, short_digest
from kernel.run.record import SandboxRun
from kernel.run.report import (
    CandidateDisagreement,
    EvidenceState,
    ReportWarning,
    RunEvidenceReport,
    candidate_disagreements,
)

__all__ = [
    "DIFFER_TEXT",
    "INVISIBLE",
    "LINE_BREAKS",
    "MAX_DIFF_LINES",
    "MAX_OUTPUT_LINES",
    "STATE_COLOURS",
    "WARNING_TEXT",
    "CheckOutputView",
    "PatchView",
    "TableSection",
    "View",
    "Workspace",
    "authority_rows",
    "bounded_lines",
    "check_statuses",
    "decision_headline",
    "calibration_section",
    "declared_tests_section",
    "disagreement_text",
    "html_text",
    "isolation_section",
    "policy_text",
    "render_json",
    "yes_no",
]

WARNING_TEXT: Final = {
    ReportWarning.DECISION_SUPPORT_ONLY: (
        "Generated evidence is decision support only; this report does not select, "
        "accept, merge, or integrate a candidate."
    ),
    ReportWarning.VERIFICATION_DISAGREEMENT: (
        "Recommendations differ across candidates (IDKMesh's verification_disagreement); "
        "every recommendation is preserved for human/governance review, not resolved by "
        "counting."
    ),
    ReportWarning.CONTROL_FAILURE: (
        "At least one attempt stopped on a worker, manifest or verifier failure; it is kept "
        "in the report and surviving evidence is retained."
    ),
    ReportWarning.WORKER_SUCCESS_NOT_VERIFIED: (
        "A worker reported success and its independent verifier rejected the candidate: "
        "worker success is not verified correctness."
    ),
    ReportWarning.RECOMMENDATION_CONTRADICTS_CHECKS: (
        "A verifier recommended acceptance although a required check did not pass; that "
        "attempt is shown as inconclusive."
    ),
    ReportWarning.NO_SUPPORTED_ATTEMPT: "No attempt is supported by independent evidence.",
}
"""Prose for each warning code (rendering only; never part of a document's identity)."""


STATE_COLOURS: Final = {
    EvidenceState.SUPPORTED: ("#0f5132", "#d1e7dd"),
    EvidenceState.REJECTED: ("#842029", "#f8d7da"),
    EvidenceState.INCONCLUSIVE: ("#664d03", "#fff3cd"),
    EvidenceState.WORKER_ERROR: ("#41464b", "#e2e3e5"),
    EvidenceState.RESULT_MANIFEST_ERROR: ("#41464b", "#e2e3e5"),
    EvidenceState.VERIFICATION_ERROR: ("#432874", "#e2d9f3"),
}


LINE_BREAKS: Final = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")


# Control characters (C0 but tab and line breaks, DEL, C1) and every Unicode format
# character (category Cf: bidi embeddings, overrides, isolates and marks, zero-width
# space / joiners, word joiner, invisible operators, BOM, soft hyphen, tag characters).
INVISIBLE: Final = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f"
    "\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)


@attrs.frozen(kw_only=True)
class TableSection:
    """An extra report section: a title, notes and one table, all plain text."""

    title: str
    """Section heading."""
    notes: tuple[str, ...]
    """Paragraphs shown before the table."""
    headers: tuple[str, ...]
    """Column headings."""
    rows: tuple[tuple[str, ...], ...]
    """Cells, one tuple per row, as many as ``headers``."""
    badge_column: int | None = None
    """Index of a column whose cells are shown as evidence-class badges (HTML)."""
    headline: str | None = None
    """The answer this section gives (e.g. the candidate to accept, or why none): a
    section with a headline is a decision section, shown first with its headline on top."""

    def __attrs_post_init__(self) -> None:
        if any(len(row) != len(self.headers) for row in self.rows):
            raise FieldError("rows", "every row has one cell per header", "TableSection")
        if self.badge_column is not None and not 0 <= self.badge_column < len(self.headers):
            raise FieldError("badge_column", "badge_column names no column", "TableSection")

    @property
    def anchor(self) -> str:
        """A fragment id derived from the title (letters, digits and hyphens only)."""
        slug = re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")
        return "s-" + (slug or "section")


MAX_DIFF_LINES: Final = 400
"""Diff lines shown inline; the rest is in the linked patch file."""


MAX_OUTPUT_LINES: Final = 60
"""Check output lines shown inline (the last ones)."""


_MAX_LINE_CHARS: Final = 500


@attrs.frozen(kw_only=True)
class PatchView(Record):
    """One distinct candidate patch, as the run wrote it to ``patches/<digest>.patch``."""

    digest: Digest
    """SHA-256 of the patch bytes (the file name)."""
    attempt_ids: tuple[str, ...]
    """Attempts that produced exactly these bytes."""
    text: str
    """The patch, decoded (undecodable bytes replaced); escaped when rendered."""

    @classmethod
    def of(cls, data: bytes, attempt_ids: Sequence[str]) -> PatchView:
        """The view of ``data`` (digest computed here, never trusted from the caller)."""
        return cls(
            digest=sha256_bytes(data),
            attempt_ids=tuple(attempt_ids),
            text=data.decode("utf-8", "replace"),
        )

    @property
    def href(self) -> str:
        """Relative link to the patch file."""
        return f"patches/{self.digest}.patch"


@attrs.frozen(kw_only=True)
class CheckOutputView(Record):
    """The tail of one check's output, as the run wrote it to ``checks/<digest>.txt``."""

    attempt_id: str
    """The attempt whose candidate was checked."""
    check_id: str
    """The verifier check."""
    digest: Digest
    """SHA-256 of the tail bytes (the file name)."""
    text: str
    """The tail, decoded; escaped when rendered."""

    @classmethod
    def of(cls, attempt_id: str, check_id: str, data: bytes) -> CheckOutputView:
        """The view of ``data`` (digest computed here)."""
        return cls(
            attempt_id=attempt_id,
            check_id=check_id,
            digest=sha256_bytes(data),
            text=data.decode("utf-8", "replace"),
        )

    @property
    def href(self) -> str:
        """Relative link to the output file."""
        return f"checks/{self.digest}.txt"


@attrs.frozen(kw_only=True)
class Workspace:
    """What a reviewer reads beside the report: the diffs and the check outputs."""

    patches: tuple[PatchView, ...] = ()
    """Distinct candidate patches."""
    outputs: tuple[CheckOutputView, ...] = ()
    """Check output tails."""
    worker_outputs: tuple[CheckOutputView, ...] = ()
    """Worker output tails (``check_id`` is ``worker``), a crashed worker's included."""

    def patch_of(self, attempt_id: str) -> PatchView | None:
        """The patch ``attempt_id`` produced, if any."""
        return next((p for p in self.patches if attempt_id in p.attempt_ids), None)

    def output_of(self, attempt_id: str, check_id: str) -> CheckOutputView | None:
        """The output tail of one check of one attempt, if kept."""
        return next(
            (o for o in self.outputs if o.attempt_id == attempt_id and o.check_id == check_id),
            None,
        )

    def worker_output_of(self, attempt_id: str) -> CheckOutputView | None:
        """The output tail of ``attempt_id``'s worker, if kept."""
        return next((o for o in self.worker_outputs if o.attempt_id == attempt_id), None)


@attrs.frozen(kw_only=True)
class View:
    """What one rendering reads: the report, its sections split into the decision ones
    (with a headline) and the details, the workspace, and real disagreement."""

    report: RunEvidenceReport
    lead: tuple[TableSection, ...]
    details: tuple[TableSection, ...]
    space: Workspace
    disagreements: tuple[CandidateDisagreement, ...]

    @property
    def sections(self) -> tuple[TableSection, ...]:
        return (*self.lead, *self.details)

    @classmethod
    def of(
        cls, report: RunEvidenceReport, sections: Sequence[TableSection], space: Workspace | None
    ) -> View:
        return cls(
            report=report,
            lead=tuple(s for s in sections if s.headline is not None),
            details=(
                *(s for s in sections if s.headline is None),
                *filter(None, [calibration_section(report), declared_tests_section(report)]),
            ),
            space=space or Workspace(),
            disagreements=candidate_disagreements(report),
        )


def bounded_lines(text: str, limit: int, *, tail: bool) -> tuple[list[str], int]:
    """At most ``limit`` lines (the first or the last), each cut to a sane width, and
    how many lines were left out."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    omitted = max(0, len(lines) - limit)
    kept = lines[-limit:] if tail else lines[:limit]
    return [
        line if len(line) <= _MAX_LINE_CHARS else line[:_MAX_LINE_CHARS] + "\u2026" for line in kept
    ], omitted


def check_statuses(report: RunEvidenceReport) -> dict[tuple[str, str], str]:
    return {
        (a.attempt_id, c.id): str(c.status)
        for a in report.attempts
        if a.verification is not None
        for c in a.verification.checks
    }


@boundary
def render_json(report: RunEvidenceReport) -> bytes:
    """Canonical JSON bytes of the report, plus one trailing newline.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    return canonical_json(report.to_dict()) + b"\n"


def html_text(value: str) -> str:
    """Escape text for HTML element content and quoted attribute values."""
    return html.escape(INVISIBLE.sub("\ufffd", value), quote=True)


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


_BYTES_LIMITS: Final = frozenset({"memory", "output", "writable", "tmp"})


_UNITS: Final = ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def _limit_value(kind: str, value: int | None) -> str:
    if value is None:
        return "none"
    if kind == "cpu":
        return f"{value} s"
    if kind in _BYTES_LIMITS:
        return next(
            (f"{value // size} {unit}" for size, unit in _UNITS if value % size == 0), f"{value} B"
        )
    return str(value)


def _sandbox_text(sandbox: SandboxRun) -> str:
    limits = ", ".join(
        f"{limit.kind} {_limit_value(limit.kind, limit.value)} ({limit.mechanism})"
        for limit in sandbox.limits
    )
    how = str(sandbox.isolation)
    if sandbox.command_uid is not None:  # who the command was on the host
        how += f", command uid {sandbox.command_uid}"
    return f"{how}; {limits}" if limits else f"{how}; no limits"


def _isolation_rows(report: RunEvidenceReport) -> list[tuple[str, str]]:
    """``(isolation and limits, runs)`` rows: every sandboxed run of the report (each
    attempt's worker and checks), runs isolated and limited alike on one row."""
    grouped: dict[str, dict[str, list[str]]] = {}
    for a in report.attempts:
        runs = [("worker", a.worker_sandbox)] if a.worker_sandbox else []
        runs += [(f"check {r.check_id}", r.sandbox) for r in a.check_runs if r.sandbox]
        for who, sandbox in runs:
            grouped.setdefault(_sandbox_text(sandbox), {}).setdefault(a.attempt_id, []).append(who)
    return [
        (how, "; ".join(f"{aid}: {', '.join(who)}" for aid, who in by_attempt.items()))
        for how, by_attempt in grouped.items()
    ]


def policy_text(report: RunEvidenceReport) -> str:
    policy = report.isolation_policy
    if policy is None:
        return "not recorded"
    below = (
        "accepted as grounds for verified"
        if policy.accept_below_overlay
        else "never grounds for verified"
    )
    return f"minimum {policy.minimum}; evidence below overlay {below}"


def decision_headline(report: RunEvidenceReport, sections: Sequence[TableSection] = ()) -> str:
    """The answer first: a decision section's headline (the candidate to accept, or why
    none), else what the report alone says (the supported attempts, or that none is)."""
    lead = next((s.headline for s in sections if s.headline is not None), None)
    if lead is not None:
        return lead
    supported = [
        a.attempt_id for a in report.attempts if a.evidence_state is EvidenceState.SUPPORTED
    ]
    if supported:
        return (
            f"Supported by independent evidence: {', '.join(supported)}. A human decides;"
            " nothing here selects."
        )
    return "Nothing to accept: no attempt is supported by independent evidence."


def disagreement_text(found: CandidateDisagreement) -> str:
    parts = []
    if len(found.recommendations) > 1:
        parts.append("recommendations " + ", ".join(found.recommendations))
    if found.checks:
        parts.append("status of check(s) " + ", ".join(found.checks))
    return (
        f"candidate {short_digest(found.candidate_digest)} was judged differently by"
        f" {', '.join(found.attempt_ids)} ({'; '.join(parts)}). Every judgment is kept;"
        " nothing here counts votes."
    )


DIFFER_TEXT: Final = (
    "different candidates got different recommendations, as a wrong and a right candidate"
    " do; no candidate was judged two ways (IDKMesh's verification_disagreement)."
)


def isolation_section(view: View) -> TableSection | None:
    rows = _isolation_rows(view.report)
    if not rows:
        return None
    return TableSection(
        title="Isolation and limits",
        notes=(
            "How each sandboxed run was isolated and limited (limit, value, enforcing"
            f" mechanism). Isolation accepted by the run: {policy_text(view.report)}.",
        ),
        headers=("Isolation and limits", "Runs"),
        rows=tuple(rows),
    )


def calibration_section(report: RunEvidenceReport) -> TableSection | None:
    """The declared tests on the baseline (and the reference patch) before any attempt
    was judged, with the reason each test gives (None when the run was not calibrated)."""
    calibration = report.calibration
    if calibration is None:
        return None
    status = "valid" if calibration.valid else "invalid: " + ", ".join(calibration.reasons)
    return TableSection(
        title="Calibration",
        notes=(
            "Before any attempt was judged, the declared tests ran on the baseline:"
            " FAIL_TO_PASS must fail, PASS_TO_PASS must pass, and a reference patch, when"
            " given, must pass them all, in every check that declares tests."
            f" This instance: {status}.",
        ),
        headers=("Check", "Test", "List", "Baseline", "Reference", "Reason"),
        rows=tuple(
            (
                t.check_id or "-",
                t.test_id,
                str(t.kind),
                str(t.baseline),
                str(t.reference or "-"),
                t.blame or "-",
            )
            for t in calibration.tests
        ),
    )


def declared_tests_section(report: RunEvidenceReport) -> TableSection | None:
    """Each declared test's outcome per attempt and check, as SWE-bench's per-test report
    (None when no check declares tests)."""
    rows = tuple(
        (a.attempt_id, run.check_id, test.test_id, str(test.kind), str(test.outcome))
        for a in report.attempts
        for run in a.check_runs
        for test in run.tests
    )
    if not rows:
        return None
    environments = sorted(
        {
            f"{run.check_id}: {run.environment_digest}"
            for a in report.attempts
            for run in a.check_runs
            if run.environment_digest is not None
        }
    )
    return TableSection(
        title="Declared tests",
        notes=(
            "Each FAIL_TO_PASS and PASS_TO_PASS test's outcome in each attempt's check"
            " (missing: no result names it; tampered: the result was forged or the runner"
            " saw tampering).",
            *(
                f"Environment of check {e} (interpreter and pinned requirements)."
                for e in environments
            ),
        ),
        headers=("Attempt", "Check", "Test", "List", "Outcome"),
        rows=rows,
    )


def authority_rows(report: RunEvidenceReport) -> Iterable[tuple[str, bool]]:
    return report.authority.to_dict().items()
