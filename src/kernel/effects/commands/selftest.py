"""`kernel self-test`: run the library's built-in checks, each printed, exit 1 on any failure.

Each check is a ``(name, function)`` pair; a function returns None on success or
raises `SelfTestFailure` with what it saw. Other verbs' modules contribute checks
through ``CHECK_GROUPS``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from kernel.effects.commands.bind_selftest import BIND_CHECKS
from kernel.effects.commands.report_selftest import REPORT_CHECKS
from kernel.effects.exit_status import ExitStatus
from kernel.errors import CanonicalizationError, SelfTestFailure
from kernel.records.identity import canonical_json, sha256_hex

__all__ = ["CHECK_GROUPS", "register", "run"]

Check = tuple[str, Callable[[], None]]


def _identity_vector() -> None:
    value = {"b": [1, None, True], "a": "\u00e9\U0001f600", "\ue000": {}}
    expected = '{"a":"\u00e9\U0001f600","b":[1,null,true],"\ue000":{}}'.encode()
    got = canonical_json(value)
    if not (got == expected):
        raise SelfTestFailure(f"canonical bytes {got!r}")
    digest = sha256_hex(value)
    if not (len(digest) == 64):
        raise SelfTestFailure(digest)


def _identity_refuses_float() -> None:
    path = None
    try:
        canonical_json({"score": 0.5})
    except CanonicalizationError as e:
        path = e.path
    if path != "$.score":
        raise SelfTestFailure(f"a float was not refused at $.score (got {path})")


IDENTITY_CHECKS: tuple[Check, ...] = (
    ("canonical JSON matches the stdlib definition on a fixed vector", _identity_vector),
    ("canonical JSON refuses floats, naming the path", _identity_refuses_float),
)

CHECK_GROUPS: list[Sequence[Check]] = [IDENTITY_CHECKS]
CHECK_GROUPS.append(REPORT_CHECKS)
CHECK_GROUPS.append(BIND_CHECKS)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``self-test`` verb."""
    parser = subparsers.add_parser("self-test", help="run the built-in checks")
    parser.set_defaults(handler=run)


def run(_args: argparse.Namespace) -> int:
    """Run every check; print one line each; 0 when all pass, 1 otherwise."""
    failures = 0
    for group in CHECK_GROUPS:
        for name, check in group:
            try:
                check()
            except SelfTestFailure as e:
                failures += 1
                print(f"FAIL {name}: {e}")
            except Exception as e:
                failures += 1
                print(f"FAIL {name}: {type(e).__name__}: {e}")
            else:
                print(f"ok   {name}")
    print(f"self-test: {failures} failed" if failures else "self-test: all checks passed")
    return ExitStatus.REFUSED if failures else ExitStatus.OK
