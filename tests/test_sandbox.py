"""Tests for kernel.effects.sandbox: isolation against hostile commands, capture, cleanup."""

from __future__ import annotations

import fcntl
import hashlib
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernel.corroboration.consensus import CaptureMode, CaptureStatus, Isolation
from kernel.effects.sandbox import (
    SANDBOX_WORKDIR,
    Capture,
    LimitKind,
    LimitMechanism,
    Limits,
    SandboxSpec,
    Variation,
    available_isolation,
    check_command_starts,
    hostview,
    observation,
    private_tempdir,
    read_output,
    run_sandboxed,
    scratch_root,
    variation_env,
)
from kernel.effects.sandbox import capture as sandbox_capture
from kernel.effects.sandbox import hostview as sandbox_hostview
from kernel.effects.sandbox import nslimits as sandbox_nslimits
from kernel.effects.sandbox import runner as sandbox_runner
from kernel.effects.sandbox import server as sandbox_server
from kernel.effects.sandbox.nsserve import DEPTH
from kernel.effects.sandbox.scratch import MOUNT_POINTS
from kernel.errors import EffectError

NAMESPACED = (Isolation.OVERLAY, Isolation.NAMESPACE_COPY)
ALL_LEVELS = (*NAMESPACED, Isolation.COPY)


def _cmdline(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])


def _sandboxed(cmdline: str) -> bool:
    return "import nshelper" in cmdline or "4242.5" in cmdline or "4244.5" in cmdline


def _named_runner(cmdline: str) -> int | None:
    """The runner pid a sandbox helper's command line names, if any."""
    for word in cmdline.split():
        if word.startswith("ppid=") and word[5:].isdigit():
            return int(word[5:])
    return None


def _ours(pid: int) -> bool:
    """True when ``pid`` is this test process or one of its descendants."""
    while pid > 1:
        if pid == os.getpid():
            return True
        pid = _parent(pid)
    return False


def _foreign(pid: int) -> bool:
    """True when ``pid`` belongs to a live runner other than this test process.

    Other sessions may run sandboxes on this machine at the same time; their helpers
    and scratch dirs are not leftovers of this suite. A runner is the first ancestor
    that is not a helper or marked process; ours is this process or a descendant. A
    dead runner or an orphan counts as ours (a leftover).
    """
    # A helper names its runner (``ppid=N``) and its forks inherit that command line:
    # trust the name over the process tree, which an exiting helper briefly orphans.
    owner = _named_runner(_cmdline(pid) or "")
    if owner is not None:
        return _cmdline(owner) is not None and not _ours(owner)
    runner = pid
    while runner > 1 and _sandboxed(_cmdline(runner) or ""):
        runner = _parent(runner)
    if runner <= 1 or _cmdline(runner) is None:
        return False
    return not _ours(runner)


def _prepared(pid: int) -> bool:
    """True when ``pid`` is a prepared sandbox of this runner's helper server, or its ns,
    PID 1 or command process (waiting for the next run by design, not a leftover)."""
    prepared = sandbox_runner.prepared_sandboxes()
    for _level in range(4):
        if pid in prepared:
            return True
        pid = _parent(pid)
    return False


def _helpers_alive() -> list[str]:
    """Command lines of live sandbox helpers or marked test processes of this suite."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        if int(entry.name) in sandbox_runner.helper_servers() or _prepared(int(entry.name)):
            continue  # this runner's pre-forked helper server lives as long as the runner
        cmdline = _cmdline(int(entry.name))
        if (
            cmdline is not None
            and "import nshelper" in cmdline
            and not cmdline.startswith(sys.executable + " ")
        ):
            continue  # a helper of another checkout's runner (another session)
        if cmdline is not None and _sandboxed(cmdline) and not _foreign(int(entry.name)):
            found.append(cmdline)
    return found


def _scratch_dirs() -> list[Path]:
    """Scratch dirs under `scratch_root` except those of another live runner."""
    root = scratch_root()
    if not root.exists():
        return []
    found = []
    for entry in root.iterdir():
        if entry.name == MOUNT_POINTS:
            continue  # kept: every run's namespace mounts its tmpfs of mount points there
        # <kind>-<pid>-<random>: sandbox scratch dirs (sbx) and private_tempdir folders.
        owner = entry.name.split("-")[1] if entry.name.count("-") >= 2 else ""
        if owner.isdigit() and _foreign(int(owner)):
            continue
        found.append(entry)
    return found


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    """Every test leaves no sandbox process, scratch dir or host mount behind."""
    mounts_before = Path("/proc/self/mountinfo").read_text()
    # Only dirs made during the test count: one of an earlier, killed runner is
    # swept by the next sandbox and must not turn this test red. Every dir present now
    # is remembered, a live runner's too: a killed runner's pid may belong to a live
    # process now and to nobody by the end, and its old dir is still not this test's.
    root = scratch_root()
    scratch_before = set(root.iterdir()) if root.exists() else set()
    yield
    deadline = time.monotonic() + 5
    while _helpers_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _helpers_alive() == []
    assert sorted(set(_scratch_dirs()) - scratch_before) == []
    assert Path("/proc/self/mountinfo").read_text() == mounts_before


@pytest.fixture(autouse=True)
def measure_the_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests also measure the in-namespace helper when coverage runs."""
    monkeypatch.setenv(sandbox_runner.COVERAGE_ENV, "1")


