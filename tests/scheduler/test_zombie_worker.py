"""A real `tidemark worker` frozen past its lease (docs/architecture.md, invariant 9):
SIGSTOP it, let its views move to the other worker, SIGCONT it. The
resumed incarnation must stop acting as primary (its lease fence ends it;
it comes back as a new epoch), and whatever it had in flight is decided by
the compare-and-append on each view's upper: every view equals its query in
DuckDB at every time, with no update lost or landed twice.

The worker is frozen outside a consensus commit: SQLite consensus has one
write lock per host, and a process frozen inside its commit statement holds
every other off until it runs again (docs/architecture.md, persist), and so
does one frozen inside a transaction of the arranged state. That is
SQLite's, not the lease fence's, which is what this test checks."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

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
    "total": "SELECT count(*) AS n, sum(v) AS s FROM t",
    "pairs": "SELECT a.k, count(*) AS n FROM t AS a JOIN t AS b ON a.k = b.k GROUP BY a.k",
}
RETAIN = "WITH (RETAIN HISTORY FOR '1h')"


@pytest.mark.slow
def test_frozen_worker_resumes_without_acting_as_primary(tmp_path: Path) -> None:
    rng = random.Random(9)
    env = tmp_path / "env"
    cluster = Cluster(scheduler_config(env, workers=2))
    victim_pid = None
    try:
        leases = ConsensusLeaseStore(cluster.coord.storage.persist.consensus, cluster="quickstart")
        wait_for("two workers", lambda: len(leases.alive_captures()) == 2)
        cluster.sql(f"CREATE TABLE t (k bigint, v bigint) {RETAIN}")
        for name, query in VIEWS.items():
            cluster.sql(f"CREATE MATERIALIZED VIEW {name} {RETAIN} AS {query}")
        tasks = {str(cluster.id_of(name)) for name in VIEWS}
        wait_for("views placed", lambda: all_replicating(cluster, tasks, 2))
        placement = cluster.placement()
        counts = {
            c: sum(1 for p, _ in placement.values() if p == c)
            for c in ("quickstart-0", "quickstart-1")
        }
        victim = max(counts, key=lambda c: (counts[c], c))
        survivor = next(c for c in counts if c != victim)
        frozen_tasks = {task for task, (capture, _) in placement.items() if capture == victim}
        assert frozen_tasks
        old_epoch = leases.alive_captures()[victim].epoch

        stop = threading.Event()
        writes = []

        def writer() -> None:
            while not stop.is_set():
                values = ", ".join(
                    f"({rng.randrange(4)}, {rng.randrange(100)})" for _ in range(rng.randint(1, 3))
                )
                cluster.sql(f"INSERT INTO t VALUES {values}")
                writes.append(values)
                time.sleep(0.03)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            wait_for("writes before the freeze", lambda: len(writes) >= 5)
            victim_pid = cluster.service.supervisor.pids()[victim]
            freeze_outside_a_commit(victim_pid, env)

            def moved() -> bool:
                now = cluster.placement()
                done = set(now) == tasks and all(
                    now[task] == (survivor, "replicating") for task in frozen_tasks
                )
                # Not before the frozen worker's lease expired: frozen, it
                # cannot renew it, so a lease live now was live at the move.
                # (Its last renewal may precede the freeze by the tries of
                # freeze_outside_a_commit, so time since the freeze says less.)
                assert not (done and leases.is_live(victim, old_epoch)), "moved under a live lease"
                return done

            wait_for("the frozen worker's views to move", moved, timeout=30)
            time.sleep(1.0)  # the survivor lands steps past where the victim stopped
            os.kill(victim_pid, signal.SIGCONT)
            victim_pid = None
            # The resumed process notices at its fence (or its renewal) that
            # the lease is gone, ends that incarnation and joins as a new one.
            wait_for(
                "the victim's new incarnation",
                lambda: (info := leases.alive_captures().get(victim)) and info.epoch > old_epoch,
                timeout=30,
            )
            time.sleep(1.0)  # keep writing while it is back
        finally:
            stop.set()
            thread.join()
        log_text = (env / "logs" / f"{victim}.log").read_text()
        lost = f"capture {victim}@{old_epoch} lost its lease ("
        assert lost in log_text, log_text[-3000:]
        # Its process never restarted: the same worker process carried on.
        assert cluster.service.supervisor.restarts()[victim] == 0

        cluster.sql("INSERT INTO t VALUES (9, 99)")
        last = update_times(cluster, cluster.id_of("t"))[-1]
        for name in VIEWS:  # a strict serializable read waits for the view
            cluster.sql(f"SELECT * FROM {name}")
        # Only the scheduler's primaries step views, each on one capture.
        wait_for("views placed again", lambda: all_replicating(cluster, tasks, 2))
        times = update_times(cluster, cluster.id_of("t"))
        assert last in times and len(times) >= 10
        checked = check_views_exact(cluster, cluster.id_of("t"), "k bigint, v bigint", VIEWS, times)
        assert checked == len(VIEWS) * len(times)
    finally:
        if victim_pid is not None:
            os.kill(victim_pid, signal.SIGCONT)
        cluster.close()


def freeze_outside_a_commit(pid: int, env: Path) -> None:
    """SIGSTOP `pid` at a moment it holds no write lock of the environment's
    SQLite files (consensus, arranged state): freeze, take each lock once,
    and thaw and try again if one is held."""
    databases = [env / "consensus.db", *env.rglob("arrangements.db")]
    for _ in range(100):
        os.kill(pid, signal.SIGSTOP)
        if all(_write_lock_free(db) for db in databases):
            return
        os.kill(pid, signal.SIGCONT)
        time.sleep(random.uniform(0.01, 0.1))
    raise AssertionError("the worker held a write lock at every try")


def _write_lock_free(database: Path) -> bool:
    probe = sqlite3.connect(database, timeout=1.0, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()
