"""Test environments: an interpreter plus hash-pinned dependencies, built once outside any
sandbox, cached by content digest, shown read-only to every sandbox.

A declared-tests check (or a suite instance) may name an environment::

    "environment": {"requirements": "requirements.txt"}      (the check's "python" builds it)
    "environment": {"digest": "<64 hex>"}                     (one already in the cache)

``requirements`` is a pip requirements file in which every requirement is pinned with
``--hash`` (a lock exported as such a file, e.g. ``uv export`` or ``pip-compile
--generate-hashes``, is one); it may carry pip's own options (``--index-url``,
``--no-index``, ``--find-links DIR`` relative to the file's folder).

Rules enforced:

- the environment's digest is SHA-256 over the interpreter's exact version and platform
  and the requirements file's bytes: it is what the run records (provenance, the run
  record's policy, the report), never the cache path;
- it is built once, outside any sandbox: ``python -m venv --without-pip``, then the
  kernel's own ``pip --python ENV install --require-hashes --no-deps
  --only-binary=:all: -r FILE`` (wheels only: no build backend runs), made readable
  by the sandbox's unprivileged user (a requirement without a hash, an unpinned one or
  one whose bytes do not match is refused by pip: the build fails with pip's last line,
  a `ConfigError` at load time, before anything runs); the build happens in a folder of
  its own and is renamed into place, so a concurrent build or a killed one never leaves
  a half environment where a run would use it;
- the cache root (`cache_root`) is the user's cache folder
  (``$XDG_CACHE_HOME/evidence-kernel/environments``, else
  ``~/.cache/evidence-kernel/environments``), or ``KERNEL_ENVIRONMENT_CACHE`` when set:
  shared by every run and results folder of the user, so an environment is built once
  per machine. It must lie outside the sandbox scratch root (sandboxes see the host
  read-only; they never write to it);
- a sandbox runs the environment's interpreter (``bin/python``) with ``-I`` and no
  network: nothing is installed at run time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs

from kernel.effects.run_config import relative
from kernel.errors import ConfigError, EffectError
from kernel.records.codec import Record, field_error
from kernel.records.identity import sha256_bytes, sha256_hex
from kernel.records.values import NonBlank, Omissible

if TYPE_CHECKING:  # the adapters import this module: no import cycle at run time
    from kernel.effects.adapters.base import ConfigSource

__all__ = [
    "CACHE_ENV",
    "EnvironmentEntry",
    "check_environment",
    "Environment",
    "built_environment",
    "cache_root",
    "prepare_environment",
]

CACHE_ENV: Final = "KERNEL_ENVIRONMENT_CACHE"
"""Overrides the cache root (an absolute folder)."""
_READY: Final = "kernel-environment.json"
_BUILD_TIMEOUT_S: Final = 900
_PATH: Final = "/usr/local/bin:/usr/bin:/bin"


@attrs.frozen(kw_only=True)
class Environment:
    """A built environment."""

    digest: str
    """SHA-256 over interpreter version, platform and requirements bytes."""
    root: Path
    """Its folder in the cache."""

    @property
    def python(self) -> Path:
        """Its interpreter."""
        return self.root / "bin" / "python"


def cache_root() -> Path:
    """Where environments are cached (module rules)."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "evidence-kernel" / "environments"


def built_environment(digest: str, *, root: Path | None = None) -> Environment:
    """The environment of ``digest`` already in the cache (built by `prepare_environment`,
    e.g. by a suite before it writes an instance's config).

    Raises:
        ConfigError: no complete environment of that digest is in the cache.
    """
    target = (root or cache_root()) / digest
    if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        raise ConfigError(f"environment: {digest!r} is not a SHA-256 digest")
    if not (target / _READY).is_file():
        raise ConfigError(f"environment: {digest[:12]} is not built in {target.parent}")
    return Environment(digest=digest, root=target)


