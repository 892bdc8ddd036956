"""SHA-256 of raw bytes: the half of `kernel.records.identity` that needs no JSON.

`kernel.records.identity` owns every digest and re-exports these three; they live here so
that code hashing only bytes (the guard hashes each file it reads) imports `hashlib` alone,
not orjson and the modules orjson loads (``datetime``, ``uuid``, ``dataclasses``): a cold
``kernel guard`` pays for no JSON encoder it never calls. Nothing here is defined twice:
``identity`` imports these, it does not repeat them.
"""

from __future__ import annotations

import hashlib

__all__ = ["Sha256Stream", "sha256_bytes", "sha256_digest"]


def sha256_bytes(data: bytes) -> str:
    """SHA-256 of raw bytes (an artifact, a captured output) as lowercase hex.

    Raises:
        TypeError: ``data`` is not bytes-like (a ``str`` must be encoded first).
    """
    return hashlib.sha256(data).hexdigest()


def sha256_digest(data: bytes) -> bytes:
    """SHA-256 of raw bytes as its 32 bytes: what a Merkle tree hashes (RFC 9162 leaf and
    node hashes take and give raw digests; a hex round trip per hash is measurable in a
    ledger append).

    Raises:
        TypeError: ``data`` is not bytes-like.
    """
    return hashlib.sha256(data).digest()


class Sha256Stream:
    """Incremental SHA-256 for streamed bytes (captured outputs, artifacts)."""

    __slots__ = ("_hash", "size")

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.size = 0
        """Number of bytes fed so far."""

    def update(self, chunk: bytes | bytearray | memoryview) -> None:
        """Feed the next chunk."""
        self._hash.update(chunk)
        self.size += len(chunk)

    def hexdigest(self) -> str:
        """Digest of every chunk fed so far (64 lowercase hex)."""
        return self._hash.hexdigest()
