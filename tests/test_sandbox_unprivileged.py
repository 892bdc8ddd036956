"""The sandbox run by an unprivileged user (CI is root: the test creates the user),
and its side doors tried under both runners (root and that user).

An unprivileged runner maps the command to its own uid through an unprivileged user
namespace; the maps are written by the helper from the parent namespace. This file
runs a runner as a fresh system user and attacks the same promises as root's tests;
the side-door tests run one runner script as root and as the user, each in its own
session keyring, against sockets and keys of the test itself (never the real ones).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = os.geteuid() == 0
USER = "kernelsbx"
SUB_USER = "kernelsbxsub"
"""A second user, granted subordinate ids (its own name: a concurrent run of these
tests by another checkout keeps its `USER` without them)."""
SUB_START = 1_700_000_000
"""The first of its subordinate uids and gids: far from useradd's ranges and from
the root runner's fallback outer id."""
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")

pytestmark = pytest.mark.skipif(
    not ROOT or SYSTEM_PYTHON is None or shutil.which("useradd") is None,
    reason="creating a user needs root and useradd; the runner needs a system python3",
)


@pytest.fixture(scope="module")
def user() -> Iterator[pwd.struct_passwd]:
    """An unprivileged system user without a home (created once, removed after)."""
    created = False
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            check=True,
            capture_output=True,
        )
        created = True
        entry = pwd.getpwnam(USER)
    try:
        yield entry
    finally:
        scratch = Path(tempfile.gettempdir()) / f"kernel-sandboxes-{entry.pw_uid}"
        shutil.rmtree(scratch, ignore_errors=True)
        if created:
            subprocess.run(["userdel", USER], check=False, capture_output=True)


def _drop_lines(path: str, line: str) -> None:
    """Remove exactly ``line`` from ``path`` (only what this test added)."""
    with open(path) as handle:
        kept = [x for x in handle.read().splitlines(keepends=True) if x.strip() != line]
    with open(path, "w") as handle:
        handle.writelines(kept)


@pytest.fixture(scope="module")
def sub_user() -> Iterator[pwd.struct_passwd]:
    """An unprivileged user with 65536 subordinate uids and gids from `SUB_START`: its
    lines are added to /etc/subuid and /etc/subgid and removed after (nothing else of
    those files is touched); the user is created and removed like `user`."""
    assert shutil.which("newuidmap"), "install uidmap (newuidmap, newgidmap)"
    assert shutil.which("newgidmap"), "install uidmap (newuidmap, newgidmap)"
    for start in (SUB_START, SUB_START + 65535):
        with pytest.raises(KeyError):
            pwd.getpwuid(start)  # the range names nobody
    created = False
    try:
        entry = pwd.getpwnam(SUB_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SUB_USER],
            check=True,
            capture_output=True,
        )
        created = True
        entry = pwd.getpwnam(SUB_USER)
    line = f"{SUB_USER}:{SUB_START}:65536"
    try:
        for path in ("/etc/subuid", "/etc/subgid"):
            with open(path, "a") as handle:
                handle.write(line + "\n")
        yield entry
    finally:
        for path in ("/etc/subuid", "/etc/subgid"):
            _drop_lines(path, line)
        scratch = Path(tempfile.gettempdir()) / f"kernel-sandboxes-{entry.pw_uid}"
        shutil.rmtree(scratch, ignore_errors=True)
        if created:
            subprocess.run(["userdel", SUB_USER], check=False, capture_output=True)


