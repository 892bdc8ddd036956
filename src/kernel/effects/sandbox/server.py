"""The helper server: one pre-forked, stdlib-only helper per runner process.

The runner sends it one request per run (`_HelperServer.start`); it forks the run's
helper (`nshelper.serve`), so the interpreter starts once per runner process, not once
per run. Where it cannot run, the runner starts a helper itself with `helper_argv`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

__all__ = [
    "COVERAGE_ENV",
    "ForkedHelper",
    "helper_argv",
    "helper_servers",
    "prepared_sandboxes",
    "running_server",
]

_HELPER_DIR: Final = str(Path(__file__).resolve().parent)
_BOOTSTRAP: Final = (
    "import sys\nsys.path.append(sys.argv.pop(1))\nimport nshelper\n"
    "if sys.argv[1:2] == ['serve']:\n    import nsserve\n"
    "    nsserve.serve(int(sys.argv[2]), int(sys.argv[3]))\n"
    "nshelper.main()\n"
)
"""The helper's ``-c`` program: import `nshelper` (byte code cached) and run it."""
_COVERAGE_BOOTSTRAP: Final = """\
import os, sys
sys.path.append(sys.argv.pop(1))
data_file, helper_dir = sys.argv.pop(1), sys.argv.pop(1)
import coverage
cov = coverage.Coverage(
    data_file=None, branch=True, config_file=False,
    include=[f"{helper_dir}/{name}.py" for name in ("nshelper", "nslimits", "nsserve", "nsview")])
cov.set_option("run:disable_warnings", ["no-data-collected", "module-not-measured"])
cov.start()
def save():
    try:
        cov.stop()
        out = coverage.CoverageData(
            basename=data_file, suffix=f"nshelper.{os.getpid()}.{os.urandom(4).hex()}")
        out.update(cov.get_data())
    except Exception:
        pass  # measuring must never change a run
sys.path.append(helper_dir)
import nshelper
nshelper.EXIT_HOOKS.append(save)
if sys.argv[1:2] == ["serve"]:
    import nsserve
    nsserve.serve(int(sys.argv[2]), int(sys.argv[3]))
nshelper.main()
"""
"""The helper measured by coverage: data is kept in memory (a fork copies it) and
each helper process saves its own file beside the runner's data file, which the
runner's coverage combines at the end. Used only when coverage measures the runner
and `COVERAGE_ENV` is set (it costs ~0.2 s of CPU per run)."""
COVERAGE_ENV: Final = "KERNEL_SANDBOX_HELPER_COVERAGE"
"""Set (to anything) to measure the helper processes when the runner is measured."""


class ForkedHelper:
    """A helper forked by the helper server: signalled and awaited through a pidfd, so
    a pid the kernel reused is never hit."""

    def __init__(self, pid: int, pidfd: int, server: _HelperServer | None = None) -> None:
        self.pid = pid
        self._pidfd = pidfd
        self._server = server

    def release(self) -> None:
        """Done with its run: its server waits for its teardown before the next
        request (`_HelperServer.retire`); without one, wait now."""
        if self._server is not None:
            self._server.retire(self)
        else:
            self.wait()

    def kill(self) -> None:
        """SIGKILL the helper (its namespaces die with it); gone already is fine."""
        if self._pidfd >= 0:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def wait(self) -> None:
        """Wait (at most 5 s) until the helper has exited, then drop the pidfd."""
        if self._pidfd >= 0:
            select.select([self._pidfd], [], [], 5.0)
            os.close(self._pidfd)
            self._pidfd = -1


