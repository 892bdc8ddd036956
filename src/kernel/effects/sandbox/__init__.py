"""Isolated, disposable runs of one command against a baseline directory.

`run_sandboxed` runs one command in a fresh sandbox and returns a `Capture`. Levels,
strongest first (`kernel.corroboration.consensus.Isolation`); the one actually obtained is recorded
in every capture:

``overlay``
    A helper (`nshelper`, ``python -I -S``, stdlib only) creates user, mount, PID,
    UTS, IPC (and, unless asked for, network) namespaces and, as PID 1 of the new PID
    namespace, builds a new root from a plan of mount steps (`spec.mount_plan`): an
    empty read-only tmpfs holding only an allow-list of the host bound read-only (the
    system folders, pieces of ``/etc``, this interpreter's prefixes, the kernel
    package, the program's folder, `SandboxSpec.ro_binds`); its own ``/dev`` (a few
    device nodes), ``/dev/shm`` and ``/tmp`` (size- and inode-limited tmpfs); a fresh
    ``/proc`` with the paths container runtimes mask hidden and the ones they keep
    read-only read-only; and the baseline as an overlay at `SANDBOX_WORKDIR` whose
    upper layer is a size-limited tmpfs. The host's sockets, ``/run``, ``/tmp``,
    homes and the scratch root are simply absent. The command runs
    chrooted there as `SANDBOX_UID`, never namespace root, with ``no_new_privs``,
    no supplementary groups, a fresh session keyring, a seccomp filter and resource
    limits. When the runner is root the command's
    *outer* uid is unprivileged (`outer_ids`) and the baseline's lower layer is an
    idmapped mount, so the command owns its tree without any host privilege.
``namespace_copy``
    The same namespaces around a private copy of the baseline (overlayfs unusable).
``copy``
    No namespaces: a private copy and a new session only. Weaker: the command can
    write anywhere its uid may, and a process that leaves the session survives.

Rules enforced:

- the baseline, other runs and everything outside the sandbox are unchanged by a run
  (``overlay``/``namespace_copy``); the command never has host privileges: it cannot
  write ``/proc/sys``, read root-only files or change the host's hostname; network is
  off unless ``network=True``: a network namespace cuts IP and abstract sockets, no
  host socket is in the view, and a seccomp filter (x86_64, aarch64) refuses
  ``socket(AF_UNIX)`` and datagram ``socketpair`` (a socket a config shows stays out
  of reach); io_uring and the keyring calls are refused whatever the network;
- the command's environment is explicit (`base_env` + the caller's names);
- limits (`Limits`): memory, processes, CPU, output, writable layer and ``/tmp``, each
  recorded with how it was applied; a hit the sandbox can see is a ``limit_exceeded``
  capture with its reason (`LimitKind`), never harm to the host;
- die with the runner: every helper process has ``PR_SET_PDEATHSIG=SIGKILL`` towards
  its parent, and the kernel kills every process of a PID namespace when its PID 1
  dies; a timeout kills the helper, hence the whole tree; when the command exits,
  PID 1 kills whatever it left behind;
- outputs stream (`capture`): hashed while read and spilled to the caller's
  ``spill_dir``; memory stays flat whatever the output size;
- patch capture is ``git diff --no-index`` with pinned options and environment
  (`PATCH_COMMAND`) between the baseline (``a/``) and the final tree (``b/``): the
  same end state gives the same bytes;
- scratch (`scratch`): a per-user root verified private before use; every scratch
  folder is locked and removed after capture, also on failure; one left by a killed
  runner is swept by the next;
- every run gets ``KERNEL_RUN_INDEX``; a `Variation` is applied per run and recorded.
"""

from __future__ import annotations

from kernel.effects.sandbox.runner import (
    FALLBACK_OUTER_ID,
    available_isolation,
    check_command_starts,
    copy_ids,
    outer_ids,
    run_sandboxed,
)
from kernel.effects.sandbox.scratch import checked_root, private_tempdir, scratch_root
from kernel.effects.sandbox.spec import (
    DEFAULT_PATH,
    PATCH_COMMAND,
    PATCH_ENV,
    SANDBOX_GID,
    SANDBOX_UID,
    SANDBOX_WORKDIR,
    AppliedLimit,
    Capture,
    CommandUid,
    LimitKind,
    LimitMechanism,
    Limits,
    SandboxSpec,
    Variation,
    applied_limits,
    base_env,
    limits_with,
    observation,
    read_output,
    recorded_limits,
    variation_env,
)

__all__ = [
    "DEFAULT_PATH",
    "FALLBACK_OUTER_ID",
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
    "applied_limits",
    "available_isolation",
    "base_env",
    "check_command_starts",
    "checked_root",
    "limits_with",
    "observation",
    "copy_ids",
    "outer_ids",
    "private_tempdir",
    "read_output",
    "recorded_limits",
    "run_sandboxed",
    "scratch_root",
    "variation_env",
]
