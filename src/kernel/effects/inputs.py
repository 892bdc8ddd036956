"""Reading input files: only regular files, never a FIFO, a device or a socket.

Rules enforced:

- inputs are regular files: a FIFO, device or socket is refused before it is read
  (opened non-blocking, checked with ``fstat``), so an input never blocks;
- every failure is a `kernel.errors.EffectError` whose message names the file.

`kernel.effects.files` (which re-exports these) holds the rest of the file effects;
this module is apart so that a reader of one input (the guard's policy) imports no
more than it uses (`pathlib` with `urllib.parse` and `ipaddress`, the JSON helpers).
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, BinaryIO, Literal, overload

from kernel.errors import EffectError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["KINDS", "check_input", "open_input", "read_input"]

KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def open_input(path: Path | str, *, what: str = "input") -> BinaryIO:
    """Open an input file for reading; refuse anything but a regular file.

    Opened non-blocking (a FIFO with no writer would block ``open`` itself), checked
    with ``fstat`` on the open descriptor (no race with a swapped path), then put
    back in blocking mode.

    Raises:
        EffectError: missing, unreadable, or not a regular file (message names it).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError as e:
        raise EffectError(f"{path}: {what} not found") from e
    except OSError as e:
        raise EffectError(f"{path}: cannot read {what}: {e.strerror}") from e
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise EffectError(f"{path}: {what} is {kind}, not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def check_input(path: Path | str, *, what: str = "input") -> None:
    """Refuse ``path`` unless it is a readable regular file (see `open_input`)."""
    open_input(path, what=what).close()


@overload
def read_input(path: Path | str, *, what: str = ..., missing_ok: Literal[False] = ...) -> bytes: ...
@overload
def read_input(path: Path | str, *, what: str = ..., missing_ok: bool) -> bytes | None: ...
def read_input(path: Path | str, *, what: str = "input", missing_ok: bool = False) -> bytes | None:
    """The bytes of a regular input file (see `open_input`); None for a missing file
    when ``missing_ok`` (an optional input such as a signature)."""
    if missing_ok and not os.path.lexists(path):
        return None
    with open_input(path, what=what) as handle:
        try:
            return handle.read()
        except OSError as e:
            raise EffectError(f"{path}: cannot read {what}: {e.strerror}") from e