@pytest.fixture
def spill(tmp_path: Path) -> Path:
    """A spill directory owned by the test."""
    path = tmp_path / "spill"
    path.mkdir()
    return path


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A baseline outside /tmp (so it stays visible, read-only, inside the sandbox)."""
    base = Path(tempfile.mkdtemp(prefix="kernel-test-", dir="/var/tmp"))
    try:
        (base / "baseline").mkdir()
        (base / "baseline" / "data.txt").write_text("original\n")
        yield base
    finally:
        shutil.rmtree(base)


def run(spill: Path, *command: str, **kwargs: object) -> Capture:
    """Run a shell-free argv in a sandbox with a generous time limit."""
    kwargs.setdefault("timeout_s", 30.0)
    return run_sandboxed(SandboxSpec(command=command, **kwargs), spill_dir=spill)  # type: ignore[arg-type]


def sh(spill: Path, script: str, **kwargs: object) -> Capture:
    """Run a /bin/sh script in a sandbox."""
    return run(spill, "sh", "-c", script, **kwargs)


def test_namespaces_and_overlay_are_available_here() -> None:
    """This machine (and CI) provides the strongest level; the suite relies on it."""
    assert available_isolation() is Isolation.OVERLAY


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_stdout_capture_and_run_index(spill: Path, level: Isolation) -> None:
    """stdout is captured, hashed and spilled; KERNEL_RUN_INDEX is set; level recorded."""
    capture = sh(spill, 'printf "run=%s" "$KERNEL_RUN_INDEX"', run_index=3, isolation=level)
    assert capture.status is CaptureStatus.OK
    assert capture.isolation is level
    assert read_output(capture) == b"run=3"
    assert capture.output_digest == hashlib.sha256(b"run=3").hexdigest()
    assert capture.output_size == 5
    assert Capture.from_dict(capture.to_dict()) == capture


@pytest.mark.parametrize("level", NAMESPACED)
def test_hostile_write_to_baseline_absolute_path(
    spill: Path, outside_tmp: Path, level: Isolation
) -> None:
    """The baseline's absolute path is not in the view (its own ro_bind included:
    writes through it fail); the baseline is untouched."""
    baseline = outside_tmp / "baseline"
    script = f"""
        test -e {baseline}/data.txt; echo $?
        echo pwned > {baseline}/data.txt; a=$?
        touch {baseline}/new.txt; b=$?
        rm {baseline}/data.txt; c=$?
        echo "$a $b $c"
        echo changed > data.txt
    """
    capture = sh(spill, script, baseline=str(baseline), isolation=level)
    assert capture.status is CaptureStatus.OK
    assert read_output(capture).split()[0] == b"1"  # absent
    shown = sh(
        spill, script, baseline=str(baseline), isolation=level, ro_binds=(str(baseline),),
        run_index=1,
    )  # fmt: skip
    assert shown.status is CaptureStatus.OK
    assert read_output(shown).split()[0] == b"0"  # shown read-only
    for done in (capture, shown):
        assert b"0" not in read_output(done).split()[1:]  # every write failed
    assert sorted(p.name for p in baseline.iterdir()) == ["data.txt"]
    assert (baseline / "data.txt").read_text() == "original\n"


@pytest.mark.parametrize("level", NAMESPACED)
def test_hostile_write_outside_the_tree(spill: Path, outside_tmp: Path, level: Isolation) -> None:
    """Writes to .., to the host filesystem and to a host file via /proc fail."""
    baseline = outside_tmp / "baseline"
    script = f"""
        echo x > ../escape.txt
        echo x > {outside_tmp}/escape.txt
        mkdir {outside_tmp}/escape-dir
        echo x > /var/tmp/kernel-escape-$$.txt
        mount -t tmpfs none {baseline} 2>/dev/null && echo mounted
        echo done
    """
    capture = sh(spill, script, baseline=str(baseline), isolation=level)
    assert read_output(capture) == b"done\n"
    assert sorted(p.name for p in outside_tmp.iterdir()) == ["baseline"]
    assert not list(Path("/var/tmp").glob("kernel-escape-*"))


def test_hostile_cannot_regain_privileges(spill: Path) -> None:
    """The command is not namespace root: no capabilities, no remount, no chroot escape."""
    script = """
        id -u
        grep CapEff /proc/self/status
        mount -o remount,rw / 2>/dev/null && echo remounted
        touch /usr/kernel-escape 2>/dev/null && echo wrote-usr
        echo end
    """
    capture = sh(spill, script)
    lines = read_output(capture).decode().split("\n")
    assert lines[0] == "1000"
    assert lines[1].split() == ["CapEff:", "0000000000000000"]
    assert "remounted" not in lines
    assert "wrote-usr" not in lines
    assert not Path("/usr/kernel-escape").exists()


def test_hostile_write_to_another_runs_directory(spill: Path, tmp_path: Path) -> None:
    """Concurrent runs cannot see or write each other's trees or scratch dirs."""
    base = tmp_path / "base"
    base.mkdir()
    root = scratch_root()
    victim = "echo mine > victim.txt; sleep 1.5"
    attacker = f"""
        sleep 0.5
        for d in {root}/*/ {root}/*/upper/ {root}/*/root{SANDBOX_WORKDIR}/; do
            echo pwned > "$d/pwned.txt" 2>/dev/null && echo "wrote $d"
        done
        ls {SANDBOX_WORKDIR}
    """
    (spill / "a").mkdir()
    (spill / "b").mkdir()
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(
            run_sandboxed,
            SandboxSpec(
                command=("sh", "-c", victim), baseline=str(base), capture=CaptureMode.PATCH
            ),
            spill_dir=spill / "a",
        )
        second = pool.submit(
            run_sandboxed,
            SandboxSpec(command=("sh", "-c", attacker), baseline=str(base), run_index=1),
            spill_dir=spill / "b",
        )
        victim_capture, attacker_capture = first.result(), second.result()
    patch = read_output(victim_capture).decode()
    assert "victim.txt" in patch
    assert "pwned" not in patch
    # The attacker only ever wrote into its own private /tmp layer, and saw an empty tree.
    assert b"victim" not in read_output(attacker_capture)
    assert list(base.iterdir()) == []


@pytest.fixture
def host_tmp() -> Iterator[Path]:
    """A folder of the host's /tmp holding ``data.txt``, open to everyone.

    The command is an unprivileged user outside its namespaces: it gets the access
    "others" have, so the folder and file grant it.
    """
    base = Path(tempfile.mkdtemp(prefix="kernel-test-", dir="/tmp"))
    try:
        (base / "data.txt").write_text("original\n")
        base.chmod(0o777)
        (base / "data.txt").chmod(0o666)
        yield base
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("level", NAMESPACED)
def test_host_tmp_is_absent(spill: Path, host_tmp: Path, level: Isolation) -> None:
    """The host's /tmp is not in the view: the run's /tmp is its own (holding only its
    tree and the bound paths that live under /tmp, such as a checkout's venv), and
    starts afresh in the next run."""
    data = host_tmp / "data.txt"
    before = data.stat()
    script = f"""
        test -e {host_tmp} && echo seen
        cat {data} 2>/dev/null && echo read
        echo new > {host_tmp}/new.txt 2>/dev/null && echo wrote
        mkdir /tmp/kernel-made-here && echo made
    """
    capture = sh(spill, script, isolation=level)
    assert capture.status is CaptureStatus.OK, capture.error
    assert read_output(capture) == b"made\n"
    assert data.read_text() == "original\n"
    assert data.stat().st_mtime_ns == before.st_mtime_ns
    assert sorted(p.name for p in host_tmp.iterdir()) == ["data.txt"]
    assert not Path("/tmp/kernel-made-here").exists()
    again = sh(spill, "test -e /tmp/kernel-made-here || echo fresh", isolation=level, run_index=1)
    assert read_output(again) == b"fresh\n"


def test_program_under_host_tmp_runs(spill: Path, host_tmp: Path) -> None:
    """A program kept under the host's /tmp (e.g. a CI clone's venv) starts in a sandbox."""
    program = host_tmp / "hello.sh"
    program.write_text("#!/bin/sh\necho hello from $0\n")
    program.chmod(0o755)
    capture = run(spill, str(program))
    assert capture.status is CaptureStatus.OK, capture.error
    assert read_output(capture) == f"hello from {program}\n".encode()


