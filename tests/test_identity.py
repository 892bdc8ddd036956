"""Tests for kernel.records.identity: the canonical JSON definition, its fast path, refusals."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import hashlib
import json
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.errors import CanonicalizationError, KernelError
from kernel.records.identity import (
    MAX_DEPTH,
    MAX_SAFE_INT,
    Sha256Stream,
    canonical_json,
    is_canonical_str,
    is_digest,
    sha256_bytes,
    sha256_hex,
)
from kernel.strategies import json_values

ROOT = Path(__file__).resolve().parents[1]
VECTORS = json.loads((ROOT / "fixtures" / "identity" / "vectors.json").read_text("ascii"))


def definition(value: object) -> bytes:
    """The normative stdlib definition, computed independently of kernel."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode(
        "utf-8"
    )


# --- golden vectors ---------------------------------------------------------------


def test_vectors_are_fresh() -> None:
    """The golden file is exactly what its generator writes (no hand edits, no drift)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "fixtures" / "identity" / "make_vectors.py"), "--check"],
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()


def test_vectors_cover_the_required_ground() -> None:
    """At least 40 accepted vectors, and refused ones for every JSON-expressible class."""
    assert len(VECTORS["accepted"]) >= 40
    names = {case["name"] for case in VECTORS["refused"]}
    assert {"float", "lone high surrogate", "depth 65 arrays", "64-bit int"} <= names


@pytest.mark.parametrize("case", VECTORS["accepted"], ids=lambda c: c["name"])
def test_accepted_vector(case: dict[str, Any]) -> None:
    """kernel's bytes equal the golden bytes, and the digest is recomputed with hashlib."""
    expected = bytes.fromhex(case["canonical_hex"])
    assert expected == definition(case["input"])
    assert canonical_json(case["input"]) == expected
    assert hashlib.sha256(expected).hexdigest() == case["sha256"]
    assert sha256_hex(case["input"]) == case["sha256"]


def test_vectors_hold_the_four_portability_traps() -> None:
    """Vectors that fail an implementation agreeing with the definition everywhere else:
    JavaScript's integer-key order, U+000B as ``\\v``, keys sorted by their escaped text,
    depth counted with scalars; plus raw UTF-8 inputs."""
    names = " | ".join(case["name"] for case in VECTORS["accepted"])
    for trap in ("integer-like keys", "vertical tab", "escaped text", "around a scalar"):
        assert trap in names, trap
    assert len(VECTORS["utf8_inputs"]) >= 8


@pytest.mark.parametrize("case", VECTORS["utf8_inputs"], ids=lambda c: c["name"])
def test_utf8_input_vector(case: dict[str, Any]) -> None:
    """A JSON text given as raw UTF-8 bytes, parsed then canonicalised, gives the golden
    bytes (spacing, escapes and key order of the text never reach an id)."""
    raw = bytes.fromhex(case["input_utf8_hex"])
    value = json.loads(raw.decode("utf-8"))
    expected = bytes.fromhex(case["canonical_hex"])
    assert canonical_json(value) == expected
    assert definition(value) == expected
    assert sha256_hex(value) == case["sha256"] == hashlib.sha256(expected).hexdigest()


@pytest.mark.parametrize("case", VECTORS["refused"], ids=lambda c: c["name"])
def test_refused_vector(case: dict[str, Any]) -> None:
    """Every refused vector raises CanonicalizationError at the recorded path."""
    with pytest.raises(CanonicalizationError) as info:
        canonical_json(case["input"])
    assert info.value.path == case["path"]


# --- refusals of Python-only values ---------------------------------------------------


class Colour(enum.Enum):
    """A plain enum (orjson would encode it by value)."""

    RED = 1


class Level(enum.StrEnum):
    """A str enum (a str subclass)."""

    HIGH = "high"


class Rank(enum.IntEnum):
    """An int enum (an int subclass)."""

    ONE = 1


class Key(str):
    """A str subclass."""


@dataclasses.dataclass
class Point:
    """A dataclass (orjson would encode it as an object)."""

    x: int


