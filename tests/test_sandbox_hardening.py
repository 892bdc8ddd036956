"""Attacks on the sandbox's promises when the runner is root (CI), and its limits.

Every probe is harmless if the escape works: a write puts back the value just read,
a read aims at a file this test created. Run as root these tests attack the root
case; run as another user they check that user's (already unprivileged) case.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given

from kernel.corroboration.consensus import CaptureStatus, Isolation
from kernel.effects.cli import main
from kernel.effects.rerun import corroborate
from kernel.effects.sandbox import (
    SANDBOX_UID,
    AppliedLimit,
    Capture,
    LimitKind,
    LimitMechanism,
    Limits,
    SandboxSpec,
    outer_ids,
    read_output,
    run_sandboxed,
)
from kernel.effects.sandbox import runner as sandbox_runner
from kernel.effects.sandbox.nslimits import MEMORY_EVIDENCE, memory_hit, seccomp_program
from kernel.effects.sandbox.spec import MASKED_PATHS, mount_plan
from kernel.errors import ConfigError, RecordError

NAMESPACED = (Isolation.OVERLAY, Isolation.NAMESPACE_COPY)
ALL_LEVELS = (*NAMESPACED, Isolation.COPY)
ROOT = os.geteuid() == 0
REFUSED = {"EACCES", "EROFS", "EPERM"}


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


def interpreter(level: object) -> str:
    """A Python the command's user can execute.

    A ``copy`` run of a root runner is the unprivileged outer uid on the host with no
    mount namespace to open the way to this interpreter (under ``/root``, 0700 here):
    it uses the system's.
    """
    if ROOT and level is Isolation.COPY:
        return shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    return sys.executable


def python(spill: Path, code: str, **kwargs: object) -> Capture:
    """Run a Python snippet in a sandbox with a generous time limit."""
    kwargs.setdefault("timeout_s", 60.0)
    program = interpreter(kwargs.get("isolation"))
    spec = SandboxSpec(command=(program, "-c", textwrap.dedent(code)), **kwargs)  # type: ignore[arg-type]
    return run_sandboxed(spec, spill_dir=spill)


# ---------------------------------------------------------------------------
# Host privileges


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_hostile_write_to_proc_sys_is_refused(spill: Path, level: Isolation) -> None:
    """The command cannot write kernel settings: it writes back the value it read
    (harmless if it worked) and must get EACCES, EROFS or EPERM."""
    before = Path("/proc/sys/kernel/hostname").read_text()
    capture = python(
        spill,
        """
        import errno
        for name in ("/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname",
                     "/proc/sys/vm/overcommit_memory"):
            value = open(name).read()
            try:
                with open(name, "w") as handle:
                    handle.write(value)
                print("wrote", name)
            except OSError as e:
                print(errno.errorcode[e.errno], name)
        """,
        isolation=level,
    )
    assert capture.status is CaptureStatus.OK, capture.error
    lines = read_output(capture).decode().splitlines()
    assert len(lines) == 3
    assert {line.split()[0] for line in lines} <= REFUSED, lines
    assert Path("/proc/sys/kernel/hostname").read_text() == before


@pytest.fixture
def root_only_file() -> Iterator[Path]:
    """A 0600 file of the runner in a folder everyone may enter (/var/tmp, shown to
    the sandbox by name): only the file's own mode keeps the command out."""
    folder = Path(tempfile.mkdtemp(prefix="kernel-secret-", dir="/var/tmp"))
    folder.chmod(0o755)
    secret = folder / "secret.txt"
    secret.write_text("top secret\n")
    secret.chmod(0o600)
    try:
        yield secret
    finally:
        secret.unlink()
        folder.rmdir()


