"""The `kernel` command: argument parsing and the single place where errors
become messages and exit codes.

Exit codes shared by every verb: 0 success, 1 a refusal / violation / mismatch
(the verb documents which), 2 unusable input or usage, 3 verb-specific
(``corroborate``: no consensus).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from kernel import __version__
from kernel.effects import console
from kernel.effects.exit_status import ExitStatus
from kernel.errors import KernelError

__all__ = ["main"]

EXIT_CODES = """exit codes (every verb):
  0  success (recorded, verified, match, consensus)
  1  refused / violations / replay mismatch (the reason codes on one line)
  2  unusable input or usage (one line naming the file and field; nothing written)
  3  no consensus (kernel corroborate)"""


# Verb -> (the module that registers it, its help line), in `kernel --help` order (no
# `typing.Final` here: importing `typing` alone would cost `kernel --version` 10%). A
# verb run by name imports only its own module: `kernel self-test` does not pay for the
# guard, git or the ledger, and `kernel --help` / `--version` import none (the help
# lines are here). A test holds this table and the modules' `register` together.
VERBS: dict[str, tuple[str, str]] = {
    "self-test": ("selftest", "run the built-in checks"),
    "guard": ("guard", "check imports and calls against the guard policy (ADR guard blocks)"),
    "report": ("report", "run evidence reports"),
    "decision": ("decision", "human decision records"),
    "corroborate": (
        "corroborate",
        "run a command N times in isolated sandboxes and report byte agreement",
    ),
    "bind": ("bind", "bind a candidate operator result to its search run (ADR-0232)"),
    "run": ("run", "run a config end to end: attempts, verifier, report, corroboration, replay"),
    "suite": (
        "suite",
        "judge model predictions on task instances (SWE-bench formats): resolved rates",
    ),
    "ledger": ("ledger", "the tamper-evident evidence ledger"),
    "stage": ("promote", "commit a candidate under refs/kernel/staged/"),
    "unstage": ("promote", "remove a staged ref"),
    "promote": (
        "promote",
        "fast-forward a branch to a verified, signed, accepted candidate",
    ),
    "attest": ("attest", "write an in-toto Statement v1 for an attempt's candidate"),
    "schemas": ("schemas", "the JSON Schemas of the records"),
}


# Literal module names (the guard refuses computed imports), loaded on first use.
_LOADERS: dict[str, Callable[[], ModuleType]] = {
    "selftest": lambda: importlib.import_module("kernel.effects.commands.selftest"),
    "guard": lambda: importlib.import_module("kernel.effects.commands.guard"),
    "report": lambda: importlib.import_module("kernel.effects.commands.report"),
    "decision": lambda: importlib.import_module("kernel.effects.commands.decision"),
    "corroborate": lambda: importlib.import_module("kernel.effects.commands.corroborate"),
    "bind": lambda: importlib.import_module("kernel.effects.commands.bind"),
    "run": lambda: importlib.import_module("kernel.effects.commands.run"),
    "suite": lambda: importlib.import_module("kernel.effects.commands.suite"),
    "ledger": lambda: importlib.import_module("kernel.effects.commands.ledger"),
    "promote": lambda: importlib.import_module("kernel.effects.commands.promote"),
    "attest": lambda: importlib.import_module("kernel.effects.commands.attest"),
    "schemas": lambda: importlib.import_module("kernel.effects.commands.schemas"),
}


def command_modules() -> tuple[ModuleType, ...]:
    """Every command module, imported (for documentation and tests)."""
    return tuple(_LOADERS[name]() for name in dict.fromkeys(m for m, _ in VERBS.values()))


def _verb_of(argv: Sequence[str]) -> str | None:
    """The verb named in ``argv`` (its first word that is not an option), if any."""
    return next((word for word in argv if not word.startswith("-")), None)


def _terminal_columns() -> int:
    """`shutil.get_terminal_size` ``().columns`` (``COLUMNS`` when it is a positive
    number, else the width of the terminal on standard output, else 80), without
    importing `shutil`: it loads bz2, lzma and zlib, about 2 ms of every run."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Parser(argparse.ArgumentParser):
    """argparse exits with status 2 on usage errors already; keep the one-line form."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(ExitStatus.USAGE, f"{self.prog}: error: {message}\n")

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse builds a formatter for every argument added (to check its metavar),
        # and a formatter given no width asks `shutil` (see `_terminal_columns`); the
        # width it would compute, given here, keeps the help text the same.
        width = _terminal_columns() - 2
        # typeshed's protocol names only ``prog``; every `argparse.HelpFormatter` takes it.
        return self.formatter_class(prog=self.prog, width=width)  # type: ignore[call-arg]


def build_parser(verb: str | None = None, *, full: bool = False) -> argparse.ArgumentParser:
    """The command tree: with ``full``, every verb's whole branch (for documentation and
    tests); else the branch of ``verb`` when it names a known verb, and otherwise one
    help line per verb (what ``kernel --help`` lists; no command module is imported)."""
    parser = _Parser(
        prog="kernel",
        description="Evidence records, checks and reports.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Imported here: a replayed `kernel guard` (see `main`) never pays for the options'
    # dependencies (orjson, the file helpers).
    from kernel.effects.commands.options import add_verbosity

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_verbosity(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    if full:
        for module in command_modules():
            module.register(sub)
    elif verb in VERBS:
        _LOADERS[VERBS[verb][0]]().register(sub)
    else:
        for name, (_module, help_line) in VERBS.items():
            sub.add_parser(name, help=help_line)
    _add_verbosity_below(parser)
    return parser


def _add_verbosity_below(parser: argparse.ArgumentParser) -> None:
    from kernel.effects.commands.options import add_verbosity

    # Every verb takes -q/-v, before or after it (one place, not one line per verb).
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                add_verbosity(child)
                _add_verbosity_below(child)


# Write errors of the standard output itself (a closed pipe, a full device).
_STDOUT_GONE = frozenset({errno.EPIPE, errno.ENOSPC, errno.EIO, errno.EDQUOT})


def _stdout_failed(verb: str, error: OSError) -> int:
    """One line on stderr; stdout pointed at /dev/null so the interpreter's final flush
    of what is still buffered cannot print "Exception ignored" after it."""
    import contextlib  # only on this rare path: `kernel --version` stays cheap

    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    if error.errno != errno.EPIPE:  # a reader that closed the pipe (`| head`) chose to
        with contextlib.suppress(OSError):
            print(f"kernel {verb}: error: cannot write the output: {error.strerror}",
                  file=sys.stderr)  # fmt: skip
    return ExitStatus.USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `kernel` command; returns the process exit code, never raises."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["guard"]:
        # An unchanged warm `kernel guard` is replayed before the library loads.
        from kernel.guard.fastpath import replay_cli

        replayed = replay_cli(words[1:])
        if replayed is not None:
            return replayed
    parser = build_parser(_verb_of(words))
    args = parser.parse_args(words)
    from kernel.effects.commands.options import verbosity_of

    console.set_verbosity(verbosity_of(args))
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        code = handler(args)
        sys.stdout.flush()
    except KernelError as e:
        print(f"kernel {args.command}: error: {e.diagnostics()}", file=sys.stderr)
        return ExitStatus.USAGE
    except OSError as e:
        if e.errno not in _STDOUT_GONE:
            raise
        return _stdout_failed(args.command, e)
    except KeyboardInterrupt:
        print(f"kernel {args.command}: interrupted", file=sys.stderr)
        return ExitStatus.INTERRUPTED
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
