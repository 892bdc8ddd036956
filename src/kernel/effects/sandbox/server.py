"""The helper server: one pre-forked, stdlib-only helper per runner process.

The runner hands each run to a sandbox the server prepared for it (`_HelperServer.start`:
straight to its PID 1, the server off the run's path), or sends the server the request,
which forks the run's helper (`nsserve.serve`), so the interpreter starts once per
runner process, not once per run. Where it cannot run, the runner starts a helper
itself with `helper_argv`.
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
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from kernel.effects.sandbox import nshelper
from kernel.effects.sandbox.nsserve import DEPTH, PREPARE, Prepared

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

    def forget(self) -> None:
        """Drop the pidfd without waiting (a fork of the runner's copy)."""
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1

    def wait(self) -> None:
        """Wait (at most 5 s) until the helper has exited, then drop the pidfd."""
        if self._pidfd >= 0:
            select.select([self._pidfd], [], [], 5.0)
            os.close(self._pidfd)
            self._pidfd = -1


class _Prepared(Prepared):
    """A sandbox the server prepared for a later run, held by the runner: its helper's
    pid, socket and pidfd, and the key of the options it was prepared for. `take`
    hands the run straight to its PID 1 (waiting while it is still preparing), and its
    helper the status fd (for a "done" PID 1 cannot write)."""

    def __init__(self, pid: int, sock: int, pidfd: int, key: tuple[str, ...]) -> None:
        super().__init__(socket.socket(fileno=sock), pidfd)
        self.pid = pid
        self.key = key

    def hand_over(self, chan: int, message: bytes, fds: list[int]) -> None:
        """Send PID 1 the run itself (never one that needs an idmapped baseline).

        Raises:
            OSError: PID 1 is gone.
        """
        with socket.socket(fileno=os.dup(chan)) as init:
            socket.send_fds(init, [message], fds)


class _HelperServer:
    """A pre-forked helper (`nshelper.serve`): one interpreter start per runner
    process instead of one per run. Started from a thread that lives as long as the
    process (``PR_SET_PDEATHSIG`` fires when the *thread* that forked ends)."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.alive = True  # before the thread starts: it clears this when the server ends
        self.ended = threading.Event()
        # In place only (`_shutdown` holds them): prepared sandboxes, oldest first; the
        # (key, count) asked for and not yet sent; helpers still tearing a run down.
        self._held: list[_Prepared] = []
        self._asked: list[tuple[tuple[str, ...], int]] = []
        self._pending: list[ForkedHelper] = []
        self._lock = threading.Lock()
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Closed with this object, or at interpreter exit (the server then exits too):
        # never left for the garbage collector to warn about. Its prepared sandboxes
        # are let go of and awaited first: the server's exit would kill them before
        # they remove their memory groups.
        self._close = weakref.finalize(
            self, _shutdown, self._sock, (self._held, self._asked, self._pending)
        )
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
        """Stop using this server once the teardowns still running are over, and the
        prepared sandboxes' (each removes its memory group); it exits when its socket
        closes."""
        with self._lock:
            self._settle()
            self._close()
        self.alive = False

    def forget(self) -> None:
        """In a fork of its runner: close this process's copies of the server's socket,
        its prepared sandboxes and teardowns, and never shut it down from here (they
        are the runner's). A copy kept would keep a discarded sandbox waiting, and the
        fork's exit would read the runner's messages (its next run then waited)."""
        self._close.detach()
        self.alive = False
        for sandbox in self._held:
            sandbox.close()
        for helper in self._pending:
            helper.forget()
        self._sock.close()

    def retire(self, helper: ForkedHelper) -> None:
        """Keep a helper that replied and still tears its sandbox down: the run after
        next, or `close`, waits for it (one teardown at most goes on beside a run)."""
        with self._lock:
            self._pending.append(helper)

    def _settle(self, keep: int = 0) -> None:
        """Wait for the teardowns still running but the last ``keep``: a run started
        right after another waited ~10 ms for its teardown (back to back, as reruns go)."""
        while len(self._pending) > keep:
            self._pending.pop(0).wait()

    def start(
        self, argv: list[str], env: Mapping[str, str], fds: tuple[int, int, int, int]
    ) -> ForkedHelper | None:
        """Hand the run (``argv``/``env``, the run's fds) to a sandbox prepared for its
        options, or have the server fork one helper for it; None if the server is gone
        (the caller then starts a helper itself)."""
        payload = "\0".join([*argv, "", *(f"{k}={v}" for k, v in env.items())]).encode(
            "utf-8", "surrogateescape"
        )
        opts = dict(arg.split("=", 1) for arg in argv[: argv.index("--")])
        key = nshelper.warm_key(opts)
        # The idmapped baseline of a root runner's overlay is made by the server.
        by_server = os.geteuid() == 0 and opts["mode"] == "overlay" and bool(opts["baseline"])
        try:
            with self._lock:
                self._settle(keep=1)
                self._read_prepared(block=False)
                sandbox = self._oldest(key)
                warm = sandbox is not None  # a spec run again (reruns): keep more waiting
                if sandbox is not None and not by_server:
                    if sandbox.take(payload, list(fds)):
                        self._ask(key, payload, warm=warm)
                        return ForkedHelper(sandbox.pid, sandbox.pidfd, self)
                    sandbox.close()
                    sandbox = None
                reply, pidfds = self._request(payload, fds, sandbox)
                self._ask(key, payload, warm=warm)
        except OSError:
            reply, pidfds = b"", []
        if reply == b"taken" and sandbox is not None:
            return ForkedHelper(sandbox.pid, sandbox.pidfd, self)
        if sandbox is not None:
            sandbox.close()
        if not reply or reply == b"taken":
            self.alive = False
            return None
        return ForkedHelper(int(reply), pidfds[0] if pidfds else -1, self)

    def _oldest(self, key: tuple[str, ...]) -> _Prepared | None:
        """The oldest prepared sandbox of ``key``; those of other keys are discarded."""
        while self._held:
            sandbox = self._held.pop(0)
            if sandbox.key == key:
                return sandbox
            sandbox.close()
        return None

    def _request(
        self, payload: bytes, fds: tuple[int, int, int, int], sandbox: _Prepared | None
    ) -> tuple[bytes, list[int]]:
        """Send the server a request (with the prepared ``sandbox`` to take, if any);
        its reply: a helper's pid and pidfd, or ``taken``."""
        extra = [sandbox.sock.fileno(), sandbox.pidfd] if sandbox is not None else []
        socket.send_fds(self._sock, [payload], [*fds, *extra])
        if sandbox is not None:
            sandbox.sock.close()  # the server's copy is the one that counts now
        while True:
            reply, pidfds, _flags, _addr = socket.recv_fds(self._sock, 4096, 2 * DEPTH)
            if not reply.startswith(b"prepared"):
                return reply, pidfds
            self._store(reply, pidfds)

    def _ask(self, key: tuple[str, ...], payload: bytes, *, warm: bool) -> None:
        """Ask the server for the sandboxes of ``key`` still missing (it forks them
        beside the run; they come in a ``prepared`` message, read at the next run):
        `DEPTH` in all once a run of ``key`` found one prepared (``warm``), one fewer
        for a spec seen first (most never run again)."""
        count = (DEPTH if warm else DEPTH - 1) - sum(s.key == key for s in self._held)
        count -= sum(n for asked, n in self._asked if asked == key)
        if count > 0:
            self._sock.send(PREPARE + str(count).encode() + b"\0" + payload)
            self._asked.append((key, count))

    def prepared(self) -> frozenset[int]:
        """Pids of the sandboxes it holds prepared for the next runs."""
        with self._lock:
            with contextlib.suppress(OSError):
                self._read_prepared(block=True)
            return frozenset(sandbox.pid for sandbox in self._held)

    def _read_prepared(self, *, block: bool) -> None:
        """Take the prepared sandboxes the server sent (forked after a run began, off
        its path); without ``block`` only those already sent."""
        while self._asked:
            try:
                message, fds, _flags, _addr = socket.recv_fds(
                    self._sock, 4096, 2 * DEPTH, 0 if block else socket.MSG_DONTWAIT
                )
            except BlockingIOError:
                return
            if not message:
                raise OSError(0, "the helper server is gone")
            self._store(message, fds)

    def _store(self, message: bytes, fds: list[int]) -> None:
        _store(self._held, self._asked, message, fds)


def _store(
    held: list[_Prepared],
    asked: list[tuple[tuple[str, ...], int]],
    message: bytes,
    fds: list[int],
) -> None:
    """Hold the sandboxes of a ``prepared`` message (pids; a socket and pidfd each),
    prepared for the key asked first."""
    key = asked.pop(0)[0] if asked else ()
    pids = [int(pid) for pid in message.split()[1:]]
    for fd in fds:
        os.set_inheritable(fd, False)
    for index, pid in enumerate(pids):
        held.append(_Prepared(pid, fds[2 * index], fds[2 * index + 1], key))


def _shutdown(
    sock: socket.socket,
    state: tuple[list[_Prepared], list[tuple[tuple[str, ...], int]], list[ForkedHelper]],
) -> None:
    """Let go of a server: the teardowns still running end, its prepared sandboxes
    (those still on their way too) see their sockets close and end themselves, each
    removing its memory group; wait (5 s at most) until they have, then close the
    server's socket (it exits, and what it forked dies with it)."""
    held, asked, pending = state
    for helper in pending:
        helper.wait()
    pending.clear()
    with contextlib.suppress(OSError):
        while asked:
            message, fds, _flags, _addr = socket.recv_fds(sock, 4096, 2 * DEPTH)
            if not message:
                break  # the server is gone (and its sandboxes with it)
            _store(held, asked, message, fds)
    pidfds = []
    for sandbox in held:
        sandbox.sock.close()
        pidfds.append(sandbox.pidfd)
    held.clear()
    deadline = time.monotonic() + 5.0
    for pidfd in pidfds:
        select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))
        os.close(pidfd)
    sock.close()


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


def _forget_in_fork() -> None:
    """In a forked child: its parent's servers are not its own (`_HelperServer.forget`);
    a run here starts a server of its own. The lock may have been held by another
    thread of the parent: a fresh one."""
    global _SERVERS_LOCK  # noqa: PLW0603 - the child's own lock, made once at the fork
    _SERVERS_LOCK = threading.Lock()
    for server in _SERVERS.values():
        server.forget()
    _SERVERS.clear()


os.register_at_fork(after_in_child=_forget_in_fork)


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
