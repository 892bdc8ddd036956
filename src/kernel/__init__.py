"""kernel: honest evidence for multi-agent draft -> verify -> decide pipelines.

Frozen, content-addressed records (canonical JSON + SHA-256), pure validators that
refuse instead of guessing, and nothing that decides for the user. `__all__` is the
public API; tests derive what it must hold by walking the signatures of what it
exports. Effects (files, sandboxes, reruns, the CLI) live in `kernel.effects`; the
static guard in `kernel.guard`.

Submodules load on first use (``kernel.seal`` imports `kernel.codec` then), so that
``import kernel`` stays cheap for a CLI or a worker that needs one record. Type
checkers see ordinary imports; a test holds the three lists below together.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Final

__version__: Final = "0.1.0"

if TYPE_CHECKING:
    # `import X as old_name` lines are the deprecated 0.1.0 names (see `_DEPRECATED`).
    from kernel.binding import (
        CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION,
        CandidateAttemptRunBinding,
        CandidateAttemptRunBindingInput,
        CandidateAttemptRunBindingOutcome,
        CandidateAttemptRunBindingRefusal,
        RunAttemptBindingRefusalReason,
        RunAttemptMembership,
        bind_candidate_attempt_to_run,
        verify_binding,
        verify_binding_set,
    )
    from kernel.codec import (
        Identity,
        Record,
        compute_id,
        identity_payload,
        seal,
    )
    from kernel.commit_admission import (
        Admission,
        AdmissionVerified,
        Branch,
        CommitRefusal,
        CommitRefusalReason,
        Draft,
        EvidenceClass,
        VerifierOutcome,
        admit_to_commit,
        branch_from_corroboration,
        drafts_are_decorrelated,
        verify_admission,
    )
    from kernel.commit_admission import admit_or_raise as admit_or_raise
    from kernel.commit_admission import require_verified as require_verified
    from kernel.consensus import (
        CaptureMode,
        CaptureStatus,
        ClassifiedRun,
        Consensus,
        ConsensusRefusal,
        ConsensusRefusalReason,
        CorroborationReport,
        Isolation,
        NoConsensus,
        NoConsensusReason,
        OutputGroup,
        RunObservation,
        RunStatus,
        build_consensus,
        build_corroboration_report,
    )
    from kernel.decision import (
        Decider,
        DeciderType,
        Decision,
        DecisionAuthority,
        DecisionReason,
        DecisionRefusal,
        DecisionVerified,
        EvidenceReportRef,
        HumanDecisionRecord,
        record_decision,
        verify_decision,
    )
    from kernel.errors import (
        ArgumentTypeError,
        ArgumentValueError,
        CanonicalizationError,
        CommitBoundaryError,
        ConfigError,
        EffectError,
        FieldError,
        KernelError,
        RecordError,
        RefusedError,
    )
    from kernel.evidence_report import (
        EvidenceState,
        PendingDecision,
        ReportAttempt,
        ReportCheck,
        ReportReason,
        ReportRefusal,
        ReportSummary,
        ReportWarning,
        RunEvidenceReport,
        build_evidence_report,
        check_evidence_report,
    )
    from kernel.evidence_report import build_evidence_report as build_report  # noqa: F401
    from kernel.evidence_report import check_evidence_report as check_report  # noqa: F401
    from kernel.identity import (
        canonical_json,
        sha256_bytes,
        sha256_hex,
    )
    from kernel.render import (
        CheckOutputView,
        PatchView,
        TableSection,
        Workspace,
        render_html,
        render_json,
        render_markdown,
    )
    from kernel.run_admission import (
        CandidateGroup,
        RunAdmission,
        build_run_admission,
    )
    from kernel.run_replay import (
        ReplayCheck,
        ReplayMode,
        ReplayReason,
        ReplayRefusal,
        check_replay,
    )
    from kernel.runrecord import (
        AttemptError,
        AttemptErrorCode,
        AttemptRecord,
        AttemptState,
        CheckRun,
        CheckSummary,
        DeclaredReplay,
        DeclaredTestKind,
        DeclaredTestOutcome,
        DeclaredTestResult,
        ImportedFrom,
        IsolationPolicy,
        ManifestSummary,
        ProvenanceInput,
        RunAuthority,
        RunProvenance,
        RunRecord,
        SandboxLimit,
        SandboxRun,
        VerificationSummary,
        WorkUnitRef,
    )
    from kernel.search import (
        BudgetConsumed,
        CandidateAttempt,
        CandidateOperatorResult,
        CandidateReconstruction,
        CandidateReplayStatus,
        ComputeBudgetDecision,
        ComputeBudgetStatus,
        GeometricSearchRun,
        RunExhaustionCode,
        SearchGateDecision,
        SearchGateStatus,
        SearchRunDisposition,
    )
    from kernel.values import (
        BudgetCharge,
        Refusal,
        SourceSpan,
        unwrap,
    )
    from kernel.verification import (
        Actor,
        ActorType,
        Artifact,
        CheckReason,
        CheckResult,
        CheckStatus,
        EvidenceChain,
        EvidenceChainReason,
        EvidenceChainRefusal,
        Independence,
        Recommendation,
        ResultManifest,
        VerificationResult,
        VerificationStatus,
        WorkerStatus,
        WorkInput,
        WorkUnit,
        check_evidence_chain,
    )
    from kernel.verification import EvidenceChainRefusal as BindingRefusal  # noqa: F401
    from kernel.verification import check_evidence_chain as check_binding  # noqa: F401

_EXPORTS: Final[dict[str, tuple[str, ...]]] = {
    "kernel.binding": (
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
    "kernel.codec": (
        "Identity",
        "Record",
        "compute_id",
        "identity_payload",
        "seal",
    ),
    "kernel.commit_admission": (
        "Admission",
        "AdmissionVerified",
        "Branch",
        "CommitRefusal",
        "CommitRefusalReason",
        "Draft",
        "EvidenceClass",
        "VerifierOutcome",
        "admit_to_commit",
        "branch_from_corroboration",
        "drafts_are_decorrelated",
        "verify_admission",
    ),
    "kernel.consensus": (
        "CaptureMode",
        "CaptureStatus",
        "ClassifiedRun",
        "Consensus",
        "ConsensusRefusal",
        "ConsensusRefusalReason",
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
    "kernel.decision": (
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
    "kernel.errors": (
        "ArgumentTypeError",
        "ArgumentValueError",
        "CanonicalizationError",
        "CommitBoundaryError",
        "ConfigError",
        "EffectError",
        "FieldError",
        "KernelError",
        "RecordError",
        "RefusedError",
    ),
    "kernel.evidence_report": (
        "EvidenceState",
        "PendingDecision",
        "ReportAttempt",
        "ReportCheck",
        "ReportReason",
        "ReportRefusal",
        "ReportSummary",
        "ReportWarning",
        "RunEvidenceReport",
        "build_evidence_report",
        "check_evidence_report",
    ),
    "kernel.identity": (
        "canonical_json",
        "sha256_bytes",
        "sha256_hex",
    ),
    "kernel.render": (
        "CheckOutputView",
        "PatchView",
        "TableSection",
        "Workspace",
        "render_html",
        "render_json",
        "render_markdown",
    ),
    "kernel.run_admission": (
        "CandidateGroup",
        "RunAdmission",
        "build_run_admission",
    ),
    "kernel.run_replay": (
        "ReplayCheck",
        "ReplayMode",
        "ReplayReason",
        "ReplayRefusal",
        "check_replay",
    ),
    "kernel.runrecord": (
        "AttemptError",
        "AttemptErrorCode",
        "AttemptRecord",
        "AttemptState",
        "CheckRun",
        "CheckSummary",
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
        "VerificationSummary",
        "WorkUnitRef",
    ),
    "kernel.search": (
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
    "kernel.values": (
        "BudgetCharge",
        "Refusal",
        "SourceSpan",
        "unwrap",
    ),
    "kernel.verification": (
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
}
"""Where each public name lives, module by module."""

_DEPRECATED: Final[dict[str, tuple[str, str, str]]] = {
    "BindingRefusal": (
        "kernel.verification",
        "EvidenceChainRefusal",
        "kernel.EvidenceChainRefusal",
    ),
    "admit_or_raise": ("kernel.commit_admission", "admit_or_raise", "unwrap(admit_to_commit(b))"),
    "build_report": (
        "kernel.evidence_report",
        "build_evidence_report",
        "kernel.build_evidence_report",
    ),
    "check_binding": ("kernel.verification", "check_evidence_chain", "check_evidence_chain"),
    "check_report": (
        "kernel.evidence_report",
        "check_evidence_report",
        "kernel.check_evidence_report",
    ),
    "require_verified": (
        "kernel.commit_admission",
        "require_verified",
        "unwrap(admit_to_commit(b)) and its evidence_class",
    ),
}
"""Old public name -> (module, attribute, advice); each access warns with `DeprecationWarning`."""

_HOME: Final[dict[str, str]] = {
    name: module for module, names in _EXPORTS.items() for name in names
}

__all__ = [
    "CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION",
    "Actor",
    "ActorType",
    "Admission",
    "AdmissionVerified",
    "ArgumentTypeError",
    "ArgumentValueError",
    "Artifact",
    "AttemptError",
    "AttemptErrorCode",
    "AttemptRecord",
    "AttemptState",
    "Branch",
    "BudgetCharge",
    "BudgetConsumed",
    "CandidateAttempt",
    "CandidateAttemptRunBinding",
    "CandidateAttemptRunBindingInput",
    "CandidateAttemptRunBindingOutcome",
    "CandidateAttemptRunBindingRefusal",
    "CandidateGroup",
    "CandidateOperatorResult",
    "CandidateReconstruction",
    "CandidateReplayStatus",
    "CanonicalizationError",
    "CaptureMode",
    "CaptureStatus",
    "CheckOutputView",
    "CheckReason",
    "CheckResult",
    "CheckRun",
    "CheckStatus",
    "CheckSummary",
    "ClassifiedRun",
    "CommitBoundaryError",
    "CommitRefusal",
    "CommitRefusalReason",
    "ComputeBudgetDecision",
    "ComputeBudgetStatus",
    "ConfigError",
    "Consensus",
    "ConsensusRefusal",
    "ConsensusRefusalReason",
    "CorroborationReport",
    "Decider",
    "DeciderType",
    "Decision",
    "DecisionAuthority",
    "DecisionReason",
    "DecisionRefusal",
    "DecisionVerified",
    "DeclaredReplay",
    "DeclaredTestKind",
    "DeclaredTestOutcome",
    "DeclaredTestResult",
    "Draft",
    "EffectError",
    "EvidenceChain",
    "EvidenceChainReason",
    "EvidenceChainRefusal",
    "EvidenceClass",
    "EvidenceReportRef",
    "EvidenceState",
    "FieldError",
    "GeometricSearchRun",
    "HumanDecisionRecord",
    "Identity",
    "ImportedFrom",
    "Independence",
    "Isolation",
    "IsolationPolicy",
    "KernelError",
    "ManifestSummary",
    "NoConsensus",
    "NoConsensusReason",
    "OutputGroup",
    "PatchView",
    "PendingDecision",
    "ProvenanceInput",
    "Recommendation",
    "Record",
    "RecordError",
    "Refusal",
    "RefusedError",
    "ReplayCheck",
    "ReplayMode",
    "ReplayReason",
    "ReplayRefusal",
    "ReportAttempt",
    "ReportCheck",
    "ReportReason",
    "ReportRefusal",
    "ReportSummary",
    "ReportWarning",
    "ResultManifest",
    "RunAdmission",
    "RunAttemptBindingRefusalReason",
    "RunAttemptMembership",
    "RunAuthority",
    "RunEvidenceReport",
    "RunExhaustionCode",
    "RunObservation",
    "RunProvenance",
    "RunRecord",
    "RunStatus",
    "SandboxLimit",
    "SandboxRun",
    "SearchGateDecision",
    "SearchGateStatus",
    "SearchRunDisposition",
    "SourceSpan",
    "TableSection",
    "VerificationResult",
    "VerificationStatus",
    "VerificationSummary",
    "VerifierOutcome",
    "WorkInput",
    "WorkUnit",
    "WorkUnitRef",
    "WorkerStatus",
    "Workspace",
    "admit_to_commit",
    "bind_candidate_attempt_to_run",
    "branch_from_corroboration",
    "build_consensus",
    "build_corroboration_report",
    "build_evidence_report",
    "build_run_admission",
    "canonical_json",
    "check_evidence_chain",
    "check_evidence_report",
    "check_replay",
    "compute_id",
    "drafts_are_decorrelated",
    "identity_payload",
    "record_decision",
    "render_html",
    "render_json",
    "render_markdown",
    "seal",
    "sha256_bytes",
    "sha256_hex",
    "unwrap",
    "verify_admission",
    "verify_binding",
    "verify_binding_set",
    "verify_decision",
]


def _load(module: str) -> ModuleType:
    """Import one public submodule (static imports: the pure core imports nothing by name)."""
    match module:
        case "kernel.binding":
            from kernel import binding

            return binding
        case "kernel.codec":
            from kernel import codec

            return codec
        case "kernel.commit_admission":
            from kernel import commit_admission

            return commit_admission
        case "kernel.consensus":
            from kernel import consensus

            return consensus
        case "kernel.decision":
            from kernel import decision

            return decision
        case "kernel.errors":
            from kernel import errors

            return errors
        case "kernel.evidence_report":
            from kernel import evidence_report

            return evidence_report
        case "kernel.identity":
            from kernel import identity

            return identity
        case "kernel.render":
            from kernel import render

            return render
        case "kernel.run_admission":
            from kernel import run_admission

            return run_admission
        case "kernel.run_replay":
            from kernel import run_replay

            return run_replay
        case "kernel.runrecord":
            from kernel import runrecord

            return runrecord
        case "kernel.search":
            from kernel import search

            return search
        case "kernel.values":
            from kernel import values

            return values
        case "kernel.verification":
            from kernel import verification

            return verification
        case _:
            raise AttributeError(f"module 'kernel' has no submodule {module!r}")


def __getattr__(name: str) -> object:
    """Load the submodule that defines ``name`` on first access (PEP 562)."""
    if name in _HOME:
        value = getattr(_load(_HOME[name]), name)
        # kernel-guard: ignore[KG008] caches a name this module exports, nothing else
        globals()[name] = value  # later accesses skip this hook
        return value
    if name in _DEPRECATED:
        module, attribute, advice = _DEPRECATED[name]
        warnings.warn(
            f"kernel.{name} is deprecated; use {advice}", DeprecationWarning, stacklevel=2
        )
        return getattr(_load(module), attribute)
    raise AttributeError(f"module 'kernel' has no attribute {name!r}")


def __dir__() -> list[str]:
    # kernel-guard: ignore[KG008] lists this module's own names for dir(kernel)
    return sorted({*globals(), *__all__})
