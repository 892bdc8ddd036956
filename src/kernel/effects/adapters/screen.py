"""The static screen of a candidate: its Python files read by kernel's own guard.

The built-in required check ``candidate-screen`` (issue 18 item 5, ADR-0004 §1c)
rebuilds the text of every Python file a patch adds or changes (the baseline file plus
the patch's hunks, `kernel.effects.adapters.patch.apply_change`; nothing is imported
or run) and checks it with `kernel.guard` against the candidate-surface policy shipped
as package data (``kernel/policies/candidate-surface.toml``: test-framework internals,
interpreter hooks, frame and ``gc`` introspection, native code, ``builtins`` patching,
environment sniffing, dynamic code). This module adds what a call policy cannot say:

- ``object-internals``: assigning or deleting ``__code__``, ``__class__``, ``__eq__``
  and the like on an object (``f.__code__ = g.__code__``, ``setattr(o, "__eq__", ...)``);
- ``module-patching``: assigning or deleting an attribute of an imported name
  (``sys.stdout = ...``, ``unittest.TestCase.run = ...``, ``setattr(test_stats, ...)``):
  monkeypatching is how a candidate bends code it does not own;
- ``builtins-patching``: any use of the name ``__builtins__``;
- ``environment-sniffing``: a string literal naming the verifier's variables
  (``KERNEL_``), ``/proc/``, ``/etc/hostname``, a path the sandbox does not show
  (``/run``, ``/home``, ``/sys/``) or an attribute that tells a verifier from a user
  when reached by string (``orig_argv``, ``environ``, ``getpid``...);
- ``guard-suppression``: a ``# kernel-guard: ignore`` comment (the guard would honour
  it; a candidate does not get to silence its own screen);
- ``test-recognition``: an identifier or a string naming a declared test (its function,
  its class or its module's name; the ids are known when the screen runs): code that
  recognises the test it is judged by can bend only that test, which known-answer
  controls never see (the test modules themselves are exempt);
- ``unscreenable``: a Python file whose text cannot be rebuilt exactly (the patch does
  not apply to the baseline, a binary change, a file too large); fail closed.

A file the patch adds or changes under another name than ``.py`` whose text is Python
code (it parses, and it imports, defines or calls something: ``median_table.txt`` run
through ``exec`` or ``pickle``) is screened as Python too: tree code can read and run
it, and a name is no promise of what a file holds.

A finding makes the check ``inconclusive`` with reason ``suspicious_code``: never a
pass, whatever the tests say, so the candidate is never ``verified``; a signed human
decision whose rationale names every finding id (``rule:path:line``) may still promote
it (`kernel.decide.gate`, P4). Findings are recorded in the run record's `CheckRun`.
"""

from __future__ import annotations

import ast
import collections
import functools
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from kernel.effects.adapters.patch import FileChange, apply_change
from kernel.guard import Policy, ViolationCode, check_source, load_policy
from kernel.guard.syntax import parse_module
from kernel.run.record import SCREEN_CHECK_ID, ScreenFinding

__all__ = [
    "MAX_FINDINGS",
    "POLICY_PATH",
    "SCREEN_CHECK",
    "candidate_policy",
    "declared_names",
    "screen_changes",
    "screen_source",
]

SCREEN_CHECK: Final = SCREEN_CHECK_ID
POLICY_PATH: Final = Path(__file__).resolve().parents[2] / "policies" / "candidate-surface.toml"
"""The candidate-surface policy (package data)."""
MAX_FINDINGS: Final = 200
"""Findings kept per check (the first, in path and line order): a record stays small."""
_MAX_FILE_BYTES: Final = 4 << 20
_PYTHON: Final = (".py", ".pyw")
_OBJECT_INTERNALS: Final = frozenset(
    {
        "__code__", "__class__", "__defaults__", "__kwdefaults__", "__globals__",
        "__closure__", "__dict__", "__bases__", "__builtins__", "__eq__", "__ne__",
        "__hash__", "__bool__", "__getattribute__", "__getattr__", "__setattr__",
        "__import__", "__build_class__", "__spec__", "__loader__",
    }
)  # fmt: skip
_SNIFFED: Final = ("KERNEL_", "/proc/", "/etc/hostname")
# Paths whose presence tells a sandbox from a user's machine (the sandbox shows no /run
# and no homes), and attribute names reached by string (operator.attrgetter("orig_argv")).
_SNIFFED_PREFIXES: Final = ("/run", "/home", "/sys/")
_SNIFFED_NAMES: Final = frozenset(
    {"argv", "orig_argv", "environ", "environb", "gethostname", "getpid", "getppid"}
)
_FAMILY_CODES: Final = frozenset(
    {
        ViolationCode.FORBIDDEN_IMPORT,
        ViolationCode.FORBIDDEN_CALL,
        ViolationCode.IMPORT_NOT_ALLOWED,
        ViolationCode.TYPING_ONLY_IMPORT,
    }
)
_SUPPRESSION: Final = re.compile(rb"#.*kernel-guard", re.IGNORECASE)


