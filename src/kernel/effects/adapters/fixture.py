"""Deterministic fixture adapters (no processes): canned workers and a policy verifier.

- worker ``fixture-result``: a canned result manifest + candidate folder;
- worker ``fixture-failure``: a canned failure message;
- verifier ``fixture-policy``: checks the candidate against a verifier policy with the
  checks ``artifact-digest``, ``candidate-scope`` and ``independent-acceptance``.

Rules enforced: the candidate folder is listed without following symlinks; the
artifact is read only when its locator is confined to the candidate folder and bounded
by the policy's ``max_candidate_bytes``; the candidate is parsed like any untrusted JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Final, Literal

import attrs

from kernel.effects.adapters.base import (
    AdapterRegistry,
    AttemptContext,
    ConfigSource,
    VerifierAdapter,
    WorkerAdapter,
    WorkerFailed,
    WorkerProduced,
    independent_verification,
    load_object,
)
from kernel.effects.files import load_json
from kernel.effects.run_config import relative
from kernel.errors import CanonicalizationError, KernelError, VerifierFailure
from kernel.records.codec import Record, field_error
from kernel.records.identity import canonical_json, sha256_bytes, sha256_hex
from kernel.records.parsers import plain_json
from kernel.records.values import JsonValue, NonBlank, Positive
from kernel.run.record import redact_absolute_paths
from kernel.run.verification import (
    CheckResult,
    CheckStatus,
    ResultManifest,
    VerificationResult,
    WorkUnit,
)

__all__ = [
    "FixtureFailureEntry",
    "FixturePolicy",
    "FixturePolicyEntry",
    "FixtureResultEntry",
    "POLICY_KIND",
    "FixtureFailureWorker",
    "FixturePolicyVerifier",
    "FixtureResultWorker",
    "register",
]

POLICY_KIND: Final = "kernel-fixture-verifier-policy"
_FIXTURE_VERSION: Final = "1"


@attrs.frozen(kw_only=True)
class FixtureResultWorker:
    """Worker ``fixture-result``: a canned manifest and candidate folder."""

    manifest: str
    candidate_root: str
    kind: str = "fixture-result"
    version: str = _FIXTURE_VERSION

    def run(self, context: AttemptContext) -> WorkerProduced | WorkerFailed:
        """Point at the canned outputs (the verifier reads them, not this adapter)."""
        return WorkerProduced(
            manifest_path=context.base_dir / self.manifest,
            manifest_locator=self.manifest,
            candidate_root=context.base_dir / self.candidate_root,
            candidate_locator=self.candidate_root,
        )


@attrs.frozen(kw_only=True)
class FixtureResultEntry(Record):
    """A ``fixture-result`` attempt of a run config: canned outputs."""

    attempt_id: NonBlank
    """The attempt's id."""
    adapter: Literal["fixture-result"]
    """The worker adapter."""
    result_manifest: NonBlank = attrs.field(validator=relative)
    """The canned result manifest (relative to the config)."""
    candidate_root: NonBlank = attrs.field(validator=relative)
    """The canned candidate folder (relative to the config)."""


def _fixture_result(entry: Mapping[str, object], source: ConfigSource) -> WorkerAdapter:
    where = f"attempts[{entry.get('attempt_id')!r}]"
    read = source.parse(FixtureResultEntry, entry, where)
    source.reads(source.base_dir / read.result_manifest)
    source.reads(source.base_dir / read.candidate_root)
    return FixtureResultWorker(manifest=read.result_manifest, candidate_root=read.candidate_root)


@attrs.frozen(kw_only=True)
class FixtureFailureWorker:
    """Worker ``fixture-failure``: fails with a canned message."""

    failure: str
    kind: str = "fixture-failure"
    version: str = _FIXTURE_VERSION

    def run(self, context: AttemptContext) -> WorkerProduced | WorkerFailed:
        """Fail, as configured."""
        del context
        return WorkerFailed(message=redact_absolute_paths(self.failure))


@attrs.frozen(kw_only=True)
class FixtureFailureEntry(Record):
    """A ``fixture-failure`` attempt of a run config: a canned failure."""

    attempt_id: NonBlank
    """The attempt's id."""
    adapter: Literal["fixture-failure"]
    """The worker adapter."""
    failure: NonBlank
    """The failure's message."""


def _fixture_failure(entry: Mapping[str, object], source: ConfigSource) -> WorkerAdapter:
    where = f"attempts[{entry.get('attempt_id')!r}]"
    read = source.parse(FixtureFailureEntry, entry, where)
    return FixtureFailureWorker(failure=read.failure)


# --- fixture verifier ------------------------------------------------------------------

_CHECK_DIGEST: Final = "artifact-digest"
_CHECK_SCOPE: Final = "candidate-scope"
_CHECK_ACCEPT: Final = "independent-acceptance"


