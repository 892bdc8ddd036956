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

__all__ = ["RESULTS_ROOT_HELP", "add_results_root"]

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
