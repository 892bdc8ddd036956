"""Every exception `kernel` raises, in one place.

Each family also subclasses the builtin a caller would naturally catch
(`ValueError` for bad data, `OSError` for effects), so `except ValueError` keeps
working for code that does not know `kernel`. Validators never raise these for bad
*data*: they return a refusal record. Exceptions are for misuse (wrong types passed
by the programmer), for parsing documents at the edge, and for effects.
"""

from __future__ import annotations

__all__ = [
    "CanonicalizationError",
    "CommitBoundaryError",
    "ConfigError",
    "EffectError",
    "KernelError",
    "RecordError",
    "RefusedError",
    "UnsafeScratchError",
]


class KernelError(Exception):
    """Base class of every exception raised by `kernel`."""

    def diagnostics(self) -> str:
        """A one-line, human-readable description suitable for a CLI error line."""
        return str(self)


class CanonicalizationError(KernelError, ValueError):
    """A value cannot be encoded as portable canonical JSON.

    `path` is the JSON path of the offending value, e.g. ``$.attempts[2].score``.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class RecordError(KernelError, ValueError):
    """A document does not parse into a record: unknown, missing or mistyped field.

    `path` names the failing field, e.g. ``attempts[3].budget_charge.steps``.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


class ConfigError(KernelError, ValueError):
    """A configuration or policy file is unusable; the message names file and key."""


class EffectError(KernelError, OSError):
    """An effect (file, process, sandbox) failed."""


class UnsafeScratchError(EffectError):
    """A scratch folder is not private to the runner (wrong owner or mode, a symlink);
    it is refused and nothing is written through it."""


class RefusedError(KernelError, ValueError):
    """Raised by the `unwrap` helpers when a validator returned a refusal.

    `refusal` is the refusal record itself, so nothing is lost by raising.
    """

    def __init__(self, refusal: object, message: str) -> None:
        super().__init__(message)
        self.refusal = refusal


class CommitBoundaryError(RefusedError):
    """Raised by `kernel.commit_admission`'s raising helpers when a branch would cross the
    commit boundary without independent verification (the refusal is attached)."""
