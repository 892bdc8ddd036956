"""Worker adapter ``patch``: a candidate that is already a patch (a model's prediction).

A suite of SWE-bench predictions (`kernel.effects.suite`) judges each model patch
directly: no worker script runs, the patch bytes are the candidate. `register` adds the
kind to an `AdapterRegistry` (`kernel.effects.adapters.builtin_registry` does).

Entry (an item of the config's ``attempts``; the path relative to the config)::

    {"attempt_id": "a1", "adapter": "patch", "worker_id": "model-x",
     "patch": "patches/model-x.patch"}

Rules enforced:

- the patch is read once when the config loads (at most 256 MiB; a missing or unreadable
  file is a `ConfigError`); an empty file is the empty candidate (nothing changed);
- the attempt writes the bytes into its own scratch folder and reports a
  `ResultManifest` with one ``patch`` artifact and worker status ``succeeded``: the
  independent verifier decides everything else;
- provenance ``worker:<attempt>`` is SHA-256 over the patch digest and the worker id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

import attrs

from kernel.effects.adapters.base import (
    AdapterRegistry,
    AttemptContext,
    ConfigSource,
    WorkerAdapter,
    WorkerFailed,
    WorkerProduced,
    note,
)
from kernel.effects.run_config import relative
from kernel.records.codec import Record
from kernel.records.identity import canonical_json, sha256_bytes, sha256_hex
from kernel.records.values import NonBlank
from kernel.run.verification import Actor, ActorType, Artifact, ResultManifest, WorkerStatus

__all__ = ["ADAPTER_KIND", "ADAPTER_VERSION", "PatchEntry", "PatchWorker", "register"]

ADAPTER_KIND: Final = "patch"
ADAPTER_VERSION: Final = "1"
PATCH_FILE: Final = "candidate.patch"
_MAX_PATCH_BYTES: Final = 256 << 20


@attrs.frozen(kw_only=True)
class PatchWorker:
    """Worker ``patch``: reports a given patch as its candidate."""

    attempt_id: str
    worker_id: str
    patch: bytes = attrs.field(repr=False)
    kind: str = ADAPTER_KIND
    version: str = ADAPTER_VERSION

    def provenance(self) -> tuple[tuple[str, str], ...]:
        """The candidate's digest, bound to the worker that proposed it."""
        described = {"patch": sha256_bytes(self.patch), "worker_id": self.worker_id}
        return ((f"worker:{self.attempt_id}", sha256_hex(described)),)

    def run(self, context: AttemptContext) -> WorkerProduced | WorkerFailed:
        """Write the patch as the candidate and its manifest into the attempt's scratch."""
        if context.scratch is None:
            return WorkerFailed(message="patch worker needs a scratch folder")
        candidate = context.scratch / "candidate"
        candidate.mkdir()
        # Private scratch, removed after the run: plain writes, no fsync needed.
        (candidate / PATCH_FILE).write_bytes(self.patch)
        unit = context.work_unit
        manifest = ResultManifest(
            id=f"{context.attempt_id}/result-manifest",
            work_unit_id=unit.id,
            work_unit_version=unit.version,
            work_unit_digest=unit.digest,
            attempt=1,
            worker=Actor(
                id=self.worker_id,
                type=ActorType.AGENT,
                adapter=self.kind,
                adapter_version=self.version,
            ),
            status=WorkerStatus.SUCCEEDED,
            artifacts=(
                Artifact(
                    id="patch",
                    locator=PATCH_FILE,
                    digest=sha256_bytes(self.patch),
                    media_type="text/x-diff",
                ),
            ),
            claims=(),
        )
        manifest_path = context.scratch / "result-manifest.json"
        manifest_path.write_bytes(canonical_json(manifest.to_dict()))
        note("patch_bytes", len(self.patch))
        return WorkerProduced(
            manifest_path=manifest_path,
            manifest_locator=f"{context.attempt_id}/result-manifest.json",
            candidate_root=candidate,
            candidate_locator=f"{context.attempt_id}/candidate",
        )


@attrs.frozen(kw_only=True)
class PatchEntry(Record):
    """A ``patch`` attempt of a run config: a given patch as the candidate."""

    attempt_id: NonBlank
    """The attempt's id."""
    adapter: Literal["patch"]
    """The worker adapter."""
    worker_id: NonBlank
    """The worker's id in the run record."""
    patch: NonBlank = attrs.field(validator=relative)
    """The patch file (relative to the config)."""


def _patch_worker(entry: Mapping[str, object], source: ConfigSource) -> WorkerAdapter:
    where = f"attempts[{entry.get('attempt_id')!r}]"
    read = source.parse(PatchEntry, entry, where)
    locator = read.patch
    path = source.reads(source.base_dir / locator)
    try:
        with path.open("rb") as handle:
            data = handle.read(_MAX_PATCH_BYTES + 1)
    except OSError as e:
        raise source.error(f"{where}.patch", f"{locator!r}: {e.strerror}") from e
    if len(data) > _MAX_PATCH_BYTES:
        raise source.error(f"{where}.patch", f"{locator!r} is larger than 256 MiB")
    return PatchWorker(attempt_id=read.attempt_id, worker_id=read.worker_id, patch=data)


def register(registry: AdapterRegistry) -> None:
    """Add the ``patch`` worker to ``registry``.

    Raises:
        DuplicateAdapterError: kind ``patch`` is already registered.
    """
    registry.add_worker(ADAPTER_KIND, _patch_worker, entry=PatchEntry)
