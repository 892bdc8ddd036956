"""What a human decides and what may then change a branch: the decision record
(`decision`), the commit gate (`gate`) and the hash-chained ledger (`ledger`)."""

from __future__ import annotations

__all__: list[str] = []
