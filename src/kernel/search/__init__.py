"""ADR-0232: the search records (`records`) and the candidate-attempt-run binding
(`binding`). Users import from `kernel`."""

from __future__ import annotations

__all__: list[str] = []