@pytest.mark.skipif(not ROOT, reason="the runner's own file is the command's when not root")
@pytest.mark.parametrize("level", ALL_LEVELS)
def test_hostile_read_of_root_only_files_is_refused(
    spill: Path, root_only_file: Path, level: Isolation
) -> None:
    """Run by root, the command reads neither a root-only file nor /etc/shadow, even
    when a config shows both read-only (neither is in the sandbox's view otherwise)."""
    capture = python(
        spill,
        f"""
        import errno
        for name in ({str(root_only_file)!r}, "/etc/shadow"):
            try:
                print("read", name, open(name).read()[:3])
            except OSError as e:
                print(errno.errorcode[e.errno], name)
        """,
        isolation=level,
        ro_binds=(str(root_only_file.parent), "/etc/shadow"),
    )
    assert capture.status is CaptureStatus.OK, capture.error
    output = read_output(capture).decode()
    assert "read" not in output
    assert output.split()[::2] == ["EACCES", "EACCES"]
    unnamed = python(spill, f"print(open({str(root_only_file)!r}).read())", isolation=level)
    assert unnamed.status is CaptureStatus.FAILED


@pytest.mark.parametrize("level", NAMESPACED)
def test_command_is_unprivileged_outside_its_namespaces(spill: Path, level: Isolation) -> None:
    """Inside it is uid 1000 mapped to an unprivileged outer uid (never 0), with no
    capabilities and no supplementary groups."""
    capture = python(
        spill,
        """
        import os
        print(open("/proc/self/uid_map").read().split())
        print(os.getgroups())
        caps = [l for l in open("/proc/self/status") if l.startswith(("CapEff", "CapPrm"))]
        print([l.split()[1] for l in caps])
        """,
        isolation=level,
    )
    assert capture.status is CaptureStatus.OK, capture.error
    uid_map, groups, caps = read_output(capture).decode().splitlines()
    outer = outer_ids()[0] if ROOT else os.geteuid()
    # Root's own mapping (0 -> 0) serves the helper's setup; the command is never uid 0.
    assert [str(SANDBOX_UID), str(outer), "1"] == eval(uid_map)[-3:]
    assert outer != 0
    assert groups in ("[]", f"[{SANDBOX_UID}]")
    assert caps == "['0000000000000000', '0000000000000000']"


@pytest.mark.parametrize("level", NAMESPACED)
def test_hostname_change_stays_inside(spill: Path, level: Isolation) -> None:
    """The run has its own UTS and IPC namespaces: its hostname is not the host's, it
    cannot set one, and the host's is unchanged."""
    host = socket.gethostname()
    namespaces = {name: os.readlink(f"/proc/self/ns/{name}") for name in ("uts", "ipc")}
    capture = python(
        spill,
        """
        import errno, os, socket
        print(socket.gethostname())
        print(os.readlink("/proc/self/ns/uts"), os.readlink("/proc/self/ns/ipc"))
        try:
            socket.sethostname(socket.gethostname())
            print("set")
        except OSError as e:
            print(errno.errorcode[e.errno])
        """,
        isolation=level,
    )
    assert capture.status is CaptureStatus.OK, capture.error
    name, ns, outcome = read_output(capture).decode().splitlines()
    assert name == "kernel-sandbox"
    assert ns.split() != [namespaces["uts"], namespaces["ipc"]]
    assert ns.split()[0] != namespaces["uts"]
    assert ns.split()[1] != namespaces["ipc"]
    assert outcome in REFUSED
    assert socket.gethostname() == host


@pytest.mark.parametrize("level", NAMESPACED)
def test_proc_is_masked_like_container_runtimes(spill: Path, level: Isolation) -> None:
    """runc's masked paths show nothing; its read-only paths are mounted read-only."""
    capture = python(
        spill,
        f"""
        import os
        for name in {list(MASKED_PATHS)!r}:
            if os.path.isdir(name):
                print(name, "dir", len(os.listdir(name)))
            elif os.path.exists(name):
                print(name, "file", len(open(name, "rb").read(64)))
        mounts = {{l.split()[4]: l.split()[5] for l in open("/proc/self/mountinfo")}}
        for name in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
            if name in mounts:
                print(name, "mount", mounts[name].split(",")[0])
        """,
        isolation=level,
    )
    assert capture.status is CaptureStatus.OK, capture.error
    lines = read_output(capture).decode().splitlines()
    for line in lines:
        _name, kind, value = line.split()
        if kind == "mount":
            assert value == "ro", line
        else:
            assert value == "0", line
    assert any(line.startswith("/proc/sys mount") for line in lines)


