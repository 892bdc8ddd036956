"""Git effects: baseline tree ids, staging refs and compare-and-swap promotion (ADR-0006 §5).

Every git command runs with a pinned environment: no system or global configuration
(``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``), no hooks
(``core.hooksPath=/dev/null``), no fsmonitor, no pager, editor, ssh command,
credential helper or global attributes, no automatic gc, no remote protocol, no
signing, no terminal prompt, a fixed locale, and author and committer given
explicitly, so the same inputs make the same commit ids and nothing in a user's
configuration runs code.

What a command line cannot switch off (a filter driver a repository defines, an
``include`` that reads another file, ``core.worktree``), `Repo` refuses: a
repository whose own configuration holds a key that can run a command or move the
work tree (`EXEC_KEYS`) is unusable (`UntrustedConfig`, naming the key) unless the
operator trusts it explicitly (``trust_config``).

Rules:

- commits are built with a private index (``GIT_INDEX_FILE`` in a temporary folder):
  the work tree and the repository's index are never touched by staging;
- refs move only through ``git update-ref REF NEW OLD`` (compare-and-swap): never a
  forced update, never a remote; a ref that moved is reported, not overwritten;
- a promotion onto the checked-out branch also fast-forwards the work tree and
  index (`Repo.fast_forward_work_tree`: each path and the index replaced whole, under
  a marked ``index.lock``, so a kill leaves only what recovery provably owns), and is
  refused before anything moves when that work tree has uncommitted changes.

Every failure is an `EffectError` (or `GitRefusal` for a compare-and-swap that lost).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from kernel.effects.sandbox.scratch import private_tempdir
from kernel.errors import EffectError, GitRefusal, UntrustedConfig

__all__ = [
    "EXEC_KEYS",
    "CommitIdentity",
    "Repo",
    "TreeChange",
    "exec_keys",
    "content_tree_id",
    "git_available",
]

_TIMEOUT_S: Final = 300
_PINNED: Final = (
    "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
    "-c", "commit.gpgSign=false", "-c", "core.autocrlf=false", "-c", "core.safecrlf=false",
    "-c", "core.pager=cat", "-c", "core.editor=false", "-c", "sequence.editor=false",
    "-c", "core.sshCommand=false", "-c", "core.askPass=", "-c", "credential.helper=",
    "-c", "core.attributesFile=/dev/null", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
    "-c", "protocol.allow=never", "-c", "core.untrackedCache=false",
)  # fmt: skip
_COMMAND_SCOPE: Final = "command"

EXEC_KEYS: Final = (
    "include.", "includeif.", "filter.", "core.worktree", "core.gitproxy", "core.sshcommand",
    "core.askpass", "core.editor", "core.pager", "core.fsmonitor", "core.hookspath",
    "sequence.editor", "diff.external", "gpg.program", "uploadpack.packobjectshook",
    "credential.", "pager.", "alias.",
)  # fmt: skip
"""Configuration keys (lower-case prefixes) a repository may not hold untrusted: each can
run a command, read another configuration file, or move the work tree. Keys of a
subsection ending in ``.textconv``, ``.command``, ``.cmd``, ``.driver``, ``.program``
or ``.helper`` (``diff.X.textconv``, ``merge.X.driver``, ...) are refused too."""
_EXEC_SUFFIXES: Final = (".textconv", ".command", ".cmd", ".driver", ".program", ".helper")


def exec_keys(config: Sequence[tuple[str, str]]) -> list[str]:
    """The keys of ``(scope, key)`` pairs (``git config --list --show-scope``) that a
    repository may not hold untrusted (`EXEC_KEYS`); the command line's own are ours."""
    found: list[str] = []
    for scope, key in config:
        name = key.lower()
        if scope == _COMMAND_SCOPE:
            continue
        if name.startswith(EXEC_KEYS) or name.endswith(_EXEC_SUFFIXES):
            found.append(key)
    return found


