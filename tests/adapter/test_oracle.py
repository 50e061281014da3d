"""The timestamp oracle is monotonic across processes (invariant 8)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from coordinator_lib.adapter.oracle import TimestampOracle, TimestampTaken
from coordinator_lib.persist import PersistClient
from coordinator_lib.persist import batch as batch_io
from coordinator_lib.persist.consensus import open_consensus
from coordinator_lib.persist.shard import Append, compare_and_append_all
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.update import Update
from tests.persist.support import DESC, new_shard_id


def _allocate(url: str, count: int, out: multiprocessing.Queue) -> None:
    oracle = TimestampOracle(open_consensus(url), now=lambda: 5)
    got = []
    for _ in range(count):
        ts = oracle.write_ts()
        oracle.apply_write(ts)
        got.append((ts, oracle.read_ts()))
    out.put(got)


def test_write_timestamps_are_unique_and_increasing_across_processes(tmp_path: Path) -> None:
    """A clock stuck at 5 still yields distinct, increasing times: every
    write_ts is above every earlier one, whoever handed it out."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    queue: multiprocessing.Queue = multiprocessing.get_context("spawn").Queue()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_allocate, args=(url, 50, queue)) for _ in range(3)]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    all_ts = [ts for result in results for ts, _ in result]
    assert len(set(all_ts)) == 150
    for result in results:
        own = [ts for ts, _ in result]
        assert own == sorted(own)
        reads = [read for _, read in result]
        assert reads == sorted(reads)  # read_ts never goes back
        assert all(read >= ts for ts, read in result)  # own writes visible after apply


def test_a_reopened_oracle_never_hands_out_an_earlier_time(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    first = TimestampOracle(open_consensus(url), now=lambda: 1_000)
    t1 = first.write_ts()
    first.apply_write(t1)
    # The wall clock went backwards (a different host, NTP): still later.
    second = TimestampOracle(open_consensus(url), now=lambda: 10)
    t2 = second.write_ts()
    assert t2 > t1
    assert second.read_ts() == t1
    second.apply_write(t2)
    first.apply_write(t1)  # a late, older apply does not move read_ts back
    assert first.read_ts() == t2


def test_write_ts_follows_the_wall_clock(tmp_path: Path) -> None:
    clock = [100]
    oracle = TimestampOracle(open_consensus(f"sqlite:///{tmp_path / 'c.db'}"), now=lambda: clock[0])
    assert oracle.write_ts() == 100
    clock[0] = 5_000
    assert oracle.write_ts() == 5_000


def _append_claiming(data_dir: str, shard_id: str, count: int, out: multiprocessing.Queue) -> None:
    """Group commit's way: propose a time, write at it, and claim it in the
    append's own compare-and-set; a time taken meanwhile is proposed again."""
    client = PersistClient.open(data_dir)
    oracle = TimestampOracle(client.consensus, now=lambda: 5)
    shard = client.open_shard(shard_id, DESC)
    got: list[tuple[int, int]] = []
    while len(got) < count:
        ts = oracle.propose_write_ts()
        upper, new_upper = shard.upper(), Frontier.at(ts + 1)
        table = batch_io.updates_to_table([Update((len(got), "x"), ts, 1)], DESC)
        append = Append(shard, shard.check_table(table, upper, new_upper), upper, new_upper)
        try:
            compare_and_append_all([append], [oracle.claim(ts)])
        except TimestampTaken:
            continue
        got.append((ts, oracle.read_ts()))
    out.put((shard_id, got))


def test_times_claimed_in_the_append_are_unique_and_readable_across_processes(
    tmp_path: Path,
) -> None:
    """Three processes append to their own shards, each claiming its time
    in the append's compare-and-set, with a clock stuck at 5 so they keep
    proposing the same times: every acknowledged time is distinct, each
    process's increase, and read_ts is at least each acknowledged time (the
    write is readable when acknowledged), its rows at that time."""
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue = ctx.Queue()
    ids = [new_shard_id() for _ in range(3)]
    procs = [
        ctx.Process(target=_append_claiming, args=(str(tmp_path), id, 30, queue)) for id in ids
    ]
    for proc in procs:
        proc.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
    all_ts = [ts for got in results.values() for ts, _ in got]
    assert len(set(all_ts)) == 90
    client = PersistClient.open(tmp_path)
    for id, got in results.items():
        own = [ts for ts, _ in got]
        assert own == sorted(own)
        assert all(read >= ts for ts, read in got)
        shard = client.open_shard(id, DESC)
        times = sorted(t for _, t, _ in shard.updates_between(0, shard.upper()))
        assert times == own
