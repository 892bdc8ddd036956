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
  (`kernel.identity.sha256_hex`), so a cache keyed by it changes with any rule.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

from kernel.errors import ConfigError
from kernel.guard.model import Policy, Rule
from kernel.guard.patterns import PATTERN_RE
from kernel.identity import sha256_hex

__all__ = [
    "discover_policy",
    "load_policy",
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
    }
)
_LIST_KEYS = ("modules", "allow-imports", "forbid-imports", "forbid-calls", "allow-typing-imports")
_FENCE_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)(.*)$")


def policy_hash(policy: Policy) -> str:
    """SHA-256 (hex) of the policy's canonical JSON; rule sources do not enter it."""
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
        if "modules" not in table:
            raise ConfigError(f"{at}.modules: missing (the modules this rule covers)")
        lists: dict[str, tuple[str, ...]] = {}
        for key in _LIST_KEYS:
            if key in table:
                lists[key] = _string_list(
                    table[key], f"{at}.{key}", allow_negation=key == "modules"
                )
        if not lists["modules"]:
            raise ConfigError(f"{at}.modules: must name at least one module")
        transitive = table.get("transitive", False)
        if not isinstance(transitive, bool):
            raise ConfigError(f"{at}.transitive: expected true or false")
        if (
            "allow-imports" not in lists
            and not lists.get("forbid-imports")
            and not lists.get("forbid-calls")
        ):
            raise ConfigError(
                f"{at}: rule {name!r} checks nothing "
                "(give allow-imports, forbid-imports or forbid-calls)"
            )
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
                transitive=transitive,
                source=source,
            )
        )
    return rules


def _toml(text: str, where: str) -> dict[str, object]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where}: invalid TOML: {e}") from e


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
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


def _rules_from_file(path: Path, *, explicit: bool) -> list[Rule]:
    text = _read(path)
    if path.name == "pyproject.toml" or path.suffix == ".toml":
        data = _toml(text, str(path))
        tool = data.get("tool", {})
        kernel = tool.get("kernel", {}) if isinstance(tool, dict) else {}
        guard = kernel.get("guard") if isinstance(kernel, dict) else None
        if guard is None:
            if explicit:
                raise ConfigError(f"{path}: no [tool.kernel.guard] table (no guard policy)")
            return []
        if not isinstance(guard, dict):
            raise ConfigError(f"{path}: tool.kernel.guard: expected a table")
        unknown = sorted(set(guard) - {"rules"})
        if unknown:
            raise ConfigError(
                f"{path}: tool.kernel.guard.{unknown[0]}: unknown key (expected 'rules')"
            )
        if "rules" not in guard:
            raise ConfigError(
                f"{path}: tool.kernel.guard.rules: missing ([[tool.kernel.guard.rules]])"
            )
        return parse_rules(guard["rules"], f"{path}: tool.kernel.guard.rules", str(path))
    rules: list[Rule] = []
    blocks = markdown_guard_blocks(text)
    for line, content in blocks:
        where = f"{path}: guard block at line {line}"
        data = _toml(content, where)
        unknown = sorted(set(data) - {"rules"})
        if unknown:
            raise ConfigError(f"{where}: {unknown[0]}: unknown key (expected 'rules')")
        if "rules" not in data:
            raise ConfigError(f"{where}: rules: missing ([[rules]])")
        rules.extend(parse_rules(data["rules"], f"{where}: rules", f"{path}:{line}"))
    if not blocks and explicit:
        raise ConfigError(f"{path}: no ```guard block (no guard policy)")
    return rules


def _assemble(rules: Iterable[Rule], sources: Sequence[str], what: str) -> Policy:
    collected = list(rules)
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
    return Policy(rules=tuple(collected), sources=tuple(sources))


def load_policy(paths: Sequence[Path | str]) -> Policy:
    """Read the policy from explicitly named files (``pyproject.toml`` or Markdown).

    Raises:
        ConfigError: a file is unreadable, holds no policy, or holds an invalid one.
    """
    if not paths:
        raise ConfigError("no policy file given")
    rules: list[Rule] = []
    for raw in paths:
        rules.extend(_rules_from_file(Path(raw), explicit=True))
    return _assemble(rules, [str(p) for p in paths], ", ".join(str(p) for p in paths))


def discover_policy(root: Path | str = ".") -> Policy:
    """Read ``pyproject.toml`` (if it has ``[tool.kernel.guard]``) and ``docs/adr/*.md``.

    Raises:
        ConfigError: an invalid policy, or none at all under ``root``.
    """
    base = Path(root)
    rules: list[Rule] = []
    sources: list[str] = []
    pyproject = base / "pyproject.toml"
    if pyproject.is_file():
        found = _rules_from_file(pyproject, explicit=False)
        if found:
            sources.append(str(pyproject))
        rules.extend(found)
    for md in sorted((base / "docs" / "adr").glob("*.md")):
        found = _rules_from_file(md, explicit=False)
        if found:
            sources.append(str(md))
        rules.extend(found)
    return _assemble(rules, sources, f"{base / 'pyproject.toml'} or {base / 'docs/adr/*.md'}")
