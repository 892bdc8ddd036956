"""Where a run's work executes: a local pool (default) or a Dask cluster.

`kernel run --executor SPEC` hands the attempts (each attempt's worker and its verifier
checks run in one task), the corroboration reruns and the replay to one
`concurrent.futures.Executor`; nothing else changes, and the run record is the same
whichever executor ran it (a test holds this on a two-process `LocalCluster`).

``SPEC``:

``local`` (default)
    local thread pools sized to the machine;
``dask://HOST:PORT``
    an existing Dask scheduler (``distributed.Client(address).get_executor()``); its
    workers must see the same paths as this machine (the config's files, the scratch
    and spill folders): one machine, or a shared filesystem;
``dask-local:N``
    a throwaway ``LocalCluster`` of N worker processes (one thread each) on this
    machine, closed when the run ends.

Dask is an optional extra (``pip install 'evidence-kernel[dask]'``); asking for it
without the extra is a usage error naming the extra.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
from collections.abc import Iterator
from typing import Any, Final

from kernel.errors import ConfigError, EffectError

__all__ = ["EXECUTOR_HELP", "open_executor"]

EXECUTOR_HELP: Final = (
    "where attempts, checks, reruns and the replay execute: local (default: thread "
    "pools), dask://HOST:PORT (a Dask scheduler whose workers share this machine's "
    "paths) or dask-local:N (a throwaway LocalCluster of N processes)"
)
_DASK_ADDRESS: Final = re.compile(r"dask://([A-Za-z0-9.\-\[\]:]+):(\d{1,5})")
_DASK_LOCAL: Final = re.compile(r"dask-local:([1-9]\d{0,2})")


def _distributed() -> Any:
    try:
        import distributed
    except ModuleNotFoundError as e:
        raise ConfigError(
            "--executor dask needs the optional extra 'dask': pip install 'evidence-kernel[dask]'"
        ) from e
    return distributed


@contextlib.contextmanager
def open_executor(spec: str | None) -> Iterator[concurrent.futures.Executor | None]:
    """The executor ``spec`` names, open for the ``with`` block (None: local pools).

    Raises:
        ConfigError: an unknown spec, or Dask asked for without the extra.
        EffectError: the scheduler cannot be reached.
    """
    if spec is None or spec == "local":
        yield None
        return
    address = _DASK_ADDRESS.fullmatch(spec)
    local = _DASK_LOCAL.fullmatch(spec)
    if address is None and local is None:
        raise ConfigError(f"--executor: {spec!r} is not local, dask://HOST:PORT or dask-local:N")
    distributed = _distributed()
    with contextlib.ExitStack() as stack:
        if local is not None:
            cluster = stack.enter_context(
                distributed.LocalCluster(
                    n_workers=int(local.group(1)),
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",  # any free port: None still asks for 8787
                    silence_logs=50,
                )
            )
            client = stack.enter_context(distributed.Client(cluster))
        else:
            try:
                client = stack.enter_context(distributed.Client(spec[len("dask://") :]))
            except OSError as e:
                raise EffectError(f"--executor {spec}: scheduler unreachable: {e}") from e
        yield client.get_executor()
