"""Start-up of the `kernel` command: ``--version`` and ``--help``, whole processes.

Each is timed as the CPU time of the finished child (user + system, the operating
system's own accounting), paired with a bare ``python -c pass`` started right before it
(so both see the same load of a shared machine); the figure is the median of the runs.
The children may write bytecode (into a private ``PYTHONPYCACHEPREFIX``), as an
installed package has it: with ``PYTHONDONTWRITEBYTECODE`` every run would compile
every module it imports, which is not what a user's start-up costs.
Target (issue 20): ``kernel --version`` and ``kernel --help`` <= 60 ms each, i.e. no
command module imported until a verb is chosen.

    python bench/cli.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

KERNEL = Path(sys.executable).with_name("kernel")
TARGET_MS = 60.0


def cpu_ms(argv: list[str], env: Mapping[str, str]) -> float:
    """CPU milliseconds of one finished child running ``argv`` (its output discarded)."""
    before = os.times()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
    after = os.times()
    used = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return used * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    bare = [sys.executable, "-c", "pass"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="kernel-bench-pycache-")
    for label, argv in (
        ("kernel --version", [str(KERNEL), "--version"]),
        ("kernel --help", [str(KERNEL), "--help"]),
    ):
        cpu_ms(argv, env)  # warm the file cache and write the bytecode
        pairs = [(cpu_ms(bare, env), cpu_ms(argv, env)) for _ in range(args.runs)]
        base = statistics.median(b for b, _ in pairs)
        ours = statistics.median(a for _, a in pairs)
        ratio = statistics.median(a / b for b, a in pairs if b > 0)
        verdict = "ok" if ours <= TARGET_MS else "OVER TARGET"
        print(
            f"{label:<18} {ours:6.1f} ms cpu (target <= {TARGET_MS:.0f}: {verdict}); "
            f"bare python {base:5.1f} ms; ratio {ratio:4.1f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
