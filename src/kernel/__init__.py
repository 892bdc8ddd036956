"""kernel: honest evidence for multi-agent draft -> verify -> decide pipelines.

Frozen, content-addressed records (canonical JSON + SHA-256), pure validators that
refuse instead of guessing, and nothing that decides for the user. The export list
below is the public API; a test pins it.
"""

from kernel.codec import Identity, Record, compute_id, identity_payload, seal
from kernel.errors import (
    CanonicalizationError,
    ConfigError,
    EffectError,
    KernelError,
    RecordError,
    RefusedError,
)
from kernel.identity import canonical_json, sha256_bytes, sha256_hex
from kernel.values import BudgetCharge, Refusal, SourceSpan, unwrap

__all__ = [
    "BudgetCharge",
    "CanonicalizationError",
    "ConfigError",
    "EffectError",
    "Identity",
    "KernelError",
    "Record",
    "RecordError",
    "Refusal",
    "RefusedError",
    "SourceSpan",
    "canonical_json",
    "compute_id",
    "identity_payload",
    "seal",
    "sha256_bytes",
    "sha256_hex",
    "unwrap",
]

__version__ = "0.1.0"
