"""Canonical JSON bytes and SHA-256 identities: the one module that owns them.

Definition (normative; golden vectors in ``fixtures/identity/`` pin it)::

    canonical_json(v) == json.dumps(v, ensure_ascii=False, sort_keys=True,
                                    separators=(",", ":")).encode("utf-8")
    sha256_hex(v)     == hashlib.sha256(canonical_json(v)).hexdigest()

The bytes are produced by orjson (``OPT_SORT_KEYS | OPT_STRICT_INTEGER``), which is
byte-identical to the definition on the values this module admits; a hypothesis
differential test holds the two together.

Rules enforced (each refusal is a `CanonicalizationError` naming the JSON path):

- only exact ``dict``, ``list``, ``tuple`` (encoded as a list), ``str``, ``int``,
  ``bool`` and ``None``; subclasses (str/int enums, dict subclasses) and every
  other type (floats, sets, bytes, datetimes, UUIDs, dataclasses, ...) are refused,
  because orjson and the stdlib would encode them differently or not portably;
- floats are refused outright: NaN/Infinity have no JSON form (orjson would write
  ``null``) and float text differs between languages;
- dict keys must be exact ``str``;
- ints must lie within +/-(2**53 - 1), the I-JSON range every parser reads exactly;
- strings must be valid Unicode (no lone surrogates);
- containers may nest at most `MAX_DEPTH` deep.

No other module may call ``json.dumps``, ``orjson`` or ``hashlib`` to make an
identity; the static guard enforces it. The SHA-256 of raw bytes (`sha256_bytes`,
`sha256_digest`, `Sha256Stream`) is defined in `kernel.records.digest`, which needs no
JSON encoder, and re-exported here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable
from typing import Any, Final

import orjson

from kernel.errors import CanonicalizationError

# Raw-bytes SHA-256 lives in its own small module (no orjson there: the guard imports
# only it); this module, the owner of every digest, re-exports it.
from kernel.records.digest import Sha256Stream, sha256_bytes, sha256_digest

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INT",
    "Sha256Stream",
    "canonical_json",
    "canonical_json_prevalidated",
    "is_canonical_str",
    "is_digest",
    "keyed_tag_matches",
    "sha256_bytes",
    "sha256_digest",
    "sha256_hex",
    "sha256_prevalidated",
    "sha256_python_json",
]

MAX_DEPTH: Final = 64
"""Deepest container nesting admitted (the top-level container is depth 1)."""

MAX_SAFE_INT: Final = 2**53 - 1
"""Largest magnitude of an admitted int (I-JSON, RFC 7493 section 2.2)."""

_OPTIONS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER
_CONTAINERS: Final = frozenset({dict, list, tuple})
_HEX_DIGITS: Final = b"0123456789abcdef"
_IDENTIFIER_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def canonical_json(value: object) -> bytes:
    """Return the canonical JSON bytes of ``value`` (see the module docstring).

    Raises:
        CanonicalizationError: ``value`` holds something that is not portable
            canonical JSON; the error names its JSON path.
    """
    if not _admissible(value):
        _locate_refusal(value, "$", 1)
    try:
        return orjson.dumps(value, option=_OPTIONS)
    except orjson.JSONEncodeError as e:
        # orjson refuses lone surrogates and out-of-range ints natively; find where.
        _locate_refusal(value, "$", 1)
        # Unreachable: _locate_refusal raises for every value orjson refuses (it admits
        # only exact str/int/bool/None/dict/list/tuple within range and depth).
        raise CanonicalizationError("$", f"not encodable: {e}") from e  # pragma: no cover


def sha256_hex(value: object) -> str:
    """SHA-256 of ``canonical_json(value)`` as 64 lowercase hex characters.

    Raises:
        CanonicalizationError: ``value`` is not portable canonical JSON (as
            `canonical_json`); the error names its JSON path.
    """
    return hashlib.sha256(canonical_json(value)).hexdigest()


def sha256_python_json(value: object) -> str:
    """SHA-256 hex of ``json.dumps(value, ensure_ascii=False, sort_keys=True,
    separators=(",", ":"))`` exactly as Python's stdlib writes it, floats included
    (``repr`` form; NaN and Infinity refused).

    This is the digest definition of IDKMesh v0.1 documents, whose work units and result
    manifests carry floats. Only importers use it, to check another tool's digests; a
    kernel identity is always `sha256_hex` (floats refused).

    Raises:
        CanonicalizationError: NaN/Infinity, a lone surrogate, or a non-JSON value.
    """
    try:
        text = json.dumps(
            value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
        )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
    except (TypeError, ValueError) as e:
        raise CanonicalizationError("$", f"not encodable as Python JSON: {e}") from e


def keyed_tag_matches(key: bytes, data: bytes, tag: bytes) -> bool:
    """Whether ``tag`` is the keyed BLAKE2b (16 bytes, lowercase hex) of ``data`` under
    ``key``, compared in constant time. Not an identity: the declared-tests collector
    checks each event a test process's runner signed with the key it was given."""
    expected = hashlib.blake2b(data, key=key, digest_size=16).hexdigest().encode()
    return hmac.compare_digest(expected, tag)


