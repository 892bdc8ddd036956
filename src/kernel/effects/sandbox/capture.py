"""Streaming capture: every output is hashed while it is read and spilled to a file.

Rules enforced:

- memory stays flat whatever the output size: at most `_BUFFERS` x `_CHUNK` per sink;
- hashing overlaps the spill write on a per-sink thread (`Sha256Stream` and
  ``os.write`` release the GIL on large buffers);
- an output past its limit is cut: nothing more is spilled, the run is killed and
  the sink marked ``overflow`` (a ``limit_exceeded`` run, reason ``output``);
- a deadline kills the run; reading stops 5 s later whatever is still open.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import selectors
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Final, Protocol

from kernel.records.identity import Sha256Stream

__all__ = ["Killable", "Report", "Sink", "kill", "pipe", "pump"]

_CHUNK: Final = 256 << 10
"""Read size: a chunk stays in a core's L2 from the pipe read through hash and write.

1 MiB chunks cost twice the CPU per byte here (2.4 vs 1.2 s/GiB, bench/sandbox.py).
"""
_BUFFERS: Final = 8
"""Chunks in flight per sink (read, hashing, queued): memory bound of one sink."""
_OFFLOAD_MIN: Final = 64 << 10
"""A chunk this large starts the sink's hashing thread; small outputs hash inline."""
_PIPE_SIZE: Final = 1 << 20


class Sink:
    """Hash and spill one stream, read straight into a small pool of reusable buffers.

    The runner thread reads each chunk into a pooled buffer and writes it to the spill
    file; hashing runs on a per-sink worker thread started by the first large chunk
    (`Sha256Stream` and the file write both release the GIL on large buffers, so the
    two overlap on separate cores). Chunks stay in order; memory is at most
    `_BUFFERS` x `_CHUNK` whatever the output size.
    """

    def __init__(self, path: Path, limit: int | None) -> None:
        self.path = path
        self.stream = Sha256Stream()
        self.limit = limit
        self.overflow = False
        self.size = 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
        self._fd = os.open(path, flags, 0o666)
        self._free: queue.SimpleQueue[bytearray] = queue.SimpleQueue()
        self._allocated = 0
        self._work: queue.SimpleQueue[tuple[bytearray, int] | None] | None = None
        self._worker: threading.Thread | None = None

    def read_from(self, fd: int) -> bool:
        """Read the next chunk of ``fd`` (non-blocking) into the sink; False at EOF.

        Raises:
            BlockingIOError: nothing to read yet.
        """
        buffer = self._buffer()
        try:
            size = os.readv(fd, (buffer,))
        except BaseException:
            self._free.put(buffer)
            raise
        if not size:
            self._free.put(buffer)
            return False
        self.size += size
        if self._work is None and size >= _OFFLOAD_MIN:
            self._start_worker()
        if self._work is not None:
            self._work.put((buffer, size))  # hashed on the worker while written here
        else:
            self.stream.update(memoryview(buffer)[:size])
            self._free.put(buffer)
        if self.limit is not None and self.size > self.limit:
            self.overflow = True
        if not self.overflow:
            view = memoryview(buffer)[:size]
            while view:
                view = view[os.write(self._fd, view) :]
        return True

    def close(self) -> None:
        """Finish hashing (``stream`` is final afterwards) and close the spill file."""
        if self._work is not None and self._worker is not None:
            self._work.put(None)
            self._worker.join()
            self._work = None
        os.close(self._fd)

    def _buffer(self) -> bytearray:
        if self._allocated < _BUFFERS:
            try:
                return self._free.get_nowait()
            except queue.Empty:
                self._allocated += 1
                return bytearray(_CHUNK)
        return self._free.get()  # every buffer is queued for hashing: wait for one

    def _start_worker(self) -> None:
        work: queue.SimpleQueue[tuple[bytearray, int] | None] = queue.SimpleQueue()

        def hash_chunks() -> None:
            while (item := work.get()) is not None:
                buffer, size = item
                try:
                    self.stream.update(memoryview(buffer)[:size])
                finally:
                    self._free.put(buffer)

        self._work = work
        self._worker = threading.Thread(target=hash_chunks, name="sandbox-hash", daemon=True)
        self._worker.start()


class Report(list[bytes]):
    """A helper's status stream: read to its line ``done`` (the helper's reply: what
    the run's result depends on is complete; its teardown goes on after it) or EOF."""

    def done(self) -> bool:
        """Whether the line ``done`` has come."""
        return (b"\n" + b"".join(self)).endswith(b"\ndone\n")


def pump(streams: dict[int, Sink | list[bytes]], deadline: float | None, proc: Killable) -> bool:
    """Read every fd to EOF (a `Report` to its ``done``) into its sink; returns False
    when the deadline passed.

    A sink past its limit stops being read and the run is killed.
    """
    selector = selectors.DefaultSelector()
    for fd in streams:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    timed_out = False
    try:
        while selector.get_map():
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                if timed_out:
                    break  # killed already and still no EOF: give up on the rest
                timed_out = True
                kill(proc)
                deadline = time.monotonic() + 5.0
                continue
            for key, _ in selector.select(wait):
                fd = int(key.fd)  # registered as an int above
                sink = streams[fd]
                try:
                    if isinstance(sink, list):
                        chunk = os.read(fd, _CHUNK)
                        sink.append(chunk)
                        more = bool(chunk) and not (isinstance(sink, Report) and sink.done())
                    else:
                        more = sink.read_from(fd)
                except BlockingIOError:
                    continue
                if not isinstance(sink, list) and sink.overflow:
                    kill(proc)  # the output limit: cut the stream, end the run
                    more = False
                if not more:
                    selector.unregister(fd)
    finally:
        selector.close()
    return not timed_out


class Killable(Protocol):
    """A process the runner can end: a `subprocess.Popen` or a forked helper."""

    def kill(self) -> None:
        """SIGKILL it."""


def kill(proc: Killable) -> None:
    """SIGKILL ``proc`` (and, for a child of this process, its process group); gone
    already is fine."""
    if isinstance(proc, subprocess.Popen):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def pipe() -> tuple[int, int]:
    """A close-on-exec pipe with a 1 MiB buffer where the kernel allows it."""
    r, w = os.pipe2(os.O_CLOEXEC)
    with contextlib.suppress(OSError):
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    return r, w
