"""Strategies for verification records, run records, evidence reports and decisions.

`run_records` builds runs whose digests bind (so
`kernel.evidence_report.build_evidence_report` accepts them) with every attempt state
represented; `reports` builds their reports.
"""

from __future__ import annotations

from hypothesis import strategies as st

from kernel.consensus import EMPTY_SHA256
from kernel.decision import DeciderType, Decision, HumanDecisionRecord, record_decision
from kernel.evidence_report import RunEvidenceReport, build_evidence_report
from kernel.runrecord import (
    AttemptError,
    AttemptErrorCode,
    AttemptRecord,
    AttemptState,
    CheckSummary,
    DeclaredReplay,
    ImportedFrom,
    ManifestSummary,
    ProvenanceInput,
    RunAuthority,
    RunProvenance,
    RunRecord,
    VerificationSummary,
    WorkUnitRef,
    has_absolute_path,
)
from kernel.strategies.values import digests, texts
from kernel.verification import (
    Actor,
    ActorType,
    Artifact,
    CheckResult,
    CheckStatus,
    Independence,
    Recommendation,
    ResultManifest,
    VerificationResult,
    VerificationStatus,
    WorkerStatus,
    WorkInput,
    WorkUnit,
)

__all__ = [
    "actors",
    "attempt_records",
    "decisions",
    "identifiers",
    "provenances",
    "reports",
    "result_manifests",
    "run_records",
    "verification_results",
    "work_units",
]

_IDENTIFIERS = texts().filter(lambda s: bool(s.strip()))


def identifiers() -> st.SearchStrategy[str]:
    """Non-blank Unicode strings (hostile characters included)."""
    return _IDENTIFIERS


_messages = _IDENTIFIERS.filter(lambda s: not has_absolute_path(s))
_small = st.integers(min_value=1, max_value=50)


def actors() -> st.SearchStrategy[Actor]:
    """Workers or verifiers."""
    return st.builds(
        Actor,
        id=identifiers(),
        type=st.sampled_from(ActorType),
        adapter=identifiers(),
        adapter_version=identifiers(),
    )


@st.composite
def work_units(draw: st.DrawFn) -> WorkUnit:
    """Work units with unique input ids and unique required validators."""
    names = draw(st.lists(identifiers(), unique=True, max_size=3))
    return WorkUnit(
        id=draw(identifiers()),
        version=draw(_small),
        objective=draw(identifiers()),
        inputs=tuple(WorkInput(id=n, digest=draw(digests())) for n in names),
        required_validators=tuple(draw(st.lists(identifiers(), unique=True, max_size=3))),
    )


@st.composite
def result_manifests(draw: st.DrawFn, work_unit: WorkUnit | None = None) -> ResultManifest:
    """Manifests bound to ``work_unit`` (or to a random one)."""
    unit = work_unit if work_unit is not None else draw(work_units())
    names = draw(st.lists(identifiers(), unique=True, max_size=3))
    return ResultManifest(
        id=draw(identifiers()),
        work_unit_id=unit.id,
        work_unit_version=unit.version,
        work_unit_digest=unit.digest,
        attempt=draw(_small),
        worker=draw(actors()),
        status=draw(st.sampled_from(WorkerStatus)),
        artifacts=tuple(
            Artifact(id=n, locator=draw(identifiers()), digest=draw(digests()), media_type="")
            for n in names
        ),
        claims=tuple(draw(st.lists(texts(), max_size=3))),
    )


@st.composite
def verification_results(
    draw: st.DrawFn, work_unit: WorkUnit | None = None, manifest: ResultManifest | None = None
) -> VerificationResult:
    """Verifications bound to ``manifest`` and ``work_unit`` (random when omitted)."""
    unit = work_unit if work_unit is not None else draw(work_units())
    seen = manifest if manifest is not None else draw(result_manifests(unit))
    ids = list(unit.required_validators) + draw(st.lists(identifiers(), max_size=2))
    ids = list(dict.fromkeys(ids)) or ["check"]
    return VerificationResult(
        id=draw(identifiers()),
        result_manifest_id=seen.id,
        result_manifest_digest=seen.digest,
        work_unit_id=unit.id,
        work_unit_version=unit.version,
        work_unit_digest=unit.digest,
        attempt=seen.attempt,
        verifier=draw(actors()),
        independence=Independence(
            independent_from_worker=draw(st.booleans()),
            worker_id_observed=seen.worker.id,
            shared_model_family=draw(st.booleans()),
            shared_runtime=draw(st.booleans()),
        ),
        status=draw(st.sampled_from(VerificationStatus)),
        checks=tuple(
            CheckResult(
                id=i,
                required=i in unit.required_validators or draw(st.booleans()),
                status=draw(st.sampled_from(CheckStatus)),
                evidence_digests=tuple(draw(st.lists(digests(), max_size=2))),
            )
            for i in ids
        ),
        recommendation=draw(st.sampled_from(Recommendation)),
        rationale=draw(texts()),
    )


_CANDIDATES = ("c" * 64, "d" * 64, EMPTY_SHA256)