class _HelperServer:
    """A pre-forked helper (`nshelper.serve`): one interpreter start per runner
    process instead of one per run. Started from a thread that lives as long as the
    process (``PR_SET_PDEATHSIG`` fires when the *thread* that forked ends)."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.alive = True  # before the thread starts: it clears this when the server ends
        self.ended = threading.Event()
        self._prepared: frozenset[int] = frozenset()  # pids of its prepared sandboxes
        self._unread = False  # a reply's second message (those pids) is still to read
        self._pending: list[ForkedHelper] = []  # helpers still tearing their run down
        self._lock = threading.Lock()
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Closed with this object, or at interpreter exit (the server then exits too):
        # never left for the garbage collector to warn about.
        self._close = weakref.finalize(self, self._sock.close)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
        started: queue.SimpleQueue[subprocess.Popen[bytes] | OSError] = queue.SimpleQueue()

        def hold() -> None:
            try:
                process = subprocess.Popen(
                    [*helper_argv(), "serve", str(theirs.fileno()), str(os.getpid())],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                    # Its prepared sandboxes' PID 1 are its forks: a command running as
                    # the runner's own uid could read their /proc/1/environ.
                    env={"PATH": os.environ.get("PATH") or os.defpath},
                )
            except OSError as e:
                started.put(e)
                return
            started.put(process)
            process.wait()  # this thread (the server's parent) lives as long as it does
            self.alive = False
            self.ended.set()

        threading.Thread(target=hold, name="sandbox-helper-server", daemon=True).start()
        result = started.get()
        theirs.close()
        if isinstance(result, OSError):
            self._close()
            raise result
        self.pid = result.pid

    def close(self) -> None:
        """Stop using this server once the teardowns still running are over (it exits
        when its socket closes, after its prepared sandbox has torn itself down)."""
        with self._lock:
            self._settle()
        self.alive = False
        self._prepared = frozenset()
        self._close()

    def retire(self, helper: ForkedHelper) -> None:
        """Keep a helper that replied and still tears its sandbox down: the next
        request, or `close`, waits for it (nothing of a run outlives the next one)."""
        with self._lock:
            self._pending.append(helper)

    def _settle(self) -> None:
        for helper in self._pending:
            helper.wait()
        self._pending.clear()

    def start(
        self, argv: list[str], env: Mapping[str, str], fds: tuple[int, int, int, int]
    ) -> ForkedHelper | None:
        """Fork one helper for ``argv``/``env`` with the run's fds; None if the server
        is gone (the caller then starts a helper itself)."""
        payload = "\0".join([*argv, "", *(f"{k}={v}" for k, v in env.items())])
        try:
            with self._lock:
                self._settle()
                self._read_prepared()
                socket.send_fds(self._sock, [payload.encode("utf-8", "surrogateescape")], fds)
                reply, pidfds, _flags, _addr = socket.recv_fds(self._sock, 64, 1)
                self._unread = bool(reply)
        except OSError:
            reply, pidfds = b"", []
        if not reply:
            self.alive = False
            return None
        return ForkedHelper(int(reply), pidfds[0] if pidfds else -1, self)

    def prepared(self) -> frozenset[int]:
        """Pids of the sandboxes it holds prepared for the next runs."""
        with self._lock:
            with contextlib.suppress(OSError):
                self._read_prepared()
            return self._prepared

    def _read_prepared(self) -> None:
        """Read the message that follows a reply (sent once the server has forked the
        next sandboxes: after the reply, off the run's critical path)."""
        if self._unread:
            self._unread = False
            self._prepared = frozenset(int(pid) for pid in self._sock.recv(4096).split())


_SERVERS: dict[bool, _HelperServer] = {}
_SERVERS_LOCK = threading.Lock()


def running_server() -> _HelperServer | None:
    """This process's helper server (started on first use), or None when it cannot run."""
    measured = _measured()
    with _SERVERS_LOCK:
        server = _SERVERS.get(measured)
        if server is None or not server.alive or server.owner != os.getpid():
            if server is not None and server.owner == os.getpid():
                server.close()
            try:
                server = _SERVERS[measured] = _HelperServer()
            except OSError:
                return None
        return server


def helper_servers() -> frozenset[int]:
    """Pids of this process's live helper servers (long-lived by design, not leftovers)."""
    with _SERVERS_LOCK:
        return frozenset(s.pid for s in _SERVERS.values() if s.alive and s.owner == os.getpid())


def prepared_sandboxes() -> frozenset[int]:
    """Pids of the helpers of this process's prepared sandboxes (each waits for the
    next run, by design; its ns and PID 1 are its children)."""
    with _SERVERS_LOCK:
        servers = [s for s in _SERVERS.values() if s.alive and s.owner == os.getpid()]
    return frozenset().union(*(server.prepared() for server in servers))


@atexit.register
def _close_servers() -> None:
    """At exit, close this process's servers and give each a moment (its prepared
    sandbox removes its memory group) before the runner's death kills it."""
    with _SERVERS_LOCK:
        servers = [s for s in _SERVERS.values() if s.owner == os.getpid()]
    for server in servers:
        server.close()
        server.ended.wait(5.0)


def _measured() -> bool:
    module: Any = sys.modules.get("coverage")
    return bool(os.environ.get(COVERAGE_ENV) and module is not None and module.Coverage.current())


def helper_argv() -> list[str]:
    """How to start the helper: plain, or measured when coverage measures this process."""
    if not _measured():
        return [sys.executable, "-I", "-S", "-c", _BOOTSTRAP, _HELPER_DIR]
    module: Any = sys.modules["coverage"]
    current = module.Coverage.current()
    site = os.path.dirname(os.path.dirname(os.path.abspath(module.__file__)))
    data_file = os.path.abspath(current.config.data_file)
    return [sys.executable, "-I", "-S", "-c", _COVERAGE_BOOTSTRAP, site, data_file, _HELPER_DIR]
