"""Shared primitives: field validators, spans, budget charges, version pairs, refusals.

Rules enforced at construction (a record that exists is well formed):

- a digest is exactly 64 lowercase hex characters (bare SHA-256, no prefix);
- strings are exact ``str`` holding valid Unicode (no lone surrogate), so every record
  can be encoded as canonical JSON and an id computed over it never raises;
- ints are exact ints (``bool`` is not an int) inside +/-(2**53 - 1), and counts are
  non-negative;
- collections are tuples, never lists;
- ``(name, version)`` pairs are non-empty strings, unique and sorted ascending;
- a `SourceSpan` has ``0 <= start <= end``.

Refusals: every validator in `kernel` returns ``Result | <Domain>Refusal``; each
refusal class subclasses `Refusal` and carries a closed ``StrEnum`` of reason codes.
`unwrap` is the thin raising helper for callers who prefer exceptions.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from kernel.codec import Identity, Record, field_error
from kernel.errors import RefusedError
from kernel.identity import MAX_SAFE_INT, is_canonical_str, is_digest

__all__ = [
    "BudgetCharge",
    "Refusal",
    "SourceSpan",
    "VersionPairs",
    "digest",
    "enum_member",
    "exact",
    "non_negative",
    "optional_digest",
    "tuple_of",
    "unwrap",
    "version_pair_problem",
    "version_pairs",
]

T = TypeVar("T")

VersionPairs = tuple[tuple[str, str], ...]
"""Sorted, unique ``(name, version)`` pairs, e.g. ``schema_versions``."""


def digest(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: 64 lowercase hex characters."""
    if not is_digest(value):
        raise field_error(attribute.name, f"not a 64-char lowercase hex digest: {value!r}")


def optional_digest(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: a digest or None."""
    if value is not None:
        digest(instance, attribute, value)


def _text_problem(value: object) -> str | None:
    """Why an exact ``str`` cannot enter canonical JSON, or None."""
    if is_canonical_str(value):
        return None
    return "string holds a lone surrogate (not valid Unicode)"


def exact(kind: type) -> Callable[[object, attrs.Attribute[Any], object], None]:
    """attrs validator: ``type(value) is kind`` (so ``bool`` never passes as ``int``);
    a ``str`` must also be valid Unicode (no lone surrogate)."""

    def check(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if type(value) is not kind:
            raise field_error(
                attribute.name, f"expected {kind.__name__}, got {type(value).__name__}"
            )
        if kind is str and (problem := _text_problem(value)) is not None:
            raise field_error(attribute.name, problem)

    return check


def non_negative(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: an exact int in ``0 .. 2**53 - 1`` (canonical JSON's range)."""
    if type(value) is not int or not 0 <= value <= MAX_SAFE_INT:
        raise field_error(attribute.name, f"expected an integer in 0..2**53-1, got {value!r}")


def _safe_int(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: an exact int inside +/-(2**53 - 1) (any sign)."""
    if type(value) is not int or not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
        raise field_error(
            attribute.name, f"expected an integer within +/-(2**53 - 1), got {value!r}"
        )


def enum_member(kind: type[enum.Enum]) -> Callable[[object, attrs.Attribute[Any], object], None]:
    """attrs validator: a member of ``kind`` (not its bare value)."""

    def check(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if type(value) is not kind:
            raise field_error(attribute.name, f"expected a {kind.__name__} member, got {value!r}")

    return check


def tuple_of(kind: type) -> Callable[[object, attrs.Attribute[Any], object], None]:
    """attrs validator: a tuple whose items are all exactly ``kind``."""

    def check(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if type(value) is not tuple:
            raise field_error(attribute.name, f"expected a tuple, got {type(value).__name__}")
        for index, item in enumerate(value):
            if type(item) is not kind:
                raise field_error(
                    f"{attribute.name}[{index}]",
                    f"expected {kind.__name__}, got {type(item).__name__}",
                )
            if kind is str and (problem := _text_problem(item)) is not None:
                raise field_error(f"{attribute.name}[{index}]", problem)

    return check


def version_pair_problem(value: object) -> str | None:
    """Why ``value`` is not a valid `VersionPairs`, or None when it is.

    Shared by the record validator and by validators that must *refuse* (not
    raise on) bad pairs passed as plain arguments.
    """
    if type(value) is not tuple:
        return f"expected a tuple of (name, version) pairs, got {type(value).__name__}"
    previous: str | None = None
    for index, pair in enumerate(value):
        if (
            type(pair) is not tuple
            or len(pair) != 2
            or type(pair[0]) is not str
            or type(pair[1]) is not str
            or not pair[0]
            or not pair[1]
        ):
            return f"[{index}] is not a (name, version) pair of non-empty strings"
        if previous is not None and pair[0] <= previous:
            return f"[{index}] {pair[0]!r} is duplicated or out of order (names must ascend)"
        previous = pair[0]
    return None


def version_pairs(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: sorted, unique ``(name, version)`` pairs."""
    problem = version_pair_problem(value)
    if problem is not None:
        raise field_error(attribute.name, problem)


@attrs.frozen(kw_only=True)
class SourceSpan(Record):
    """A span of source text cited as evidence.

    Nested form (how it enters every identity): ``{"text", "start", "end",
    "sentence_index"}``. Order and duplicates of spans are meaningful.
    """

    text: str = attrs.field(validator=exact(str))
    """The cited text."""
    start: int = attrs.field(validator=non_negative)
    """Start offset (characters), ``0 <= start <= end``."""
    end: int = attrs.field(validator=non_negative)
    """End offset (characters, exclusive)."""
    sentence_index: int | None = attrs.field(default=None)
    """Index of the sentence the span is in, when known."""

    def __attrs_post_init__(self) -> None:
        if self.start > self.end:
            raise field_error("end", f"span end {self.end} is before start {self.start}")
        if self.sentence_index is not None:
            non_negative(self, attrs.fields(SourceSpan).sentence_index, self.sentence_index)


@attrs.frozen(kw_only=True)
class BudgetCharge(Record):
    """What one candidate attempt declares it consumes. Nested form: both fields."""

    candidates: int = attrs.field(validator=_safe_int)
    """Candidates charged (validators require > 0 where the ADR does)."""
    steps: int = attrs.field(validator=_safe_int)
    """Steps charged."""


@attrs.frozen(kw_only=True)
class Refusal(Record):
    """Base of every refusal: closed reason codes and prose that never enters an id.

    Subclasses add their own self-sealed id field and the identities they could
    validate without guessing (else None). A refusal is never a partial result.
    """

    __identity__ = Identity()

    reason_codes: tuple[enum.StrEnum, ...]
    """Closed, deterministic reason codes (one per failed check, check order)."""
    explanation: str = attrs.field(default="", validator=exact(str))
    """Human prose; never part of an identity."""


def unwrap(outcome: T | Refusal) -> T:
    """Return ``outcome`` unless it is a refusal, which is raised as `RefusedError`.

    Raises:
        RefusedError: carrying the refusal record itself.
    """
    if isinstance(outcome, Refusal):
        codes = ", ".join(str(code) for code in outcome.reason_codes)
        raise RefusedError(outcome, f"refused ({codes}): {outcome.explanation}")
    return outcome
