"""Replay a config against a saved run record: re-run it and compare in a mode.

The modes and the comparison are `kernel.run.replay`'s (pure); this module re-runs.
"""

from __future__ import annotations

import concurrent.futures

from kernel.effects.documents import with_defaults
from kernel.effects.orchestrate import LoadedConfig, run_loaded
from kernel.errors import ConfigError
from kernel.run.record import DeclaredReplay, RunRecord
from kernel.run.replay import (
    ReplayCheck,
    ReplayMode,
    ReplayRefusal,
    check_replay,
    default_mode,
    preflight,
)

__all__ = ["replay"]


def replay(
    loaded: LoadedConfig,
    saved: object,
    mode: ReplayMode | None,
    *,
    executor: concurrent.futures.Executor | None = None,
) -> tuple[ReplayCheck, RunRecord | None]:
    """Replay ``loaded`` against a saved run record document (decoded JSON); ``mode``
    None is the config's declared mode.

    The config digest is compared first: a record of another config is a mismatch
    before anything is re-run (the replayed record is then None).

    Raises:
        ConfigError: ``nondeterministic`` asked for a config that does not declare it.
    """
    chosen = default_mode(loaded.declared_replay) if mode is None else mode
    if (
        chosen is ReplayMode.NONDETERMINISTIC
        and loaded.declared_replay is not DeclaredReplay.NONDETERMINISTIC
    ):
        raise ConfigError(
            f"{loaded.source.path}: --mode nondeterministic needs the config to declare "
            '"replay": "nondeterministic"; it would silently weaken exact replay'
        )
    saved = with_defaults(saved)
    declared = loaded.declared_replay
    digest = loaded.config_digest
    failed = preflight(saved, mode=chosen, declared=declared, config_digest=digest)
    replayed = None if failed else run_loaded(loaded, executor=executor)
    outcome = check_replay(saved, replayed, mode=chosen, declared=declared, config_digest=digest)
    # The replay-check document is the check, whether it matched or was refused.
    check = outcome.check if isinstance(outcome, ReplayRefusal) else outcome
    return check, replayed
