"""The helper server's loop: one helper per run, and the next run's sandbox prepared.

Stdlib only, like `nshelper` (run by the helper's bootstrap as a top-level module
under ``python -I -S``). The server forks one helper per request (`nshelper.helper`).
After each request it also keeps `DEPTH` *prepared* sandboxes for the same
`nshelper.WARM_KEY`: each builds the namespaces, maps, memory group, view and the
command's confined process, and waits. A request whose key matches takes the oldest,
and its helper does only the run's own part; any other request discards them (closing
their sockets: each tears down and exits) and gets a fresh helper. Each prepared
sandbox serves one run at most.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import socket
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:  # type-checked as the package's module
    from kernel.effects.sandbox import nshelper, nsview
elif __package__:  # listed in the runner's process (module walks): no helper code runs there
    nshelper = nsview = None
else:  # the helper runs this folder's modules as top-level modules (`python -I -S`)
    import nshelper
    import nsview

__all__ = ["serve"]

_PR_SET_PDEATHSIG = 1


class _Prepared:
    """A prepared sandbox's helper, as the server holds it: pid, pidfd, key, socket."""

    def __init__(self, pid: int, key: tuple[str, ...], sock: socket.socket) -> None:
        self.pid = pid
        self.key = key
        self.sock = sock
        try:
            self.pidfd = os.pidfd_open(pid)
        except OSError:
            self.pidfd = -1  # gone already: never ready

    def take(self, key: tuple[str, ...], message: bytes, fds: list[int]) -> bool:
        """Hand it the request when the keys agree and it is ready (waiting for that
        if it is still preparing); False when it cannot take it."""
        if key != self.key or self.pidfd < 0:
            return False
        readable, _w, _x = select.select([self.sock.fileno(), self.pidfd], [], [])
        if self.pidfd in readable:
            return False  # it ended while preparing: the fresh helper reports why
        chan = -1
        try:
            ready, chans, _flags, _addr = socket.recv_fds(self.sock, 16, 1)
            chan = chans[0] if chans else -1
            if ready != b"ready" or chan < 0:
                return False
            _hand_over(chan, message, fds)
        except (OSError, _Refused):
            return False  # the fresh helper this request gets reports why
        finally:
            if chan >= 0:
                os.close(chan)
        # PID 1 has the run (it must never get a second sandbox): the helper keeps the
        # status fd, for a "done" PID 1 cannot write; gone, it cannot write one either.
        try:  # noqa: SIM105 - contextlib is not imported in the helper (start-up time)
            socket.send_fds(self.sock, [b"status"], [fds[2]])
        except OSError:
            pass
        self.close()
        return True

    def close(self) -> None:
        """Let go of it (a prepared sandbox still waiting then ends itself)."""
        self.sock.close()
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1

    def wait(self) -> None:
        """Let go of it and wait (at most 5 s) until it has torn itself down."""
        pidfd = os.dup(self.pidfd) if self.pidfd >= 0 else -1
        self.close()
        if pidfd >= 0:
            select.select([pidfd], [], [], 5.0)
            os.close(pidfd)


DEPTH = 2
"""Prepared sandboxes kept per server: each is made while the next two runs go (one
run's time beside it was not enough on a loaded machine: the request waited for it)."""


class _Refused(Exception):
    """The idmapped baseline cannot be made here."""


class _Raise:
    """`nsview.Reporter` for the server: a failure raises (the request then gets a
    fresh helper, which reports it)."""

    def fail(self, what: str) -> NoReturn:
        raise _Refused(what)


def _hand_over(chan: int, message: bytes, fds: list[int]) -> None:
    """Send PID 1 of a prepared sandbox its run, with the idmapped baseline a root
    runner's overlay needs (the helper would make it: this is a process less).

    Raises:
        OSError: PID 1 is gone.
        _Refused: the idmapped baseline cannot be made.
    """
    opts = nshelper.parse(message)[0]
    tree = -1
    if os.geteuid() == 0 and opts["mode"] == "overlay" and opts["baseline"]:
        outer = int(opts["outer_uid"]), int(opts["outer_gid"])
        tree = nsview.idmapped_baseline(_Raise(), opts["baseline"], *outer)
    sock = socket.socket(fileno=os.dup(chan))
    try:
        socket.send_fds(sock, [message], [*fds, tree] if tree >= 0 else fds)
    finally:
        sock.close()
        if tree >= 0:
            os.close(tree)


def serve(sock_fd: int, runner: int) -> NoReturn:
    """The pre-forked helper server: one helper per request. Never returns.

    A request is one ``SOCK_SEQPACKET`` message (`nshelper.parse`) with the run's
    stdout, stderr, status and patch fds attached. The reply is the helper's pid, with
    its pidfd attached (the runner signals through it, so a reused pid is never hit);
    a second message, once the next sandboxes are forked, names their pids. The
    server dies with the runner; its helpers die with it (``PR_SET_PDEATHSIG``).
    """
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != runner:
        nshelper.exit_now(1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # helpers are reaped by the kernel
    server = socket.socket(fileno=sock_fd)
    prepared: list[_Prepared] = []
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(server, 1 << 22, 4)
        except OSError:
            message, fds = b"", []
        if not message or len(fds) != 4:
            for sandbox in prepared:
                sandbox.wait()  # it removes its memory group before it exits
            nshelper.exit_now(0)  # the runner is gone (or broke the protocol)
        opts = nshelper.parse(message)[0]
        nsview.cache_userns(opts)
        key = nshelper.warm_key(opts)
        pid = _take(prepared, key, message, fds)
        if not pid:
            pid = os.fork()
            if pid == 0:
                server.close()
                _forked(prepared)
                nshelper.helper(message, (message, fds))
        for fd in fds:
            os.close(fd)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pidfd = -1  # it ended already: the runner sees EOF on its pipes
        socket.send_fds(server, [str(pid).encode()], [pidfd] if pidfd >= 0 else [])
        if pidfd >= 0:
            os.close(pidfd)
        while len(prepared) < DEPTH:
            prepared.append(_prepare(message, key, server, prepared))
        server.send(" ".join(str(sandbox.pid) for sandbox in prepared).encode())


def _take(prepared: list[_Prepared], key: tuple[str, ...], message: bytes, fds: list[int]) -> int:
    """Hand the request to the oldest prepared sandbox of its key (0 for none); discard
    the ones of other keys, and any that cannot take it."""
    while prepared:
        sandbox = prepared.pop(0)
        if sandbox.take(key, message, fds):
            return sandbox.pid
        sandbox.close()
    return 0


def _forked(prepared: list[_Prepared]) -> None:
    """In a child of the server: let go of what is the server's own (the prepared
    sandboxes' sockets: a copy held here would keep a discarded one waiting)."""
    for sandbox in prepared:
        sandbox.sock.close()
        if sandbox.pidfd >= 0:
            os.close(sandbox.pidfd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    nshelper.quiet()


def _prepare(
    message: bytes, key: tuple[str, ...], server: socket.socket, prepared: list[_Prepared]
) -> _Prepared:
    """Fork a sandbox for a later run, prepared as ``message`` asks. It starts at once,
    beside the run just handed over (whose critical path is one process at a time)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        server.close()
        ours.close()
        _forked(prepared)
        nshelper.helper(message, None, theirs.detach())
    theirs.close()
    return _Prepared(pid, key, ours)
