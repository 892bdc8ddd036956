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
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.effects.cli import build_parser, main
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
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            yield path, action


def _leaf_verbs() -> list[tuple[str, ...]]:
    leaves = []
    for path, parser in _parsers(build_parser()):
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
    parser = build_parser()
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
    sub = dict(_parsers(build_parser()))[tuple(verb.split())]
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
    """VERB_MODULES names every verb each command module registers, and only those, so
    a verb run by name (which imports only its module) parses as in the full tree."""
    from kernel.effects.cli import VERB_MODULES, _command_modules

    registered: dict[str, str] = {}
    for module in _command_modules():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        module.register(sub)
        for verb in sub.choices:
            registered[verb] = module.__name__.rsplit(".", 1)[1]
    assert registered == VERB_MODULES


def test_a_verb_alone_builds_only_its_branch() -> None:
    """`kernel self-test` builds only the self-test branch; unknown words build all."""
    only = dict(_parsers(build_parser("self-test")))
    assert ("self-test",) in only
    assert ("guard",) not in only
    assert ("guard",) in dict(_parsers(build_parser("no-such-verb")))
