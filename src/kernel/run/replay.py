"""Replay of a saved run record against a fresh run of the same config, in explicit modes.

Pure: no I/O, no clock, no environment. The effect shell re-runs the config and hands
both documents here.

Replay is a provenance / reproducibility check, never a correctness proof. Modes
(seed 001, "Deterministic replay"; each is named in the `ReplayCheck` it yields and
none is substituted for another):

``exact`` (the default for runs that declare nothing)
    The whole canonical record is equal: ``SHA256(canonical(R)) == SHA256(canonical(R'))``.
``provenance``
    Same run id, orchestrator, work unit, config digest, verifier policy digest,
    provenance inputs (baseline tree, worker and verifier command digests), and the same
    attempts (ids, order, adapters). Outputs may differ.
``semantic``
    Provenance, plus the verification semantics of every attempt: control state, error
    code, the worker's self-reported status, verification status, recommendation and
    checks (id, required, status). Candidate bytes (manifest and verification digests)
    and error prose may differ.
``nondeterministic``
    Only for runs whose config declares ``"replay": "nondeterministic"`` (model/agent
    workers): provenance is checked; both records' digests are recorded in the check but
    outputs are never compared. Asking for it on a run that does not declare it is
    refused (`ReplayReason.MODE_NOT_DECLARED`): it would silently weaken ``exact``.

Rules enforced by `check_replay`, in order (each failure yields its reason code):

- R1 the saved record's ``config_digest`` is the config's digest (a run of *this*
  config), before anything else;
- R2 ``nondeterministic`` needs the declaration (above);
- R3 the saved record is canonical JSON (else it cannot be compared at all);
- R4 the mode's projection of the saved and replayed records is equal; the first
  differing JSON path is named.

Outcome: `check_replay` returns the `ReplayCheck` of a match, or a `ReplayRefusal`
holding the check (``match`` false) and its reason codes; callers ``match`` on the
type, and `kernel.records.values.unwrap` raises the refusal.

Identity: `ReplayRefusal.refusal_id` self-seals over its check and reason codes;
`ReplayCheck` has no id; its ``*_digest`` fields are SHA-256 over canonical
JSON of, respectively, the whole saved record, the whole replayed record, and each
record's projection in the check's mode.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from kernel.errors import CanonicalizationError, ParameterValueError
from kernel.records.codec import UNSEALED, Identity, Record, field_error
from kernel.records.identity import sha256_hex
from kernel.records.values import Digest, OptionalDigest, Refusal, boundary
from kernel.run.record import DeclaredReplay, RunRecord, first_difference

__all__ = [
    "REPLAY_CHECK_KIND",
    "ReplayCheck",
    "ReplayMode",
    "ReplayReason",
    "ReplayRefusal",
    "check_replay",
    "default_mode",
    "preflight",
    "projection",
]

REPLAY_CHECK_KIND: Final = "kernel-replay-check"


class ReplayMode(enum.StrEnum):
    """How a replay is compared (module docstring)."""

    EXACT = "exact"
    PROVENANCE = "provenance"
    SEMANTIC = "semantic"
    NONDETERMINISTIC = "nondeterministic"


class ReplayReason(enum.StrEnum):
    """Why a replay does not match (check order R1-R4)."""

    CONFIG_DIGEST = "config_digest_mismatch"
    """R1: the saved record is not a run of this config."""
    MODE_NOT_DECLARED = "nondeterministic_not_declared"
    """R2: ``nondeterministic`` asked for a run whose config does not declare it."""
    NOT_CANONICAL = "saved_record_not_canonical"
    """R3: the saved document is not canonical-JSON encodable."""
    RECORD_MISMATCH = "record_mismatch"
    """R4: the mode's projections differ."""


def default_mode(declared: DeclaredReplay) -> ReplayMode:
    """The mode used when none is asked for: what the config declares (``exact`` if nothing)."""
    if declared is DeclaredReplay.NONDETERMINISTIC:
        return ReplayMode.NONDETERMINISTIC
    return ReplayMode.EXACT


_RUN_KEYS: Final = (
    "kind",
    "schema_version",
    "run_id",
    "orchestrator",
    "work_unit",
    "config_digest",
    "verifier_policy_digest",
    "imported_from",
    "authority",
    "provenance",
)
_ATTEMPT_KEYS: Final = ("attempt_id", "order", "adapter", "adapter_version")