@pytest.mark.parametrize("spelling", ["{path}", "/{path}", "/tmp/./{base}", "/tmp/../tmp/{base}"])
def test_program_directly_in_host_tmp_is_shown_alone(
    spill: Path, host_tmp: Path, spelling: str
) -> None:
    """A program whose folder is the host's /tmp runs, however its path is spelled, and
    is shown alone: the host's /tmp (other users' files and sockets) stays out and the
    sandbox keeps its own."""
    fd, name = tempfile.mkstemp(prefix="kernel-test-prog-", dir="/tmp")
    program = Path(name)
    try:
        script = b'#!/bin/sh\necho hello; ls -a /tmp; test -e "$1" && echo host tmp shown; exit 0\n'
        os.write(fd, script)
        os.close(fd)
        program.chmod(0o755)
        spelled = spelling.format(path=name, base=program.name)
        capture = run(spill, spelled, str(host_tmp / "data.txt"))
        assert capture.status is CaptureStatus.OK, capture.error
        listing = read_output(capture).decode().splitlines()
        assert listing[0] == "hello"
        assert host_tmp.name not in listing
        assert "host tmp shown" not in listing
    finally:
        program.unlink()


def test_python_installation_in_a_shared_folder_is_refused(spill: Path, tmp_path: Path) -> None:
    """A program in a venv whose base interpreter's home is the host's /tmp would show
    all of /tmp: refused with a clear error, not a sandbox error."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /tmp/python-build\n")
    program = venv / "bin" / "tool"
    program.write_text("#!/bin/sh\necho tool\n")
    program.chmod(0o755)
    with pytest.raises(EffectError, match="would show the host's /tmp whole"):
        run(spill, str(program))


def test_missing_program_in_the_root_folder_does_not_start(spill: Path) -> None:
    """An absolute program directly in ``/`` that does not exist is a command that could
    not start (exit 127), not a sandbox error: the host's root is never shown whole."""
    missing = "/kernel-test-absent-" + os.urandom(6).hex()
    assert "/" not in [
        path for path, _link in sandbox_hostview.view_entries(SandboxSpec(command=(missing,)))[0]
    ]
    capture = run(spill, missing)
    assert capture.status is CaptureStatus.FAILED, capture.error
    assert capture.exit_code == 127


def test_program_of_another_venv_runs(spill: Path, tmp_path: Path) -> None:
    """An absolute program in a venv other than the runner's starts: its venv and the
    venv's base interpreter are shown read-only, the rest of their parents is not."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (tmp_path / "secret.txt").write_text("not shown\n")
    program = venv / "bin" / "python"
    secret = str(tmp_path / "secret.txt")
    probe = f"import sys, os; print(sys.prefix); print(os.path.exists({secret!r}))"
    capture = run(spill, str(program), "-c", probe)
    assert capture.status is CaptureStatus.OK, capture.error
    assert read_output(capture) == f"{venv}\nFalse\n".encode()


@pytest.fixture(params=["system", "elsewhere"])
def scratch_location(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """`scratch_root` in the system temp dir, or (``$TMPDIR`` elsewhere) in /var/tmp."""
    if request.param == "system":
        yield scratch_root()
        return
    yield from _scratch_elsewhere(monkeypatch)


@pytest.fixture
def own_scratch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """`scratch_root` (``$TMPDIR`` elsewhere) in a folder of this test's own in /var/tmp:
    removing what is in it touches no other test's runs."""
    yield from _scratch_elsewhere(monkeypatch)


def _scratch_elsewhere(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="kernel-test-", dir="/var/tmp"))
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(base))
        assert scratch_root() == base / f"kernel-sandboxes-{os.geteuid()}"
        yield scratch_root()
    finally:
        monkeypatch.undo()
        # The sandboxes prepared meanwhile may still be building on it: removing it
        # must neither fail nor let them write on it (`nshelper._enter_points`).
        shutil.rmtree(base)


@pytest.mark.parametrize("level", NAMESPACED)
def test_scratch_root_is_hidden(spill: Path, scratch_location: Path, level: Isolation) -> None:
    """A sandbox cannot list, read or write any kernel scratch area (its own included)."""
    with private_tempdir("verify") as private:
        (private / "secret.txt").write_text("secret\n")
        script = f"""
            ls -A {scratch_location}
            cat {private}/secret.txt 2>/dev/null && echo read-secret
            ls {scratch_location}/sbx-* 2>/dev/null && echo saw-scratch
            echo x > {scratch_location}/x.txt 2>/dev/null && echo wrote
            echo x > {private}/x.txt 2>/dev/null && echo wrote-private
            echo done
        """
        capture = sh(spill, script, isolation=level)
        assert capture.status is CaptureStatus.OK, capture.error
        assert read_output(capture) == b"done\n"
        assert sorted(p.name for p in private.iterdir()) == [".lock", "secret.txt"]
    assert not (scratch_location / "x.txt").exists()


@pytest.mark.parametrize("level", NAMESPACED)
def test_mount_points_folder_removed_between_runs(
    spill: Path, own_scratch: Path, level: Isolation
) -> None:
    """A temp cleaner removes the mount points folder between runs: the next run holds
    (no sandbox prepared on the old folder takes it) and no view is built on the new
    folder, which stays empty on the host."""
    points = own_scratch / MOUNT_POINTS
    for _ in range(3):
        capture = sh(spill, "echo ok", isolation=level)
        assert capture.status is CaptureStatus.OK, capture.error
        assert read_output(capture) == b"ok\n"
        assert sandbox_server.prepared_sandboxes()  # waiting, on the folder removed now
        assert list(points.iterdir()) == []
        shutil.rmtree(points)