def canonical_json_prevalidated(
    value: object, *, default: Callable[[object], object] | None = None
) -> bytes:
    """Canonical bytes of a value whose shape typed construction already guarantees.

    This is the record fast path: a frozen record's fields were type-checked when it
    was built, so its identity payload needs no second walk. orjson still refuses what
    it refuses natively (lone surrogates, ints outside the 53-bit range); ``default``
    turns nested records into their payload dicts. Enum members encode as their value,
    exactly as the stdlib encodes a ``str``/``int`` enum.

    Only `kernel.records.codec` should call this; everything else uses `canonical_json`.

    Raises:
        CanonicalizationError: orjson refuses the value (a lone surrogate, an int
            outside the 53-bit range, a value ``default`` does not turn into JSON).
    """
    try:
        return orjson.dumps(value, default=default, option=_OPTIONS)
    except orjson.JSONEncodeError as e:
        raise CanonicalizationError("$", f"record payload is not encodable: {e}") from e


def sha256_prevalidated(value: object, *, default: Callable[[object], object] | None = None) -> str:
    """SHA-256 hex of `canonical_json_prevalidated`.

    Raises:
        CanonicalizationError: as `canonical_json_prevalidated`.
    """
    return hashlib.sha256(canonical_json_prevalidated(value, default=default)).hexdigest()


def is_canonical_str(value: object) -> bool:
    """True when ``value`` is an exact ``str`` that canonical JSON admits (valid Unicode:
    no lone surrogate). ASCII text, the common case, is answered without encoding."""
    if type(value) is not str:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_digest(value: object) -> bool:
    """True when ``value`` is exactly 64 lowercase hex characters (a bare SHA-256)."""
    # Deleting the hex digits leaves nothing: one C pass, no match object (a regex
    # fullmatch costs about a third more, and every record field of digests calls this).
    return (
        type(value) is str
        and len(value) == 64
        and value.isascii()
        and not value.encode("ascii").translate(None, _HEX_DIGITS)
    )


def _admissible(value: object, depth: int = 1) -> bool:
    """Fast structural check: False means "look closer", never a verdict by itself.

    One tight loop per container; the ``type(x) is ...`` chain is the cheapest
    per-item test CPython offers (measured against set/map/compress level passes,
    which cost 2-3x more here). Dict keys, lone surrogates and the int range are left
    to orjson, which refuses them natively (then `_locate_refusal` finds the path).
    """
    kind = type(value)
    if kind is dict:
        items: Any = value.values()  # type: ignore[attr-defined]
    elif kind is list or kind is tuple:
        items = value
    else:
        return kind is str or kind is int or kind is bool or value is None
    if depth > MAX_DEPTH:
        return False
    for item in items:
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is dict or kind is list or kind is tuple:
            if not _admissible(item, depth + 1):
                return False
            continue
        return False
    return True


def _child_path(path: str, key: str) -> str:
    if _IDENTIFIER_RE.fullmatch(key):
        return f"{path}.{key}"
    # Not an identifier: quote it so the path stays unambiguous (and printable).
    return f"{path}[{key.encode('unicode_escape').decode('ascii')!r}]"


def _locate_refusal(value: object, path: str, depth: int) -> None:
    """Slow, exact walk that raises at the first value that is not admitted."""
    kind = type(value)
    if kind is str:
        try:
            value.encode("utf-8")  # type: ignore[attr-defined]
        except UnicodeEncodeError as e:
            raise CanonicalizationError(path, "string holds a lone surrogate") from e
        return
    if kind is int:
        if not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:  # type: ignore[operator]
            raise CanonicalizationError(path, "int outside +/-(2**53 - 1)")
        return
    if kind is bool or value is None:
        return
    if kind is float:
        raise CanonicalizationError(path, "floats are not admitted in canonical JSON")
    if kind in _CONTAINERS and depth > MAX_DEPTH:
        raise CanonicalizationError(path, f"nesting deeper than {MAX_DEPTH}")
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise CanonicalizationError(
                    path, f"dict key {key!r} is {type(key).__name__}, not str"
                )
            _locate_refusal(key, f"{path}.<key>", depth)
            _locate_refusal(item, _child_path(path, key), depth + 1)
        return
    if kind is list or kind is tuple:
        for index, item in enumerate(value):  # type: ignore[arg-type]
            _locate_refusal(item, f"{path}[{index}]", depth + 1)
        return
    raise CanonicalizationError(
        path, f"{kind.__module__}.{kind.__qualname__} is not a canonical JSON type"
    )
