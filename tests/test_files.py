"""Tests for kernel.effects.files: regular-file inputs and temporary files that never
outlive their writer."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernel.effects.files import (
    OutputRoot,
    atomic_write_bytes,
    check_input,
    load_json,
    read_input,
    sweep_temporaries,
)
from kernel.errors import ConfigError, EffectError


def temporaries(folder: Path) -> list[str]:
    """Names of kernel temporary files in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".kernel-"))


def test_fifo_input_is_refused_without_blocking(tmp_path: Path) -> None:
    """A FIFO with no writer would block open(); it is refused at once instead."""
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    with pytest.raises(EffectError, match="is a FIFO, not a regular file"):
        load_json(fifo)
    with pytest.raises(EffectError, match="FIFO"):
        read_input(fifo)


def test_device_socket_and_directory_inputs_are_refused(tmp_path: Path) -> None:
    """A character device, a socket and a directory are not inputs."""
    with pytest.raises(EffectError, match="character device"):
        check_input("/dev/null")
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        # A socket cannot be open()ed at all: refused either way, never read.
        with pytest.raises(EffectError):
            check_input(path)
    finally:
        server.close()
    with pytest.raises(EffectError, match="directory"):
        load_json(tmp_path)
    with pytest.raises(EffectError, match="not found"):
        load_json(tmp_path / "missing.json")


def test_regular_input_is_read(tmp_path: Path) -> None:
    """A regular file reads normally (blocking mode restored after the check)."""
    path = tmp_path / "doc.json"
    path.write_bytes(b'{"a": 1}')
    assert load_json(path) == {"a": 1}
    assert read_input(path) == b'{"a": 1}'


def test_atomic_write_leaves_no_temporary(tmp_path: Path) -> None:
    """After a write, the target holds the bytes and no temporary file remains."""
    target = tmp_path / "out" / "r.json"
    atomic_write_bytes(target, b"one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert temporaries(target.parent) == []


def test_killed_writer_leaves_no_temporary(tmp_path: Path) -> None:
    """A writer killed (SIGKILL) in the middle of a write leaves no file behind."""
    target = tmp_path / "r.json"
    script = textwrap.dedent(f"""
        import os, sys, time
        from kernel.effects import files
        def stuck(fd):
            print("writing", flush=True)
            time.sleep(60)
        files.os.fsync = stuck
        files.atomic_write_bytes({str(target)!r}, b"x" * 100000)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"writing\n"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_stale_temporaries_of_dead_writers_are_swept(tmp_path: Path) -> None:
    """The next write to a folder removes temporaries whose writer is gone; a live
    writer's and other files stay."""
    dead = tmp_path / f".kernel-{_dead_pid():010d}-0123abcd.tmp"
    dead.write_bytes(b"partial")
    live = tmp_path / f".kernel-{os.getpid():010d}-89abcdef.tmp"
    live.write_bytes(b"in progress")
    legacy = tmp_path / ".kernel-abcd1234.tmp"
    legacy.write_bytes(b"old")
    hour_ago = time.time() - 7200
    os.utime(legacy, (hour_ago, hour_ago))
    fresh_legacy = tmp_path / ".kernel-wxyz9876.tmp"
    fresh_legacy.write_bytes(b"maybe live")
    other = tmp_path / ".kernel-notes.txt"
    other.write_bytes(b"keep")
    atomic_write_bytes(tmp_path / "r.json", b"{}")
    assert temporaries(tmp_path) == sorted([live.name, fresh_legacy.name, other.name])


def test_sweep_never_follows_a_symlink(tmp_path: Path) -> None:
    """A planted symlink with a temporary's name is not a regular file: left alone,
    and its target untouched."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / f".kernel-{_dead_pid():010d}-0123abcd.tmp").symlink_to(victim)
    sweep_temporaries(folder)
    assert victim.read_bytes() == b"keep me"
    sweep_temporaries(tmp_path / "missing")  # no folder: nothing to do


def test_write_failure_leaves_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing write raises EffectError and removes its temporary file."""
    target = tmp_path / "r.json"

    def full(_src: object, _dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(EffectError, match="No space left"):
        atomic_write_bytes(target, b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_named_fallback_without_o_tmpfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where O_TMPFILE is unsupported, a named temporary is used and still cleaned."""
    real_open = os.open

    def no_tmpfile(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(95, "Operation not supported")
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", no_tmpfile)
    atomic_write_bytes(tmp_path / "r.json", b"fallback")
    assert (tmp_path / "r.json").read_bytes() == b"fallback"
    assert temporaries(tmp_path) == []


def test_optional_input_missing_is_none_but_a_fifo_is_refused(tmp_path: Path) -> None:
    """An optional input (a signature) may be absent; present, it must be a regular file."""
    assert read_input(tmp_path / "absent.sig", what="signature", missing_ok=True) is None
    fifo = tmp_path / "present.sig"
    os.mkfifo(fifo)
    with pytest.raises(EffectError, match="signature is a FIFO"):
        read_input(fifo, what="signature", missing_ok=True)
    (tmp_path / "real.sig").write_bytes(b"sig")
    assert read_input(tmp_path / "real.sig", missing_ok=True) == b"sig"


def test_an_output_naming_a_fifo_or_a_socket_is_refused_before_writing(tmp_path: Path) -> None:
    """Regression (issue 22 item 5): an output path naming a FIFO was renamed over (the
    special file silently replaced); it is refused like an input, nothing written."""
    root = tmp_path / "results"
    root.mkdir()
    fifo = root / "report.json"
    os.mkfifo(fifo)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "sock.json"))
        for name, kind in (("report.json", "a FIFO"), ("sock.json", "a socket")):
            with pytest.raises(EffectError, match=f"is {kind}, not a regular file"):
                OutputRoot(root).resolve(root / name)
    assert sorted(p.name for p in root.iterdir()) == ["report.json", "sock.json"]


def test_importing_the_file_helpers_loads_no_random_module() -> None:
    """`kernel.effects.files` is on every command's start: its temporary names take
    their random part from `os.urandom`, so `secrets` (and `random`, `base64` with it,
    about 3 ms) is not imported."""
    code = (
        "import sys\n"
        "import kernel.effects.files\n"
        "print(sorted(m for m in ('secrets', 'random', 'base64') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]"]


def test_json_nested_past_the_parsers_depth_is_refused_not_a_crash(tmp_path: Path) -> None:
    """A document nested deeper than the interpreter's recursion limit allows the
    strict duplicate-key parse (the fast parser takes up to 1024 levels) is a config
    error naming the file, not a RecursionError. The limit is set here: a run may
    have raised it."""
    path = tmp_path / "deep.json"
    path.write_text("[ " * 1000 + "]" * 1000)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(600)
    try:
        with pytest.raises(ConfigError, match=re.escape(f"{path}: not valid JSON (nested too")):
            load_json(path)
    finally:
        sys.setrecursionlimit(limit)


def test_an_output_under_a_file_is_refused_naming_it(tmp_path: Path) -> None:
    """Its folder cannot be made: an effect error naming the path and the folder."""
    blocker = tmp_path / "a-file"
    blocker.write_text("keep")
    with pytest.raises(EffectError, match=re.escape(f"cannot create a file in {blocker}")):
        atomic_write_bytes(blocker / "report.json", b"{}")
    assert blocker.read_text() == "keep"