@pytest.mark.parametrize("level", NAMESPACED)
def test_sandbox_on_a_removed_mount_points_folder_writes_nothing_there(
    spill: Path, own_scratch: Path, level: Isolation, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were a sandbox prepared on a removed folder handed a run (its key told apart from
    the request's by nothing), it works through the tmpfs it mounted, never the folder's
    path: the run is a sandbox error and the folder made again stays empty."""
    from kernel.effects.sandbox import nshelper

    blind = tuple(name for name in nshelper.WARM_KEY if name != "points_folder")
    assert len(blind) == len(nshelper.WARM_KEY) - 1
    monkeypatch.setattr(nshelper, "WARM_KEY", blind)
    points = own_scratch / MOUNT_POINTS
    assert sh(spill, "true", isolation=level).status is CaptureStatus.OK
    assert sandbox_server.prepared_sandboxes()
    shutil.rmtree(points)
    capture = sh(spill, "echo ran", isolation=level)
    assert capture.status is CaptureStatus.SANDBOX_ERROR
    assert capture.error is not None
    assert capture.error.startswith("mount ")
    assert list(points.iterdir()) == []


def test_private_tempdir_is_locked_removed_and_swept(spill: Path) -> None:
    """In use it survives a sweep; on exit it is gone; a dead owner's one is swept."""
    with pytest.raises(ValueError, match="alphanumeric"), private_tempdir("a-b"):
        pass
    stale = time.time() - 3600
    with private_tempdir("test") as private:
        assert private.parent == scratch_root()
        assert private.name.startswith(f"test-{os.getpid()}-")
        os.utime(private, (stale, stale))
        assert sh(spill, "true").status is CaptureStatus.OK  # a sweep runs
        assert private.is_dir()
    assert not private.exists()
    orphan = scratch_root() / "spill-1-orphan"
    orphan.mkdir()
    (orphan / ".lock").touch()
    os.utime(orphan, (stale, stale))
    assert sh(spill, "true").status is CaptureStatus.OK
    assert not orphan.exists()


def test_hostile_tcp_connection_to_localhost_is_refused(spill: Path) -> None:
    """Network is off: a listener on 127.0.0.1 never sees a connection; --network allows it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    probe = textwrap.dedent(f"""
        import socket, sys
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
        except OSError as e:
            print("refused", type(e).__name__)
            sys.exit(3)
        print("connected")
    """)
    try:
        closed = run(spill, sys.executable, "-c", probe)
        assert closed.status is CaptureStatus.FAILED
        assert closed.exit_code == 3
        assert read_output(closed).startswith(b"refused")
        with pytest.raises(TimeoutError):
            listener.accept()
        opened = run(spill, sys.executable, "-c", probe, network=True, run_index=1)
        assert opened.status is CaptureStatus.OK
        assert read_output(opened) == b"connected\n"
    finally:
        listener.close()


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_timeout_kills_the_whole_process_tree(spill: Path, level: Isolation) -> None:
    """A child that forks, leaves the session and outlives the timeout is killed too."""
    script = "sleep 4242.5 & setsid sleep 4242.5 & (sleep 4242.5 &) ; sleep 4242.5"
    if level is Isolation.COPY:
        # Without namespaces a process that leaves the session escapes (weaker level).
        script = "sleep 4242.5 & (sleep 4242.5 &) ; sleep 4242.5"
    # No speed bound: had the runner waited for the tree (sleeps of 4242 s holding the
    # output pipe) instead of killing it, this call would not return at all.
    capture = sh(spill, script, timeout_s=1.0, isolation=level)
    assert capture.status is CaptureStatus.TIMEOUT
    assert capture.output_digest is None
    deadline = time.monotonic() + 3
    while _helpers_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _helpers_alive() == []


def test_leftover_daemon_is_killed_when_the_command_exits(spill: Path) -> None:
    """A background process left by a command that exits is killed with the sandbox."""
    capture = sh(spill, "setsid sleep 4242.5 >/dev/null 2>&1 & echo started")
    assert capture.status is CaptureStatus.OK
    assert read_output(capture) == b"started\n"
    # Killed before the reply; the helper, ns and PID 1 may still be tearing down.
    assert not any("4242.5" in cmdline for cmdline in _helpers_alive())
    deadline = time.monotonic() + 5
    while _helpers_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _helpers_alive() == []


@pytest.mark.parametrize("level", NAMESPACED)
def test_runner_killed_leaves_no_sandbox_behind(
    tmp_path: Path, spill: Path, level: Isolation
) -> None:
    """SIGKILL of the runner kills the sandboxed tree; an overlay run leaves no scratch
    on the host at all, a namespace_copy run's is swept by the next sandbox. (A scratch
    root of the test's own: in the shared one, another session's runner sweeps the dead
    runner's folder first.)"""
    runner = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from kernel.corroboration.consensus import Isolation
        from kernel.effects.sandbox import SandboxSpec, run_sandboxed
        command = ("sleep", "4244" + ".5") if sys.argv[1] == "sleep" else ("true",)
        spec = SandboxSpec(command=command, isolation=Isolation({level.value!r}))
        run_sandboxed(spec, spill_dir=Path({str(spill)!r}))
    """)
    private = tmp_path / "tmp"
    private.mkdir()
    env = {**os.environ, "TMPDIR": str(private)}
    proc = subprocess.Popen([sys.executable, "-c", runner, "sleep"], env=env)
    try:
        deadline = time.monotonic() + 20
        while "sleep 4244.5 " not in _helpers_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "sleep 4244.5 " in _helpers_alive()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 5
    while _helpers_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _helpers_alive() == []
    root = private / f"kernel-sandboxes-{os.geteuid()}"
    left = [entry for entry in root.iterdir() if entry.name != MOUNT_POINTS]
    if level is Isolation.OVERLAY:
        assert left == []  # everything of an overlay run lived in its namespaces
        return
    assert len(left) == 1  # the dead runner's scratch dir
    # Its owner is dead: the next sandbox sweeps it at once, however new it is.
    subprocess.run([sys.executable, "-c", runner, "true"], env=env, check=True)
    assert not left[0].exists()


@pytest.mark.slow
def test_one_gib_of_stdout_streams_with_flat_memory(spill: Path) -> None:
    """1 GiB on stdout is hashed while streamed and spilled; runner memory stays flat."""
    size = 1 << 30
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Speed is measured in bench/sandbox.py; the time limit only bounds a hung run.
    capture = run(
        spill, "head", "-c", str(size), "/dev/zero", timeout_s=900.0,
        limits=Limits(output_bytes=2 * size),
    )  # fmt: skip
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert capture.status is CaptureStatus.OK
    assert capture.output_size == size
    expected = hashlib.sha256()
    zeros = bytes(1 << 20)
    for _ in range(size >> 20):
        expected.update(zeros)
    assert capture.output_digest == expected.hexdigest()
    assert Path(str(capture.output_path)).stat().st_size == size
    assert grown_kib < 64 * 1024, f"runner grew by {grown_kib} KiB"


@pytest.mark.parametrize("how", ["spec", "limits"])
def test_output_limit_cuts_the_run(spill: Path, how: str) -> None:
    """An output over its limit ends the run as limit_exceeded (output); nothing past
    the limit is spilled and no partial output is offered as the result."""
    kwargs: dict[str, object] = (
        {"max_output_bytes": 1000} if how == "spec" else {"limits": Limits(output_bytes=1000)}
    )
    capture = run(spill, "sh", "-c", "head -c 5000 /dev/zero; exec sleep 60", **kwargs)
    assert capture.status is CaptureStatus.LIMIT_EXCEEDED
    assert capture.limit_hit is LimitKind.OUTPUT
    assert capture.output_digest is None
    assert capture.stdout_size > 1000
    assert Path(capture.stdout_path).stat().st_size <= 1000
    applied = {a.kind: a for a in capture.limits}
    assert applied[LimitKind.OUTPUT].mechanism is LimitMechanism.RUNNER


@pytest.mark.parametrize("limit", [None, 3 << 20])
def test_sink_keeps_order_across_the_hashing_thread(tmp_path: Path, limit: int | None) -> None:
    """Small chunks hash inline, large ones on the sink's thread: digest and spill exact.

    With a limit, the spill stops at the overflow but the hash and size cover every byte.
    """
    pieces = [b"a" * 10, os.urandom(300_000), b"b" * 7, os.urandom(1 << 20)] * 3
    data = b"".join(pieces)
    sink = sandbox_capture.Sink(tmp_path / "out", limit)
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)  # a whole piece fits: no writer thread
    sent = 0
    for piece in pieces:
        os.write(w, piece)
        sent += len(piece)
        while sink.size < sent:
            assert sink.read_from(r)
    os.close(w)
    assert not sink.read_from(r)
    os.close(r)
    assert sink._worker is not None  # the large chunks went through the thread
    sink.close()
    assert sink.stream.size == sink.size == len(data)
    assert sink.stream.hexdigest() == hashlib.sha256(data).hexdigest()
    assert sink.overflow is (limit is not None)
    if limit is None:
        assert (tmp_path / "out").read_bytes() == data
    else:
        assert data.startswith((tmp_path / "out").read_bytes())


def test_command_that_cannot_start(spill: Path) -> None:
    """A missing program is a failed run marked start_failed; the preflight refuses it."""
    capture = run(spill, "kernel-no-such-program")
    assert capture.status is CaptureStatus.FAILED
    assert capture.start_failed
    with pytest.raises(EffectError):
        check_command_starts(["kernel-no-such-program"])
    with pytest.raises(EffectError):
        check_command_starts([])
    with pytest.raises(EffectError):
        check_command_starts(["/nonexistent/program"])


def test_the_program_is_looked_up_on_path_as_execvpe_does(spill: Path, host_tmp: Path) -> None:
    """The command's process searches ``PATH`` itself (`nsview.execvpe`), as
    ``os.execvpe`` does: a folder the view lacks and a program there that cannot be
    executed are passed over and the first that runs is run; when none runs, the run
    could not start and says why (the first error other than "not there")."""
    first, second = host_tmp / "first", host_tmp / "second"
    for folder, mode in ((first, 0o644), (second, 0o755)):
        folder.mkdir()
        folder.chmod(0o755)
        program = folder / "kernel-test-program"
        program.write_text(f"#!/bin/sh\necho {folder.name}\n")
        program.chmod(mode)
    found = run(
        spill, "kernel-test-program", ro_binds=(str(host_tmp),),
        env=(("PATH", f"/kernel-not-in-the-view:{first}:{second}:/usr/bin:/bin"),),
    )  # fmt: skip
    assert found.status is CaptureStatus.OK, found.error
    assert read_output(found) == b"second\n"
    refused = run(
        spill, "kernel-test-program", ro_binds=(str(host_tmp),), run_index=1,
        env=(("PATH", f"/kernel-not-in-the-view:{first}"),),
    )  # fmt: skip
    assert refused.start_failed
    assert refused.error == "command could not start: Permission denied"


def test_missing_baseline_is_an_error(spill: Path, tmp_path: Path) -> None:
    """A baseline that is not a directory raises before anything runs."""
    with pytest.raises(EffectError):
        run(spill, "true", baseline=str(tmp_path / "missing"))


def test_failed_exit_keeps_the_output(spill: Path) -> None:
    """A non-zero exit is `failed`; the output is still hashed for the record."""
    capture = sh(spill, "echo partial; exit 4")
    assert capture.status is CaptureStatus.FAILED
    assert capture.exit_code == 4
    assert observation(capture).output_digest is None  # never enters a group


def test_variations_are_applied_and_recorded(spill: Path) -> None:
    """TZ, locale, umask, HOME and seed vary per run and are recorded."""
    pairs = variation_env(1, list(Variation))
    capture = sh(
        spill,
        'echo "$TZ|$LC_ALL|$(umask)|$KERNEL_RUN_SEED"; touch "$HOME/ok" && echo home-ok',
        variation=pairs,
    )
    assert capture.variation == pairs
    first, second = read_output(capture).decode().splitlines()
    assert first == "America/New_York|C|0077|2"
    assert second == "home-ok"
    assert variation_env(1, list(Variation)) == pairs
    assert variation_env(0, [Variation.TZ]) == (("TZ", "UTC"),)


# -- patch capture -----------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small baseline with text, binary, executable and nested files."""
    base = tmp_path / "tree"
    (base / "src" / "deep").mkdir(parents=True)
    (base / "README").write_text("hello\n")
    (base / "src" / "a.py").write_text("x = 1\n")
    (base / "src" / "deep" / "blob.bin").write_bytes(bytes(range(256)))
    (base / "run.sh").write_text("#!/bin/sh\n")
    return base


def patch_of(spill: Path, tree: Path, script: str, level: Isolation = Isolation.OVERLAY) -> bytes:
    """The patch a script produces against ``tree``."""
    capture = sh(spill, script, baseline=str(tree), capture=CaptureMode.PATCH, isolation=level)
    assert capture.status is CaptureStatus.OK, capture.error
    return read_output(capture)


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_no_change_patches_are_empty(spill: Path, tree: Path, level: Isolation) -> None:
    """Touch-only, create-then-delete and empty directories are no change."""
    script = "touch README src/a.py; echo t > tmp.txt; rm tmp.txt; mkdir -p empty/dir"
    assert patch_of(spill, tree, script, level) == b""


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_same_end_state_gives_the_same_bytes(spill: Path, tree: Path, level: Isolation) -> None:
    """Order of operations does not matter: the patch is a function of the end state."""
    one = """
        echo new > z.txt; echo extra >> README; rm src/deep/blob.bin
        printf '\\000\\001\\002' > bin.dat; chmod +x src/a.py; mkdir -p n/m; echo q > n/m/q
    """
    two = """
        mkdir -p n/m; echo q > n/m/q; chmod +x src/a.py; printf '\\000\\001\\002' > bin.dat
        echo tmp > README; rm src/deep/blob.bin; printf 'hello\\nextra\\n' > README
        echo new > z.txt; touch run.sh
    """
    first = patch_of(spill, tree, one, level)
    assert first == patch_of(spill, tree, two, level)
    text = first.decode()
    headers = [line for line in text.splitlines() if line.startswith("diff --git")]
    assert headers == sorted(headers, key=lambda h: h.split()[2][2:])
    assert "deleted file mode 100644" in text
    assert "GIT binary patch" in text
    assert "new mode 100755" in text


def test_patch_applies_to_reproduce_the_end_state(spill: Path, tree: Path, tmp_path: Path) -> None:
    """The captured patch applied to a copy of the baseline reproduces the run's tree."""
    patch = patch_of(spill, tree, "echo more >> README; rm src/a.py; printf '\\377' > b.bin")
    copy = tmp_path / "copy"
    shutil.copytree(tree, copy)
    (tmp_path / "p.patch").write_bytes(patch)
    subprocess.run(["git", "apply", str(tmp_path / "p.patch")], cwd=copy, check=True)
    assert (copy / "README").read_text() == "hello\nmore\n"
    assert not (copy / "src" / "a.py").exists()
    assert (copy / "b.bin").read_bytes() == b"\xff"


def test_apply_patch_and_preload_before_the_command(
    spill: Path, tree: Path, tmp_path: Path
) -> None:
    """A verifier can apply a worker's patch (and preload files) before its command runs."""
    patch = patch_of(spill, tree, "echo patched > README")
    (tmp_path / "w.patch").write_bytes(patch)
    preload = tmp_path / "preload"
    preload.mkdir()
    (preload / "check.sh").write_text("cat README\n")
    for level in ALL_LEVELS:
        capture = sh(
            spill,
            "sh check.sh",
            baseline=str(tree),
            apply_patch=str(tmp_path / "w.patch"),
            preload=str(preload),
            isolation=level,
        )
        assert read_output(capture) == b"patched\n", (level, capture.error)
    assert (tree / "README").read_text() == "hello\n"


def test_bad_patch_is_a_sandbox_error(spill: Path, tree: Path, tmp_path: Path) -> None:
    """A patch that does not apply makes the run a sandbox error, not a command failure."""
    (tmp_path / "bad.patch").write_text("not a patch at all\n")
    capture = sh(spill, "true", baseline=str(tree), apply_patch=str(tmp_path / "bad.patch"))
    assert capture.status is CaptureStatus.SANDBOX_ERROR


def test_read_output_detects_tampering(spill: Path) -> None:
    """read_output checks the spilled file against the recorded digest."""
    capture = sh(spill, "echo data")
    Path(str(capture.output_path)).write_bytes(b"other\n")
    with pytest.raises(EffectError):
        read_output(capture)


def test_probe_falls_back_to_copy(monkeypatch: pytest.MonkeyPatch, spill: Path) -> None:
    """Where namespaces fail, the probe settles on `copy` and captures record it."""
    monkeypatch.setattr(sandbox_runner, "_PROBED", {})
    monkeypatch.setattr(sandbox_server, "_SERVERS", {})  # no running helper server
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    assert available_isolation() is Isolation.COPY
    capture = sh(spill, "echo weak")
    assert capture.isolation is Isolation.COPY
    assert read_output(capture) == b"weak\n"


def test_helper_server_is_reused_and_replaced_when_gone(spill: Path) -> None:
    """Runs go through one pre-forked helper server; if it dies, the next run starts a
    new one (and a run whose server is gone still completes)."""
    assert sh(spill, "true").status is CaptureStatus.OK
    first = sandbox_runner.helper_servers()
    assert sh(spill, "true", run_index=1).status is CaptureStatus.OK
    assert sandbox_runner.helper_servers() == first
    for pid in first:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(_cmdline(pid) is not None for pid in first) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sh(spill, "echo again", run_index=2).status is CaptureStatus.OK
    assert sh(spill, "echo again", run_index=3).status is CaptureStatus.OK
    assert sandbox_runner.helper_servers().isdisjoint(first)


def test_helper_server_socket_is_closed_at_exit(tmp_path: Path) -> None:
    """A process that used the sandbox exits without an unclosed-socket
    ResourceWarning (warnings as errors), also when its helper server died and no
    later run replaced it."""
    program = textwrap.dedent(
        """
        import os, signal, sys, time
        from pathlib import Path
        from kernel.effects.sandbox import SandboxSpec, run_sandboxed
        from kernel.effects.sandbox import runner
        spec = SandboxSpec(command=("true",), timeout_s=600.0)
        capture = run_sandboxed(spec, spill_dir=Path(sys.argv[1]))
        servers = runner.helper_servers()
        for pid in servers:
            os.kill(pid, signal.SIGKILL)
        while runner.helper_servers():
            time.sleep(0.05)
        print(capture.status, len(servers))
        """
    )
    done = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-c", program, str(tmp_path)],
        capture_output=True,
        check=False,
        env={k: v for k, v in os.environ.items() if k != sandbox_runner.COVERAGE_ENV},
    )
    assert done.stderr.decode() == ""
    assert done.returncode == 0
    assert done.stdout.decode().split() == ["ok", "1"]


def test_a_fork_of_the_runner_lets_go_of_its_servers(tmp_path: Path) -> None:
    """A fork of a runner that ends as a Python program does (its exit handlers run)
    leaves the runner's server alone: it read the sandboxes the server prepared for the
    runner, and the runner's next run waited forever. The fork runs its own sandbox,
    the runner still holds its two prepared ones and its next run is real."""
    program = textwrap.dedent(
        """
        import os, sys
        from pathlib import Path
        from kernel.effects.sandbox import SandboxSpec, run_sandboxed
        from kernel.effects.sandbox import runner
        spill = Path(sys.argv[1])
        run_sandboxed(SandboxSpec(command=("true",), timeout_s=600.0), spill_dir=spill)
        pid = os.fork()
        if pid == 0:
            spec = SandboxSpec(command=("echo", "fork"), timeout_s=600.0, run_index=1)
            fork = run_sandboxed(spec, spill_dir=spill / "fork")
            print(fork.status, Path(fork.stdout_path).read_text().strip(), flush=True)
            sys.exit(0)
        os.waitpid(pid, 0)
        prepared = len(runner.prepared_sandboxes())
        spec = SandboxSpec(command=("echo", "runner"), timeout_s=600.0, run_index=2)
        capture = run_sandboxed(spec, spill_dir=spill)
        print(prepared, capture.status, Path(capture.stdout_path).read_text().strip())
        """
    )
    (tmp_path / "fork").mkdir()
    done = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-c", program, str(tmp_path)],
        capture_output=True,
        check=False,
        timeout=300,  # a hang guard only: the run before the fix never ended
        env={k: v for k, v in os.environ.items() if k != sandbox_runner.COVERAGE_ENV},
    )
    assert done.stderr.decode() == ""
    assert done.returncode == 0
    # The probe of the level and the first run share their options: held, DEPTH.
    assert done.stdout.decode().split() == ["ok", "fork", str(DEPTH), "ok", "runner"]