REFUSED_PYTHON: list[tuple[str, object, str]] = [
    ("int key", {1: "a"}, "$"),
    ("bool key", {True: "a"}, "$"),
    ("None key", {None: "a"}, "$"),
    ("tuple key", {(1,): "a"}, "$"),
    ("str subclass key", {Key("a"): 1}, "$"),
    ("enum", Colour.RED, "$"),
    ("str enum value", {"level": Level.HIGH}, "$.level"),
    ("int enum value", [Rank.ONE], "$[0]"),
    ("str subclass value", {"a": Key("x")}, "$.a"),
    ("dataclass", {"p": Point(1)}, "$.p"),
    ("datetime", {"at": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)}, "$.at"),
    ("date", datetime.date(2026, 1, 1), "$"),
    ("uuid", uuid.UUID(int=1), "$"),
    ("set", {1, 2}, "$"),
    ("frozenset", frozenset(), "$"),
    ("bytes", b"x", "$"),
    ("bytearray", bytearray(b"x"), "$"),
    ("dict subclass", collections.OrderedDict(a=1), "$"),
    ("list subclass", collections.UserList([1]), "$"),
    ("decimal", decimal.Decimal("1.5"), "$"),
    ("nan", float("nan"), "$"),
    ("infinity", {"x": [float("inf")]}, "$.x[0]"),
    ("complex", 1j, "$"),
    ("object", object(), "$"),
    ("nested float deep", {"a": [{"b": [{"c": 1.5}]}]}, "$.a[0].b[0].c"),
    ("key needing quotes", {"a b": 0.5}, "$['a b']"),
]


@pytest.mark.parametrize(
    ("value", "path"), [c[1:] for c in REFUSED_PYTHON], ids=[c[0] for c in REFUSED_PYTHON]
)
def test_refused_python_value(value: object, path: str) -> None:
    """Non-portable Python values raise CanonicalizationError naming their path."""
    with pytest.raises(CanonicalizationError) as info:
        canonical_json(value)
    assert info.value.path == path
    assert isinstance(info.value, KernelError)
    assert isinstance(info.value, ValueError)


def test_tuples_encode_as_lists() -> None:
    """A tuple is admitted and encodes exactly as the list with the same items."""
    assert canonical_json({"a": (1, ("x", None))}) == b'{"a":[1,["x",null]]}'


def test_int_limits_are_inclusive() -> None:
    """+/-(2**53 - 1) are admitted; one beyond either limit is refused."""
    assert canonical_json([MAX_SAFE_INT, -MAX_SAFE_INT]) == definition(
        [MAX_SAFE_INT, -MAX_SAFE_INT]
    )
    for bad in (MAX_SAFE_INT + 1, -MAX_SAFE_INT - 1):
        with pytest.raises(CanonicalizationError):
            canonical_json({"n": bad})


def test_depth_limit_is_exact() -> None:
    """MAX_DEPTH nested containers are admitted; one more is refused."""
    value: object = []
    for _ in range(MAX_DEPTH - 1):
        value = [value]
    assert canonical_json(value) == definition(value)
    with pytest.raises(CanonicalizationError):
        canonical_json([value])


def test_deep_python_structure_never_leaks_recursion_error() -> None:
    """A structure far deeper than any limit is refused cleanly, not with RecursionError."""
    value: object = {}
    for _ in range(10_000):
        value = {"k": value}
    with pytest.raises(CanonicalizationError):
        canonical_json(value)


# --- hypothesis: the fast path equals the definition -------------------------------------

unicode_text = st.text(st.characters(codec="utf-8"), max_size=40)
astral_text = st.text(st.characters(min_codepoint=0xE000, codec="utf-8"), max_size=8)
edge_ints = st.sampled_from([0, 1, -1, MAX_SAFE_INT, -MAX_SAFE_INT, 2**31, -(2**31), 2**32])
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)
    | edge_ints
    | unicode_text
    | astral_text
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=5).map(tuple)
        | st.dictionaries(unicode_text | astral_text, children, max_size=5)
    ),
    max_leaves=25,
)


VALUES_PER_EXAMPLE = 10


@settings(max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(values, min_size=VALUES_PER_EXAMPLE, max_size=VALUES_PER_EXAMPLE))
def test_orjson_path_equals_the_stdlib_definition(batch: list[object]) -> None:
    """canonical_json == the stdlib definition over 10,000 generated values per run.

    Values are drawn ten per example: hypothesis's per-example overhead dominates, and
    this keeps 10,000 distinct values affordable in every CI run.
    """
    for value in batch:
        assert canonical_json(value) == definition(value)
        assert sha256_hex(value) == hashlib.sha256(definition(value)).hexdigest()


