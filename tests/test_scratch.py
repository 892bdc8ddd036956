"""Attacks on the private scratch root (kernel.effects.sandbox.scratch)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from kernel.effects.sandbox import SandboxSpec, private_tempdir, run_sandboxed, scratch_root
from kernel.effects.sandbox.scratch import checked_root
from kernel.errors import UnsafeScratchError

ROOT = os.geteuid() == 0
ATTACKER_UID = 4242  # no such user here: a local user's files, as root sees them


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$TMPDIR`` in a folder of this test, open to everyone like /tmp."""
    base = tmp_path / "tmpdir"
    base.mkdir()
    base.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    return base


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A folder with a file the attacker wants root to overwrite or delete."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep\n")
    return folder


def _untouched(victim: Path) -> bool:
    return sorted(p.name for p in victim.iterdir()) == ["precious.txt"] and (
        (victim / "precious.txt").read_text() == "keep\n"
    )


@pytest.mark.skipif(not ROOT, reason="only root can make a file owned by another user")
def test_attacker_owned_scratch_root_is_refused(
    temp_root: Path, victim: Path, tmp_path: Path
) -> None:
    """A local user pre-creates root's scratch root and plants symlinks in it: root
    refuses it and writes nothing through it."""
    planted = scratch_root()
    planted.mkdir(mode=0o700)
    for name in ("sbx-1-aaaa", ".lock", "spill-1-bbbb"):
        (planted / name).symlink_to(victim / "precious.txt" if name == ".lock" else victim)
    os.lchown(planted, ATTACKER_UID, ATTACKER_UID)
    for entry in planted.iterdir():
        os.lchown(entry, ATTACKER_UID, ATTACKER_UID)
    spill = tmp_path / "spill"
    spill.mkdir()
    with pytest.raises(UnsafeScratchError, match="owned by uid 4242"):
        run_sandboxed(SandboxSpec(command=("true",)), spill_dir=spill)
    with pytest.raises(UnsafeScratchError), private_tempdir("spill"):
        pass
    assert _untouched(victim)
    assert sorted(p.name for p in planted.iterdir()) == [".lock", "sbx-1-aaaa", "spill-1-bbbb"]


def test_symlinked_scratch_root_is_refused(temp_root: Path, victim: Path) -> None:
    """A scratch root that is a symlink (to anywhere) is refused."""
    scratch_root().symlink_to(victim)
    with pytest.raises(UnsafeScratchError, match="symlink"):
        checked_root()
    assert _untouched(victim)


def test_scratch_root_open_to_others_is_refused(temp_root: Path) -> None:
    """A scratch root others may enter or write is refused, even if it is ours."""
    scratch_root().mkdir(mode=0o755)
    scratch_root().chmod(0o755)
    with pytest.raises(UnsafeScratchError, match="mode 0755"):
        checked_root()


def test_scratch_root_is_created_private(temp_root: Path) -> None:
    """A missing root is created 0700 and owned by this user."""
    root = checked_root()
    info = root.stat()
    assert info.st_uid == os.geteuid()
    assert info.st_mode & 0o777 == 0o700
    assert root.name == f"kernel-sandboxes-{os.geteuid()}"


