"""Every exception `kernel` raises, in one place.

Each family also subclasses the builtin a caller would naturally catch
(`ValueError` for bad data, `OSError` for effects), so `except ValueError` keeps
working for code that does not know `kernel`. Validators never raise these for bad
*data*: they return a refusal record. Exceptions are for misuse (wrong types passed
by the programmer), for parsing documents at the edge, and for effects.
"""

from __future__ import annotations

__all__ = [
    "ArgumentTypeError",
    "ArgumentValueError",
    "CanonicalizationError",
    "CommitBoundaryError",
    "ConfigError",
    "EffectError",
    "FieldError",
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


class ArgumentTypeError(KernelError, TypeError):
    """A public function was called with an argument of the wrong type (misuse).

    Every pure ``build_*``/``check_*``/``verify_*``/``record_*``/``admit_*`` function
    raises this, and only this, for a wrong argument type (ADR-0232's binding functions
    refuse instead, as the reference does). The message names the function, the
    parameter path (``observations[2]``), what was expected and what was found.
    """

    def __init__(self, function: str, path: str, expected: str, found: str) -> None:
        super().__init__(f"{function}(): {path}: expected {expected}, got {found}")
        self.function = function
        self.path = path
        self.expected = expected
        self.found = found


class ArgumentValueError(KernelError, ValueError):
    """A public function was called with arguments of the right types that contradict
    each other or its other arguments (misuse, not bad data: bad data is refused).

    For example a candidate naming an attempt the report does not have. It subclasses
    ``ValueError``, so callers that caught the bare ``ValueError`` raised before keep
    working. Fields and message are those of `ArgumentTypeError`.
    """

    def __init__(self, function: str, path: str, expected: str, found: str) -> None:
        super().__init__(f"{function}(): {path}: expected {expected}, got {found}")
        self.function = function
        self.path = path
        self.expected = expected
        self.found = found


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


class FieldError(KernelError, ValueError):
    """A record cannot be constructed: one field breaks its invariant.

    The message names the record and the field (``WorkUnit.inputs: expected a tuple,
    got list``); ``record`` is empty when a validator could not know its record.
    `kernel_field` is the field path ``from_dict`` prefixes with the document path.
    """

    def __init__(self, field: str, reason: str, record: str = "") -> None:
        where = f"{record}.{field}" if record else field
        super().__init__(f"{where}: {reason}")
        self.kernel_field = field
        self.record = record
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
