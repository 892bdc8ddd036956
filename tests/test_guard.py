"""kernel.guard: policy parsing, resolution, columns, cache, output formats, CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.effects.cli import main
from kernel.errors import ConfigError
from kernel.guard import (
    GuardReport,
    Policy,
    Rule,
    ViolationCode,
    check_paths,
    check_source,
    check_tree,
    discover_modules,
    load_policy,
    markdown_guard_blocks,
    policy_hash,
    render,
)
from kernel.guard.patterns import CallMatcher, covers, module_matches

POLICY_MD = """\
# ADR

```guard
[[rules]]
name = "pure"
modules = ["pkg", "pkg.*", "!pkg.shell"]
forbid-imports = ["subprocess"]
forbid-calls = ["open", "os.system", "os.environ", "time.*"]
```
"""


def _policy(**kw: object) -> Policy:
    fields: dict[str, object] = {"name": "r", "modules": ("m",)}
    fields.update(kw)
    return Policy(rules=(Rule(**fields),))  # type: ignore[arg-type]


def _codes(source: str | bytes, policy: Policy, module: str = "m") -> list[tuple[int, int, str]]:
    return [(v.line, v.column, v.code.value) for v in check_source(source, policy, module=module)]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    for rel, text in files.items():
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return src


# ------------------------------------------------------------------ patterns


def test_module_patterns_cover_submodules_and_globs() -> None:
    """`a.b` covers `a.b.c`, not `a.bc`; globs match across dots."""
    assert module_matches("os", "os.path")
    assert not module_matches("os", "oss")
    assert module_matches("kernel.effects.*", "kernel.effects.cli")
    assert not module_matches("kernel.effects.*", "kernel.records.values")


def test_rule_modules_last_match_wins() -> None:
    """`!pattern` excludes, a later positive pattern re-includes."""
    pats = ("kernel", "kernel.*", "!kernel.effects.*", "kernel.effects.pure")
    assert covers(pats, "kernel")
    assert covers(pats, "kernel.records.values")
    assert not covers(pats, "kernel.effects.cli")
    assert covers(pats, "kernel.effects.pure")


def test_call_patterns_builtins_prefix_and_star() -> None:
    """`open` == `builtins.open`; `os.environ` covers `os.environ.get`; `x.*` not `x`."""
    m = CallMatcher([("r", "open"), ("r", "os.environ"), ("r", "time.*")])
    assert m.match("builtins.open") == [("r", "open")]
    assert m.match("os.environ.get") == [("r", "os.environ")]
    assert m.match("time.time") == [("r", "time.*")]
    assert m.match("time") == []
    assert m.match("os.path.join") == []
    assert m.interesting("os")


# ------------------------------------------------------------------ policy


def test_markdown_blocks_only_guard_fences() -> None:
    """Only fences tagged `guard` are read; tildes and longer fences work."""
    text = "```toml\nx=1\n```\n~~~~ guard\n[[rules]]\n~~~~\n````guard\na=1\n````\n"
    blocks = markdown_guard_blocks(text)
    assert [content for _line, content in blocks] == ["[[rules]]", "a=1"]
    assert blocks[0][0] == 4  # 1-based line of the opening fence


def test_load_policy_from_markdown_and_pyproject(tmp_path: Path) -> None:
    """Both sources yield the same rule shape; the hash ignores where a rule came from."""
    md = tmp_path / "adr.md"
    md.write_text(POLICY_MD, encoding="utf-8")
    py = tmp_path / "pyproject.toml"
    body = POLICY_MD.split("```guard\n", 1)[1].split("```", 1)[0]
    py.write_text(body.replace("[[rules]]", "[[tool.kernel.guard.rules]]"), encoding="utf-8")
    a, b = load_policy([md]), load_policy([py])
    assert a == b
    assert policy_hash(a) == policy_hash(b)
    assert a.rules[0].forbid_calls == ("open", "os.system", "os.environ", "time.*")


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        (
            '[[rules]]\nname="x"\nmodules=["m"]\nforbid-import=["os"]\n',
            "rules[0].forbid-import: unknown key",
        ),
        (
            '[[rules]]\nname="x"\nmodules="m"\nforbid-imports=["os"]\n',
            "rules[0].modules: expected a list",
        ),
        ('[[rules]]\nname="x"\nmodules=["m"]\n', "checks nothing"),
        ('[[rules]]\nname="x"\nmodules=[]\nforbid-imports=["os"]\n', "rules[0].modules: must name"),
        ('[[rules]]\nmodules=["m"]\nforbid-imports=["os"]\n', "rules[0].name"),
        ('[[rules]]\nname="x"\nmodules=["m"]\nforbid-imports=["os x"]\n', "forbid-imports[0]"),
        ('[[rules]]\nname="x"\nmodules=["m"]\nforbid-imports=["!os"]\n', "forbid-imports[0]"),
        (
            '[[rules]]\nname="x"\nmodules=["m"]\nforbid-calls=["open"]\ntransitive=true\n',
            "transitive",
        ),
        (
            '[[rules]]\nname="x"\nmodules=["m"]\nforbid-imports=["os"]\ntransitive="yes"\n',
            "transitive",
        ),
        ("rules = 3\n", "rules: expected a non-empty array"),
        ("[other]\n", "other: unknown key"),
        ("[[rules]\n", "invalid TOML"),
        (
            '[[rules]]\nname="x"\nmodules=["m"]\nforbid-imports=["os"]\n'
            '[[rules]]\nname="x"\nmodules=["n"]\nforbid-imports=["os"]\n',
            "duplicate rule name",
        ),
    ],
)
def test_invalid_policy_names_file_and_key(tmp_path: Path, toml: str, needle: str) -> None:
    """Every unusable policy raises ConfigError naming the file and the offending key."""
    md = tmp_path / "bad.md"
    md.write_text(f"```guard\n{toml}```\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_policy([md])
    assert str(md) in str(info.value)
    assert needle in str(info.value)


def test_no_policy_is_refused(tmp_path: Path) -> None:
    """A named file without a policy, and an empty file list, are errors (never vacuous)."""
    md = tmp_path / "empty.md"
    md.write_text("# nothing here\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no ```guard block"):
        load_policy([md])
    py = tmp_path / "pyproject.toml"
    py.write_text("[project]\nname='x'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"no \[tool.kernel.guard\]"):
        load_policy([py])
    with pytest.raises(ConfigError):
        load_policy([])


def test_records_refuse_vacuous_rules() -> None:
    """A Rule that checks nothing and a Policy without rules cannot be built."""
    with pytest.raises(ValueError, match="checks nothing"):
        Rule(name="r", modules=("m",))
    with pytest.raises(ValueError, match="at least one rule"):
        Policy(rules=())


# ------------------------------------------------------------------ resolution


def test_shadowed_builtins_are_not_flagged() -> None:
    """Parameters, locals and module-level definitions named like builtins are not them."""
    policy = _policy(forbid_calls=("open", "compile"))
    src = (
        "import re\n"
        "def f(open):\n    return open(1)\n"
        "def g():\n    compile = re.compile\n    return compile('x')\n"
        "h = lambda open: open()\n"
    )
    assert _codes(src, policy) == []
    assert _codes("def k():\n    return open('x')\n", policy) == [(2, 12, "KG004")]
    closures = (
        "def f():\n    open = len\n    return [open(x) for x in 'ab']\n"
        "def g():\n    open = len\n    return lambda: open('x')\n"
        "[open for open in (1,)]\n"
    )
    assert _codes(closures, policy) == []
    assert _codes("def f():\n    return [open(x) for x in 'ab']\n", policy) == [(2, 13, "KG004")]


def test_typing_only_variants() -> None:
    """typing.TYPE_CHECKING, `not TYPE_CHECKING` else-branches and the False idiom."""
    policy = _policy(forbid_imports=("socket",))
    src = (
        "import typing\n"
        "if typing.TYPE_CHECKING:\n    import socket\n"
        "if not typing.TYPE_CHECKING:\n    pass\nelse:\n    import socket\n"
    )
    assert _codes(src, policy) == [(3, 5, "KG006"), (7, 5, "KG006")]
    runtime = "import typing\nif not typing.TYPE_CHECKING:\n    import socket\n"
    assert _codes(runtime, policy) == [(3, 5, "KG001")]
    allowed = _policy(forbid_imports=("socket",), allow_typing_imports=("socket",))
    assert (
        _codes("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import socket\n", allowed)
        == []
    )


def test_reassigned_type_checking_is_not_trusted() -> None:
    """`from typing import TYPE_CHECKING` later overwritten makes the block runtime."""
    policy = _policy(forbid_imports=("socket",))
    src = (
        "from typing import TYPE_CHECKING\nTYPE_CHECKING = 1\n"
        "if TYPE_CHECKING:\n    import socket\n"
    )
    assert _codes(src, policy) == [(4, 5, "KG001")]


def test_relative_imports_resolve_from_packages_and_modules() -> None:
    """`from . import x` resolves against the package; beyond the top is KG005."""
    policy = _policy(modules=("pkg", "pkg.*"), forbid_imports=("pkg.secret",))
    assert _codes("from . import secret\n", policy, module="pkg.mod") == [(1, 1, "KG001")]
    found = check_source("from .secret import x\n", policy, module="pkg", is_package=True)
    assert [v.code for v in found] == [ViolationCode.FORBIDDEN_IMPORT]
    assert _codes("from ... import x\n", policy, module="pkg.mod") == [(1, 1, "KG005")]


def test_allow_list_and_future_imports() -> None:
    """allow-imports admits listed modules and submodules; __future__ is always fine."""
    policy = _policy(allow_imports=("attrs", "kernel.records.identity"))
    src = (
        "from __future__ import annotations\nimport attrs\nfrom kernel.records.identity import x\n"
        "from kernel.records import identity\nimport json\n"
    )
    assert _codes(src, policy) == [(5, 1, "KG002")]


def test_columns_count_characters_not_bytes() -> None:
    """On a non-ASCII line the column counts characters (é is 2 bytes, 1 column)."""
    policy = _policy(forbid_calls=("eval",))
    found = check_source("x = 'éé'; eval('1')\n", policy, module="m")
    assert [(v.line, v.column) for v in found] == [(1, 11)]


def test_unparseable_source_is_a_finding_not_a_crash() -> None:
    """Syntax errors and NUL bytes are KG010 findings for the file."""
    policy = _policy(forbid_calls=("eval",))
    assert [c for _l, _c, c in _codes("def (:\n", policy)] == ["KG010"]
    assert [v.code for v in check_source(b"x = 1\0\n", policy, module="m")] == [
        ViolationCode.UNPARSEABLE
    ]


def test_latin1_coding_cookie_and_crlf() -> None:
    """A PEP 263 cookie and CRLF newlines keep lines and columns right."""
    policy = _policy(forbid_calls=("eval",))
    data = "# -*- coding: latin-1 -*-\r\nx = 'é'; eval('1')\r\n".encode("latin-1")
    found = check_source(data, policy, module="m")
    assert [(v.line, v.column) for v in found] == [(2, 10)]


def test_annotations_are_checked_as_code_even_lazy_or_strings() -> None:
    """`typing.get_type_hints` evaluates lazy and string annotations: both are checked;
    a string inside `Literal[...]` is data, not a forward reference."""
    policy = _policy(forbid_calls=("os.environ", "open"))
    lazy = "from __future__ import annotations\nimport os\ndef f(x: os.environ) -> None: ...\n"
    eager = "import os\ndef f(x: os.environ) -> None: ...\n"
    string = "import os\nx: 'list[os.environ]'\ndef g() -> 'open(1)': ...\n"
    literal = "from typing import Literal\nx: Literal['open']\n"
    assert _codes(lazy, policy) == [(3, 10, "KG004")]
    assert _codes(eager, policy) == [(2, 10, "KG004")]
    assert _codes(string, policy) == [(2, 4, "KG004"), (3, 12, "KG004")]
    assert _codes(literal, policy) == []


def test_rebinding_discovered_late_is_followed() -> None:
    """A function using an alias defined further down is still caught (fixpoint)."""
    policy = _policy(forbid_calls=("os.system",))
    src = "import os\ndef run():\n    return runner('x')\nrunner = os.system\n"
    assert _codes(src, policy) == [(3, 12, "KG004"), (4, 10, "KG004")]


# ------------------------------------------------------------------ tree, cache, transitive


def test_transitive_chain_and_typing_edges(tmp_path: Path) -> None:
    """The chain names every hop with its line; typing-only edges are not followed."""
    src = _tree(tmp_path, {
        "app/__init__.py": "",
        "app/top.py": "import os\nfrom app import mid\n",
        "app/mid.py": "\nimport subprocess\n",
        "app/typed.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app import mid\n"
        ),
    })  # fmt: skip
    policy = Policy(
        rules=(
            Rule(
                name="t",
                modules=("app.top", "app.typed"),
                forbid_imports=("subprocess",),
                transitive=True,
            ),
        ),
        unguarded=("app", "app.mid"),
    )
    report = check_tree(src, policy)
    assert [(Path(v.path).name, v.line, v.code.value) for v in report.violations] == [
        ("top.py", 2, "KG007")
    ]
    chain = report.violations[0].chain
    assert [(c.module, c.line, c.imports) for c in chain] == [
        ("app.top", 2, "app.mid"),
        ("app.mid", 2, "subprocess"),
    ]


def test_cache_serves_unchanged_files_and_sees_edits(tmp_path: Path) -> None:
    """Second run is served from the cache; an edit (same size) is re-scanned."""
    src = _tree(tmp_path, {"m.py": "eval('1')\n"})
    policy = _policy(forbid_calls=("eval",))
    cache = tmp_path / "cache"
    first = check_tree(src, policy, cache_dir=cache)
    second = check_tree(src, policy, cache_dir=cache)
    assert (first.files_cached, second.files_cached) == (0, 1)
    assert first.violations == second.violations
    (src / "m.py").write_text("exec('1')\n", encoding="utf-8")
    third = check_tree(src, policy, cache_dir=cache)
    assert third.files_cached == 0
    assert third.violations == ()
    other = _policy(forbid_calls=("exec",))
    assert check_tree(src, other, cache_dir=cache).files_cached == 0  # policy is in the key


def test_stat_shortcut_after_racy_window(tmp_path: Path) -> None:
    """Files older than the racy window are trusted by (size, mtime, inode)."""
    src = _tree(tmp_path, {"m.py": "eval('1')\n"})
    old = 1_000_000_000
    os.utime(src / "m.py", (old, old))
    policy = _policy(forbid_calls=("eval",))
    cache = tmp_path / "cache"
    check_tree(src, policy, cache_dir=cache)
    assert check_tree(src, policy, cache_dir=cache).files_cached == 1


def test_damaged_cache_is_a_cold_run(tmp_path: Path) -> None:
    """A corrupt cache file is ignored, never an error."""
    src = _tree(tmp_path, {"m.py": "eval('1')\n"})
    policy = _policy(forbid_calls=("eval",))
    cache = tmp_path / "cache"
    check_tree(src, policy, cache_dir=cache)
    for f in cache.iterdir():
        f.write_bytes(b"garbage")
    assert len(check_tree(src, policy, cache_dir=cache).violations) == 1


def test_empty_tree_is_refused(tmp_path: Path) -> None:
    """No Python file under --src is a configuration error, not a pass."""
    (tmp_path / "src").mkdir()
    with pytest.raises(ConfigError, match="no Python files"):
        check_tree(tmp_path / "src", _policy(forbid_calls=("eval",)))
    with pytest.raises(ConfigError, match="not a directory"):
        check_tree(tmp_path / "missing", _policy(forbid_calls=("eval",)))


# ------------------------------------------------------------------ output and CLI


def _report(tmp_path: Path) -> GuardReport:
    src = _tree(tmp_path, {"m.py": "import subprocess\nx = 'é'; eval('1')\n"})
    return check_tree(src, _policy(forbid_imports=("subprocess",), forbid_calls=("eval",)))


def test_text_output_is_sorted_path_line_col(tmp_path: Path) -> None:
    """Text lines are `path:line:col: CODE message [rule]`, sorted, plus a summary."""
    lines = render(_report(tmp_path), "text", "v").splitlines()
    assert lines[0].endswith(
        "m.py:1:1: KG001 import of 'subprocess' is forbidden (forbid-imports 'subprocess') [r]"
    )
    assert ":2:10: KG004 " in lines[1]
    assert lines[2].startswith("2 findings in 1 files")


def test_json_and_sarif_output(tmp_path: Path) -> None:
    """JSON carries every finding; SARIF 2.1.0 has the driver rules and char columns."""
    report = _report(tmp_path)
    doc = json.loads(render(report, "json", "v"))
    assert [v["code"] for v in doc["violations"]] == ["KG001", "KG004"]
    sarif = json.loads(render(report, "sarif", "v"))
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} == {c.value for c in ViolationCode}
    region = run["results"][1]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 2, "startColumn": 10}
    with pytest.raises(ValueError, match="unknown format"):
        render(report, "xml", "v")


def test_cli_exit_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """0 clean, 1 findings, 2 unusable or missing policy (one line naming file and key)."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "import os\nos.system('x')\n"})
    (tmp_path / "docs" / "adr").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert main(["guard", "--no-cache"]) == 2
    assert "no guard policy found" in capsys.readouterr().err
    (tmp_path / "docs" / "adr" / "x.md").write_text(POLICY_MD, encoding="utf-8")
    assert main(["guard", "--cache-dir", str(tmp_path / "c")]) == 1
    out = capsys.readouterr().out
    assert "src/pkg/a.py:2:1: KG004" in out
    assert main(["guard", "--format", "sarif", "--cache-dir", str(tmp_path / "c")]) == 1
    assert json.loads(capsys.readouterr().out)["version"] == "2.1.0"
    (tmp_path / "src" / "pkg" / "a.py").write_text("x = 1\n", encoding="utf-8")
    assert main(["guard", "--no-cache"]) == 0
    bad = tmp_path / "bad.md"
    bad.write_text(
        '```guard\n[[rules]]\nname="x"\nmodules=["m"]\nforbid=["os"]\n```\n', encoding="utf-8"
    )
    assert main(["guard", "--config", str(bad), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err
    assert "rules[0].forbid" in err


# ------------------------------------------------------------------ fail closed on configuration


@pytest.mark.parametrize(
    ("files", "policy", "needle"),
    [
        (
            {"pkg/a.py": ""},
            Policy(
                rules=(
                    Rule(name="a", modules=("pkg.a",), forbid_calls=("eval",)),
                    Rule(name="b", modules=("pkg.b",), forbid_calls=("eval",)),
                )
            ),
            "rule 'b': modules ['pkg.b'] match no module",
        ),
        (
            {"pkg/a.py": "", "pkg/b.py": ""},
            _policy(modules=("pkg.a",), forbid_calls=("eval",)),
            "module 'pkg.b'",
        ),
        ({"src/pkg/a.py": ""}, _policy(modules=("pkg.a",), forbid_calls=("eval",)), "--src"),
        (
            {"pkg/a.py": ""},
            Policy(rules=_policy(modules=("pkg.a",), forbid_calls=("e",)).rules, unguarded=("x",)),
            "'x' matches no module",
        ),
        (
            {"pkg/a.py": ""},
            Policy(
                rules=_policy(modules=("pkg.a",), forbid_calls=("e",)).rules, unguarded=("pkg.a",)
            ),
            "both covered by a rule and unguarded",
        ),
        (
            {"pkg/a.py": "", "pkg/b.py": ""},
            _policy(modules=("pkg.a", "pkg.b"), layers=(("pkg.a",), ("pkg.c",))),
            "layers[1] 'pkg.c' matches no module",
        ),
    ],
    ids=[
        "rule-matches-nothing",
        "module-uncovered",
        "wrong-root",
        "unguarded-typo",
        "both",
        "layer",
    ],
)
def test_policy_that_checks_nothing_or_not_everything_is_refused(
    tmp_path: Path, files: dict[str, str], policy: Policy, needle: str
) -> None:
    """A green run must mean every module was checked: each gap is a ConfigError."""
    with pytest.raises(ConfigError, match=re.escape(needle)):
        check_tree(_tree(tmp_path, files), policy)


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        (
            '[[rules]]\nname="x"\nmodules=["m"]\nallow-imports=["os.path"]\nforbid-imports=["os"]\n',
            "rules[0].allow-imports[0]: rule 'x' allows 'os.path' and forbids it",
        ),
        (
            '[[rules]]\nname="x"\nmodules=["m", "!m"]\nforbid-imports=["os"]\n',
            "rules[0].modules[1]: rule 'x' both covers and excludes 'm'",
        ),
        ('[[rules]]\nname="x"\nlayers=["a", ["b", "a"]]\n', "rules[0].layers[1]: 'a' is already"),
        ('[[rules]]\nname="x"\nlayers=["a"]\n', "rules[0].layers: expected a list of at least"),
        ('[[rules]]\nname="x"\nlayers=["a", []]\n', "rules[0].layers[1]: an empty layer"),
        ("unguarded = [1]\n[[rules]]\n", "unguarded[0]: expected a string"),
        ("a = " + "[" * 200 + "]" * 200 + "\n", "nesting deeper than 32 levels"),
    ],
)
def test_contradictory_or_deep_policy_is_refused(tmp_path: Path, toml: str, needle: str) -> None:
    """Self-contradictions and deeply nested TOML: one ConfigError naming file and key."""
    md = tmp_path / "bad.md"
    md.write_text(f"```guard\n{toml}```\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_policy([md])
    assert str(md) in str(info.value)
    assert needle in str(info.value)


def test_deeply_nested_markdown_is_read_without_recursion(tmp_path: Path) -> None:
    """Nested quotes and lists thousands deep neither crash nor hide a policy block."""
    md = tmp_path / "deep.md"
    deep = "> " * 20000 + "- " * 20000 + "x\n"
    md.write_text(deep + POLICY_MD + deep, encoding="utf-8")
    assert load_policy([md]).rules[0].name == "pure"


def test_layers_rule_reports_upward_imports(tmp_path: Path) -> None:
    """KG009 for a lower layer importing a higher one (typing-only too); the ancestor
    package of the importer is not a target; the catch-all top places new modules."""
    src = _tree(tmp_path, {
        "app/__init__.py": "from app import low, high\n",
        "app/low.py": (
            "from app import base\nimport app.high\nfrom typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from app.new import X\n"
        ),
        "app/base.py": "",
        "app/high.py": "from app import low\n",
        "app/new.py": "X = 1\n",
    })  # fmt: skip
    rule = Rule(
        name="l",
        modules=("app", "app.*"),
        layers=(("app",), ("app.high",), ("app.low",), ("app.base",)),
    )
    report = check_tree(src, Policy(rules=(rule,)))
    found = [(Path(v.path).name, v.line, v.code.value) for v in report.violations]
    assert found == [("low.py", 2, "KG009"), ("low.py", 5, "KG009")]
    assert "higher layer 1 (app.high)" in report.violations[0].message
    assert rule.layer_of("app.new") == 0


def test_layers_report_chains_through_unlayered_modules(tmp_path: Path) -> None:
    """A lower layer reaching a higher one through a module no layer names is KG009
    with the chain (as import-linter reports it), every hop with its line."""
    src = _tree(tmp_path, {
        "app/__init__.py": "",
        "app/low.py": "\nimport helper\n",
        "app/high.py": "",
        "helper.py": "import app.high\n",
    })  # fmt: skip
    rule = Rule(name="l", modules=("app.*",), layers=(("app.high",), ("app.low",)))
    policy = Policy(rules=(rule,), unguarded=("app", "helper"))
    found = check_tree(src, policy).violations
    assert [(Path(v.path).name, v.line, v.code.value) for v in found] == [("low.py", 2, "KG009")]
    assert [(c.module, c.line, c.imports) for c in found[0].chain] == [
        ("app.low", 2, "helper"),
        ("helper", 1, "app.high"),
    ]


def test_configuration_error_in_every_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 and one stderr line; JSON, SARIF and GitHub output also say it on stdout."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "x = 1\n"})
    bad = tmp_path / "bad.md"
    bad.write_text(POLICY_MD.replace('"pkg", "pkg.*"', '"pkx", "pkx.*"'), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for fmt in ("text", "json", "sarif", "github"):
        assert main(["guard", "--config", str(bad), "--no-cache", "--format", fmt]) == 2
        out, err = capsys.readouterr()
        assert len(err.splitlines()) == 1
        assert "rule 'pure'" in err
        if fmt == "json":
            assert "rule 'pure'" in json.loads(out)["error"]
        elif fmt == "sarif":
            invocation = json.loads(out)["runs"][0]["invocations"][0]
            assert invocation["executionSuccessful"] is False
        elif fmt == "github":
            assert out.startswith("::error title=kernel guard configuration::")
        else:
            assert out == ""


def test_github_annotations_escape_properties(tmp_path: Path) -> None:
    """`::error file=..,line=..,col=..,title=..::message` with %, :, and , escaped."""
    out = render(_report(tmp_path), "github", "v").splitlines()
    assert out[0].startswith("::error file=")
    assert ",line=1,col=1,title=KG001 forbidden-import::import of 'subprocess'" in out[0]
    assert out[-1] == "2 findings in 1 files"


# ------------------------------------------------------------------ evasion families (unit level)


def test_coding_cookie_counts_only_where_python_reads_it() -> None:
    """Line 2 counts after a comment line 1, not after code; a BOM is honoured."""
    policy = _policy(forbid_calls=("open",))
    honoured = b"#!/usr/bin/env python\n# -*- coding: latin-1 -*-\nx = '\xe9'; open(1)\n"
    assert _codes(honoured, policy) == [(3, 10, "KG004")]
    assert _codes(b"\xef\xbb\xbfopen(1)\n", policy) == [(1, 1, "KG004")]
    hidden = b'x = 1\n# coding: utf-7\ns = "+ACI-"; open(1); t = "+ACI-"\n'
    assert _codes(hidden, policy) == [(3, 14, "KG004")]
    assert _codes(b"# coding: no-such-codec\nx = 1\n", policy)[0][2] == "KG010"


def test_compatibility_forms_do_not_hide_a_name() -> None:
    """A fullwidth identifier is the ASCII one for the parser and for the prefilter."""
    policy = _policy(forbid_calls=("os.system",))
    src = "import os\nos.\uff53\uff59\uff53\uff54\uff45\uff4d('x')\n"
    assert _codes(src, policy) == [(2, 1, "KG004")]


def test_deeply_nested_source_is_a_finding_not_a_crash() -> None:
    """Nesting past the parser's limits is KG010, never a RecursionError."""
    policy = _policy(forbid_calls=("open",))
    for src in ("x = " + "(" * 500 + ")" * 500 + "\n", "x = " + "-" * 200_000 + "1\n"):
        found = _codes(src, policy)
        assert [code for _l, _c, code in found] == ["KG010"]


def test_reach_through_allowed_modules_and_aliases() -> None:
    """`json.codecs` is module codecs (not allowed); `os.path` is os's own submodule."""
    policy = _policy(allow_imports=("json", "os"), forbid_calls=("codecs.open",))
    assert _codes("import json\njson.codecs.open('x')\n", policy) == [
        (2, 1, "KG002"),
        (2, 1, "KG004"),
    ]
    assert _codes("import os\nos.path.join('a', 'b')\nimport json\njson.dumps(1)\n", policy) == []
    assert _codes("from json import codecs as c\nf = c\n", policy) == [(2, 5, "KG002")]


def test_type_checking_trust_follows_bindings() -> None:
    """An alias is trusted; a second binding, a loop target or a faked attribute is not."""
    policy = _policy(forbid_imports=("socket",), allow_typing_imports=("socket",))
    guarded = "if TC:\n    import socket\n"
    assert _codes("from typing import TYPE_CHECKING as TC\n" + guarded, policy) == []
    rebound = "from typing import TYPE_CHECKING as TC\nfor TC in [1]: pass\n" + guarded
    assert _codes(rebound, policy) == [(4, 5, "KG001")]
    twice = "from typing import TYPE_CHECKING as TC\nfrom fake import TC\n" + guarded
    assert _codes(twice, policy) == [(4, 5, "KG001")]
    fallback = (
        "try:\n    from typing import TYPE_CHECKING\nexcept ImportError:\n"
        "    TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import socket\n"
    )
    assert _codes(fallback, policy) == []
    assert _codes(fallback.replace("= False", "= True"), policy) == [(6, 5, "KG001")]
    faked = "import typing\nsetattr(typing, 'TYPE_CHECKING', 1)\nif typing.TYPE_CHECKING:\n"
    assert _codes(faked + "    import socket\n", policy) == [(2, 1, "KG008"), (4, 5, "KG001")]


def test_suppression_needs_a_reason_and_a_finding() -> None:
    """`# kernel-guard: ignore[CODE] reason` drops that finding; without a reason, or
    with nothing to suppress, it is KG011; the text inside a string is no comment."""
    policy = _policy(forbid_calls=("open",))
    ok = "open(1)  # kernel-guard: ignore[KG004] the test fixture opens nothing\n"
    assert _codes(ok, policy) == []
    above = "# kernel-guard: ignore[KG004] reads its own source\nopen(1)\n"
    assert _codes(above, policy) == []
    bare = "open(1)  # kernel-guard: ignore[KG004]\n"
    assert _codes(bare, policy) == [(1, 1, "KG004"), (1, 10, "KG011")]
    unused = "x = 1  # kernel-guard: ignore[KG004] nothing here\n"
    assert _codes(unused, policy) == [(1, 8, "KG011")]
    in_string = 'x = """\n# kernel-guard: ignore[KG004] no\n"""\nopen(1)\n'
    assert _codes(in_string, policy) == [(4, 1, "KG004")]


# ------------------------------------------------------------------ adoption


def test_exclude_gitignore_and_venvs_are_not_scanned(tmp_path: Path) -> None:
    """--exclude globs, .gitignore rules (with negation and anchors) and any folder
    holding pyvenv.cfg keep files out of discovery."""
    root = tmp_path
    for rel in (
        "pkg/__init__.py", "pkg/a.py", "pkg/gen/b.py", "pkg/keep_me.py", "pkg/build/c.py",
        "venv/lib/site.py", "env2/x.py", "pkg/skip.py",
    ):  # fmt: skip
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n", encoding="utf-8")
    (root / "env2" / "pyvenv.cfg").write_text("home = /usr\n", encoding="utf-8")
    (root / ".gitignore").write_text("# c\nvenv/\n/pkg/gen/\n*_me.py\n!keep_me.py\n")
    (root / "pkg" / ".gitignore").write_text("build\n")
    found = discover_modules(root, exclude=["pkg/skip.py"], gitignore_from=root)
    assert [m for _p, m, _k in found] == ["pkg", "pkg.a", "pkg.keep_me"]


def test_a_venv_is_seen_in_its_own_listing_and_before_an_ignore(tmp_path: Path) -> None:
    """A folder holding a `pyvenv.cfg` file is left out whether or not `.gitignore`
    names it, and recorded as visited (a replay must see the file go), never as
    excluded; the import root itself and a `pyvenv.cfg` that is a folder or a dangling
    link do not make one."""
    for rel in ("pkg/__init__.py", "env/lib/x.py", "ign/y.py", "dir/z.py", "link/w.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n", encoding="utf-8")
    for folder in ("", "env", "ign"):
        (tmp_path / folder / "pyvenv.cfg").write_text("home = /usr\n", encoding="utf-8")
    (tmp_path / "dir" / "pyvenv.cfg").mkdir()
    (tmp_path / "link" / "pyvenv.cfg").symlink_to(tmp_path / "gone")
    (tmp_path / ".gitignore").write_text("ign/\n", encoding="utf-8")
    visited: list[str] = []
    excluded: list[str] = []
    found = discover_modules(tmp_path, gitignore_from=tmp_path, visited=visited, excluded=excluded)
    assert [m for _p, m, _k in found] == ["dir.z", "link.w", "pkg"]
    assert {str(tmp_path / "env"), str(tmp_path / "ign")} <= set(visited)
    assert excluded == []


def test_paths_limit_the_report_not_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kernel guard FILE` reports that file's findings; coverage still sees the tree."""
    bad = "import os\nos.system('x')\n"
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": bad, "pkg/b.py": bad})
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    args = ["guard", "--config", "adr.md", "--no-cache"]
    assert main([*args, "src/pkg/a.py"]) == 1
    out = capsys.readouterr().out
    assert "src/pkg/a.py:2:1: KG004" in out
    assert "b.py" not in out
    assert main([*args, "src/pkg/__init__.py", "README.md"]) == 0
    capsys.readouterr()


def test_cache_folder_ignores_itself(tmp_path: Path) -> None:
    """The cache folder holds a .gitignore of `*`, as ruff's and pytest's do."""
    src = _tree(tmp_path, {"m.py": "x = 1\n"})
    check_tree(src, _policy(forbid_calls=("eval",)), cache_dir=tmp_path / "c")
    assert (tmp_path / "c" / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"


def test_baseline_hides_known_findings_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--write-baseline records today's findings; --baseline hides them (by count, not
    by line) and still reports a new one; a damaged baseline is exit 2."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "import os\nos.system('1')\n"})
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    args = ["guard", "--config", "adr.md", "--no-cache"]
    assert main([*args, "--write-baseline", "base.json"]) == 0
    assert main([*args, "--baseline", "base.json"]) == 0
    two = "import os\n\n\nos.system('1')\nos.system('1')\n"
    (tmp_path / "src/pkg/a.py").write_text(two, encoding="utf-8")
    capsys.readouterr()
    assert main([*args, "--baseline", "base.json"]) == 1
    assert capsys.readouterr().out.count("KG004") == 1
    (tmp_path / "base.json").write_text('{"findings": []}', encoding="utf-8")
    assert main([*args, "--baseline", "base.json"]) == 2
    assert "kernel-guard-baseline" in capsys.readouterr().err


def test_sarif_rules_carry_help_and_encoded_relative_uris(tmp_path: Path) -> None:
    """Each SARIF rule has help text and a helpUri into docs/guard.md (whose heading
    for the code exists); result URIs are percent-encoded and relative to SRCROOT."""
    src = _tree(tmp_path, {"dir name/m é#.py": "eval('1')\n"})
    policy = _policy(modules=("dir name.m é#",), forbid_calls=("eval",))
    report = check_paths([(str(src / "dir name/m é#.py"), "dir name.m é#", False)], policy)
    shown = GuardReport(
        violations=tuple(attrs.evolve(v, path="src/dir name/m é#.py") for v in report.violations),
        files_checked=1,
        files_cached=0,
    )
    run = json.loads(render(shown, "sarif", "v"))["runs"][0]
    location = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "src/dir%20name/m%20%C3%A9%23.py", "uriBaseId": "SRCROOT"}
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"].startswith("file://")
    docs = (Path(__file__).resolve().parents[1] / "docs" / "guard.md").read_text("utf-8")
    for rule in run["tool"]["driver"]["rules"]:
        assert rule["help"]["text"] == ViolationCode(rule["id"]).help
        uri, _, anchor = rule["helpUri"].partition("#")
        assert uri.startswith("file://")
        assert uri.endswith("/docs/guard.md")
        assert f"### {rule['id']} {rule['name']}" in docs, anchor


def test_help_documents_the_policy_format_and_pre_commit_hook(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`kernel guard --help` shows the policy format; the repository ships a hook."""
    with pytest.raises(SystemExit):
        main(["guard", "--help"])
    out = capsys.readouterr().out
    for needle in ("[[rules]]", "allow-imports", "layers", "unguarded", "kernel-guard: ignore"):
        assert needle in out
    hooks = (Path(__file__).resolve().parents[1] / ".pre-commit-hooks.yaml").read_text("utf-8")
    assert "id: kernel-guard" in hooks
    assert "entry: kernel guard" in hooks
    from kernel.effects.commands import guard as verb
    from kernel.guard import DEFAULT_CACHE_DIR, FORMATS

    assert verb._FORMATS == FORMATS  # the verb keeps its own copy to start fast
    assert verb._CACHE_DIR == DEFAULT_CACHE_DIR


# ------------------------------------------------------------------ warm replay


def _age(root: Path) -> None:
    """Every file and folder under ``root`` older than the racy window."""
    old = 1_000_000_000
    for path in [root, *root.rglob("*")]:
        os.utime(path, (old, old))


def test_warm_run_is_replayed_until_something_it_read_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unchanged second `kernel guard` prints the recorded output without running
    the guard; an edited module, a new file or an edited policy runs it again."""
    from kernel.guard import engine

    proj = tmp_path / "proj"
    _tree(proj, {"pkg/__init__.py": "", "pkg/a.py": "import os\nos.system('x')\n"})
    (proj / "docs" / "adr").mkdir(parents=True)
    (proj / "docs" / "adr" / "x.md").write_text(POLICY_MD, encoding="utf-8")
    monkeypatch.chdir(proj)
    args = ["guard", "--cache-dir", str(tmp_path / "cache")]
    _age(proj)
    assert main(args) == 1
    first = capsys.readouterr().out
    real = engine.check_tree
    calls: list[int] = []

    def counted(*a: object, **kw: object) -> object:
        calls.append(1)
        return real(*a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "check_tree", counted)
    assert main(args) == 1
    assert capsys.readouterr().out == first
    assert calls == []
    changes: list[tuple[str, str]] = [
        ("src/pkg/a.py", "import os\nos.system('y')\n"),
        ("src/pkg/b.py", "x = 1\n"),
        ("docs/adr/x.md", POLICY_MD.replace("open", "eval")),
    ]
    for rel, text in changes:
        _age(proj)
        assert main(args) == 1  # records the current state
        capsys.readouterr()
        calls.clear()
        (proj / rel).write_text(text, encoding="utf-8")
        assert main(args) == 1
        capsys.readouterr()
        assert calls == [1]
    (tmp_path / "cache" / "last-runs.marshal").write_bytes(b"damaged")
    calls.clear()
    assert main(args) == 1
    assert calls == [1]


def test_process_pool_gives_the_same_report(tmp_path: Path) -> None:
    """Parsing in a pool of processes changes nothing in the report."""
    from kernel.guard.engine import PARALLEL_MIN_FILES

    files = {f"pkg/m{i}.py": f"import os\nx = {i}\nos.system('x')\n" for i in range(70)}
    files["pkg/__init__.py"] = ""
    files["pkg/broken.py"] = "def (:\n"
    src = _tree(tmp_path, files)
    assert len(files) >= PARALLEL_MIN_FILES
    policy = _policy(modules=("pkg", "pkg.*"), forbid_calls=("os.system",))
    serial = check_tree(src, policy, jobs=1)
    pooled = check_tree(src, policy, jobs=2)
    assert pooled == serial
    assert len(serial.violations) == 71


# ------------------------------------------------------------------ properties and start-up


@given(st.binary(max_size=300) | st.text(max_size=300).map(lambda t: t.encode("utf-8")))
def test_any_input_is_findings_never_an_exception(data: bytes) -> None:
    """For all byte strings, the scan returns findings (KG010 when unparseable), with
    1-based positions; it never raises."""
    policy = _policy(forbid_calls=("open", "os.system"), forbid_imports=("socket",))
    for v in check_source(data, policy, module="m"):
        assert v.line >= 1
        assert v.column >= 1


@given(st.sampled_from(["open", "eval", "exec"]), st.integers(0, 3))
def test_a_forbidden_builtin_is_caught_at_any_function_depth(name: str, depth: int) -> None:
    """For all nestings of functions whose locals do not bind the name, the call is caught."""
    policy = _policy(forbid_calls=(name,))
    lines = []
    for level in range(depth):
        lines.append("    " * level + f"def f{level}(x):")
        lines.append("    " * (level + 1) + f"[x for {name}_ in ()]")
    lines.append("    " * depth + f"{name}('1')")
    assert [code for _l, _c, code in _codes("\n".join(lines) + "\n", policy)] == ["KG004"]


def test_kernel_guard_loads_only_the_guard(tmp_path: Path) -> None:
    """`kernel guard` imports the guard, errors and the raw-bytes digests; no other part
    of the library. A replayed warm run does not even load the guard's scanner."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "x = 1\n"})
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    _age(tmp_path)
    cache = tmp_path.parent / f"{tmp_path.name}-cache"  # outside the aged tree
    probe = (
        "import sys\nfrom kernel.effects.cli import main\n"
        f"code = main(['guard', '--config', 'adr.md', '--cache-dir', {str(cache)!r}])\n"
        "print(code, ' '.join(sorted(m for m in sys.modules if m.startswith('kernel'))))\n"
    )
    runs = []
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        runs.append(proc.stdout.splitlines()[-1].split())
    allowed = ("kernel.guard", "kernel.errors", "kernel.records.digest", "kernel.effects")
    full, replayed = runs[0], runs[-1]
    assert full[0] == replayed[0] == "0"
    assert "kernel.guard.scan" in full
    for name in full[1:]:
        # The bare packages above digest are docstrings with an empty __all__.
        assert name in {"kernel", "kernel.records"} or name.startswith(allowed), name
    assert "kernel.guard.scan" not in replayed
    assert "kernel.guard.fastpath" in replayed


def test_module_tables_read_every_import_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reach-through reads an installed module's import bindings without compiling it:
    every statement form Python accepts, relative imports against the package."""
    from kernel.guard.installed import module_imports as _module_table

    pkg = tmp_path / "kg_table_probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "mod.py").write_text(
        "import a.b as c, d.e\n"
        "from . import x\n"
        "from .y import z as w\n"
        "if t: import q\n"
        "v = 1; import r as s\n"
        "from m import (\n    n,  # a comment\n    o as p,\n)\n"
        "from k import \\\n    j\n"
        "def f():\n    from g import *\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    table = _module_table("kg_table_probe.mod")
    assert table == {
        "c": ("a.b",),
        "d": ("d",),
        "x": ("kg_table_probe.x",),
        "w": ("kg_table_probe.y.z",),
        "q": ("q",),
        "s": ("r",),
        "n": ("m.n",),
        "p": ("m.o",),
        "j": ("k.j",),
    }


# ------------------------------------------------------- honest code (issue 21)


def test_module_definitions_shadow_function_bodies_wherever_defined() -> None:
    """A module's own `compile` below its first use, a recursive `def eval` and a `del`
    of a function's own local are the module's names in function bodies; a use that
    runs before the binding (at top level, or through a call made before it) is not."""
    policy = _policy(forbid_calls=("open", "eval", "compile"))
    dsl = (
        "def render(s):\n    return compile(s)\n"
        "def compile(s):\n    return s\n"
        "def eval(node):\n    return [eval(c) for c in node]\n"
        "open = len\n"
        "def f():\n    open = 1\n    del open\n"
        "def k(p):\n    return open(p)\n"
    )
    assert _codes(dsl, policy) == []
    early = "X = compile('1', 'f', 'eval')\ndef compile(s):\n    return s\n"
    assert _codes(early, policy) == [(1, 5, "KG004")]
    called_first = (
        "def render(s):\n    return compile(s)\nrender('x')\ndef compile(s):\n    return s\n"
    )
    assert _codes(called_first, policy) == [(2, 12, "KG004")]
    decorated_first = (
        "def deco(f):\n    return compile(f)\n"
        "class C:\n    @deco\n    def m(self):\n        pass\n"
        "def compile(s):\n    return s\n"
    )
    assert _codes(decorated_first, policy) == [(2, 12, "KG004")]
    module_del = "open = len\ndel open\ndef k(p):\n    return open(p)\n"
    assert _codes(module_del, policy) == [(4, 12, "KG004")]
    global_del = (
        "open = len\ndef f():\n    global open\n    del open\ndef k(p):\n    return open(p)\n"
    )
    assert _codes(global_del, policy) == [(6, 12, "KG004")]
    conditional = "import sys\nif sys:\n    open = len\ndef k(p):\n    return open(p)\n"
    assert _codes(conditional, policy) == [(5, 12, "KG004")]


def test_class_body_names_are_not_builtins() -> None:
    """An enum member named `open` is the member in the rest of the class body; a method
    body does not see class names, and a use before the member is the builtin."""
    policy = _policy(forbid_calls=("open",))
    enum_src = (
        "import enum\n"
        "class Mode(enum.Enum):\n    open = 'open'\n    DEFAULT = open\n"
        "    def m(self):\n        return self is Mode.open\n"
    )
    assert _codes(enum_src, policy) == []
    before = "class C:\n    x = open\n    open = 1\n"
    assert _codes(before, policy) == [(2, 9, "KG004")]
    method = "class C:\n    open = 1\n    def m(self):\n        return open('x')\n"
    assert _codes(method, policy) == [(4, 16, "KG004")]
    deleted = "class C:\n    open = 1\n    del open\n    y = open\n"
    assert _codes(deleted, policy) == [(4, 9, "KG004")]


def test_literal_strings_are_not_forward_references_under_any_name() -> None:
    """`Literal["open"]` is a value, also as `from typing import Literal as L`."""
    policy = _policy(forbid_calls=("open", "eval"))
    src = (
        "from typing import Literal as L, Optional\nimport typing as t\n"
        "def g(m: L['open'], n: 't.Literal[\"eval\"]') -> Optional[L['open']]:\n"
        "    return None\n"
    )
    assert _codes(src, policy) == []
    assert _codes("def g(m: 'open') -> None:\n    pass\n", policy) == [(1, 10, "KG004")]


def test_reflection_is_an_opt_in_rule() -> None:
    """KG008 fires only for a rule with forbid-reflection; a faked TYPE_CHECKING always."""
    src = "def h():\n    return locals()\n"
    assert _codes(src, _policy(forbid_calls=("open",))) == []
    assert _codes(src, _policy(forbid_reflection=True)) == [(2, 12, "KG008")]
    faked = "import typing\nsetattr(typing, 'TYPE_CHECKING', True)\n"
    assert _codes(faked, _policy(forbid_calls=("open",))) == [(2, 1, "KG008")]


def test_forbid_reflection_key_is_validated(tmp_path: Path) -> None:
    """forbid-reflection must be a boolean; alone it is a rule that checks something."""
    md = tmp_path / "p.md"
    md.write_text(
        '```guard\n[[rules]]\nname="r"\nmodules=["m"]\nforbid-reflection=1\n```\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="forbid-reflection: expected true or false"):
        load_policy([md])
    md.write_text(
        '```guard\n[[rules]]\nname="r"\nmodules=["m"]\nforbid-reflection=true\n```\n',
        encoding="utf-8",
    )
    rule = load_policy([md]).rules[0]
    assert rule.forbid_reflection
    assert rule.to_dict()["forbid-reflection"] is True


def test_one_finding_per_line_and_target_names_merged() -> None:
    """`from subprocess import run, PIPE` is one finding naming both; the same finding
    under two rules is one finding naming both rules; other targets stay apart."""
    policy = Policy(
        rules=(
            Rule(name="a", modules=("m",), forbid_imports=("subprocess",)),
            Rule(name="b", modules=("m",), forbid_imports=("subprocess",)),
        )
    )
    found = check_source(
        "from subprocess import run, PIPE\nimport socket, subprocess\n", policy, module="m"
    )
    assert [(v.line, v.rule, v.message) for v in found] == [
        (
            1,
            "a,b",
            "import of 'subprocess.PIPE', 'subprocess.run' is forbidden "
            "(forbid-imports 'subprocess')",
        ),
        (2, "a,b", "import of 'subprocess' is forbidden (forbid-imports 'subprocess')"),
    ]
    calls = _policy(forbid_calls=("os.system", "os.environ"))
    assert len(check_source("from os import system, environ\n", calls, module="m")) == 2


def test_cli_edges_are_one_line_exit_2_never_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--write-baseline onto a full device, a folder or a FIFO and --config or --baseline
    from a device or a FIFO are refused before anything is read or written (issue 22)."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "import os\nos.system('1')\n"})
    (tmp_path / "adr.md").write_text(POLICY_MD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    full = tmp_path / "full"  # a link: were it replaced, only the link would be
    full.symlink_to("/dev/full")
    args = ["guard", "--config", "adr.md", "--no-cache"]
    cases = [
        (["--write-baseline", str(full)], "character device"),
        (["--write-baseline", str(tmp_path / "src")], "directory"),
        (["--write-baseline", str(fifo)], "FIFO"),
        (["--baseline", str(fifo)], "FIFO"),
    ]
    for extra, kind in cases:
        assert main([*args, *extra]) == 2
        err = capsys.readouterr().err
        assert kind in err
        assert len(err.strip().splitlines()) == 1
    for config in ("/dev/urandom", str(fifo), str(tmp_path)):
        assert main(["guard", "--config", config, "--no-cache"]) == 2
        assert "not a regular file" in capsys.readouterr().err
    assert full.is_symlink()
    assert fifo.is_fifo()


PYPROJECT_POLICY = """\
[tool.kernel.guard]
unguarded = ["tests", "tests.*"]

[[tool.kernel.guard.rules]]
name = "pure"
modules = ["pkg", "pkg.*"]
forbid-calls = ["os.system"]
"""


def test_project_root_anchors_policy_paths_baseline_and_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The policy is found upward from the working folder or a PATH; findings and the
    baseline name paths relative to the project root, so a baseline written at the
    root holds from a subfolder; the cache lives at the root, not where one stands."""
    (tmp_path / "proj").mkdir()
    proj = tmp_path / "proj"
    (proj / "pyproject.toml").write_text(PYPROJECT_POLICY, encoding="utf-8")
    for rel, text in {
        "pkg/__init__.py": "",
        "pkg/a.py": "import os\nos.system('1')\n",
        "tests/__init__.py": "",
        "tests/test_a.py": "",
    }.items():
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(text, encoding="utf-8")
    monkeypatch.chdir(proj / "pkg")
    assert main(["guard"]) == 1
    assert capsys.readouterr().out.startswith("pkg/a.py:2:1: KG004")
    assert (proj / ".kernel-guard-cache").is_dir()
    assert not (proj / "pkg" / ".kernel-guard-cache").exists()
    assert main(["guard", "--write-baseline", str(tmp_path / "base.json")]) == 0
    doc = json.loads((tmp_path / "base.json").read_text(encoding="utf-8"))
    assert [f["path"] for f in doc["findings"]] == ["pkg/a.py"]
    monkeypatch.chdir(proj)
    assert main(["guard", "--baseline", str(tmp_path / "base.json")]) == 0
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)  # outside the project: the PATH finds it
    assert main(["guard", "--no-cache", "proj/pkg/a.py"]) == 1
    assert capsys.readouterr().out.startswith("pkg/a.py:2:1: KG004")
    sarif = tmp_path / "out.sarif"
    monkeypatch.chdir(proj / "pkg")
    assert main(["guard", "--no-cache", "--format", "sarif"]) == 1
    sarif.write_text(capsys.readouterr().out, encoding="utf-8")
    run = json.loads(sarif.read_text(encoding="utf-8"))["runs"][0]
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == proj.resolve().as_uri() + "/"


def test_exclude_and_unguarded_compose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--exclude tests` with `unguarded = ["tests"]` is the same wish said twice (not
    exit 2); a pattern matching nothing, excluded or not, is still refused."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT_POLICY, encoding="utf-8")
    for rel in ("pkg/__init__.py", "pkg/a.py", "tests/__init__.py", "tests/test_a.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["guard", "--no-cache"]) == 0
    assert main(["guard", "--no-cache", "--exclude", "tests"]) == 0
    assert main(["guard", "--no-cache", "--exclude", "tests/test_a.py"]) == 0
    typo = PYPROJECT_POLICY.replace('"tests.*"]', '"tests.*", "tsets"]')
    (tmp_path / "pyproject.toml").write_text(typo, encoding="utf-8")
    assert main(["guard", "--no-cache", "--exclude", "tests"]) == 2
    assert "'tsets' matches no module" in capsys.readouterr().err


def test_transitive_chains_grouped_per_importer_and_target(tmp_path: Path) -> None:
    """Guarded modules reaching `subprocess` through the same import of `app.mid` are
    one finding (the shortest chain, counting the others); another importer or another
    forbidden module is a finding of its own."""
    src = _tree(tmp_path, {
        "app/__init__.py": "",
        "app/a.py": "from app import mid\n",
        "app/b.py": "from app import a\n",
        "app/c.py": "from app import mid\n",
        "app/mid.py": "import subprocess\nimport socket\n",
        "app/other.py": "import subprocess\n",
        "app/d.py": "from app import other\n",
    })  # fmt: skip
    policy = Policy(
        rules=(
            Rule(
                name="t",
                modules=("app.a", "app.b", "app.c", "app.d"),
                forbid_imports=("subprocess", "socket"),
                transitive=True,
            ),
        ),
        unguarded=("app", "app.mid", "app.other"),
    )
    found = [(v.path, v.message) for v in check_tree(src, policy, root=tmp_path).violations]
    assert found == [
        (
            "src/app/a.py",
            "reaches forbidden 'socket' (forbid-imports 'socket') through app.a:1 -> "
            "app.mid:2 -> socket (2 other modules reach it through 'app.mid' too)",
        ),
        (
            "src/app/a.py",
            "reaches forbidden 'subprocess' (forbid-imports 'subprocess') through app.a:1 -> "
            "app.mid:1 -> subprocess (2 other modules reach it through 'app.mid' too)",
        ),
        (
            "src/app/d.py",
            "reaches forbidden 'subprocess' (forbid-imports 'subprocess') through app.d:1 -> "
            "app.other:1 -> subprocess",
        ),
    ]


def test_c_twins_and_real_names_are_the_capability_they_expose() -> None:
    """`_socket` is `socket`, `_io.open` and `io.open` are `open`, `posix.system` is
    `os.system`, `posixpath` is `os.path`: imported, bound or used."""
    policy = _policy(
        forbid_imports=("socket", "subprocess"), forbid_calls=("open", "os.system", "os.path.*")
    )
    src = (
        "import _socket\nimport posix, posixpath, io, _io\nfrom _io import open as o\n"
        "import _posixsubprocess\n"
        "o('x')\nposix.system('x')\nposixpath.exists('x')\nio.open('x')\n_io.open('x')\n"
    )
    assert _codes(src, policy) == [
        (1, 1, "KG001"),
        (3, 1, "KG004"),
        (4, 1, "KG001"),
        (5, 1, "KG004"),
        (6, 1, "KG004"),
        (7, 1, "KG004"),
        (8, 1, "KG004"),
        (9, 1, "KG004"),
    ]
    assert _codes("import io\nio.StringIO()\nimport re\nre.compile('x')\n", policy) == []


def test_subclasses_and_instances_reach_class_methods() -> None:
    """`class Stamp(datetime)` then `Stamp.now()`, `EPOCH.now()` and `type(EPOCH).now()`
    are `datetime.now()`; an instance's other attributes are not."""
    policy = _policy(forbid_calls=("datetime.datetime.now",))
    src = (
        "import datetime\nfrom datetime import datetime as dt\n"
        "class Stamp(datetime.datetime):\n    pass\n"
        "EPOCH = dt(2020, 1, 1)\n"
        "def f():\n    Stamp.now()\n    EPOCH.now()\n    type(EPOCH).now()\n"
        "    return EPOCH.year, Stamp.fromisoformat('2020-01-01')\n"
    )
    assert _codes(src, policy) == [(7, 5, "KG004"), (8, 5, "KG004"), (9, 5, "KG004")]


FAKELIB = """\
import time as _t
from os import system
stamp = _t.time
class Base:
    def now(self):
        return _t.time()
class Child(Base):
    pass
CLOCK = Child()
def helper():
    return _impl()
def _impl():
    return system("x")
def pure(x):
    return x + 1
"""


def test_effect_map_follows_installed_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `effects = true` a call into installed code is reported with the chain
    when its source reaches a forbid-calls name (aliases by assignment, inherited
    methods, instances, helpers); pure functions are not; without it nothing is."""
    lib = tmp_path / "site"
    (lib / "fakelib_kg").mkdir(parents=True)
    (lib / "fakelib_kg" / "__init__.py").write_text(FAKELIB, encoding="utf-8")
    monkeypatch.syspath_prepend(str(lib))
    src = (
        "import fakelib_kg\nfrom fakelib_kg import helper\n"
        "fakelib_kg.stamp()\nfakelib_kg.Child.now\nfakelib_kg.CLOCK.now()\nhelper()\n"
        "fakelib_kg.pure(1)\n"
    )
    on = _policy(name="effects-on", forbid_calls=("time.*", "os.system"), effects=True)
    found = check_source(src, on, module="m")
    assert [(v.line, v.code.value) for v in found] == [
        (3, "KG012"),
        (4, "KG012"),
        (5, "KG012"),
        (6, "KG012"),
    ]
    assert found[1].message == (
        "use of 'fakelib_kg.Child.now' reaches forbidden 'time.time' (forbid-calls "
        "'time.*') through fakelib_kg.Child.now -> fakelib_kg.Base.now -> time.time"
    )
    assert "fakelib_kg.helper -> fakelib_kg._impl -> os.system" in found[3].message
    off = _policy(name="effects-off", forbid_calls=("time.*", "os.system"))
    assert check_source(src, off, module="m") == ()


def test_effect_map_on_the_standard_library() -> None:
    """The honest-code misses of issue 21: each call reaches its capability."""
    policy = _policy(
        name="stdlib-effects",
        forbid_calls=("open", "sys.stderr", "time.*", "os.*", "exec", "compile"),
        effects=True,
    )
    src = (
        "import logging, codecs, linecache, timeit, site\nimport email.utils\n"
        "from xml.etree import ElementTree\n"
        "logging.warning('x')\ncodecs.open('x')\nlinecache.getline('x', 1)\n"
        "email.utils.formatdate()\ntimeit.default_timer()\nElementTree.parse('x')\n"
        "site.addsitedir('x')\n"
    )
    found = check_source(src, policy, module="m")
    assert [v.line for v in found if v.code is ViolationCode.EFFECT_REACH] == [4, 5, 6, 7, 8, 9, 10]


def test_effects_key_needs_forbid_calls(tmp_path: Path) -> None:
    """`effects` must be a boolean and needs forbid-calls to know what to look for."""
    md = tmp_path / "p.md"
    for body, needle in (
        ('effects=1\nforbid-calls=["open"]', "effects: expected true or false"),
        ('effects=true\nforbid-imports=["os"]', "effects: needs forbid-calls"),
    ):
        md.write_text(f'```guard\n[[rules]]\nname="r"\nmodules=["m"]\n{body}\n```\n', "utf-8")
        with pytest.raises(ConfigError, match=needle):
            load_policy([md])
    md.write_text(
        '```guard\n[[rules]]\nname="r"\nmodules=["m"]\neffects=true\nforbid-calls=["open"]\n```\n',
        "utf-8",
    )
    assert load_policy([md]).rules[0].to_dict()["effects"] is True
