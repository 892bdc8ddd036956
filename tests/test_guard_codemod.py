"""kernel guard --add-suppressions (kernel.guard.codemod): a suppression with its reason
at every current finding, every other byte of each file unchanged."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kernel.effects.cli import main
from kernel.guard.codemod import add_suppressions

if TYPE_CHECKING:
    from tests.conftest import ScriptRun

REASON = "adopted before the guard"
_TRAILING = re.compile(r"  # kernel-guard: ignore\[[A-Z0-9,]+\] adopted before the guard$")
_ALONE = re.compile(
    r"^[ \t]*# kernel-guard: ignore\[[A-Z0-9,]+\] adopted before the guard\n", re.MULTILINE
)


def _strip(text: str) -> str:
    return "\n".join(_TRAILING.sub("", line) for line in _ALONE.sub("", text).split("\n"))


def test_comment_at_the_end_merged_or_above() -> None:
    """At the end of the line; merged into a kernel-guard comment already there; above
    the statement when another comment ends the line; a line inside a string is
    returned, not changed."""
    source = (
        "import os\n"
        "os.system('a')  # kernel-guard: ignore[KG001] older\n"
        "os.system('b')  # a comment of the author\n"
        "X = '''\nos.system\n'''\n"
        "y = (os.system,\n     os.getcwd)\n"
    )
    lines = {1: {"KG001"}, 2: {"KG004"}, 3: {"KG004"}, 5: {"KG004"}, 8: {"KG004"}}
    text, missed = add_suppressions(source, lines, REASON)
    assert missed == [5]
    assert text.split("\n") == [
        f"import os  # kernel-guard: ignore[KG001] {REASON}",
        "os.system('a')  # kernel-guard: ignore[KG001,KG004] older",
        f"# kernel-guard: ignore[KG004] {REASON}",
        "os.system('b')  # a comment of the author",
        "X = '''",
        "os.system",
        "'''",
        "y = (os.system,",
        f"     os.getcwd)  # kernel-guard: ignore[KG004] {REASON}",
        "",
    ]


def test_reason_is_one_nonempty_line() -> None:
    """A comment cannot hold a newline, and a suppression without a reason is KG011."""
    for bad in ("", "  ", "two\nlines"):
        with pytest.raises(ValueError, match="one non-empty line"):
            add_suppressions("x = 1\n", {1: {"KG004"}}, bad)


POLICY = """\
[tool.kernel.guard]
[[tool.kernel.guard.rules]]
name = "adopt"
modules = ["lib", "lib.*"]
forbid-imports = ["os"]
forbid-calls = ["re.*", "sys.*", "os.*", "open", "getattr"]
"""


@pytest.mark.slow
def test_round_trip_over_standard_library_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On copies of standard-library modules with many findings (multi-line statements,
    brackets, strings), every finding gets its comment, the guard then finds nothing
    new, and removing the added comments gives back the original bytes."""
    (tmp_path / "pyproject.toml").write_text(POLICY, encoding="utf-8")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "__init__.py").write_text("", encoding="utf-8")
    originals: dict[str, str] = {}
    for module in ("textwrap", "shlex", "string", "tokenize", "argparse"):
        source = Path(shutil.__file__).parent / f"{module}.py"
        originals[module] = source.read_text(encoding="utf-8")
        (lib / f"{module}.py").write_text(originals[module], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["guard", "--no-cache"]) == 1
    before = capsys.readouterr().out
    assert main(["guard", "--no-cache", "--add-suppressions", "--reason", REASON]) == 0
    assert "added" in capsys.readouterr().out
    assert main(["guard", "--no-cache"]) == 0, capsys.readouterr().out
    for module, original in originals.items():
        changed = (lib / f"{module}.py").read_text(encoding="utf-8")
        assert _strip(changed) == original
    assert "KG004" in before


def test_add_suppressions_needs_a_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --reason nothing is written (exit 2, one line)."""
    (tmp_path / "pyproject.toml").write_text(POLICY, encoding="utf-8")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("import os\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["guard", "--no-cache", "--add-suppressions"]) == 2
    assert "--reason" in capsys.readouterr().err
    assert (tmp_path / "lib" / "__init__.py").read_text(encoding="utf-8") == "import os\n"


@pytest.mark.processes
def test_console_script_collects_cycles_during_the_codemod(
    tmp_path: Path, script_collections: ScriptRun
) -> None:
    """The console script runs a guard check without the cyclic collector, but the
    codemod runs with it (libcst's trees hold reference cycles: without it, every file's
    would stay until the process ends): a probe hooked on the collector sees collections
    once the codemod's module is loaded, and every finding gets its comment."""
    (tmp_path / "pyproject.toml").write_text(POLICY, encoding="utf-8")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("", encoding="utf-8")
    body = "".join(f"def f{i}(x):\n    return sys.exit(x + {i})\n" for i in range(60))
    (tmp_path / "lib" / "m.py").write_text(f"import sys\n\n{body}", encoding="utf-8")
    words = ["guard", "--no-cache", "--add-suppressions", "--reason", REASON]
    proc, collections = script_collections(words, "kernel.guard.codemod")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "added 60 suppressions in 1 files"
    assert collections > 0
