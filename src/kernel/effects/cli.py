"""The `kernel` command: argument parsing and the single place where errors
become messages and exit codes.

Exit codes shared by every verb: 0 success, 1 a refusal / violation / mismatch
(the verb documents which), 2 unusable input or usage, 3 verb-specific
(``corroborate``: no consensus).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from kernel import __version__
from kernel.effects import console
from kernel.effects.commands.options import add_verbosity, verbosity_of
from kernel.errors import KernelError

__all__ = ["main"]

EXIT_USAGE = 2
EXIT_CODES = """exit codes (every verb):
  0  success (recorded, verified, match, consensus)
  1  refused / violations / replay mismatch (the reason codes on one line)
  2  unusable input or usage (one line naming the file and field; nothing written)
  3  no consensus (kernel corroborate)"""


def _command_modules() -> tuple[ModuleType, ...]:
    # Imported here, not at module level, so `import kernel.effects.cli` stays cheap.
    # Each verb module adds itself to this tuple (one line each).
    from kernel.effects.commands import bind as bind_cmd
    from kernel.effects.commands import corroborate as corroborate_cmd
    from kernel.effects.commands import decision as decision_cmd
    from kernel.effects.commands import guard as guard_cmd
    from kernel.effects.commands import ledger as ledger_cmd
    from kernel.effects.commands import promote as promote_cmd
    from kernel.effects.commands import report as report_cmd
    from kernel.effects.commands import run as run_cmd
    from kernel.effects.commands import schemas as schemas_cmd
    from kernel.effects.commands import selftest

    return (
        selftest,
        guard_cmd,
        report_cmd,
        decision_cmd,
        corroborate_cmd,
        bind_cmd,
        run_cmd,
        ledger_cmd,
        promote_cmd,
        schemas_cmd,
    )


class _Parser(argparse.ArgumentParser):
    """argparse exits with status 2 on usage errors already; keep the one-line form."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree (exposed for documentation and tests)."""
    parser = _Parser(
        prog="kernel",
        description="Evidence records, checks and reports.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_verbosity(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in _command_modules():
        module.register(sub)
    _add_verbosity_below(parser)
    return parser


def _add_verbosity_below(parser: argparse.ArgumentParser) -> None:
    # Every verb takes -q/-v, before or after it (one place, not one line per verb).
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                add_verbosity(child)
                _add_verbosity_below(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `kernel` command; returns the process exit code, never raises."""
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    console.set_verbosity(verbosity_of(args))
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except KernelError as e:
        print(f"kernel {args.command}: error: {e.diagnostics()}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"kernel {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
