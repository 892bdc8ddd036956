"""`kernel guard`: check the source tree against the guard policy of the ADRs.

Rules this verb enforces:

- ``--config FILE`` (repeatable) names ``pyproject.toml`` or Markdown files; without
  it the policy is ``[tool.kernel.guard]`` of ``./pyproject.toml`` plus the ``guard``
  blocks of ``./docs/adr/*.md``; finding none is an error, never a pass;
- ``--src DIR`` is the import root (default ``src`` when it exists, else ``.``);
  ``PATH`` arguments (files or folders, as pre-commit passes them) limit the *report*
  to those files; the whole import root is still discovered and checked for coverage;
- ``--exclude GLOB`` (repeatable) and the ``.gitignore`` files from the working
  directory down leave paths out; a folder holding ``pyvenv.cfg`` is never scanned;
- ``--format text|json|sarif|github`` (default text); output goes to standard output;
- ``--baseline FILE`` hides the findings a baseline lists; ``--write-baseline FILE``
  writes one for the current findings (adopting the guard on a repository with
  findings) and exits 0;
- the cache lives in ``--cache-dir`` (default ``.kernel-guard-cache``, which ignores
  itself with its own ``.gitignore``) unless ``--no-cache``;
- exit 0: no finding; 1: findings; 2: unusable configuration (`ConfigError`, raised
  here and turned into the one-line message by `kernel.effects.cli.main`).

Only the guard package is imported (lazily, when the verb runs), never the rest of the
library: ``kernel guard`` starts as fast as Python can import `kernel.guard`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kernel.effects.exit_status import ExitStatus

# Paths are strings on a check's way: `pathlib` (with `urllib.parse` and `ipaddress`,
# about 3 ms) is imported only by the trace and the codemod, which use it.
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["register", "run"]


_FORMATS = ("text", "json", "sarif", "github")
_CACHE_DIR = ".kernel-guard-cache"

POLICY_HELP = """\
policy format (TOML, in a ```guard block of any Markdown file, docs/adr/*.md by
default, or under [tool.kernel.guard] in pyproject.toml as [[tool.kernel.guard.rules]]):

  unguarded = ["pkg.scripts.*"]        # optional: modules deliberately left unchecked

  [[rules]]
  name = "pure-core"                   # unique; quoted in every finding
  modules = ["pkg", "pkg.*", "!pkg.shell.*"]   # dotted globs; !x excludes; last wins
  allow-imports = ["attrs", "pkg"]     # optional: if given, nothing else may be imported
  forbid-imports = ["subprocess", "os"]          # a package covers its submodules
  forbid-calls = ["open", "os.*", "time.time"]   # qualified names; builtins by bare name
  allow-typing-imports = ["pathlib"]   # optional: allowed under `if TYPE_CHECKING:`
  transitive = false                   # also report forbidden modules reached through
                                       # the project's own modules (needs forbid-imports)
  forbid-reflection = false            # also report reflection: locals(), frames (KG008)
  effects = false                      # follow calls into installed code (KG012)

  [[rules]]
  name = "layers"                      # a lower layer never imports a higher one
  layers = ["pkg", "pkg.api", ["pkg.a", "pkg.b"], "pkg.base"]   # highest first

Every module under --src must be covered by a rule or listed in unguarded; a rule, a
layer or an unguarded pattern that matches no module, a rule that allows what it
forbids, and an unknown key are configuration errors (exit 2, one line naming the key).

suppress one finding, with its reason (required):
  x = globals()  # kernel-guard: ignore[KG008] the lazy loader caches its own names

codes: KG001 forbidden-import, KG002 import-not-allowed, KG003 star-import,
KG004 forbidden-call, KG005 unresolvable-dynamic, KG006 typing-only-import,
KG007 transitive-import, KG008 reflective-reach, KG009 layer-violation,
KG010 unparseable, KG011 bad-suppression, KG012 effect-reach, KG013 runtime-event.
Full text: docs/guard.md (in the sdist).
"""


def register(subparsers: Any) -> None:
    """Add the ``guard`` verb to the ``kernel`` command."""
    parser = subparsers.add_parser(
        "guard",
        help="check imports and calls against the guard policy (ADR guard blocks)",
        description=(
            "Check every module under --src against the guard policy. Exit 0 clean, "
            "1 findings, 2 unusable configuration."
        ),
        epilog=POLICY_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="report only these files or folders (pre-commit passes the changed files)",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FILE",
        help="policy file: pyproject.toml or Markdown with ```guard blocks (repeatable)",
    )
    parser.add_argument("--src", metavar="DIR", help="import root (default: src if present)")
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="leave out paths (relative to --src) or names matching GLOB (repeatable)",
    )
    parser.add_argument("--format", choices=_FORMATS, default="text", help="output format")
    parser.add_argument("--output-format", dest="format", choices=_FORMATS, help="same as --format")
    parser.add_argument("--baseline", metavar="FILE", help="hide the findings FILE lists")
    parser.add_argument(
        "--write-baseline", metavar="FILE", help="write the current findings to FILE, exit 0"
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help=f"per-file result cache (default: {_CACHE_DIR} at the project root)",
    )
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="processes that parse uncached files (default: one per available core)",
    )
    parser.add_argument(
        "--add-suppressions",
        action="store_true",
        help="write a '# kernel-guard: ignore[CODE] REASON' comment at each current finding "
        "(needs --reason; every other byte of each file is kept)",
    )
    parser.add_argument("--reason", metavar="TEXT", help="the reason --add-suppressions writes")
    parser.add_argument(
        "--trace",
        action="store_true",
        help="run the command after -- (a Python program) under the dynamic guard: "
        "report forbidden run-time events with a guarded module on the stack (KG013)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the check; returns 0 (clean) or 1 (findings); raises `ConfigError` otherwise.

    Each PATH (or the working directory) belongs to the project found by searching
    upward from it (`kernel.guard.policy.find_project_root`); paths in the output and
    the baseline are relative to that root and the cache lives there, so the same
    command gives the same findings from any folder of the project.

    An unusable configuration is also written to standard output in the chosen format
    (a JSON ``error``, a SARIF run with ``executionSuccessful: false``, a GitHub
    ``::error``), so a consumer of that format never reads it as a clean run.
    """
    # Imported here: `kernel --help` and the other verbs never load the guard.
    from kernel.errors import ConfigError
    from kernel.guard import fastpath
    from kernel.guard.engine import tool_version
    from kernel.guard.output import render, render_error
    from kernel.guard.policy import find_project_root

    words = fastpath.take_words()
    if args.trace:
        return _trace(args)
    # Before anything is read: the record's racy window is taken from here (a file
    # edited while the run read it is never replayed, `fastpath.record`).
    started_ns = fastpath.now_ns()
    read: list[str] = []
    seen: dict[str, tuple[int, int, int]] = {}
    groups: dict[str, list[str]] = {}
    try:
        for path in args.paths or [os.getcwd()]:
            groups.setdefault(find_project_root(path), []).append(path)
        report = _check_groups(args, groups, read, seen)
        if args.add_suppressions or args.write_baseline:
            return _rewrite(args, report, list(groups))
        if args.baseline:
            # Imported here: a run without a baseline loads no JSON reader.
            from kernel.guard.baseline import apply_baseline, read_baseline

            report = apply_baseline(report, read_baseline(args.baseline))
    except ConfigError as e:
        if args.format != "text":
            sys.stdout.write(render_error(str(e), args.format, tool_version()))
        raise
    roots = list(groups)
    output = render(report, args.format, tool_version(), roots[0] if len(roots) == 1 else None)
    sys.stdout.write(output)
    code = ExitStatus.OK if report.ok else ExitStatus.REFUSED
    if words is not None and not args.no_cache:
        # What this run read, for `kernel.guard.fastpath` to replay it when unchanged:
        # the folders on the way up to each root (a policy added there moves the root),
        # the policy files, the tree, the baseline and the guard's own source.
        present = _read_for_root(args, groups, read)
        read += [str(p) for p in args.config]
        guard_dir = os.path.dirname(fastpath.__file__)
        read += [
            os.path.join(guard_dir, n) for n in sorted(os.listdir(guard_dir)) if n.endswith(".py")
        ]
        if args.baseline:
            read.append(args.baseline)
        fastpath.record(
            _cache_dir(args, roots[0]),
            fastpath.run_key(words, os.getcwd()),
            read,
            output,
            int(code),  # the cache is marshalled: a plain int
            present=present,
            seen=seen,
            started_ns=started_ns,
        )
    return code


def _read_for_root(
    args: argparse.Namespace, groups: dict[str, list[str]], read: list[str]
) -> list[str]:
    """What finding each project root read (`kernel.guard.policy.find_project_root`),
    added to ``read``: every folder's ``pyproject.toml``, ``docs/adr`` and its Markdown
    files from each start up to ``/`` (a policy or a project marker added above a root
    found without a policy moves it); each root's ``src`` (the default import root).
    Returns the ``.git`` markers, which count by existing only (git writes inside
    ``.git`` all the time). Not the folders themselves: a file created in one (a log,
    an editor's swap file) changes nothing."""
    from kernel.guard.policy import markdown_files

    present: list[str] = []
    read += [os.path.join(root, "src") for root in groups]
    for start in [os.getcwd(), *(os.path.realpath(p) for p in args.paths)]:
        folder, parent = start, os.path.dirname(start)
        while True:
            adr = os.path.join(folder, "docs/adr")
            read += [os.path.join(folder, "pyproject.toml"), adr, *markdown_files(adr)]
            present.append(os.path.join(folder, ".git"))
            if parent == folder:
                break
            folder, parent = parent, os.path.dirname(parent)
    return present


def _cache_dir(args: argparse.Namespace, root: str) -> str:
    """``--cache-dir`` as given, else the cache folder at the project root."""
    return str(args.cache_dir) if args.cache_dir else os.path.join(root, _CACHE_DIR)


def _check_groups(
    args: argparse.Namespace,
    groups: dict[str, list[str]],
    read: list[str],
    seen: dict[str, tuple[int, int, int]],
) -> Any:
    """One check per project root; the findings of all of them, in one report. What
    each read goes to ``read``, with its stat as read in ``seen`` (`check_tree`)."""
    from kernel.guard.discover import pure_path
    from kernel.guard.engine import check_tree
    from kernel.guard.model import GuardReport
    from kernel.guard.policy import discover_policy, load_policy

    violations: list[Any] = []
    checked = cached = 0
    for root, paths in groups.items():
        policy = load_policy(args.config) if args.config else discover_policy(root)
        if args.src is not None:
            src = pure_path(args.src)  # as `Path(args.src)` would show it
        else:
            src = os.path.join(root, "src")
            src = src if os.path.isdir(src) else root
        report = check_tree(
            src,
            policy,
            cache_dir=None if args.no_cache else _cache_dir(args, root),
            exclude=args.exclude,
            gitignore_from=root,
            only=paths if args.paths else None,
            visited=read,
            jobs=args.jobs,
            root=root,
            seen=seen,
        )
        violations.extend(report.violations)
        checked += report.files_checked
        cached += report.files_cached
    violations.sort(key=lambda v: v.sort_key())
    return GuardReport(violations=tuple(violations), files_checked=checked, files_cached=cached)


_TRACE_ENV = "KERNEL_GUARD_TRACE"
_SITECUSTOMIZE = """\
# Written by kernel guard --trace: installs the dynamic guard in this interpreter.
from kernel.effects.commands.guard import trace_child

trace_child()
"""


def _trace(args: argparse.Namespace) -> int:
    """``kernel guard --trace -- CMD``: run CMD with the audit hook in every Python
    process it starts (through ``sitecustomize``) and report what they recorded."""
    import json
    import subprocess
    import tempfile
    from pathlib import Path

    from kernel.errors import ConfigError
    from kernel.guard.engine import tool_version
    from kernel.guard.model import GuardReport
    from kernel.guard.output import render
    from kernel.guard.policy import discover_policy, find_project_root, load_policy
    from kernel.guard.trace import violations

    command = list(args.paths)
    if not command:
        raise ConfigError("--trace: give the command to run after -- (a Python program)")
    root = find_project_root(Path.cwd())
    configs = [str(Path(p).resolve()) for p in args.config]
    load_policy(configs) if configs else discover_policy(root)  # refuse a bad one first
    with tempfile.TemporaryDirectory(prefix="kernel-guard-trace-") as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tmp, env.get("PYTHONPATH", "")]))
        env[_TRACE_ENV] = json.dumps({"root": str(root), "config": configs, "out": tmp})
        try:
            proc = subprocess.run(command, env=env, check=False)
        except OSError as e:
            raise ConfigError(f"--trace: cannot run {command[0]!r}: {e.strerror}") from e
        found: list[tuple[str, str, int, str, str, str]] = []
        for record in sorted(Path(tmp).glob("trace-*.json")):
            found.extend(tuple(item) for item in json.loads(record.read_text(encoding="utf-8")))
    report = GuardReport(
        violations=tuple(violations(found, str(root))), files_checked=0, files_cached=0
    )
    sys.stdout.write(render(report, args.format, tool_version(), root))
    if report.violations:
        return ExitStatus.REFUSED
    return proc.returncode


