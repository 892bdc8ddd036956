"""What the start-up work (ADR-0005 section 7) changes must leave a run as it was.

A prepared sandbox waits with long time slices while it is prepared and short ones once
its PID 1 and command process wait for their run (they are on the run's path); the
command itself runs with the kernel's default slice, as it would outside. The view's
folders are made once per build, and one mounted over is made again when a later step
needs it.
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import struct
import threading
from pathlib import Path
from typing import NoReturn

import pytest

from kernel.corroboration.consensus import CaptureStatus, Isolation
from kernel.effects.sandbox import (
    Limits,
    SandboxSpec,
    nslimits,
    nsview,
    read_output,
    run_sandboxed,
)
from kernel.effects.sandbox import server as sandbox_server
from kernel.effects.sandbox.nsserve import DEPTH

_LIBC = ctypes.CDLL(None, use_errno=True)
_SCHED_GETATTR = {"x86_64": 315, "aarch64": 275}.get(os.uname().machine)
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")


def _slice_of(tid: int = 0) -> int:
    """The time slice (ns) the kernel gives thread ``tid`` (0: this one)."""
    assert _SCHED_GETATTR is not None
    buffer = ctypes.create_string_buffer(56)
    assert _LIBC.syscall(_SCHED_GETATTR, tid, buffer, 56, 0) == 0, ctypes.get_errno()
    return int(struct.unpack_from("=IIQiIQ", buffer.raw)[5])


def _in_a_thread(work: object) -> object:
    """``work()`` on a thread of its own (a slice is a thread's): its result."""
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(work()))  # type: ignore[operator]
    thread.start()
    thread.join()
    return result[0]


def _default_slice() -> int:
    nslimits.slice_ns(0)
    return _slice_of()


def _custom_slices() -> bool:
    def probe() -> bool:
        nslimits.slice_ns(nslimits.SHORT_SLICE)
        return _slice_of() == nslimits.SHORT_SLICE

    return _SCHED_GETATTR is not None and bool(_in_a_thread(probe))


needs_slices = pytest.mark.skipif(
    not _custom_slices(), reason="this kernel gives a fair task no slice of its choosing"
)


@pytest.fixture
def spill(tmp_path: Path) -> Path:
    path = tmp_path / "spill"
    path.mkdir()
    return path


@needs_slices
def test_slice_ns_sets_this_threads_slice_and_zero_restores_the_default() -> None:
    """A short, a long, then the default slice again; another thread keeps its own."""
    default = _slice_of()

    def steps() -> list[int]:
        seen = []
        for value in (nslimits.SHORT_SLICE, nslimits.LONG_SLICE, 0):
            nslimits.slice_ns(value)
            seen.append(_slice_of())
        return seen

    assert _in_a_thread(steps) == [nslimits.SHORT_SLICE, nslimits.LONG_SLICE, default]
    assert _slice_of() == default


def test_slice_ns_does_nothing_where_it_knows_no_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """On an architecture without a known ``sched_setattr`` number it makes no call."""
    calls: list[object] = []
    monkeypatch.setattr(nslimits, "_SYS_SCHED_SETATTR", None)
    monkeypatch.setattr(nslimits, "_libc", type("Libc", (), {"syscall": calls.append}))
    nslimits.slice_ns(nslimits.SHORT_SLICE)
    assert calls == []


SLICE_PROBE = """
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
buffer = ctypes.create_string_buffer(56)
assert libc.syscall({nr}, 0, buffer, 56, 0) == 0
print(struct.unpack_from("=IIQiIQ", buffer.raw)[5])
"""


@needs_slices
@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="the probe needs a system python3")
@pytest.mark.parametrize("level", [Isolation.OVERLAY, Isolation.NAMESPACE_COPY])
def test_the_command_runs_with_the_default_slice(spill: Path, level: Isolation) -> None:
    """The command's process waits with a short slice, and the command gets the
    kernel's default one back at its ``execve``: in a fresh sandbox and in one
    prepared for it alike (runs 0 and 1)."""
    assert SYSTEM_PYTHON is not None
    probe = SLICE_PROBE.format(nr=_SCHED_GETATTR)
    default = _in_a_thread(_default_slice)
    for index in (0, 1):
        spec = SandboxSpec(
            command=(SYSTEM_PYTHON, "-c", probe), isolation=level, run_index=index, timeout_s=30.0
        )
        capture = run_sandboxed(spec, spill_dir=spill)
        assert capture.status is CaptureStatus.OK, capture.error
        assert read_output(capture) == f"{default}\n".encode()


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


