"""Every exception `kernel` raises, in one place, all under `KernelError`.

Each family also subclasses the builtin a caller would naturally catch
(`ValueError` for bad data, `OSError` for effects), so `except ValueError` keeps
working for code that does not know `kernel`. Validators never raise these for bad
*data*: they return a refusal record. Exceptions are for misuse (wrong types passed
by the programmer), for parsing documents at the edge, and for effects. Every one
pickles and unpickles with its message and attributes (executors such as Dask carry
exceptions between processes), and no name is a standard library exception's.
"""

from __future__ import annotations

__all__ = [
    "CanonicalizationError",
    "CommitBoundaryError",
    "ConfigError",
    "DuplicateAdapterError",
    "EffectError",
    "FieldError",
    "GitRefusal",
    "GuardFailure",
    "KernelError",
    "ParameterTypeError",
    "ParameterValueError",
    "RecordError",
    "RefusedError",
    "RunFolderBusy",
    "SelfTestFailure",
    "UnsafeScratchError",
    "UntrustedConfig",
    "VerifierFailure",
]


def _rebuilt(kind: type[KernelError], args: tuple[object, ...], state: dict[str, object]) -> object:
    """An exception of ``kind`` with ``args`` and attributes ``state``, without running
    its ``__init__`` (whose parameters are not its ``args``)."""
    error = kind.__new__(kind, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class KernelError(Exception):
    """Base class of every exception raised by `kernel`."""

    def diagnostics(self) -> str:
        """A one-line, human-readable description suitable for a CLI error line."""
        return str(self)

    def __reduce__(self) -> tuple[object, ...]:
        # The default pickles ``args`` and calls ``__init__(*args)`` back, which breaks
        # every subclass whose ``__init__`` takes other parameters than its message.
        return (_rebuilt, (type(self), self.args, dict(vars(self))))


class ParameterTypeError(KernelError, TypeError):
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


class ParameterValueError(KernelError, ValueError):
    """A public function was called with arguments of the right types that contradict
    each other or its other arguments (misuse, not bad data: bad data is refused).

    For example a candidate naming an attempt the report does not have. It subclasses
    ``ValueError``, so callers that caught the bare ``ValueError`` raised before keep
    working. Fields and message are those of `ParameterTypeError`.
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
    """Raised by the `unwrap` helpers when a validator returned a refusal, and by a run
    whose calibration refused its instance (`refusal` is then the `Calibration`).

    `refusal` is the refusal record itself, so nothing is lost by raising.
    """

    def __init__(self, refusal: object, message: str) -> None:
        super().__init__(message)
        self.refusal = refusal


class CommitBoundaryError(RefusedError):
    """Raised by `kernel.corroboration.commit_admission`'s raising helpers when a branch
    would cross the commit boundary without independent verification (the refusal is attached)."""


class DuplicateAdapterError(KernelError, ValueError):
    """An adapter kind was registered twice in one registry (a wiring mistake)."""


class RunFolderBusy(EffectError):
    """Another live run holds the output folder."""


class GitRefusal(EffectError):
    """A compare-and-swap ref update lost: the ref was not what it was read as."""


class UntrustedConfig(EffectError):
    """The repository's configuration can run commands (or move the work tree)."""


class VerifierFailure(KernelError):
    """The verifier control path failed: no verification result exists (the attempt is
    recorded as a verification error, never as a verdict)."""


class SelfTestFailure(KernelError):
    """A `kernel self-test` check saw something other than what it expects.

    Checks never use ``assert`` (``python -O`` strips it, and a broken core would
    pass): they test with ``if`` and raise this; ``seen`` is what the check saw
    (printed after ``FAIL <name>:``).
    """

    def __init__(self, seen: object) -> None:
        super().__init__(str(seen))
        self.seen = seen


class GuardFailure(KernelError):
    """Findings of one guard rule on one module (their ``path:line:col`` lines), as a
    pytest item's failure."""
