"""Read policies decide how a collection's since follows its upper:
LagWriteFrontier (rounded down), ValidFrom, NoPolicy and Multiple (the least
member). A new policy never moves a capability backwards, and over any
sequence of writes, policy changes and holds the frontiers never regress and
since <= upper (DESIGN invariant 1)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.repr import (
    Frontier,
    GlobalId,
    LagWriteFrontier,
    Multiple,
    NoPolicy,
    ReadPolicy,
    ValidFrom,
)
from coordinator_lib.storage import (
    AppendCommand,
    CollectionDescription,
    DataSource,
    ReadBeforeSince,
    ReadHold,
    StorageController,
)
from tests.storage.support import DESC, create_table, rows, uid

T1 = uid(1)


def advance(controller: StorageController, id: GlobalId, upper: int) -> None:
    """Append one row at the current upper and move the upper to `upper`."""
    current = controller.collection_frontiers(id)[1].time
    assert current is not None
    controller.append([AppendCommand(id, rows((current, "x"), time=current), upper)])


LAG_CASES = [
    (1500, 12345, 10000),  # 10845 rounded down to a multiple of 1000
    (1000, 12345, 11000),
    (3000, 12345, 9000),
    (500, 12345, 11500),  # granule = lag when lag < 1000
    (250, 1000, 750),
    (1, 12345, 12344),
    (0, 12345, 12345),  # no lag: since = upper
    (20000, 12345, 0),  # lag beyond the upper: since stays at 0
]


@pytest.mark.parametrize(("lag", "upper", "since"), LAG_CASES)
def test_lag_write_frontier_formula(lag: int, upper: int, since: int) -> None:
    assert LagWriteFrontier(lag).frontier(Frontier.at(upper)) == Frontier.at(since)
    # Closed: no capability beyond the minimum (the since stays where it is).
    assert LagWriteFrontier(lag).frontier(Frontier.empty()) == Frontier.minimum()


@pytest.mark.parametrize(("lag", "upper", "since"), LAG_CASES[:3] + LAG_CASES[-2:])
def test_lag_write_frontier_sets_the_since(
    controller: StorageController, lag: int, upper: int, since: int
) -> None:
    create_table(controller, T1)
    controller.set_read_policy([(T1, LagWriteFrontier(lag))])
    advance(controller, T1, upper)
    assert controller.collection_frontiers(T1) == (Frontier.at(since), Frontier.at(upper))
    assert controller.collection(T1).since == Frontier.at(since)
    if since > 0:
        with pytest.raises(ReadBeforeSince):
            controller.snapshot(T1, since - 1)
    if since < upper:
        assert controller.snapshot(T1, since) is not None


def test_default_policy_lags_one_second(controller: StorageController) -> None:
    create_table(controller, T1)
    assert controller.collection(T1).read_policy == LagWriteFrontier(1000)
    advance(controller, T1, 12345)
    assert controller.collection_frontiers(T1)[0] == Frontier.at(11000)


def test_valid_from_holds_the_since_at_a_fixed_time(controller: StorageController) -> None:
    create_table(controller, T1)
    controller.set_read_policy([(T1, ValidFrom(Frontier.at(5000)))])
    advance(controller, T1, 3000)
    assert controller.collection_frontiers(T1) == (Frontier.at(3000), Frontier.at(3000))
    advance(controller, T1, 12345)
    assert controller.collection_frontiers(T1)[0] == Frontier.at(5000)
    advance(controller, T1, 50000)
    assert controller.collection_frontiers(T1)[0] == Frontier.at(5000)
    assert controller.snapshot(T1, 5000) == [((0, "x"), 1), ((3000, "x"), 1)]


def test_no_policy_keeps_the_initial_since(controller: StorageController) -> None:
    create_table(controller, T1, since=100)
    controller.set_read_policy([(T1, NoPolicy(Frontier.at(100)))])
    for upper in (1000, 5000, 100_000):
        advance(controller, T1, upper)
        assert controller.collection_frontiers(T1)[0] == Frontier.at(100)
    assert controller.snapshot(T1, 100) == [((100, "x"), 1)]


def test_multiple_takes_the_least_member(controller: StorageController) -> None:
    create_table(controller, T1)
    policy = Multiple((LagWriteFrontier(1000), ValidFrom(Frontier.at(3000))))
    controller.set_read_policy([(T1, policy)])
    advance(controller, T1, 2500)
    assert controller.collection_frontiers(T1)[0] == Frontier.at(1000)  # the lag is lower
    advance(controller, T1, 12345)
    assert controller.collection_frontiers(T1)[0] == Frontier.at(3000)  # ValidFrom is lower
    lags = Multiple((LagWriteFrontier(1000), LagWriteFrontier(5000), NoPolicy(Frontier.empty())))
    controller.set_read_policy([(T1, lags)])
    advance(controller, T1, 20000)
    assert controller.collection_frontiers(T1)[0] == Frontier.at(15000)


def test_a_new_policy_never_moves_the_since_back(controller: StorageController) -> None:
    create_table(controller, T1)
    controller.set_read_policy([(T1, LagWriteFrontier(0))])
    advance(controller, T1, 10000)
    assert controller.collection_frontiers(T1)[0] == Frontier.at(10000)
    for policy in (ValidFrom(Frontier.at(2000)), NoPolicy(Frontier.at(0)), LagWriteFrontier(9000)):
        controller.set_read_policy([(T1, policy)])
        assert controller.collection(T1).read_policy == policy
        assert controller.collection(T1).implied_capability == Frontier.at(10000)
        assert controller.collection_frontiers(T1)[0] == Frontier.at(10000)
        with pytest.raises(ReadBeforeSince):
            controller.snapshot(T1, 5000)
    # The lag policy then takes over once the upper is far enough ahead.
    advance(controller, T1, 30000)
    assert controller.collection_frontiers(T1)[0] == Frontier.at(21000)


def test_repeated_ids_end_with_the_last_policy(controller: StorageController) -> None:
    create_table(controller, T1)
    create_table(controller, uid(2))
    controller.set_read_policy(
        [
            (T1, LagWriteFrontier(0)),
            (uid(2), ValidFrom(Frontier.at(7))),
            (T1, LagWriteFrontier(500)),
        ]
    )
    assert controller.collection(T1).read_policy == LagWriteFrontier(500)
    assert controller.collection(uid(2)).read_policy == ValidFrom(Frontier.at(7))
    advance(controller, T1, 10000)
    assert controller.collection_frontiers(T1)[0] == Frontier.at(9500)


# --------------------------------------------------------------- property

policies: st.SearchStrategy[ReadPolicy] = st.recursive(
    st.one_of(
        st.integers(0, 4000).map(LagWriteFrontier),
        st.integers(0, 20000).map(lambda t: ValidFrom(Frontier.at(t))),
        st.integers(0, 20000).map(lambda t: NoPolicy(Frontier.at(t))),
    ),
    lambda inner: st.lists(inner, min_size=1, max_size=3).map(lambda ps: Multiple(tuple(ps))),
    max_leaves=3,
)

operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3000)),
        st.tuples(st.just("report"), st.integers(1, 3000)),
        st.tuples(st.just("policy"), policies),
        st.tuples(st.just("hold"), st.integers(0, 3000)),
        st.tuples(st.just("release"), st.integers(0, 5)),
        st.tuples(st.just("maintain"), st.none()),
    ),
    min_size=3,
    max_size=12,
)

_ids = itertools.count(1000)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations)
def test_frontiers_never_regress(controller: StorageController, ops: list[tuple[str, Any]]) -> None:
    """A table written by append and a collection whose writer reports its
    upper, under random policies and holds: since and upper only advance,
    since <= upper, and a live hold is never passed."""
    table, other = uid(next(_ids)), uid(next(_ids))
    create_table(controller, table)
    controller.create_collections([(other, CollectionDescription(DESC, DataSource.other()))])
    holds: list[ReadHold] = []
    last = {id: controller.collection_frontiers(id) for id in (table, other)}
    for op, arg in ops:
        if op == "append":
            advance(controller, table, controller.collection_frontiers(table)[1].time + arg)  # type: ignore[operator]
        elif op == "report":
            shard = controller.shard(other)
            upper = shard.upper()
            shard.compare_and_append([], upper, Frontier.at(upper.time + arg))  # type: ignore[operator]
            controller.update_write_frontiers([(other, Frontier.at(upper.time + arg))])  # type: ignore[operator]
        elif op == "policy":
            controller.set_read_policy([(table, arg), (other, arg)])
        elif op == "hold":
            for id in (table, other):
                since = controller.collection_frontiers(id)[0].time
                holds.append(controller.acquire_read_hold(id, since + arg))  # type: ignore[operator]
        elif op == "release" and holds:
            holds.pop(arg % len(holds)).release()
        elif op == "maintain":
            controller.maintain()
        for id in (table, other):
            since, upper = controller.collection_frontiers(id)
            old_since, old_upper = last[id]
            assert old_since <= since and old_upper <= upper
            assert since <= upper
            assert controller.collection(id).since == since
            for hold in holds:
                if hold.id == id:
                    assert since.less_equal(hold.time)  # type: ignore[arg-type]
            last[id] = (since, upper)
    for hold in holds:
        hold.release()
