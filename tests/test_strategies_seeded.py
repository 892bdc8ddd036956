"""The seed streams behind `kernel.strategies`' record strategies keep their promises."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kernel.corroboration.consensus import RunObservation
from kernel.records.identity import is_digest
from kernel.run.record import has_absolute_path
from kernel.strategies import run_observations
from kernel.strategies._seeded import SEEDS, Stream, derive, seeded
from kernel.strategies.report import _message


@given(SEEDS)
def test_a_seed_derives_the_same_values_every_time(seed: int) -> None:
    def values(s: Stream) -> tuple[object, ...]:
        return (s.integer(-3, 3), s.text(), s.digest(), s.unique_texts(4), s.flag())

    assert values(Stream(seed)) == values(Stream(seed))


@given(SEEDS, st.integers(-5, 5), st.integers(0, 10))
def test_integers_stay_in_their_bounds(seed: int, low: int, width: int) -> None:
    assert low <= Stream(seed).integer(low, low + width) <= low + width


def test_both_bounds_come_up_often() -> None:
    """Boundary values are the ones that break code: each bound comes up (1/16 or more)."""
    drawn = [Stream(seed).integer(0, 10**6) for seed in range(1, 400)]
    assert drawn.count(0) >= 10
    assert drawn.count(10**6) >= 10


@given(SEEDS)
def test_texts_are_encodable_and_nonblank_when_asked(seed: int) -> None:
    s = Stream(seed)
    for _ in range(5):
        s.text().encode("utf-8")
        assert s.text(nonblank=True).strip()
        assert len(s.text(4, min_size=1)) >= 1


def test_texts_reach_hostile_characters() -> None:
    seen = "".join(Stream(seed).text(8) for seed in range(1, 300))
    for char in ("\U0001f600", "\u2028", "\x00", "\ufeff", "e\u0301", "/"):
        assert char in seen


@given(SEEDS, st.integers(0, 6))
def test_unique_texts_and_digests_are_distinct(seed: int, count: int) -> None:
    s = Stream(seed)
    texts = s.unique_texts(count, min_count=count)
    digests = s.digests(count, min_count=count)
    assert len(set(texts)) == len(texts) == count
    assert all(text.strip() for text in texts)
    assert len(set(digests)) == len(digests) == count
    assert all(is_digest(d) for d in digests)


def test_seed_zero_is_the_minimal_example() -> None:
    """Shrinking the seed to 0 gives the simplest values, not an arbitrary hash."""
    s = Stream(0)
    assert (s.integer(3, 9), s.flag(), s.pick("xyz"), s.text(), s.maybe(s.digest)) == (
        3,
        False,
        "x",
        "",
        None,
    )
    assert s.text(nonblank=True) == "a"


@given(SEEDS)
def test_messages_never_carry_an_absolute_path(seed: int) -> None:
    s = Stream(seed)
    for _ in range(5):
        message = _message(s)
        assert message.strip()
        assert not has_absolute_path(message)


@given(SEEDS, st.integers(0, 3), st.integers(0, 5))
def test_one_draw_derives_a_count_in_its_bounds_and_a_stream(
    drawn: int, low: int, width: int
) -> None:
    """For all draws: the count stays in ``low..high`` and the same draw makes the same
    value; the draw 0 makes the lowest count from the minimal stream."""

    def make(count: int, s: Stream) -> tuple[int, tuple[object, ...]]:
        return count, (s.integer(0, 9), s.text(), s.digest())

    count, values = derive(make, low, low + width, drawn)
    assert low <= count <= low + width
    assert derive(make, low, low + width, drawn) == (count, values)
    assert derive(make, low, low + width, 0)[0] == low
    assert derive(make, low, low + width, 0)[1][:2] == (0, "")


@given(seeded(lambda count, s: (count, s.integer(0, 3)), 2, 4))
def test_a_seeded_strategy_draws_what_derive_makes(value: tuple[int, int]) -> None:
    assert 2 <= value[0] <= 4
    assert 0 <= value[1] <= 3


@given(run_observations(min_runs=2, max_runs=3, digests=st.sampled_from(["e" * 64])))
def test_run_observations_draw_a_caller_s_digests_per_capture(
    observations: tuple[RunObservation, ...],
) -> None:
    assert 2 <= len(observations) <= 3
    assert [o.index for o in observations] == list(range(len(observations)))
    assert {o.output_digest for o in observations} <= {"e" * 64, None}