@attrs.frozen(kw_only=True)
class TreeChange:
    """One path that differs between two trees."""

    path: str
    new_mode: str
    """``000000`` when deleted, ``120000`` a symlink, ``160000`` a submodule."""
    new_blob: str


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
        # A reading command (status) takes no lock it could leave behind when killed.
        "GIT_OPTIONAL_LOCKS": "0",
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
    keep_fds: Sequence[int] = (),
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
            pass_fds=tuple(keep_fds),
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EffectError(f"git could not run: {e}") from e


def _config_pairs(listing: bytes) -> list[tuple[str, str]]:
    """``(scope, key)`` of ``git config --list --null --show-scope`` output: a scope,
    NUL, the key (a newline and the value when it has one), NUL, and so on."""
    fields = listing.decode("utf-8", "replace").split("\0")
    return [
        (scope, entry.split("\n", 1)[0])
        for scope, entry in zip(fields[0::2], fields[1::2], strict=False)
        if entry
    ]


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
    with private_tempdir("tree") as scratch:
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
    """A local git repository, driven with the pinned environment.

    Raises:
        EffectError: not a git repository (or its path is unusable).
        UntrustedConfig: its configuration holds an `EXEC_KEYS` key and
            ``trust_config`` is False.
    """

    def __init__(self, path: Path | str, *, trust_config: bool = False) -> None:
        self.path = Path(path)
        try:
            found = self.path.is_dir()
        except OSError as e:
            raise EffectError(f"{str(self.path)[:200]}: unusable path ({e.strerror})") from e
        if not found:
            raise EffectError(f"{str(self.path)[:200]}: repository not found")
        # The configuration is read before anything else runs in the repository.
        listed = _run(["config", "--list", "--null", "--show-scope"], cwd=self.path)
        if listed.returncode not in (0, 1):
            raise EffectError(f"{self.path}: not a git repository ({_why(listed)})")
        if not trust_config:
            keys = exec_keys(_config_pairs(listed.stdout))
            if keys:
                raise UntrustedConfig(
                    f"{self.path}: the repository's configuration has {', '.join(keys)}, "
                    "which can run a command or move the work tree; remove it, or pass "
                    "--trust-repo-config to use this repository as it is"
                )
        # The common git folder (where refs and their locks live) is asked once here,
        # with the bare flag, not by every ref update and sweep.
        done = _run(
            ["rev-parse", "--is-bare-repository", "--path-format=absolute", "--git-common-dir"],
            cwd=self.path,
        )
        if done.returncode != 0:
            raise EffectError(f"{self.path}: not a git repository")
        # The flag's line, then the path (which may hold any byte but NUL, newlines too).
        bare, common = os.fsdecode(done.stdout).removesuffix("\n").split("\n", 1)
        self.bare = bare == "true"
        self._common = Path(common)

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

    def apply_patch(self, parent: str, patch: bytes) -> str:
        """The tree of ``parent`` with ``patch`` applied (a private index: the work tree
        and the repository's index are untouched).

        Raises:
            EffectError: the patch does not apply.
        """
        with private_tempdir("index") as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            self.git("read-tree", parent, env=env)
            if patch:
                self.git("apply", "--cached", "--whitespace=nowarn", "-", env=env, data=patch)
            return self.git("write-tree", env=env)

    def commit_tree(self, tree: str, parent: str, message: str, who: CommitIdentity) -> str:
        """A new commit of ``tree`` on ``parent`` by ``who`` (author and committer)."""
        identity = {
            "GIT_AUTHOR_NAME": who.name, "GIT_AUTHOR_EMAIL": who.email,
            "GIT_AUTHOR_DATE": who.date, "GIT_COMMITTER_NAME": who.name,
            "GIT_COMMITTER_EMAIL": who.email, "GIT_COMMITTER_DATE": who.date,
        }  # fmt: skip
        return self.git(
            "commit-tree", tree, "-p", parent, "-F", "-", env=identity, data=message.encode()
        )

    def commit_patch(self, parent: str, patch: bytes, message: str, who: CommitIdentity) -> str:
        """A new commit: ``parent``'s tree with ``patch`` applied, parent ``parent``.

        Raises:
            EffectError: the patch does not apply.
        """
        return self.commit_tree(self.apply_patch(parent, patch), parent, message, who)

    def changes(self, old: str, new: str) -> list[TreeChange]:
        """Every path that differs between two trees (or commits), renames not followed."""
        out = _run(["diff-tree", "-r", "-z", "--no-renames", old, new], cwd=self.path)
        if out.returncode != 0:
            raise EffectError(f"{self.path}: git diff-tree failed: {_why(out)}")
        fields = out.stdout.decode("utf-8", "surrogateescape").split("\0")
        changes: list[TreeChange] = []
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            parts = meta.lstrip(":").split()
            if len(parts) == 5:
                changes.append(TreeChange(path=path, new_mode=parts[1], new_blob=parts[3]))
        return changes

    def blob(self, blob: str) -> bytes:
        """The bytes of a blob."""
        done = _run(["cat-file", "blob", blob], cwd=self.path)
        if done.returncode != 0:
            raise EffectError(f"{self.path}: no blob {blob}: {_why(done)}")
        return done.stdout

    def work_tree(self) -> Path | None:
        """The top of this repository's work tree (None when bare)."""
        if self.bare:
            return None
        return Path(self.git("rev-parse", "--show-toplevel"))

    def worktrees(self) -> dict[str, Path]:
        """Full branch ref -> the work tree it is checked out in, for every work tree
        of the repository (the main one and linked ones)."""
        listing = self.git("worktree", "list", "--porcelain", "-z")
        found: dict[str, Path] = {}
        where: Path | None = None
        for line in listing.split("\0"):
            if line.startswith("worktree "):
                where = Path(line.removeprefix("worktree "))
            elif line.startswith("branch ") and where is not None:
                found[line.removeprefix("branch ")] = where
        return found

    @contextlib.contextmanager
    def _index_copy(self) -> Iterator[dict[str, str]]:
        """The environment of a git command run on a private copy of the index: what
        only reads it (``write-tree``, ``read-tree -n``) still takes ``index.lock``
        while it runs, which a kill would leave behind, someone else's to the next git
        command."""
        with private_tempdir("index") as scratch:
            copy = Path(scratch) / "index"
            index = self.git_dir() / "index"
            try:
                if index.exists():
                    shutil.copyfile(index, copy)
            except OSError as e:
                raise EffectError(f"{index}: unreadable ({e.strerror})") from e
            yield {"GIT_INDEX_FILE": str(copy)}

    def index_tree(self) -> str:
        """The tree the repository's index holds now (written as objects only)."""
        with self._index_copy() as env:
            return self.git("write-tree", env=env)

    def work_tree_blocker(self, old: str, new: str) -> str | None:
        """Why the checked-out work tree cannot move from ``old`` to ``new`` (tracked
        changes, or untracked files the update would overwrite), or None."""
        if self.is_dirty():
            return "the work tree has uncommitted changes"
        with self._index_copy() as env:
            # Fresh stat data first (files copied or touched are not changes).
            _run(["update-index", "-q", "--refresh"], cwd=self.path, env=env)
            done = _run(["read-tree", "-m", "-u", "-n", old, new], cwd=self.path, env=env)
        if done.returncode != 0:
            return f"the work tree cannot be updated ({_why(done)})"
        return None

    def trailers(self) -> list[dict[str, str]]:
        """The ``Kernel-*`` trailers of every commit reachable from any ref that has a
        ``Kernel-Permit-Id`` (one dict per commit, its id under ``commit``)."""
        done = _run(["log", "--all", "-z", "--format=%H%n%B"], cwd=self.path)
        if done.returncode != 0:
            return []
        found: list[dict[str, str]] = []
        for record in done.stdout.decode("utf-8", "replace").split("\0"):
            commit, _, body = record.strip("\n").partition("\n")
            fields = {"commit": commit}
            for line in body.splitlines():
                key, sep, value = line.partition(": ")
                if sep and key.startswith("Kernel-"):
                    fields[key] = value.strip()
            if "Kernel-Permit-Id" in fields:
                found.append(fields)
        return found

    def update_ref(self, ref: str, new: str, old: str | None, reason: str) -> None:
        """Compare-and-swap ``ref`` from ``old`` (None: must not exist) to ``new``.

        Raises:
            GitRefusal: ``ref`` is not ``old`` any more.
        """
        args = ["update-ref", "-m", reason, "--no-deref", ref, new, old or ""]
        with self._ref_update_lease() as lease:
            done = _run(args, cwd=self.path, keep_fds=(lease,))
        if done.returncode != 0:
            raise GitRefusal(
                f"{ref} moved or is locked by another git (expected {old or 'no ref'}): "
                f"{_why(done)}"
            )

    def delete_ref(self, ref: str, old: str) -> None:
        """Compare-and-swap delete of ``ref`` (it must still be ``old``)."""
        if not old.strip("0"):
            # git reads an all-zero old value as "no check": never delete unchecked.
            raise EffectError(f"{ref}: refusing to delete without the value it must hold")
        with self._ref_update_lease() as lease:
            done = _run(
                ["update-ref", "-d", "--no-deref", ref, old], cwd=self.path, keep_fds=(lease,)
            )
        if done.returncode != 0:
            raise GitRefusal(
                f"{ref} moved or is locked by another git (expected {old}): {_why(done)}"
            )

    @contextlib.contextmanager
    def _ref_update_lease(self) -> Iterator[int]:
        """Hold the repository's kernel ref-update lease: an ``flock`` on the common git
        folder itself (no file of ours in it), taken before git runs and inherited by
        it, so it is held while the kernel process *or* the git it started lives (a
        kill of the kernel process alone leaves git holding it). Free means no kernel
        ref update is running. Waits up to ``_LEASE_WAIT_S`` for a running update
        (they take milliseconds).

        Raises:
            EffectError: the folder cannot be opened, or the lease stayed held.
        """
        path = self._common
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise EffectError(f"{path}: cannot open for the ref-update lease ({e.strerror})") from e
        try:
            deadline = time.monotonic() + _LEASE_WAIT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError as e:
                    if time.monotonic() >= deadline:
                        raise EffectError(
                            f"{path}: a kernel ref update is still running (it or its git "
                            "holds the lease); retry once it is done"
                        ) from e
                    time.sleep(0.01)
            yield fd
        finally:
            os.close(fd)

    def git_dir(self) -> Path:
        """The repository's git folder (absolute)."""
        return Path(self.git("rev-parse", "--absolute-git-dir"))

    def fast_forward_work_tree(self, old: str, new: str, *, owner: str) -> None:
        """Bring the checked-out work tree and index from ``old`` to ``new``, so that a
        kill at any moment leaves what `sweep_index` and a second call finish.

        Git's own lock protocol, done so that every write is whole: ``index.lock`` is
        taken (created by a hard link, holding a marker naming ``owner`` and this
        process); the new index is built in a private index file (``read-tree -m``);
        each changed path is written to a temporary name beside it and moved into
        place by `os.replace` (a deleted one unlinked), so a path is always as ``old``
        or as ``new`` has it, never torn (git's checkout writes in place); the private
        index takes the files' stat data and replaces ``index``; the lock goes. A
        second call sweeps the temporaries and finishes: it writes only paths the
        update changes, and refuses when one differs from the index and is not as
        ``new`` has it (someone's edit, never overwritten).

        Raises:
            EffectError: the index is locked by someone else, a path holds someone's
                change, or git fails (the index is then untouched).
        """
        folder = self.git_dir()
        private = folder / f"{_PRIVATE_INDEX}{owner}"
        lock = _take_index_lock(folder, owner)
        try:
            top = self.work_tree() or self.path
            changes = self.changes(old, new)
            _remove(*(_temporary(top / c.path, owner) for c in changes))
            index = folder / "index"
            if index.exists():
                shutil.copyfile(index, private)
            env = {"GIT_INDEX_FILE": str(private)}
            self._check_work_tree(changes, new, env)
            # -i: the index alone (the check above is what guards the work tree).
            self.git("read-tree", "-m", "-i", old, new, env=env)
            # Removals first: a folder the update turns into a file is gone (and its
            # empty parents with it) before the file is written.
            for change in sorted(changes, key=lambda c: c.new_mode != _DELETED):
                self._write(top, change, owner)
            # Stat data only (exit 1 is "needs update": the check above ruled it out).
            _run(["update-index", "-q", "--refresh"], cwd=self.path, env=env)
            os.replace(private, index)
        except EffectError:
            raise
        except OSError as e:
            raise EffectError(f"{folder}: cannot update the work tree ({e.strerror})") from e
        finally:
            _remove(private, Path(f"{private}.lock"))
            _remove(lock)

    def _write(self, top: Path, change: TreeChange, owner: str) -> None:
        """One changed path, as ``new`` has it, replaced whole (or removed)."""
        path = top / change.path
        if change.new_mode == _DELETED:
            _remove(path)
            for parent in path.parents:
                if parent == top or not parent.is_dir() or any(parent.iterdir()):
                    break
                parent.rmdir()
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = _temporary(path, owner)
        data = self.blob(change.new_blob)
        if change.new_mode == "120000":
            os.symlink(data, draft)
        else:
            mode = 0o777 if change.new_mode == "100755" else 0o666
            descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
        os.replace(draft, path)

    def _check_work_tree(
        self, changes: Sequence[TreeChange], new: str, env: Mapping[str, str]
    ) -> None:
        """Every path that differs from the (private, old) index is one the update
        changes, already as ``new`` has it (what a killed update leaves).

        Raises:
            EffectError: a path differs and is not as ``new`` has it.
        """
        # Stat data only: a file touched but unchanged is not a difference.
        _run(["update-index", "-q", "--refresh"], cwd=self.path, env=env)
        listed = self.git("diff-files", "--name-only", "-z", env=env)
        untracked = self.git("ls-files", "--others", "-z", env=env)
        changed = {c.path: c for c in changes}
        # Files ``new`` adds that are there already are untracked for the old index.
        touched = {p for p in listed.split("\0") if p} | {
            p for p in untracked.split("\0") if p in changed
        }
        top = self.work_tree() or self.path
        for path in sorted(touched):
            change = changed.get(path)
            if change is None or not self._as_in(top / path, change):
                raise EffectError(
                    f"{top}: {path} differs from the index and is not as {new[:12]} has it; "
                    "commit or remove the change, then run `kernel promote --recover`"
                )

    def _as_in(self, path: Path, change: TreeChange) -> bool:
        """Whether the work tree's ``path`` is as the change's new side has it."""
        if change.new_mode == _DELETED:
            return not _exists(path)
        try:
            data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        except OSError:
            return False
        return self.git("hash-object", "--no-filters", "--stdin", data=data) == change.new_blob

    def sweep_index(self, owner: str) -> list[str]:
        """Remove what a killed `fast_forward_work_tree` for ``owner`` left: its private
        index and an ``index.lock`` holding its marker whose process is gone. Returns
        what was removed.

        Raises:
            EffectError: ``index.lock`` exists and is not provably ``owner``'s.
        """
        folder = self.git_dir()
        private = folder / f"{_PRIVATE_INDEX}{owner}"
        removed = [str(p) for p in (private, Path(f"{private}.lock")) if _exists(p)]
        _remove(private, Path(f"{private}.lock"))
        lock = folder / "index.lock"
        held = _held(lock)
        if held is None:
            return removed
        mark, _, pid = held.decode("ascii", "replace").strip().rpartition(" ")
        if mark != f"{_LOCK_MARK} {owner}" or not pid.isdigit() or _alive(int(pid)):
            raise EffectError(
                f"{lock} exists and is not a killed kernel promotion's: another git command "
                "holds the index (or was killed); remove it once none runs"
            )
        _remove(lock)
        return [*removed, str(lock)]

    def sweep_ref_lock(self, ref: str, value: str) -> bool:
        """Remove ``ref``'s lock file when a killed kernel ``update-ref`` to ``value``
        left it; True when removed. git creates the lock empty, then writes the value
        and renames the lock over the ref, so a killed update leaves the lock empty,
        holding a prefix of ``value``'s line, or holding it whole. Such a lock is provably
        a killed kernel update's only while no kernel ref update runs: the sweep holds
        the ref-update lease (which every kernel ``update-ref`` and its git hold) while
        it reads and removes the lock. A foreign git updating this very ref at the same
        instant, before writing its lock, would see its own update fail (its lock is
        gone); nothing it wrote is lost.

        Raises:
            EffectError: a kernel ref update is running, or the lock holds anything but
                a prefix of ``value``'s line (another git command's: not provably ours).
        """
        lock = self._common / f"{ref}.lock"
        with self._ref_update_lease():
            held = _held(lock)
            if held is None:
                return False
            if not f"{value}\n".encode("ascii").startswith(held):
                raise EffectError(
                    f"{lock} exists and holds neither {value[:12]} nor part of it: another "
                    "git command holds the branch (or was killed); remove it once none runs"
                )
            _remove(lock)
        return True

    def sweep_packed_refs_lock(self) -> bool:
        """Remove an empty ``packed-refs.lock`` that a killed kernel ``update-ref -d``
        left (git takes it, empty, to delete any ref, and writes into it only when it
        rewrites a packed ref); True when removed. As ``sweep_ref_lock``, under the lease.

        Raises:
            EffectError: a kernel ref update is running, or the lock holds anything.
        """
        return self.sweep_ref_lock("packed-refs", "")