@st.composite
def _manifest_summary(draw: st.DrawFn, work_unit_digest: str) -> ManifestSummary:
    return ManifestSummary(
        id=draw(identifiers()),
        digest=draw(digests()),
        work_unit_digest=draw(st.sampled_from([work_unit_digest, None])),
        worker_id=draw(identifiers()),
        worker_status=draw(st.sampled_from(WorkerStatus)),
        attempt=draw(_small),
        # A small pool, so that attempts share candidates (groups) often.
        candidate_digest=draw(st.none() | st.sampled_from(_CANDIDATES) | digests()),
    )


@st.composite
def _verification_summary(
    draw: st.DrawFn, manifest: ManifestSummary, work_unit_digest: str
) -> VerificationSummary:
    names = draw(st.lists(identifiers(), unique=True, min_size=1, max_size=3))
    return VerificationSummary(
        id=draw(identifiers()),
        verifier_id=draw(identifiers()),
        status=draw(st.sampled_from(VerificationStatus)),
        recommendation=draw(st.sampled_from(Recommendation)),
        checks=tuple(
            CheckSummary(
                id=n, required=draw(st.booleans()), status=draw(st.sampled_from(CheckStatus))
            )
            for n in names
        ),
        result_manifest_digest=manifest.digest,
        work_unit_digest=work_unit_digest,
        semantic_digest=draw(digests()),
    )


@st.composite
def attempt_records(
    draw: st.DrawFn, order: int = 1, work_unit_digest: str | None = None
) -> AttemptRecord:
    """One attempt in any state, with digests that bind to ``work_unit_digest``."""
    unit_digest = work_unit_digest if work_unit_digest is not None else draw(digests())
    state = draw(st.sampled_from(AttemptState))
    manifest = verification = error = None
    if state is not AttemptState.WORKER_ERROR and (
        state is not AttemptState.RESULT_MANIFEST_ERROR or draw(st.booleans())
    ):
        manifest = draw(_manifest_summary(unit_digest))
    if state is AttemptState.VERIFIED:
        if manifest is None:
            raise TypeError("a verified attempt record was drawn without a manifest")
        verification = draw(_verification_summary(manifest, unit_digest))
    else:
        error = AttemptError(code=draw(st.sampled_from(AttemptErrorCode)), message=draw(_messages))
    return AttemptRecord(
        attempt_id=f"attempt-{order:03d}",
        order=order,
        adapter=draw(identifiers()),
        adapter_version=draw(st.none() | identifiers()),
        state=state,
        manifest=manifest,
        verification=verification,
        error=error,
    )


@st.composite
def provenances(draw: st.DrawFn) -> RunProvenance:
    """Run provenance: a declared replay and sorted, unique named input digests."""
    names = sorted(draw(st.lists(identifiers(), unique=True, max_size=4)))
    return RunProvenance(
        declared_replay=draw(st.sampled_from(DeclaredReplay)),
        inputs=tuple(ProvenanceInput(name=n, digest=draw(digests())) for n in names),
    )


@st.composite
def run_records(draw: st.DrawFn, max_attempts: int = 8) -> RunRecord:
    """Run records with 1..max_attempts attempts whose digests bind."""
    unit = WorkUnitRef(id=draw(identifiers()), version=draw(_small), digest=draw(digests()))
    count = draw(st.integers(min_value=1, max_value=max_attempts))
    return RunRecord(
        run_id=draw(identifiers()),
        orchestrator=draw(identifiers()),
        work_unit=unit,
        config_digest=draw(digests()),
        verifier_policy_digest=draw(digests()),
        imported_from=draw(
            st.none() | st.builds(ImportedFrom, kind=identifiers(), digest=digests())
        ),
        attempts=tuple(
            draw(attempt_records(order=i, work_unit_digest=unit.digest))
            for i in range(1, count + 1)
        ),
        authority=RunAuthority.none(),
        provenance=draw(st.none() | provenances()),
    )


def reports(max_attempts: int = 8) -> st.SearchStrategy[RunEvidenceReport]:
    """Reports built from `run_records` (always accepted: their digests bind)."""
    return run_records(max_attempts).map(_built)


def _built(run: RunRecord) -> RunEvidenceReport:
    report = build_evidence_report(run)
    if not isinstance(report, RunEvidenceReport):
        raise TypeError(f"a drawn run record does not report: {report}")
    return report


@st.composite
def decisions(draw: st.DrawFn) -> HumanDecisionRecord:
    """Recorded decisions on a random report."""
    report = draw(reports(4))
    decision = draw(st.sampled_from([Decision.REJECT, Decision.ESCALATE]))
    outcome = record_decision(
        report,
        decision_id=draw(identifiers()),
        decision=decision,
        rationale=draw(identifiers()),
        decider_id=draw(identifiers()),
        decider_type=draw(st.sampled_from(DeciderType)),
        decided_at="2026-01-01T00:00:00Z",
        selected_attempt_id=draw(
            st.none() | st.sampled_from([a.attempt_id for a in report.attempts])
        ),
    )
    if not isinstance(outcome, HumanDecisionRecord):
        raise TypeError(f"a drawn decision was refused: {outcome}")
    return outcome