@pytest.fixture
def site_paths() -> Iterator[str]:
    """This checkout's kernel and its runtime dependencies, copied where the
    unprivileged user can read them (a checkout or venv may sit in a 0700 folder)."""
    import attr
    import attrs
    import orjson

    top = Path(tempfile.mkdtemp(prefix="kernel-unpriv-site-", dir="/tmp"))
    try:
        top.chmod(0o755)
        sources = [Path(__file__).resolve().parent.parent / "src" / "kernel"]
        sources += [Path(str(m.__file__)).resolve().parent for m in (attr, attrs, orjson)]
        for source in sources:
            shutil.copytree(source, top / source.name, ignore=shutil.ignore_patterns("*.pyc"))
        yield str(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


RUNNER = textwrap.dedent("""
    import json, sys, tempfile
    from pathlib import Path
    from kernel.corroboration.consensus import CaptureMode, Isolation
    from kernel.effects.sandbox import SandboxSpec, read_output, run_sandboxed
    base = Path(tempfile.mkdtemp())
    (base / "tree").mkdir()
    (base / "tree" / "f.txt").write_text("v1\\n")
    spill = base / "spill"
    spill.mkdir()
    probe = (
        "import errno, os\\n"
        "print(open('/proc/self/uid_map').read().split())\\n"
        "v = open('/proc/sys/kernel/hostname').read()\\n"
        "try:\\n"
        "    open('/proc/sys/kernel/hostname', 'w').write(v)\\n"
        "    print('wrote')\\n"
        "except OSError as e:\\n"
        "    print(errno.errorcode[e.errno])\\n"
        "open('f.txt', 'a').write('v2\\\\n')\\n"
    )
    capture = run_sandboxed(
        SandboxSpec(command=(sys.executable, "-c", probe), baseline=str(base / "tree"),
                    capture=CaptureMode.PATCH, timeout_s=60),
        spill_dir=spill,
    )
    patch = read_output(capture).decode() if capture.output_path else ""
    print(json.dumps({
        "status": str(capture.status), "isolation": str(capture.isolation),
        "error": capture.error, "stdout": Path(capture.stdout_path).read_text(),
        "patch": patch, "baseline": (base / "tree" / "f.txt").read_text(),
    }))
""")


def test_unprivileged_runner_maps_the_command_to_itself(
    user: pwd.struct_passwd, tmp_path: Path, site_paths: str
) -> None:
    """Run by an unprivileged user, the command is that user outside (never root),
    cannot write kernel settings, and the baseline stays unchanged."""
    work = tmp_path / "work"
    work.mkdir()
    os.chown(work, user.pw_uid, user.pw_gid)
    result = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", RUNNER],
        cwd=work,
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": site_paths, "TMPDIR": "/tmp"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["status"] == "ok", outcome
    assert outcome["isolation"] == "overlay", outcome
    uid_map, proc_sys = outcome["stdout"].splitlines()
    assert uid_map == str(["1000", str(user.pw_uid), "1"])
    assert proc_sys in ("EACCES", "EROFS", "EPERM")
    assert "+v2" in outcome["patch"]
    assert outcome["baseline"] == "v1\n"


# ---------------------------------------------------------------------------
# Side doors, as root and as an unprivileged runner

SIDE_RUNNER = textwrap.dedent("""
    import ctypes, json, os, sys, tempfile
    from pathlib import Path
    from kernel.corroboration.consensus import CaptureMode, Isolation
    from kernel.effects.sandbox import Limits, SandboxSpec, run_sandboxed
    request = json.loads(sys.argv[1])
    base = Path(tempfile.mkdtemp())
    for name, target in request.get("links", {}).items():
        os.symlink(target, base / name)  # the baseline's own links, made by its owner
    libc = ctypes.CDLL(None, use_errno=True)
    # This runner's own session keyring, holding one throwaway key.
    assert libc.syscall(250, 1, b"kernel-test") > 0  # keyctl(JOIN_SESSION_KEYRING)
    key = libc.syscall(248, b"user", b"kernel-test-key", b"secret", 6, -3)  # add_key
    assert key > 0
    level = request.get("isolation")
    # The runner's pid for a probe at copy (no PID namespace: it aims at this run alone).
    runner = str(os.getpid()) if level == "copy" else "0"
    command = [
        arg.replace("KEYID", str(key)).replace("RUNNERPID", runner) for arg in request["command"]
    ]
    spill = Path(tempfile.mkdtemp())
    capture = run_sandboxed(
        SandboxSpec(command=tuple(command), ro_binds=tuple(request.get("ro_binds", ())),
                    network=request.get("network", False), timeout_s=60, baseline=str(base),
                    capture=CaptureMode(request.get("capture", "stdout")),
                    isolation=None if level is None else Isolation(level),
                    limits=Limits(**request.get("limits", {}))),
        spill_dir=spill,
    )
    print(json.dumps({
        "status": str(capture.status), "hit": capture.limit_hit, "error": capture.error,
        "exit_code": capture.exit_code, "isolation": str(capture.isolation),
        "stdout": Path(capture.stdout_path).read_text(errors="replace")[-2000:],
        "limits": {str(a.kind): str(a.mechanism) for a in capture.limits},
        "command_uid": capture.command_uid,
    }))
""")

RUNNERS = ("root", "unprivileged", "subordinate")


@pytest.fixture(params=RUNNERS)
def side_runner(
    request: pytest.FixtureRequest,
    user: pwd.struct_passwd,
    sub_user: pwd.struct_passwd,
    site_paths: str,
    tmp_path: Path,
) -> Callable[..., dict[str, Any]]:
    """Run one sandbox through `SIDE_RUNNER` as root, as the unprivileged user, or as
    the unprivileged user with subordinate ids."""
    work = tmp_path / "work"
    work.mkdir()
    as_user = request.param != "root"
    if request.param == "subordinate":
        user = sub_user
    if as_user:
        os.chown(work, user.pw_uid, user.pw_gid)

    def side_run(**spec: object) -> dict[str, Any]:
        result = subprocess.run(
            [str(SYSTEM_PYTHON), "-c", SIDE_RUNNER, json.dumps(spec)],
            cwd=work,
            user=user.pw_uid if as_user else None,
            group=user.pw_gid if as_user else None,
            extra_groups=[] if as_user else None,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": site_paths, "TMPDIR": "/tmp"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        outcome: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
        outcome["runner"] = request.param
        return outcome

    return side_run


SOCKET_PROBE = textwrap.dedent("""
    import ctypes, errno, json, socket, sys
    stream_path, dgram_path = sys.argv[1], sys.argv[2]
    out = {}
    def attempt(name, door):
        try:
            door()
            out[name] = "reached"
        except OSError as e:
            out[name] = errno.errorcode.get(e.errno, str(e.errno))
    def pair(kind):
        return socket.socketpair(socket.AF_UNIX, kind)[0]
    attempt("socket", lambda: socket.socket(socket.AF_UNIX).connect(stream_path))
    attempt("dgram_connect", lambda: pair(socket.SOCK_DGRAM).connect(dgram_path))
    attempt("dgram_sendto", lambda: pair(socket.SOCK_DGRAM).sendto(b"x", dgram_path))
    attempt("stream_connect", lambda: pair(socket.SOCK_STREAM).connect(stream_path))
    attempt("seqpacket_sendto", lambda: pair(socket.SOCK_SEQPACKET).sendto(b"x", dgram_path))
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    ring = libc.syscall(425, 4, params)  # io_uring_setup: its IORING_OP_SOCKET makes sockets
    out["io_uring"] = "reached" if ring >= 0 else errno.errorcode[ctypes.get_errno()]
    print(json.dumps(out, sort_keys=True))
""")


@pytest.fixture
def listening() -> Iterator[tuple[Path, socket.socket, socket.socket]]:
    """A folder of the test, open to everyone, holding a stream and a datagram unix
    socket the test listens on (the stand-ins for an ssh-agent or docker.sock)."""
    folder = Path(tempfile.mkdtemp(prefix="kernel-unix-", dir="/tmp"))
    stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        folder.chmod(0o755)
        stream.bind(str(folder / "agent.sock"))
        dgram.bind(str(folder / "dgram.sock"))
        for name in ("agent.sock", "dgram.sock"):
            (folder / name).chmod(0o777)  # only the sandbox can refuse a connection
        stream.listen(4)
        stream.settimeout(0.2)
        dgram.settimeout(0.2)
        yield folder, stream, dgram
    finally:
        stream.close()
        dgram.close()
        shutil.rmtree(folder)


def _untouched(stream: socket.socket, dgram: socket.socket) -> bool:
    for attempt in (stream.accept, lambda: dgram.recv(16)):
        try:
            attempt()
        except TimeoutError:
            continue
        return False
    return True


def test_host_unix_sockets_are_unreachable_by_any_syscall(
    side_runner: Callable[..., dict[str, Any]],
    listening: tuple[Path, socket.socket, socket.socket],
) -> None:
    """A unix socket of the host is out of reach through socket(), a datagram
    socketpair's connect/sendto and io_uring: absent from the view, and refused by
    the filter when a config shows its folder, also with network (which asks for IP,
    never the host's unix sockets)."""
    folder, stream, dgram = listening
    command = [str(SYSTEM_PYTHON), "-c", SOCKET_PROBE]
    command += [str(folder / "agent.sock"), str(folder / "dgram.sock")]
    # A datagram pair is refused outright; a stream or seqpacket pair is connected
    # already (connect and an addressed send fail whatever the path).
    refused = {"dgram_connect": "EACCES", "dgram_sendto": "EACCES", "io_uring": "EPERM"}
    refused["socket"] = "EACCES"
    for ro_binds in ([], [str(folder)]):
        outcome = side_runner(command=command, ro_binds=ro_binds)
        assert outcome["status"] == "ok", outcome
        found = json.loads(outcome["stdout"])
        assert "reached" not in found.values(), found
        assert {name: found[name] for name in refused} == refused
    assert _untouched(stream, dgram)
    networked = side_runner(command=command, ro_binds=[str(folder)], network=True)
    found = json.loads(networked["stdout"])
    assert "reached" not in found.values(), found
    assert {name: found[name] for name in refused} == refused
    assert _untouched(stream, dgram)


KEY_PROBE = textwrap.dedent("""
    import ctypes, errno, json, sys
    libc = ctypes.CDLL(None, use_errno=True)
    key = int(sys.argv[1])
    def call(*args):
        ctypes.set_errno(0)
        rc = libc.syscall(*args)
        return rc if rc >= 0 else errno.errorcode[ctypes.get_errno()]
    buffer = ctypes.create_string_buffer(64)
    print(json.dumps({
        "read": call(250, 11, key, buffer, 64),  # keyctl(READ) of the runner's key
        "session": call(250, 0, -3, 0),  # keyctl(GET_KEYRING_ID, session)
        "add": call(248, b"user", b"planted", b"x", 1, -3),  # add_key to the session
        "request": call(249, b"user", b"kernel-test-key", None, 0),
        "proc_keys": open("/proc/keys").read(),
    }, sort_keys=True))
""")


def test_runner_keys_are_out_of_reach(side_runner: Callable[..., dict[str, Any]]) -> None:
    """The runner's session keyring (holding a throwaway key of this test) is neither
    readable nor writable from a sandbox: the keyring calls are refused."""
    outcome = side_runner(command=[str(SYSTEM_PYTHON), "-c", KEY_PROBE, "KEYID"])
    assert outcome["status"] == "ok", outcome
    # Without subordinate ids an unprivileged runner's evidence says so.
    expected = {
        "root": "outer_unprivileged",
        "unprivileged": "same_uid_as_runner",
        "subordinate": "subordinate",
    }
    assert outcome["command_uid"] == expected[outcome["runner"]]
    assert json.loads(outcome["stdout"]) == {
        "add": "EPERM",
        "proc_keys": "",
        "read": "EPERM",
        "request": "EPERM",
        "session": "EPERM",
    }


VERDICT_PROBE = textwrap.dedent("""
    import errno, json, os, signal, sys
    runner = int(sys.argv[1])  # 0: a PID namespace, whose every process is this run's
    me = os.getpid()
    def of_this_run(pid):
        # At copy (the host's processes shown) only the runner's descendants.
        while runner and pid > 1:
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    pid = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                return False
            if pid == runner:
                return True
        return not runner
    def attempt(door):
        try:
            door()
            return "reached"
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e.errno))
    def forge(path):
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"exit 0\\ndone\\n")  # the status a passing run reports
        finally:
            os.close(fd)
    found = {}
    for name in sorted(os.listdir("/proc")):
        pid = int(name) if name.isdigit() else 0
        if pid in (0, me, runner) or not of_this_run(pid):
            continue
        found[f"{pid} mem"] = attempt(lambda: open(f"/proc/{pid}/mem", "rb").close())
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError as e:
            found[f"{pid} fds"] = errno.errorcode[e.errno]
            continue
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            found[path] = attempt(lambda: os.readlink(path).startswith("pipe:") and forge(path))
    if runner:
        found["runner mem"] = attempt(lambda: open(f"/proc/{runner}/mem", "rb").close())
    else:  # PID 1 is the sandbox's; a handled signal would end it
        found["sigint"] = attempt(lambda: os.kill(1, signal.SIGINT))
    print(json.dumps(found, sort_keys=True), flush=True)
    sys.exit(3)
""")


@pytest.mark.parametrize("level", ["overlay", "namespace_copy", "copy"])
def test_no_verdict_channel_is_within_the_commands_reach(
    side_runner: Callable[..., dict[str, Any]], level: str
) -> None:
    """A command opens every descriptor it can see of the run's other processes (PID 1,
    at copy the runner's descendants) to write a passing status there, opens their
    memory as a tracer would, and signals PID 1: every open is refused and the run's
    recorded result is the real one (exit 3), at every level and for every runner.
    The command is never the runner's own uid where another id exists; a copy run of
    an unprivileged runner is (no user namespace: no other id), and its evidence says
    so."""
    outcome = side_runner(
        command=[str(SYSTEM_PYTHON), "-c", VERDICT_PROBE, "RUNNERPID"], isolation=level
    )
    assert (outcome["status"], outcome["exit_code"]) == ("failed", 3), outcome
    assert outcome["isolation"] == level
    found = json.loads(outcome["stdout"])
    runner_mem = found.pop("runner mem", None)
    found.pop("sigint", None)  # sent or refused: either way the result above is real
    assert "reached" not in found.values(), found
    expected = {"root": "outer_unprivileged", "unprivileged": "same_uid_as_runner"}
    expected["subordinate"] = "same_uid_as_runner" if level == "copy" else "subordinate"
    assert outcome["command_uid"] == expected[outcome["runner"]], outcome
    if outcome["runner"] == "root" and level == "copy":
        assert runner_mem in ("EACCES", "EPERM"), found


LINK_PROBE = (
    "for link in absolute relative; do cat $link || echo absent; "
    "(echo changed > $link) 2>/dev/null && echo wrote || echo refused; done; "
    "cat secret-link 2>/dev/null || echo unreadable"
)


@pytest.mark.parametrize("level", ["overlay", "namespace_copy"])
def test_baseline_links_out_of_the_tree_stay_in_the_view(
    side_runner: Callable[..., dict[str, Any]], level: str
) -> None:
    """The baseline's symlinks to host files (absolute, and relative ones climbing out
    of the tree) are copied as links, for every runner: at namespace_copy the copy a
    subordinate id's PID 1 makes on its tmpfs too. They resolve in the view: a shown
    file is read and never written (the host's is unchanged), a 0600 file of root's
    stays unreadable."""
    folder = Path(tempfile.mkdtemp(prefix="kernel-links-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        (folder / "public").write_text("public\n")
        (folder / "public").chmod(0o666)  # only the sandbox can refuse the write
        (folder / "secret").write_text("secret\n")
        (folder / "secret").chmod(0o600)
        links = {
            "absolute": str(folder / "public"),
            "relative": "../" * 12 + str(folder / "public").lstrip("/"),
            "secret-link": str(folder / "secret"),
        }
        outcome = side_runner(
            command=["sh", "-c", LINK_PROBE], ro_binds=[str(folder)], links=links, isolation=level
        )
        assert outcome["status"] == "ok", outcome
        lines = outcome["stdout"].splitlines()
        assert lines == ["public", "refused", "public", "refused", "unreadable"], outcome
        assert (folder / "public").read_text() == "public\n"
    finally:
        shutil.rmtree(folder)


SHARED_MEMORY = {
    "mapping": "import mmap\nm = mmap.mmap(-1, 1 << 30)\n"
    "for i in range(0, 1 << 30, 4096):\n    m[i] = 1\nprint('survived')",
    "memfd": "import os\nfd = os.memfd_create('x')\n"
    "for i in range(0, 1 << 30, 1 << 20):\n    os.pwrite(fd, bytes(1 << 20), i)\nprint('survived')",
}


@pytest.mark.parametrize("kind", sorted(SHARED_MEMORY))
def test_shared_memory_past_the_limit_is_a_memory_hit(
    side_runner: Callable[..., dict[str, Any]], kind: str
) -> None:
    """1 GiB of shared memory (an anonymous shared mapping, a memfd) under a 128 MiB
    limit: where a memory cgroup holds the limit (a root runner) the run is killed
    and recorded as a memory hit; elsewhere the recorded mechanism says shared memory
    is not covered."""
    outcome = side_runner(
        command=[str(SYSTEM_PYTHON), "-c", SHARED_MEMORY[kind]],
        limits={"memory_bytes": 128 << 20},
    )
    if outcome["limits"]["memory"] == "cgroup_v1":
        assert outcome["status"] == "limit_exceeded", outcome
        assert outcome["hit"] == "memory"
        assert "survived" not in outcome["stdout"]
    else:
        assert outcome["limits"]["memory"] == "rlimit_private", outcome


FILLERS = {
    "writable": ("files", "writable_bytes"),
    "tmp": ("/tmp/files", "tmp_bytes"),
}


@pytest.mark.parametrize("layer", sorted(FILLERS))
def test_many_empty_files_hit_the_inode_limit(
    side_runner: Callable[..., dict[str, Any]], layer: str
) -> None:
    """Empty files cost no bytes but an inode each: 300,000 of them in a 64 MiB layer
    hit that layer's limit (its tmpfs has one inode per 4 KiB)."""
    folder, field = FILLERS[layer]
    probe = (
        f"import errno, os\nos.makedirs({folder!r})\n"
        "try:\n"
        f"    for i in range(300000):\n        open(f'{folder}/{{i}}', 'w').close()\n"
        "except OSError as e:\n    print(errno.errorcode[e.errno])\n"
    )
    outcome = side_runner(command=[str(SYSTEM_PYTHON), "-c", probe], limits={field: 64 << 20})
    assert outcome["status"] == "limit_exceeded", outcome
    assert outcome["hit"] == layer
    assert outcome["stdout"] == "ENOSPC\n"


def test_stdout_flood_and_sparse_file_are_limit_hits(
    side_runner: Callable[..., dict[str, Any]],
) -> None:
    """A stdout flood is an output hit; a 100 GiB sparse file in the tree is a
    writable hit before any diff reads it; never a sandbox error."""
    for capture in ("stdout", "patch"):
        flood = side_runner(
            command=["sh", "-c", "yes"], limits={"output_bytes": 1 << 20}, capture=capture
        )
        assert (flood["status"], flood["hit"]) == ("limit_exceeded", "output"), flood
    sparse = side_runner(
        command=["sh", "-c", "truncate -s 100G big.bin"],
        limits={"writable_bytes": 64 << 20},
        capture="patch",
    )
    assert (sparse["status"], sparse["hit"]) == ("limit_exceeded", "writable"), sparse


def test_a_namespace_copy_of_subordinate_ids_holds_the_writable_limit(
    side_runner: Callable[..., dict[str, Any]],
) -> None:
    """At namespace_copy a subordinate id's tree is a tmpfs of the run: 2 MiB written
    past a 1 MiB writable limit is a writable hit; the other runners' copies are host
    folders, without that limit (recorded ``none``)."""
    outcome = side_runner(
        command=["sh", "-c", "head -c 2097152 /dev/zero > big.bin"],
        limits={"writable_bytes": 1 << 20},
        isolation="namespace_copy",
        capture="patch",
    )
    if outcome["runner"] == "subordinate":
        assert (outcome["status"], outcome["hit"]) == ("limit_exceeded", "writable"), outcome
        assert outcome["limits"]["writable"] == "tmpfs"
    else:
        assert outcome["status"] == "ok", outcome
        assert outcome["limits"]["writable"] == "none"


SUB_RUNNER = textwrap.dedent("""
    import json, sys, tempfile
    from pathlib import Path
    from kernel.corroboration.consensus import CaptureMode, Isolation
    from kernel.effects.sandbox import Limits, SandboxSpec, read_output, run_sandboxed
    shown, level = sys.argv[1], Isolation(sys.argv[2])
    base = Path(tempfile.mkdtemp())
    (base / "tree" / "sub").mkdir(parents=True)
    (base / "tree" / "f.txt").write_text("v1\\n")
    (base / "tree" / "sub" / "g.txt").write_text("g1\\n")
    # Larger than the writable limit, untouched: a subordinate id's copy of it is no hit.
    (base / "tree" / "big.bin").write_bytes(bytes(2 << 20))
    spill = base / "spill"
    spill.mkdir()
    probe = (
        "import errno, os, sys\\n"
        "print(' '.join(open('/proc/self/uid_map').read().split()))\\n"
        "for name in ('public', 'secret'):\\n"
        "    try:\\n"
        "        print(name, open(sys.argv[1] + '/' + name).read().strip())\\n"
        "    except OSError as e:\\n"
        "        print(name, errno.errorcode[e.errno])\\n"
        "open('f.txt', 'a').write('v2\\\\n')\\n"
        "open('sub/g.txt', 'w').write('g2\\\\n')\\n"
        "open('sub/new.txt', 'w').write('n\\\\n')\\n"
    )
    capture = run_sandboxed(
        SandboxSpec(command=(sys.executable, "-c", probe, shown), ro_binds=(shown,),
                    baseline=str(base / "tree"), capture=CaptureMode.PATCH, timeout_s=60,
                    limits=Limits(writable_bytes=1 << 20), isolation=level),
        spill_dir=spill,
    )
    print(json.dumps({
        "status": str(capture.status), "error": capture.error,
        "command_uid": capture.command_uid, "isolation": str(capture.isolation),
        "limits": {str(a.kind): str(a.mechanism) for a in capture.limits},
        "stdout": Path(capture.stdout_path).read_text(),
        "patch": read_output(capture).decode() if capture.output_path else "",
        "baseline": sorted(str(p.relative_to(base / "tree")) + ":" + p.read_text()
                           for p in (base / "tree").rglob("*.txt")),
    }))
""")


def _run_as(
    entry: pwd.struct_passwd, work: Path, site_paths: str, shown: Path, level: str
) -> dict[str, Any]:
    result = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", SUB_RUNNER, str(shown), level],
        cwd=work,
        user=entry.pw_uid,
        group=entry.pw_gid,
        extra_groups=[],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": site_paths, "TMPDIR": "/tmp"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    outcome: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return outcome


@pytest.mark.parametrize("level", ["overlay", "namespace_copy"])
def test_subordinate_ids_keep_the_runners_own_files_out_of_reach(
    user: pwd.struct_passwd,
    sub_user: pwd.struct_passwd,
    tmp_path: Path,
    site_paths: str,
    level: str,
) -> None:
    """A runner with subordinate ids runs its command as the first of them, at both
    namespaced levels: a 0600 file of the runner in a folder the sandbox shows is
    unreadable to the command (a 0644 one is read), the command still owns its tree
    (edits in place, in a subfolder, new files), and the run is otherwise what it is
    for a runner without them, whose command reads that file (a baseline file larger
    than the writable limit, copied into the writable layer for the command, is no
    limit hit). Its namespace_copy tree is a tmpfs of the run, under the writable
    limit; a runner without them copies to a host folder, without that limit."""
    outcomes = {}
    for name, entry in (("subordinate", sub_user), ("plain", user)):
        work = tmp_path / name
        work.mkdir()
        # The runner's own folder where it can reach it (pytest's folders are root's).
        shown = Path(tempfile.mkdtemp(prefix="kernel-shown-", dir="/tmp"))
        try:
            shown.chmod(0o755)
            (shown / "public").write_text("open\n")
            (shown / "secret").write_text("runner key\n")
            (shown / "secret").chmod(0o600)
            for path in (work, shown, shown / "public", shown / "secret"):
                os.chown(path, entry.pw_uid, entry.pw_gid)
            outcomes[name] = _run_as(entry, work, site_paths, shown, level)
        finally:
            shutil.rmtree(shown)
    sub, plain = outcomes["subordinate"], outcomes["plain"]
    assert sub["status"] == plain["status"] == "ok", outcomes
    assert sub["isolation"] == plain["isolation"] == level
    assert sub["limits"]["writable"] == "tmpfs"
    assert plain["limits"]["writable"] == ("tmpfs" if level == "overlay" else "none")
    assert (sub["command_uid"], plain["command_uid"]) == ("subordinate", "same_uid_as_runner")
    sub_map, *sub_reads = sub["stdout"].splitlines()
    plain_map, *plain_reads = plain["stdout"].splitlines()
    assert sub_map == f"0 {sub_user.pw_uid} 1 1000 {SUB_START} 1"
    assert plain_map == f"1000 {user.pw_uid} 1"
    assert sub_reads == ["public open", "secret EACCES"]
    assert plain_reads == ["public open", "secret runner key"]
    assert sub["patch"] == plain["patch"]
    for change in ("+v2", "+g2", "+n"):
        assert change in sub["patch"]
    assert sub["baseline"] == plain["baseline"] == ["f.txt:v1\n", "sub/g.txt:g1\n"]
