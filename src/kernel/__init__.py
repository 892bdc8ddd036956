"""kernel: honest evidence for multi-agent draft -> verify -> decide pipelines.

Frozen, content-addressed records (canonical JSON + SHA-256), pure validators that
refuse instead of guessing, and nothing that decides for the user. The export list
below is the public API; a test pins it. Effects (files, sandboxes, reruns, the CLI)
live in `kernel.effects`; the static guard in `kernel.guard`.
"""

from kernel.binding import (
    CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION,
    CandidateAttemptRunBinding,
    CandidateAttemptRunBindingInput,
    CandidateAttemptRunBindingOutcome,
    CandidateAttemptRunBindingRefusal,
    RunAttemptBindingRefusalReason,
    bind_candidate_attempt_to_run,
    verify_binding,
    verify_binding_set,
)
from kernel.codec import Identity, Record, compute_id, identity_payload, seal
from kernel.commit_admission import (
    Admission,
    Branch,
    CommitRefusal,
    Draft,
    EvidenceClass,
    VerifierOutcome,
    admit_or_raise,
    admit_to_commit,
    branch_from_corroboration,
    drafts_are_decorrelated,
    require_verified,
    verify_admission,
)
from kernel.consensus import (
    Consensus,
    ConsensusRefusal,
    CorroborationReport,
    NoConsensus,
    RunObservation,
    build_consensus,
)
from kernel.decision import (
    DecisionRefusal,
    HumanDecisionRecord,
    record_decision,
    verify_decision,
)
from kernel.errors import (
    CanonicalizationError,
    CommitBoundaryError,
    ConfigError,
    EffectError,
    KernelError,
    RecordError,
    RefusedError,
)
from kernel.evidence_report import (
    EvidenceState,
    ReportRefusal,
    RunEvidenceReport,
    build_report,
    check_report,
)
from kernel.identity import canonical_json, sha256_bytes, sha256_hex
from kernel.render import render_html, render_json, render_markdown
from kernel.run_admission import RunAdmission, build_run_admission
from kernel.run_replay import ReplayCheck, ReplayMode, check_replay
from kernel.runrecord import AttemptState, RunRecord
from kernel.search import (
    BudgetConsumed,
    CandidateAttempt,
    CandidateOperatorResult,
    CandidateReconstruction,
    CandidateReplayStatus,
    ComputeBudgetDecision,
    GeometricSearchRun,
    RunExhaustionCode,
    SearchGateDecision,
    SearchRunDisposition,
)
from kernel.values import BudgetCharge, Refusal, SourceSpan, unwrap
from kernel.verification import (
    BindingRefusal,
    Recommendation,
    ResultManifest,
    VerificationResult,
    WorkUnit,
    check_binding,
)

__all__ = [
    "ReplayCheck",
    "ReplayMode",
    "RunAdmission",
    "build_run_admission",
    "check_replay",
    "CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION",
    "Admission",
    "AttemptState",
    "BindingRefusal",
    "Branch",
    "BudgetCharge",
    "BudgetConsumed",
    "CandidateAttempt",
    "CandidateAttemptRunBinding",
    "CandidateAttemptRunBindingInput",
    "CandidateAttemptRunBindingOutcome",
    "CandidateAttemptRunBindingRefusal",
    "CandidateOperatorResult",
    "CandidateReconstruction",
    "CandidateReplayStatus",
    "CanonicalizationError",
    "CommitBoundaryError",
    "CommitRefusal",
    "ComputeBudgetDecision",
    "ConfigError",
    "Consensus",
    "ConsensusRefusal",
    "CorroborationReport",
    "DecisionRefusal",
    "Draft",
    "EffectError",
    "EvidenceClass",
    "EvidenceState",
    "GeometricSearchRun",
    "HumanDecisionRecord",
    "Identity",
    "KernelError",
    "NoConsensus",
    "Recommendation",
    "Record",
    "RecordError",
    "Refusal",
    "RefusedError",
    "ReportRefusal",
    "ResultManifest",
    "RunAttemptBindingRefusalReason",
    "RunEvidenceReport",
    "RunExhaustionCode",
    "RunObservation",
    "RunRecord",
    "SearchGateDecision",
    "SearchRunDisposition",
    "SourceSpan",
    "VerificationResult",
    "VerifierOutcome",
    "WorkUnit",
    "admit_or_raise",
    "admit_to_commit",
    "bind_candidate_attempt_to_run",
    "branch_from_corroboration",
    "build_consensus",
    "build_report",
    "canonical_json",
    "check_binding",
    "check_report",
    "compute_id",
    "drafts_are_decorrelated",
    "identity_payload",
    "record_decision",
    "render_html",
    "render_json",
    "render_markdown",
    "require_verified",
    "seal",
    "sha256_bytes",
    "sha256_hex",
    "unwrap",
    "verify_admission",
    "verify_binding",
    "verify_binding_set",
    "verify_decision",
]

__version__ = "0.1.0"