@functools.cache
def candidate_policy() -> Policy:
    """The candidate-surface policy, read once per process.

    Raises:
        ConfigError: the installed policy file is missing or unusable.
    """
    return load_policy([POLICY_PATH])


def _module_name(path: str) -> tuple[str, bool]:
    parts = path.rsplit(".", 1)[0].split("/")
    package = parts[-1] == "__init__"
    if package:
        parts = parts[:-1]
    name = ".".join(parts)
    return (name if name and all(p.isidentifier() for p in parts) else "candidate"), package


def _root(node: ast.expr) -> str | None:
    """The name an attribute chain starts from (``a`` of ``a.b.c``), if any."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Internals(ast.NodeVisitor):
    """What the guard's call policy cannot express (module docstring)."""

    def __init__(self, modules: frozenset[str]) -> None:
        self.hits: list[tuple[str, int]] = []
        self.modules = modules
        """Names bound by an import anywhere in the file (a module or what it holds)."""

    def _target(self, node: ast.expr) -> None:
        if isinstance(node, ast.Attribute) and node.attr in _OBJECT_INTERNALS:
            self.hits.append(("object-internals", node.lineno))
        elif isinstance(node, ast.Attribute) and _root(node) in self.modules:
            self.hits.append(("module-patching", node.lineno))
        elif isinstance(node, ast.Tuple | ast.List):
            for item in node.elts:
                self._target(item)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._target(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._target(target)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        setter = (isinstance(func, ast.Name) and func.id == "setattr") or (
            isinstance(func, ast.Attribute) and func.attr in ("__setattr__", "__delattr__")
        )
        named = [a.value for a in node.args[:2] if isinstance(a, ast.Constant)]
        if setter and any(isinstance(n, str) and n in _OBJECT_INTERNALS for n in named):
            self.hits.append(("object-internals", node.lineno))
        elif setter and node.args and _root(node.args[0]) in self.modules:
            self.hits.append(("module-patching", node.lineno))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__builtins__":
            self.hits.append(("builtins-patching", node.lineno))

    def visit_Constant(self, node: ast.Constant) -> None:
        text = node.value
        if isinstance(text, str) and (
            any(s in text for s in _SNIFFED)
            or text.startswith(_SNIFFED_PREFIXES)
            or text in _SNIFFED_NAMES
        ):
            self.hits.append(("environment-sniffing", node.lineno))


def declared_names(test_ids: Iterable[str]) -> frozenset[str]:
    """The names that identify the declared tests ``test_ids`` in code: each test's
    function, its class and its module's last name (``test_stats.StatsTest.test_mean``:
    ``test_mean``, ``StatsTest``, ``test_stats``; ``tests/test_x.py::T::test_y[1]``:
    ``test_y``, ``T``, ``test_x``). A package above the module is not one of them (a
    ``tests`` folder names nothing in particular)."""
    names: set[str] = set()
    for test_id in test_ids:
        if "::" in test_id:
            path, *parts = test_id.split("::")
            parts = [path.rsplit("/", 1)[-1].removesuffix(".py"), *parts]
        else:
            parts = test_id.split(".")[-3:]
        names.update(p.split("[", 1)[0] for p in parts if p.split("[", 1)[0].isidentifier())
    return frozenset(names)


class _Recognition(ast.NodeVisitor):
    """Identifiers and strings that name a declared test (``test-recognition``)."""

    def __init__(self, names: frozenset[str]) -> None:
        self.hits: list[tuple[str, int]] = []
        self.names = names
        self.pattern = re.compile(
            r"(?<![A-Za-z0-9_])(?:" + "|".join(map(re.escape, sorted(names))) + r")(?![A-Za-z0-9_])"
        )

    def _check(self, name: str, line: int) -> None:
        if name in self.names:
            self.hits.append(("test-recognition", line))

    def visit_Name(self, node: ast.Name) -> None:
        self._check(node.id, node.lineno)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._check(node.attr, node.lineno)
        self.generic_visit(node)

    def visit_alias(self, node: ast.alias) -> None:
        for part in node.name.split("."):
            self._check(part, node.lineno)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and self.pattern.search(node.value):
            self.hits.append(("test-recognition", node.lineno))


def _code_like(tree: ast.Module) -> bool:
    """Text that parses as Python and does something (imports, defines or calls): a
    data file of plain values (JSON, a number list) does not."""
    kinds = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Call)
    return any(isinstance(node, kinds) for node in ast.walk(tree))


