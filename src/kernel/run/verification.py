"""Work units, result manifests, independent verification results, and their evidence chain.

The trust pipeline these records describe::

    WorkUnit -> worker attempt -> ResultManifest (worker self-report)
             -> independent verifier -> VerificationResult (evidence + recommendation)
             -> human / governance decision (`kernel.decide.decision`)

Rules enforced at construction (a record that exists is well formed):

- ids, names and adapters are non-blank strings; versions and attempts are >= 1;
- every digest is a bare 64-char lowercase SHA-256 (no ``sha256:`` prefix);
- a `ResultManifest` has no acceptance field: a worker reports what it did, never
  whether it is right;
- a `VerificationResult` names at least one check, check ids are unique, and its
  recommendation is one of `Recommendation` (decision support, not a decision).

Document digests (each documented on its record):

- ``WorkUnit.digest`` and ``ResultManifest.digest``: SHA-256 of the canonical JSON of
  the whole ``to_dict()`` document;
- ``VerificationResult.semantic_digest``: SHA-256 of the canonical JSON of every field
  but ``rationale`` (prose never enters an identity).

`check_evidence_chain` re-checks every cross-record binding (the checks IDKMesh v0.1's
provenance check makes, plus the verifier-independence and check-coverage facts) and
returns an `EvidenceChain` or an `EvidenceChainRefusal`; it never raises on bad data.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterable
from typing import Any, Final

import attrs

from kernel.errors import ParameterValueError
from kernel.records.codec import (
    UNSEALED,
    Identity,
    Record,
    document_digest,
    field_error,
    seal,
    short_repr,
)
from kernel.records.identity import sha256_hex
from kernel.records.values import (
    Digest,
    Digests,
    NonBlank,
    OptionalDigest,
    Positive,
    Refusal,
    UniqueTexts,
    boundary,
    differs,
    digests,
    nonblank,
    positive,
)

__all__ = [
    "SandboxLimit",
    "verdict_from_checks",
    "ActorType",
    "Actor",
    "Artifact",
    "EvidenceChain",
    "EvidenceChainReason",
    "EvidenceChainRefusal",
    "CheckReason",
    "CheckResult",
    "CheckStatus",
    "Independence",
    "Isolation",
    "Recommendation",
    "ResultManifest",
    "VerificationResult",
    "VerificationStatus",
    "WorkInput",
    "WorkUnit",
    "WorkerStatus",
    "check_evidence_chain",
    "check_manifest_chain",
    "weakest_isolation",
    "digests",
    "nonblank",
    "positive",
]


def _unique_ids(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """attrs validator: a tuple of records whose ``id`` fields are unique."""
    seen: set[str] = set()
    for index, item in enumerate(value):
        if item.id in seen:
            raise field_error(f"{attribute.name}[{index}].id", f"duplicate id {item.id!r}")
        seen.add(item.id)


class ActorType(enum.StrEnum):
    """Who a worker or verifier is."""

    HUMAN = "human"
    AGENT = "agent"
    SYSTEM = "system"
    HYBRID = "hybrid"


class WorkerStatus(enum.StrEnum):
    """What the worker says happened (self-report; never a correctness claim)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


class VerificationStatus(enum.StrEnum):
    """Outcome of the verifier's run as a whole."""

    PASSED = "passed"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


