"""``python -m kernel``: the `kernel` command.

The entry point belongs to the effect shell (it parses argv and exits), so ADR-0001's
pure-core and layer rules leave this one module out.
"""

from __future__ import annotations

__all__: list[str] = []

if __name__ == "__main__":
    from kernel.effects.cli import main

    raise SystemExit(main())
