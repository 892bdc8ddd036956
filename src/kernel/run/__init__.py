"""One run and what is checked of it: work units and verification (`verification`), the run
record (`record`), replay (`replay`), the evidence report (`report`) and suites (`suite`)."""

from __future__ import annotations

__all__: list[str] = []
