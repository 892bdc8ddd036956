"""Tests for kernel.effects.adapters.patch: patches read as structured file lists.

Every kind of change is read from a patch that a real ``git diff`` wrote (in a
repository with renames and copies, and the sandbox's pinned ``--no-index`` diff);
hostile variants are mutations of real patches.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.effects.adapters.patch import (
    ChangeKind,
    FileChange,
    PatchReason,
    PatchRefusal,
    changed_paths,
    parse_patch,
)
from kernel.effects.sandbox import PATCH_COMMAND, PATCH_ENV

GIT_ENV = {
    **PATCH_ENV,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", "-c", "core.quotePath=true", *args],
        cwd=repo,
        env=GIT_ENV,
        check=True,
        capture_output=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit of a few files."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "stats.py").write_text("def f():\n    return 1\n" * 5)
    (root / "test_stats.py").write_text("import stats\n\n\ndef test_f():\n    assert stats.f()\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "blob.bin").write_bytes(bytes(range(256)) * 4)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    return root


def _staged(repo: Path, *options: str) -> bytes:
    _git(repo, "add", "-A")
    return _git(repo, "diff", "--cached", "--binary", "--full-index", *options)


def _changes(patch: bytes) -> tuple[FileChange, ...]:
    parsed = parse_patch(patch)
    if isinstance(parsed, PatchRefusal):
        pytest.fail(f"real git patch refused: {parsed}\n{patch.decode(errors='replace')}")
    return parsed


def test_added_file(repo: Path) -> None:
    """A new file is an add naming its path (the regression: it was refused)."""
    (repo / "new_module.py").write_text("X = 1\n")
    (change,) = _changes(_staged(repo))
    assert (change.kind, change.old_path, change.new_path) == (
        ChangeKind.ADD,
        None,
        "new_module.py",
    )
    assert change.new_mode == "100644"


def test_empty_added_file_has_no_hunk_and_is_read_from_the_header(repo: Path) -> None:
    """An empty new file has no ---/+++ lines: its path comes from the diff --git line."""
    (repo / "empty file.txt").write_text("")
    (change,) = _changes(_staged(repo))
    assert change.kind is ChangeKind.ADD
    assert change.paths == ("empty file.txt",)


def test_deleted_file(repo: Path) -> None:
    """A deletion names the deleted path."""
    (repo / "test_stats.py").unlink()
    (change,) = _changes(_staged(repo))
    assert (change.kind, change.old_path, change.new_path) == (
        ChangeKind.DELETE,
        "test_stats.py",
        None,
    )


def test_renamed_and_copied_files_name_both_sides(repo: Path) -> None:
    """Renames and copies (git diff -M -C --find-copies-harder) name old and new paths."""
    shutil.copy(repo / "stats.py", repo / "stats_copy.py")
    (repo / "test_stats.py").rename(repo / "renamed_away.py")
    changes = _changes(_staged(repo, "-M", "-C", "--find-copies-harder"))
    kinds = {c.kind: c for c in changes}
    rename, copy = kinds[ChangeKind.RENAME], kinds[ChangeKind.COPY]
    assert (rename.old_path, rename.new_path) == ("test_stats.py", "renamed_away.py")
    assert (copy.old_path, copy.new_path) == ("stats.py", "stats_copy.py")
    assert changed_paths(changes) == (
        "renamed_away.py",
        "stats.py",
        "stats_copy.py",
        "test_stats.py",
    )


def test_mode_change_binary_and_symlink(repo: Path) -> None:
    """Mode-only changes, binary changes and symlinks are read with their paths and modes."""
    (repo / "run.sh").chmod(0o755)
    (repo / "blob.bin").write_bytes(bytes(range(255, -1, -1)) * 4)
    os.symlink("test_stats.py", repo / "link_to_tests")
    changes = {c.paths[0]: c for c in _changes(_staged(repo))}
    mode = changes["run.sh"]
    assert (mode.kind, mode.old_mode, mode.new_mode) == (ChangeKind.MODIFY, "100644", "100755")
    assert changes["blob.bin"].binary
    link = changes["link_to_tests"]
    assert link.kind is ChangeKind.ADD
    assert link.symlink


def test_binary_without_full_patch_is_read(repo: Path) -> None:
    """Without --binary git writes 'Binary files ... differ': still one change."""
    (repo / "blob.bin").write_bytes(b"\0\1\2")
    _git(repo, "add", "-A")
    patch = _git(repo, "diff", "--cached")
    (change,) = _changes(patch)
    assert change.binary
    assert change.paths == ("blob.bin",)


@pytest.mark.parametrize(
    "name",
    [
        "t\u00e9st_x.py",
        'quote"d.py',
        "tab\there.py",
        "new\nline.py",
        "back\\slash.py",
        "a b/c d.py",
    ],
)
def test_names_git_quotes_are_read_exactly(repo: Path, name: str) -> None:
    """C-quoted names (non-ASCII, quotes, tabs, newlines, backslashes, spaces) round-trip."""
    (repo / name).parent.mkdir(exist_ok=True)
    (repo / name).write_text("x\n")
    (change,) = _changes(_staged(repo))
    assert change.paths == (name,)


def test_a_name_that_looks_like_two_names_is_one_path(repo: Path) -> None:
    """A file called 'x b/test_stats.py' is that one path, not a second one."""
    (repo / "x b").mkdir()
    (repo / "x b" / "test_stats.py").write_text("x\n")
    (change,) = _changes(_staged(repo))
    assert change.paths == ("x b/test_stats.py",)


def test_hunk_text_that_looks_like_headers_is_not_a_header(repo: Path) -> None:
    """Removed/added lines reading '-- a/test_stats.py' stay hunk text."""
    (repo / "stats.py").write_text("-- a/test_stats.py\n++ b/test_stats.py\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "tricky")
    (repo / "stats.py").write_text("ok\n")
    patch = _staged(repo)
    assert b"\n--- a/test_stats.py\n" in patch
    (change,) = _changes(patch)
    assert change.paths == ("stats.py",)


@pytest.fixture
def no_index() -> Iterator[Path]:
    """A folder holding a (baseline) and b (final), diffed with the sandbox's pinned diff."""
    base = Path(tempfile.mkdtemp(prefix="kernel-patch-test-"))
    try:
        (base / "a").mkdir()
        (base / "b").mkdir()
        yield base
    finally:
        shutil.rmtree(base)


