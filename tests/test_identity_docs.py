"""docs/identities.md is generated from the records and must be current."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from kernel.effects import identity_docs

ROOT = Path(__file__).resolve().parents[1]


def test_identity_docs_are_current(capsys: pytest.CaptureFixture[str]) -> None:
    """--check passes on the committed file (regenerate with the module when it fails)."""
    assert identity_docs.main(["--check", "--root", str(ROOT)]) == 0
    assert "current" in capsys.readouterr().out


def test_identity_docs_check_fails_when_stale(tmp_path: Path) -> None:
    """--check exits 1 for a missing or edited file, and writing makes it current."""
    assert identity_docs.main(["--check", "--root", str(tmp_path)]) == 1
    assert identity_docs.main(["--root", str(tmp_path)]) == 0
    target = tmp_path / "docs" / "identities.md"
    assert target.read_bytes() == identity_docs.generate()
    target.write_text(target.read_text("utf-8").replace("`run_id`", "`runid`"), "utf-8")
    assert identity_docs.main(["--check", "--root", str(tmp_path)]) == 1


def test_every_self_sealed_id_is_documented() -> None:
    """Each reference self-sealing id appears in the table as self-sealing."""
    text = identity_docs.generate().decode("utf-8")
    for name in ("run_id", "attempt_id", "operator_result_id", "binding_id", "binding_refusal_id"):
        row = next(line for line in text.splitlines() if f"| `{name}` |" in line)
        assert "| yes |" in row, row


def test_worked_examples_reproduce_with_the_stdlib_alone() -> None:
    """Each worked example's hashed bytes are canonical (stdlib definition) and hash, with
    hashlib, to the id the document names: a client needs nothing but the document."""
    text = (ROOT / "docs" / "identities.md").read_text("utf-8")
    pattern = re.compile(r"```json\n(?P<payload>[^\n]*)\n```\n\nsha256 = `(?P<sha>[0-9a-f]{64})`")
    found = list(pattern.finditer(text))
    assert len(found) >= 6
    for match in found:
        payload = match["payload"].encode("utf-8")
        value = json.loads(payload)
        canonical = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        assert canonical.encode("utf-8") == payload
        assert hashlib.sha256(payload).hexdigest() == match["sha"]
        line = text[match.end() :].split("\n", 1)[0]
        assert line.endswith(f"`{match['sha']}`."), line


def test_portability_rules_name_the_traps() -> None:
    """The rules a non-Python client needs are spelled out, traps included."""
    text = identity_docs.generate().decode("utf-8")
    for rule in (
        "Unicode code point",
        "\\u000b",
        "never `\\v`",
        "scalars are not a level",
        "integer-like keys",
        "not the escaped text",
        "duration_ms",
    ):
        assert rule in text, rule
