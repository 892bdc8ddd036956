"""Reading guard policies from ``pyproject.toml`` and from Markdown ``guard`` blocks.

Rules this module enforces:

- a policy lives in ``[tool.kernel.guard]`` of a ``pyproject.toml``
  (``[[tool.kernel.guard.rules]]``) or in fenced code blocks tagged ``guard`` in
  Markdown (TOML inside, ``[[rules]]``),
  so an ADR's text is the single source of truth;
- a rule has exactly the keys ``name``, ``modules``, ``allow-imports``,
  ``forbid-imports``, ``forbid-calls``, ``allow-typing-imports``, ``transitive``;
  an unknown key, a mistyped value or a malformed pattern raises `ConfigError` naming
  the file and the key path (``docs/adr/x.md: guard block at line 12: rules[0].modules``);
- a rule that checks nothing, a duplicate rule name, a source file that was named
  explicitly but holds no policy, and a policy with no rule at all are refused
  (never a vacuous pass);
- `policy_hash` is SHA-256 over the canonical JSON of the policy
  (`kernel.records.identity.sha256_hex`), so a cache keyed by it changes with any rule.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from kernel.errors import ConfigError
from kernel.guard.discover import pure_path
from kernel.guard.model import Policy, Rule
from kernel.guard.patterns import PATTERN_RE, module_set

if TYPE_CHECKING:  # paths are strings at run time (no `pathlib` on a cold run's way)
    from pathlib import Path

__all__ = [
    "discover_policy",
    "find_project_root",
    "load_policy",
    "markdown_files",
    "markdown_guard_blocks",
    "parse_rules",
    "policy_hash",
]

_RULE_KEYS = frozenset(
    {
        "name",
        "modules",
        "allow-imports",
        "forbid-imports",
        "forbid-calls",
        "allow-typing-imports",
        "transitive",
        "layers",
        "forbid-reflection",
        "effects",
        "allow-reach",
    }
)
_LIST_KEYS = (
    "modules",
    "allow-imports",
    "forbid-imports",
    "forbid-calls",
    "allow-typing-imports",
    "allow-reach",
)
_FENCE_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)(.*)$")


def policy_hash(policy: Policy) -> str:
    """SHA-256 (hex) of the policy's canonical JSON; rule sources do not enter it."""
    # Imported here: a check keys its cache without it, and so loads no JSON encoder.
    from kernel.records.identity import sha256_hex

    return sha256_hex(policy.to_dict())


def _string_list(value: object, where: str, *, allow_negation: bool) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list of strings, got {type(value).__name__}")
    out: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ConfigError(f"{where}[{i}]: expected a string, got {type(item).__name__}")
        if not PATTERN_RE.fullmatch(item) or (item.startswith("!") and not allow_negation):
            raise ConfigError(f"{where}[{i}]: {item!r} is not a dotted name or glob pattern")
        out.append(item)
    return tuple(out)


def _layers(value: object, where: str) -> tuple[tuple[str, ...], ...]:
    """``layers``: a list, highest first, of module patterns or lists of them (a group)."""
    if not isinstance(value, list) or len(value) < 2:
        raise ConfigError(f"{where}: expected a list of at least two layers (highest first)")
    groups: list[tuple[str, ...]] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        group = _string_list([item] if isinstance(item, str) else item, at, allow_negation=False)
        if not group:
            raise ConfigError(f"{at}: an empty layer")
        for pattern in group:
            if pattern in seen:
                raise ConfigError(f"{at}: {pattern!r} is already in layer {seen[pattern]}")
            seen[pattern] = i
        groups.append(group)
    return tuple(groups)


def _refuse_contradictions(name: str, at: str, lists: dict[str, tuple[str, ...]]) -> None:
    """A rule that allows what it forbids, or covers and excludes the same modules,
    says two things at once: refused rather than resolved by a precedence nobody wrote."""
    forbidden = module_set(lists.get("forbid-imports", ()))
    for i, allowed in enumerate(lists.get("allow-imports", ())):
        hit = forbidden.match(allowed)
        if hit is not None:
            raise ConfigError(
                f"{at}.allow-imports[{i}]: rule {name!r} allows {allowed!r} "
                f"and forbids it (forbid-imports {hit!r})"
            )
    positive = {p for p in lists["modules"] if not p.startswith("!")}
    for i, pattern in enumerate(lists["modules"]):
        if pattern.startswith("!") and pattern[1:] in positive:
            raise ConfigError(
                f"{at}.modules[{i}]: rule {name!r} both covers and excludes {pattern[1:]!r}"
            )


