"""kernel: honest evidence for multi-agent draft -> verify -> decide pipelines.

Frozen, content-addressed records (canonical JSON + SHA-256), pure validators that
refuse instead of guessing, and nothing that decides for the user. `_EXPORTS` is the
one table of the public API (``__all__`` is derived from it; type checkers read
``__init__.pyi``, generated from it by ``python -m kernel.effects.api_stub``). Effects
(files, sandboxes, reruns, the pipeline, the CLI) live in `kernel.effects`; the static
guard in `kernel.guard`. Submodules load on first use, so ``import kernel`` stays cheap.
"""

from __future__ import annotations

from types import ModuleType

# No `typing` import: `kernel --version` pays for every module imported here (the stub
# gives type checkers the Final types).
__version__ = "0.1.0"

_EXPORTS: dict[str, tuple[str, ...]] = {
    "kernel.corroboration.commit_admission": (
        "Admission",
        "AdmissionVerified",
        "Branch",
        "CommitRefusal",
        "CommitReason",
        "Draft",
        "EvidenceClass",
        "VerifierOutcome",
        "admit_to_commit",
        "branch_from_corroboration",
        "drafts_are_decorrelated",
        "verify_admission",
    ),
    "kernel.corroboration.consensus": (
        "CaptureMode",
        "CaptureStatus",
        "ClassifiedRun",
        "Consensus",
        "ConsensusRefusal",
        "ConsensusReason",
        "CorroborationReport",
        "Isolation",
        "NoConsensus",
        "NoConsensusReason",
        "OutputGroup",
        "RunObservation",
        "RunStatus",
        "build_consensus",
        "build_corroboration_report",
    ),
    "kernel.corroboration.run_admission": (
        "CandidateGroup",
        "RunAdmission",
        "build_run_admission",
    ),
    "kernel.decide.decision": (
        "Decider",
        "DeciderType",
        "Decision",
        "DecisionAuthority",
        "DecisionReason",
        "DecisionRefusal",
        "DecisionVerified",
        "EvidenceReportRef",
        "HumanDecisionRecord",
        "record_decision",
        "verify_decision",
    ),
    "kernel.decide.gate": (
        "GateReason",
        "GateRefusal",
        "PromotionPermit",
        "SignatureCheck",
        "SignatureStatus",
        "StagingPermit",
        "decide_promotion",
        "decide_staging",
    ),
    "kernel.decide.ledger": (
        "EntryKind",
        "LedgerRefusal",
        "LedgerEntry",
        "LedgerHead",
        "LedgerVerified",
        "LedgerReason",
        "verify_chain",
    ),
    "kernel.errors": (
        "CanonicalizationError",
        "CommitBoundaryError",
        "ConfigError",
        "DuplicateAdapterError",
        "EffectError",
        "FieldError",
        "GitRefusal",
        "GuardFailure",
        "KernelError",
        "ParameterTypeError",
        "ParameterValueError",
        "RecordError",
        "RefusedError",
        "RunFolderBusy",
        "SelfTestFailure",
        "UnsafeScratchError",
        "UntrustedConfig",
        "VerifierFailure",
    ),
    "kernel.records.codec": (
        "Identity",
        "Record",
        "compute_id",
        "identity_payload",
        "seal",
    ),
    "kernel.records.identity": (
        "canonical_json",
        "sha256_bytes",
        "sha256_hex",
    ),
    "kernel.records.values": (
        "BudgetCharge",
        "Refusal",
        "SourceSpan",
        "unwrap",
    ),
    "kernel.run.record": (
        "AttemptError",
        "AttemptErrorCode",
        "AttemptRecord",
        "AttemptState",
        "Calibration",
        "CalibrationReason",
        "CalibrationTest",
        "CheckRun",
        "CheckSummary",
        "CommandUid",
        "DeclaredReplay",
        "DeclaredTestKind",
        "DeclaredTestOutcome",
        "DeclaredTestResult",
        "ImportedFrom",
        "IsolationPolicy",
        "ManifestSummary",
        "ProvenanceInput",
        "RunAuthority",
        "RunProvenance",
        "RunRecord",
        "SandboxLimit",
        "SandboxRun",
        "ScreenFinding",
        "TrustLevel",
        "VerificationSummary",
        "WorkUnitRef",
    ),
    "kernel.run.replay": (
        "ReplayCheck",
        "ReplayMode",
        "ReplayReason",
        "ReplayRefusal",
        "check_replay",
    ),
    "kernel.run.report": (
        "EvidenceState",
        "PendingDecision",
        "ReportAttempt",
        "ReportVerified",
        "ReportReason",
        "ReportRefusal",
        "ReportSummary",
        "ReportWarning",
        "RunEvidenceReport",
        "build_evidence_report",
        "check_evidence_report",
    ),
    "kernel.run.verification": (
        "Actor",
        "ActorType",
        "Artifact",
        "CheckReason",
        "CheckResult",
        "CheckStatus",
        "EvidenceChain",
        "EvidenceChainReason",
        "EvidenceChainRefusal",
        "Independence",
        "Recommendation",
        "ResultManifest",
        "VerificationResult",
        "VerificationStatus",
        "WorkInput",
        "WorkUnit",
        "WorkerStatus",
        "check_evidence_chain",
    ),
    "kernel.search.binding": (
        "CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION",
        "CandidateAttemptRunBinding",
        "CandidateAttemptRunBindingInput",
        "CandidateAttemptRunBindingOutcome",
        "CandidateAttemptRunBindingRefusal",
        "RunAttemptBindingRefusalReason",
        "RunAttemptMembership",
        "bind_candidate_attempt_to_run",
        "verify_binding",
        "verify_binding_set",
    ),
    "kernel.search.records": (
        "BudgetConsumed",
        "CandidateAttempt",
        "CandidateOperatorResult",
        "CandidateReconstruction",
        "CandidateReplayStatus",
        "ComputeBudgetDecision",
        "ComputeBudgetStatus",
        "GeometricSearchRun",
        "RunExhaustionCode",
        "SearchGateDecision",
        "SearchGateStatus",
        "SearchRunDisposition",
    ),
    "kernel.views": (
        "CheckOutputView",
        "PatchView",
        "TableSection",
        "Workspace",
        "render_html",
        "render_json",
        "render_markdown",
    ),
}
"""Where each public name lives, module by module: the public API."""