def test_the_sandbox_pinned_diff_is_read(no_index: Path) -> None:
    """The worker patch form (b/x b/x for a new file, a/x a/x for a deletion) is read."""
    a, b = no_index / "a", no_index / "b"
    (a / "gone.py").write_text("x\n")
    (a / "kept.py").write_text("1\n")
    (b / "kept.py").write_text("2\n")
    (b / "new.py").write_text("y\n")
    (a / "mode.sh").write_text("s\n")
    (b / "mode.sh").write_text("s\n")
    (b / "mode.sh").chmod(0o755)
    (b / "data.bin").write_bytes(b"\0\1")
    os.symlink("kept.py", b / "link")
    proc = subprocess.run(
        PATCH_COMMAND, cwd=no_index, env=PATCH_ENV, capture_output=True, check=False
    )
    assert proc.returncode == 1, proc.stderr
    changes = {c.paths[0]: c.kind for c in _changes(proc.stdout)}
    assert changes == {
        "data.bin": ChangeKind.ADD,
        "gone.py": ChangeKind.DELETE,
        "kept.py": ChangeKind.MODIFY,
        "link": ChangeKind.ADD,
        "mode.sh": ChangeKind.MODIFY,
        "new.py": ChangeKind.ADD,
    }


def _mutate(repo: Path, old: bytes, new: bytes) -> bytes:
    (repo / "stats.py").write_text("changed\n")
    patch = _staged(repo)
    assert old in patch
    return patch.replace(old, new)


