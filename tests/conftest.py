"""Suite-wide test settings.

Hypothesis: no per-example deadline anywhere (the machines are small and shared, and a
slow example is not a wrong one). Under CI (``CI`` set, as `.ci/run` is run), examples
are derandomized so a run is reproducible; locally they stay random, which is where
new counterexamples are found (and then pinned as regression vectors).
"""

from __future__ import annotations

import os

from hypothesis import settings

# The static-guard items (see addopts in pyproject.toml for why not the entry point).
pytest_plugins = ("kernel.guard.pytest_plugin",)

settings.register_profile("kernel", deadline=None)
settings.register_profile("kernel-ci", deadline=None, derandomize=True)
settings.load_profile("kernel-ci" if os.environ.get("CI") else "kernel")
