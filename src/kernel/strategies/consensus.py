"""Strategies for `kernel.corroboration.consensus` and `kernel.corroboration.commit_admission`
records."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from kernel.corroboration.commit_admission import Branch, Draft, VerifierOutcome
from kernel.corroboration.consensus import CaptureStatus, Isolation, RunObservation
from kernel.run.verification import SandboxLimit
from kernel.strategies._seeded import SEEDS, Stream, seeded

__all__ = ["branches", "drafts", "run_observations", "tool_sets"]

_FEW = ("a" * 64, "b" * 64, "c" * 64, "0" * 64)
_FEW_DIGESTS = st.sampled_from(_FEW)
_SIZES = (0, 1, 7)
_LIMIT_KINDS = ("memory", "processes", "cpu", "output", "writable", "tmp")
_MECHANISMS = ("rlimit", "tmpfs", "runner", "none")
_STATUSES = tuple(CaptureStatus)
_ISOLATIONS = tuple(Isolation)


def _limits_of(s: Stream) -> tuple[SandboxLimit, ...]:
    return tuple(
        SandboxLimit(
            kind=s.pick(_LIMIT_KINDS),
            value=s.maybe(lambda: s.integer(1, 1 << 40)),
            mechanism=s.pick(_MECHANISMS),
        )
        for _ in range(s.integer(0, 3))
    )


def run_observations(
    min_runs: int = 1,
    max_runs: int = 7,
    digests: st.SearchStrategy[str] = _FEW_DIGESTS,
) -> st.SearchStrategy[tuple[RunObservation, ...]]:
    """N valid observations indexed ``0..N-1``; few distinct digests, so groups form.

    By default the digests are picked from the seed (one draw in all); a caller's
    ``digests`` strategy is drawn once per capture.
    """
    if digests is _FEW_DIGESTS:
        return seeded(_observations_of, min_runs, max_runs)
    return _observations_drawn(min_runs, max_runs, digests)


def _observations_of(count: int, s: Stream) -> tuple[RunObservation, ...]:
    return tuple(_observation_of(s, index, lambda: s.pick(_FEW)) for index in range(count))


@st.composite
def _observations_drawn(
    draw: st.DrawFn, min_runs: int, max_runs: int, digests: st.SearchStrategy[str]
) -> tuple[RunObservation, ...]:
    count = draw(st.integers(min_value=min_runs, max_value=max_runs))
    s = Stream(draw(SEEDS))
    return tuple(_observation_of(s, index, lambda: draw(digests)) for index in range(count))


def _observation_of(s: Stream, index: int, digest_of: Callable[[], str]) -> RunObservation:
    status = s.pick(_STATUSES)
    if status is CaptureStatus.OK:
        exit_code: int | None = 0
    else:
        exit_code = s.maybe(lambda: s.integer(-64, 255) or 1)
    captured = status is CaptureStatus.OK or s.flag()
    digest = digest_of() if captured else None
    # One digest names one byte string: derive its size from it, so captures agree.
    size = None if digest is None else _SIZES[int(digest[0], 16) % len(_SIZES)]
    return RunObservation(
        index=index,
        status=status,
        exit_code=exit_code,
        output_digest=digest,
        output_size=size,
        isolation=s.pick(_ISOLATIONS),
        duration_ms=s.integer(0, 10_000),
        limits=s.maybe(lambda: _limits_of(s)),
    )


_TOOLS = ("grep", "pytest", "search", "shell")
_TOOL_SETS = SEEDS.map(lambda seed: _tools_of(Stream(seed)))
_CONTEXTS = ("1" * 64, "2" * 64, "3" * 64)
_OUTCOMES = tuple(VerifierOutcome)


def _tools_of(s: Stream) -> tuple[str, ...]:
    mask = s.integer(0, 2 ** len(_TOOLS) - 1)
    # _TOOLS is sorted, so the subset is too.
    return tuple(tool for bit, tool in enumerate(_TOOLS) if mask >> bit & 1)


def _draft_of(s: Stream) -> Draft:
    return Draft(output_digest=s.pick(_FEW), context_digest=s.pick(_CONTEXTS), tools=_tools_of(s))


def _branch_of(count: int, s: Stream) -> Branch:
    return Branch(
        branch_id=s.text(min_size=1),
        drafts=tuple(_draft_of(s) for _ in range(count)),
        verifier=s.pick(_OUTCOMES),
        verifier_evidence_digest=s.maybe(lambda: s.pick(_FEW)),
    )


_DRAFTS = SEEDS.map(lambda seed: _draft_of(Stream(seed)))
_BRANCHES = seeded(_branch_of, 0, 5)


def tool_sets() -> st.SearchStrategy[tuple[str, ...]]:
    """Sorted, unique tool names."""
    return _TOOL_SETS


def drafts() -> st.SearchStrategy[Draft]:
    """Drafts drawn from a small space, so agreement and correlation both happen."""
    return _DRAFTS


def branches() -> st.SearchStrategy[Branch]:
    """Valid branches (possibly without drafts)."""
    return _BRANCHES
