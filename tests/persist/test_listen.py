"""Listen: every update after `as_of` exactly once, in order of progress,
then progress frontiers; its leased hold keeps since <= frontier - 1 (so
compaction between polls cannot fold unread updates), and closing releases it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.persist import Listen, ListenEvent, PersistClient, Shard
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.update import Update, consolidate
from tests.persist.support import DESC, new_shard_id, open_client

ROWS = st.tuples(st.integers(0, 2), st.sampled_from(["a", "b", None]))


@pytest.fixture
def client(consensus_url: str, tmp_path: Path) -> Iterator[PersistClient]:
    client = open_client(consensus_url, tmp_path)
    yield client
    client.close()


def check_events(events: list[ListenEvent], start: int, last_progress: Frontier | None) -> Frontier:
    """Each updates event is followed by a progress event; its times lie in
    [previous progress, this progress). Returns the last progress seen."""
    lower = start
    progress = last_progress
    pending: list[Update] = []
    for event in events:
        if event.progress is None:
            assert event.updates, "an event carries updates or progress"
            assert not pending, "two update events without progress between them"
            pending = list(event.updates)
            continue
        assert not event.updates
        assert progress is None or event.progress > progress, "progress went backwards"
        for u in pending:
            assert lower <= u.time and not event.progress.less_equal(u.time)
        pending = []
        progress = event.progress
        if event.progress.time is not None:
            lower = event.progress.time
    assert not pending, "updates not followed by progress"
    assert progress is not None
    return progress


def emitted(events: list[ListenEvent]) -> list[Update]:
    return [u for e in events for u in e.updates]


def test_listen_emits_after_as_of_then_progress(client: PersistClient) -> None:
    shard = client.open_shard(new_shard_id(), DESC)
    log = [Update((t % 3, "a"), t, 1) for t in range(5)] + [Update((0, "a"), 3, -1)]
    shard.compare_and_append(log, Frontier(0), Frontier(5))
    listen = shard.listen(as_of=2)

    first = listen.poll()
    assert check_events(first, 3, None) == Frontier(5)
    assert sorted(emitted(first)) == sorted(consolidate(u for u in log if u.time > 2))
    assert listen.poll() == []  # nothing new

    shard.compare_and_append([Update((9, None), 6, 2)], Frontier(5), Frontier(7))
    second = listen.poll()
    assert second == [
        ListenEvent(updates=(Update((9, None), 6, 2),)),
        ListenEvent(progress=Frontier(7)),
    ]

    shard.compare_and_append([], Frontier(7), Frontier(9))
    assert listen.poll() == [ListenEvent(progress=Frontier(9))]  # progress alone

    shard.compare_and_append([Update((1, "b"), 9, -1)], Frontier(9), Frontier.empty())
    last = listen.poll()
    assert last == [
        ListenEvent(updates=(Update((1, "b"), 9, -1),)),
        ListenEvent(progress=Frontier.empty()),
    ]
    assert listen.done
    assert listen.poll() == []
    assert listen.reader.reader_id not in shard.state().leased_readers


def test_listen_hold_bounds_since_and_close_releases(client: PersistClient) -> None:
    shard = client.open_shard(new_shard_id(), DESC)
    shard.compare_and_append([Update((1, "a"), 0, 1)], Frontier(0), Frontier(4))
    listen = shard.listen(as_of=1)
    # Another reader lets go of everything: since may go no further than
    # what the listen still needs.
    shard.downgrade_critical_since("other", Frontier.empty())
    assert shard.since() == Frontier(0)  # the hold taken at the shard's since
    listen.poll()
    assert listen.frontier == 4
    shard.downgrade_critical_since("other", Frontier.empty())
    assert shard.since() == Frontier(3)  # frontier - 1
    shard.compare_and_append([], Frontier(4), Frontier(10))
    assert shard.since() == Frontier(3)
    listen.poll()
    assert shard.since() == Frontier(9)
    listen.close()
    assert listen.reader.reader_id not in shard.state().leased_readers
    shard.compare_and_append([], Frontier(10), Frontier(20))
    assert shard.since() == Frontier(20)  # nothing holds it back any more


Op = tuple[str, list[Update], int]


def run_ops(
    shard: Shard, listen: Listen, ops: list[Op], upper: int
) -> tuple[list[ListenEvent], list[Update], int]:
    """Apply appends, compactions (since pushed as far as allowed) and polls;
    check the listen's hold after every step. Returns (events, updates, upper)."""
    events: list[ListenEvent] = []
    written: list[Update] = []
    for op, batch, width in ops:
        if op == "append":
            shifted = [Update(u.row, upper + u.time % width, u.diff) for u in batch]
            shard.compare_and_append(shifted, Frontier(upper), Frontier(upper + width))
            written += shifted
            upper += width
        elif op == "compact":
            shard.downgrade_critical_since("greedy", Frontier(upper))
            shard.compact(target_rows=width)
        else:
            events += listen.poll()
        assert shard.since() <= Frontier(listen.frontier - 1), "since passed the listen's hold"
    return events, written, upper