def trace_child() -> None:
    """In a process started by ``kernel guard --trace``: install the audit hook for the
    project's policy and write what it records when the process exits."""
    import atexit
    import json
    from pathlib import Path

    from kernel.guard.policy import discover_policy, load_policy
    from kernel.guard.trace import Tracer

    setting = json.loads(os.environ[_TRACE_ENV])
    policy = (
        load_policy(setting["config"]) if setting["config"] else discover_policy(setting["root"])
    )
    tracer = Tracer(policy)
    stop = tracer.install()

    def dump() -> None:
        stop()
        out = Path(setting["out"]) / f"trace-{os.getpid()}.json"
        out.write_text(json.dumps(tracer.findings), encoding="utf-8")

    atexit.register(dump)


def _rewrite(args: argparse.Namespace, report: Any, roots: list[str]) -> int:
    """``--add-suppressions`` or ``--write-baseline``: record today's findings."""
    from kernel.guard.baseline import write_baseline

    if args.add_suppressions:
        return _add_suppressions(args, report, roots)
    write_baseline(args.write_baseline, report)
    sys.stdout.write(f"wrote {len(report.violations)} findings to {args.write_baseline}\n")
    return ExitStatus.OK


def _add_suppressions(args: argparse.Namespace, report: Any, roots: list[str]) -> int:
    """Write a suppression with ``--reason`` at every finding (through libcst, so every
    other byte stays); exit 0 when every finding took one, 1 when some could not."""
    from pathlib import Path

    from kernel.errors import ConfigError
    from kernel.guard.model import ViolationCode

    if not (args.reason or "").strip():
        raise ConfigError("--add-suppressions: give the reason with --reason TEXT")
    try:
        import libcst  # noqa: F401 - the codemod edits through it
    except ImportError as e:
        raise ConfigError("--add-suppressions needs libcst (pip install libcst)") from e
    wanted: dict[Path, dict[int, set[str]]] = {}
    for v in report.violations:
        if not v.rule or v.code is ViolationCode.BAD_SUPPRESSION:
            continue  # an unparseable file or a bad suppression cannot be suppressed
        target = next((Path(r, v.path) for r in roots if Path(r, v.path).is_file()), Path(v.path))
        wanted.setdefault(target, {}).setdefault(v.line, set()).add(v.code.value)
    with _collecting():
        added, left = _suppress_each(wanted, args.reason)
    for line in left:
        sys.stdout.write(line + "\n")
    sys.stdout.write(f"added {added} suppressions in {len(wanted)} files\n")
    return ExitStatus.REFUSED if left else ExitStatus.OK


