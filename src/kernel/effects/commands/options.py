"""One option dialect for every verb: shared option names, units and help.

Conventions (tests walk the parsers to hold every verb to them):

- every option has help; an option with a closed set of values lists them (argparse
  ``choices`` or a ``{a,b,c}`` metavar when the value is refused later with a reason
  code);
- every output is confined to ``--results-root`` (default ``results/``); old names
  (``--output-root``) stay accepted as hidden aliases;
- durations on the command line are seconds (``--timeout``), as in config files
  (``timeout_s``);
- ``-q``/``--quiet`` and ``-v``/``--verbose`` are accepted by every verb (before or
  after it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kernel.effects.files import DEFAULT_OUTPUT_ROOT

__all__ = ["RESULTS_ROOT_HELP", "add_results_root", "add_verbosity", "verbosity_of"]

RESULTS_ROOT_HELP = "every output must lie inside this folder (default: results)"


def add_results_root(parser: argparse.ArgumentParser) -> None:
    """``--results-root DIR`` (and the hidden, deprecated ``--output-root``)."""
    parser.add_argument(
        "--results-root",
        type=Path,
        default=Path(DEFAULT_OUTPUT_ROOT),
        help=RESULTS_ROOT_HELP,
    )
    parser.add_argument("--output-root", dest="results_root", type=Path, help=argparse.SUPPRESS)


def add_verbosity(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """``-q``/``--quiet`` and ``-v``/``--verbose`` (counted). On sub-commands the
    defaults are suppressed so a flag given before the verb is not reset after it."""
    default = 0 if top else argparse.SUPPRESS
    parser.add_argument(
        "-q",
        "--quiet",
        action="count",
        default=default,
        help="print only the outcome line (no file list, no progress)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default,
        help="show progress on stderr even when it is not a terminal",
    )


def verbosity_of(args: argparse.Namespace) -> int:
    """-v count minus -q count."""
    return int(getattr(args, "verbose", 0) or 0) - int(getattr(args, "quiet", 0) or 0)