class CheckStatus(enum.StrEnum):
    """Outcome of one named verifier check."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"


class Isolation(enum.StrEnum):
    """How strongly a run was isolated, strongest first (recorded with every capture).

    The declaration order is the strength order (`weakest_isolation`).
    """

    OVERLAY = "overlay"
    """User + mount + network + PID namespaces, overlay of the baseline, read-only rest."""
    NAMESPACE_COPY = "namespace_copy"
    """The same namespaces around a private copy of the baseline (no overlayfs)."""
    COPY = "copy"
    """A private copy only: no namespaces; the command could write elsewhere."""


def weakest_isolation(levels: Iterable[Isolation]) -> Isolation:
    """The weakest of ``levels`` (at least one).

    Raises:
        ParameterValueError: ``levels`` is empty (misuse: no run, no level; a
            ``ValueError``).
    """
    order = list(Isolation)
    given = tuple(levels)
    if not given:
        raise ParameterValueError("weakest_isolation", "levels", "at least one level", "none")
    return max(given, key=order.index)


@attrs.frozen(kw_only=True)
class SandboxLimit(Record):
    """One resource limit of a sandboxed run and how it was applied (with `Isolation`,
    the vocabulary of how a run was confined: run records and corroboration keep it)."""

    kind: NonBlank
    """Which limit (``memory``, ``processes``, ``cpu``, ``output``, ``writable``, ``tmp``)."""
    value: Positive | None
    """The limit (None: no limit)."""
    mechanism: NonBlank
    """How it was enforced (``cgroup_v2``, ``rlimit``, ``tmpfs``, ``runner``, ``none``)."""


class CheckReason(enum.StrEnum):
    """Why a command verifier check did not pass (each produced by one rule).

    Per-test evidence (`kernel.effects.adapters.declared_tests`,
    `kernel.effects.adapters.junit`): ``result_missing``, ``result_unreadable``,
    ``result_forged`` (a result another run wrote: records of the earlier runner),
    ``runner_tampered`` (the collector found tampering: a failed check),
    ``no_tests_found``, ``expected_test_missing``, ``expected_test_skipped``,
    ``expected_test_failed``, ``runner_exit_nonzero``.
    Commands (`kernel.effects.adapters.command`): ``exit_status_only`` (exit 0 is no
    per-test evidence, never a pass), ``nonzero_exit``, ``timeout``,
    ``limit_exceeded`` (a sandbox resource limit), ``start_failed``; the patch rules of
    ``protected-paths`` (`kernel.effects.adapters.patch.HYGIENE_RULES`):
    ``protected_path_touched``, ``patch_unreadable``, ``bytecode_added`` (``*.pyc``,
    ``__pycache__/``), ``sourceless_module`` (``.so``/``.pyd``),
    ``shadows_protected_module`` (a package or module of another kind with a protected
    module's import name), ``symlink_escapes_tree``, ``symlink_in_tree``,
    ``git_metadata`` (``.git``, ``.gitattributes``, ``.gitmodules``); the static screen
    (`kernel.effects.adapters.screen`): ``suspicious_code``; oracle checks
    (`kernel.effects.adapters.oracle`): ``oracle_mismatch``, ``oracle_output_unreadable``.
    """

    RESULT_MISSING = "result_missing"
    RESULT_UNREADABLE = "result_unreadable"
    RESULT_FORGED = "result_forged"
    RUNNER_TAMPERED = "runner_tampered"
    NO_TESTS_FOUND = "no_tests_found"
    EXPECTED_TEST_MISSING = "expected_test_missing"
    EXPECTED_TEST_SKIPPED = "expected_test_skipped"
    EXPECTED_TEST_FAILED = "expected_test_failed"
    RUNNER_EXIT_NONZERO = "runner_exit_nonzero"
    EXIT_STATUS_ONLY = "exit_status_only"
    NONZERO_EXIT = "nonzero_exit"
    TIMEOUT = "timeout"
    LIMIT_EXCEEDED = "limit_exceeded"
    START_FAILED = "start_failed"
    PROTECTED_PATH_TOUCHED = "protected_path_touched"
    PATCH_UNREADABLE = "patch_unreadable"
    BYTECODE_ADDED = "bytecode_added"
    SOURCELESS_MODULE = "sourceless_module"
    SHADOWS_PROTECTED_MODULE = "shadows_protected_module"
    SYMLINK_ESCAPES_TREE = "symlink_escapes_tree"
    SYMLINK_IN_TREE = "symlink_in_tree"
    GIT_METADATA = "git_metadata"
    SUSPICIOUS_CODE = "suspicious_code"
    ORACLE_MISMATCH = "oracle_mismatch"
    ORACLE_OUTPUT_UNREADABLE = "oracle_output_unreadable"


class Recommendation(enum.StrEnum):
    """A verifier's recommendation: decision support, never the decision itself."""

    ACCEPT_CANDIDATE = "accept_candidate"
    REJECT_CANDIDATE = "reject_candidate"
    ESCALATE = "escalate"
    INSUFFICIENT_EVIDENCE = "insufficient_evidence"


@attrs.frozen(kw_only=True)
class WorkInput(Record):
    """One input of a work unit, pinned by the digest of its bytes."""

    id: NonBlank
    """Input name, unique within the work unit."""
    digest: Digest
    """SHA-256 of the input's bytes."""


@attrs.frozen(kw_only=True)
class WorkUnit(Record):
    """A unit of work that several attempts may try.

    ``digest`` is SHA-256 over the canonical JSON of the whole document.
    """

    id: NonBlank
    """Work unit id, stable across versions."""
    version: Positive
    """Version of this work unit (>= 1)."""
    objective: NonBlank
    """What a successful attempt achieves (prose, but part of the digest)."""
    inputs: tuple[WorkInput, ...] = attrs.field(validator=_unique_ids)
    """Inputs with digests, in declaration order."""
    required_validators: UniqueTexts
    """Ids of the verifier checks that must run as required checks."""

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of ``to_dict()``."""
        return document_digest(self)


@attrs.frozen(kw_only=True)
class Actor(Record):
    """The identity of a worker or a verifier and the adapter that ran it."""

    id: NonBlank
    """Actor id (e.g. ``fixture-good-worker``)."""
    type: ActorType
    """Kind of actor."""
    adapter: NonBlank
    """Adapter kind that ran the actor (e.g. ``fixture-result``, later ``command``)."""
    adapter_version: NonBlank
    """Adapter version."""


@attrs.frozen(kw_only=True)
class Artifact(Record):
    """One artifact an attempt produced, pinned by the digest of its bytes."""

    id: NonBlank
    """Artifact id, unique within the manifest."""
    locator: NonBlank
    """Where the bytes are, relative to the candidate root."""
    digest: Digest
    """SHA-256 of the artifact's bytes, as the worker claims it."""
    media_type: str
    """Media type, ``""`` when unknown."""


@attrs.frozen(kw_only=True)
class ResultManifest(Record):
    """A worker's self-report for one attempt. It has no acceptance field.

    ``digest`` is SHA-256 over the canonical JSON of the whole document.
    """

    id: NonBlank
    """Manifest id (worker-chosen)."""
    work_unit_id: NonBlank
    """Id of the work unit this attempt worked on."""
    work_unit_version: Positive
    """Version of that work unit."""
    work_unit_digest: Digest
    """Digest of that work unit (binds the manifest to its exact bytes)."""
    attempt: Positive
    """The worker's own attempt counter (>= 1)."""
    worker: Actor
    """Who did the work, through which adapter."""
    status: WorkerStatus
    """What the worker says happened."""
    artifacts: tuple[Artifact, ...] = attrs.field(validator=_unique_ids)
    """Produced artifacts with byte digests."""
    claims: tuple[str, ...]
    """The worker's claims, verbatim (untrusted text)."""

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of ``to_dict()``."""
        return document_digest(self)


@attrs.frozen(kw_only=True)
class Independence(Record):
    """Facts about how independent the verifier is from the worker it checked."""

    independent_from_worker: bool
    """The verifier did not share code, policy or control with the worker."""
    worker_id_observed: NonBlank
    """The worker id the verifier saw in the manifest it checked."""
    shared_model_family: bool
    """Worker and verifier use the same model family (correlated failures)."""
    shared_runtime: bool
    """Worker and verifier ran in the same runtime."""


@attrs.frozen(kw_only=True)
class CheckResult(Record):
    """One named verifier check."""

    id: NonBlank
    """Check id (matches a work unit's required validator id when required)."""
    required: bool
    """Whether the check is required for acceptance."""
    status: CheckStatus
    """Outcome of the check."""
    evidence_digests: Digests
    """Digests of the evidence the check produced (observed bytes, outputs)."""


@attrs.frozen(kw_only=True)
class VerificationResult(Record):
    """An independent verifier's evidence and recommendation for one manifest.

    ``semantic_digest`` is SHA-256 over the canonical JSON of every field but
    ``rationale``.
    """

    id: NonBlank
    """Verification id."""
    result_manifest_id: NonBlank
    """Id of the manifest verified."""
    result_manifest_digest: Digest
    """Digest of the manifest verified."""
    work_unit_id: NonBlank
    """Id of the work unit the verifier checked against."""
    work_unit_version: Positive
    """Version of that work unit."""
    work_unit_digest: Digest
    """Digest of that work unit."""
    attempt: Positive
    """The manifest's attempt counter, as the verifier read it."""
    verifier: Actor
    """Who verified, through which adapter."""
    independence: Independence
    """Independence facts."""
    status: VerificationStatus
    """Outcome of the verifier run."""
    checks: tuple[CheckResult, ...] = attrs.field(validator=_unique_ids)
    """Named checks, at least one."""
    recommendation: Recommendation
    """Decision support for a human; never a decision."""
    rationale: str
    """Why (prose; not in the semantic digest)."""

    def __attrs_post_init__(self) -> None:
        if not self.checks:
            raise field_error("checks", "a verification names at least one check")

    @functools.cached_property
    def semantic_digest(self) -> str:
        """SHA-256 of the canonical JSON of ``to_dict()`` without ``rationale``."""
        document = self.to_dict()
        del document["rationale"]
        return sha256_hex(document)


class EvidenceChainReason(enum.StrEnum):
    """Why a work unit / manifest / verification triple does not bind (check order)."""

    MANIFEST_WORK_UNIT_ID = "manifest_work_unit_id_mismatch"
    """The manifest names another work unit id."""
    MANIFEST_WORK_UNIT_VERSION = "manifest_work_unit_version_mismatch"
    """The manifest names another work unit version."""
    MANIFEST_WORK_UNIT_DIGEST = "manifest_work_unit_digest_mismatch"
    """The manifest's work unit digest is not the work unit's digest."""
    VERIFICATION_MANIFEST_ID = "verification_manifest_id_mismatch"
    """The verification names another manifest id."""
    VERIFICATION_MANIFEST_DIGEST = "verification_manifest_digest_mismatch"
    """The verification's manifest digest is not the manifest's digest."""
    VERIFICATION_WORK_UNIT_ID = "verification_work_unit_id_mismatch"
    """The verification names another work unit id."""
    VERIFICATION_WORK_UNIT_VERSION = "verification_work_unit_version_mismatch"
    """The verification names another work unit version."""
    VERIFICATION_WORK_UNIT_DIGEST = "verification_work_unit_digest_mismatch"
    """The verification's work unit digest is not the work unit's digest."""
    VERIFICATION_ATTEMPT = "verification_attempt_mismatch"
    """The verification's attempt counter is not the manifest's."""
    OBSERVED_OTHER_WORKER = "verifier_observed_other_worker"
    """The worker the verifier observed is not the manifest's worker."""
    NOT_INDEPENDENT = "verifier_not_independent"
    """The verifier says it is not independent, or it is the worker itself."""
    REQUIRED_CHECK_MISSING = "required_check_missing"
    """A validator the work unit requires is missing or not marked required."""
    ACCEPT_WITH_UNPASSED_CHECK = "accept_with_unpassed_required_check"
    """The verifier recommends acceptance although a required check did not pass."""


@attrs.frozen(kw_only=True)
class EvidenceChain(Record):
    """A triple that binds: the three digests that were checked together."""

    work_unit_digest: Digest
    """The work unit's digest."""
    result_manifest_digest: Digest
    """The manifest's digest."""
    verification_semantic_digest: OptionalDigest
    """The verification's semantic digest (None when only the manifest was bound)."""


@attrs.frozen(kw_only=True)
class EvidenceChainRefusal(Refusal):
    """A triple that does not bind. ``refusal_id`` self-seals over every field but
    ``explanation``."""

    __identity__ = Identity(field="refusal_id", seals=True)

    refusal_id: Digest = UNSEALED
    """Self-sealed id."""
    work_unit_digest: Digest
    """The work unit's digest (always computable)."""
    result_manifest_digest: Digest
    """The manifest's digest (always computable)."""
    verification_semantic_digest: OptionalDigest
    """The verification's semantic digest, None when no verification was given."""
    reason_codes: tuple[EvidenceChainReason, ...]
    """Failed checks in check order."""


_Said = list[tuple[EvidenceChainReason, str]]
"""Failed checks, each with what was expected and what was found."""


def _manifest_reasons(work_unit: WorkUnit, manifest: ResultManifest) -> _Said:
    said: _Said = []
    if manifest.work_unit_id != work_unit.id:
        said.append(
            (
                EvidenceChainReason.MANIFEST_WORK_UNIT_ID,
                differs(
                    "manifest.work_unit_id",
                    "the work unit's id",
                    work_unit.id,
                    manifest.work_unit_id,
                ),
            )
        )
    if manifest.work_unit_version != work_unit.version:
        said.append(
            (
                EvidenceChainReason.MANIFEST_WORK_UNIT_VERSION,
                differs(
                    "manifest.work_unit_version",
                    "the work unit's version",
                    work_unit.version,
                    manifest.work_unit_version,
                ),
            )
        )
    if manifest.work_unit_digest != work_unit.digest:
        said.append(
            (
                EvidenceChainReason.MANIFEST_WORK_UNIT_DIGEST,
                differs(
                    "manifest.work_unit_digest",
                    "the work unit's digest",
                    work_unit.digest,
                    manifest.work_unit_digest,
                ),
            )
        )
    return said


# What a verification must name, as the manifest and work unit it checks say it:
# (reason, verification field, what it is compared with, expected value, found value).
# The IDKMesh provenance checks first (exactly this manifest, exactly this work unit,
# this attempt), then independence (the verifier saw this worker).
_NAMED: Final[
    tuple[
        tuple[
            EvidenceChainReason,
            str,
            str,
            Callable[[WorkUnit, ResultManifest], object],
            Callable[[VerificationResult], object],
        ],
        ...,
    ]
] = (
    (
        EvidenceChainReason.VERIFICATION_MANIFEST_ID,
        "result_manifest_id",
        "the manifest's id",
        lambda _w, m: m.id,
        lambda v: v.result_manifest_id,
    ),
    (
        EvidenceChainReason.VERIFICATION_MANIFEST_DIGEST,
        "result_manifest_digest",
        "the manifest's digest",
        lambda _w, m: m.digest,
        lambda v: v.result_manifest_digest,
    ),
    (
        EvidenceChainReason.VERIFICATION_WORK_UNIT_ID,
        "work_unit_id",
        "the work unit's id",
        lambda w, _m: w.id,
        lambda v: v.work_unit_id,
    ),
    (
        EvidenceChainReason.VERIFICATION_WORK_UNIT_VERSION,
        "work_unit_version",
        "the work unit's version",
        lambda w, _m: w.version,
        lambda v: v.work_unit_version,
    ),
    (
        EvidenceChainReason.VERIFICATION_WORK_UNIT_DIGEST,
        "work_unit_digest",
        "the work unit's digest",
        lambda w, _m: w.digest,
        lambda v: v.work_unit_digest,
    ),
    (
        EvidenceChainReason.VERIFICATION_ATTEMPT,
        "attempt",
        "the manifest's attempt",
        lambda _w, m: m.attempt,
        lambda v: v.attempt,
    ),
    (
        EvidenceChainReason.OBSERVED_OTHER_WORKER,
        "independence.worker_id_observed",
        "the manifest's worker",
        lambda _w, m: m.worker.id,
        lambda v: v.independence.worker_id_observed,
    ),
)


def _verification_reasons(
    work_unit: WorkUnit, manifest: ResultManifest, verification: VerificationResult
) -> _Said:
    said: _Said = []
    for reason, field, what, expected_of, found_of in _NAMED:
        expected, found = expected_of(work_unit, manifest), found_of(verification)
        if found != expected:
            said.append((reason, differs(f"verification.{field}", what, expected, found)))
    # Independence: the verifier is not the worker it observed.
    if not verification.independence.independent_from_worker:
        said.append(
            (
                EvidenceChainReason.NOT_INDEPENDENT,
                "verification.independence.independent_from_worker: expected true, got false",
            )
        )
    elif verification.verifier.id == manifest.worker.id:
        said.append(
            (
                EvidenceChainReason.NOT_INDEPENDENT,
                f"verification.verifier.id: expected someone other than the worker, got the"
                f" worker's own id {short_repr(manifest.worker.id)}",
            )
        )
    # Coverage: every validator the work unit requires ran as a required check.
    required = {check.id for check in verification.checks if check.required}
    if not required.issuperset(work_unit.required_validators):
        missing = [v for v in work_unit.required_validators if v not in required]
        said.append(
            (
                EvidenceChainReason.REQUIRED_CHECK_MISSING,
                f"verification.checks: expected a required check for each of the work unit's"
                f" required validators, missing {_ids(missing)}",
            )
        )
    unpassed = [
        f"{short_repr(check.id)} {check.status}"
        for check in verification.checks
        if check.required and check.status is not CheckStatus.PASSED
    ]
    if verification.recommendation is Recommendation.ACCEPT_CANDIDATE and unpassed:
        said.append(
            (
                EvidenceChainReason.ACCEPT_WITH_UNPASSED_CHECK,
                f"verification.recommendation: expected no accept_candidate while a required"
                f" check did not pass, got accept_candidate with {_ids(unpassed, quoted=True)}",
            )
        )
    return said


def _ids(values: list[str], *, quoted: bool = False, limit: int = 5) -> str:
    """A bounded list of check ids for a message."""
    shown = ", ".join(v if quoted else short_repr(v) for v in values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


@boundary
def check_manifest_chain(
    work_unit: WorkUnit, manifest: ResultManifest
) -> EvidenceChain | EvidenceChainRefusal:
    """Check that ``manifest`` reports on exactly ``work_unit`` (id, version, digest).

    Returns:
        A `EvidenceChain` with ``verification_semantic_digest=None``, or an `EvidenceChainRefusal`.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    return _outcome(work_unit, manifest, None, _manifest_reasons(work_unit, manifest))


@boundary
def verdict_from_checks(
    checks: tuple[CheckResult, ...], worker_status: WorkerStatus
) -> tuple[VerificationStatus, Recommendation]:
    """A verifier's overall status and recommendation, following its checks.

    The checks that count are the required ones, or all of them when none is
    required. Rules, in order:

    - no check at all: ``inconclusive`` / ``insufficient_evidence`` (an empty
      verifier is not verification, never a vacuous pass);
    - any counted check failed: ``failed`` / ``reject_candidate``;
    - every counted check passed: ``passed`` / ``accept_candidate``, or ``escalate``
      when the worker itself does not report success (a human should look);
    - any counted check errored: ``error`` / ``insufficient_evidence``;
    - otherwise (skipped, inconclusive): ``inconclusive`` / ``insufficient_evidence``.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    counted = [c.status for c in checks if c.required] or [c.status for c in checks]
    if not counted:
        return VerificationStatus.INCONCLUSIVE, Recommendation.INSUFFICIENT_EVIDENCE
    if CheckStatus.FAILED in counted:
        return VerificationStatus.FAILED, Recommendation.REJECT_CANDIDATE
    if all(status is CheckStatus.PASSED for status in counted):
        if worker_status is WorkerStatus.SUCCEEDED:
            return VerificationStatus.PASSED, Recommendation.ACCEPT_CANDIDATE
        return VerificationStatus.PASSED, Recommendation.ESCALATE
    if CheckStatus.ERROR in counted:
        return VerificationStatus.ERROR, Recommendation.INSUFFICIENT_EVIDENCE
    return VerificationStatus.INCONCLUSIVE, Recommendation.INSUFFICIENT_EVIDENCE


@boundary
def check_evidence_chain(
    work_unit: WorkUnit, manifest: ResultManifest, verification: VerificationResult
) -> EvidenceChain | EvidenceChainRefusal:
    """Check every cross-record binding of one attempt's evidence.

    Checks, in order (each yields its `EvidenceChainReason` when it fails): the manifest's
    work unit id, version and digest; the verification's manifest id and digest,
    work unit id, version and digest, and attempt; the observed worker; verifier
    independence; required-check coverage; acceptance despite an unpassed required check.

    Returns:
        `EvidenceChain` when every check passes, else `EvidenceChainRefusal` listing
        every failed check.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    reasons = _manifest_reasons(work_unit, manifest)
    reasons += _verification_reasons(work_unit, manifest, verification)
    return _outcome(work_unit, manifest, verification, reasons)


def _outcome(
    work_unit: WorkUnit,
    manifest: ResultManifest,
    verification: VerificationResult | None,
    said: _Said,
) -> EvidenceChain | EvidenceChainRefusal:
    semantic = None if verification is None else verification.semantic_digest
    if said:
        return seal(
            EvidenceChainRefusal,
            work_unit_digest=work_unit.digest,
            result_manifest_digest=manifest.digest,
            verification_semantic_digest=semantic,
            reason_codes=tuple(code for code, _ in said),
            explanation="evidence does not bind: "
            + "; ".join(f"{phrase} [{code}]" for code, phrase in said),
        )
    return EvidenceChain(
        work_unit_digest=work_unit.digest,
        result_manifest_digest=manifest.digest,
        verification_semantic_digest=semantic,
    )