def _suppress_each(wanted: dict[Path, dict[int, set[str]]], reason: str) -> tuple[int, list[str]]:
    """Write the suppressions of ``wanted``, file by file: how many were added, and a
    line for each file or finding left without one."""
    from kernel.effects.files import atomic_write_bytes, read_input
    from kernel.errors import EffectError
    from kernel.guard.codemod import add_suppressions

    added = 0
    left: list[str] = []
    for path, lines in sorted(wanted.items()):
        try:
            source = read_input(path, what="source file").decode("utf-8")
            text, missed = add_suppressions(source, lines, reason)
            if text != source:
                atomic_write_bytes(path, text.encode("utf-8"))
        except (EffectError, UnicodeDecodeError, ValueError) as e:
            left.append(f"{path}: not changed: {e}")
            continue
        added += len(lines) - len(missed)
        left += [f"{path}:{line}: no place for a suppression comment" for line in missed]
    return added, left


@contextlib.contextmanager
def _collecting() -> Iterator[None]:
    """The cyclic collector on for the block, then as it was. The console script runs a
    guard check without it (`kernel.effects.entry`: its objects live until the process
    ends), but libcst's trees hold reference cycles: a codemod would keep every file's
    until the end (twice the memory over Django's 74 files with findings)."""
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was:
            gc.disable()
