"""The helper server's loop: one helper per run, and the next runs' sandboxes prepared.

Stdlib only, like `nshelper` (run by the helper's bootstrap as a top-level module
under ``python -I -S``). The server forks one helper per request (`nshelper.helper`).
After each request it also forks *prepared* sandboxes for the same
`nshelper.WARM_KEY` (`DEPTH` in all): each builds the namespaces, maps, memory group,
view and the command's confined process, and waits. The server hands each one's
socket and pidfd to the runner and keeps none: the runner gives a run of the same key
to the oldest itself (the server is off the run's path), and asks the server for as
many as it took (a ``prepare`` message); any other request discards them (the runner
closes their sockets: each tears down and exits). A request that needs an idmapped
baseline (a root runner's overlay) comes to the server with the prepared sandbox it
is for, and the server hands it over with the baseline it makes. Each prepared
sandbox serves one run at most.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import socket
from typing import TYPE_CHECKING, Final, NoReturn

if TYPE_CHECKING:  # type-checked as the package's module
    from kernel.effects.sandbox import nshelper, nslimits, nsview
elif __package__:  # listed in the runner's process (module walks): no helper code runs there
    nshelper = nslimits = nsview = None
else:  # the helper runs this folder's modules as top-level modules (`python -I -S`)
    import nshelper
    import nslimits
    import nsview

__all__ = ["DEPTH", "PREPARE", "Prepared", "serve"]

_PR_SET_PDEATHSIG = 1


class Prepared:
    """A prepared sandbox's helper: its socket and pidfd (the runner holds them; it
    hands one back to the server with a request that needs an idmapped baseline)."""

    def __init__(self, sock: socket.socket, pidfd: int) -> None:
        self.sock = sock
        self.pidfd = pidfd

    def take(self, message: bytes, fds: list[int]) -> bool:
        """Hand it the request when it is ready (waiting for that if it is still
        preparing); False when it cannot take it."""
        readable, _w, _x = select.select([self.sock.fileno(), self.pidfd], [], [])
        if self.pidfd in readable:
            return False  # it ended while preparing: the fresh helper reports why
        chan = -1
        try:
            ready, chans, _flags, _addr = socket.recv_fds(self.sock, 16, 1)
            chan = chans[0] if chans else -1
            if ready != b"ready" or chan < 0:
                return False
            self.hand_over(chan, message, fds)
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
        self.sock.close()  # the pidfd is the taker's (the runner's helper handle)
        return True

    def hand_over(self, chan: int, message: bytes, fds: list[int]) -> None:
        """Send PID 1 (its channel ``chan``) the run, with the idmapped baseline a root
        runner's overlay needs (`_hand_over`).

        Raises:
            OSError: PID 1 is gone.
            _Refused: the idmapped baseline cannot be made.
        """
        _hand_over(chan, message, fds)

    def close(self) -> None:
        """Let go of it (a prepared sandbox still waiting then ends itself)."""
        self.sock.close()
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


DEPTH = 3
"""Prepared sandboxes kept per server for a spec run again (reruns): each is made while
the next three runs go. With two, one run in three at a load of 3.6 found the one it
took still preparing (a mean wait of 3.5 ms, 37 ms at most); a spec seen first gets
one fewer (one run's time beside it was not enough on a loaded machine)."""


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


PREPARE: Final = b"prepare\0"
"""A message that asks for prepared sandboxes only: ``prepare``, NUL, their count,
NUL, then a request's message (their options); no fds."""


def serve(sock_fd: int, runner: int) -> NoReturn:
    """The pre-forked helper server: one helper per request. Never returns.

    A request is one ``SOCK_SEQPACKET`` message (`nshelper.parse`) with the run's
    stdout, stderr, status and patch fds attached, and, when the runner hands it a
    prepared sandbox to take, that one's socket and pidfd. The reply is the helper's
    pid, with its pidfd attached (the runner signals through it, so a reused pid is
    never hit). Then, and after a `PREPARE` message, one message hands the runner the
    sandboxes forked for later runs: their pids, and each one's socket and pidfd. The
    server dies with the runner; its helpers die with it (``PR_SET_PDEATHSIG``).
    """
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != runner:
        nshelper.exit_now(1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # helpers are reaped by the kernel
    server = socket.socket(fileno=sock_fd)
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(server, 1 << 22, 6)
        except OSError:
            message, fds = b"", []
        if message.startswith(PREPARE) and not fds:
            _kind, count, message = message.split(b"\0", 2)
            nsview.cache_userns(nshelper.parse(message)[0])
            prepared: list[tuple[int, socket.socket]] = []
            for _ in range(int(count)):
                prepared.append(_prepare(message, server, prepared))
            _send_prepared(server, prepared)
        elif message and len(fds) in (4, 6):
            _run(server, message, fds)
        else:
            nshelper.exit_now(0)  # the runner is gone (or broke the protocol)


def _run(server: socket.socket, message: bytes, fds: list[int]) -> None:
    """Hand a request to the prepared sandbox the runner sent with it, or to a fresh
    helper; reply with the helper's pid and pidfd."""
    opts = nshelper.parse(message)[0]
    nsview.cache_userns(opts)
    if len(fds) == 6:
        sandbox = Prepared(socket.socket(fileno=fds.pop(4)), fds.pop(4))
        taken = sandbox.take(message, fds)
        sandbox.close()
        if taken:  # the runner holds its pid and pidfd
            for fd in fds:
                os.close(fd)
            server.send(b"taken")
            return
    pid = os.fork()
    if pid == 0:
        server.close()
        _forked()
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


def _send_prepared(server: socket.socket, prepared: list[tuple[int, socket.socket]]) -> None:
    """Hand the runner the sandboxes just forked (pids; each one's socket and pidfd)
    and keep none of them: a discarded one sees its socket close."""
    fds: list[int] = []
    pids: list[str] = []
    for pid, sock in prepared:
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue  # gone already: never ready
        fds += [sock.fileno(), pidfd]
        pids.append(str(pid))
    try:
        socket.send_fds(server, [" ".join(["prepared", *pids]).encode()], fds)
    finally:
        for _pid, sock in prepared:
            sock.close()
        for fd in fds[1::2]:
            os.close(fd)


def _forked() -> None:
    """In a child of the server: its own session, SIGCHLD back to the default, fds 0-2
    on /dev/null."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    nshelper.quiet()


def _prepare(
    message: bytes, server: socket.socket, forked: list[tuple[int, socket.socket]]
) -> tuple[int, socket.socket]:
    """Fork a sandbox for a later run, prepared as ``message`` asks; its pid and the
    server's end of its socket. It starts at once, beside the run just handed over.
    The child lets go of the sockets of the ones ``forked`` before it: a copy held
    there would keep a discarded one waiting."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        server.close()
        ours.close()
        for _pid, sock in forked:
            sock.close()
        _forked()
        # Off every run's path until it is taken: long slices, so a run's processes
        # (short ones, `nslimits.SHORT_SLICE`) take a core from it at once.
        nslimits.slice_ns(nslimits.LONG_SLICE)
        nshelper.helper(message, None, theirs.detach())
    theirs.close()
    return pid, ours