@needs_slices
def test_a_prepared_sandbox_waits_for_its_run_with_short_slices_only_on_its_path(
    spill: Path,
) -> None:
    """Prepared: its helper keeps the long slice of the preparation until it is taken,
    ns the default once it has forked PID 1 (its exit is the teardown); PID 1 and the
    command's process, on the run's path, wait with short ones."""
    default = _in_a_thread(_default_slice)
    spec = SandboxSpec(command=("true",), timeout_s=30.0, limits=Limits(processes=4323))
    capture = run_sandboxed(spec, spill_dir=spill)
    assert capture.status is CaptureStatus.OK, capture.error
    server = sandbox_server.running_server()
    assert server is not None
    assert len(server.prepared()) == DEPTH - 1  # a spec seen first
    for sandbox in server._held:
        select.select([sandbox.sock], [], [])  # it said "ready": PID 1 waits for a run
        (ns,) = _children(sandbox.pid)
        (init,) = _children(ns)
        (command,) = _children(init)
        slices = [_slice_of(pid) for pid in (sandbox.pid, ns, init, command)]
        assert slices == [nslimits.LONG_SLICE, default] + [nslimits.SHORT_SLICE] * 2


def test_a_spec_run_again_keeps_one_more_sandbox_prepared(spill: Path) -> None:
    """A spec seen first leaves `DEPTH` - 1 sandboxes prepared for it (most are never
    run again); once a run of it took a prepared one, `DEPTH` wait (reruns: each is
    made while the next `DEPTH` runs go). A different spec starts over."""
    counts = []
    # Process limits no other test uses: specs this server has not seen yet.
    for index, (command, processes) in enumerate(
        [(("true",), 4321), (("true",), 4321), (("echo", "x"), 4321), (("true",), 4322)]
    ):
        spec = SandboxSpec(
            command=command,
            timeout_s=30.0,
            run_index=index,
            limits=Limits(processes=processes),
        )
        capture = run_sandboxed(spec, spill_dir=spill)
        assert capture.status is CaptureStatus.OK, capture.error
        # The server that ran it: under coverage a process also holds the server of
        # runs made while the helper was not measured, with sandboxes of its own.
        server = sandbox_server.running_server()
        assert server is not None
        counts.append(len(server.prepared()))
    # echo x has the options of true (the command is the run's, not the sandbox's).
    assert counts == [DEPTH - 1, DEPTH, DEPTH, DEPTH - 1]


class _Fail:
    def fail(self, what: str) -> NoReturn:
        raise OSError(what)


def _build_in_a_mount_namespace(root: Path, plan: str) -> int:
    """Build ``plan`` below ``root`` in a forked child's own user and mount namespace
    (unprivileged: the child maps itself to root there); its exit status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        code = 1
        try:
            uid, gid = os.geteuid(), os.getegid()
            if _LIBC.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
                os._exit(3)
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
            Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
            nsview.mount(_Fail(), "none", "/", None, nsview.MS_REC | nsview.MS_PRIVATE, None)
            nsview.mount(_Fail(), "tmpfs", str(root), "tmpfs", 0, "size=64k")
            nsview.build_view(_Fail(), str(root), plan)
            code = 0 if os.readlink(root / "a/b/again") == "there" else 2
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_a_folder_mounted_over_is_made_again_when_a_later_step_needs_it(tmp_path: Path) -> None:
    """``/a/b`` is made for a link, then a tmpfs is mounted on ``/a`` (hiding it): the
    next link below ``/a/b`` gets its folder made again (the view remembers the
    folders it made, not the ones a mount hid)."""
    root = tmp_path / "root"
    root.mkdir()
    steps = [
        ("symlink", "/a/b/first", "here"),
        ("tmpfs", "/a", "mode=0755,size=64k"),
        ("symlink", "/a/b/again", "there"),
    ]
    plan = "\x1e".join("\x1f".join(step) for step in steps)
    code = _build_in_a_mount_namespace(root, plan)
    if code == 3:
        pytest.skip("no unprivileged user namespaces here")
    assert code == 0
