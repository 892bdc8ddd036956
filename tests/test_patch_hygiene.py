"""Tests for the patch rules of the built-in ``protected-paths`` check (issue 18 item 4,
issue 22 item 2) and for `apply_change`, the exact hunk applier the static screen uses.

Every patch is written by the sandbox's own pinned ``git diff --no-index`` (the form a
worker's candidate takes) between a baseline folder and an edited copy of it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.effects.adapters.patch import (
    HYGIENE_RULES,
    ChangeKind,
    FileChange,
    PatchRefusal,
    apply_change,
    hygiene_findings,
    parse_patch,
)
from kernel.effects.sandbox import PATCH_COMMAND, PATCH_ENV
from kernel.run.verification import CheckReason

PROTECTED = ("test_*.py",)
STATS = '"""Stats."""\n\n\ndef median(values):\n    return sorted(values)[len(values) // 2]\n'


@pytest.fixture
def trees() -> Iterator[Path]:
    """``a`` (the baseline: stats.py and test_stats.py) and ``b`` (a copy to edit)."""
    base = Path(tempfile.mkdtemp(prefix="kernel-hygiene-test-"))
    try:
        (base / "a").mkdir()
        (base / "a" / "stats.py").write_text(STATS)
        (base / "a" / "test_stats.py").write_text("import stats\n")
        (base / "a" / "tools").mkdir()
        (base / "a" / "tools" / "run.py").write_text("print(1)\n")
        shutil.copytree(base / "a", base / "b", symlinks=True)
        yield base
    finally:
        shutil.rmtree(base)


def _diff(base: Path) -> tuple[FileChange, ...]:
    proc = subprocess.run(PATCH_COMMAND, cwd=base, env=PATCH_ENV, capture_output=True, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    parsed = parse_patch(proc.stdout)
    assert not isinstance(parsed, PatchRefusal), proc.stdout
    return parsed


def _write(path: Path, data: bytes = b"x = 1\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _stats_to_outside_link(b: Path) -> None:
    (b / "stats.py").unlink()
    os.symlink("/usr/lib/python3/dist-packages/fake_stats.py", b / "stats.py")


# One patch per reason code: (edit of the b tree, the path the rule names).
REFUSALS: dict[CheckReason, list[tuple[Callable[[Path], None], str]]] = {
    CheckReason.PROTECTED_PATH_TOUCHED: [
        (lambda b: _write(b / "test_stats.py", b"import stats\nassert True\n"), "test_stats.py"),
        (lambda b: _write(b / "sub" / "test_more.py"), "sub/test_more.py"),
    ],
    CheckReason.BYTECODE_ADDED: [
        (lambda b: _write(b / "__pycache__" / "stats.cpython-311.pyc", b"\x00"), ""),
        (lambda b: _write(b / "helpers.pyc", b"\x00"), "helpers.pyc"),
        (lambda b: _write(b / "__pycache__" / "notes.txt"), "__pycache__/notes.txt"),
    ],
    CheckReason.SOURCELESS_MODULE: [
        (lambda b: _write(b / "fast.cpython-311-x86_64-linux-gnu.so", b"\x7fELF"), ""),
        (lambda b: _write(b / "fast.pyd", b"MZ"), "fast.pyd"),
    ],
    CheckReason.SHADOWS_PROTECTED_MODULE: [
        (lambda b: _write(b / "test_stats" / "__init__.py"), "test_stats/__init__.py"),
        (lambda b: _write(b / "test_stats" / "helpers.txt"), "test_stats/helpers.txt"),
        (lambda b: _write(b / "test_stats.pyw"), "test_stats.pyw"),
        (lambda b: _write(b / "sub" / "test_x" / "m.txt"), "sub/test_x/m.txt"),
    ],
    CheckReason.SYMLINK_ESCAPES_TREE: [
        (_stats_to_outside_link, "stats.py"),
        (lambda b: os.symlink("../../etc/passwd", b / "tools" / "conf"), "tools/conf"),
        (lambda b: os.symlink("..", b / "up"), "up"),
    ],
    CheckReason.SYMLINK_IN_TREE: [
        (lambda b: os.symlink("stats.py", b / "alias.py"), "alias.py"),
        (lambda b: os.symlink("../stats.py", b / "tools" / "s.py"), "tools/s.py"),
    ],
    CheckReason.GIT_METADATA: [
        (lambda b: _write(b / ".gitattributes", b"*.py filter=x\n"), ".gitattributes"),
        (lambda b: _write(b / "tools" / ".gitattributes", b"* -text\n"), ""),
        (lambda b: _write(b / ".gitmodules", b'[submodule "x"]\n'), ".gitmodules"),
        (lambda b: _write(b / ".git" / "hooks" / "post-checkout"), ".git/hooks/post-checkout"),
    ],
}


def test_every_reason_code_has_its_rule_and_its_patches() -> None:
    """The table of refusals covers every rule of the check (and no rule is untested)."""
    assert [reason for reason, _rule in HYGIENE_RULES] == list(REFUSALS)


@pytest.mark.parametrize(
    ("reason", "index"),
    [(reason, i) for reason, cases in REFUSALS.items() for i in range(len(cases))],
)
def test_each_refusal_has_its_own_reason_code(trees: Path, reason: CheckReason, index: int) -> None:
    """A patch of each family is refused with its own code (``test_stats/__init__.py``
    also matches the glob ``test_*.py`` as a whole path: it is refused twice)."""
    edit, path = REFUSALS[reason][index]
    edit(trees / "b")
    findings = hygiene_findings(_diff(trees), PROTECTED)
    assert reason in {r for r, _p in findings}
    if path:
        assert (reason, path) in findings


def test_stats_replaced_by_a_link_outside_the_tree_is_refused(trees: Path) -> None:
    """The issue's family: ``stats.py`` made a symlink to a file outside the tree."""
    _stats_to_outside_link(trees / "b")
    assert hygiene_findings(_diff(trees), PROTECTED) == (
        (CheckReason.SYMLINK_ESCAPES_TREE, "stats.py"),
    )