@attrs.frozen(kw_only=True)
class FixturePolicyVerifier(VerifierAdapter):
    """Verifier ``fixture-policy``: deterministic checks against a verifier policy."""

    policy_id: str
    candidate_artifact_id: str
    allowed_files: frozenset[str]
    max_candidate_bytes: int
    required_canonical: bytes
    kind: str = "fixture-policy"
    version: str = _FIXTURE_VERSION

    def verify(
        self, work_unit: WorkUnit, manifest: ResultManifest, produced: WorkerProduced
    ) -> VerificationResult:
        """Run the three checks; see the module docstring."""
        root = produced.candidate_root
        if not root.is_dir() or root.is_symlink():
            raise VerifierFailure(f"{produced.candidate_locator}: candidate folder is missing")
        try:
            files = sorted(
                (p.relative_to(root).as_posix(), p.lstat().st_size)
                for p in root.rglob("*")
                if not p.is_dir() or p.is_symlink()
            )
        except OSError as e:
            raise VerifierFailure(
                f"{produced.candidate_locator}: cannot list candidate: {e.strerror}"
            ) from e
        scope_ok = all(
            name in self.allowed_files and size <= self.max_candidate_bytes for name, size in files
        )
        scope = (
            CheckStatus.PASSED if scope_ok else CheckStatus.FAILED,
            (sha256_hex([[name, size] for name, size in files]),),
        )
        artifact = next((a for a in manifest.artifacts if a.id == self.candidate_artifact_id), None)
        data: bytes | None = None
        path = root
        if artifact is not None:
            locator = PurePosixPath(artifact.locator)
            confined = not locator.is_absolute() and ".." not in locator.parts
            path = root / artifact.locator
            if confined and path.is_file() and not path.is_symlink():
                try:
                    with path.open("rb") as handle:
                        data = handle.read(self.max_candidate_bytes + 1)
                except OSError:
                    data = None
        observed = None if data is None else sha256_bytes(data)
        digest_check = (
            CheckStatus.PASSED
            if artifact is not None and observed == artifact.digest
            else CheckStatus.FAILED,
            () if observed is None else (observed,),
        )
        acceptance = self._acceptance(data, path)
        statuses = {_CHECK_DIGEST: digest_check, _CHECK_SCOPE: scope, _CHECK_ACCEPT: acceptance}
        required = set(work_unit.required_validators)
        checks = tuple(
            CheckResult(id=name, required=name in required, status=status, evidence_digests=ev)
            for name, (status, ev) in statuses.items()
        )
        return independent_verification(
            verifier_id="kernel-fixture-verifier",
            adapter=self,
            work_unit=work_unit,
            manifest=manifest,
            checks=checks,
            result_id=f"{manifest.id}/{self.policy_id}/verification",
            rationale=f"policy {self.policy_id}: "
            + ", ".join(f"{c.id}={c.status}" for c in checks),
        )

    def _acceptance(self, data: bytes | None, path: Path) -> tuple[CheckStatus, tuple[str, ...]]:
        if data is None or len(data) > self.max_candidate_bytes:
            return CheckStatus.INCONCLUSIVE, ()
        try:
            # The candidate is untrusted bytes; parse it like any JSON input.
            observed = canonical_json(load_json(path, what="candidate"))
        except (KernelError, CanonicalizationError):
            return CheckStatus.INCONCLUSIVE, (sha256_bytes(data),)
        status = CheckStatus.PASSED if observed == self.required_canonical else CheckStatus.FAILED
        return status, (sha256_bytes(observed),)


@attrs.frozen(kw_only=True)
class FixturePolicyEntry(Record):
    """The ``fixture-policy`` verifier of a run config."""

    adapter: Literal["fixture-policy"]
    """The verifier adapter."""
    policy: NonBlank = attrs.field(validator=relative)
    """The verifier policy document (relative to the config)."""


def _file_names(_instance: object, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    if not all(value):
        raise field_error(attribute.name, "expected an array of non-empty strings")


@attrs.frozen(kw_only=True)
class FixturePolicy(Record):
    """The ``fixture-policy`` verifier's policy document."""

    kind: Literal["kernel-fixture-verifier-policy"]
    """The document kind."""
    schema_version: Literal["1"]
    """The document version."""
    id: NonBlank
    """The policy's id."""
    candidate_artifact_id: NonBlank
    """The artifact of the manifest that is the candidate."""
    allowed_files: tuple[str, ...] = attrs.field(validator=_file_names)
    """The files a candidate folder may hold."""
    max_candidate_bytes: Positive
    """The largest artifact read."""
    required_json: JsonValue
    """The JSON the candidate artifact must hold (compared canonically)."""


def _fixture_policy(
    entry: Mapping[str, object], source: ConfigSource
) -> tuple[VerifierAdapter, str]:
    read = source.parse(FixturePolicyEntry, entry, "verifier")
    path = source.reads(source.base_dir / read.policy)
    document = load_object(path, "verifier policy")
    reader = ConfigSource(path=path)
    policy = reader.parse(FixturePolicy, document, "$")
    try:
        # The codec read every value; only a document nested past the limit is left.
        digest = sha256_hex(document)
    except CanonicalizationError as e:
        raise reader.error(e.path, e.reason) from e
    verifier = FixturePolicyVerifier(
        policy_id=policy.id,
        candidate_artifact_id=policy.candidate_artifact_id,
        allowed_files=frozenset(policy.allowed_files),
        max_candidate_bytes=policy.max_candidate_bytes,
        required_canonical=canonical_json(plain_json(policy.required_json)),
    )
    return verifier, digest


def register(registry: AdapterRegistry) -> None:
    """Add the fixture adapters to ``registry``.

    Raises:
        DuplicateAdapterError: one of their kinds is already registered.
    """
    registry.add_worker("fixture-result", _fixture_result, entry=FixtureResultEntry)
    registry.add_worker("fixture-failure", _fixture_failure, entry=FixtureFailureEntry)
    registry.add_verifier("fixture-policy", _fixture_policy, entry=FixturePolicyEntry)