_DELETED: Final = "000000"
# How long a ref update waits for another kernel update of the repository to end.
_LEASE_WAIT_S: Final = 30.0
_PRIVATE_INDEX: Final = "kernel-promote-index-"
_LOCK_MARK: Final = "kernel promote"


def _temporary(path: Path, owner: str) -> Path:
    """The name a changed path is written under before it replaces the path."""
    return path.with_name(f".{path.name}.kernel-{owner[:16]}")


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


def _remove(*paths: Path) -> None:
    for path in paths:
        # Missing, or under a path that is a file now: nothing to remove either way.
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            path.unlink()


def _held(lock: Path) -> bytes | None:
    """What a lock file holds (its first 200 bytes: a lock of ours or git's is shorter),
    or None when there is none. Opened without following a link or waiting on a FIFO.

    Raises:
        EffectError: the lock exists and cannot be read, or is not a regular file
            (nobody's lock that we could own).
    """
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise EffectError(f"{lock}: unreadable ({e.strerror})") from e
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        held = os.read(fd, 200) if regular else b""
    except OSError as e:
        raise EffectError(f"{lock}: unreadable ({e.strerror})") from e
    finally:
        os.close(fd)
    if not regular:
        raise EffectError(f"{lock}: not a regular file, so not a lock we could own")
    return held


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _take_index_lock(folder: Path, owner: str) -> Path:
    """Take ``index.lock`` as git does (it must not exist), created whole: a marker
    written to a private file, then hard-linked into place (a kill leaves no empty
    lock that could be anyone's)."""
    lock = folder / "index.lock"
    draft = folder / f"{_PRIVATE_INDEX}{owner}.mark"
    try:
        draft.write_text(f"{_LOCK_MARK} {owner} {os.getpid()}\n")
        os.link(draft, lock)
    except FileExistsError as e:
        raise EffectError(
            f"{lock} exists: another git command holds the index; retry once it is done "
            "(`kernel promote --recover`)"
        ) from e
    except OSError as e:
        raise EffectError(f"{folder}: cannot lock the index ({e.strerror})") from e
    finally:
        _remove(draft)
    return lock
