"""An in-process index arrangement (compute/arrangement.LocalArrangement)
against the plain model of a collection: at every readable time its
contents are the sum of every update at or before it, whatever steps and
compactions came in between."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_lib.compute.arrangement import LocalArrangement
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.repr.update import Update

DESC = RelationDesc.of(("k", "integer"), ("v", "text"))

# One step: the updates it adds (row, diff), how far it moves the upper, and
# how far behind the upper it then asks the since to be.
STEPS = st.lists(
    st.tuples(
        st.lists(
            st.tuples(st.integers(0, 3), st.sampled_from("ab"), st.integers(-2, 2)), max_size=5
        ),
        st.integers(1, 3),
        st.integers(0, 4),
    ),
    min_size=1,
    max_size=12,
)


def model_at(updates: list[Update], time: int) -> Counter[tuple[object, ...]]:
    counts: Counter[tuple[object, ...]] = Counter()
    for u in updates:
        if u.time <= time:
            counts[u.row] += u.diff
    return Counter({row: n for row, n in counts.items() if n != 0})


@settings(max_examples=60, deadline=None)
@given(STEPS)
def test_contents_at_every_readable_time_match_the_model(
    steps: list[tuple[list[tuple[int, str, int]], int, int]],
) -> None:
    arrangement = LocalArrangement(DESC, (0,), as_of=5)
    written: list[Update] = []
    for rows, width, lag in steps:
        lower = arrangement.upper.time
        assert lower is not None
        upper = lower + width
        updates = [
            Update((k, v), lower + i % width, diff)
            for i, (k, v, diff) in enumerate(rows)
            if diff != 0
        ]
        arrangement.apply(updates, lower, Frontier.at(upper))
        written += updates
        arrangement.compact(Frontier.at(max(upper - lag, 0)))
        since = arrangement.since.time
        assert since is not None and since < upper
        for time in range(since, upper):
            assert Counter(dict(arrangement.peek_rows(time))) == model_at(written, time), time
        assert arrangement.rows == sum(u.diff for u in written)
        with pytest.raises(ValueError):
            arrangement.peek_rows(upper)  # not complete there yet
        if since > 5:
            with pytest.raises(ValueError):
                arrangement.peek_rows(since - 1)  # compacted away


def test_compaction_keeps_only_the_updates_after_since() -> None:
    """What compaction passes is folded into one count per row, so the
    arrangement holds its contents, not its history."""
    arrangement = LocalArrangement(DESC, (0,), as_of=0)
    for time in range(100):
        flip = [Update((1, "a"), time, 1 if time % 2 == 0 else -1)]
        arrangement.apply(flip, time, Frontier.at(time + 1))
        arrangement.compact(Frontier.at(time))
    assert arrangement.base == {}  # inserted and deleted 50 times: nothing
    assert arrangement.updates == []
    assert arrangement.peek_rows(99) == []
    arrangement.apply([Update((2, "b"), 100, 1)], 100, Frontier.at(101))
    arrangement.compact(Frontier.at(99))  # nothing to pass yet
    assert arrangement.updates == [Update((2, "b"), 100, 1)]
    assert arrangement.peek_rows(100) == [((2, "b"), 1)]