def test_mount_plan_shows_only_what_it_is_given() -> None:
    """The view is an allow-list: each entry once (a path below a shown one is not
    bound again), links stay links, the scratch root is hidden when a bound folder
    holds it; a relative, unprintable, /proc or /dev path, the host's root or /tmp is
    refused, however spelled."""
    entries = [("/usr", ""), ("/bin", "usr/bin"), ("/usr/lib/x", ""), ("/opt/tools", "")]
    plan = mount_plan(entries, tmp_bytes=1 << 20, hidden="/opt/tools/scratch")
    assert [s for s in plan if s[0] in ("bind", "symlink") and s[1][:5] != "/dev/"] == [
        ("symlink", "/bin", "usr/bin"),
        ("bind", "/opt/tools", "/opt/tools"),
        ("bind", "/usr", "/usr"),
    ]
    assert ("tmpfs", "/tmp", "mode=1777,size=1048576,nr_inodes=256") in plan
    assert plan[-1] == ("hide", "/opt/tools/scratch")
    assert mount_plan([], tmp_bytes=None, hidden="/x")[-1][0] == "readonly"
    for bad in (
        *("relative", "/proc/1", "/dev", "/a\nb", "/usr/../proc/1", "//dev/shm"),
        *("/", "//", "/tmp/..", "/tmp", "//tmp/."),
    ):
        with pytest.raises(ConfigError):
            mount_plan([(bad, "")], tmp_bytes=None, hidden="/x")


def test_seccomp_program_covers_known_architectures() -> None:
    """The unix-socket filter exists for x86_64 and aarch64 and ends allow/deny."""
    for machine in ("x86_64", "aarch64"):
        program = seccomp_program(machine)
        assert program is not None
        assert program[-1] == (0x06, 0, 0, 0x7FFF0000)
    assert seccomp_program("riscv64") is None


# ---------------------------------------------------------------------------
# Environment


