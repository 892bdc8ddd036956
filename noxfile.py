"""Run the test suite on every Python 3.11-3.13 found on this machine."""

from __future__ import annotations

import shutil

import nox

nox.options.error_on_missing_interpreters = False
PYTHONS = [v for v in ("3.11", "3.12", "3.13") if shutil.which(f"python{v}")]


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """Install the package with its dev extra and run pytest."""
    session.install("-e", ".[dev,testing]")
    session.run("pytest", "-q", *session.posargs)