def _get(value: object, key: str) -> object:
    return value.get(key) if isinstance(value, Mapping) else None


def _attempts(document: object) -> list[object]:
    attempts = _get(document, "attempts")
    return list(attempts) if isinstance(attempts, list | tuple) else []


def _semantics(attempt: object) -> dict[str, object]:
    manifest = _get(attempt, "manifest")
    verification = _get(attempt, "verification")
    checks = _get(verification, "checks")
    return {
        "state": _get(attempt, "state"),
        "error_code": _get(_get(attempt, "error"), "code"),
        "worker_status": _get(manifest, "worker_status"),
        "verification": None
        if verification is None
        else {
            "status": _get(verification, "status"),
            "recommendation": _get(verification, "recommendation"),
            "checks": [
                {k: _get(c, k) for k in ("id", "required", "status")}
                for c in (checks if isinstance(checks, list | tuple) else [])
            ],
        },
    }


def projection(document: object, mode: ReplayMode) -> object:
    """The part of a run record (JSON form) that ``mode`` compares.

    ``exact`` is the whole document; ``provenance`` and ``nondeterministic`` the run's
    provenance fields and attempt identities; ``semantic`` adds per-attempt semantics.
    Missing keys project to None, so a malformed document still compares (and differs).
    """
    if mode is ReplayMode.EXACT:
        return document
    projected: dict[str, object] = {key: _get(document, key) for key in _RUN_KEYS}
    attempts = []
    for attempt in _attempts(document):
        entry: dict[str, object] = {key: _get(attempt, key) for key in _ATTEMPT_KEYS}
        if mode is ReplayMode.SEMANTIC:
            entry.update(_semantics(attempt))
        attempts.append(entry)
    projected["attempts"] = attempts
    return projected


@attrs.frozen(kw_only=True)
class ReplayCheck(Record):
    """The outcome of one replay check; names its mode and what it compared."""

    kind: Literal["kernel-replay-check"] = REPLAY_CHECK_KIND
    """Document kind."""
    schema_version: Literal["1"] = "1"
    """Document schema version."""
    mode: ReplayMode
    """The mode compared (never silently another)."""
    declared_replay: DeclaredReplay
    """What the config declares."""
    outputs_compared: bool
    """False only in ``nondeterministic`` mode: outputs were recorded, not compared."""
    match: bool
    """True when every check of the mode passed."""
    reason_codes: tuple[ReplayReason, ...]
    """Failed checks in order; empty on a match."""
    first_difference: str | None
    """JSON path of the first difference of the compared projections, or None."""
    saved_digest: OptionalDigest
    """SHA-256 of the whole saved record (None when it is not canonical JSON)."""
    replayed_digest: OptionalDigest
    """SHA-256 of the whole replayed record (None: not re-run, R1 or R2 failed first)."""
    saved_compared_digest: OptionalDigest
    """SHA-256 of the saved record's projection in this mode (None: not canonical)."""
    replayed_compared_digest: OptionalDigest
    """SHA-256 of the replayed record's projection in this mode (None: not re-run)."""

    def __attrs_post_init__(self) -> None:
        if self.match == bool(self.reason_codes):
            raise field_error("match", "a replay check matches exactly when it has no reason")


