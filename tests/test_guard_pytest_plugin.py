"""kernel.guard.pytest_plugin: a project's ADR policy as pytest items, with no code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

POLICY = """\
# ADR-0001

```guard
[[rules]]
name = "pure"
modules = ["pkg", "pkg.*"]
forbid-calls = ["os.system"]
```
"""


def _project(tmp_path: Path, policy: str, source: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nkernel_guard_dirs = ["tests"]\n', encoding="utf-8"
    )
    (tmp_path / "docs" / "adr").mkdir(parents=True)
    (tmp_path / "docs" / "adr" / "ADR-0001.md").write_text(policy, encoding="utf-8")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "src" / "pkg" / "a.py").write_text(source, encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_x():\n    pass\n", encoding="utf-8")
    return tmp_path


def _pytest(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_one_item_per_rule_and_module_with_path_line_col(tmp_path: Path) -> None:
    """The user's suite gets `guard[rule][module]` items; a failure prints the findings
    as `path:line:col: CODE message [rule]`, and clean modules pass."""
    root = _project(tmp_path, POLICY, "import os\nos.system('true')\n")
    proc = _pytest(root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "src/pkg/a.py:2:1: KG004 use of 'os.system' is forbidden" in proc.stdout
    assert "FAILED tests::kernel-guard::guard[pure][pkg.a]" in proc.stdout
    assert "2 passed" in proc.stdout  # test_x and guard[pure][pkg]


def test_unusable_policy_is_one_failing_item(tmp_path: Path) -> None:
    """A policy that checks nothing (a rule matching no module) fails, never passes."""
    root = _project(tmp_path, POLICY.replace('"pkg", "pkg.*"', '"pkx"'), "x = 1\n")
    proc = _pytest(root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "guard[policy]" in proc.stdout
    assert "unusable guard policy" in proc.stdout


def test_inert_without_configuration(tmp_path: Path) -> None:
    """Installed but not configured, the plugin adds nothing to a suite."""
    root = _project(tmp_path, POLICY, "import os\nos.system('true')\n")
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n", encoding="utf-8")
    proc = _pytest(root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_baseline_hides_known_findings(tmp_path: Path) -> None:
    """kernel_guard_baseline hides what `kernel guard --write-baseline` recorded (paths
    relative to the root in both); a new finding still fails."""
    root = _project(tmp_path, POLICY, "import os\nos.system('true')\n")
    written = subprocess.run(
        [sys.executable, "-m", "kernel", "guard", "--write-baseline", "base.json"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert written.returncode == 0, written.stdout + written.stderr
    with (root / "pyproject.toml").open("a", encoding="utf-8") as fh:
        fh.write('kernel_guard_baseline = "base.json"\n')
    proc = _pytest(root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (root / "src" / "pkg" / "a.py").write_text(
        "import os\nos.system('true')\nos.system('x')\n", encoding="utf-8"
    )
    proc = _pytest(root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "src/pkg/a.py:3:1: KG004" in proc.stdout


def test_missing_or_empty_folder_is_an_error(tmp_path: Path) -> None:
    """A configured folder with no file (or none at all) fails the run naming it."""
    root = _project(tmp_path, POLICY, "x = 1\n")
    (root / "tests" / "test_x.py").unlink()
    proc = _pytest(root)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "kernel_guard_dirs" in proc.stderr
    assert "holds no file" in proc.stderr
    (root / "tests").rmdir()
    proc = _pytest(root)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "is not a folder" in proc.stderr