BAD_LEAVES = st.sampled_from(
    [
        0.0,
        1.5,
        float("nan"),
        MAX_SAFE_INT + 1,
        -(2**63),
        "\ud800",
        "x\udfff",
        Colour.RED,
        Level.HIGH,
        Key("k"),
        b"",
        frozenset(),
        uuid.UUID(int=0),
        collections.OrderedDict(),
    ]
)


@st.composite
def value_with_one_bad_leaf(draw: st.DrawFn) -> tuple[object, str]:
    """A valid value with one non-portable leaf planted at a known path."""
    keys = draw(st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), min_size=0, max_size=6))
    bad = draw(BAD_LEAVES)
    value: object = bad
    path_parts: list[str] = []
    for key in reversed(keys):
        if draw(st.booleans()):
            siblings = draw(st.lists(st.integers(0, 9), max_size=3))
            value = [*siblings, value]
            path_parts.append(f"[{len(siblings)}]")
        else:
            value = {key: value, "~": draw(json_values(max_leaves=3))}
            path_parts.append(f".{key}")
    return value, "$" + "".join(reversed(path_parts))


@settings(max_examples=500, deadline=None)
@given(value_with_one_bad_leaf())
def test_every_refused_class_is_refused_at_its_path(case: tuple[object, str]) -> None:
    """Any non-portable leaf anywhere is refused with CanonicalizationError at its path."""
    value, path = case
    with pytest.raises(CanonicalizationError) as info:
        canonical_json(value)
    assert info.value.path == path


@settings(max_examples=300, deadline=None)
@given(json_values())
def test_canonical_bytes_parse_back_to_the_value(value: object) -> None:
    """Canonical bytes are valid JSON that parses back to an equal value."""

    def listify(v: object) -> object:
        if isinstance(v, tuple | list):
            return [listify(x) for x in v]
        if isinstance(v, dict):
            return {k: listify(x) for k, x in v.items()}
        return v

    assert json.loads(canonical_json(value)) == listify(value)


# --- digests ----------------------------------------------------------------------------


def test_sha256_bytes_and_stream_agree_with_hashlib() -> None:
    """Raw-byte digests and the streaming digest equal hashlib's."""
    data = b"abc" * 10_000
    assert sha256_bytes(data) == hashlib.sha256(data).hexdigest()
    stream = Sha256Stream()
    for i in range(0, len(data), 4096):
        stream.update(data[i : i + 4096])
    assert stream.hexdigest() == hashlib.sha256(data).hexdigest()
    assert stream.size == len(data)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("a" * 64, True),
        ("0123456789abcdef" * 4, True),
        ("A" * 64, False),
        ("a" * 63, False),
        ("a" * 65, False),
        ("sha256:" + "a" * 64, False),
        ("g" * 64, False),
        (None, False),
        (b"a" * 64, False),
    ],
)
def test_is_digest(value: object, ok: bool) -> None:
    """A digest is exactly 64 lowercase hex characters, nothing else."""
    assert is_digest(value) is ok


_HEX = st.text(st.sampled_from("0123456789abcdef"), min_size=64, max_size=64)
_NEAR_HEX = st.builds(
    lambda digest, at, char: digest[:at] + char + digest[at + 1 :],
    _HEX,
    st.integers(0, 64),
    st.sampled_from("0123456789abcdefABCDEFgx \n\u0660\uff10\u00e9\U0001f600"),
)


@given(st.one_of(_HEX, _NEAR_HEX, st.text(), st.binary(min_size=64, max_size=64)))
def test_is_digest_is_the_regular_expression(value: object) -> None:
    """For all values: a digest is exactly what ``[0-9a-f]{64}`` matches in full (ASCII
    digits only: fullwidth or Arabic-Indic digits are not hex)."""
    expected = type(value) is str and re.fullmatch("[0-9a-f]{64}", value) is not None
    assert is_digest(value) is expected


# -- branches: text with a lone surrogate, a refusal after a well-formed list -----------


def test_is_canonical_str_refuses_a_lone_surrogate_only() -> None:
    assert is_canonical_str("plain")
    assert is_canonical_str("caf\u00e9 \U0001f600")
    assert not is_canonical_str("a\ud800")
    assert not is_canonical_str(b"bytes")


def test_the_refusal_is_located_after_a_well_formed_list() -> None:
    with pytest.raises(CanonicalizationError) as info:
        canonical_json({"a": [1, "x", [True]], "b": 1.5})
    assert info.value.path == "$.b"
