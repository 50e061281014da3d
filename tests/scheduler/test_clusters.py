"""CREATE CLUSTER / DROP CLUSTER start and stop worker processes; a crashed
worker is restarted; views on a cluster with workers are maintained there
and nowhere else; the scheduler's HTTP endpoints."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import requests

from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.responses import ExecuteResponseKind
from coordinator_lib.server.environment import Environment
from coordinator_lib.server.http import HttpServer
from coordinator_lib.server.scheduler_api import scheduler_routes
from tests.scheduler.workers import Cluster, scheduler_config, wait_for


def _instance_of(cluster: Cluster, name: str) -> str | None:
    found = cluster.coord.compute.find_dataflow(cluster.id_of(name))
    return None if found is None else found[0]


def test_create_and_drop_cluster_start_and_stop_workers(tmp_path: Path) -> None:
    cluster = Cluster(
        scheduler_config(tmp_path / "env"), supervisor_options={"backoff_initial_s": 0.2}
    )
    supervisor = cluster.service.supervisor
    try:
        cluster.sql("CREATE TABLE t (k bigint, v bigint)")
        # Named before the cluster exists: runs here until it has workers.
        cluster.sql("CREATE MATERIALIZED VIEW early IN CLUSTER d AS SELECT k FROM t WHERE v > 1")
        cluster.sql("CREATE MATERIALIZED VIEW here AS SELECT count(*) AS n FROM t")
        assert _instance_of(cluster, "early") == "quickstart"
        assert supervisor.pids() == {}

        responses = cluster.session.execute("CREATE CLUSTER c (REPLICATION FACTOR 2)")
        assert [r.kind for r in responses] == [ExecuteResponseKind.CREATED_CLUSTER]
        cluster.sql("CREATE CLUSTER d (SIZE = 'small', REPLICATION FACTOR = 1)")
        assert "c" in [row[0] for row in cluster.sql("SHOW CLUSTERS")]
        wait_for("workers c-0, c-1, d-0", lambda: set(supervisor.pids()) == {"c-0", "c-1", "d-0"})
        cluster.sql(
            "CREATE MATERIALIZED VIEW mv IN CLUSTER c AS SELECT k, sum(v) AS s FROM t GROUP BY k"
        )
        mv, early = str(cluster.id_of("mv")), str(cluster.id_of("early"))
        wait_for(
            "early moved to d's workers", lambda: _instance_of(cluster, "early") == "workers:d"
        )
        assert _instance_of(cluster, "mv") == "workers:c"
        assert _instance_of(cluster, "here") == "quickstart"  # no workers: runs here

        def placed() -> bool:
            now = cluster.placement()
            return (
                now.get(mv, ("", ""))[1] == "replicating"
                and now[mv][0].startswith("c-")
                and now.get(early, ("", ""))[1] == "replicating"
                and now[early][0] == "d-0"
            )

        wait_for("views placed on their clusters", placed)
        cluster.sql("INSERT INTO t VALUES (1, 5), (1, 7), (2, 1)")
        assert sorted(cluster.sql("SELECT * FROM mv")) == [(1, 12), (2, 1)]
        assert sorted(cluster.sql("SELECT * FROM early")) == [(1,), (1,)]
        assert cluster.sql("SELECT * FROM here") == [(3,)]

        with pytest.raises(AdapterError, match="already exists"):
            cluster.sql("CREATE CLUSTER c (REPLICATION FACTOR 1)")
        cluster.sql("CREATE CLUSTER IF NOT EXISTS c (REPLICATION FACTOR 5)")
        with pytest.raises(AdapterError, match="runs on it") as blocked:
            cluster.sql("DROP CLUSTER c")
        assert blocked.value.code == "2BP01"
        with pytest.raises(AdapterError, match="default cluster"):
            cluster.sql("DROP CLUSTER quickstart")
        notices = next(iter(cluster.session.execute("DROP CLUSTER IF EXISTS nope"))).notices
        assert "does not exist" in notices[0].message

        # A crashed worker is restarted (with backoff) as a new incarnation.
        pid = supervisor.pids()["c-0"]
        os.kill(pid, signal.SIGKILL)
        wait_for("c-0 restarted", lambda: supervisor.pids().get("c-0", pid) != pid)
        assert supervisor.restarts()["c-0"] == 1

        cluster.sql("DROP CLUSTER c CASCADE")
        with pytest.raises(AdapterError):
            cluster.sql("SELECT * FROM mv")
        wait_for("c's workers stopped", lambda: set(supervisor.pids()) == {"d-0"})
        assert "c" not in cluster.coord.catalog.clusters()
        cluster.sql("INSERT INTO t VALUES (3, 3)")
        assert sorted(cluster.sql("SELECT * FROM early")) == [(1,), (1,), (3,)]
    finally:
        cluster.close()
    assert supervisor.pids() == {}


def _get(env: Environment, path: str) -> requests.Response:
    return requests.get(f"{env.http.url}{path}", timeout=10)


def _post(env: Environment, path: str, body: object) -> requests.Response:
    return requests.post(f"{env.http.url}{path}", json=body, timeout=10)


def test_scheduler_http_api(tmp_path: Path) -> None:
    config = scheduler_config(tmp_path / "env", workers=2)
    env = Environment(config, pgwire_port=0, http_port=0)
    env.start()
    assert env.cluster_service is not None
    env.cluster_service.tick_s = 0.05
    standby = None
    try:
        statements = ["CREATE TABLE t (k bigint, v bigint)"] + [
            f"CREATE MATERIALIZED VIEW v{i} AS "
            f"SELECT k, count(*) AS n FROM t WHERE v > {i} GROUP BY k"
            for i in range(4)
        ]
        reply = _post(env, "/api/sql", {"query": "; ".join(statements)}).json()
        assert all("error" not in r for r in reply["results"]), reply

        def tasks() -> dict:
            response = _get(env, "/api/scheduler/tasks")
            return response.json() if response.status_code == 200 else {}

        def settled(spread: tuple[int, ...] | None = None) -> dict | None:
            status = tasks()
            entries = [t for c in status.get("captures", {}).values() for t in c]
            if len(status.get("captures", {})) != 2 or len(entries) != 4:
                return None
            if not all(t["state"] == "replicating" and t["role"] == "primary" for t in entries):
                return None
            counts = tuple(sorted(len(c) for c in status["captures"].values()))
            return status if spread is None or counts == spread else None

        status = wait_for("four tasks on two workers", settled)
        assert set(status) >= {"checkpoint_ts", "resolved_ts", "captures"}
        assert status["checkpoint_ts"] > 0 and status["resolved_ts"] >= status["checkpoint_ts"]
        assert sorted(status["captures"]) == ["quickstart-0", "quickstart-1"]
        entry = next(t for tasks in status["captures"].values() for t in tasks)
        assert set(entry) == {"task", "state", "role", "checkpoint_ts"}

        # Move one task across, then rebalance back to two each.
        source = max(status["captures"], key=lambda c: len(status["captures"][c]))
        target = next(c for c in status["captures"] if c != source)
        task = status["captures"][source][0]["task"]
        # False is the API's "not now" (e.g. the owner is re-hearing its
        # captures after a slow tick): a client asks again.
        wait_for(
            "the move to be accepted",
            lambda: (
                _post(env, "/api/scheduler/move", {"task": task, "capture": target}).json()
                == {"accepted": True}
            ),
        )
        wait_for(
            "the move",
            lambda: (s := settled()) and task in [t["task"] for t in s["captures"][target]],
        )
        wait_for(
            "the rebalance to be accepted",
            lambda: _post(env, "/api/scheduler/rebalance", {}).json() == {"accepted": True},
        )
        wait_for("a balanced placement", lambda: settled((2, 2)))

        # Drain one worker: everything ends up on the other.
        drained = "quickstart-0"
        remaining = _post(env, "/api/scheduler/drain", {"capture": drained}).json()["remaining"]
        assert remaining >= 0
        wait_for(
            "the drain",
            lambda: (
                _post(env, "/api/scheduler/drain", {"capture": drained}).json()["remaining"] == 0
                and settled((0, 4))
            ),
        )
        reply = _post(env, "/api/sql", {"query": "INSERT INTO t VALUES (1, 9); SELECT * FROM v3"})
        assert reply.json()["results"][-1]["rows"] == [[1, 1]]

        # Errors: malformed bodies, unknown captures and tasks.
        assert _post(env, "/api/scheduler/move", {"task": task}).status_code == 400
        bad = requests.post(f"{env.http.url}/api/scheduler/drain", data="{", timeout=10)
        assert bad.status_code == 400
        assert _post(env, "/api/scheduler/drain", {"capture": "nope"}).status_code == 404
        missing = {"task": "u999", "capture": target}
        assert _post(env, "/api/scheduler/move", missing).status_code == 404
        assert _post(env, "/api/scheduler/rebalance", {"cluster": "nope"}).status_code == 404

        # Another process of the environment is not the owner: it says who is.
        standby_cluster = Cluster(config, supervise=False)
        standby = HttpServer(
            standby_cluster.handle.client,
            standby_cluster.coord.metrics,
            port=0,
            extra_routes=scheduler_routes(standby_cluster.service),
        )
        standby.start()
        response = requests.get(f"{standby.url}/api/scheduler/tasks", timeout=10)
        assert response.status_code == 503
        assert response.json()["owner"] == env.cluster_service.owner_id
        standby.shutdown()
        standby_cluster.close()
    finally:
        env.stop()
