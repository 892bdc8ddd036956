"""Generate ``src/kernel/__init__.pyi``: what type checkers see of ``import kernel``.

    python -m kernel.effects.api_stub            # regenerate
    python -m kernel.effects.api_stub --check    # exit 1 when it is stale

`kernel/__init__.py` holds the public API as one table (`kernel._EXPORTS`) and loads
each name on first use; a type checker cannot run that loader, so it reads this stub,
derived from the same table (``make schemas`` checks it is current).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import kernel
from kernel.effects.files import atomic_write_bytes

__all__ = ["generate", "main"]

_TARGET: Final = Path("src") / "kernel" / "__init__.pyi"


def generate() -> bytes:
    """The stub's text: the version, the imports and ``__all__`` (which re-exports them)."""
    lines = [
        '"""Generated from `kernel._EXPORTS` by python -m kernel.effects.api_stub; do not edit."""',
        "",
        "from types import ModuleType",
        "from typing import Final",
        "",
    ]
    for module, names in sorted(kernel._EXPORTS.items()):
        lines.append(f"from {module} import (")
        lines.extend(f"    {name}," for name in sorted(names))
        lines.append(")")
    lines += [
        "",
        "__version__: Final[str]",
        "_EXPORTS: Final[dict[str, tuple[str, ...]]]",
        "",
        "def _load(module: str) -> ModuleType: ...",
        "",
        "__all__ = [",
    ]
    lines.extend(f'    "{name}",' for name in kernel.__all__)
    lines.append("]")
    return ("\n".join(lines) + "\n").encode("utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Write the stub, or with ``--check`` exit 1 when it is stale."""
    parser = argparse.ArgumentParser(prog="python -m kernel.effects.api_stub")
    parser.add_argument("--check", action="store_true", help="fail when the file is stale")
    parser.add_argument("--root", type=Path, default=Path(), help="project root")
    args = parser.parse_args(argv)
    target = args.root / _TARGET
    data = generate()
    if args.check:
        if not target.is_file() or target.read_bytes() != data:
            print(f"{target} is stale: run python -m kernel.effects.api_stub", file=sys.stderr)
            return 1
        print(f"{target} is current")
        return 0
    atomic_write_bytes(target, data)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
