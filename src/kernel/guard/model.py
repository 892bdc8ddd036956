"""Records of the static guard: rules, policies, findings and reports.

Rules this module enforces:

- every record is a frozen, keyword-only attrs class (STYLE rule 1);
- a `Rule` checks something: at least one of ``allow-imports``, ``forbid-imports``,
  ``forbid-calls`` is given, and ``modules`` is not empty (STYLE rule 7);
- a `Policy` holds at least one rule and rule names are unique (an empty policy is
  refused, never vacuously true);
- finding codes form a closed `ViolationCode` enum; each code is produced by exactly
  one check of `kernel.guard.scan` / `kernel.guard.engine`.
"""

from __future__ import annotations

import enum
import functools
import re
from typing import Any

import attrs

from kernel.guard.patterns import module_matches

__all__ = [
    "ChainLink",
    "GuardReport",
    "Policy",
    "Rule",
    "Violation",
    "ViolationCode",
]


class ViolationCode(enum.StrEnum):
    """Closed set of finding codes (text, JSON and SARIF rule ids)."""

    FORBIDDEN_IMPORT = "KG001"
    """An import (static, relative or literal dynamic) matches ``forbid-imports``."""
    IMPORT_NOT_ALLOWED = "KG002"
    """The rule has ``allow-imports`` and the import matches none of it."""
    STAR_IMPORT = "KG003"
    """``from x import *`` in a guarded module: its names cannot be resolved."""
    FORBIDDEN_CALL = "KG004"
    """A reference (call, attribute read, alias, import binding) matches ``forbid-calls``."""
    UNRESOLVABLE_DYNAMIC = "KG005"
    """``__import__``/``importlib.import_module``/``getattr`` on a guarded name without
    a literal argument, or a relative import beyond the top-level package."""
    TYPING_ONLY_IMPORT = "KG006"
    """A forbidden or not-allowed import under ``if TYPE_CHECKING:`` that the rule's
    ``allow-typing-imports`` does not permit (reported apart from runtime imports)."""
    TRANSITIVE_IMPORT = "KG007"
    """A forbidden module reached through the project's own modules (``transitive``)."""
    REFLECTIVE_REACH = "KG008"
    """Reflection that no static reading can resolve: ``__builtins__``, ``globals()``,
    frame and function internals, ``__subclasses__``, importer machinery."""
    LAYER_VIOLATION = "KG009"
    """A module imports one of a higher layer of a ``layers`` rule."""
    UNPARSEABLE = "KG010"
    """The file could not be read or parsed as Python; nothing in it was checked."""
    BAD_SUPPRESSION = "KG011"
    """A ``# kernel-guard: ignore[CODE]`` comment without a reason, or one that
    suppresses no finding on its line."""
    RUNTIME_EVENT = "KG013"
    """A forbidden audit event (``open``, ``exec``, a process, a socket, an import) seen
    at run time with a guarded module on the Python stack, or a forbidden call no event
    names (the clock, the environment, ``import_module``) made by a guarded module
    (the dynamic guard and its call watch)."""
    EFFECT_REACH = "KG012"
    """A use of installed code whose source reaches a ``forbid-calls`` name (the effect
    map: ``logging.warning`` writes ``sys.stderr``), reported with the chain."""

    @property
    def slug(self) -> str:
        """Short kebab-case name of the code (SARIF ``rule.name``)."""
        return _TITLES[self]

    @property
    def help(self) -> str:
        """What the code means and what to do (SARIF ``help``, ``kernel guard --help``)."""
        return _HELP_TEXT[self]


_TITLES = {
    ViolationCode.FORBIDDEN_IMPORT: "forbidden-import",
    ViolationCode.IMPORT_NOT_ALLOWED: "import-not-allowed",
    ViolationCode.STAR_IMPORT: "star-import",
    ViolationCode.FORBIDDEN_CALL: "forbidden-call",
    ViolationCode.UNRESOLVABLE_DYNAMIC: "unresolvable-dynamic",
    ViolationCode.TYPING_ONLY_IMPORT: "typing-only-import",
    ViolationCode.TRANSITIVE_IMPORT: "transitive-import",
    ViolationCode.REFLECTIVE_REACH: "reflective-reach",
    ViolationCode.LAYER_VIOLATION: "layer-violation",
    ViolationCode.UNPARSEABLE: "unparseable",
    ViolationCode.BAD_SUPPRESSION: "bad-suppression",
    ViolationCode.EFFECT_REACH: "effect-reach",
    ViolationCode.RUNTIME_EVENT: "runtime-event",
}


