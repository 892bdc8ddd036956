"""Strategies for verification records, run records, evidence reports and decisions.

`run_records` builds runs whose digests bind (so
`kernel.run.report.build_evidence_report` accepts them) with every attempt state
represented; `reports` builds their reports.
"""

from __future__ import annotations

from hypothesis import strategies as st

from kernel.corroboration.consensus import EMPTY_SHA256
from kernel.decide.decision import DeciderType, Decision, HumanDecisionRecord, record_decision
from kernel.records.values import unwrap
from kernel.run.record import (
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
from kernel.run.report import RunEvidenceReport, build_evidence_report
from kernel.run.verification import (
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
from kernel.strategies._seeded import SEEDS, Stream, seeded
from kernel.strategies.values import texts

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


_SMALL = (1, 50)
_ACTOR_TYPES = tuple(ActorType)
_WORKER_STATUSES = tuple(WorkerStatus)
_VERIFICATION_STATUSES = tuple(VerificationStatus)
_CHECK_STATUSES = tuple(CheckStatus)
_RECOMMENDATIONS = tuple(Recommendation)
_ATTEMPT_STATES = tuple(AttemptState)
_ERROR_CODES = tuple(AttemptErrorCode)
_REPLAYS = tuple(DeclaredReplay)


def _identifier(s: Stream) -> str:
    return s.text(nonblank=True)


def _message(s: Stream) -> str:
    text = s.text(nonblank=True)
    # Without a slash no absolute-path pattern can match (the alphabet has no colon or tilde).
    return text.replace("/", "|") if has_absolute_path(text) else text


def actors() -> st.SearchStrategy[Actor]:
    """Workers or verifiers."""
    return SEEDS.map(lambda seed: _actor_of(Stream(seed)))


def _actor_of(s: Stream) -> Actor:
    return Actor(
        id=_identifier(s),
        type=s.pick(_ACTOR_TYPES),
        adapter=_identifier(s),
        adapter_version=_identifier(s),
    )


def work_units() -> st.SearchStrategy[WorkUnit]:
    """Work units with unique input ids and unique required validators."""
    return SEEDS.map(lambda seed: _work_unit_of(Stream(seed)))


def _work_unit_of(s: Stream) -> WorkUnit:
    names = s.unique_texts(3)
    return WorkUnit(
        id=_identifier(s),
        version=s.integer(*_SMALL),
        objective=_identifier(s),
        inputs=tuple(WorkInput(id=n, digest=s.digest()) for n in names),
        required_validators=s.unique_texts(3),
    )


def result_manifests(work_unit: WorkUnit | None = None) -> st.SearchStrategy[ResultManifest]:
    """Manifests bound to ``work_unit`` (or to a random one)."""
    return SEEDS.map(lambda seed: _manifest_of(Stream(seed), work_unit))


def _manifest_of(s: Stream, work_unit: WorkUnit | None) -> ResultManifest:
    unit = work_unit if work_unit is not None else _work_unit_of(s)
    names = s.unique_texts(3)
    return ResultManifest(
        id=_identifier(s),
        work_unit_id=unit.id,
        work_unit_version=unit.version,
        work_unit_digest=unit.digest,
        attempt=s.integer(*_SMALL),
        worker=_actor_of(s),
        status=s.pick(_WORKER_STATUSES),
        artifacts=tuple(
            Artifact(id=n, locator=_identifier(s), digest=s.digest(), media_type="") for n in names
        ),
        claims=s.texts(3),
    )


def verification_results(
    work_unit: WorkUnit | None = None, manifest: ResultManifest | None = None
) -> st.SearchStrategy[VerificationResult]:
    """Verifications bound to ``manifest`` and ``work_unit`` (random when omitted)."""
    return SEEDS.map(lambda seed: _verification_of(Stream(seed), work_unit, manifest))


def _verification_of(
    s: Stream, work_unit: WorkUnit | None, manifest: ResultManifest | None
) -> VerificationResult:
    unit = work_unit if work_unit is not None else _work_unit_of(s)
    seen = manifest if manifest is not None else _manifest_of(s, unit)
    ids = list(dict.fromkeys([*unit.required_validators, *s.texts(2, nonblank=True)])) or ["check"]
    return VerificationResult(
        id=_identifier(s),
        result_manifest_id=seen.id,
        result_manifest_digest=seen.digest,
        work_unit_id=unit.id,
        work_unit_version=unit.version,
        work_unit_digest=unit.digest,
        attempt=seen.attempt,
        verifier=_actor_of(s),
        independence=Independence(
            independent_from_worker=s.flag(),
            worker_id_observed=seen.worker.id,
            shared_model_family=s.flag(),
            shared_runtime=s.flag(),
        ),
        status=s.pick(_VERIFICATION_STATUSES),
        checks=tuple(
            CheckResult(
                id=i,
                required=i in unit.required_validators or s.flag(),
                status=s.pick(_CHECK_STATUSES),
                evidence_digests=s.digests(2),
            )
            for i in ids
        ),
        recommendation=s.pick(_RECOMMENDATIONS),
        rationale=s.text(),
    )


_CANDIDATES = ("c" * 64, "d" * 64, EMPTY_SHA256)


def _manifest_summary_of(s: Stream, work_unit_digest: str) -> ManifestSummary:
    # A small pool, so that attempts share candidates (groups) often.
    pool = s.integer(0, len(_CANDIDATES) + 1)
    return ManifestSummary(
        id=_identifier(s),
        digest=s.digest(),
        work_unit_digest=s.pick((work_unit_digest, None)),
        worker_id=_identifier(s),
        worker_status=s.pick(_WORKER_STATUSES),
        attempt=s.integer(*_SMALL),
        candidate_digest=(
            None if pool == 0 else _CANDIDATES[pool - 1] if pool <= len(_CANDIDATES) else s.digest()
        ),
    )


def _verification_summary_of(
    s: Stream, manifest: ManifestSummary, work_unit_digest: str
) -> VerificationSummary:
    names = s.unique_texts(3, min_count=1)
    return VerificationSummary(
        id=_identifier(s),
        verifier_id=_identifier(s),
        status=s.pick(_VERIFICATION_STATUSES),
        recommendation=s.pick(_RECOMMENDATIONS),
        checks=tuple(
            CheckSummary(id=n, required=s.flag(), status=s.pick(_CHECK_STATUSES)) for n in names
        ),
        result_manifest_digest=manifest.digest,
        work_unit_digest=work_unit_digest,
        semantic_digest=s.digest(),
    )


def attempt_records(
    order: int = 1, work_unit_digest: str | None = None
) -> st.SearchStrategy[AttemptRecord]:
    """One attempt in any state, with digests that bind to ``work_unit_digest``."""
    return SEEDS.map(lambda seed: _attempt_record_of(Stream(seed), order, work_unit_digest))


def _attempt_record_of(s: Stream, order: int, work_unit_digest: str | None) -> AttemptRecord:
    unit_digest = work_unit_digest if work_unit_digest is not None else s.digest()
    state = s.pick(_ATTEMPT_STATES)
    manifest: ManifestSummary | None = None
    verification = error = None
    if state is AttemptState.VERIFIED:
        verified = manifest = _manifest_summary_of(s, unit_digest)
        verification = _verification_summary_of(s, verified, unit_digest)
    else:
        if state is not AttemptState.WORKER_ERROR and (
            state is not AttemptState.RESULT_MANIFEST_ERROR or s.flag()
        ):
            manifest = _manifest_summary_of(s, unit_digest)
        error = AttemptError(code=s.pick(_ERROR_CODES), message=_message(s))
    return AttemptRecord(
        attempt_id=f"attempt-{order:03d}",
        order=order,
        adapter=_identifier(s),
        adapter_version=s.maybe(lambda: _identifier(s)),
        state=state,
        manifest=manifest,
        verification=verification,
        error=error,
    )


def provenances() -> st.SearchStrategy[RunProvenance]:
    """Run provenance: a declared replay and sorted, unique named input digests."""
    return SEEDS.map(lambda seed: _provenance_of(Stream(seed)))


def _provenance_of(s: Stream) -> RunProvenance:
    names = sorted(s.unique_texts(4))
    return RunProvenance(
        declared_replay=s.pick(_REPLAYS),
        inputs=tuple(ProvenanceInput(name=n, digest=s.digest()) for n in names),
    )


def run_records(max_attempts: int = 8) -> st.SearchStrategy[RunRecord]:
    """Run records with 1..max_attempts attempts whose digests bind."""
    return seeded(_run_record_of, 1, max_attempts)


def _run_record_of(count: int, s: Stream) -> RunRecord:
    unit = WorkUnitRef(id=_identifier(s), version=s.integer(*_SMALL), digest=s.digest())
    return RunRecord(
        run_id=_identifier(s),
        orchestrator=_identifier(s),
        work_unit=unit,
        config_digest=s.digest(),
        verifier_policy_digest=s.digest(),
        imported_from=s.maybe(lambda: ImportedFrom(kind=_identifier(s), digest=s.digest())),
        attempts=tuple(_attempt_record_of(s, i, unit.digest) for i in range(1, count + 1)),
        authority=RunAuthority.none(),
        provenance=s.maybe(lambda: _provenance_of(s)),
    )


def reports(max_attempts: int = 8) -> st.SearchStrategy[RunEvidenceReport]:
    """Reports built from `run_records` (always accepted: their digests bind)."""
    return run_records(max_attempts).map(_built)


def _built(run: RunRecord) -> RunEvidenceReport:
    # A drawn run's digests bind: a refusal here is a bug of this module, raised as such.
    return unwrap(build_evidence_report(run))


def decisions() -> st.SearchStrategy[HumanDecisionRecord]:
    """Recorded decisions on a random report."""
    return seeded(_decision_of, 1, 4)


def _decision_of(count: int, s: Stream) -> HumanDecisionRecord:
    report = _built(_run_record_of(count, s))
    outcome = record_decision(
        report,
        decision_id=_identifier(s),
        decision=s.pick((Decision.REJECT, Decision.ESCALATE)),
        rationale=_identifier(s),
        decider_id=_identifier(s),
        decider_type=s.pick(_DECIDER_TYPES),
        decided_at="2026-01-01T00:00:00Z",
        selected_attempt_id=s.maybe(lambda: s.pick([a.attempt_id for a in report.attempts])),
    )
    return unwrap(outcome)


_DECIDER_TYPES = tuple(DeciderType)
