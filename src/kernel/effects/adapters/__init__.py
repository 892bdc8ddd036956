"""Worker and verifier adapters, registered explicitly (`AdapterRegistry`).

- `kernel.effects.adapters.base`: the protocols, `ConfigSource`, `note`, the registry;
- `kernel.effects.adapters.fixture`: deterministic fixture workers and verifier;
- `kernel.effects.adapters.command`: workers and verifiers that run real commands in
  sandboxes;
- `kernel.effects.adapters.prediction`: worker ``patch``, a candidate given as a patch;
- `kernel.effects.adapters.patch`: a git patch read as its list of changed files.

`builtin_registry` builds a fresh registry of the built-in adapters; a caller adds its
own kinds to it (a kind already present is an error, never a silent replacement).
"""

from __future__ import annotations

from kernel.effects.adapters import command, fixture, prediction
from kernel.effects.adapters.base import AdapterRegistry

__all__ = ["AdapterRegistry", "builtin_registry"]


def builtin_registry() -> AdapterRegistry:
    """A new registry holding the fixture, ``command`` and ``patch`` adapters."""
    registry = AdapterRegistry()
    fixture.register(registry)
    command.register(registry)
    prediction.register(registry)
    return registry