_HELP_TEXT = {
    ViolationCode.FORBIDDEN_IMPORT: (
        "An import (static, relative, or a literal __import__/import_module, or a module "
        "reached through an allowed module's attribute) matches the rule's forbid-imports. "
        "Remove it, or change the ADR that holds the rule."
    ),
    ViolationCode.IMPORT_NOT_ALLOWED: (
        "The rule lists allow-imports and this import (or a module reached through an "
        "allowed module's attribute, such as json.codecs) is not in it."
    ),
    ViolationCode.STAR_IMPORT: (
        "from x import * in a guarded module binds names no static reading can see; "
        "import the names explicitly."
    ),
    ViolationCode.FORBIDDEN_CALL: (
        "A reference (call, attribute read, alias, re-binding, getattr with a literal, "
        "import of the object) resolves to a name in forbid-calls."
    ),
    ViolationCode.UNRESOLVABLE_DYNAMIC: (
        "__import__/import_module/getattr on a guarded name with a computed argument, or a "
        "relative import beyond the top-level package: the target cannot be known."
    ),
    ViolationCode.TYPING_ONLY_IMPORT: (
        "A forbidden or not-allowed import under if TYPE_CHECKING: is still a dependency; "
        "list it in allow-typing-imports if the rule should permit it."
    ),
    ViolationCode.TRANSITIVE_IMPORT: (
        "A forbidden module is reached through the project's own modules; the message "
        "gives the chain with the line of every hop."
    ),
    ViolationCode.REFLECTIVE_REACH: (
        "Reflection that no static reading can follow (__builtins__, globals(), frame and "
        "function internals, __subclasses__, importer machinery) reaches anything. Remove "
        "it, or suppress it with a reason: # kernel-guard: ignore[KG008] why."
    ),
    ViolationCode.LAYER_VIOLATION: (
        "A module imports a module of a higher layer of a layers rule (typing-only imports "
        "included). Move the code down, or invert the dependency."
    ),
    ViolationCode.UNPARSEABLE: (
        "The file could not be read, decoded or parsed as Python; nothing in it was checked."
    ),
    ViolationCode.BAD_SUPPRESSION: (
        "A # kernel-guard: ignore[CODE] comment must give a reason after the codes and must "
        "suppress a finding on its line (or, alone on a line, on the next)."
    ),
    ViolationCode.RUNTIME_EVENT: (
        "At run time a guarded module was on the Python stack when a forbidden event "
        "happened (an open, exec, process, socket or import the rule forbids), or called "
        "a forbidden function that raises no event (the clock, the environment, "
        "import_module): whatever the source looks like, the module did it. Find the "
        "call on that line."
    ),
    ViolationCode.EFFECT_REACH: (
        "A function or class of an installed module (the standard library or a package) "
        "reaches a forbid-calls name in its own source, as the chain shows: calling it "
        "is that effect. Pass the effect in from the shell, or suppress it with a reason."
    ),
}