def _flag(table: dict[str, object], key: str, at: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{at}.{key}: expected true or false")
    return value


def parse_rules(document: object, where: str, source: str) -> list[Rule]:
    """Turn the TOML value of ``rules`` into `Rule` records.

    Args:
        document: the parsed ``rules`` value (must be an array of tables).
        where: key path prefix for messages, e.g. ``"pyproject.toml: tool.kernel.guard.rules"``.
        source: what `Rule.source` should say.

    Raises:
        ConfigError: anything unusable; the message names the file and the key.
    """
    if not isinstance(document, list) or not document:
        raise ConfigError(f"{where}: expected a non-empty array of tables ([[rules]])")
    rules: list[Rule] = []
    for index, table in enumerate(document):
        at = f"{where}[{index}]"
        if not isinstance(table, dict):
            raise ConfigError(f"{at}: expected a table")
        unknown = sorted(set(table) - _RULE_KEYS)
        if unknown:
            raise ConfigError(
                f"{at}.{unknown[0]}: unknown key (expected one of {sorted(_RULE_KEYS)})"
            )
        name = table.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{at}.name: expected a non-empty string")
        layers = _layers(table["layers"], f"{at}.layers") if "layers" in table else ()
        if "modules" not in table and not layers:
            raise ConfigError(f"{at}.modules: missing (the modules this rule covers)")
        lists: dict[str, tuple[str, ...]] = {}
        for key in _LIST_KEYS:
            if key in table:
                lists[key] = _string_list(
                    table[key], f"{at}.{key}", allow_negation=key == "modules"
                )
        if "modules" not in lists:
            lists["modules"] = tuple(p for group in layers for p in group)
        if not lists["modules"]:
            raise ConfigError(f"{at}.modules: must name at least one module")
        transitive = _flag(table, "transitive", at)
        reflection = _flag(table, "forbid-reflection", at)
        effects = _flag(table, "effects", at)
        if effects and not lists.get("forbid-calls"):
            raise ConfigError(f"{at}.effects: needs forbid-calls (what may not be reached)")
        if (
            "allow-imports" not in lists
            and not lists.get("forbid-imports")
            and not lists.get("forbid-calls")
            and not layers
            and not reflection
        ):
            raise ConfigError(
                f"{at}: rule {name!r} checks nothing (give allow-imports, forbid-imports, "
                "forbid-calls, forbid-reflection or layers)"
            )
        _refuse_contradictions(name, at, lists)
        if transitive and not lists.get("forbid-imports"):
            raise ConfigError(f"{at}.transitive: needs forbid-imports (what may not be reached)")
        rules.append(
            Rule(
                name=name,
                modules=lists["modules"],
                allow_imports=lists.get("allow-imports"),
                forbid_imports=lists.get("forbid-imports", ()),
                forbid_calls=lists.get("forbid-calls", ()),
                allow_typing_imports=lists.get("allow-typing-imports", ()),
                allow_reach=lists.get("allow-reach", ()),
                transitive=transitive,
                layers=layers,
                forbid_reflection=reflection,
                effects=effects,
                source=source,
            )
        )
    return rules


_MAX_NESTING = 32


def _nesting(text: str) -> int:
    """Deepest bracket nesting outside strings and comments (an upper bound is enough)."""
    depth = deepest = 0
    quote = ""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif text.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif c in "\"'":
            quote = c * 3 if text.startswith(c * 3, i) else c
            i += len(quote) - 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
        i += 1
    return deepest


def _toml(text: str, where: str) -> dict[str, object]:
    # tomllib recurses once per nesting level: refuse deep documents before parsing
    # (a policy is a flat list of tables; a RecursionError is never an answer).
    if _nesting(text) > _MAX_NESTING:
        raise ConfigError(f"{where}: nesting deeper than {_MAX_NESTING} levels; refused")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where}: invalid TOML: {e}") from e
    except RecursionError as e:  # pragma: no cover - the nesting bound comes first
        raise ConfigError(f"{where}: nesting too deep; refused") from e