_HOME: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}

# Derived, not a literal: the table above is the one list (type checkers read the stub).
__all__ = sorted(_HOME)  # noqa: PLE0605


def _load(module: str) -> ModuleType:
    # One static import per module: the guard refuses computed imports in the pure core.
    match module:
        case "kernel.corroboration.commit_admission":
            from kernel.corroboration import commit_admission as loaded
        case "kernel.corroboration.consensus":
            from kernel.corroboration import consensus as loaded
        case "kernel.corroboration.run_admission":
            from kernel.corroboration import run_admission as loaded
        case "kernel.decide.decision":
            from kernel.decide import decision as loaded
        case "kernel.decide.gate":
            from kernel.decide import gate as loaded
        case "kernel.decide.ledger":
            from kernel.decide import ledger as loaded
        case "kernel.errors":
            from kernel import errors as loaded
        case "kernel.records.codec":
            from kernel.records import codec as loaded
        case "kernel.records.identity":
            from kernel.records import identity as loaded
        case "kernel.records.values":
            from kernel.records import values as loaded
        case "kernel.run.record":
            from kernel.run import record as loaded
        case "kernel.run.replay":
            from kernel.run import replay as loaded
        case "kernel.run.report":
            from kernel.run import report as loaded
        case "kernel.run.verification":
            from kernel.run import verification as loaded
        case "kernel.search.binding":
            from kernel.search import binding as loaded
        case "kernel.search.records":
            from kernel.search import records as loaded
        case "kernel.views":
            from kernel import views as loaded
        case _:
            raise AttributeError(f"module 'kernel' has no submodule {module!r}")
    return loaded


def __getattr__(name: str) -> object:
    """Load the submodule that defines ``name`` on first access (PEP 562)."""
    if name not in _HOME:
        raise AttributeError(f"module 'kernel' has no attribute {name!r}")
    value = getattr(_load(_HOME[name]), name)
    # kernel-guard: ignore[KG008] caches a name this module exports, nothing else
    globals()[name] = value  # later accesses skip this hook
    return value


def __dir__() -> list[str]:
    # kernel-guard: ignore[KG008] lists this module's own names for dir(kernel)
    return sorted({*globals(), *__all__})