def test_ordinary_patches_are_not_refused(trees: Path) -> None:
    """Editing, adding and deleting ordinary source files, a module called like a test
    module's neighbour, and deleting bytecode find nothing."""
    b = trees / "b"
    _write(b / "stats.py", STATS.replace("// 2", "// 2 - 1").encode())
    _write(b / "stats_extra.py")
    _write(b / "pkg" / "__init__.py")
    _write(b / "pkg" / "test_helpers_data.json", b"{}\n")
    (b / "tools" / "run.py").unlink()
    _write(b / "README.md", b"a test_stats note\n")
    assert hygiene_findings(_diff(trees), PROTECTED) == ()


def test_without_protected_globs_nothing_shadows(trees: Path) -> None:
    """Shadowing is judged against the protected modules: none, no shadow."""
    _write(trees / "b" / "test_stats" / "__init__.py")
    assert hygiene_findings(_diff(trees), ()) == ()


def test_a_deleted_bytecode_file_is_not_refused(trees: Path) -> None:
    """Removing bytecode from the tree is hygiene, not a hazard."""
    _write(trees / "a" / "old.pyc", b"\x00")
    assert hygiene_findings(_diff(trees), PROTECTED) == ()


def test_a_link_whose_target_is_not_text_escapes() -> None:
    """A symlink change with no readable target is treated as leaving the tree."""
    change = FileChange(
        kind=ChangeKind.ADD,
        old_path=None,
        new_path="x",
        old_mode=None,
        new_mode="120000",
        binary=True,
    )
    assert change.link_target is None
    assert hygiene_findings((change,), ()) == ((CheckReason.SYMLINK_ESCAPES_TREE, "x"),)


# --- apply_change: what the static screen reads --------------------------------------

_LINE = st.text(alphabet="ab \t\r\\-+@", max_size=6)


@settings(max_examples=60, deadline=None)
@given(
    old=st.lists(_LINE, max_size=12),
    new=st.lists(_LINE, max_size=12),
    old_eol=st.booleans(),
    new_eol=st.booleans(),
)
def test_apply_change_reproduces_what_git_diff_wrote(
    old: list[str], new: list[str], old_eol: bool, new_eol: bool
) -> None:
    """For all texts: the baseline plus the parsed patch is exactly the edited file."""
    before = ("\n".join(old) + ("\n" if old and old_eol else "")).encode()
    after = ("\n".join(new) + ("\n" if new and new_eol else "")).encode()
    base = Path(tempfile.mkdtemp(prefix="kernel-apply-test-"))
    try:
        for side, data in (("a", before), ("b", after)):
            (base / side).mkdir()
            (base / side / "f.py").write_bytes(data)
        changes = _diff(base)
    finally:
        shutil.rmtree(base)
    if before == after:
        assert changes == ()
        return
    (change,) = changes
    assert apply_change(change, before) == after


def test_apply_change_adds_and_refuses_what_does_not_apply(trees: Path) -> None:
    """A new file is its added lines; a hunk whose context differs does not apply; a
    deletion and a binary change leave no text."""
    b = trees / "b"
    _write(b / "new.py", b"one\ntwo\n")
    (b / "tools" / "run.py").unlink()
    _write(b / "stats.py", STATS.replace("sorted", "list").encode())
    changes = {c.paths[0]: c for c in _diff(trees)}
    assert apply_change(changes["new.py"], None) == b"one\ntwo\n"
    assert apply_change(changes["tools/run.py"], b"print(1)\n") is None
    assert (
        apply_change(changes["stats.py"], STATS.encode())
        == STATS.replace("sorted", "list").encode()
    )
    assert apply_change(changes["stats.py"], b"something else\n") is None
    assert apply_change(changes["stats.py"], b"") is None