def screen_source(
    source: bytes, path: str, policy: Policy, names: frozenset[str] = frozenset()
) -> tuple[ScreenFinding, ...]:
    """The findings of one file's text: the guard's, then this module's own rules
    (``names``: the declared tests' names, `declared_names`).

    One finding per (rule, line); a file that does not parse is one ``unparseable``
    finding (the guard's).
    """
    module, package = _module_name(path)
    hits: set[tuple[str, int]] = set()
    for violation in check_source(source, policy, module=module, is_package=package, path=path):
        # A policy match names its family; a finding of any other kind (a star import,
        # reflection, an unresolvable dynamic name, unparseable text) is its own family.
        named = violation.code in _FAMILY_CODES and violation.rule
        for rule in violation.rule.split(",") if named else [violation.code.slug]:
            hits.add((rule.strip(), violation.line))
    # The guard honours suppression comments; a candidate's own are findings instead.
    for number, line in enumerate(source.splitlines(), start=1):
        if _SUPPRESSION.search(line):
            hits.add(("guard-suppression", number))
    try:
        tree = parse_module(source, filename=path)
    except (SyntaxError, ValueError):
        tree = None
    if tree is not None:
        imported = frozenset(
            (alias.asname or alias.name).split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        )
        visitor = _Internals(imported)
        visitor.visit(tree)
        hits.update(visitor.hits)
        if names and _module_name(path)[0].rsplit(".", 1)[-1] not in names:
            recognition = _Recognition(names)
            recognition.visit(tree)
            hits.update(recognition.hits)
    return tuple(
        ScreenFinding(rule=rule, path=path, line=max(line, 0)) for rule, line in sorted(hits)
    )


def _baseline_bytes(baseline: Path, relative: str) -> bytes | None:
    """A baseline file's bytes (None: not a regular file, or too large to screen)."""
    path = baseline / relative
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_FILE_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _new_findings(
    found: tuple[ScreenFinding, ...], text: bytes, before: tuple[ScreenFinding, ...], old: bytes
) -> tuple[ScreenFinding, ...]:
    """The findings a change brings: one the baseline file already had (same rule, same
    line text, counted) is the repository's own code, not the candidate's; a real fix
    to a file holding, say, ``return locals()`` is not suspicious for that line."""
    old_lines, new_lines = old.splitlines(), text.splitlines()

    def key(finding: ScreenFinding, lines: list[bytes]) -> tuple[str, bytes]:
        inside = 0 < finding.line <= len(lines)
        return finding.rule, lines[finding.line - 1].strip() if inside else b""

    budget = collections.Counter(key(f, old_lines) for f in before)
    kept = []
    for finding in found:
        if budget[key(finding, new_lines)] > 0:
            budget[key(finding, new_lines)] -= 1
        else:
            kept.append(finding)
    return tuple(kept)


def _as_code(change: FileChange, baseline: Path) -> bool:
    """A file of another name whose new text is Python code (`_code_like`)."""
    old = None if change.old_path is None else _baseline_bytes(baseline, change.old_path)
    text = apply_change(change, old) if change.old_path is None or old is not None else None
    if text is None or len(text) > _MAX_FILE_BYTES:
        return False
    try:
        return _code_like(parse_module(text))
    except (SyntaxError, ValueError):
        return False


def screen_changes(
    changes: tuple[FileChange, ...],
    baseline: Path,
    policy: Policy,
    names: frozenset[str] = frozenset(),
) -> tuple[ScreenFinding, ...]:
    """The findings over every Python file ``changes`` leave in the tree (rebuilt from
    ``baseline`` and the hunks, never imported; a file of another name whose text is
    Python code too) that the baseline file did not already have (`_new_findings`),
    sorted by path and line, at most `MAX_FINDINGS`. ``names``: the declared tests'
    names (`declared_names`)."""
    found: list[ScreenFinding] = []
    for change in changes:
        path = change.new_path
        if path is None or change.new_mode == "120000":
            continue
        if not path.endswith(_PYTHON) and not _as_code(change, baseline):
            continue
        old = None
        if change.old_path is not None:
            old = _baseline_bytes(baseline, change.old_path)
        text = None
        if change.old_path is None or old is not None:
            text = apply_change(change, old)
        if text is None or len(text) > _MAX_FILE_BYTES:
            found.append(ScreenFinding(rule="unscreenable", path=path, line=0))
            continue
        findings = screen_source(text, path, policy, names)
        if old is not None and findings:
            before = screen_source(old, path, policy, names)
            findings = _new_findings(findings, text, before, old)
        found.extend(findings)
    found.sort(key=lambda f: (f.path, f.line, f.rule))
    return tuple(found[:MAX_FINDINGS])
