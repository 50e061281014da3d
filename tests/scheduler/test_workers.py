"""Real `tidemark worker` processes under the scheduler (docs/architecture.md, invariant
9): three workers maintain views; SIGKILL one and its views move to the
others and stay exact at every time (checked against DuckDB); the global
checkpoint never regresses; the supervisor restarts the dead worker."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from pathlib import Path

from coordinator_lib.persist.consensus import open_consensus
from coordinator_lib.scheduler.consensus_lease import ConsensusLeaseStore
from tests.scheduler.workers import (
    Cluster,
    all_replicating,
    check_views_exact,
    scheduler_config,
    update_times,
    wait_for,
)

VIEWS = {
    "by_k": "SELECT k, sum(v) AS s, count(*) AS n FROM t GROUP BY k",
    "big": "SELECT k, v FROM t WHERE v > 50",
    "distinct_k": "SELECT DISTINCT k FROM t",
    "extremes": "SELECT k, min(v) AS lo, max(v) AS hi FROM t GROUP BY k",
    "total": "SELECT count(*) AS n, sum(v) AS s FROM t",
    "pairs": "SELECT a.k, count(*) AS n FROM t AS a JOIN t AS b ON a.k = b.k GROUP BY a.k",
}
RETAIN = "WITH (RETAIN HISTORY FOR '1h')"


def test_sigkilled_worker_views_move_and_stay_exact(tmp_path: Path) -> None:
    rng = random.Random(8)
    cluster = Cluster(
        scheduler_config(tmp_path / "env", workers=3),
        supervisor_options={"backoff_initial_s": 4.0},
    )
    try:
        consensus = cluster.coord.storage.persist.consensus
        leases = ConsensusLeaseStore(consensus, cluster="quickstart")
        wait_for("three workers", lambda: len(leases.alive_captures()) == 3)
        cluster.sql(f"CREATE TABLE t (k bigint, v bigint) {RETAIN}")
        for name, query in VIEWS.items():
            cluster.sql(f"CREATE MATERIALIZED VIEW {name} {RETAIN} AS {query}")
        tasks = {str(cluster.id_of(name)) for name in VIEWS}
        wait_for("views placed", lambda: all_replicating(cluster, tasks, 3))
        placement = cluster.placement()
        per_capture = {
            c: sum(1 for p, _ in placement.values() if p == c) for c in leases.alive_captures()
        }
        assert all(n == 2 for n in per_capture.values()), per_capture  # spread evenly

        checkpoints: list[int] = []
        writes: list[str] = []
        stop = threading.Event()

        def writer() -> None:
            while not stop.is_set():
                values = ", ".join(
                    f"({rng.randrange(5)}, {rng.randrange(100)})" for _ in range(rng.randint(1, 3))
                )
                cluster.sql(f"INSERT INTO t VALUES {values}")
                writes.append(values)
                status = cluster.status()
                if status is not None and status["checkpoint_ts"]:
                    checkpoints.append(status["checkpoint_ts"])
                time.sleep(0.05)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            wait_for("writes before the kill", lambda: len(writes) >= 3)
            victim = max(per_capture, key=lambda c: (per_capture[c], c))
            lost = {task for task, (capture, _) in placement.items() if capture == victim}
            old_epoch = leases.alive_captures()[victim].epoch
            table_upper_at_kill = cluster.coord.storage.collection_frontiers(cluster.id_of("t"))[1]
            os.kill(cluster.service.supervisor.pids()[victim], signal.SIGKILL)
            killed_at = time.monotonic()

            def moved() -> bool:
                now = cluster.placement()
                return all_replicating(cluster, tasks, 2) and all(
                    now[task][0] != victim for task in lost
                )

            wait_for("the victim's views to move", moved, timeout=30)
            moved_after = time.monotonic() - killed_at
            time.sleep(1.0)  # the survivors keep maintaining them
        finally:
            stop.set()
            thread.join()
        cluster.sql("INSERT INTO t VALUES (9, 99)")
        last = update_times(cluster, cluster.id_of("t"))[-1]
        for name in VIEWS:  # a strict serializable read waits for the view
            cluster.sql(f"SELECT * FROM {name}")
            assert cluster.coord.storage.collection_frontiers(cluster.id_of(name))[1].time > last

        times = update_times(cluster, cluster.id_of("t"))
        checked = check_views_exact(cluster, cluster.id_of("t"), "k bigint, v bigint", VIEWS, times)
        assert checked == len(VIEWS) * len(times)
        # Writes landed before the kill and while the views were moving.
        killed_at_time = table_upper_at_kill.time
        assert killed_at_time is not None
        assert any(at < killed_at_time for at in times)
        assert sum(1 for at in times[:-1] if at >= killed_at_time) >= 2

        assert checkpoints == sorted(checkpoints), "the global checkpoint regressed"
        assert moved_after < 15
        # The supervisor brings the victim back as a new incarnation.
        wait_for(
            "the victim's restart",
            lambda: (info := leases.alive_captures().get(victim)) and info.epoch > old_epoch,
            timeout=30,
        )
        assert cluster.service.supervisor.restarts()[victim] >= 1
        wait_for(
            "final checkpoint", lambda: (cluster.status() or {}).get("checkpoint_ts", 0) > last
        )
        # Serializable reads of worker-maintained views happen at the global
        # watermark: one cut across all views, below every view's upper.
        cluster.sql("SET transaction_isolation = serializable")
        reads = []
        for _ in range(3):
            [(text,)] = cluster.sql("EXPLAIN TIMESTAMP AS JSON FOR SELECT * FROM by_k, total")
            reads.append(json.loads(text)["determination"])
            time.sleep(0.2)
        assert all(r["global_watermark"] is not None for r in reads)
        assert all(r["timestamp"] == r["global_watermark"] for r in reads)
        assert [r["timestamp"] for r in reads] == sorted(r["timestamp"] for r in reads)
        for name in VIEWS:
            upper = cluster.coord.storage.collection_frontiers(cluster.id_of(name))[1].time
            assert upper is not None and reads[-1]["timestamp"] < upper
    finally:
        cluster.close()
    # Stopped workers released their leases.
    consensus = open_consensus(str(tmp_path / "env" / "consensus.db"))
    assert ConsensusLeaseStore(consensus).alive_captures() == {}
    consensus.close()
