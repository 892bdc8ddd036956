"""The project's own static guards: the ADR guard blocks hold over src/kernel.

(a) every ADR policy block in docs/adr holds over src: the items
``guard[<rule>][<module>]`` that the project's own pytest plugin
(`kernel.guard.pytest_plugin`, ``kernel_guard_dirs`` in pyproject) adds to this folder;
(b) the pure core uses no
file, process, clock, randomness, uuid, environment, network or dynamic-import
facility; (c) a lower layer never imports a higher one (one `layers` rule);
(d) hashlib only in kernel.records.identity and kernel.records.digest, json/orjson only in
identity and the shell;
(e) the evasion corpus (see
test_corpus.py).
"""

from __future__ import annotations

from pathlib import Path

from kernel.guard import Policy, check_tree, discover_policy, load_policy

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
ADR = ROOT / "docs" / "adr" / "ADR-0001-pure-core.md"


def _adr_policy() -> Policy:
    return load_policy(sorted((ROOT / "docs" / "adr").glob("ADR-*.md")))


def _format(policy: Policy, names: set[str]) -> str:
    report = check_tree(SRC, policy)
    return "\n".join(
        f"{v.path}:{v.line}:{v.column}: {v.code} {v.message} [{v.rule}]"
        for v in report.violations
        if v.rule in names
    )


def test_discovery_from_project_root_finds_the_adr_policy() -> None:
    """`kernel guard` without --config reads docs/adr/*.md of the project root."""
    names = {r.name for r in discover_policy(ROOT).rules}
    assert {"pure-core", "hashlib-only-in-identity"} <= names


def test_pure_core_rule_bans_every_effect_family() -> None:
    """(b) The pure-core rule covers all pure modules and bans each facility family."""
    rule = next(r for r in _adr_policy().rules if r.name == "pure-core")
    assert rule.transitive
    # The effect map is on: calls into installed code are followed (KG012), and only
    # hypothesis, which kernel.strategies alone may import, has its effects accepted.
    assert rule.effects
    assert rule.allow_reach == ("hypothesis",)
    only = next(r for r in _adr_policy().rules if r.name == "hypothesis-only-in-strategies")
    assert only.forbid_imports == ("hypothesis",)
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


def _pure_modules() -> set[str]:
    return {
        path.stem if path.name != "__init__.py" else path.parent.name
        for path in (SRC / "kernel").glob("*")
        if (path.suffix == ".py" and path.name != "__init__.py")
        or (path.is_dir() and (path / "__init__.py").is_file())
    } - {"effects", "guard", "__main__"}


def test_layers_rule_is_one_chain_with_a_catch_all_top() -> None:
    """(c) One `layers` rule: `kernel` on top, every layer a pure module, the rule holds."""
    rule = next(r for r in _adr_policy().rules if r.name == "layers")
    assert rule.layers[0] == ("kernel",)
    assert rule.layers[-1] == ("kernel.errors",)
    # A layer names a pure package or module, or one module inside a package
    # (`kernel.run.suite` sits above `kernel.run`).
    named = {p.removeprefix("kernel.").split(".")[0] for group in rule.layers[1:] for p in group}
    assert named <= _pure_modules(), sorted(named - _pure_modules())
    assert _format(_adr_policy(), {"layers"}) == ""


def test_every_pure_module_has_a_layer() -> None:
    """(c) No pure module escapes layering: an unnamed one falls in the top layer."""
    rule = next(r for r in _adr_policy().rules if r.name == "layers")
    for name in _pure_modules():
        assert rule.layer_of(f"kernel.{name}") is not None, name
    assert rule.layer_of("kernel.not_yet_written") == 0
    assert rule.layer_of("kernel.search.binding.sub") == rule.layer_of("kernel.search.binding")


def test_hashlib_and_json_rules() -> None:
    """(d) hashlib only in kernel.records.identity and kernel.records.digest (its raw-bytes
    digests, which identity re-exports); json/orjson only in identity and the shell."""
    policy = _adr_policy()
    hashing = next(r for r in policy.rules if r.name == "hashlib-only-in-identity")
    assert "hashlib" in hashing.forbid_imports
    assert "!kernel.records.identity" in hashing.modules
    assert "!kernel.records.digest" in hashing.modules
    assert (
        "!kernel.guard.*" not in hashing.modules
    )  # the guard uses kernel.records.digest, not hashlib
    jsonish = next(r for r in policy.rules if r.name == "json-only-in-identity-and-shell")
    assert {"json", "orjson"} <= set(jsonish.forbid_imports)
    assert _format(policy, {hashing.name, jsonish.name}) == ""


def test_the_domain_never_imports_the_views() -> None:
    """(c) Presentation sits above every domain package, so the layers rule reports a
    record module that imports a view (`run_admission` and `suite` used to)."""
    rule = next(r for r in _adr_policy().rules if r.name == "layers")
    views = rule.layer_of("kernel.views.admission")
    assert views is not None
    for module in (
        "kernel.corroboration.run_admission",
        "kernel.run.suite",
        "kernel.run.report",
        "kernel.decide.gate",
        "kernel.search.binding",
        "kernel.records.values",
    ):
        level = rule.layer_of(module)
        assert level is not None, module
        assert level > views, module