def _tuple_of_str(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
        raise TypeError(f"{attribute.name} must be a tuple of non-empty strings")


@attrs.frozen(kw_only=True)
class Rule:
    """One guard rule: which modules it covers and what they may import or reference."""

    name: str
    """Unique name, quoted in every finding the rule produces."""
    modules: tuple[str, ...] = attrs.field(validator=_tuple_of_str)
    """Dotted module patterns (``*`` globs, ``!pattern`` excludes; the last match wins)."""
    allow_imports: tuple[str, ...] | None = None
    """If not ``None``: the only modules the covered modules may import."""
    forbid_imports: tuple[str, ...] = attrs.field(default=(), validator=_tuple_of_str)
    """Modules that may not be imported (a package covers its submodules)."""
    forbid_calls: tuple[str, ...] = attrs.field(default=(), validator=_tuple_of_str)
    """Qualified names that may not be referenced: ``open``, ``os.system``, ``time.*``."""
    allow_typing_imports: tuple[str, ...] = attrs.field(default=(), validator=_tuple_of_str)
    """Modules that may be imported under ``if TYPE_CHECKING:`` despite the import lists."""
    transitive: bool = False
    """Also report forbidden modules reached through the project's own modules."""
    layers: tuple[tuple[str, ...], ...] = ()
    """Module groups, highest first: a module never imports one of a higher group.
    A module belongs to the group whose pattern names it most specifically."""
    effects: bool = False
    """Also follow calls into installed code through its source (the effect map, KG012):
    ``logging.warning`` reaches ``sys.stderr`` (on in this project's own policy)."""
    allow_reach: tuple[str, ...] = attrs.field(default=(), validator=_tuple_of_str)
    """Installed packages whose own effects the covered modules accept (the engine they
    drive: `kernel.strategies` drives hypothesis, which reads its caches): the effect
    map reports no chain through them and the dynamic guard no event raised inside
    their code. The covered modules' own code is checked as before."""
    forbid_reflection: bool = False
    """Also report reflection no static reading can follow (KG008: ``locals()``,
    ``__builtins__``, frames...): opt-in, since honest code uses some of it."""
    source: str = attrs.field(default="", eq=False)
    """Where the rule was read (file, and block for Markdown); not part of identity."""

    def __attrs_post_init__(self) -> None:
        if not self.name:
            raise ValueError("rule name must not be empty")
        if not self.modules:
            raise ValueError(f"rule {self.name!r}: modules must not be empty")
        if (
            self.allow_imports is None
            and not self.forbid_imports
            and not self.forbid_calls
            and not self.layers
            and not self.forbid_reflection
        ):
            raise ValueError(f"rule {self.name!r} checks nothing")

    def to_dict(self) -> dict[str, object]:
        """The rule in policy-file shape (keys as written in TOML)."""
        out: dict[str, object] = {"name": self.name, "modules": list(self.modules)}
        if self.allow_imports is not None:
            out["allow-imports"] = list(self.allow_imports)
        out["forbid-imports"] = list(self.forbid_imports)
        out["forbid-calls"] = list(self.forbid_calls)
        out["allow-typing-imports"] = list(self.allow_typing_imports)
        out["transitive"] = self.transitive
        if self.layers:
            out["layers"] = [list(group) for group in self.layers]
        if self.forbid_reflection:
            out["forbid-reflection"] = True
        if self.effects:
            out["effects"] = True
        if self.allow_reach:
            out["allow-reach"] = list(self.allow_reach)
        return out

    def layer_of(self, module: str) -> int | None:
        """Index (0 = highest) of the group holding ``module``, or None.

        The most specific pattern wins (most literal characters before a glob), so a
        catch-all top group such as ``kernel`` places every module no lower group names.
        """
        return _layer_index(self.layers, module)


@functools.lru_cache(maxsize=65536)
def _layer_index(layers: tuple[tuple[str, ...], ...], module: str) -> int | None:
    best: tuple[int, int] | None = None
    for index, group in enumerate(layers):
        for pattern in group:
            if module_matches(pattern, module):
                weight = len(re.split(r"[*?\[]", pattern, maxsplit=1)[0])
                if best is None or weight > best[0]:
                    best = (weight, index)
    return None if best is None else best[1]


@attrs.frozen(kw_only=True)
class Policy:
    """A non-empty set of uniquely named rules, plus the files they came from."""

    rules: tuple[Rule, ...]
    """The rules, in the order they were read."""
    unguarded: tuple[str, ...] = attrs.field(default=(), validator=_tuple_of_str)
    """Module patterns deliberately left unchecked (every other module needs a rule)."""
    unguarded_sources: tuple[str, ...] = attrs.field(default=(), eq=False)
    """Where each ``unguarded`` pattern was read (for messages only)."""
    sources: tuple[str, ...] = attrs.field(default=(), eq=False)
    """Files the rules were read from (for messages only)."""

    def __attrs_post_init__(self) -> None:
        if not self.rules:
            raise ValueError("a policy needs at least one rule")
        seen: set[str] = set()
        for rule in self.rules:
            if rule.name in seen:
                raise ValueError(f"duplicate rule name {rule.name!r}")
            seen.add(rule.name)

    def to_dict(self) -> dict[str, object]:
        """The policy as ``{"rules": [...]}`` (the input of `policy_hash`)."""
        out: dict[str, object] = {"rules": [rule.to_dict() for rule in self.rules]}
        if self.unguarded:
            out["unguarded"] = list(self.unguarded)
        return out


@attrs.frozen(kw_only=True)
class ChainLink:
    """One hop of a transitive import chain: ``module`` imports ``imports`` at ``line``."""

    module: str
    """The importing module."""
    path: str
    """Its file, as displayed in findings."""
    line: int
    """1-based line of the import statement."""
    imports: str
    """The imported module."""


@attrs.frozen(kw_only=True)
class Violation:
    """One finding: ``path:line:column: code message``."""

    path: str
    """File path as displayed (relative to the working directory when possible)."""
    line: int
    """1-based line."""
    column: int
    """1-based column counted in characters (not UTF-8 bytes)."""
    code: ViolationCode
    """What was found."""
    rule: str
    """Name of the rule(s) broken, comma-separated; empty for `UNPARSEABLE`."""
    message: str
    """Human-readable explanation."""
    chain: tuple[ChainLink, ...] = ()
    """For `TRANSITIVE_IMPORT`: the import chain, first hop first."""

    def sort_key(self) -> tuple[str, int, int, str, str, str]:
        """Findings are reported sorted by path, line, column, code, rule, message."""
        return (self.path, self.line, self.column, self.code.value, self.rule, self.message)

    def to_dict(self) -> dict[str, object]:
        """JSON shape of the finding."""
        out: dict[str, object] = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "code": self.code.value,
            "name": self.code.slug,
            "rule": self.rule,
            "message": self.message,
        }
        if self.chain:
            out["chain"] = [
                {"module": c.module, "path": c.path, "line": c.line, "imports": c.imports}
                for c in self.chain
            ]
        return out


@attrs.frozen(kw_only=True)
class GuardReport:
    """Result of checking a source tree against a policy."""

    violations: tuple[Violation, ...]
    """All findings, sorted by `Violation.sort_key`."""
    files_checked: int
    """Python files looked at (parsed or served from the cache)."""
    files_cached: int
    """Of those, files whose result came from the cache."""

    @property
    def ok(self) -> bool:
        """True when there is no finding."""
        return not self.violations