ops_st = st.lists(
    st.tuples(
        st.sampled_from(["append", "compact", "poll"]),
        st.lists(st.builds(Update, ROWS, st.integers(0, 3), st.integers(-2, 2)), max_size=4),
        st.integers(1, 3),
    ),
    max_size=25,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(prefix=ops_st, ops=ops_st, as_of_pick=st.floats(0, 1))
def test_listen_exactly_once_across_compaction(
    client: PersistClient,
    prefix: list[Op],
    ops: list[Op],
    as_of_pick: float,
) -> None:
    """Whatever the interleaving of appends, compactions and polls, the listen
    emits every update after as_of exactly once, in order of progress."""
    shard = client.open_shard(new_shard_id(), DESC)
    shard.compare_and_append([], Frontier(0), Frontier(1))
    # History before the listen starts, compacted up to its as_of.
    no_polls = [op for op in prefix if op[0] != "poll"]
    before: list[Update] = []
    upper = 1
    for op, batch, width in no_polls:
        if op == "append":
            shifted = [Update(u.row, upper + u.time % width, u.diff) for u in batch]
            shard.compare_and_append(shifted, Frontier(upper), Frontier(upper + width))
            before += shifted
            upper += width
    as_of = int(as_of_pick * (upper - 1))
    shard.downgrade_critical_since("greedy", Frontier(as_of))
    shard.compact()
    listen = shard.listen(as_of)

    events, written, upper = run_ops(shard, listen, ops, upper)
    shard.compare_and_append([], Frontier(upper), Frontier.empty())
    events += listen.poll()

    assert check_events(events, as_of + 1, None) == Frontier.empty()
    out = emitted(events)
    assert len({(u.row, u.time) for u in out}) == len(out), "an update was emitted twice"
    assert all(u.diff != 0 for u in out)
    want = consolidate(u for u in before + written if u.time > as_of)
    assert consolidate(out) == want
    assert listen.done


def test_listen_events_iterator_follows_a_writer(client: PersistClient) -> None:
    """A blocking listen sees a concurrent writer's batches, then the close."""
    shard = client.open_shard(new_shard_id(), DESC)
    shard.compare_and_append([], Frontier(0), Frontier(1))
    listen = shard.listen(as_of=0, poll_interval_s=0.005)
    writer = client.open_shard(shard.shard_id, DESC)
    sent = [Update((i, "w"), i + 1, 1) for i in range(30)]

    def write() -> None:
        for u in sent:
            writer.compare_and_append([u], Frontier(u.time), Frontier(u.time + 1))
        writer.compare_and_append([], Frontier(31), Frontier.empty())

    thread = threading.Thread(target=write)
    thread.start()
    events = list(listen.events(timeout_s=60))
    thread.join()
    assert check_events(events, 1, None) == Frontier.empty()
    assert emitted(events) == sent
    assert listen.done
