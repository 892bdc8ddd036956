"""Which import rule an import breaks (`kernel.guard.names`' import rules and
`kernel.guard.shadows`' reach-through), answered once per rule and targets.

The rules it enforces are listed in `kernel.guard.scan`'s docstring; a C twin or real
name of a module (``_socket``, ``posix``) is the module it implements.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernel.guard.model import Rule, ViolationCode
from kernel.guard.patterns import TWIN_HEADS, module_set, twin_of

__all__: list[str] = []

_PROBLEMS: dict[tuple[int, tuple[str, ...]], tuple[Rule, tuple[ViolationCode, str] | None]] = {}
"""`_import_problem` by (rule, targets): a project imports the same modules in many
files. Keyed by the rule's identity (hashing an attrs record per import costs more than
the answer), which the entry keeps alive, so the identity is never reused."""


def _import_problem(rule: Rule, targets: tuple[str, ...]) -> tuple[ViolationCode, str] | None:
    key = (id(rule), targets)
    known = _PROBLEMS.get(key)
    if known is not None and known[0] is rule:
        return known[1]
    found = _find_import_problem(rule, targets)
    if len(_PROBLEMS) > 65536:
        _PROBLEMS.clear()
    _PROBLEMS[key] = (rule, found)
    return found


def _rules(rule: Rule, head: str) -> bool:
    """Can an import under the top-level name ``head`` break ``rule``? Not when it has no
    allow list and no forbid-imports pattern can match under ``head``, nor under a C
    twin's (most imports of a project: no pattern under their package)."""
    return (
        rule.allow_imports is not None
        or head in TWIN_HEADS
        or module_set(rule.forbid_imports).may_match_under(head)
    )


def _ruled_under(rules: Sequence[Rule], head: str) -> bool:
    """Can an import under the top-level name ``head`` break one of ``rules``?"""
    return any(_rules(rule, head) for rule in rules)


def _find_import_problem(rule: Rule, targets: tuple[str, ...]) -> tuple[ViolationCode, str] | None:
    if not _rules(rule, targets[0].split(".", 1)[0]):  # every target is the first or under it
        return None
    forbidden = module_set(rule.forbid_imports)
    # A C twin or real name (`_socket`, `posix`) is the module it implements.
    for t in (*targets, *(twin for name in targets for twin in twin_of(name))):
        pattern = forbidden.match(t)
        if pattern is not None:
            return ViolationCode.FORBIDDEN_IMPORT, pattern
    if rule.allow_imports is not None:
        allowed = module_set(rule.allow_imports)
        if all(allowed.match(t) is None for t in targets):
            return ViolationCode.IMPORT_NOT_ALLOWED, ""
    return None
