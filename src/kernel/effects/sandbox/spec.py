"""What one sandboxed run is asked to do (`SandboxSpec`, `Limits`) and what it produced
(`Capture`).

Rules enforced:

- every record is frozen, keyword-only, with strict ``from_dict``/``to_dict``;
- `Limits` values are positive integers or None (no limit); a spec always carries
  limits (defaults suited to a test suite), and every capture records them together
  with how each was applied (`AppliedLimit`) and which one, if any, was hit;
- a command's environment is explicit: `base_env` plus what the caller names; nothing
  of the runner's environment is inherited except ``PATH``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from kernel.corroboration.consensus import CaptureMode, CaptureStatus, Isolation, RunObservation
from kernel.errors import ConfigError, EffectError
from kernel.records.codec import Record
from kernel.records.identity import MAX_SAFE_INT, Sha256Stream
from kernel.records.values import Count, Digest, OptionalDigest, Positive
from kernel.run.record import CommandUid, SandboxLimit

__all__ = [
    "DEFAULT_PATH",
    "PATCH_COMMAND",
    "PATCH_ENV",
    "SANDBOX_GID",
    "SANDBOX_UID",
    "SANDBOX_WORKDIR",
    "AppliedLimit",
    "Capture",
    "CommandUid",
    "LimitKind",
    "LimitMechanism",
    "Limits",
    "SandboxSpec",
    "Variation",
    "ETC_BINDS",
    "SYSTEM_BINDS",
    "applied_limits",
    "base_env",
    "limits_with",
    "mount_plan",
    "observation",
    "read_output",
    "recorded_limits",
    "variation_env",
]

SANDBOX_WORKDIR: Final = "/tmp/kernel-sandbox"  # noqa: S108 - in the private /tmp layer
"""Where the baseline view is mounted inside a namespace sandbox (the command's cwd)."""
SANDBOX_UID: Final = 1000
"""The command's uid inside the namespaces (never namespace root: no capabilities)."""
SANDBOX_GID: Final = 1000
"""The command's gid inside the namespaces."""
DEFAULT_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
"""``PATH`` when the runner has none."""

PATCH_COMMAND: Final = (
    "git",
    "-c", "core.quotePath=true",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "diff.relative=false",
    "-c", "core.attributesFile=/dev/null",
    "diff", "--no-index", "--binary", "--full-index", "--no-prefix", "--no-color",
    "--no-ext-diff", "--no-textconv", "--no-renames", "--diff-algorithm=myers",
    "--unified=3", "--ignore-submodules=none", "a", "b",
)  # fmt: skip
"""The pinned diff, run from a directory holding ``a`` (baseline) and ``b`` (final)."""

PATCH_ENV: Final = {
    "LC_ALL": "C",
    "LANG": "C",
    "TZ": "UTC",
    "HOME": "/nonexistent",
    "XDG_CONFIG_HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "PATH": DEFAULT_PATH,
}
"""The whole environment of the diff (nothing inherited can change its bytes)."""


def base_env() -> dict[str, str]:
    """The environment every sandboxed command starts from, before the caller's names.

    Only ``PATH`` comes from the runner (so a command found by `check_command_starts`
    is found in the run too); tokens, credentials and paths of the runner never reach
    a run unless the caller names them.
    """
    return {
        "PATH": os.environ.get("PATH") or DEFAULT_PATH,
        "HOME": "/tmp",  # noqa: S108 - the run's private /tmp
        "TMPDIR": "/tmp",  # noqa: S108 - the run's private /tmp
        "LANG": "C.UTF-8",
    }


class Variation(enum.StrEnum):
    """A per-run environment variation that decorrelates reruns (each is recorded)."""

    TZ = "tz"
    """``TZ`` cycles through a few zones."""
    LOCALE = "locale"
    """``LANG``/``LC_ALL`` cycle through locales every libc has."""
    UMASK = "umask"
    """The command's umask cycles through 022, 077, 002, 027."""
    HOME = "home"
    """``HOME`` is a fresh, per-run directory."""
    SEED = "seed"
    """``KERNEL_RUN_SEED`` and ``PYTHONHASHSEED`` are set from the run index."""


_TZS: Final = ("UTC", "America/New_York", "Asia/Tokyo", "Europe/Berlin", "Australia/Adelaide")
_LOCALES: Final = ("C.UTF-8", "C", "POSIX")
_UMASKS: Final = ("022", "077", "002", "027")


def variation_env(index: int, variations: Sequence[Variation]) -> tuple[tuple[str, str], ...]:
    """The recorded ``(name, value)`` pairs of run ``index`` for ``variations``.

    ``umask`` is recorded as ``("umask", "077")``; every other pair is an environment
    variable. Deterministic: the same index and variations give the same pairs.
    """
    pairs: dict[str, str] = {}
    for variation in variations:
        if variation is Variation.TZ:
            pairs["TZ"] = _TZS[index % len(_TZS)]
        elif variation is Variation.LOCALE:
            pairs["LANG"] = pairs["LC_ALL"] = _LOCALES[index % len(_LOCALES)]
        elif variation is Variation.UMASK:
            pairs["umask"] = _UMASKS[index % len(_UMASKS)]
        elif variation is Variation.HOME:
            pairs["HOME"] = f"/tmp/kernel-home-{index}"  # noqa: S108 - private /tmp layer
        else:
            pairs["KERNEL_RUN_SEED"] = str(index + 1)
            pairs["PYTHONHASHSEED"] = str(index + 1)
    return tuple(sorted(pairs.items()))


# ---------------------------------------------------------------------------
# Limits


class LimitKind(enum.StrEnum):
    """One resource limit of a run; also the reason code when a run hits it."""

    MEMORY = "memory"
    """Memory of the run (bytes): the whole run's under a cgroup, else each process's
    private writable memory (``RLIMIT_DATA``)."""
    PROCESSES = "processes"
    """Processes and threads of the run at once."""
    CPU = "cpu"
    """CPU seconds of each process."""
    OUTPUT = "output"
    """Bytes of captured output (stdout, or the patch), and of stderr."""
    WRITABLE = "writable"
    """Bytes the run may write into its view of the baseline."""
    TMP = "tmp"
    """Bytes the run may write into its private ``/tmp``."""


class LimitMechanism(enum.StrEnum):
    """How a limit was applied to one run (recorded in its capture)."""

    CGROUP_V2 = "cgroup_v2"
    """A delegated cgroup v2 controller (whole run)."""
    CGROUP_V1 = "cgroup_v1"
    """A cgroup v1 controller of a root runner (whole run; memory: private and shared
    memory, memfd and tmpfs pages alike; a hit is the kernel's OOM kill)."""
    RLIMIT = "rlimit"
    """``setrlimit`` on the command (per process; a hit is seen by the command)."""
    RLIMIT_PRIVATE = "rlimit_private"
    """Memory by ``RLIMIT_DATA`` alone (per process): private memory only; shared
    mappings, memfd and ``/dev/shm`` pages are not covered (``/dev/shm`` and ``/tmp``
    are held by their tmpfs sizes)."""
    TMPFS = "tmpfs"
    """A size-limited tmpfs (whole run; a hit is ``ENOSPC``)."""
    RUNNER = "runner"
    """The runner counts and cuts the stream, then kills the run."""
    NONE = "none"
    """Not applied at this isolation level (or no limit was asked for)."""


@attrs.frozen(kw_only=True)
class Limits(Record):
    """Resource limits of one run; None means no limit. Defaults suit a test suite."""

    memory_bytes: Positive | None = 2 << 30
    """Private writable memory of each process of the run (``RLIMIT_DATA``)."""
    processes: Positive | None = 512
    """Processes (and threads) the run may have at once."""
    cpu_seconds: Positive | None = 600
    """CPU time of each process."""
    output_bytes: Positive | None = 256 << 20
    """Captured output (stdout or patch) and stderr, each."""
    writable_bytes: Positive | None = 512 << 20
    """Changes to the run's tree (the overlay's upper layer)."""
    tmp_bytes: Positive | None = 256 << 20
    """Files written to the run's private ``/tmp``."""

    def value(self, kind: LimitKind) -> int | None:
        """The limit of ``kind``."""
        value: int | None = getattr(self, _FIELDS[kind])
        return value


_FIELDS: Final = {
    LimitKind.MEMORY: "memory_bytes",
    LimitKind.PROCESSES: "processes",
    LimitKind.CPU: "cpu_seconds",
    LimitKind.OUTPUT: "output_bytes",
    LimitKind.WRITABLE: "writable_bytes",
    LimitKind.TMP: "tmp_bytes",
}
_SUFFIXES: Final = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_BYTES: Final = frozenset({LimitKind.MEMORY, LimitKind.OUTPUT, LimitKind.WRITABLE, LimitKind.TMP})


def limits_with(base: Limits, options: Sequence[str]) -> Limits:
    """``base`` with ``KIND=VALUE`` options applied (``--limit memory=512M``).

    KIND is a `LimitKind` value; VALUE is ``none`` or a positive integer, for byte
    limits optionally with a ``K``, ``M`` or ``G`` suffix (powers of 1024).

    Raises:
        ConfigError: an unknown kind, or a value that is not a positive integer
            within +/-(2**53 - 1) (NaN, infinities, fractions, negatives included).
    """
    changes: dict[str, int | None] = {}
    for option in options:
        name, sep, text = option.partition("=")
        try:
            kind = LimitKind(name.strip())
        except ValueError:
            allowed = ", ".join(k.value for k in LimitKind)
            raise ConfigError(f"--limit {option!r}: unknown limit (one of {allowed})") from None
        text = text.strip()
        if not sep or not text:
            raise ConfigError(f"--limit {option!r}: expected {kind}=VALUE")
        if text.lower() == "none":
            changes[_FIELDS[kind]] = None
            continue
        scale = 1
        if kind in _BYTES and text[-1:].upper() in _SUFFIXES:
            scale, text = _SUFFIXES[text[-1].upper()], text[:-1]
        # ASCII digits only: str.isdigit() admits every script's digits ("٣").
        if not (text.isascii() and text.isdigit()) or not 0 < int(text) * scale <= MAX_SAFE_INT:
            raise ConfigError(f"--limit {option!r}: expected a positive integer or none for {kind}")
        changes[_FIELDS[kind]] = int(text) * scale
    return attrs.evolve(base, **changes)


@attrs.frozen(kw_only=True)
class AppliedLimit(Record):
    """How one limit of a run was applied."""

    kind: LimitKind
    """Which limit."""
    value: Positive | None
    """The limit (None: no limit)."""
    mechanism: LimitMechanism
    """How it was enforced."""


# ---------------------------------------------------------------------------
# The run


@attrs.frozen(kw_only=True)
class SandboxSpec:
    """Everything one sandboxed run needs (picklable, so any executor can ship it)."""

    command: tuple[str, ...]
    """argv; ``command[0]`` is looked up on the command's ``PATH``."""
    baseline: str | None = None
    """Directory the run starts from; None for an empty one."""
    capture: CaptureMode = CaptureMode.STDOUT
    """What the run's output is."""
    run_index: int = 0
    """Exported as ``KERNEL_RUN_INDEX``."""
    timeout_s: float | None = None
    """Time limit of the whole run (setup, command and capture); None for none."""
    network: bool = False
    """Share the runner's network instead of an empty network namespace."""
    env: tuple[tuple[str, str], ...] | None = None
    """Names added to (or replacing) `base_env`; None adds nothing."""
    variation: tuple[tuple[str, str], ...] = ()
    """Per-run variation pairs (see `variation_env`), applied and recorded."""
    preload: str | None = None
    """A directory whose contents are copied over the tree before the command runs."""
    apply_patch: str | None = None
    """A patch file applied (``git apply``) to the tree before the command runs."""
    isolation: Isolation | None = None
    """Require this level; None takes the strongest available."""
    max_output_bytes: int | None = None
    """A tighter output limit than ``limits.output_bytes`` (the smaller applies)."""
    limits: Limits = Limits()
    """Resource limits of the run."""
    ro_binds: tuple[str, ...] = ()
    """Host paths (files or folders) shown read-only inside a namespace sandbox, at
    their real path (symlinks resolved): environment caches, toolchains. Everything
    of the host not named here or in `SYSTEM_BINDS`/`ETC_BINDS` is absent."""


@attrs.frozen(kw_only=True)
class Capture(Record):
    """What one sandboxed run produced. Paths name files in the caller's spill dir."""

    run_index: Count
    """``KERNEL_RUN_INDEX`` of the run."""
    status: CaptureStatus
    """ok, failed, timeout, limit_exceeded or sandbox_error."""
    exit_code: int | None
    """Exit status; negative for a signal; None when the command never ended by itself."""
    start_failed: bool
    """True when the command could not be executed at all."""
    duration_ms: Count
    """Wall time of the whole run."""
    isolation: Isolation
    """Isolation level obtained."""
    capture_mode: CaptureMode
    """What ``output`` is."""
    network: bool
    """Whether the run had network access."""
    variation: tuple[tuple[str, str], ...]
    """Variation pairs applied."""
    output_digest: OptionalDigest
    """SHA-256 of the output; None unless the output was captured whole."""
    output_size: Count | None
    """Output size in bytes, with ``output_digest``."""
    output_path: str | None
    """Spilled output file, with ``output_digest``."""
    stdout_digest: Digest
    """SHA-256 of everything read from stdout."""
    stdout_size: Count
    """Bytes read from stdout."""
    stdout_path: str
    """Spilled stdout."""
    stderr_digest: Digest
    """SHA-256 of everything read from stderr."""
    stderr_size: Count
    """Bytes read from stderr."""
    stderr_path: str
    """Spilled stderr."""
    error: str | None
    """Why the sandbox failed, the command did not start or a limit was hit, else None."""
    limits: tuple[AppliedLimit, ...] = ()
    """Every limit of the run and how it was applied, in `LimitKind` order."""
    limit_hit: LimitKind | None = None
    """The limit the run hit (status ``limit_exceeded``), else None."""
    command_uid: CommandUid | None = None
    """Who the command was on the host (None: a capture recorded before this field)."""


def applied_limits(
    limits: Limits, mechanisms: Mapping[LimitKind, LimitMechanism]
) -> tuple[AppliedLimit, ...]:
    """Every limit with its mechanism (``none`` when not applied or not asked for)."""
    return tuple(
        AppliedLimit(
            kind=kind,
            value=limits.value(kind),
            mechanism=(
                LimitMechanism.NONE
                if limits.value(kind) is None
                else mechanisms.get(kind, LimitMechanism.NONE)
            ),
        )
        for kind in LimitKind
    )


def observation(capture: Capture) -> RunObservation:
    """The pure `RunObservation` of a capture (what `kernel.corroboration.consensus` judges)."""
    ok = capture.status is CaptureStatus.OK
    return RunObservation(
        index=capture.run_index,
        status=capture.status,
        exit_code=capture.exit_code,
        output_digest=capture.output_digest if ok else None,
        output_size=capture.output_size if ok else None,
        isolation=capture.isolation,
        duration_ms=capture.duration_ms,
        variation=capture.variation,
        limits=recorded_limits(capture),
    )


def recorded_limits(capture: Capture) -> tuple[SandboxLimit, ...]:
    """A capture's limits as evidence records keep them (run record, corroboration)."""
    return tuple(
        SandboxLimit(kind=str(a.kind), value=a.value, mechanism=str(a.mechanism))
        for a in capture.limits
    )


def read_output(capture: Capture, *, max_bytes: int = 1 << 30) -> bytes:
    """The captured output bytes (e.g. the patch), checked against the recorded digest.

    Raises:
        EffectError: no output was captured, it is larger than ``max_bytes``, or the
            spilled file no longer matches its digest.
    """
    if capture.output_path is None or capture.output_size is None:
        raise EffectError(f"run {capture.run_index}: no output was captured")
    if capture.output_size > max_bytes:
        raise EffectError(f"run {capture.run_index}: output larger than {max_bytes} bytes")
    try:
        data = Path(capture.output_path).read_bytes()
    except OSError as e:
        raise EffectError(f"{capture.output_path}: cannot read output: {e.strerror}") from e
    stream = Sha256Stream()
    stream.update(data)
    if stream.hexdigest() != capture.output_digest:
        raise EffectError(f"{capture.output_path}: output changed since it was captured")
    return data


# ---------------------------------------------------------------------------
# The sandbox's view of the host: a plan of mount steps, carried out by the helper

SYSTEM_BINDS: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Host folders every namespace sandbox shows read-only (a symlink stays a symlink)."""
ETC_BINDS: Final = tuple(
    "/etc/" + name
    for name in (
        "alternatives", "ca-certificates", "ca-certificates.conf", "debian_version",
        "gai.conf", "host.conf", "hosts", "inputrc", "ld.so.cache", "ld.so.conf",
        "ld.so.conf.d", "locale.alias", "localtime", "magic", "magic.mime", "mime.types",
        "networks", "nsswitch.conf", "os-release", "protocols", "python3", "resolv.conf",
        "services", "shells", "ssl", "terminfo", "timezone",
    )
)  # fmt: skip
"""The pieces of ``/etc`` the loader, libc, Python, git and TLS read: no credentials
(``shadow``, ``ssh``, ``npmrc``, ``pip.conf``), no machine identity (``machine-id``,
``hostname``), no host configuration that could change a run (``gitconfig``,
``environment``, ``profile``). ``passwd`` and ``group`` are written per run."""
DEVICES: Final = ("null", "zero", "full", "random", "urandom", "tty")
"""Device nodes bound into the sandbox's own ``/dev`` (bubblewrap's ``--dev`` set)."""
MASKED_PATHS: Final = (
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/tpm",
    "/sys/devices/virtual/powercap",
)
"""Hidden (empty read-only tmpfs, or /dev/null over a file): runc's default masked paths."""
READ_ONLY_PATHS: Final = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
"""Bound read-only over themselves: runc's default read-only paths."""
INODE_BYTES: Final = 4096
"""Each file or folder counts as this many bytes against a tmpfs layer's size limit
(``nr_inodes`` = size / this): empty files cannot exhaust memory past the limit."""
PASSWD: Final = (
    "root:x:0:0:root:/root:/bin/sh\n"  # noqa: S105 - the passwd file, no password in it
    "sandbox:x:1000:1000:sandbox:/tmp:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
"""The sandbox's ``/etc/passwd`` (the host's users are none of its business)."""
GROUP: Final = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"
"""The sandbox's ``/etc/group``."""
_FORBIDDEN_BINDS: Final = ("/proc", "/dev")

MountStep = tuple[str, ...]
"""One step of a mount plan: ``(op, target, *args)``; target is a path of the view."""


def tmpfs_options(mode: str, size: int | None) -> str:
    """tmpfs mount data: ``mode``, and with a size its matching inode limit."""
    if size is None:
        return f"mode={mode}"
    return f"mode={mode},size={size},nr_inodes={max(size // INODE_BYTES, 64)}"


def _under(path: str, folder: str) -> bool:
    return folder in ("/", path) or path.startswith(folder + "/")


def mount_plan(
    entries: Sequence[tuple[str, str]],
    *,
    tmp_bytes: int | None,
    hidden: str,
    copies: Sequence[str] = (),
) -> tuple[MountStep, ...]:
    """The steps that build a sandbox's view of the host, in order (bubblewrap's setup
    operations are the model). ``entries``: ``(path, link)`` for every host path to
    show; ``link`` is the symlink it is (kept a symlink) or "" (bound read-only).
    A path below one already shown is skipped; ``hidden`` (the scratch root) gets an
    empty read-only tmpfs when a bound folder holds it. ``copies``: small host files
    (pieces of ``/etc``) copied into the view's own tmpfs, which is read-only when
    the command starts (a mount each would cost more than the copy, at set-up and at
    teardown).

    Steps: ``tmpfs TARGET DATA``, ``bind TARGET SOURCE`` (read-only, recursive),
    ``copy TARGET SOURCE``,
    ``dev TARGET`` (the host node of that name), ``symlink TARGET LINK``,
    ``file TARGET TEXT``, ``proc TARGET``, ``mask TARGET``, ``readonly TARGET``,
    ``hide TARGET``.

    Raises:
        ConfigError: a path is relative, holds a control character, is the host's
            root or ``/tmp``, or lies under ``/proc`` or ``/dev`` (the sandbox's own).
    """
    tmp = tmpfs_options("1777", tmp_bytes)
    steps: list[MountStep] = [
        ("tmpfs", "/", "mode=0755,size=1m,nr_inodes=4096"),
        ("tmpfs", "/dev", "mode=0755,size=64k,nr_inodes=64"),
        *(("dev", "/dev/" + name) for name in DEVICES),
        *(
            ("symlink", "/dev/" + name, link)
            for name, link in (
                ("fd", "/proc/self/fd"),
                ("stdin", "/proc/self/fd/0"),
                ("stdout", "/proc/self/fd/1"),
                ("stderr", "/proc/self/fd/2"),
            )
        ),
        ("tmpfs", "/dev/shm", tmp),  # noqa: S108 - the sandbox's own
        ("tmpfs", "/tmp", tmp),  # noqa: S108 - the sandbox's own
        ("file", "/etc/passwd", PASSWD),
        ("file", "/etc/group", GROUP),
    ]
    shown: list[str] = []
    for path, link in sorted([*entries, *((path, "\0") for path in copies)]):
        if not path.startswith("/") or any(ord(c) < 32 for c in path + link.strip("\0")):
            raise ConfigError(f"{path!r}: a sandbox bind must be an absolute, printable path")
        # Checked as the kernel will resolve it: `/tmp/..` is the root, `//dev` is `/dev`.
        normal = "/" + os.path.normpath(path).lstrip("/")
        if normal == "/":
            raise ConfigError(
                f"{path}: a sandbox never shows the host's whole root; name what it needs"
            )
        if normal == "/tmp":  # noqa: S108 - the sandbox's own
            raise ConfigError(f"{path}: the sandbox has its own tmp; name a folder in it")
        if any(_under(normal, folder) for folder in _FORBIDDEN_BINDS):
            raise ConfigError(f"{path}: the sandbox has its own {normal.split('/')[1]}")
        if any(_under(path, folder) for folder in shown):
            continue
        shown.append(path)
        if link == "\0":
            steps.append(("copy", path, path))
        else:
            steps.append(("symlink", path, link) if link else ("bind", path, path))
    steps.append(("proc", "/proc"))
    steps.extend(("mask", path) for path in MASKED_PATHS)
    steps.extend(("readonly", path) for path in READ_ONLY_PATHS)
    if any(_under(hidden, folder) for folder in shown):
        steps.append(("hide", hidden))
    return tuple(steps)