@attrs.frozen(kw_only=True)
class ReplayRefusal(Refusal):
    """A replay that does not match in its mode: the whole check and why.

    ``refusal_id`` self-seals over ``check`` (nested form) and ``reason_codes``; the
    explanation names the mode, the codes and the first differing path.
    """

    __identity__ = Identity(field="refusal_id", seals=True)

    refusal_id: Digest = UNSEALED
    """Self-sealed id."""
    check: ReplayCheck
    """The check (``match`` false) as the replay-check document records it."""
    reason_codes: tuple[ReplayReason, ...]
    """The check's failed rules, in order (R1-R4)."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.check.match or self.check.reason_codes != self.reason_codes:
            raise field_error("check", "a replay refusal holds a mismatching check, same codes")


def _outcome(check: ReplayCheck) -> ReplayCheck | ReplayRefusal:
    if check.match:
        return check
    codes = ", ".join(check.reason_codes)
    where = check.first_difference or "(nothing compared)"
    return ReplayRefusal(
        check=check,
        reason_codes=check.reason_codes,
        explanation=(
            f"replay in {check.mode} mode does not match ({codes}): expected the saved and "
            f"the replayed record to agree on what {check.mode} compares, found the first "
            f"difference at {where} (saved {check.saved_compared_digest}, replayed "
            f"{check.replayed_compared_digest})"
        ),
    )


@boundary
def preflight(
    saved: object, *, mode: ReplayMode, declared: DeclaredReplay, config_digest: str
) -> list[ReplayReason]:
    """Checks R1 and R2, which need no re-run (an effect shell runs them first).

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
    """
    reasons: list[ReplayReason] = []
    # R1: a run of this config, before anything else.
    if _get(saved, "config_digest") != config_digest:
        reasons.append(ReplayReason.CONFIG_DIGEST)
    # R2: nondeterministic is declared, never chosen to make a mismatch go away.
    if mode is ReplayMode.NONDETERMINISTIC and declared is not DeclaredReplay.NONDETERMINISTIC:
        reasons.append(ReplayReason.MODE_NOT_DECLARED)
    return reasons


def _not_replayed(
    mode: ReplayMode,
    declared: DeclaredReplay,
    reasons: list[ReplayReason],
    saved_digest: str | None,
    saved_compared: str | None,
) -> ReplayCheck:
    """The check of a run the preflight stopped before it was re-run (nothing replayed)."""
    return ReplayCheck(
        mode=mode,
        declared_replay=declared,
        outputs_compared=mode is not ReplayMode.NONDETERMINISTIC,
        match=False,
        reason_codes=tuple(reasons),
        first_difference="$.config_digest" if ReplayReason.CONFIG_DIGEST in reasons else None,
        saved_digest=saved_digest,
        replayed_digest=None,
        saved_compared_digest=saved_compared,
        replayed_compared_digest=None,
    )


@boundary
def check_replay(
    saved: object,
    replayed: RunRecord | None,
    *,
    mode: ReplayMode,
    declared: DeclaredReplay,
    config_digest: str,
) -> ReplayCheck | ReplayRefusal:
    """Compare a saved run record (decoded JSON) with a replayed one in ``mode``.

    Args:
        saved: the saved document as read (not trusted to be a valid record).
        replayed: the record a fresh run of the config produced; None when it was not
            re-run because `preflight` failed (the check then reports only that).
        mode: the comparison asked for.
        declared: what the config declares (``nondeterministic`` needs it).
        config_digest: the digest of the config that was replayed.

    Returns:
        The `ReplayCheck` of a match, else a `ReplayRefusal` holding the check (checks
        R1-R4 in the module docstring). Never raises on bad data.

    Raises:
        ParameterTypeError: an argument is not of its annotated type.
        ParameterValueError: ``replayed`` is None although the preflight checks pass
            (misuse; a ``ValueError``).
    """
    reasons = preflight(saved, mode=mode, declared=declared, config_digest=config_digest)
    saved_projection = projection(saved, mode)
    saved_digest = saved_compared = None
    # R3: the saved document must be comparable at all.
    try:
        saved_digest = sha256_hex(saved)
        saved_compared = sha256_hex(saved_projection)
    except CanonicalizationError:
        reasons.append(ReplayReason.NOT_CANONICAL)
    if replayed is None:
        if not reasons:
            raise ParameterValueError(
                "check_replay",
                "replayed",
                "a RunRecord (replayed may be None only when the preflight checks fail)",
                "None with passing preflight checks",
            )
        return _outcome(_not_replayed(mode, declared, reasons, saved_digest, saved_compared))
    replayed_document: dict[str, Any] = replayed.to_dict()
    replayed_projection = projection(replayed_document, mode)
    replayed_compared = sha256_hex(replayed_projection)
    # R4: the mode's projections are equal.
    difference = first_difference(saved_projection, replayed_projection)
    if saved_compared is not None and saved_compared != replayed_compared:
        difference = difference or "$"
    if difference is not None and ReplayReason.NOT_CANONICAL not in reasons:
        reasons.append(ReplayReason.RECORD_MISMATCH)
    return _outcome(
        ReplayCheck(
            mode=mode,
            declared_replay=declared,
            outputs_compared=mode is not ReplayMode.NONDETERMINISTIC,
            match=not reasons,
            reason_codes=tuple(reasons),
            first_difference=difference,
            saved_digest=saved_digest,
            replayed_digest=replayed.digest,
            saved_compared_digest=saved_compared,
            replayed_compared_digest=replayed_compared,
        )
    )
