"""Timestamp selection as a pure function: which time each isolation level
and AS OF form picks, and the global watermark's part in serializable reads
(docs/architecture.md: reads at one time; issue 8: the scheduler's watermark is the
freshest time all worker-maintained views can be read together)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator_lib.adapter.errors import InvalidTimestamp
from coordinator_lib.adapter.session import SERIALIZABLE, STRICT_SERIALIZABLE
from coordinator_lib.adapter.timestamp_selection import InputFrontiers, determine_timestamp
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.sql.plans import AsOfTime


def _input(name: str, since: int, upper: int) -> InputFrontiers:
    return InputFrontiers(f"u{name}", name, Frontier(since), Frontier(upper), kind="compute")


def test_serializable_reads_at_the_watermark_not_the_freshest_input() -> None:
    inputs = [_input("a", 10, 200), _input("b", 10, 150)]
    without = determine_timestamp(inputs, SERIALIZABLE, None, None, 0)
    with_mark = determine_timestamp(inputs, SERIALIZABLE, None, None, 0, global_watermark=120)
    assert without.timestamp == 149
    assert with_mark.timestamp == 120
    assert "global watermark: 120" in with_mark.explain()
    assert json.loads(with_mark.explain_json())["determination"]["global_watermark"] == 120


def test_watermark_never_reads_past_an_input_or_before_a_since() -> None:
    inputs = [_input("a", 100, 150)]
    # A watermark ahead of this read's inputs (a table lags): the inputs win.
    assert (
        determine_timestamp(inputs, SERIALIZABLE, None, None, 0, global_watermark=500).timestamp
        == 149
    )
    # A watermark behind the since (compacted): the since wins.
    assert (
        determine_timestamp(inputs, SERIALIZABLE, None, None, 0, global_watermark=50).timestamp
        == 100
    )


def test_strict_serializable_and_as_of_ignore_the_watermark() -> None:
    inputs = [_input("a", 10, 200)]
    strict = determine_timestamp(inputs, STRICT_SERIALIZABLE, None, 180, 0, global_watermark=120)
    assert strict.timestamp == 180
    exact = determine_timestamp(
        inputs, SERIALIZABLE, AsOfTime(50, at_least=False), None, 0, global_watermark=120
    )
    assert exact.timestamp == 50
    with pytest.raises(InvalidTimestamp, match=r"Timestamp \(5\) is not valid for all inputs: a"):
        determine_timestamp(inputs, SERIALIZABLE, AsOfTime(5, at_least=False), None, 0, 120)


@given(
    marks=st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=20).map(sorted),
    since=st.integers(min_value=0, max_value=500),
)
def test_serializable_reads_never_go_back_while_the_watermark_advances(
    marks: list[int], since: int
) -> None:
    inputs = [_input("a", since, 2000), _input("b", since, 1500)]
    times = [
        determine_timestamp(inputs, SERIALIZABLE, None, None, 0, global_watermark=m).timestamp
        for m in marks
    ]
    assert times == sorted(times)
    assert all(since <= t <= 1499 for t in times)


def test_as_of_at_least_reads_the_freshest_readable_time_not_before_t() -> None:
    inputs = [_input("a", 100, 200), _input("b", 50, 180)]
    # t behind what is readable: the freshest readable time (least upper - 1),
    # not t, and not the oracle's time either (no strict serializable wait).
    behind = determine_timestamp(inputs, STRICT_SERIALIZABLE, AsOfTime(120, at_least=True), 190, 0)
    assert behind.timestamp == 179
    assert behind.oracle_read_ts is None
    assert behind.respond_immediately
    # t ahead of the uppers: t itself (the read waits for the inputs).
    ahead = determine_timestamp(inputs, SERIALIZABLE, AsOfTime(500, at_least=True), None, 0)
    assert ahead.timestamp == 500
    assert not ahead.respond_immediately
    # t before a since: still served (at a later time), where an exact AS OF is refused.
    early = determine_timestamp(inputs, SERIALIZABLE, AsOfTime(10, at_least=True), None, 0)
    assert early.timestamp == 179
    with pytest.raises(InvalidTimestamp, match=r"Timestamp \(10\) is not valid for all inputs"):
        determine_timestamp(inputs, SERIALIZABLE, AsOfTime(10, at_least=False), None, 0)
    # Nothing readable yet (upper == since): the since, which the read waits for.
    fresh = [_input("c", 300, 300)]
    assert determine_timestamp(fresh, SERIALIZABLE, AsOfTime(10, True), None, 0).timestamp == 300
