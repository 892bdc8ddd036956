"""Agreement is not verification: consensus over runs (`consensus`), commit admission
(`commit_admission`) and run admission (`run_admission`)."""

from __future__ import annotations

__all__: list[str] = []
