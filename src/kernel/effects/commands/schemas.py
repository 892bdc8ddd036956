"""`kernel schemas list|show`: the JSON Schemas this installed package ships.

Exit codes: 0 listed / shown; 2 no schema of that name (the line lists those that do).
"""

from __future__ import annotations

import argparse
import sys

from kernel.effects.exit_status import ExitStatus
from kernel.effects.schemas import load_schema, schema_names
from kernel.records.identity import canonical_json

__all__ = ["register", "run_list", "run_show"]


def run_list(args: argparse.Namespace) -> int:
    """One line per shipped schema: its name and its ``$id``."""
    for name in schema_names():
        print(f"{name}\t{load_schema(name).get('$id', '')}")
    return ExitStatus.OK


def run_show(args: argparse.Namespace) -> int:
    """Print one schema (canonical JSON, as shipped)."""
    sys.stdout.buffer.write(canonical_json(load_schema(args.name)) + b"\n")
    sys.stdout.flush()
    return ExitStatus.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``schemas`` verb."""
    parser = subparsers.add_parser("schemas", help="the JSON Schemas of the records")
    sub = parser.add_subparsers(dest="schemas_command", required=True)
    listing = sub.add_parser("list", help="list the shipped schemas (name and $id)")
    listing.set_defaults(handler=run_list)
    show = sub.add_parser("show", help="print one shipped schema")
    show.add_argument("name", help="schema name, as `kernel schemas list` prints it")
    show.set_defaults(handler=run_show)
