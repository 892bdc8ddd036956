"""The foundation: canonical JSON and SHA-256 (`identity`), the record codec (`codec`) and
the field vocabulary, `Refusal` and `@boundary` (`values`). Users import from `kernel`."""

from __future__ import annotations

__all__: list[str] = []
