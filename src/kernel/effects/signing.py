"""SSH signatures over decision records, through ``ssh-keygen -Y`` (ADR-0006 §2).

The signed message is `kernel.gate.decision_message` (the record's canonical JSON
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
import tempfile
from pathlib import Path
from typing import Final

from kernel.decision import HumanDecisionRecord
from kernel.errors import EffectError
from kernel.gate import (
    DECISION_SIGNATURE_NAMESPACE,
    SignatureCheck,
    SignatureStatus,
    decision_message,
)
from kernel.identity import sha256_bytes

__all__ = ["check_decision_signature", "sign_decision", "signature_path"]

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
    if not key.is_file():
        raise EffectError(f"{key}: signing key not found")
    done = _ssh_keygen(
        ["-Y", "sign", "-f", str(key), "-n", DECISION_SIGNATURE_NAMESPACE],
        decision_message(record),
    )
    if done.returncode != 0 or not done.stdout.startswith(b"-----BEGIN SSH SIGNATURE-----"):
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise EffectError(f"{key}: cannot sign ({why[-1] if why else 'ssh-keygen failed'})")
    return done.stdout


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
    if not allowed_signers.is_file():
        raise EffectError(f"{allowed_signers}: allowed signers file not found")
    if signature is None:
        return SignatureCheck(status=SignatureStatus.UNSIGNED, **base)
    with tempfile.TemporaryDirectory(prefix="kernel-sig-") as scratch:
        sig_file = Path(scratch) / "decision.sig"
        sig_file.write_bytes(signature)
        verified = _ssh_keygen(
            [
                "-Y", "verify", "-f", str(allowed_signers), "-I", principal,
                "-n", DECISION_SIGNATURE_NAMESPACE, "-s", str(sig_file),
            ],
            message,
        )  # fmt: skip
        if verified.returncode == 0:
            return SignatureCheck(status=SignatureStatus.VALID, **base)
        valid_for_someone = _ssh_keygen(
            ["-Y", "check-novalidate", "-n", DECISION_SIGNATURE_NAMESPACE, "-s", str(sig_file)],
            message,
        )
    status = (
        SignatureStatus.SIGNER_NOT_ALLOWED
        if valid_for_someone.returncode == 0
        else SignatureStatus.INVALID
    )
    return SignatureCheck(status=status, **base)