def _read(path: str) -> str:
    """The text of a policy file; a FIFO, a device or a folder is refused before it is
    read (`kernel.effects.inputs.read_input`), so ``--config /dev/urandom`` never hangs."""
    from kernel.effects.inputs import read_input  # the one reader of regular inputs
    from kernel.errors import EffectError

    try:
        return read_input(path, what="policy file").decode("utf-8")
    except EffectError as e:
        raise ConfigError(str(e)) from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: cannot read policy file: {e}") from e


def markdown_guard_blocks(text: str) -> list[tuple[int, str]]:
    """Fenced code blocks tagged ``guard`` in Markdown, as ``(fence line, content)``.

    A fence is three or more backticks or tildes (indented at most three spaces); it is
    closed by a fence of the same character at least as long. Unclosed blocks run to
    the end of the document, as CommonMark says.
    """
    blocks: list[tuple[int, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE_RE.match(lines[i])
        if not m or (m.group(2)[0] == "`" and "`" in m.group(4)):
            i += 1
            continue
        fence, info = m.group(2), m.group(3)
        start = i + 1
        j = start
        while j < len(lines):
            close = lines[j].strip()
            if (
                len(lines[j]) - len(lines[j].lstrip(" ")) <= 3
                and close.startswith(fence[0] * len(fence))
                and set(close) == {fence[0]}
            ):
                break
            j += 1
        if info == "guard":
            blocks.append((start, "\n".join(lines[start:j])))
        i = j + 1
    return blocks


_Found = tuple[list[Rule], list[tuple[str, str]]]
"""Rules of one file, and its ``unguarded`` patterns with where each was read."""


def _policy_table(data: dict[str, object], prefix: str, source: str) -> _Found:
    """``prefix`` ends with the key separator (``tool.kernel.guard.`` or ``block: ``)."""
    unknown = sorted(set(data) - {"rules", "unguarded"})
    if unknown:
        raise ConfigError(f"{prefix}{unknown[0]}: unknown key (expected 'rules' or 'unguarded')")
    unguarded: list[tuple[str, str]] = []
    if "unguarded" in data:
        patterns = _string_list(data["unguarded"], f"{prefix}unguarded", allow_negation=False)
        unguarded = [(p, f"{prefix}unguarded[{i}]") for i, p in enumerate(patterns)]
    if "rules" not in data:
        raise ConfigError(f"{prefix}rules: missing (at least one [[rules]] table)")
    return parse_rules(data["rules"], f"{prefix}rules", source), unguarded


def _rules_from_file(path: str, *, explicit: bool) -> _Found:
    """``path`` is written as `pathlib` writes it (`kernel.guard.discover.pure_path`)."""
    text = _read(path)
    name = os.path.basename(path)
    # `Path.suffix == ".toml"`: a name that only is ".toml" has no suffix.
    if name == "pyproject.toml" or (name.endswith(".toml") and name != ".toml"):
        data = _toml(text, str(path))
        tool = data.get("tool", {})
        kernel = tool.get("kernel", {}) if isinstance(tool, dict) else {}
        guard = kernel.get("guard") if isinstance(kernel, dict) else None
        if guard is None:
            if explicit:
                raise ConfigError(f"{path}: no [tool.kernel.guard] table (no guard policy)")
            return [], []
        if not isinstance(guard, dict):
            raise ConfigError(f"{path}: tool.kernel.guard: expected a table")
        return _policy_table(guard, f"{path}: tool.kernel.guard.", str(path))
    rules: list[Rule] = []
    unguarded: list[tuple[str, str]] = []
    blocks = markdown_guard_blocks(text)
    for line, content in blocks:
        where = f"{path}: guard block at line {line}"
        got = _policy_table(_toml(content, where), f"{where}: ", f"{path}:{line}")
        rules.extend(got[0])
        unguarded.extend(got[1])
    if not blocks and explicit:
        raise ConfigError(f"{path}: no ```guard block (no guard policy)")
    return rules, unguarded


def _assemble(found: Iterable[_Found], sources: Sequence[str], what: str) -> Policy:
    collected: list[Rule] = []
    unguarded: list[tuple[str, str]] = []
    for rules, skip in found:
        collected.extend(rules)
        unguarded.extend(skip)
    if not collected:
        raise ConfigError(f"no guard policy found in {what}")
    seen: dict[str, str] = {}
    for rule in collected:
        if rule.name in seen:
            raise ConfigError(
                f"{rule.source}: rules.name: duplicate rule name {rule.name!r} "
                f"(first in {seen[rule.name]})"
            )
        seen[rule.name] = rule.source
    return Policy(
        rules=tuple(collected),
        unguarded=tuple(p for p, _w in unguarded),
        unguarded_sources=tuple(w for _p, w in unguarded),
        sources=tuple(sources),
    )


def load_policy(paths: Sequence[Path | str]) -> Policy:
    """Read the policy from explicitly named files (``pyproject.toml`` or Markdown).

    Raises:
        ConfigError: a file is unreadable, holds no policy, or holds an invalid one.
    """
    if not paths:
        raise ConfigError("no policy file given")
    found = [_rules_from_file(pure_path(raw), explicit=True) for raw in paths]
    return _assemble(found, [str(p) for p in paths], ", ".join(str(p) for p in paths))


def discover_policy(root: Path | str = ".") -> Policy:
    """Read ``pyproject.toml`` (if it has ``[tool.kernel.guard]``) and ``docs/adr/*.md``.

    Raises:
        ConfigError: an invalid policy, or none at all under ``root``.
    """
    base = pure_path(root)
    found: list[_Found] = []
    sources: list[str] = []
    pyproject = _join(base, "pyproject.toml")
    candidates = [pyproject] if os.path.isfile(pyproject) else []
    candidates += markdown_files(_join(base, "docs/adr"))
    for path in candidates:
        got = _rules_from_file(path, explicit=False)
        if got[0] or got[1]:
            sources.append(path)
        found.append(got)
    return _assemble(found, sources, f"{pyproject} or {_join(base, 'docs/adr/*.md')}")


def _join(base: str, name: str) -> str:
    """``str(Path(base) / name)`` for a `pure_path` ``base`` and a relative ``name``."""
    if base == ".":
        return name
    return base + name if base.endswith("/") else f"{base}/{name}"


def markdown_files(folder: str) -> list[str]:
    """``sorted(Path(folder).glob("*.md"))``, as strings: none when it cannot be listed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [_join(folder, name) for name in sorted(names) if name.endswith(".md")]


def _holds_policy(folder: str) -> bool:
    pyproject = _join(folder, "pyproject.toml")
    try:
        if os.path.isfile(pyproject):
            with open(pyproject, encoding="utf-8") as fh:
                if "kernel.guard" in fh.read():
                    return True
        adr = _join(folder, "docs/adr")
        if not os.path.isdir(adr):
            return False
        # In listing order, as `Path.glob` yields them: an unreadable one ends the search.
        for name in os.listdir(adr):
            if name.endswith(".md"):
                with open(_join(adr, name), encoding="utf-8") as fh:
                    if markdown_guard_blocks(fh.read()):
                        return True
    except (OSError, UnicodeDecodeError):
        return False
    return False


def find_project_root(start: Path | str = ".") -> str:
    """The project a path belongs to: the nearest folder at or above ``start`` whose
    ``pyproject.toml`` holds ``[tool.kernel.guard]`` or whose ``docs/adr/*.md`` hold a
    guard block (as ruff finds its configuration); else the nearest one holding a
    ``pyproject.toml`` or ``.git``; else the working directory. Findings, baselines
    and the cache are anchored there, so they hold from any folder of the project.
    An absolute path without a final separator (``Path.resolve`` as a string)."""
    here = os.path.realpath(start)
    if not os.path.isdir(here):
        here = os.path.dirname(here)
    chain = [here]
    while (parent := os.path.dirname(chain[-1])) != chain[-1]:
        chain.append(parent)
    for folder in chain:
        if _holds_policy(folder):
            return folder
    for folder in chain:
        if os.path.isfile(_join(folder, "pyproject.toml")) or os.path.exists(_join(folder, ".git")):
            return folder
    return os.path.realpath(os.getcwd())
