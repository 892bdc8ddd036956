"""The project's own static guards: the ADR guard blocks hold over src/kernel.

(a) every ADR policy block in docs/adr holds over src; (b) the pure core uses no
file, process, clock, randomness, uuid, environment, network or dynamic-import
facility; (c) layers never import downstream; (d) hashlib only in kernel.identity,
json/orjson only in identity and the shell; (e) the evasion corpus (see
test_corpus.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.guard import Policy, check_tree, discover_policy, load_policy

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
ADR = ROOT / "docs" / "adr" / "ADR-0001-pure-core.md"
LAYERS = (
    "errors", "identity", "codec", "values", "ledger", "search", "binding", "verification",
    "runrecord", "importers", "run_replay", "evidence_report", "render", "decision",
    "consensus", "commit_admission", "run_admission", "gate", "strategies",
)  # fmt: skip


def _adr_policy() -> Policy:
    return load_policy(sorted((ROOT / "docs" / "adr").glob("*.md")))


def _format(policy: Policy, names: set[str]) -> str:
    subset = Policy(rules=tuple(r for r in policy.rules if r.name in names))
    report = check_tree(SRC, subset)
    return "\n".join(
        f"{v.path}:{v.line}:{v.column}: {v.code} {v.message} [{v.rule}]" for v in report.violations
    )


def test_every_adr_block_holds_over_src() -> None:
    """(a) Every rule of every docs/adr guard block holds over src/ (zero findings)."""
    policy = _adr_policy()
    report = check_tree(SRC, policy)
    assert report.violations == (), "\n".join(
        f"{v.path}:{v.line}:{v.column}: {v.code} {v.message} [{v.rule}]" for v in report.violations
    )
    assert report.files_checked > 0


def test_discovery_from_project_root_finds_the_adr_policy() -> None:
    """`kernel guard` without --config reads docs/adr/*.md of the project root."""
    names = {r.name for r in discover_policy(ROOT).rules}
    assert {"pure-core", "hashlib-only-in-identity"} <= names


def test_pure_core_rule_bans_every_effect_family() -> None:
    """(b) The pure-core rule covers all pure modules and bans each facility family."""
    rule = next(r for r in _adr_policy().rules if r.name == "pure-core")
    assert rule.transitive
    for family in ("subprocess", "socket", "time", "random", "uuid", "importlib", "os"):
        assert family in rule.forbid_imports, family
    for call in (
        "open",
        "builtins.open",
        "eval",
        "exec",
        "compile",
        "__import__",
        "importlib.*",
        "os.*",
        "subprocess.*",
        "time.*",
        "random.*",
        "uuid.*",
        "socket.*",
        "datetime.datetime.now",
        "pathlib.Path",
    ):
        assert call in rule.forbid_calls, call
    assert _format(_adr_policy(), {"pure-core"}) == ""


@pytest.mark.parametrize("index", range(len(LAYERS)))
def test_layer_rule_forbids_every_downstream_module(index: int) -> None:
    """(c) Each layer forbids every later layer and the shell; the rule holds over src."""
    name = LAYERS[index]
    rule = next(r for r in _adr_policy().rules if r.name == f"layer-{name}")
    assert rule.modules == (f"kernel.{name}", f"kernel.{name}.*")
    expected = {f"kernel.{later}" for later in LAYERS[index + 1 :]} | {
        "kernel.effects",
        "kernel.guard",
    }
    assert set(rule.forbid_imports) == expected
    assert _format(_adr_policy(), {rule.name}) == ""


def test_every_pure_module_has_a_place_in_the_layer_chain() -> None:
    """(c) A new pure module cannot escape layering: each one is named in the chain."""
    pure = {
        path.stem if path.name != "__init__.py" else path.parent.name
        for path in (SRC / "kernel").glob("*")
        if (path.suffix == ".py" and path.name != "__init__.py")
        or (path.is_dir() and (path / "__init__.py").is_file())
    } - {"effects", "guard"}
    assert pure <= set(LAYERS), sorted(pure - set(LAYERS))


def test_hashlib_and_json_rules() -> None:
    """(d) hashlib only in kernel.identity; json/orjson only in identity and the shell."""
    policy = _adr_policy()
    hashing = next(r for r in policy.rules if r.name == "hashlib-only-in-identity")
    assert "hashlib" in hashing.forbid_imports
    assert "!kernel.identity" in hashing.modules
    assert "!kernel.guard.*" not in hashing.modules  # the guard uses kernel.identity, not hashlib
    jsonish = next(r for r in policy.rules if r.name == "json-only-in-identity-and-shell")
    assert {"json", "orjson"} <= set(jsonish.forbid_imports)
    assert _format(policy, {hashing.name, jsonish.name}) == ""
