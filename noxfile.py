"""Run the test suite on every Python 3.11-3.13 found on this machine."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import nox

nox.options.error_on_missing_interpreters = False
VERSIONS = ("3.11", "3.12", "3.13")


def _pyenv_versions() -> list[str]:
    """Installed pyenv versions matching VERSIONS (pyenv shims need them activated)."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.name.startswith(VERSIONS))


# A pyenv shim for python3.12 exists but fails unless 3.12 is an active version:
# activate every installed match so nox finds each interpreter through the shims.
_active = _pyenv_versions()
if _active:
    os.environ["PYENV_VERSION"] = ":".join(_active)


def _runs(version: str) -> bool:
    exe = shutil.which(f"python{version}")
    if exe is None:
        return False
    probe = subprocess.run([exe, "-c", "pass"], capture_output=True, check=False)
    return probe.returncode == 0


PYTHONS = [v for v in VERSIONS if _runs(v)]


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """Install the package with its dev extra and run pytest."""
    session.install("-e", ".[dev,testing]")
    session.run("pytest", "-q", *session.posargs)
