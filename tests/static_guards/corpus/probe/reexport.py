"""Helper (not itself guarded): re-exports a forbidden module's function."""
from subprocess import run

__all__ = ["run"]
