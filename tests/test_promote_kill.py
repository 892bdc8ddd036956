"""The work-tree step of a promotion killed inside itself (issue 22): at every file
syscall `git read-tree` makes (strace's fault injection kills git there), and after
each of kernel's own steps around it (the index lock, the private copy, the swap).
After each kill the process is gone (no cleanup of ours ran); what recovery does
(`Repo.sweep_index`, then the update again when the index is still the old one, as
`kernel promote --recover` does) must leave branch, index and work tree agreeing, with
nothing of ours left in the git folder. A lock or an edit that is not provably ours
is never removed or overwritten."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.effects import git as git_effects
from kernel.effects.git import Repo
from kernel.errors import EffectError

OWNER = "c" * 64
"""The intent entry id a promotion would name."""
# Names every Linux architecture has (the old rename/unlink/mkdir are x86 only).
SYSCALLS = "openat,write,renameat,renameat2,unlinkat,mkdirat,symlinkat,linkat,close,fsync"
STRACE = shutil.which("strace")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=repo, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def make_repo(path: Path) -> tuple[str, str]:
    """A branch moved from ``old`` to ``new`` (modified, added in a new folder,
    deleted, a symlink inside the tree), index and work tree still at ``old``: what a
    promotion has made when its work-tree step starts."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    for name in ("a.txt", "b.txt", "gone.txt", *(f"many/{i}.txt" for i in range(6))):
        (path / name).parent.mkdir(exist_ok=True)
        (path / name).write_text(f"{name} old\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "old")
    old = git(path, "rev-parse", "HEAD")
    (path / "a.txt").write_text("a new\n")
    (path / "gone.txt").unlink()
    (path / "new" / "deep").mkdir(parents=True)
    (path / "new" / "deep" / "n.txt").write_text("n\n")
    (path / "link").symlink_to("b.txt")
    for i in range(6):
        (path / "many" / f"{i}.txt").write_text(f"{i} new\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "new")
    new = git(path, "rev-parse", "HEAD")
    git(path, "reset", "-q", "--hard", old)
    git(path, "update-ref", "refs/heads/main", new, old)
    return old, new


@pytest.fixture
def template(tmp_path: Path) -> tuple[Path, str, str]:
    path = tmp_path / "template"
    old, new = make_repo(path)
    return path, old, new


def finish(path: Path, old: str, new: str) -> None:
    """What recovery does with the work-tree step (`promotion._finish`)."""
    repo = Repo(path)
    repo.sweep_index(OWNER)
    index = repo.index_tree()
    if index == repo.tree_of(old):
        repo.fast_forward_work_tree(old, new, owner=OWNER)
    else:
        assert index == repo.tree_of(new)


def agree(path: Path, new: str) -> None:
    """Branch, index and work tree are ``new``; nothing of ours is left."""
    assert git(path, "status", "--porcelain", "--ignored") == ""
    assert git(path, "write-tree") == git(path, "rev-parse", f"{new}^{{tree}}")
    assert (path / "a.txt").read_text() == "a new\n"
    assert not (path / "gone.txt").exists()
    assert os.readlink(path / "link") == "b.txt"
    left = [p.name for p in (path / ".git").iterdir() if "kernel" in p.name or "lock" in p.name]
    assert left == []


def killed_child(body: Callable[[], None]) -> int:
    """Run ``body`` in a forked child; its exit status (137: killed)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        try:
            body()
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def git_killed_at(n: int, command: str, call: Callable[[], object]) -> Callable[[], None]:
    """``call``, with each ``git command`` it runs killed by strace at its ``n``-th file
    syscall (of each kind); the process then dies as a group kill would."""

    def body() -> None:  # pragma: no cover - runs in the child
        real = subprocess.run

        def run(args: Any, **kwargs: Any) -> Any:
            if command in args:
                inject = f"inject={SYSCALLS}:signal=SIGKILL:when={n}"
                args = [STRACE, "-f", "-qq", "-o", "/dev/null", "-e", inject, *args]
                done = real(args, **kwargs)
                if done.returncode in (137, -9):
                    os._exit(137)
                return done
            return real(args, **kwargs)

        with mock.patch.object(subprocess, "run", run):
            call()

    return body


@pytest.mark.skipif(STRACE is None, reason="strace is not installed (.ci/run installs it)")
def test_killed_at_every_syscall_of_read_tree(
    template: tuple[Path, str, str], tmp_path: Path
) -> None:
    source, old, new = template
    kills = 0
    for n in range(1, 400):
        path = tmp_path / f"r{n}"
        shutil.copytree(source, path, symlinks=True)
        update = functools.partial(Repo(path).fast_forward_work_tree, old, new, owner=OWNER)
        status = killed_child(git_killed_at(n, "read-tree", update))
        assert status in (0, 137)
        finish(path, old, new)
        agree(path, new)
        if status == 0:
            break
        kills += 1
        shutil.rmtree(path)
    else:
        pytest.fail("git read-tree was still killed after 400 syscalls")
    # The update writes, renames and removes many files: many points were tried.
    assert kills >= 10


# Kernel's own writes: the lock, the private index's copy, then each path replaced
# whole (nine here) and the index swapped in (the tenth `os.replace`).
OWN_STEPS = [("lock", 1), ("copy", 1), *(("replace", k) for k in range(1, 11))]


@pytest.mark.parametrize(("step", "count"), OWN_STEPS)
def test_killed_after_each_of_kernels_own_steps(
    step: str, count: int, template: tuple[Path, str, str], tmp_path: Path
) -> None:
    source, old, new = template
    path = tmp_path / "r"
    shutil.copytree(source, path, symlinks=True)

    def body() -> None:  # pragma: no cover - runs in the child
        calls = {"lock": 0, "copy": 0, "replace": 0}

        def after(real: Callable[..., Any], name: str) -> Callable[..., Any]:
            def call(*args: Any) -> Any:
                result = real(*args)
                calls[name] += 1
                if name == step and calls[name] == count:
                    os._exit(137)
                return result

            return call

        take = after(git_effects._take_index_lock, "lock")
        with (
            mock.patch.object(git_effects, "_take_index_lock", take),
            mock.patch.object(shutil, "copyfile", after(shutil.copyfile, "copy")),
            mock.patch.object(os, "replace", after(os.replace, "replace")),
        ):
            Repo(path).fast_forward_work_tree(old, new, owner=OWNER)

    assert killed_child(body) == 137
    assert (path / ".git" / "index.lock").exists()
    finish(path, old, new)
    agree(path, new)


def test_a_lock_or_an_edit_not_ours_is_left_alone(
    template: tuple[Path, str, str], tmp_path: Path
) -> None:
    source, old, new = template
    path = tmp_path / "r"
    shutil.copytree(source, path, symlinks=True)
    lock = path / ".git" / "index.lock"
    repo = Repo(path)
    # Another git command's lock (index data), an empty one, ours with a live process.
    for held in (b"DIRC\x00\x00\x00\x02", b"", f"kernel promote {OWNER} {os.getpid()}\n"):
        lock.write_bytes(held if isinstance(held, bytes) else held.encode())
        with pytest.raises(EffectError, match="not a killed kernel promotion's"):
            repo.sweep_index(OWNER)
        with pytest.raises(EffectError, match="another git command holds the index"):
            repo.fast_forward_work_tree(old, new, owner=OWNER)
        assert lock.read_bytes() == (held if isinstance(held, bytes) else held.encode())
    # Another promotion's killed lock is not this one's either.
    lock.write_text(f"kernel promote {'d' * 64} 999999999\n")
    with pytest.raises(EffectError, match="not a killed kernel promotion's"):
        repo.sweep_index(OWNER)
    lock.unlink()
    # A path part-way updated is finished; someone's edit of a changed path is not
    # overwritten, and neither is an edit elsewhere.
    (path / "a.txt").write_text("a new\n")
    (path / "many" / "0.txt").write_text("mine\n")
    with pytest.raises(EffectError, match=r"many/0\.txt differs from the index"):
        repo.fast_forward_work_tree(old, new, owner=OWNER)
    assert (path / "many" / "0.txt").read_text() == "mine\n"
    assert git(path, "write-tree") == git(path, "rev-parse", f"{old}^{{tree}}")
    assert not lock.exists()
    (path / "many" / "0.txt").write_text("0 new\n")
    (path / "b.txt").write_text("mine\n")
    with pytest.raises(EffectError, match=r"b\.txt differs from the index"):
        repo.fast_forward_work_tree(old, new, owner=OWNER)
    (path / "b.txt").write_text("b.txt old\n")
    repo.fast_forward_work_tree(old, new, owner=OWNER)
    agree(path, new)


def test_a_killed_ref_update_lock_is_removed_only_when_it_holds_the_commit(
    template: tuple[Path, str, str], tmp_path: Path
) -> None:
    """git creates the lock empty, then writes the value and its newline: the lock of a
    killed update holds a prefix of that line, and only such a lock is swept."""
    source, old, new = template
    path = tmp_path / "r"
    shutil.copytree(source, path, symlinks=True)
    repo = Repo(path)
    lock = path / ".git" / "refs" / "heads" / "main.lock"
    assert repo.sweep_ref_lock("refs/heads/main", new) is False
    for held in (f"{old}\n", f"{new[:7]}x", f"{new}\n\n", f" {new}"):
        lock.write_text(held)
        with pytest.raises(EffectError, match="holds neither"):
            repo.sweep_ref_lock("refs/heads/main", new)
        assert lock.read_text() == held
    for held in ("", new[:1], new, f"{new}\n"):
        lock.write_text(held)
        assert repo.sweep_ref_lock("refs/heads/main", new) is True
        assert not lock.exists()


def test_a_ref_lock_that_is_no_file_is_refused_without_waiting(
    template: tuple[Path, str, str], tmp_path: Path
) -> None:
    """A FIFO or a symlink where the lock would be is nobody's lock we could own: the
    sweep refuses it at once (it neither waits on the FIFO nor follows the link) and
    leaves it."""
    source, _old, new = template
    path = tmp_path / "r"
    shutil.copytree(source, path, symlinks=True)
    repo = Repo(path)
    lock = path / ".git" / "refs" / "heads" / "main.lock"
    target = tmp_path / "target"
    target.write_text(f"{new}\n")
    lock.symlink_to(target)
    with pytest.raises(EffectError, match="unreadable"):
        repo.sweep_ref_lock("refs/heads/main", new)
    assert lock.is_symlink()
    lock.unlink()
    os.mkfifo(lock)
    with pytest.raises(EffectError, match="not a regular file"):
        repo.sweep_ref_lock("refs/heads/main", new)
    assert lock.exists()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(held=st.binary(max_size=50), prefix=st.none() | st.integers(0, 41))
def test_a_ref_lock_is_swept_exactly_when_it_holds_a_prefix_of_the_value(
    held: bytes, prefix: int | None, template: tuple[Path, str, str], tmp_path: Path
) -> None:
    """For all lock contents (random bytes, or the value's line cut anywhere): swept
    iff they are a prefix of the value's line; otherwise refused and left as they were."""
    source, _old, new = template
    line = f"{new}\n".encode()
    if prefix is not None:
        held = line[:prefix]
    path = tmp_path / "prop"
    if not path.exists():
        shutil.copytree(source, path, symlinks=True)
    repo = Repo(path)
    lock = path / ".git" / "refs" / "heads" / "main.lock"
    lock.write_bytes(held)
    if line.startswith(held):
        assert repo.sweep_ref_lock("refs/heads/main", new) is True
        assert not lock.exists()
    else:
        with pytest.raises(EffectError, match="holds neither"):
            repo.sweep_ref_lock("refs/heads/main", new)
        assert lock.read_bytes() == held
        lock.unlink()


@pytest.mark.skipif(STRACE is None, reason="strace is not installed (.ci/run installs it)")
@pytest.mark.parametrize("command", ["write-tree", "read-tree", "status"])
def test_a_git_command_that_only_reads_the_index_leaves_no_lock_when_killed(
    command: str, template: tuple[Path, str, str], tmp_path: Path
) -> None:
    """What promote and recovery ask before they write (the index's tree, whether the
    work tree can move, whether it is dirty) runs on a private copy of the index or
    takes no optional lock: git killed at any of its file syscalls leaves no
    ``index.lock`` for the next git command to trip on, and the index as it was."""
    source, old, new = template
    path = tmp_path / "r"
    shutil.copytree(source, path, symlinks=True)
    # Before the branch moves: where these questions are asked.
    git(path, "update-ref", "refs/heads/main", old, new)
    repo = Repo(path)
    index = (path / ".git" / "index").read_bytes()
    calls = {
        "write-tree": repo.index_tree,
        "read-tree": lambda: repo.work_tree_blocker(old, new),
        "status": repo.is_dirty,
    }
    kills = 0
    for n in range(1, 200):
        status = killed_child(git_killed_at(n, command, calls[command]))
        assert not (path / ".git" / "index.lock").exists()
        assert (path / ".git" / "index").read_bytes() == index
        if status == 0:
            break
        kills += 1
    assert kills >= 1


def test_a_folder_that_becomes_a_file_and_a_file_that_becomes_a_folder(tmp_path: Path) -> None:
    """The update removes before it writes: ``d/f.txt`` -> a file ``d``, a file ``e`` ->
    ``e/g.txt``."""
    path = tmp_path / "r"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "d").mkdir()
    (path / "d" / "f.txt").write_text("f\n")
    (path / "e").write_text("e\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "old")
    old = git(path, "rev-parse", "HEAD")
    git(path, "rm", "-q", "-r", "d", "e")
    (path / "d").write_text("d is a file\n")
    (path / "e").mkdir()
    (path / "e" / "g.txt").write_text("g\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "new")
    new = git(path, "rev-parse", "HEAD")
    git(path, "reset", "-q", "--hard", old)
    git(path, "update-ref", "refs/heads/main", new, old)
    Repo(path).fast_forward_work_tree(old, new, owner=OWNER)
    assert git(path, "status", "--porcelain", "--ignored") == ""
    assert (path / "d").read_text() == "d is a file\n"
    assert (path / "e" / "g.txt").read_text() == "g\n"
