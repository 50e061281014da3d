"""A PostgreSQL source's ingestion and an Iceberg sink are tasks of the
scheduler (docs/scheduler.md): with workers, they run there and
/api/scheduler shows them; SIGKILL the worker running the ingestion
mid-stream and the task moves to the other, which resumes from the durable
progress: every upstream change once, in the subsource and in the sink's
Iceberg table."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from coordinator_lib.server.environment import Environment
from coordinator_lib.storage.iceberg_sink import open_catalog
from tests.scheduler.workers import scheduler_config
from tests.sources.conftest import PASSWORD, connection_sql, wait_until
from tests.sources.test_postgres_restart import Writer

Conn = psycopg.Connection[Any]


def _placement(env: Environment, task: str) -> tuple[str, str] | None:
    """(capture, state) of `task`'s primary, as GET /api/scheduler/tasks says."""
    response = requests.get(f"{env.http.url}/api/scheduler/tasks", timeout=10)
    if response.status_code != 200:
        return None
    for capture, tasks in response.json()["captures"].items():
        for entry in tasks:
            if entry["task"] == task and entry["role"] == "primary":
                return capture, entry["state"]
    return None


@pytest.mark.slow
def test_killed_worker_moves_the_ingestion_which_resumes_exactly(
    upstream: Conn, upstream_url: str, tmp_path: Path
) -> None:
    upstream.execute("CREATE TABLE ev (id int PRIMARY KEY, at int NOT NULL)")
    upstream.execute("ALTER TABLE ev REPLICA IDENTITY FULL")
    upstream.execute("CREATE PUBLICATION p FOR TABLE ev")
    (tmp_path / "wh").mkdir()
    catalog = {"uri": f"sqlite:///{tmp_path / 'ice.db'}", "warehouse": f"file://{tmp_path / 'wh'}"}
    env = Environment(scheduler_config(tmp_path / "env", workers=2), pgwire_port=0, http_port=0)
    env.start()
    assert env.cluster_service is not None
    env.cluster_service.tick_s = 0.05
    writer = Writer(upstream_url)
    dsn = f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize"
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SECRET pgpass AS '{PASSWORD}'")
            conn.execute(connection_sql(upstream_url))
            conn.execute(
                "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR ALL TABLES"
            )
            row = conn.execute("SELECT id FROM mz_sources WHERE name = 's'").fetchone()
            assert row is not None
            task = str(row[0])
            conn.execute(
                f"CREATE CONNECTION ice TO ICEBERG CATALOG (URI '{catalog['uri']}', "
                f"WAREHOUSE '{catalog['warehouse']}')"
            )
            conn.execute(
                "CREATE SINK k FROM ev INTO ICEBERG CATALOG CONNECTION ice "
                "(NAMESPACE 'n', TABLE 'ev') MODE UPSERT KEY (id)"
            )
            row = conn.execute("SELECT id FROM mz_objects WHERE name = 'k'").fetchone()
            assert row is not None
            sink_task = str(row[0])

            def count() -> int:
                found = conn.execute("SELECT count(*) FROM ev").fetchone()
                return int(found[0]) if found else 0

            wait_until(
                lambda: all(
                    (_placement(env, t) or ("", ""))[1] == "replicating" for t in (task, sink_task)
                ),
                "the ingestion and the sink to run on workers",
            )
            placed = _placement(env, task)
            assert placed is not None
            victim = placed[0]
            writer.start()
            wait_until(lambda: count() > 20, "replication to move on")
            supervisor = env.cluster_service.supervisor
            killed = supervisor.pids()[victim]
            os.kill(killed, signal.SIGKILL)
            seen = count()
            # The supervisor restarts the killed worker under its name within a
            # second, so the task may move to the other worker or to the
            # victim's new process: either way not the killed process.
            wait_until(
                lambda: (
                    (p := _placement(env, task)) is not None
                    and p[1] == "replicating"
                    and (p[0] != victim or supervisor.pids().get(victim) not in (None, killed))
                ),
                "the ingestion to run again off the killed process",
            )
            wait_until(lambda: count() > seen + 20, "replication to go on after the move")
            writer.stop.set()
            writer.join(30)
            assert writer.error is None, writer.error
            query = "SELECT id, at FROM ev"
            expected = sorted(upstream.execute(query).fetchall())
            wait_until(
                lambda: sorted(conn.execute(query).fetchall()) == expected,
                "the subsource to equal the upstream table",
            )
            duplicates = conn.execute(
                "SELECT id, count(*) FROM ev GROUP BY id HAVING count(*) > 1"
            ).fetchall()
            assert duplicates == []

            def sunk() -> list[tuple[Any, ...]]:
                table = open_catalog(catalog).load_table(("n", "ev"))
                return sorted((r["id"], r["at"]) for r in table.scan().to_arrow().to_pylist())

            wait_until(lambda: sunk() == expected, "the sink's table to equal the upstream")
    finally:
        writer.stop.set()
        env.stop()
