"""The public API is exactly what kernel.__all__ says, and every module declares __all__."""

from __future__ import annotations

import importlib
import importlib.resources
import pkgutil

import kernel

EXPECTED = {
    "ReplayCheck",
    "ReplayMode",
    "RunAdmission",
    "build_run_admission",
    "check_replay",
    "Admission",
    "AttemptState",
    "BindingRefusal",
    "Branch",
    "BudgetCharge",
    "BudgetConsumed",
    "CANDIDATE_ATTEMPT_RUN_BINDING_POLICY_VERSION",
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
}


def test_exports_are_pinned() -> None:
    """kernel.__all__ is exactly the pinned list, and each name resolves."""
    assert set(kernel.__all__) == EXPECTED
    for name in kernel.__all__:
        assert getattr(kernel, name) is not None


def test_every_module_declares_all() -> None:
    """Every importable kernel module sets __all__, and each listed name exists."""
    for info in pkgutil.walk_packages(kernel.__path__, "kernel."):
        module = importlib.import_module(info.name)
        assert hasattr(module, "__all__"), info.name
        for name in module.__all__:
            assert hasattr(module, name), f"{info.name}.{name}"


def test_py_typed_ships() -> None:
    """The package carries its py.typed marker."""
    assert importlib.resources.files("kernel").joinpath("py.typed").is_file()
