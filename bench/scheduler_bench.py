"""Table scheduler benchmark: what the owner's Scheduler costs per tick, and
how long draining a capture takes.

- Tick cost with 10k tasks on 16 captures: only `Scheduler.tick` is timed
  (the agents run in the same process but outside the timer). With
  `heartbeat_tick=2` ticks alternate between sending 16 heartbeats (every
  task listed) and reading 16 responses (every task's status), so both
  medians are reported. Then the same while a rebalance moves tasks onto a
  new capture, `max_task_concurrency` at a time.
- Drain: a capture holding 100 tasks is drained (`drain_capture` until 0,
  then every task replicating elsewhere); ticks and in-process wall time,
  with executors whose prepare, commit and stop each take one tick.
  Real time is about ticks x the owner's tick interval, plus however long
  the dataflows take to hydrate: the scheduler adds the rest.

Everything is in one process over a perfect in-memory transport, so the
numbers are the scheduler's CPU cost, not network or Spark time.
Writes bench/results/scheduler.json and scheduler.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from coordinator_lib.scheduler import (
    Agent,
    CaptureLease,
    ClockWriter,
    FakeClock,
    InMemoryLeaseStore,
    InMemoryTableExecutor,
    Message,
    QueueTransport,
    ReplicationSetState,
    Scheduler,
    TableState,
)

RESULTS = Path(__file__).parent / "results"
TICK_MS = 100
TTL_MS = 10_000


class LocalCluster:
    """An owner and agents over a perfect in-memory transport."""

    def __init__(self, captures: int, tasks: int, executor_ticks: int = 0, **options) -> None:
        self.clock = FakeClock(1_000)
        self.leases = InMemoryLeaseStore(self.clock)
        self.transport = QueueTransport()
        self.executor_ticks = executor_ticks
        self.agents: dict[str, Agent] = {}
        self.executors: dict[str, InMemoryTableExecutor] = {}
        self.capture_leases: dict[str, CaptureLease] = {}
        for i in range(captures):
            self.add_capture(f"w{i:02d}")
        self.tables = [f"u{i}" for i in range(tasks)]
        self.scheduler = Scheduler("owner", 1, self.transport, seed=7, **options)
        self.checkpoint = 0
        self.in_flight: list[Message] = []
        self.tick_seconds: list[float] = []

    def add_capture(self, capture: str) -> None:
        lease = self.leases.acquire_capture_lease(capture, TTL_MS)
        ticks = self.executor_ticks
        executor = InMemoryTableExecutor(
            prepare_ticks=ticks,
            commit_ticks=ticks,
            stop_ticks=ticks,
            writer=ClockWriter(self.clock),
        )
        self.capture_leases[capture] = lease
        self.executors[capture] = executor
        self.agents[capture] = Agent(capture, lease.epoch, executor)

    def tick(self) -> None:
        self.clock.advance(TICK_MS)
        for capture, lease in self.capture_leases.items():
            renewed = self.leases.renew_capture_lease(lease, TTL_MS)
            assert renewed is not None
            self.capture_leases[capture] = renewed
        alive = self.leases.alive_captures()
        self.transport.deliver(self.in_flight)
        start = time.perf_counter()
        watermark = self.scheduler.tick(self.checkpoint, self.tables, alive)
        self.tick_seconds.append(time.perf_counter() - start)
        if watermark.checkpoint_ts:
            self.checkpoint = watermark.checkpoint_ts
        inbox: dict[str, list[Message]] = {}
        for message in self.transport.take_sent():
            inbox.setdefault(message.to, []).append(message)
        self.in_flight = []
        for capture, agent in self.agents.items():
            self.executors[capture].advance()
            self.in_flight.extend(agent.tick(inbox.get(capture, [])))

    def run_until(self, condition: Callable[[], bool], max_ticks: int) -> int:
        for n in range(max_ticks):
            if condition():
                return n
            self.tick()
        raise RuntimeError(f"not done in {max_ticks} ticks")

    def settled(self) -> bool:
        reps = self.scheduler.replication_sets
        if len(reps) != len(self.tables) or not self.scheduler.is_initialized():
            return False
        return all(rep.state == ReplicationSetState.REPLICATING for rep in reps.values())

    def primaries(self, capture: str) -> int:
        return sum(
            1 for t in self.executors[capture].tables.values() if t.state == TableState.REPLICATING
        )


def _ms(seconds: list[float]) -> dict:
    ordered = sorted(seconds)
    return {
        "median_ms": statistics.median(ordered) * 1e3,
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))] * 1e3,
        "mean_ms": statistics.fmean(ordered) * 1e3,
        "ticks": len(ordered),
    }


def bench_steady(tasks: int, captures: int, ticks: int) -> dict:
    # A big batch only speeds up the initial placement, which is not timed.
    cluster = LocalCluster(captures, tasks, add_table_batch_size=1_000)
    start = time.perf_counter()
    placement_ticks = cluster.run_until(cluster.settled, 10_000)
    placement_s = time.perf_counter() - start
    for _ in range(4):
        cluster.tick()
    cluster.tick_seconds.clear()
    for _ in range(ticks):
        cluster.tick()
    # Ticks alternate: heartbeats out (even), responses in (odd), or the reverse.
    a, b = cluster.tick_seconds[0::2], cluster.tick_seconds[1::2]
    send, receive = sorted((a, b), key=statistics.median)
    return {
        "what": f"steady tick, {tasks:,} tasks on {captures} captures",
        "all": _ms(cluster.tick_seconds),
        "heartbeats_out": _ms(send),
        "responses_in": _ms(receive),
        "placement_ticks": placement_ticks,
        "placement_s": placement_s,
    }


def bench_rebalance(tasks: int, captures: int, ticks: int, concurrency: int) -> dict:
    cluster = LocalCluster(
        captures - 1, tasks, add_table_batch_size=1_000, max_task_concurrency=concurrency
    )
    cluster.run_until(cluster.settled, 10_000)
    cluster.add_capture(f"w{captures - 1:02d}")
    cluster.run_until(cluster.scheduler.is_initialized, 100)
    assert cluster.scheduler.rebalance()
    cluster.tick_seconds.clear()
    moved_to_new = 0
    for _ in range(ticks):
        cluster.tick()
        moved_to_new = cluster.primaries(f"w{captures - 1:02d}")
    return {
        "what": f"tick while rebalancing onto a new capture (max {concurrency} in flight)",
        "all": _ms(cluster.tick_seconds),
        "moved": moved_to_new,
        "target": tasks // captures,
    }


def bench_drain(per_capture: int, captures: int, concurrency: int) -> dict:
    cluster = LocalCluster(
        captures, per_capture * captures, executor_ticks=1, max_task_concurrency=concurrency
    )
    cluster.run_until(cluster.settled, 10_000)
    target = max(cluster.executors, key=cluster.primaries)
    held = cluster.primaries(target)
    start = time.perf_counter()
    ticks = 0
    while cluster.scheduler.drain_capture(target) > 0 or not cluster.settled():
        cluster.tick()
        ticks += 1
        if ticks > 100_000:
            raise RuntimeError("drain did not finish")
    wall = time.perf_counter() - start
    assert cluster.primaries(target) == 0
    return {
        "what": f"drain a capture holding {held} tasks ({captures} captures, max {concurrency})",
        "held": held,
        "ticks": ticks,
        "wall_s": wall,
        "owner_tick_ms": _ms(cluster.tick_seconds)["median_ms"],
    }


def _markdown(document: dict) -> str:
    meta = document["meta"]
    lines = [
        f"Scheduler benchmark ({meta['machine']}; `{meta['command']}`)",
        "",
        "| what | median tick | p90 | mean | notes |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    steady = document["steady"]
    for key, label in (
        ("all", "all ticks"),
        ("heartbeats_out", "ticks sending heartbeats"),
        ("responses_in", "ticks reading responses"),
    ):
        t = steady[key]
        note = ""
        if key == "all":
            note = (
                f"initial placement: {steady['placement_ticks']} ticks,"
                f" {steady['placement_s']:.1f} s (not timed above)"
            )
        lines.append(
            f"| {steady['what']}: {label} | {t['median_ms']:.2f} ms | {t['p90_ms']:.2f} ms"
            f" | {t['mean_ms']:.2f} ms | {note} |"
        )
    for r in document["rebalance"]:
        t = r["all"]
        moved = f"{r['moved']} of {r['target']} moved in {t['ticks']} ticks"
        lines.append(
            f"| {r['what']} | {t['median_ms']:.2f} ms | {t['p90_ms']:.2f} ms"
            f" | {t['mean_ms']:.2f} ms | {moved} |"
        )
    lines += [
        "",
        "| drain | ticks | wall (in process) | median owner tick |",
        "| --- | ---: | ---: | ---: |",
    ]
    for r in document["drain"]:
        lines.append(
            f"| {r['what']} | {r['ticks']} | {r['wall_s']:.2f} s | {r['owner_tick_ms']:.2f} ms |"
        )
    lines += [
        "",
        "Drain executors take one tick per prepare, commit and stop; real time is about"
        " ticks x the owner's tick interval plus dataflow hydration.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--captures", type=int, default=16)
    parser.add_argument("--ticks", type=int, default=60, help="timed ticks per measurement")
    parser.add_argument("--drain-tasks", type=int, default=100, help="tasks on the drained capture")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    document = {
        "meta": {
            "machine": f"{os.cpu_count()} cores, {platform.machine()},"
            f" Python {platform.python_version()}",
            "command": "python -m bench.scheduler_bench",
            "tasks": args.tasks,
            "captures": args.captures,
        },
        "steady": bench_steady(args.tasks, args.captures, args.ticks),
        "rebalance": [
            bench_rebalance(args.tasks, args.captures, args.ticks, concurrency)
            for concurrency in (10, 100)
        ],
        "drain": [
            bench_drain(args.drain_tasks, 4, concurrency) for concurrency in (10, args.drain_tasks)
        ],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scheduler.json").write_text(json.dumps(document, indent=2))
    markdown = _markdown(document)
    (args.out / "scheduler.md").write_text(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