CANARY = "KERNEL_TEST_CANARY"


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_runner_environment_is_absent(
    spill: Path, level: Isolation, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token in the runner's environment never reaches a run; named ones do."""
    monkeypatch.setenv(CANARY, "leaked-token")
    capture = run_sandboxed(
        SandboxSpec(command=("env",), isolation=level, env=(("NAMED", "yes"),), timeout_s=30),
        spill_dir=spill,
    )
    output = read_output(capture).decode()
    assert "leaked-token" not in output
    assert CANARY not in output
    assert "NAMED=yes" in output
    assert "KERNEL_RUN_INDEX=0" in output
    names = {line.split("=", 1)[0] for line in output.splitlines()}
    assert names <= {"PATH", "HOME", "TMPDIR", "LANG", "NAMED", "KERNEL_RUN_INDEX", "PWD"}


def test_corroborate_runs_do_not_see_the_runner_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kernel corroborate` gives its runs the minimal environment plus --env names."""
    monkeypatch.setenv(CANARY, "leaked-token")
    monkeypatch.setenv("PASSED_ON", "from-runner")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results" / "majority.txt"
    code = main(
        [
            "corroborate", "-n", "1", "--env", "PASSED_ON", "--env", "SET=here",
            "--majority-output", str(out), "--", "env",
        ]
    )  # fmt: skip
    capsys.readouterr()
    assert code == 0
    text = out.read_text()
    assert "leaked-token" not in text
    assert "PASSED_ON=from-runner" in text
    assert "SET=here" in text


def test_corroborate_api_environment_is_explicit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The library call adds only what ``env`` names."""
    monkeypatch.setenv(CANARY, "leaked-token")
    result = corroborate(["env"], runs=1, env={"ONLY": "this"})
    assert result.majority_output is not None
    assert b"leaked-token" not in result.majority_output
    assert b"ONLY=this" in result.majority_output


# ---------------------------------------------------------------------------
# Limits


def _applied(capture: Capture) -> dict[LimitKind, AppliedLimit]:
    return {applied.kind: applied for applied in capture.limits}


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_every_capture_records_its_limits(spill: Path, level: Isolation) -> None:
    """Each limit appears once, with its value and how it was applied."""
    limits = Limits(memory_bytes=1 << 30, writable_bytes=None)
    capture = python(spill, "pass", isolation=level, limits=limits)
    applied = _applied(capture)
    assert [a.kind for a in capture.limits] == list(LimitKind)
    # A root runner's namespaced run is held by a memory cgroup (shared memory too).
    memory = LimitMechanism.RLIMIT_PRIVATE
    if ROOT and level is not Isolation.COPY and Path("/sys/fs/cgroup/memory").is_dir():
        memory = LimitMechanism.CGROUP_V1
    assert applied[LimitKind.MEMORY] == AppliedLimit(
        kind=LimitKind.MEMORY, value=1 << 30, mechanism=memory
    )
    assert applied[LimitKind.WRITABLE].mechanism is LimitMechanism.NONE
    assert applied[LimitKind.OUTPUT].mechanism is LimitMechanism.RUNNER
    expected_tmp = LimitMechanism.NONE if level is Isolation.COPY else LimitMechanism.TMPFS
    assert applied[LimitKind.TMP].mechanism is expected_tmp
    assert capture.limit_hit is None
    assert Capture.from_dict(capture.to_dict()) == capture


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_memory_limit_refuses_a_large_allocation(spill: Path, level: Isolation) -> None:
    """Allocating past the memory limit fails inside the run; the host is untouched.
    An allocation refused before it was touched leaves no evidence: not a hit."""
    code = """
        try:
            block = bytearray(768 << 20)
            print("allocated")
        except MemoryError:
            print("refused")
        raise SystemExit(1)
    """
    small = python(spill, code, isolation=level, limits=Limits(memory_bytes=256 << 20))
    assert read_output_any(small) == b"refused\n"
    assert _applied(small)[LimitKind.MEMORY].value == 256 << 20
    assert small.status is CaptureStatus.FAILED, small.error
    assert small.limit_hit is None


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_memory_growth_to_the_limit_is_recorded(spill: Path, level: Isolation) -> None:
    """A run that grows until its allocations fail, and fails, is recorded as a memory
    hit: its peak resident memory reached the limit (the kernel's accounting)."""
    code = """
        blocks = []
        try:
            while True:
                blocks.append(b"x" * (1 << 20))
        except MemoryError:
            print("refused")
        raise SystemExit(1)
    """
    # A copy run is forked from this process and reports its peak from ours on: the
    # limit must lie above it for the run's own growth to be evidence.
    ours = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
    limit = max(256 << 20, ours + (256 << 20))
    capture = python(spill, code, isolation=level, limits=Limits(memory_bytes=limit))
    # A memory cgroup holds the whole run to the same limit: its OOM kill may come
    # before the process's own allocation is refused.
    killed = _applied(capture)[LimitKind.MEMORY].mechanism is LimitMechanism.CGROUP_V1
    assert read_output_any(capture) in ((b"refused\n", b"") if killed else (b"refused\n",))
    assert capture.status is CaptureStatus.LIMIT_EXCEEDED, capture.error
    assert capture.limit_hit is LimitKind.MEMORY
    assert capture.exit_code in ((1, -9) if killed else (1,))


@given(
    limit=st.integers(min_value=1, max_value=1 << 40),
    code=st.integers(min_value=-64, max_value=255),
    peak=st.integers(min_value=0, max_value=1 << 41),
    inherited=st.integers(min_value=0, max_value=1 << 41),
)
def test_memory_hit_needs_a_failure_and_an_own_peak_near_the_limit(
    limit: int, code: int, peak: int, inherited: int
) -> None:
    """A memory hit is recorded only for a failed run whose own peak (above what it
    inherited) reached 90 % of the limit; no limit, no hit."""
    hit = memory_hit(str(limit), code, peak, inherited)
    assert hit == (code != 0 and peak > inherited and peak >= MEMORY_EVIDENCE * limit)
    assert not memory_hit("", code, peak, inherited)


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_memory_near_the_limit_that_succeeds_is_no_hit(spill: Path, level: Isolation) -> None:
    """Using memory close to the limit is no hit when the run does not fail."""
    code = """
        block = b"x" * (240 << 20)
        print(len(block) >> 20)
    """
    capture = python(spill, code, isolation=level, limits=Limits(memory_bytes=256 << 20))
    assert capture.status is CaptureStatus.OK, capture.error
    assert capture.limit_hit is None


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_memory_limit_allows_address_space_reservations(spill: Path, level: Isolation) -> None:
    """A runtime that reserves a large address space (a JVM heap, V8's cage) still
    starts: only private writable memory counts against the limit."""
    code = """
        import mmap
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
        reserved = mmap.mmap(-1, 8 << 30, flags=flags, prot=mmap.PROT_READ)
        print("reserved", len(reserved) >> 30)
    """
    capture = python(spill, code, isolation=level, limits=Limits(memory_bytes=256 << 20))
    assert capture.status is CaptureStatus.OK, capture.error
    assert read_output(capture) == b"reserved 8\n"


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_fork_bomb_is_bounded(spill: Path, level: Isolation) -> None:
    """A run cannot hold more processes than its limit; the rest fail with EAGAIN."""
    capture = python(
        spill,
        """
        import errno, os, time
        children = 0
        try:
            for _ in range(200):
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                children += 1
            print("unbounded", children)
        except OSError as e:
            print(errno.errorcode[e.errno], children)
        """,
        isolation=level,
        limits=Limits(processes=16),
    )
    reason, children = read_output_any(capture).decode().split()
    assert reason == "EAGAIN"
    assert int(children) < 16
    if level is Isolation.COPY:
        # A copy run's processes leave its session unseen: no evidence, no hit.
        assert capture.status is CaptureStatus.OK, capture.error
        assert capture.limit_hit is None
    else:
        assert capture.status is CaptureStatus.LIMIT_EXCEEDED, capture.error
        assert capture.limit_hit is LimitKind.PROCESSES
        assert capture.exit_code == 0


@pytest.mark.parametrize("level", NAMESPACED)
def test_processes_below_the_limit_are_no_hit(spill: Path, level: Isolation) -> None:
    """Children alive when the command ends, one short of the limit: no hit."""
    capture = python(
        spill,
        """
        import os, time
        for _ in range(14):
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
        print("forked")
        """,
        isolation=level,
        limits=Limits(processes=16),
    )
    assert capture.status is CaptureStatus.OK, capture.error
    assert capture.limit_hit is None


@pytest.mark.parametrize("level", NAMESPACED)
def test_cpu_loop_is_killed_and_recorded(spill: Path, level: Isolation) -> None:
    """A CPU loop is stopped at the CPU limit: status limit_exceeded, reason cpu."""
    capture = python(spill, "while True: pass", isolation=level, limits=Limits(cpu_seconds=1))
    assert capture.status is CaptureStatus.LIMIT_EXCEEDED, capture.error
    assert capture.limit_hit is LimitKind.CPU
    assert capture.output_digest is None


def test_full_writable_layer_is_recorded(spill: Path) -> None:
    """Writing past the writable-layer size is ENOSPC in the run, recorded as writable."""
    capture = python(
        spill,
        """
        import errno
        try:
            with open("big.bin", "wb") as handle:
                for _ in range(64):
                    handle.write(bytes(64 << 10))
        except OSError as e:
            print(errno.errorcode[e.errno])
        """,
        isolation=Isolation.OVERLAY,
        limits=Limits(writable_bytes=1 << 20),
    )
    assert read_output_any(capture) == b"ENOSPC\n"
    assert capture.status is CaptureStatus.LIMIT_EXCEEDED
    assert capture.limit_hit is LimitKind.WRITABLE


@pytest.mark.parametrize("level", NAMESPACED)
def test_full_tmp_is_recorded(spill: Path, level: Isolation) -> None:
    """Writing past the /tmp size is ENOSPC in the run, recorded as tmp."""
    capture = python(
        spill,
        """
        import errno
        try:
            with open("/tmp/big.bin", "wb") as handle:
                for _ in range(64):
                    handle.write(bytes(64 << 10))
        except OSError as e:
            print(errno.errorcode[e.errno])
        """,
        isolation=level,
        limits=Limits(tmp_bytes=1 << 20),
    )
    assert read_output_any(capture) == b"ENOSPC\n"
    assert capture.status is CaptureStatus.LIMIT_EXCEEDED
    assert capture.limit_hit is LimitKind.TMP


def read_output_any(capture: Capture) -> bytes:
    """stdout of any run (a limit_exceeded run has no output digest)."""
    return Path(capture.stdout_path).read_bytes()


limit_values = st.none() | st.integers(min_value=1, max_value=2**53 - 1)


@given(
    st.builds(
        Limits,
        memory_bytes=limit_values,
        processes=limit_values,
        cpu_seconds=limit_values,
        output_bytes=limit_values,
        writable_bytes=limit_values,
        tmp_bytes=limit_values,
    )
)
def test_limits_round_trip(limits: Limits) -> None:
    """For every Limits: from_dict(to_dict) is the identity."""
    assert Limits.from_dict(limits.to_dict()) == limits


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "1", 2**53])
def test_limits_refuse_non_positive_or_mistyped_values(bad: object) -> None:
    """A limit is a positive integer or null; anything else names the field."""
    document = Limits().to_dict()
    document["memory_bytes"] = bad
    with pytest.raises(RecordError, match="memory_bytes"):
        Limits.from_dict(document)


def test_errno_names_used_here_exist() -> None:
    """The refusal names the tests compare against are real errno names."""
    assert {errno.errorcode[e] for e in (errno.EACCES, errno.EROFS, errno.EPERM)} == REFUSED


def test_the_helper_server_and_its_sandboxes_hold_none_of_the_runners_environment(
    tmp_path: Path,
) -> None:
    """The helper server and what it forks (prepared sandboxes, their PID 1) start with
    no variable of the runner's but PATH: a command with the runner's uid that reads
    ``/proc/1/environ`` finds none of the runner's secrets there."""
    code = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from kernel.effects.sandbox import SandboxSpec, run_sandboxed
        from kernel.effects.sandbox.server import helper_servers
        run_sandboxed(SandboxSpec(command=("true",)), spill_dir=Path({str(tmp_path)!r}))
        parents = {{}}
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                status = Path("/proc", entry, "status").read_text()
            except OSError:
                continue
            ppid = next(l.split()[1] for l in status.splitlines() if l.startswith("PPid:"))
            parents[int(entry)] = int(ppid)
        servers = helper_servers()
        def under(pid):
            while pid > 1:
                if pid in servers:
                    return True
                pid = parents.get(pid, 0)
            return False
        tree = [pid for pid in parents if under(pid)]
        leaked = []
        for pid in tree:
            try:
                if b"KERNEL_RUNNER_CANARY" in Path("/proc", str(pid), "environ").read_bytes():
                    leaked.append(pid)
            except OSError:
                pass
        print(len(tree), leaked)
    """)
    env = {**os.environ, "KERNEL_RUNNER_CANARY": "secret"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    count, leaked = done.stdout.split(maxsplit=1)
    assert int(count) >= 2  # the server and at least one prepared sandbox's processes
    assert leaked.strip() == "[]"