# ---------------------------------------------------------------------------
# The warm sandbox: the server prepares the next run's sandbox (ADR-0005 §7)


@pytest.fixture
def helper_pids(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pid of each run's helper, in order (the runner's side of the reply)."""
    pids: list[int] = []
    original = sandbox_server.ForkedHelper.__init__

    def record(self: sandbox_server.ForkedHelper, pid: int, pidfd: int, *server: object) -> None:
        pids.append(pid)
        original(self, pid, pidfd, *server)  # type: ignore[arg-type]

    monkeypatch.setattr(sandbox_server.ForkedHelper, "__init__", record)
    return pids


WARM_PROBE = (
    'echo "pid $$"; ls -A /tmp /dev/shm; touch /tmp/left /dev/shm/left; '
    "cat /proc/self/mountinfo | wc -l"
)


def test_a_prepared_sandbox_serves_exactly_one_run(spill: Path, helper_pids: list[int]) -> None:
    """The run after another of the same spec takes the sandbox prepared meanwhile: a
    fresh one (its command is PID 2, nothing the last run left in /tmp or /dev/shm),
    and the one after takes another."""
    first = sh(spill, WARM_PROBE)
    seen = [read_output(first)]
    for index in (1, 2):
        prepared = sandbox_runner.prepared_sandboxes()
        capture = sh(spill, WARM_PROBE, run_index=index)
        assert capture.status is CaptureStatus.OK
        assert helper_pids[-1] in prepared  # taken, not made for the request
        seen.append(read_output(capture))
    assert len(set(helper_pids[-3:])) == 3
    assert len(set(seen)) == 1  # the same fresh sandbox every time: same mounts, no files
    lines = seen[0].decode().splitlines()
    assert lines[0] == "pid 2"
    assert "left" not in lines


@pytest.mark.parametrize(
    "change",
    [
        {"limits": Limits(memory_bytes=3 << 30)},
        {"limits": Limits(tmp_bytes=32 << 20)},
        {"limits": Limits(processes=100)},
        {"network": True},
        {"ro_binds": ("/var/tmp",)},
        {"isolation": Isolation.NAMESPACE_COPY},
    ],
    ids=["memory", "tmp", "processes", "network", "binds", "level"],
)
def test_a_different_spec_never_gets_a_sandbox_prepared_for_another(
    spill: Path, helper_pids: list[int], change: dict[str, object]
) -> None:
    """A request whose limits, binds, network or level differ from the prepared
    sandbox's gets a fresh one built for it (seen from inside: its /tmp size, its
    network, its binds), and the next run of the first spec no sandbox of the other."""
    script = "stat -f -c %b /tmp; wc -l </proc/net/dev; test -d /var/tmp && echo bound; true"
    base = sh(spill, script)
    prepared = sandbox_runner.prepared_sandboxes()
    other = sh(spill, script, run_index=1, **change)
    assert other.status is CaptureStatus.OK
    assert helper_pids[-1] not in prepared
    fresh = sandbox_runner.prepared_sandboxes()
    again = sh(spill, script, run_index=2)
    assert helper_pids[-1] not in fresh
    assert read_output(again) == read_output(base)
    expected = read_output(base)
    if (
        "network" in change
        or "ro_binds" in change
        or change.get("limits") == Limits(tmp_bytes=32 << 20)
    ):
        assert read_output(other) != expected
    else:
        assert read_output(other) == expected


def test_the_warm_key_covers_every_option_that_shapes_a_sandbox(spill: Path) -> None:
    """Two specs that differ in a limit, a bind, the network or the level have
    different keys; the run's own part (command, environment, index) does not count."""
    from kernel.effects.sandbox import nshelper

    def key(**kwargs: object) -> tuple[str, ...]:
        spec = SandboxSpec(**{"command": ("true",), **kwargs})  # type: ignore[arg-type]
        level = spec.isolation or Isolation.OVERLAY
        scratch = spill / f"scratch-{len(kwargs)}"
        options = sandbox_runner._helper_options(
            spec, level=level, scratch=scratch, baseline=None, outer=(2, 2)
        )
        return nshelper.warm_key(options)

    base = key()
    assert key(command=("false",), env=(("A", "1"),), run_index=4) == base
    for change in (
        {"limits": Limits(memory_bytes=1 << 30)},
        {"limits": Limits(processes=7)},
        {"limits": Limits(cpu_seconds=7)},
        {"limits": Limits(writable_bytes=1 << 20)},
        {"limits": Limits(tmp_bytes=1 << 20)},
        {"limits": Limits(output_bytes=1 << 20)},
        {"network": True},
        {"ro_binds": ("/var/tmp",)},
        {"isolation": Isolation.NAMESPACE_COPY},
    ):
        assert key(**change) != base, change


