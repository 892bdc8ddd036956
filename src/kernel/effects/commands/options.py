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
  after it);
- numbers are ASCII, finite and bounded (`number`): other scripts' digits, underscores,
  NaN, infinities and absurd values are a usage error (exit 2, one line), never a
  traceback.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = [
    "RESULTS_ROOT_HELP",
    "add_results_root",
    "add_verbosity",
    "number",
    "verbosity_of",
]

RESULTS_ROOT_HELP = "every output must lie inside this folder (default: results)"


def add_results_root(parser: argparse.ArgumentParser) -> None:
    """``--results-root DIR`` (and the hidden, deprecated ``--output-root``)."""
    # Imported here: `kernel --help` and `--version` never pay for the file helpers.
    from pathlib import Path

    from kernel.effects.files import DEFAULT_OUTPUT_ROOT

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


def number(
    *, integer: bool, minimum: float, maximum: float, exclusive_minimum: bool = False
) -> Callable[[str], float]:
    """An argparse ``type=``: a finite number within ``minimum .. maximum``.

    NaN, infinities, values outside the range (``1e308``, negatives) and, when
    ``integer``, non-integers are a usage error: exit 2 with one line, nothing run.
    """

    def parse(text: str) -> float:
        kind = "an integer" if integer else "a number"
        # int() and float() read any Unicode digit ("٣" is 3) and underscores ("1_0"):
        # a number on the command line is ASCII, as a reader sees it.
        if not text.isascii() or "_" in text:
            raise argparse.ArgumentTypeError(f"expected {kind} in ASCII digits, got {text!r}")
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
        low_ok = value > minimum if exclusive_minimum else value >= minimum
        if not math.isfinite(value) or not low_ok or value > maximum:
            low = f"> {minimum:g}" if exclusive_minimum else f">= {minimum:g}"
            raise argparse.ArgumentTypeError(
                f"expected a finite number {low} and <= {maximum:g}, got {text!r}"
            )
        return value

    parse.__name__ = "integer" if integer else "number"  # argparse names the type by this
    return parse
