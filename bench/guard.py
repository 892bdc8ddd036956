"""Benchmark of `kernel.guard` against the Python floor, ruff TID251 and import-linter.

Over the running Python's standard library (Lib without site-packages and test
directories) and over this project's ``src``, cold (empty cache) and warm (second run),
side by side in one run with:

- the floor: read + bare `ast.parse` of the same files, nothing kept;
- ``ruff check --select TID251`` with the same bans, cold (``--no-cache``) and warm;
- ``lint-imports`` with the same import bans, cold and warm (own src only for the
  stdlib when grimp can build the graph; reported as it comes).

Targets (issue 4): stdlib cold <= 1.25x the floor, stdlib warm <= 50 ms, own src
<= 100 ms cold and <= 5 ms warm in-process, peak memory <= 50 MB.
Usage: ``python bench/guard.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import gc
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from kernel.guard import Policy, Rule, check_paths, discover_modules, load_policy

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
BANNED_IMPORTS = ("subprocess", "socket")
BANNED_CALLS = (
    "os.system",
    "os.environ",
    "builtins.eval",
    "builtins.exec",
    "datetime.datetime.now",
)
STDLIB_SKIP = ("site-packages", "test", "tests", "idle_test")


def _best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _floor(files: list[tuple[str, str, bool]]) -> None:
    for path, _m, _p in files:
        with open(path, "rb") as fh:
            data = fh.read()
        with contextlib.suppress(SyntaxError, ValueError):
            ast.parse(data)


def _stdlib_policy() -> Policy:
    return Policy(
        rules=(
            Rule(
                name="bench",
                modules=("*",),
                forbid_imports=BANNED_IMPORTS,
                forbid_calls=BANNED_CALLS,
            ),
        )
    )


def _ruff_config(folder: Path) -> Path:
    lines = ["[lint]", 'select = ["TID251"]', "[lint.flake8-tidy-imports.banned-api]"]
    lines += [f'"{name}".msg = "banned"' for name in (*BANNED_IMPORTS, *BANNED_CALLS)]
    path = folder / "ruff.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    t = time.perf_counter()
    subprocess.run(argv, cwd=cwd, capture_output=True, check=False, env=env)
    return time.perf_counter() - t


def _ruff(target: Path, tmp: Path, repeat: int) -> tuple[float, float]:
    config = _ruff_config(tmp)
    base = [str(BIN / "ruff"), "check", "--config", str(config), "--exit-zero", "--quiet"]
    cold = min(_run([*base, "--no-cache", str(target)], tmp) for _ in range(repeat))
    cache = tmp / "ruff-cache"
    _run([*base, "--cache-dir", str(cache), str(target)], tmp)
    warm = min(_run([*base, "--cache-dir", str(cache), str(target)], tmp) for _ in range(repeat))
    return cold, warm


def _lint_imports(
    root_dir: Path, packages: list[str], tmp: Path, repeat: int
) -> tuple[float, float]:
    config = tmp / "importlinter.ini"
    body = [
        "[importlinter]",
        "root_packages =",
        *(f"    {p}" for p in packages),
        "include_external_packages = True",
        "",
        "[importlinter:contract:bans]",
        "name = bans",
        "type = forbidden",
        "source_modules =",
        *(f"    {p}" for p in packages if p not in BANNED_IMPORTS),
        "forbidden_modules =",
        *(f"    {m}" for m in BANNED_IMPORTS if m not in packages),
    ]
    if all(m in packages for m in BANNED_IMPORTS):
        body[-len([m for m in BANNED_IMPORTS if m not in packages]) - 1 :] = ["forbidden_modules ="]
    config.write_text("\n".join(body) + "\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(root_dir)}
    base = [str(BIN / "lint-imports"), "--config", str(config), "--no-logo"]
    cold = min(_run([*base, "--no-cache"], tmp, env) for _ in range(repeat))
    cache = tmp / "li-cache"
    _run([*base, "--cache-dir", str(cache)], tmp, env)
    warm = min(_run([*base, "--cache-dir", str(cache)], tmp, env) for _ in range(repeat))
    return cold, warm


def _kernel(
    files: list[tuple[str, str, bool]], policy: Policy, repeat: int
) -> tuple[float, float, int]:
    colds = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as d:
            gc.collect()
            t = time.perf_counter()
            report = check_paths(files, policy, cache_dir=d)
            colds.append(time.perf_counter() - t)
    with tempfile.TemporaryDirectory() as d:
        check_paths(files, policy, cache_dir=d)
        warm = _best(lambda: check_paths(files, policy, cache_dir=d), max(repeat, 5))
    return min(colds), warm, len(report.violations)


def _interleaved(
    files: list[tuple[str, str, bool]], policy: Policy, repeat: int
) -> tuple[float, float, float, int]:
    """Floor and cold runs alternate (the machine may be shared): best of each."""
    floors, colds = [], []
    n = 0
    for _ in range(repeat):
        floors.append(_best(lambda: _floor(files), 1))
        cold, _warm, n = _kernel(files, policy, 1)
        colds.append(cold)
    _c, warm, _n = _kernel(files, policy, 1)
    return min(floors), min(colds), warm, n


def _peak(files: list[tuple[str, str, bool]], policy: Policy) -> float:
    with tempfile.TemporaryDirectory() as d:
        tracemalloc.start()
        check_paths(files, policy, cache_dir=d)
        _cur, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak / 2**20


def _lines(files: list[tuple[str, str, bool]]) -> int:
    total = 0
    for path, _m, _p in files:
        with open(path, "rb") as fh:
            total += fh.read().count(b"\n")
    return total


def main() -> int:
    """Run every measurement and print one table."""
    parser = argparse.ArgumentParser(description="kernel guard benchmark")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    std_files = discover_modules(stdlib, exclude=STDLIB_SKIP)
    own_files = discover_modules(ROOT / "src")
    own_policy = load_policy(sorted((ROOT / "docs" / "adr").glob("*.md")))
    std_policy = _stdlib_policy()
    print(
        f"python {sys.version.split()[0]}; stdlib {stdlib}: {len(std_files)} files, "
        f"{_lines(std_files)} lines; own src: {len(own_files)} files, {_lines(own_files)} lines"
    )
    rows: list[tuple[str, str]] = []
    floor, cold, warm, n = _interleaved(std_files, std_policy, args.repeat)
    gc.disable()
    try:
        floor_nogc = _best(lambda: _floor(std_files), args.repeat)
    finally:
        gc.enable()
    rows += [
        ("stdlib: floor (read + ast.parse)", f"{floor:.3f} s"),
        ("stdlib: floor with gc paused (as the guard does)", f"{floor_nogc:.3f} s"),
        (
            "stdlib: kernel guard cold",
            f"{cold:.3f} s = {cold / floor:.2f}x floor, {cold / floor_nogc:.2f}x gc-paused floor "
            f"({n} findings)",
        ),
        ("stdlib: kernel guard warm", f"{warm * 1000:.1f} ms"),
        (
            "stdlib: kernel guard peak memory (tracemalloc, cold)",
            f"{_peak(std_files, std_policy):.1f} MB",
        ),
    ]
    own_floor, ocold, owarm, on = _interleaved(own_files, own_policy, max(args.repeat, 7))
    rows += [
        ("own src: floor (read + ast.parse)", f"{own_floor * 1000:.1f} ms"),
        ("own src: kernel guard cold (ADR policy)", f"{ocold * 1000:.1f} ms ({on} findings)"),
        ("own src: kernel guard warm", f"{owarm * 1000:.2f} ms"),
        ("own src: kernel guard peak memory", f"{_peak(own_files, own_policy):.1f} MB"),
    ]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rc, rw = _ruff(stdlib, tmp, args.repeat)
        rows.append(("stdlib: ruff --select TID251 cold / warm", f"{rc:.3f} s / {rw:.3f} s"))
        rc, rw = _ruff(ROOT / "src", tmp, args.repeat)
        rows.append(
            (
                "own src: ruff --select TID251 cold / warm",
                f"{rc * 1000:.0f} ms / {rw * 1000:.0f} ms",
            )
        )
        lc, lw = _lint_imports(ROOT / "src", ["kernel"], tmp, args.repeat)
        rows.append(
            (
                "own src: lint-imports cold / warm (process)",
                f"{lc * 1000:.0f} ms / {lw * 1000:.0f} ms",
            )
        )
        packages = sorted(
            p.name
            for p in stdlib.iterdir()
            if p.is_dir() and (p / "__init__.py").exists() and p.name not in STDLIB_SKIP
        )
        lc, lw = _lint_imports(stdlib, packages, tmp, 1)
        rows.append(
            (
                f"stdlib: lint-imports cold / warm ({len(packages)} packages)",
                f"{lc:.3f} s / {lw:.3f} s",
            )
        )
    width = max(len(k) for k, _v in rows)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
