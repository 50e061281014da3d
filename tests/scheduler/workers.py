"""Helpers for tests with real `tidemark worker` processes: a coordinator
running the scheduler (owner + worker supervisor), waiting on the owner's
view of the tasks, and checking views against DuckDB at every time."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from coordinator_lib.adapter.client import Handle, SessionClient, serve
from coordinator_lib.adapter.cluster_supervisor import ClusterService
from coordinator_lib.adapter.coordinator import Config
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.scheduler.owner import NotOwner

LEASE_TTL_MS = 2_000


def scheduler_config(data_dir: Path, **overrides: Any) -> Config:
    settings: dict[str, Any] = {
        "data_dir": str(data_dir),
        "maintenance_interval_ms": 20,
        "advance_interval_ms": 200,
        "compaction_interval_ms": 500,
        "scheduler": True,
        "scheduler_lease_ttl_ms": LEASE_TTL_MS,
    }
    return Config(**(settings | overrides))


class Cluster:
    """A coordinator with its ClusterService (no servers, no Spark)."""

    def __init__(self, config: Config, **service_options: Any) -> None:
        self.handle: Handle = serve(config)
        self.coord = self.handle.coordinator
        options = {"tick_s": 0.05, **service_options}
        self.service = ClusterService(self.coord, **options)
        self.service.start()
        self.session: SessionClient = self.handle.client.startup("materialize", "materialize")

    def sql(self, text: str) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        for response in self.session.execute(text):
            if response.rows is not None:
                rows = list(response.rows)
        return rows

    def id_of(self, name: str) -> GlobalId:
        return self.coord.catalog.session_catalog("materialize", ("public",)).resolve((name,)).id

    def status(self) -> dict[str, Any] | None:
        try:
            return self.service.owner.status()
        except NotOwner:
            return None

    def placement(self) -> dict[str, tuple[str, str]]:
        """task -> (capture, state) of its primary, as the owner sees it."""
        status = self.status() or {"captures": {}}
        out = {}
        for capture, tasks in status["captures"].items():
            for task in tasks:
                if task["role"] == "primary":
                    out[task["task"]] = (capture, task["state"])
        return out

    def close(self) -> None:
        self.session.terminate()
        self.service.stop()
        self.handle.shutdown()


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def all_replicating(cluster: Cluster, tasks: set[str], captures: int) -> bool:
    status = cluster.status()
    if status is None or len(status["captures"]) != captures:
        return False
    placement = cluster.placement()
    return set(placement) == tasks and all(s == "replicating" for _, s in placement.values())


def update_times(cluster: Cluster, table: GlobalId) -> list[int]:
    """Every time the table changed at (its history is retained)."""
    shard = cluster.coord.storage.shard(table)
    since, upper = shard.since().time, shard.upper().time
    assert since is not None and upper is not None
    return sorted({u.time for u in shard.updates_between(since, Frontier.at(upper))})


def check_views_exact(
    cluster: Cluster, table: GlobalId, columns: str, views: dict[str, str], times: list[int]
) -> int:
    """Each view at each time equals its query in DuckDB over the table at
    that time (multisets). Returns how many comparisons were made."""
    storage = cluster.coord.storage
    db = duckdb.connect()
    checked = 0
    for at in times:
        db.execute("DROP TABLE IF EXISTS t")
        db.execute(f"CREATE TABLE t ({columns})")
        rows = [row for row, diff in storage.snapshot(table, at) for _ in range(diff)]
        if rows:
            marks = ", ".join("?" * len(rows[0]))
            db.executemany(f"INSERT INTO t VALUES ({marks})", [list(r) for r in rows])
        for name, query in views.items():
            expected = Counter(tuple(r) for r in db.execute(query).fetchall())
            got: Counter = Counter()
            for row, diff in storage.snapshot(cluster.id_of(name), at):
                got[tuple(row)] += diff
            got = +got
            assert got == expected, f"{name} at {at}: {sorted(got.items())} != {expected}"
            checked += 1
    db.close()
    return checked