def _running(pid: int) -> bool:
    """True when ``pid`` is a process that has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_runner_killed_with_a_prepared_sandbox_leaves_nothing(tmp_path: Path, spill: Path) -> None:
    """SIGKILL of a runner whose server holds a prepared sandbox kills it too (the
    PDEATHSIG chain); its memory group is removed by the next run, as a killed run's is.
    A runner that exits normally leaves no prepared sandbox or memory group at all."""
    runner = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from kernel.effects.sandbox import SandboxSpec, run_sandboxed, runner
        run_sandboxed(SandboxSpec(command=("true",)), spill_dir=Path({str(tmp_path)!r}))
        print(*runner.prepared_sandboxes(), flush=True)
        if sys.argv[1] == "wait":
            time.sleep(600)
    """)
    groups = Path(sandbox_nslimits.CGROUP_MEMORY)
    for how in ("wait", "exit"):
        proc = subprocess.Popen([sys.executable, "-c", runner, how], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        prepared = [int(pid) for pid in proc.stdout.readline().split()]
        if how == "wait":
            assert prepared
            assert all(_running(pid) for pid in prepared)
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        deadline = time.monotonic() + 5
        while _helpers_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _helpers_alive() == []
        assert not any(_running(pid) for pid in prepared)
        if how == "wait":
            # Swept by the next sandbox made (the one this run prepares, if it took one).
            assert sh(spill, "true").status is CaptureStatus.OK
            deadline = time.monotonic() + 5
            while any(groups.glob(f"sbx-{proc.pid}-*")) and time.monotonic() < deadline:
                time.sleep(0.05)
        assert not any(groups.glob(f"sbx-{proc.pid}-*"))


def test_a_teardown_still_running_is_invisible_to_the_next_run(spill: Path) -> None:
    """The reply comes before the teardown: the next run starts while the last one's
    processes may still be dying, and sees none of them, nor its mounts or files."""
    sh(spill, "touch /tmp/mine; for i in 1 2 3 4 5 6 7 8; do setsid sleep 4243.5 & done; true")
    probe = "ls /proc | grep -c '^[0-9]'; cat /proc/[0-9]*/cmdline | tr '\\0' ' '; ls -A /tmp"
    capture = sh(spill, probe, run_index=1)
    assert capture.status is CaptureStatus.OK
    text = read_output(capture).decode()
    assert "4243.5" not in text
    assert "mine" not in text
    assert int(text.splitlines()[0]) <= 5  # PID 1, the shell, its pipeline


def _children(pid: int) -> list[int]:
    """The children of ``pid`` (its main thread's: every process here is one thread)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


@pytest.mark.parametrize("which", ["helper", "init", "command"])
def test_a_prepared_sandbox_gone_before_its_run_never_answers_for_it(
    spill: Path, helper_pids: list[int], which: str
) -> None:
    """A prepared sandbox whose helper, PID 1 or confined command process dies before
    the hand-off: the run that would have taken it gets the real result, from another
    sandbox, or none (an error), never a status of that one; the run after is real."""
    assert sh(spill, "true").status is CaptureStatus.OK
    # The server that ran it (under coverage, a process may also hold another one, for
    # runs made while coverage was off: its sandboxes are not this test's).
    server = sandbox_server.running_server()
    assert server is not None
    prepared = server.prepared()
    assert len(prepared) in {DEPTH - 1, DEPTH}  # a spec seen first, or run before
    for sandbox in server._held:
        select.select([sandbox.sock], [], [])  # it said "ready": PID 1 waits for a run
        helper = sandbox.pid
        (ns,) = _children(helper)
        (init,) = _children(ns)
        (command,) = _children(init)
        victim = {"helper": helper, "init": init, "command": command}[which]
        pidfd = os.pidfd_open(victim)
        try:
            os.kill(victim, signal.SIGKILL)
            select.select([pidfd], [], [])  # exited: its descriptors are closed
        finally:
            os.close(pidfd)
    for index in range(1, len(prepared) + 1):
        capture = sh(spill, "echo real $$", run_index=index)
        if capture.status is CaptureStatus.OK:
            assert read_output(capture) == b"real 2\n"
            assert helper_pids[-1] not in prepared
        else:  # the sandbox was taken before its loss showed: an error, never a pass
            assert which == "command", capture
            assert capture.status is CaptureStatus.SANDBOX_ERROR, capture
    capture = sh(spill, "echo real $$", run_index=len(prepared) + 1)
    assert (capture.status, read_output(capture)) == (CaptureStatus.OK, b"real 2\n")


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_the_command_holds_no_descriptor_but_its_own(spill: Path, level: Isolation) -> None:
    """The command inherits stdin, stdout and stderr only: no socket or pidfd of the
    hand-off, its PID 1's channel or the run's status and patch pipes; in a fresh
    sandbox and in one prepared for it alike."""
    system = shutil.which("python3", path="/usr/bin:/bin")
    assert system is not None
    probe = "import os; print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))"
    for index in (0, 1):
        capture = run(spill, system, "-c", probe, isolation=level, run_index=index)
        assert capture.status is CaptureStatus.OK, capture.error
        assert read_output(capture) == b"[0, 1, 2, 3]\n"  # 3: the listing's own


SIGNAL_PROBE = textwrap.dedent("""
    import os, signal, sys
    runner, me, hit = int(sys.argv[1]), os.getpid(), []
    def of_the_runner(pid):  # the runner's descendants only: this test's processes
        while pid > 1:
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    pid = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                return False
            if pid == runner:
                return True
        return False
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me and of_the_runner(int(name)):
            try:
                os.kill(int(name), signal.SIGKILL)
                hit.append(name)
            except OSError:
                pass
    print(len(hit))
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="an unprivileged runner's copy command is itself")
def test_a_copy_command_cannot_signal_another_runs_command(spill: Path) -> None:
    """A root runner's copy command shares the host's PID namespace with its namespaced
    runs' commands, the prepared ones waiting for their run included. It SIGKILLs
    every process of the runner it sees: none is its uid (the copy level has ids of its
    own), so nothing dies, and the next runs, in those prepared sandboxes, are real."""
    assert sh(spill, "true").status is CaptureStatus.OK
    assert len(sandbox_runner.prepared_sandboxes()) in {DEPTH - 1, DEPTH}
    system = shutil.which("python3", path="/usr/bin:/bin")
    assert system is not None
    probe = (system, "-c", SIGNAL_PROBE, str(os.getpid()))
    copy = run(spill, *probe, isolation=Isolation.COPY, run_index=1)
    assert copy.status is CaptureStatus.OK, copy.error
    assert read_output(copy) == b"0\n"
    for index in (2, 3):
        capture = sh(spill, "echo real", run_index=index)
        assert capture.status is CaptureStatus.OK, capture.error
        assert read_output(capture) == b"real\n"


