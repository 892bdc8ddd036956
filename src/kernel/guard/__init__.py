"""Static guard: a policy of allowed imports, forbidden imports and forbidden calls,
read from ``pyproject.toml`` or from an ADR's fenced ``guard`` blocks, checked over
Python source with `ast`.

Rules this package enforces (details in each module):

- `kernel.guard.policy`: the policy shape and its validation (unusable policy ->
  `kernel.errors.ConfigError` naming the file and key; no policy -> refused);
- `kernel.guard.scan`: decoding as Python does, resolution of aliases, relative/dynamic
  imports, ``getattr``, re-binding, scopes, ``builtins``, reach-through of installed
  modules, ``TYPE_CHECKING``, annotations, reflection and star imports; suppressions
  (its passes: imports and import rules in `kernel.guard.names`, shadowing in
  `kernel.guard.shadows`, syntax helpers in `kernel.guard.syntax`, installed modules
  read from source in `kernel.guard.installed`);
- `kernel.guard.engine`: modules by path (`kernel.guard.discover`), coverage (fail
  closed), the content-hash caches (`kernel.guard.cache`), parsing in one process or
  several (`kernel.guard.pool`), transitive reach and layers (`kernel.guard.graph`);
- `kernel.guard.output`: text, JSON, SARIF 2.1.0 and GitHub annotations.

Checking uses only `ast` and `symtable`: every row of docs/guard.md's capability
table is caught from the syntax tree, a binding table and CPython's own scope analysis;
each evasion row is proven at run time by tests/static_guards. `kernel.guard.effects`
follows installed code's source (KG012), `kernel.guard.trace` is the dynamic guard
(an audit hook, KG013), and `kernel.guard.codemod` writes suppressions through libcst.
"""

from __future__ import annotations

# Not `typing.TYPE_CHECKING`: a replayed warm `kernel guard` loads this package and
# nothing it does not need (type checkers treat the name alike).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from kernel.guard.engine import (
        DEFAULT_CACHE_DIR,
        check_paths,
        check_source,
        check_tree,
        discover_modules,
        tool_version,
    )
    from kernel.guard.model import (
        ChainLink,
        GuardReport,
        Policy,
        Rule,
        Violation,
        ViolationCode,
    )
    from kernel.guard.output import FORMATS, render
    from kernel.guard.policy import (
        discover_policy,
        load_policy,
        markdown_guard_blocks,
        policy_hash,
    )

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

_ENGINE = frozenset(
    {"DEFAULT_CACHE_DIR", "check_paths", "check_source", "check_tree", "discover_modules",
     "tool_version"}
)  # fmt: skip
_MODEL = frozenset({"ChainLink", "GuardReport", "Policy", "Rule", "Violation", "ViolationCode"})
_OUTPUT = frozenset({"FORMATS", "render"})
_POLICY = frozenset({"discover_policy", "load_policy", "markdown_guard_blocks", "policy_hash"})


def __getattr__(name: str) -> object:
    """Load the submodule defining ``name`` on first use (PEP 562): ``kernel guard``'s
    warm replay (`kernel.guard.fastpath`) then never loads the rest of the guard."""
    if name in _ENGINE:
        from kernel.guard import engine as module
    elif name in _MODEL:
        from kernel.guard import model as module  # type: ignore[no-redef]
    elif name in _OUTPUT:
        from kernel.guard import output as module  # type: ignore[no-redef]
    elif name in _POLICY:
        from kernel.guard import policy as module  # type: ignore[no-redef]
    else:
        raise AttributeError(f"module 'kernel.guard' has no attribute {name!r}")
    return getattr(module, name)
