"""What of the host a sandbox shows: the system folders and ``/etc`` pieces as the host
has them (kept while their folders are unchanged), the interpreter's and the kernel's
folders, a program's Python prefix, the spec's read-only binds, and the mount plan the
helper carries out for them (`kernel.effects.sandbox.spec.mount_plan`)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from pathlib import Path
from typing import Final

from kernel.effects.sandbox.spec import ETC_BINDS, SYSTEM_BINDS, SandboxSpec, mount_plan
from kernel.errors import EffectError

__all__ = ["host_entries", "view_entries", "view_plan"]

_KERNEL_DIR: Final = str(Path(__file__).resolve().parents[2])


@functools.lru_cache(maxsize=64)
def view_plan(
    entries: tuple[tuple[str, str], ...],
    tmp_bytes: int | None,
    hidden: str,
    copies: tuple[str, ...],
) -> str:
    """`mount_plan` as the helper's option (steps joined by RS, fields by US), kept per
    view: the same view every run, and its quadratic nesting check took ~3 ms a run."""
    plan = mount_plan(entries, tmp_bytes=tmp_bytes, hidden=hidden, copies=copies)
    return "\x1e".join("\x1f".join(step) for step in plan)


def view_entries(spec: SandboxSpec) -> tuple[list[tuple[str, str]], tuple[str, ...]]:
    """``(path, link)`` of every host path the sandbox shows, and the small files it
    copies (`mount_plan`): the system
    folders and ``/etc`` pieces, this interpreter's prefixes, the kernel package (the
    verifier's test runner runs from it), what an absolute program needs
    (`_program_paths`), and the spec's `ro_binds`; a missing path is left out.

    Raises:
        EffectError: a path of `SandboxSpec.ro_binds` does not exist, or an absolute
            program's Python installation is one of `_NEVER_SHOWN_WHOLE`.
    """
    entries, copies = host_entries()
    extra = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), _KERNEL_DIR}
    program = spec.command[0] if spec.command else ""
    if program.startswith("/"):
        extra.update(_program_paths(program))
    for path in spec.ro_binds:
        if not os.path.exists(path):
            raise EffectError(f"{path}: a read-only bind of the sandbox does not exist")
        extra.add(os.path.realpath(path))
    entries.extend((path, "") for path in sorted(extra) if os.path.exists(path))
    return entries, tuple(copies)


_NEVER_SHOWN_WHOLE: Final = frozenset(
    {"/", "/etc", "/home", "/root", "/run", "/tmp", "/var/run", "/var/tmp"}  # noqa: S108
)
"""Host folders an absolute program may sit in that the sandbox never shows whole: the
root, the shared temporary folders, ``/run`` (sockets), ``/etc`` and the homes (the
runner's is added at run time); the sandbox also has a ``/tmp`` of its own that the
host's would cover."""


def _program_paths(program: str) -> set[str]:
    """The host paths an absolute ``program`` (and the file it resolves to) needs: its
    folder, or its Python installation's prefixes when that folder is one's ``bin``; the
    program file alone when its folder is one of `_NEVER_SHOWN_WHOLE` (spelled as the
    view will find it: ``//tmp/./x`` is ``/tmp/x``).

    Raises:
        EffectError: a Python installation's prefix is one of `_NEVER_SHOWN_WHOLE`.
    """
    never = {*_NEVER_SHOWN_WHOLE, os.path.realpath(os.path.expanduser("~"))}
    paths: set[str] = set()
    for path in {program, os.path.realpath(program)}:
        folder = os.path.realpath(os.path.dirname(path))
        if folder in never:
            paths.add(os.path.normpath(os.path.join(folder, os.path.basename(path))))
            continue
        for prefix in _python_prefixes(folder) or [folder]:
            if prefix in never:
                raise EffectError(
                    f"{program}: its Python installation would show the host's {prefix} "
                    "whole in the sandbox; install it in a folder of its own"
                )
            paths.add(prefix)
    return paths


_HOST: list[tuple[tuple[int, ...], list[tuple[str, str]], tuple[str, ...]]] = []
"""`host_entries`' last answer and the stamp of the folders holding its paths."""


def host_entries() -> tuple[list[tuple[str, str]], tuple[str, ...]]:
    """`SYSTEM_BINDS` and `ETC_BINDS` as the host has them (links, small files to copy,
    folders), kept while the folders holding them (``/``, ``/etc``) are unchanged: an
    entry made, removed or replaced there changes its folder's mtime. A stamp younger
    than a second is not trusted (file times are coarser than a run), as git treats a
    racy index entry. ~90 stat calls a run less (~1 ms on the critical path)."""
    paths = (*SYSTEM_BINDS, *ETC_BINDS)
    try:
        infos = [os.stat(folder) for folder in sorted({os.path.dirname(p) for p in paths})]
    except OSError:
        infos = []
    stamp = tuple(x for i in infos for x in (i.st_dev, i.st_ino, i.st_mtime_ns, i.st_ctime_ns))
    if _HOST and _HOST[0][0] == stamp and stamp:
        return list(_HOST[0][1]), _HOST[0][2]
    entries, copies = [], []
    for path in paths:
        if os.path.islink(path):
            entries.append((path, os.readlink(path)))  # shown as the same link
        elif os.path.isfile(path) and path in ETC_BINDS:
            copies.append(path)
        elif os.path.exists(path):
            entries.append((path, ""))
    settled = time.time_ns() - max((i.st_ctime_ns for i in infos), default=0) > 10**9
    _HOST[:] = [(stamp if infos and settled else (), entries, tuple(copies))]
    return list(entries), tuple(copies)


def _python_prefixes(folder: str) -> list[str]:
    """The prefixes a program's ``bin`` folder needs when it is a Python installation
    (its own) or a venv (its own and its base interpreter's), else none: a plain
    ``bin`` folder's parent (a home folder) is never shown."""
    if os.path.basename(folder) != "bin":
        return []
    prefix = os.path.dirname(os.path.realpath(folder))
    try:
        with open(os.path.join(prefix, "pyvenv.cfg")) as handle:
            home = [
                v for k, _, v in (line.partition("=") for line in handle) if k.strip() == "home"
            ]
    except OSError:
        home = []
    if home:
        return [prefix, os.path.dirname(os.path.realpath(home[0].strip()))]
    with contextlib.suppress(OSError):
        if any(name.startswith("python") for name in os.listdir(os.path.join(prefix, "lib"))):
            return [prefix]
    return []