HOSTILE: dict[str, tuple[bytes, bytes, PatchReason]] = {
    "dotdot": (b"a/stats.py", b"a/../stats.py", PatchReason.UNSAFE_PATH),
    "absolute-after-prefix": (b"+++ b/stats.py", b"+++ b//etc/passwd", PatchReason.UNSAFE_PATH),
    "no-prefix": (b"+++ b/stats.py", b"+++ /etc/passwd", PatchReason.BAD_PREFIX),
    "other-file-in-plus": (
        b"+++ b/stats.py",
        b"+++ b/test_stats.py",
        PatchReason.INCONSISTENT_PATHS,
    ),
    "headers-disagree": (
        b"diff --git a/stats.py b/stats.py",
        b'diff --git "a/stats.py" "b/test_stats.py"',
        PatchReason.INCONSISTENT_PATHS,
    ),
    "quoted-dotdot": (
        b"diff --git a/stats.py b/stats.py",
        b'diff --git "a/\\056\\056/x" "b/\\056\\056/x"',
        PatchReason.UNSAFE_PATH,
    ),
    "preamble": (b"diff --git", b"garbage\ndiff --git", PatchReason.UNEXPECTED_LINE),
    "unknown-header": (b"index ", b"evil header\nindex ", PatchReason.UNEXPECTED_LINE),
    "bad-quote": (
        b"diff --git a/stats.py b/stats.py",
        b'diff --git "a/stats.py b/stats.py',
        PatchReason.UNEXPECTED_LINE,
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_mutations_of_real_patches_are_refused(repo: Path, name: str) -> None:
    """Paths with '..', absolute or unprefixed, headers that disagree, junk: refused."""
    old, new, reason = HOSTILE[name]
    parsed = parse_patch(_mutate(repo, old, new))
    assert isinstance(parsed, PatchRefusal)
    assert parsed.reason is reason


def _real(repo: Path, kind: str) -> bytes:
    """A real patch of ``kind``: an edit of stats.py, its rename to moved.py (with an
    edit), or run.sh made executable (a mode change, no hunk)."""
    if kind == "rename":
        (repo / "stats.py").rename(repo / "moved.py")
        with (repo / "moved.py").open("a") as moved:
            moved.write("x = 1\n")
        return _staged(repo, "-M")
    if kind == "mode":
        (repo / "run.sh").chmod(0o755)
        return _staged(repo)
    (repo / "stats.py").write_text("changed\n")
    return _staged(repo)


# name -> (the real patch it mutates, old bytes, new bytes, reason)
HOSTILE_HEADERS: dict[str, tuple[str, bytes, bytes, PatchReason]] = {
    "unknown-escape": ("edit", b"diff --git a/stats.py b/stats.py",
                       b'diff --git "a/st\\qats.py" "b/stats.py"', PatchReason.UNEXPECTED_LINE),
    "quoted-then-glued": ("edit", b"diff --git a/stats.py b/stats.py",
                          b'diff --git "a/stats.py""b/stats.py"', PatchReason.UNEXPECTED_LINE),
    "quoted-then-junk": ("edit", b"diff --git a/stats.py b/stats.py",
                         b'diff --git "a/stats.py" "b/stats.py"x', PatchReason.UNEXPECTED_LINE),
    "half-quoted-unsplit": ("edit", b"diff --git a/stats.py b/stats.py",
                            b'diff --git a/stats.py b/stats.py"', PatchReason.UNEXPECTED_LINE),
    "half-quoted-junk": ("edit", b"diff --git a/stats.py b/stats.py",
                         b'diff --git a/stats.py "b/stats.py" "x"', PatchReason.UNEXPECTED_LINE),
    "rename-name-junk": ("rename", b"rename from stats.py", b'rename from "stats.py"junk',
                         PatchReason.UNEXPECTED_LINE),
    "rename-without-to": ("rename", b"rename to moved.py\n", b"",
                          PatchReason.INCONSISTENT_PATHS),
    "rename-header-disagrees": ("rename", b"diff --git a/stats.py b/moved.py",
                                b'diff --git "a/stats.py" "b/other.py"',
                                PatchReason.INCONSISTENT_PATHS),
    "rename-and-copy": ("rename", b"rename to moved.py", b"copy to moved.py",
                        PatchReason.INCONSISTENT_PATHS),
    "rename-of-a-new-file": ("rename", b"rename from", b"new file mode 100644\nrename from",
                             PatchReason.INCONSISTENT_PATHS),
    "header-names-two-files": ("mode", b"diff --git a/run.sh b/run.sh",
                               b'diff --git "a/run.sh" "b/stats.py"',
                               PatchReason.INCONSISTENT_PATHS),
    "no-name-at-all": ("mode", b"diff --git a/run.sh b/run.sh", b"diff --git a/run.sh b/x.sh",
                       PatchReason.AMBIGUOUS_HEADER),
    "minus-names-another": ("edit", b"--- a/stats.py", b"--- a/test_stats.py",
                            PatchReason.INCONSISTENT_PATHS),
    "added-and-deleted": ("mode", b"old mode 100644",
                          b"deleted file mode 100644\nnew file mode 100644",
                          PatchReason.INCONSISTENT_PATHS),
    "bad-mode": ("mode", b"old mode 100644", b"old mode 100x44", PatchReason.UNEXPECTED_LINE),
    "header-twice": ("mode", b"old mode 100644", b"old mode 100644\nold mode 100644",
                     PatchReason.UNEXPECTED_LINE),
    "bad-hunk-line": ("edit", b"@@ -1,10 +1 @@", b"@@ -one +1 @@", PatchReason.UNEXPECTED_LINE),
    "garbage-in-hunk": ("edit", b"\n+changed", b"\n*changed", PatchReason.TRUNCATED_HUNK),
    "hunk-overruns-its-count": ("edit", b"@@ -1,10 +1 @@", b"@@ -1,9 +1 @@",
                                PatchReason.TRUNCATED_HUNK),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HOSTILE_HEADERS))
def test_hostile_headers_and_hunks_are_refused_with_their_reason(repo: Path, name: str) -> None:
    """Names git never writes (an unknown escape, quotes glued or followed by junk), a
    rename or copy that does not say both sides or mixes the two, a file both added and
    deleted, a header naming two files with nothing to tell which, a bad mode, a
    header line twice, a malformed ``@@`` line, and hunks whose lines do not match their
    counts: each refused with its own reason."""
    kind, old, new, reason = HOSTILE_HEADERS[name]
    patch = _real(repo, kind)
    assert old in patch, patch.decode()
    parsed = parse_patch(patch.replace(old, new, 1))
    assert isinstance(parsed, PatchRefusal), name
    assert parsed.reason is reason


def test_a_traditional_diff_smuggled_after_a_hunk_is_refused(repo: Path) -> None:
    """A non-git '---/+++' section after a real hunk (git apply would take it) is refused."""
    patch = _mutate(repo, b"", b"")
    smuggled = patch + b"--- a/test_stats.py\n+++ b/test_stats.py\n@@ -1 +1 @@\n-x\n+y\n"
    parsed = parse_patch(smuggled)
    assert isinstance(parsed, PatchRefusal)
    assert parsed.reason is PatchReason.UNEXPECTED_LINE


def test_a_truncated_hunk_is_refused(repo: Path) -> None:
    """A hunk shorter than its @@ counts is refused."""
    patch = _mutate(repo, b"", b"")
    parsed = parse_patch(patch[: patch.rindex(b"\n+")])
    assert isinstance(parsed, PatchRefusal)
    assert parsed.reason is PatchReason.TRUNCATED_HUNK


def test_empty_and_sectionless_bytes() -> None:
    """No bytes: no change; bytes without any section: refused, never a vacuous empty list."""
    assert parse_patch(b"") == ()
    parsed = parse_patch(b"\n")
    assert isinstance(parsed, PatchRefusal)
    assert parsed.reason is PatchReason.UNEXPECTED_LINE


@given(st.binary(max_size=400))
def test_parse_patch_never_raises_on_any_bytes(data: bytes) -> None:
    """For all bytes: a tuple of changes or a refusal, never an exception."""
    parsed = parse_patch(data)
    assert isinstance(parsed, PatchRefusal | tuple)


@given(
    st.lists(
        st.sampled_from(
            [
                b"diff --git a/x b/x\n",
                b"--- a/x\n",
                b"+++ b/x\n",
                b"@@ -1 +1 @@\n",
                b"-a\n",
                b"+b\n",
                b"new file mode 100644\n",
                b"rename from x\n",
                b'"\\\n',
                b"\\ x\n",
            ]
        ),
        max_size=12,
    )
)
def test_parse_patch_never_raises_on_header_soup(parts: list[bytes]) -> None:
    """For all sequences of header-like lines: a result or a refusal, never an exception."""
    parsed = parse_patch(b"".join(parts))
    assert isinstance(parsed, PatchRefusal | tuple)
