"""`kernel guard`: check the source tree against the guard policy of the ADRs.

Rules this verb enforces:

- ``--config FILE`` (repeatable) names ``pyproject.toml`` or Markdown files; without
  it the policy is ``[tool.kernel.guard]`` of ``./pyproject.toml`` plus the ``guard``
  blocks of ``./docs/adr/*.md``; finding none is an error, never a pass;
- ``--src DIR`` is the import root (default ``src`` when it exists, else ``.``);
- ``--format text|json|sarif|github`` (default text); output goes to standard output;
- the cache lives in ``--cache-dir`` (default ``.kernel-guard-cache``) unless ``--no-cache``;
- exit 0: no finding; 1: findings; 2: unusable configuration (`ConfigError`, raised
  here and turned into the one-line message by `kernel.effects.cli.main`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kernel.errors import ConfigError
from kernel.guard import (
    DEFAULT_CACHE_DIR,
    FORMATS,
    check_tree,
    discover_policy,
    load_policy,
    render,
    tool_version,
)
from kernel.guard.output import render_error

__all__ = ["register", "run"]

EXIT_OK = 0
EXIT_VIOLATIONS = 1


def register(subparsers: Any) -> None:
    """Add the ``guard`` verb to the ``kernel`` command."""
    parser = subparsers.add_parser(
        "guard",
        help="check imports and calls against the guard policy (ADR guard blocks)",
        description=(
            "Check every module under --src against the guard policy. Exit 0 clean, "
            "1 findings, 2 unusable configuration."
        ),
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FILE",
        help="policy file: pyproject.toml or Markdown with ```guard blocks (repeatable)",
    )
    parser.add_argument("--src", metavar="DIR", help="import root (default: src if present)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format")
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        default=DEFAULT_CACHE_DIR,
        help=f"per-file result cache (default: {DEFAULT_CACHE_DIR})",
    )
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the check; returns 0 (clean) or 1 (findings); raises `ConfigError` otherwise.

    An unusable configuration is also written to standard output in the chosen format
    (a JSON ``error``, a SARIF run with ``executionSuccessful: false``, a GitHub
    ``::error``), so a consumer of that format never reads it as a clean run.
    """
    try:
        policy = load_policy(args.config) if args.config else discover_policy(Path.cwd())
        src = args.src if args.src is not None else ("src" if Path("src").is_dir() else ".")
        report = check_tree(src, policy, cache_dir=None if args.no_cache else args.cache_dir)
    except ConfigError as e:
        if args.format != "text":
            sys.stdout.write(render_error(str(e), args.format, tool_version()))
        raise
    sys.stdout.write(render(report, args.format, tool_version()))
    return EXIT_OK if report.ok else EXIT_VIOLATIONS
