"""Static guard: a policy of allowed imports, forbidden imports and forbidden calls,
read from ``pyproject.toml`` or from an ADR's fenced ``guard`` blocks, checked over
Python source with `ast`.

Rules this package enforces (details in each module):

- `kernel.guard.policy`: the policy shape and its validation (unusable policy ->
  `kernel.errors.ConfigError` naming the file and key; no policy -> refused);
- `kernel.guard.scan`: resolution of aliases, relative/dynamic imports, ``getattr``,
  re-binding, ``builtins``, ``TYPE_CHECKING`` and star imports; one finding per break;
- `kernel.guard.engine`: modules by path, the content-hash cache, transitive reach;
- `kernel.guard.output`: text, JSON and SARIF 2.1.0.

Only `ast` is used (no libcst): every row of docs/guard.md's capability table is caught
from the syntax tree plus a flow-insensitive binding table.
"""

from __future__ import annotations

from kernel.guard.engine import (
    DEFAULT_CACHE_DIR,
    check_paths,
    check_source,
    check_tree,
    discover_modules,
    tool_version,
)
from kernel.guard.model import ChainLink, GuardReport, Policy, Rule, Violation, ViolationCode
from kernel.guard.output import FORMATS, render
from kernel.guard.policy import discover_policy, load_policy, markdown_guard_blocks, policy_hash

__all__ = [
    "DEFAULT_CACHE_DIR",
    "FORMATS",
    "ChainLink",
    "GuardReport",
    "Policy",
    "Rule",
    "Violation",
    "ViolationCode",
    "check_paths",
    "check_source",
    "check_tree",
    "discover_modules",
    "discover_policy",
    "load_policy",
    "markdown_guard_blocks",
    "policy_hash",
    "render",
    "tool_version",
]
