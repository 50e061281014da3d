"""The timestamp oracle is monotonic across processes (invariant 8)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from coordinator_lib.adapter.oracle import TimestampOracle
from coordinator_lib.persist.consensus import open_consensus


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
