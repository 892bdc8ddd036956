"""SSH signatures over decision records, through ``ssh-keygen -Y`` (ADR-0006 §2).

The signed message is `kernel.decide.gate.decision_message` (the record's canonical JSON
bytes), the namespace ``kernel-decision``; the armored signature is stored next to
the record as ``<record>.sig``. Verification uses git's ``allowed_signers`` format and
the record's ``decider.id`` as the principal:

- ``ssh-keygen -Y verify`` succeeds -> ``valid``;
- it fails, but ``ssh-keygen -Y check-novalidate`` (the signature is good for the
  message, whoever made it) succeeds -> ``signer_not_allowed``;
- both fail -> ``invalid``; no signature file -> ``unsigned``.

``ssh-keygen`` runs with a fixed locale and no standard input but the message; a
missing ``ssh-keygen``, an unreadable key or allowed-signers file is an `EffectError`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

from kernel.decide.decision import HumanDecisionRecord
from kernel.decide.gate import (
    DECISION_SIGNATURE_NAMESPACE,
    SignatureCheck,
    SignatureStatus,
    decision_message,
)
from kernel.decide.merkle import TreeHead
from kernel.effects.sandbox.scratch import private_tempdir
from kernel.errors import EffectError
from kernel.records.identity import canonical_json, sha256_bytes

__all__ = [
    "TREE_HEAD_NAMESPACE",
    "armored",
    "check_decision_signature",
    "check_tree_head_signature",
    "one_line",
    "sign_decision",
    "sign_tree_head",
    "signature_path",
    "tree_head_message",
]

TREE_HEAD_NAMESPACE: Final = "kernel-ledger-head"
"""The ``ssh-keygen -Y`` namespace of ledger tree head signatures."""

_TIMEOUT_S: Final = 60


def signature_path(record_path: Path | str) -> Path:
    """Where a decision record's detached signature lives: ``<record>.sig``."""
    return Path(str(record_path) + ".sig")


def _ssh_keygen(args: list[str], message: bytes) -> subprocess.CompletedProcess[bytes]:
    program = shutil.which("ssh-keygen")
    if program is None:
        raise EffectError("ssh-keygen not found: install OpenSSH (openssh-client) to sign")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    try:
        return subprocess.run(
            [program, *args],
            input=message,
            capture_output=True,
            env=env,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EffectError(f"ssh-keygen could not run: {e}") from e


def sign_decision(record: HumanDecisionRecord, key: Path) -> bytes:
    """The armored SSH signature of ``record`` with the private key at ``key``.

    Raises:
        EffectError: no ssh-keygen, an unreadable or passphrase-protected key.
    """
    return _sign(decision_message(record), key, DECISION_SIGNATURE_NAMESPACE)


def _sign(message: bytes, key: Path, namespace: str) -> bytes:
    try:
        found = key.is_file()
    except OSError as e:
        raise EffectError(f"{str(key)[:200]}: unusable signing key path ({e.strerror})") from e
    if not found:
        raise EffectError(f"{str(key)[:200]}: signing key not found")
    done = _ssh_keygen(["-Y", "sign", "-f", str(key), "-n", namespace], message)
    if done.returncode != 0 or not done.stdout.startswith(_ARMOR_BEGIN):
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise EffectError(f"{key}: cannot sign ({why[-1] if why else 'ssh-keygen failed'})")
    return done.stdout


_ARMOR_BEGIN: Final = b"-----BEGIN SSH SIGNATURE-----"
_ARMOR_END: Final = b"-----END SSH SIGNATURE-----"


def tree_head_message(head: TreeHead) -> bytes:
    """The bytes a tree head signature covers: the head's canonical JSON."""
    return canonical_json(head.to_dict())


def sign_tree_head(head: TreeHead, key: Path) -> bytes:
    """The armored SSH signature of a ledger tree head (namespace ``kernel-ledger-head``).

    Raises:
        EffectError: no ssh-keygen, an unreadable or passphrase-protected key.
    """
    return _sign(tree_head_message(head), key, TREE_HEAD_NAMESPACE)


def one_line(signature: bytes) -> str:
    """An armored signature as one base64 line (a commit trailer's value)."""
    body = signature.replace(_ARMOR_BEGIN, b"").replace(_ARMOR_END, b"")
    return b"".join(body.split()).decode("ascii", "replace")


def armored(line: str) -> bytes:
    """`one_line` undone."""
    data = line.strip().encode("ascii", "replace")
    rows = [data[i : i + 70] for i in range(0, len(data), 70)]
    return b"\n".join([_ARMOR_BEGIN, *rows, _ARMOR_END]) + b"\n"


def check_tree_head_signature(
    head: TreeHead, signature: bytes, allowed_signers: Path, principal: str
) -> SignatureStatus:
    """Check a tree head's signature for ``principal`` (as `check_decision_signature`).

    Raises:
        EffectError: no ssh-keygen, or the allowed-signers file is missing.
    """
    return _check(
        tree_head_message(head), signature, allowed_signers, principal, TREE_HEAD_NAMESPACE
    )


def check_decision_signature(
    record: HumanDecisionRecord, signature: bytes | None, allowed_signers: Path
) -> SignatureCheck:
    """Check ``signature`` over ``record`` for the principal ``record.decider.id``.

    Raises:
        EffectError: no ssh-keygen, or the allowed-signers file is missing.
    """
    message = decision_message(record)
    principal = record.decider.id
    base = {"principal": principal, "message_digest": sha256_bytes(message)}
    if signature is None:
        _allowed(allowed_signers)
        return SignatureCheck(status=SignatureStatus.UNSIGNED, **base)
    status = _check(message, signature, allowed_signers, principal, DECISION_SIGNATURE_NAMESPACE)
    return SignatureCheck(status=status, **base)


def _allowed(allowed_signers: Path) -> None:
    try:
        found = allowed_signers.is_file()
    except OSError as e:
        raise EffectError(f"{str(allowed_signers)[:200]}: unusable path ({e.strerror})") from e
    if not found:
        raise EffectError(f"{str(allowed_signers)[:200]}: allowed signers file not found")


def _check(
    message: bytes, signature: bytes, allowed_signers: Path, principal: str, namespace: str
) -> SignatureStatus:
    _allowed(allowed_signers)
    with private_tempdir("sig") as scratch:
        sig_file = Path(scratch) / "message.sig"
        sig_file.write_bytes(signature)
        verified = _ssh_keygen(
            [
                "-Y", "verify", "-f", str(allowed_signers), "-I", principal,
                "-n", namespace, "-s", str(sig_file),
            ],
            message,
        )  # fmt: skip
        if verified.returncode == 0:
            return SignatureStatus.VALID
        valid_for_someone = _ssh_keygen(
            ["-Y", "check-novalidate", "-n", namespace, "-s", str(sig_file)], message
        )
    if valid_for_someone.returncode == 0:
        return SignatureStatus.SIGNER_NOT_ALLOWED
    return SignatureStatus.INVALID
