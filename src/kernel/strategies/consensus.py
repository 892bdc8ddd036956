"""Strategies for `kernel.consensus` and `kernel.commit_admission` records."""

from __future__ import annotations

from hypothesis import strategies as st

from kernel.commit_admission import Branch, Draft, VerifierOutcome
from kernel.consensus import CaptureStatus, Isolation, RunObservation
from kernel.verification import SandboxLimit

__all__ = ["branches", "drafts", "run_observations", "tool_sets"]

_FEW_DIGESTS = st.sampled_from(["a" * 64, "b" * 64, "c" * 64, "0" * 64])
_SIZES = (0, 1, 7)
_LIMITS = st.none() | st.lists(
    st.builds(
        SandboxLimit,
        kind=st.sampled_from(["memory", "processes", "cpu", "output", "writable", "tmp"]),
        value=st.none() | st.integers(min_value=1, max_value=1 << 40),
        mechanism=st.sampled_from(["rlimit", "tmpfs", "runner", "none"]),
    ),
    max_size=3,
).map(tuple)


@st.composite
def _observation(draw: st.DrawFn, index: int, digests: st.SearchStrategy[str]) -> RunObservation:
    status = draw(st.sampled_from(list(CaptureStatus)))
    if status is CaptureStatus.OK:
        exit_code: int | None = 0
    else:
        exit_code = draw(st.none() | st.integers(min_value=-64, max_value=255).filter(bool))
    captured = status is CaptureStatus.OK or draw(st.booleans())
    digest = draw(digests) if captured else None
    # One digest names one byte string: derive its size from it, so captures agree.
    size = None if digest is None else _SIZES[int(digest[0], 16) % len(_SIZES)]
    return RunObservation(
        index=index,
        status=status,
        exit_code=exit_code,
        output_digest=digest,
        output_size=size,
        isolation=draw(st.sampled_from(list(Isolation))),
        duration_ms=draw(st.integers(min_value=0, max_value=10_000)),
        limits=draw(_LIMITS),
    )


@st.composite
def run_observations(
    draw: st.DrawFn,
    min_runs: int = 1,
    max_runs: int = 7,
    digests: st.SearchStrategy[str] = _FEW_DIGESTS,
) -> tuple[RunObservation, ...]:
    """N valid observations indexed ``0..N-1``; few distinct digests, so groups form."""
    n = draw(st.integers(min_value=min_runs, max_value=max_runs))
    return tuple(draw(_observation(i, digests)) for i in range(n))


_TOOL_SETS = st.lists(st.sampled_from(["grep", "pytest", "search", "shell"]), unique=True).map(
    lambda tools: tuple(sorted(tools))
)
_DRAFTS = st.builds(
    Draft,
    output_digest=_FEW_DIGESTS,
    context_digest=st.sampled_from(["1" * 64, "2" * 64, "3" * 64]),
    tools=_TOOL_SETS,
)
_BRANCHES = st.builds(
    Branch,
    branch_id=st.text(min_size=1, max_size=8),
    drafts=st.lists(_DRAFTS, max_size=5).map(tuple),
    verifier=st.sampled_from(list(VerifierOutcome)),
    verifier_evidence_digest=st.none() | _FEW_DIGESTS,
)


def tool_sets() -> st.SearchStrategy[tuple[str, ...]]:
    """Sorted, unique tool names."""
    return _TOOL_SETS


def drafts() -> st.SearchStrategy[Draft]:
    """Drafts drawn from a small space, so agreement and correlation both happen."""
    return _DRAFTS


def branches() -> st.SearchStrategy[Branch]:
    """Valid branches (possibly without drafts)."""
    return _BRANCHES
