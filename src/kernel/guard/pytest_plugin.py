"""pytest plugin: the guard policy of a project's ADRs as test items, with no code.

Registered through the ``pytest11`` entry point, so installing the package is enough.
It stays inert until a project names the test folders that should carry the items:

.. code-block:: toml

    [tool.pytest.ini_options]
    kernel_guard_dirs = ["tests/static_guards"]   # where the items appear
    kernel_guard_src = "src"                      # import root (default: src, else .)
    kernel_guard_config = []                      # policy files (default: discovery)
    kernel_guard_baseline = "guard-baseline.json" # optional: hide the findings it lists

Rules this module enforces:

- the items hang off each configured folder (a missing or empty one is a usage
  error: nothing would carry them); a baseline (``kernel_guard_baseline``, relative
  to the root) hides the findings it lists, as ``kernel guard --baseline`` does;
- one item per (rule, covered module), named ``guard[<rule>][<module>]``, so a report
  says which rule failed for which module; the whole tree is checked once per session
  (with the same cache as ``kernel guard``) and each item reads its share;
- a failing item prints one ``path:line:col: CODE message [rule]`` line per finding;
- an unusable policy (anything `kernel guard` exits 2 for) is one failing item
  ``guard[policy]`` with the one-line reason, never zero items (no silent green).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

import pytest

from kernel.errors import GuardFailure

if TYPE_CHECKING:
    from kernel.guard.model import GuardReport, Policy

__all__ = [
    "GuardItem",
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_configure",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
]

_DIRS = "kernel_guard_dirs"
_SRC = "kernel_guard_src"
_CONFIG = "kernel_guard_config"
_BASELINE = "kernel_guard_baseline"
_TRACE = "kernel_guard_trace"
_TRACER = "_kernel_guard_tracer"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare the ini keys (pytest's --strict-config then accepts them)."""
    parser.addini(_DIRS, "test folders that carry kernel guard items", type="paths", default=[])
    parser.addini(_SRC, "import root checked by kernel guard", default="")
    parser.addini(_CONFIG, "kernel guard policy files", type="paths", default=[])
    parser.addini(_BASELINE, "kernel guard baseline: findings it lists are hidden", default="")
    parser.addini(_TRACE, "run the suite under the dynamic guard (audit hook)", type="bool")
    parser.addoption(
        "--kernel-guard-trace",
        action="store_true",
        default=False,
        help="report forbidden run-time events with a guarded module on the stack (KG013)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """A configured folder that is missing or holds no file (so nothing could carry
    the items) is a usage error naming it, never a silent "no tests ran". In trace
    mode the audit hook is installed before any test runs."""
    if config.getoption("--kernel-guard-trace", False) or config.getini(_TRACE):
        _start_trace(config)
    for folder in config.getini(_DIRS):
        if not Path(folder).is_dir():
            raise pytest.UsageError(f"{_DIRS}: {folder} is not a folder")
        if not any(p.is_file() for p in Path(folder).iterdir()):
            raise pytest.UsageError(
                f"{_DIRS}: {folder} holds no file to carry the guard items "
                "(add a conftest.py or a test file)"
            )


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """The guard items hang off a configured folder, next to its own test files.

    `pytest_collect_file` lets every plugin add a collector for a file; the first file
    of the folder (in name order) carries the items, so they appear once per folder.
    """
    folder = file_path.parent
    dirs = parent.config.getini(_DIRS)
    if not any(folder.resolve() == Path(d).resolve() for d in dirs):
        return None
    first = min((p for p in folder.iterdir() if p.is_file()), default=None)
    if first is None or first != file_path:
        return None
    return _GuardPolicy.from_parent(parent, name="kernel-guard")


class _Outcome:
    """One run of the guard per session, shared by every item."""

    def __init__(self, config: pytest.Config) -> None:
        from kernel.errors import ConfigError
        from kernel.guard.baseline import apply_baseline, read_baseline
        from kernel.guard.engine import DEFAULT_CACHE_DIR, check_tree, discover_modules
        from kernel.guard.patterns import covers
        from kernel.guard.policy import discover_policy, load_policy

        root = config.rootpath
        self.error = ""
        self.pairs: list[tuple[str, str]] = []
        self.module_of: dict[str, str] = {}
        self.report: GuardReport | None = None
        src_ini = str(config.getini(_SRC))
        src = root / src_ini if src_ini else (root / "src" if (root / "src").is_dir() else root)
        baseline = str(config.getini(_BASELINE))
        try:
            configured: list[Path] = list(config.getini(_CONFIG))
            policy: Policy = load_policy(configured) if configured else discover_policy(root)
            # The same check, paths and cache as `kernel guard` at this root.
            self.report = check_tree(
                src, policy, cache_dir=root / DEFAULT_CACHE_DIR, gitignore_from=root, root=root
            )
            if baseline:
                self.report = apply_baseline(self.report, read_baseline(root / baseline))
        except ConfigError as e:
            self.error = str(e)
            return
        files = discover_modules(src, gitignore_from=root)
        self.module_of = {
            PurePath(os.path.relpath(os.path.abspath(path), root)).as_posix(): module
            for path, module, _k in files
        }
        self.pairs = [
            (r.name, m) for r in policy.rules for _p, m, _k in files if covers(r.modules, m)
        ]


class _GuardPolicy(pytest.Collector):
    def collect(self) -> Iterator[pytest.Item]:
        key = "_kernel_guard_outcome"
        outcome: _Outcome | None = getattr(self.config, key, None)
        if outcome is None:
            outcome = _Outcome(self.config)
            setattr(self.config, key, outcome)
        if outcome.error:
            yield GuardItem.from_parent(self, name="guard[policy]", outcome=outcome, pair=None)
            return
        for rule, module in outcome.pairs:
            yield GuardItem.from_parent(
                self, name=f"guard[{rule}][{module}]", outcome=outcome, pair=(rule, module)
            )


class GuardItem(pytest.Item):
    """One rule on one module: passes when the guard reports nothing for the pair."""

    def __init__(self, *, outcome: _Outcome, pair: tuple[str, str] | None, **kwargs: Any) -> None:
        """``pair`` is ``(rule, module)``; None stands for the policy itself."""
        super().__init__(**kwargs)
        self.outcome = outcome
        self.pair = pair

    def runtest(self) -> None:
        """Raise `GuardFailure` with the findings of the pair (or the policy error)."""
        if self.pair is None:
            raise GuardFailure(f"unusable guard policy: {self.outcome.error}")
        rule, module = self.pair
        report = self.outcome.report
        if report is None:  # pragma: no cover - an error is reported by guard[policy]
            raise GuardFailure("no report")
        lines = [
            f"{v.path}:{v.line}:{v.column}: {v.code.value} {v.message} [{v.rule}]"
            for v in report.violations
            if rule in v.rule.split(",") and self.outcome.module_of.get(v.path) == module
        ]
        if lines:
            raise GuardFailure("\n".join(lines))

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        """Only the finding lines: no traceback of the plugin."""
        if isinstance(excinfo.value, GuardFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Where the item comes from: the rule and module it checks."""
        return self.path, None, self.name


def _start_trace(config: pytest.Config) -> None:
    from kernel.errors import ConfigError
    from kernel.guard.policy import discover_policy, load_policy
    from kernel.guard.trace import Tracer

    configured: list[Path] = list(config.getini(_CONFIG))
    try:
        policy = load_policy(configured) if configured else discover_policy(config.rootpath)
    except ConfigError as e:
        raise pytest.UsageError(f"kernel guard trace: {e}") from e
    tracer = Tracer(policy)
    tracer.install()
    setattr(config, _TRACER, tracer)


def _trace_lines(config: pytest.Config) -> list[str]:
    from kernel.guard.trace import Tracer, violations

    tracer: Tracer | None = getattr(config, _TRACER, None)
    if tracer is None:
        return []
    return [
        f"{v.path}:{v.line}:{v.column}: {v.code.value} {v.message} [{v.rule}]"
        for v in violations(tracer.findings, str(config.rootpath))
    ]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In trace mode, a forbidden run-time event fails an otherwise green run."""
    if _trace_lines(session.config) and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """In trace mode, list the forbidden run-time events (one line each)."""
    lines = _trace_lines(config)
    if getattr(config, _TRACER, None) is None:
        return
    terminalreporter.section("kernel guard trace")
    for line in lines or ["no forbidden run-time event with a guarded module on the stack"]:
        terminalreporter.write_line(line)
