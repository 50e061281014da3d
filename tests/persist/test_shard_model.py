"""Stateful model test of one shard (invariants 1, 2, 4 and 5).

Hypothesis drives random interleavings of appends (right and wrong expected
uppers, times outside the bounds), snapshots, critical and leased read holds,
compaction and garbage collection against a plain model: a list of updates,
`since`, `upper` and the holds. After every step the shard's frontiers must
equal the model's, never go backwards, keep since <= upper, never let since
pass a live hold, and every readable snapshot must equal the model's.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from coordinator_lib.persist import (
    InvalidUpdates,
    LeasedReader,
    LeaseExpired,
    PersistClient,
    ReadBeforeSince,
    ReadBeyondUpper,
    UpperMismatch,
)
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.update import Update
from tests.persist.support import DESC, canonical, model_snapshot, new_shard_id, open_client

ROWS = st.tuples(st.integers(0, 2), st.sampled_from(["x", "y", None]))
DIFFS = st.integers(-2, 2)
CRITICAL_IDS = ["c1", "c2"]


def F(t: int | None) -> Frontier:
    """Frontier shorthand (None is the empty frontier)."""
    return Frontier(t)


class ShardModel(RuleBasedStateMachine):
    """One fresh shard per example, checked against a plain model."""

    client: PersistClient  # set per test (one database per backend)

    def __init__(self) -> None:
        super().__init__()
        self.shard_id = new_shard_id()
        self.shard = self.client.open_shard(self.shard_id, DESC)
        self.registered = False  # has this handle registered its writer yet?
        self.updates: list[Update] = []
        self.upper: int | None = 0
        self.since: int | None = 0
        self.critical: dict[str, int | None] = {}
        self.readers: dict[str, LeasedReader] = {}
        self.holds: dict[str, int | None] = {}
        # Readers whose lease ran out but which the state still names: they
        # hold since back until the next transition that expires leases.
        self.lapsed: dict[str, int | None] = {}
        self.seen_since = F(0)
        self.seen_upper = F(0)

    # ------------------------------------------------------------- model
    def recompute(self, expire_leases: bool) -> None:
        """Mirror ShardState.recompute_since (optionally after lease expiry):
        since = max(since, min(least hold, upper)); unchanged without holds."""
        if expire_leases:
            self.lapsed.clear()
        holds = [*self.holds.values(), *self.critical.values(), *self.lapsed.values()]
        if holds:
            least = min(F(h) for h in holds)
            self.since = max(F(self.since), min(least, F(self.upper))).time

    def max_time(self) -> int:
        times = [u.time for u in self.updates]
        return max([*times, self.upper or 0, self.since or 0])

    def seqno(self) -> int:
        return self.shard.state().seqno

    def draw_updates(self, data: st.DataObject, lower: int, upper: int) -> list[Update]:
        times = st.integers(lower, upper - 1)
        return data.draw(st.lists(st.builds(Update, ROWS, times, DIFFS), max_size=4))

    # ------------------------------------------------------------ writes
    @precondition(lambda self: self.upper is not None)
    @rule(data=st.data(), width=st.integers(1, 3), close=st.integers(0, 14))
    def append(self, data: st.DataObject, width: int, close: int) -> None:
        """A correct compare_and_append lands, closing the shard now and then."""
        assert self.upper is not None
        lower = self.upper
        new_upper = None if close == 0 else lower + width
        updates = self.draw_updates(data, lower, lower + width)
        self.shard.compare_and_append(updates, F(lower), F(new_upper))
        if updates:
            self.registered = True
        self.updates += updates
        self.upper = new_upper
        self.recompute(expire_leases=True)

    @rule(data=st.data(), width=st.integers(1, 3))
    def append_wrong_upper(self, data: st.DataObject, width: int) -> None:
        """A wrong expected upper raises UpperMismatch carrying the real upper."""
        expected = data.draw(st.integers(0, self.max_time() + 3).filter(lambda t: t != self.upper))
        updates = self.draw_updates(data, expected, expected + width)
        before = self.seqno()
        with pytest.raises(UpperMismatch) as info:
            self.shard.compare_and_append(updates, F(expected), F(expected + width))
        assert info.value.current == F(self.upper)
        assert info.value.expected == F(expected)
        assert self.seqno() == before

    @precondition(lambda self: self.upper is not None)
    @rule(data=st.data(), width=st.integers(1, 3))
    def append_time_out_of_bounds(self, data: st.DataObject, width: int) -> None:
        """An update outside [expected, new) refuses the whole batch."""
        assert self.upper is not None
        lower, new_upper = self.upper, self.upper + width
        outside = st.integers(new_upper, new_upper + 3)
        if lower > 0:
            outside = outside | st.integers(0, lower - 1)
        bad = Update(data.draw(ROWS), data.draw(outside), 1)
        good = self.draw_updates(data, lower, new_upper)
        position = data.draw(st.integers(0, len(good)))
        updates = [*good[:position], bad, *good[position:]]
        before = self.seqno()
        with pytest.raises(InvalidUpdates, match=f"time {bad.time}, outside"):
            self.shard.compare_and_append(updates, F(lower), F(new_upper))
        assert self.seqno() == before

    @precondition(lambda self: self.upper is not None)
    @rule(back=st.integers(0, 2))
    def append_bad_bounds(self, back: int) -> None:
        """new_upper <= expected_upper is refused."""
        assert self.upper is not None
        before = self.seqno()
        with pytest.raises(InvalidUpdates, match="must be after"):
            self.shard.compare_and_append([], F(self.upper), F(self.upper - back))
        assert self.seqno() == before

    @rule()
    def reopen(self) -> None:
        """A fresh handle (a new writer id) on the same shard."""
        self.shard = self.client.open_shard(self.shard_id, DESC)
        self.registered = False

    # ------------------------------------------------------------- reads
    @rule(data=st.data())
    def snapshot(self, data: st.DataObject) -> None:
        t = data.draw(st.integers(0, self.max_time() + 3))
        if not F(self.since).less_equal(t):
            with pytest.raises(ReadBeforeSince):
                self.shard.snapshot(t)
        elif F(self.upper).less_equal(t):
            with pytest.raises(ReadBeyondUpper):
                self.shard.snapshot(t)
        else:
            assert canonical(self.shard.snapshot(t)) == model_snapshot(self.updates, t)

    # ------------------------------------------------------------- holds
    def draw_target(self, data: st.DataObject) -> int | None:
        return data.draw(st.none() | st.integers(0, self.max_time() + 3))

    @rule(data=st.data(), rid=st.sampled_from(CRITICAL_IDS))
    def downgrade_critical(self, data: st.DataObject, rid: str) -> None:
        target = self.draw_target(data)
        self.recompute(expire_leases=True)
        hold = self.critical.get(rid, self.since)
        self.critical[rid] = max(F(hold), F(target)).time
        self.recompute(expire_leases=False)
        assert self.shard.downgrade_critical_since(rid, F(target)) == F(self.since)

    @precondition(lambda self: bool(self.critical))
    @rule(data=st.data())
    def expire_critical(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.critical)))
        self.shard.expire_critical_reader(rid)
        del self.critical[rid]
        self.recompute(expire_leases=False)

    @rule()
    def open_reader(self) -> None:
        reader = self.shard.open_leased_reader()
        self.recompute(expire_leases=True)
        assert reader.since == F(self.since)
        self.readers[reader.reader_id] = reader
        self.holds[reader.reader_id] = self.since

    @precondition(lambda self: bool(self.readers))
    @rule(data=st.data())
    def downgrade_reader(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.readers)))
        target = self.draw_target(data)
        got = self.readers[rid].downgrade_since(F(target))
        self.holds[rid] = max(F(self.holds[rid]), F(target)).time
        assert got == F(self.holds[rid])
        self.recompute(expire_leases=True)

    @precondition(lambda self: bool(self.readers))
    @rule(data=st.data())
    def heartbeat_reader(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.readers)))
        self.readers[rid].heartbeat()
        self.recompute(expire_leases=True)

    @precondition(lambda self: bool(self.readers))
    @rule(data=st.data())
    def expire_reader(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.readers)))
        reader = self.readers.pop(rid)
        del self.holds[rid]
        reader.expire()
        self.recompute(expire_leases=False)
        with pytest.raises(LeaseExpired):
            reader.heartbeat()

    @rule()
    def lapse_reader(self) -> None:
        """A reader that stops heart-beating loses its lease and its hold."""
        reader = self.shard.open_leased_reader(lease_ms=1)
        self.recompute(expire_leases=True)
        self.lapsed[reader.reader_id] = self.since
        time.sleep(0.005)
        with pytest.raises(LeaseExpired, match="lease expired"):
            reader.downgrade_since(F(self.upper))

    # ------------------------------------------------------ maintenance
    @rule(target_rows=st.integers(1, 12))
    def compact(self, target_rows: int) -> None:
        before = self.shard.statistics()
        self.shard.compact(target_rows=target_rows)
        if not self.registered and self.shard._writer_registered:
            # Writing the merged batch registered this handle's writer,
            # which expires leases like any registration.
            self.registered = True
            self.recompute(expire_leases=True)
        after = self.shard.statistics()
        assert after.batches <= before.batches
        assert after.rows <= before.rows

    @rule()
    def collect_garbage(self) -> None:
        # Every failed write and every compaction cleans up after itself.
        assert self.shard.collect_garbage() == []

    # -------------------------------------------------------- invariants
    @invariant()
    def frontiers_and_contents(self) -> None:
        state = self.shard.state()
        since, upper = state.since_frontier, state.upper_frontier
        assert (since, upper) == (F(self.since), F(self.upper))
        assert since <= upper, "since passed upper"
        assert since >= self.seen_since and upper >= self.seen_upper, "a frontier went back"
        self.seen_since, self.seen_upper = since, upper
        for hold in [*self.holds.values(), *self.critical.values()]:
            assert since <= F(hold), "since passed a live hold"
        assert set(self.holds) <= set(state.leased_readers)
        # Blobs of named batches only (an inline batch has none).
        named = {b.key for b in state.batches if b.inline is None}
        assert set(self.shard.blob.list_batches(self.shard_id)) == named
        if since.is_empty:
            return
        assert since.time is not None
        last = self.max_time() + 1 if upper.is_empty else upper.time - 1  # type: ignore[operator]
        for t in sorted({since.time, (since.time + last) // 2, last}):
            if since.time <= t <= last:
                got = canonical(self.shard.snapshot(t))
                assert got == model_snapshot(self.updates, t), f"snapshot at {t}"


def test_shard_against_model(consensus_url: str, tmp_path: Path) -> None:
    """Random interleavings of every shard operation agree with the model."""
    client = open_client(consensus_url, tmp_path)

    class Model(ShardModel):
        pass

    Model.client = client
    try:
        run_state_machine_as_test(
            Model,
            settings=settings(
                max_examples=50,
                stateful_step_count=30,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    finally:
        client.close()