def test_scratch_of_a_killed_runner_is_swept_at_once(temp_root: Path) -> None:
    """A scratch dir whose runner was killed is swept by the next one, however new."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    stale = checked_root() / f"sbx-{proc.pid}-abcdefgh"
    stale.mkdir()
    (stale / ".lock").write_text("")
    (stale / "upper").mkdir()
    with private_tempdir("probe") as fresh:
        assert fresh.exists()
        assert not stale.exists()


def test_scratch_of_a_live_runner_is_kept(temp_root: Path) -> None:
    """A locked scratch dir of a live process is never swept."""
    with private_tempdir("spill") as first, private_tempdir("spill") as second:
        assert first.exists()
        assert second.exists()


LEFTOVER_RUNNER = textwrap.dedent("""
    import os, sys, tempfile
    from pathlib import Path
    from kernel.corroboration.consensus import CaptureMode, Isolation
    from kernel.effects.sandbox import SandboxSpec, Variation, run_sandboxed, variation_env
    base = Path(tempfile.mkdtemp(dir="/var/tmp"))
    (base / "tree").mkdir()
    (base / "tree" / "f.txt").write_text("v1\\n")
    statuses = []
    for index, level in enumerate(Isolation):
        spill = base / f"spill-{index}"
        spill.mkdir()
        capture = run_sandboxed(
            SandboxSpec(
                command=("sh", "-c", "echo v2 >> f.txt; mkdir -p $HOME; ls -A /tmp"),
                baseline=str(base / "tree"), capture=CaptureMode.PATCH, isolation=level,
                variation=variation_env(0, [Variation.HOME]), timeout_s=60),
            spill_dir=spill,
        )
        statuses.append(f"{level}={capture.status}")
    print(" ".join(statuses))
    print(" ".join(sorted(os.listdir(tempfile.gettempdir() + f"/kernel-sandboxes-{os.geteuid()}"))))
""")


def _plant_leftovers(top: Path) -> None:
    """What killed runs (ours, another user's) leave in /tmp and in the scratch root:
    the sandbox's own work dir and a run's home as another user's files, scratch dirs
    of dead runners with overlay work dirs of mode 000, one owned by another user, a
    stray file."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    (top / "kernel-sandbox").mkdir(mode=0o700)
    (top / "kernel-home-0").write_text("not a folder\n")
    root = top / f"kernel-sandboxes-{os.geteuid()}"
    root.mkdir(mode=0o700)
    (root / "stray.txt").write_text("x")
    for kind, owner in (("sbx", os.geteuid()), ("spill", ATTACKER_UID)):
        stale = root / f"{kind}-{dead.pid}-leftover"
        (stale / "ns" / "upper" / "work" / "work").mkdir(parents=True)
        (stale / ".lock").write_text("")
        (stale / "copy").mkdir()
        (stale / "copy" / "f.txt").write_text("old\n")
        for path in sorted(stale.rglob("*"), reverse=True):
            os.lchown(path, owner, owner)
        (stale / "ns" / "upper" / "work" / "work").chmod(0)
    for path in (top / "kernel-sandbox", top / "kernel-home-0"):
        os.lchown(path, ATTACKER_UID, ATTACKER_UID)


@pytest.mark.skipif(
    not ROOT or shutil.which("unshare") is None,
    reason="a private /tmp for the planted leftovers needs root and unshare",
)
def test_leftovers_of_killed_runs_never_break_a_later_run() -> None:
    """Leftovers of killed runs in /tmp and in the scratch root, some owned by another
    user, break no later run at any level, and the dead runners' scratch is swept.

    The runner sees the host's /tmp under an overlay holding the planted files, in a
    mount namespace of its own: they never reach /tmp itself or other runs on this
    machine, and a checkout or venv under /tmp stays where it is."""
    top = Path(tempfile.mkdtemp(prefix="kernel-leftovers-", dir="/var/tmp"))
    try:
        planted, work = top / "upper", top / "work"
        planted.mkdir()
        planted.chmod(0o1777)  # the merged /tmp's own mode
        work.mkdir()
        _plant_leftovers(planted)
        layers = f"lowerdir=/tmp,upperdir={planted},workdir={work}"
        script = f'mount -t overlay overlay -o {layers} /tmp && exec "$@"'
        result = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
             sys.executable, "-c", LEFTOVER_RUNNER],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
    finally:
        shutil.rmtree(top)
    assert result.returncode == 0, result.stderr
    statuses, left = result.stdout.strip().splitlines()
    assert statuses == "overlay=ok namespace_copy=ok copy=ok"
    assert "leftover" not in left  # both dead runners' dirs swept, another user's too
