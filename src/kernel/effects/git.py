"""Git effects: baseline tree ids, staging refs and compare-and-swap promotion (ADR-0006 §5).

Every git command runs with a pinned environment: no system or global configuration
(``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``), no hooks
(``core.hooksPath=/dev/null``), no fsmonitor, no signing, no terminal prompt, a
fixed locale, and author and committer given explicitly, so the same inputs make the
same commit ids and nothing in a user's configuration runs code.

Rules:

- commits are built with a private index (``GIT_INDEX_FILE`` in a temporary folder):
  the work tree and the repository's index are never touched by staging;
- refs move only through ``git update-ref REF NEW OLD`` (compare-and-swap): never a
  forced update, never a remote; a ref that moved is reported, not overwritten;
- a promotion onto the checked-out branch also fast-forwards the work tree
  (``read-tree -m -u OLD NEW``), and is refused before anything moves when that work
  tree has uncommitted changes.

Every failure is an `EffectError` (or `GitRefusal` for a compare-and-swap that lost).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from kernel.errors import EffectError

__all__ = [
    "CommitIdentity",
    "GitRefusal",
    "Repo",
    "content_tree_id",
    "git_available",
]

_TIMEOUT_S: Final = 300
_PINNED: Final = (
    "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
    "-c", "commit.gpgSign=false", "-c", "core.autocrlf=false", "-c", "core.safecrlf=false",
)  # fmt: skip


class GitRefusal(EffectError):
    """A compare-and-swap ref update lost: the ref was not what it was read as."""


@attrs.frozen(kw_only=True)
class CommitIdentity:
    """Author and committer of a kernel-made commit."""

    name: str
    email: str
    date: str
    """A git date (``2026-01-01T00:00:00Z`` or ``@0 +0000``)."""


def git_available() -> bool:
    """True when a ``git`` program is on PATH."""
    return shutil.which("git") is not None


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "HOME": "/nonexistent",
    }
    env.update(extra or {})
    return env


def _run(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    data: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    program = shutil.which("git")
    if program is None:
        raise EffectError("git not found: install git")
    try:
        return subprocess.run(
            [program, *_PINNED, *args],
            cwd=cwd,
            env=_env(env),
            input=data if data is not None else b"",
            capture_output=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EffectError(f"git could not run: {e}") from e


def _why(done: subprocess.CompletedProcess[bytes]) -> str:
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"


def content_tree_id(root: Path) -> str | None:
    """The git tree id of ``root``'s contents (``.git`` excluded, ignored files included),
    computed in a throwaway object store; None when git is not installed.

    Raises:
        EffectError: git fails on the directory.
    """
    if not git_available():
        return None
    with tempfile.TemporaryDirectory(prefix="kernel-tree-") as scratch:
        store = Path(scratch) / "objects.git"
        done = _run(["init", "-q", "--bare", str(store)])
        if done.returncode != 0:
            raise EffectError(f"git init failed: {_why(done)}")
        env = {"GIT_DIR": str(store), "GIT_WORK_TREE": str(root),
               "GIT_INDEX_FILE": str(Path(scratch) / "index")}  # fmt: skip
        done = _run(["add", "-A", "-f", "--", "."], cwd=root, env=env)
        if done.returncode != 0:
            raise EffectError(f"{root}: cannot compute the baseline's git tree: {_why(done)}")
        done = _run(["write-tree"], cwd=root, env=env)
        if done.returncode != 0:
            raise EffectError(f"{root}: cannot compute the baseline's git tree: {_why(done)}")
        return done.stdout.decode().strip()


class Repo:
    """A local git repository, driven with the pinned environment."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise EffectError(f"{self.path}: repository not found")
        done = _run(["rev-parse", "--git-dir", "--is-bare-repository"], cwd=self.path)
        if done.returncode != 0:
            raise EffectError(f"{self.path}: not a git repository")
        lines = done.stdout.decode().split()
        self.bare = lines[-1] == "true"

    def git(
        self, *args: str, env: Mapping[str, str] | None = None, data: bytes | None = None
    ) -> str:
        """Run git; its stdout (stripped). Raises EffectError on failure."""
        done = _run(args, cwd=self.path, env=env, data=data)
        if done.returncode != 0:
            raise EffectError(f"{self.path}: git {args[0]} failed: {_why(done)}")
        return done.stdout.decode("utf-8", "replace").strip()

    def resolve(self, ref: str) -> str | None:
        """The commit id ``ref`` names, or None."""
        done = _run(["rev-parse", "-q", "--verify", ref + "^{commit}"], cwd=self.path)
        return done.stdout.decode().strip() if done.returncode == 0 else None

    def tree_of(self, commit: str) -> str:
        """The tree id of ``commit``."""
        return self.git("rev-parse", commit + "^{tree}")

    def check_ref_name(self, ref: str) -> None:
        """Raise EffectError unless ``ref`` is a valid full ref name."""
        if _run(["check-ref-format", ref]).returncode != 0:
            raise EffectError(f"{ref!r} is not a valid git ref name")

    def checked_out_branch(self) -> str | None:
        """The full ref of the checked-out branch (None when bare or detached)."""
        if self.bare:
            return None
        done = _run(["symbolic-ref", "-q", "HEAD"], cwd=self.path)
        return done.stdout.decode().strip() if done.returncode == 0 else None

    def is_dirty(self) -> bool:
        """True when the work tree or index has uncommitted changes to tracked files."""
        if self.bare:
            return False
        return bool(self.git("status", "--porcelain", "--untracked-files=no"))

    def commit_patch(self, parent: str, patch: bytes, message: str, who: CommitIdentity) -> str:
        """A new commit: ``parent``'s tree with ``patch`` applied, parent ``parent``.

        Raises:
            EffectError: the patch does not apply.
        """
        with tempfile.TemporaryDirectory(prefix="kernel-index-") as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            self.git("read-tree", parent, env=env)
            if patch:
                self.git("apply", "--cached", "--whitespace=nowarn", "-", env=env, data=patch)
            tree = self.git("write-tree", env=env)
        identity = {
            "GIT_AUTHOR_NAME": who.name, "GIT_AUTHOR_EMAIL": who.email,
            "GIT_AUTHOR_DATE": who.date, "GIT_COMMITTER_NAME": who.name,
            "GIT_COMMITTER_EMAIL": who.email, "GIT_COMMITTER_DATE": who.date,
        }  # fmt: skip
        return self.git(
            "commit-tree", tree, "-p", parent, "-F", "-", env=identity, data=message.encode()
        )

    def update_ref(self, ref: str, new: str, old: str | None, reason: str) -> None:
        """Compare-and-swap ``ref`` from ``old`` (None: must not exist) to ``new``.

        Raises:
            GitRefusal: ``ref`` is not ``old`` any more.
        """
        done = _run(["update-ref", "-m", reason, "--no-deref", ref, new, old or ""], cwd=self.path)
        if done.returncode != 0:
            raise GitRefusal(f"{ref} moved (expected {old or 'no ref'}): {_why(done)}")

    def delete_ref(self, ref: str, old: str) -> None:
        """Compare-and-swap delete of ``ref`` (it must still be ``old``)."""
        if not old.strip("0"):
            # git reads an all-zero old value as "no check": never delete unchecked.
            raise EffectError(f"{ref}: refusing to delete without the value it must hold")
        done = _run(["update-ref", "-d", "--no-deref", ref, old], cwd=self.path)
        if done.returncode != 0:
            raise GitRefusal(f"{ref} moved (expected {old}): {_why(done)}")

    def fast_forward_work_tree(self, old: str, new: str) -> None:
        """Bring the checked-out work tree and index from ``old`` to ``new``."""
        self.git("read-tree", "-m", "-u", old, new)