def _run(argv: list[str], *, cwd: Path, what: str) -> str:
    env = {
        "PATH": _PATH,
        "LC_ALL": "C.UTF-8",
        "HOME": str(cwd),
        "PIP_NO_INPUT": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"):
        if name in os.environ:
            env[name] = os.environ[name]
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, timeout=_BUILD_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"environment: {what} could not run: {e}") from e
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        last = next((line for line in reversed(lines) if line.strip()), "no message")
        raise ConfigError(f"environment: {what} failed: {last.strip()[:300]}")
    return done.stdout.decode("utf-8", "replace")


def _readable(root: Path) -> None:
    """Make the environment readable by the sandbox's unprivileged user whatever the
    umask (``a+rX``): mkdtemp made its folder 0700."""
    for path in (root, *root.rglob("*")):
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        extra = 0o555 if path.is_dir() or mode & 0o111 else 0o444
        path.chmod(mode | extra)


def prepare_environment(
    python: str, requirements: Path, *, root: Path | None = None
) -> Environment:
    """The environment of ``python`` (a name on PATH) and ``requirements``, built into the
    cache if it is not there yet.

    Raises:
        ConfigError: the interpreter is not on PATH, or the build fails (an unhashed,
            unpinned or mismatching requirement, an unreachable index).
        EffectError: the requirements file or the cache cannot be read or written.
    """
    program = shutil.which(python, path=_PATH)
    if program is None or "/" in python:
        raise ConfigError(f"environment: interpreter {python!r} is not on PATH ({_PATH})")
    try:
        data = requirements.read_bytes()
    except OSError as e:
        raise EffectError(f"{requirements}: cannot read requirements: {e.strerror}") from e
    probe = "import platform, sys; print(sys.version); print(platform.platform())"
    version = _run([program, "-I", "-c", probe], cwd=requirements.parent, what=python)
    digest = sha256_hex({"python": python, "version": version, "requirements": sha256_bytes(data)})
    cache = root or cache_root()
    target = cache / digest
    if (target / _READY).is_file():
        return Environment(digest=digest, root=target)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=cache))
    except OSError as e:
        raise EffectError(f"{cache}: cannot create the environment cache: {e.strerror}") from e
    try:
        # No pip inside (seconds saved per build): the kernel's own pip installs into it.
        _run(
            [program, "-m", "venv", "--without-pip", str(building)],
            cwd=requirements.parent,
            what="venv",
        )
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(building / "bin" / "python"),
                "install",
                "--require-hashes",
                "--no-deps",
                "--only-binary=:all:",
                "-r",
                str(requirements.resolve()),
            ],
            cwd=requirements.parent,
            what="pip install --require-hashes",
        )
        _readable(building)
        (building / _READY).write_text(f'{{"digest": "{digest}"}}\n')
        try:
            building.rename(target)
        except OSError:
            # Another build of the same digest won the race: its result is the same.
            if not (target / _READY).is_file():
                raise
    except OSError as e:
        raise EffectError(f"{target}: cannot store the environment: {e.strerror}") from e
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return Environment(digest=digest, root=target)


@attrs.frozen(kw_only=True)
class EnvironmentEntry(Record):
    """A check's ``environment``: a requirements file to build, or a built digest."""

    requirements: Omissible[NonBlank] = attrs.field(default=None, validator=relative)
    """A pinned requirements file (relative to the config)."""
    digest: Omissible[NonBlank] = None
    """The digest of an environment built before."""

    def __attrs_post_init__(self) -> None:
        if (self.requirements is None) == (self.digest is None):
            raise field_error(
                "requirements", "an environment has exactly one of requirements or digest"
            )


def check_environment(
    source: ConfigSource, entry: EnvironmentEntry, at: str, python: str
) -> Environment:
    """A config check's ``environment`` entry, built (once, outside any sandbox) at load
    time: ``{"requirements": PATH}`` (relative to the config) or ``{"digest": HEX}``.

    Raises:
        ConfigError: the environment cannot be built or found (names the config file
            and key).
        EffectError: a file cannot be read or written.
    """
    where = f"{at}.environment"
    try:
        if entry.digest is not None:
            return built_environment(entry.digest)
        locator = typing.cast("str", entry.requirements)
        return prepare_environment(python, source.reads(source.base_dir / locator))
    except ConfigError as e:
        raise source.error(where, str(e)) from e
