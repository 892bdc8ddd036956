"""One CLI dialect: conventions every verb keeps, checked by walking the parser tree.

- every option and positional has help (``argparse.SUPPRESS`` marks hidden deprecated
  aliases, the only exemption);
- the folder outputs are confined to is ``--results-root`` in every verb (older names
  are hidden aliases of it);
- durations on the command line are seconds, named ``--timeout``/``..._s`` (never ms);
- every verb accepts ``-q``/``--quiet`` and ``-v``/``--verbose``;
- every exit code has a one-line outcome (``corroborate``'s exit 3 included);
- outputs honour the umask (0644 under 022), still written atomically.
"""

from __future__ import annotations

import argparse
import ast
import errno
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import kernel
from kernel.effects.cli import build_parser, main
from kernel.effects.commands import selftest
from kernel.effects.files import atomic_write_bytes

ROOT = Path(__file__).resolve().parents[1]


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, (*path, name))


def _options() -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    for path, parser in _parsers(build_parser(full=True)):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            yield path, action


def _leaf_verbs() -> list[tuple[str, ...]]:
    leaves = []
    for path, parser in _parsers(build_parser(full=True)):
        if path and not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            leaves.append(path)
    return leaves


def test_every_option_has_help() -> None:
    """No option or positional of any verb is undocumented in --help."""
    missing = [
        f"{' '.join(path)} {action.option_strings or action.dest}"
        for path, action in _options()
        if not action.help
    ]
    assert missing == []


def test_every_verb_has_help_and_a_description_of_its_exit_codes() -> None:
    """Each leaf verb's parser has a help line in its parent's listing."""
    parser = build_parser(full=True)
    for path, sub in _parsers(parser):
        if path:
            assert sub.description or sub.format_help(), path


def test_results_root_is_one_name() -> None:
    """The confinement folder is --results-root everywhere; other names only hidden."""
    for path, action in _options():
        visible = action.help is not argparse.SUPPRESS
        for name in action.option_strings:
            if re.search(r"output-root|results-dir", name):
                assert not visible, (path, name)
        if action.dest == "results_root" and visible:
            assert "--results-root" in action.option_strings, path


def test_durations_are_seconds() -> None:
    """No option takes milliseconds; a timeout option says seconds in its help."""
    for path, action in _options():
        for name in action.option_strings:
            assert not name.endswith("-ms"), (path, name)
            if "timeout" in name and action.help is not argparse.SUPPRESS:
                assert "second" in str(action.help), (path, name)


@pytest.mark.parametrize("verb", [" ".join(p) for p in _leaf_verbs()])
def test_every_verb_takes_quiet_and_verbose(verb: str) -> None:
    """-q/--quiet and -v/--verbose parse on every verb (after it)."""
    sub = dict(_parsers(build_parser(full=True)))[tuple(verb.split())]
    names = {n for a in sub._actions for n in a.option_strings}
    assert {"-q", "--quiet", "-v", "--verbose"} <= names, verb
    counted = {n for a in sub._actions if isinstance(a, argparse._CountAction)
               for n in a.option_strings}  # fmt: skip
    assert {"-q", "-v"} <= counted, verb


def test_outputs_honour_the_umask(tmp_path: Path) -> None:
    """An atomic write leaves a file mode of 0666 & ~umask (0644 under 022), as `open`
    would; a private umask (077) still gives 0600."""
    for mask, expected in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        old = os.umask(mask)
        try:
            target = tmp_path / f"out-{mask:o}.json"
            atomic_write_bytes(target, b"{}\n")
        finally:
            os.umask(old)
        assert target.stat().st_mode & 0o777 == expected, oct(mask)