@pytest.mark.parametrize("with_baseline", [False, True], ids=["no-baseline", "baseline"])
def test_the_runner_hands_a_run_to_its_prepared_sandbox_itself(
    spill: Path, helper_pids: list[int], tmp_path: Path, with_baseline: bool
) -> None:
    """A run of a prepared key goes from the runner straight to that sandbox's PID 1:
    with the helper server stopped (SIGSTOP) it still completes, in the sandbox
    prepared for it, and the server prepares the next ones once it runs again. A root
    runner's overlay of a baseline goes through the server (which makes the idmapped
    baseline) and still takes a prepared sandbox."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f.txt").write_text("v1\n")
    kwargs: dict[str, object] = {"baseline": str(tree)} if with_baseline else {}
    by_server = with_baseline and os.geteuid() == 0
    assert sh(spill, "cat f.txt 2>/dev/null; true", **kwargs).status is CaptureStatus.OK
    servers = sandbox_runner.helper_servers()
    for index in (1, 2):
        prepared = sandbox_runner.prepared_sandboxes()
        # A spec seen first keeps one fewer prepared than one run again.
        assert len(prepared) in ({DEPTH - 1, DEPTH} if index == 1 else {DEPTH})
        if not by_server:
            for pid in servers:
                os.kill(pid, signal.SIGSTOP)
        try:
            capture = sh(spill, "cat f.txt 2>/dev/null; echo $$", run_index=index, **kwargs)
        finally:
            for pid in servers:
                os.kill(pid, signal.SIGCONT)
        assert capture.status is CaptureStatus.OK
        assert read_output(capture) == (b"v1\n" if with_baseline else b"") + b"2\n"
        assert helper_pids[-1] in prepared  # taken, not made for the request
    assert sandbox_runner.helper_servers() == servers


def test_the_host_view_is_kept_until_its_folders_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system and /etc pieces a sandbox shows are looked up again whenever the
    folder holding them changes (an entry made, removed or replaced)."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "a").write_text("x\n")
    names = (str(etc / "a"), str(etc / "b"))
    monkeypatch.setattr(hostview, "SYSTEM_BINDS", ())
    monkeypatch.setattr(hostview, "ETC_BINDS", names)
    monkeypatch.setattr(hostview, "_HOST", [])
    later = time.time_ns() + 60 * 10**9
    monkeypatch.setattr(time, "time_ns", lambda: later)  # every stamp counts as settled
    assert hostview.host_entries() == ([], (names[0],))
    assert hostview.host_entries() == ([], (names[0],))
    (etc / "b").mkdir()
    os.utime(etc, ns=(later, later))  # file times are coarse: make the change distinct
    assert hostview.host_entries() == ([(names[1], "")], (names[0],))
    (etc / "a").unlink()
    (etc / "a").symlink_to("b")
    os.utime(etc, ns=(later + 1, later + 1))
    assert hostview.host_entries() == ([(names[0], "b"), (names[1], "")], ())