def test_corroborate_prints_one_outcome_line_for_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: `corroborate` exited 3 (no consensus) printing nothing; now one
    outcome line goes to stderr (stdout carries the report document)."""
    monkeypatch.chdir(tmp_path)
    code = main(["corroborate", "-n", "2", "--", "sh", "-c", 'echo "$KERNEL_RUN_INDEX"'])
    assert code == 3
    captured = capsys.readouterr()
    assert captured.err.startswith("no consensus")
    assert captured.err.count("\n") == 1
    assert captured.out.startswith("{")


def test_quiet_and_verbose_set_the_console(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """-q keeps only the outcome line; -v shows progress on a non-terminal stderr."""
    monkeypatch.chdir(tmp_path)
    argv = ["corroborate", "-n", "1", "--output", "results/r.json", "--", "echo", "x"]
    assert main(["-q", *argv]) == 0
    assert capsys.readouterr().err == ""
    assert main(["corroborate", "-v", *argv[1:]]) == 0
    assert re.search(r"^run \d+: ok", capsys.readouterr().err, flags=re.MULTILINE)


def test_verb_table_matches_what_modules_register() -> None:
    """VERBS names every verb each command module registers, and only those, with the
    help line the module gives it, so a verb run by name (which imports only its
    module) parses as in the full tree and `kernel --help` lists what each verb says."""
    from kernel.effects.cli import VERBS, command_modules

    registered: dict[str, tuple[str, str]] = {}
    for module in command_modules():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        module.register(sub)
        helps = {action.dest: action.help for action in sub._choices_actions}
        for verb in sub.choices:
            registered[verb] = (module.__name__.rsplit(".", 1)[1], str(helps[verb]))
    assert registered == VERBS


def test_a_verb_alone_builds_only_its_branch() -> None:
    """`kernel self-test` builds only the self-test branch; no verb or an unknown word
    builds one help line per verb (no branch)."""
    only = dict(_parsers(build_parser("self-test")))
    assert ("self-test",) in only
    assert ("guard",) not in only
    listed = dict(_parsers(build_parser("no-such-verb")))
    assert ("guard",) in listed
    assert listed[("guard",)].get_default("handler") is None  # a help line, no branch
    assert listed.keys() == dict(_parsers(build_parser())).keys()


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["-q", "--help"]])
def test_version_and_help_import_no_command_module(argv: list[str]) -> None:
    """`kernel --version` and `kernel --help` stay fast: no command module, and so none
    of the pipeline, the sandbox or the guard, is imported."""
    code = (
        "import sys\n"
        "from kernel.effects.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('kernel.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()[-1]
    loaded = ast.literal_eval(out)
    assert [m for m in loaded if m.startswith("kernel.effects.commands.")] == [
        "kernel.effects.commands.options"
    ]
    assert "kernel.effects.pipeline" not in loaded


def test_the_console_scripts_version_loads_no_parser() -> None:
    """The installed ``kernel --version`` answers before argparse or the CLI is loaded,
    with the same line argparse's version action prints."""
    code = (
        "import sys\n"
        "sys.argv = ['kernel', '--version']\n"
        "from kernel.effects.entry import main\n"
        "status = main()\n"
        "print(status, 'argparse' in sys.modules, 'kernel.effects.cli' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [f"kernel {kernel.__version__}", "0 False False"]


@pytest.mark.parametrize(
    ("raised", "code", "stderr"),
    [
        (KeyboardInterrupt(), 130, "kernel self-test: interrupted\n"),
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), 2, ""),
        (
            OSError(errno.ENOSPC, "No space left on device"),
            2,
            "kernel self-test: error: cannot write the output: No space left on device\n",
        ),
    ],
    ids=["ctrl-c", "closed pipe", "full device"],
)
def test_an_interrupt_or_a_lost_stdout_is_one_line_and_its_exit_code(
    raised: BaseException,
    code: int,
    stderr: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Ctrl-C is exit 130 with one line; an output that cannot be written is exit 2
    with one line, none when the reader closed the pipe (``| head`` chose to stop).
    (File-descriptor capture: the lost output's descriptor is pointed at /dev/null.)"""

    def handler(_args: argparse.Namespace) -> int:
        raise raised

    monkeypatch.setattr(selftest, "run", handler)
    assert main(["self-test"]) == code
    captured = capfd.readouterr()
    assert (captured.out, captured.err) == ("", stderr)


@pytest.mark.parametrize("columns", [None, "100", "37", "0", "-3", "wide", ""])
def test_help_is_as_wide_as_argparse_makes_it(
    monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    """The parsers give argparse's formatter the width it would compute itself
    (`shutil.get_terminal_size` less two), without importing shutil: ``COLUMNS`` when
    it is a positive number, else the terminal's, else 80. The help text is unchanged."""
    import shutil

    from kernel.effects.cli import _terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert _terminal_columns() == shutil.get_terminal_size().columns

    def helps() -> list[str]:
        top = build_parser("guard")
        verbs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
        return [top.format_help(), verbs.choices["guard"].format_help()]

    ours = helps()
    parser_class = type(build_parser("guard"))
    # argparse's own formatter, which asks shutil for the width.
    monkeypatch.setattr(parser_class, "_get_formatter", argparse.ArgumentParser._get_formatter)
    assert ours == helps()
