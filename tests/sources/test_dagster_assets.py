"""A PostgreSQL source and an Iceberg sink in Dagster (issue 17), with a
live `tidemark serve` replicating and sinking: each upstream table is an
observable source asset whose observation carries the replication lag; the
sink is an asset downstream of its view whose materialization records the
Iceberg table's latest snapshot id and upper."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import psycopg

from coordinator_lib.server.environment import Environment
from coordinator_lib.storage.iceberg_sink import committed_upper, open_catalog
from coordinator_lib.storage.postgres_source import parse_lsn
from definitions import build_definitions
from resources import CoordinatorResource
from tests.adapter.conftest import fast_config
from tests.sources.conftest import PASSWORD, connection_sql, wait_until

Conn = psycopg.Connection[Any]
SUBSOURCE = dg.AssetKey(["materialize", "public", "ev"])
VIEW = dg.AssetKey(["materialize", "public", "per_kind"])
SINK = dg.AssetKey(["materialize", "public", "per_kind_sink"])


def _values(event: Any) -> dict[str, Any]:
    return {k: v.value for k, v in event.metadata.items()}


def test_subsources_are_observed_with_their_lag_and_sinks_record_their_table(
    upstream: Conn, upstream_url: str, tmp_path: Path
) -> None:
    upstream.execute("CREATE TABLE ev (id int PRIMARY KEY, kind text NOT NULL)")
    upstream.execute("ALTER TABLE ev REPLICA IDENTITY FULL")
    upstream.execute("CREATE PUBLICATION p FOR TABLE ev")
    (tmp_path / "wh").mkdir()
    catalog = {"uri": f"sqlite:///{tmp_path / 'ice.db'}", "warehouse": f"file://{tmp_path / 'wh'}"}
    data = tmp_path / "data"
    server = Environment(fast_config(data), pgwire_port=0, http_port=0)
    server.start()
    dsn = f"host=127.0.0.1 port={server.pgwire.port} user=materialize dbname=materialize"
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SECRET pgpass AS '{PASSWORD}'")
            conn.execute(connection_sql(upstream_url))
            conn.execute(
                "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR ALL TABLES"
            )
            conn.execute(
                "CREATE MATERIALIZED VIEW per_kind AS "
                "SELECT kind, count(*) AS n FROM ev GROUP BY kind"
            )
            conn.execute(
                f"CREATE CONNECTION ice TO ICEBERG CATALOG (URI '{catalog['uri']}', "
                f"WAREHOUSE '{catalog['warehouse']}')"
            )
            conn.execute(
                "CREATE SINK per_kind_sink FROM per_kind INTO ICEBERG CATALOG CONNECTION ice "
                "(NAMESPACE 'n', TABLE 'per_kind') MODE UPSERT KEY (kind)"
            )
            row = upstream.execute("SELECT pg_current_wal_lsn()::text").fetchone()
            assert row is not None
            before = parse_lsn(row[0])
            upstream.execute("INSERT INTO ev VALUES (1, 'a'), (2, 'b'), (3, 'a')")
            wait_until(
                lambda: (
                    sorted(conn.execute("SELECT * FROM per_kind").fetchall())
                    == [("a", 2), ("b", 1)]
                ),
                "the view to see the upstream rows",
            )

        def table() -> Any:
            return open_catalog(catalog).load_table(("n", "per_kind"))

        def sunk() -> bool:
            try:
                rows = table().scan().to_arrow().to_pylist()
            except Exception:  # not created yet
                return False
            return sorted((r["kind"], r["n"]) for r in rows) == [("a", 2), ("b", 1)]

        wait_until(sunk, "the sink to write the view")

        project = tmp_path / "project"
        project.mkdir()
        defs = build_definitions(project, CoordinatorResource(data_dir=str(data)))
        by_key = {
            key: a
            for a in defs.assets or []
            if isinstance(a, dg.AssetsDefinition)
            for key in a.keys
        }
        assert by_key[SUBSOURCE].is_observable
        assert by_key[SINK].asset_deps[SINK] == {VIEW}
        resources = {"coordinator": CoordinatorResource(data_dir=str(data))}
        with dg.instance_for_test() as instance:
            # "Observe sources" in the UI: a job selecting the source asset.
            observing = dg.Definitions(
                assets=[by_key[SUBSOURCE]],
                jobs=[dg.define_asset_job("observe", selection=[SUBSOURCE])],
                resources=resources,
            ).resolve_job_def("observe")
            observed = observing.execute_in_process(instance=instance)
            (observation,) = [
                e.asset_observation_data.asset_observation
                for e in observed.all_events
                if e.event_type_value == "ASSET_OBSERVATION"
            ]
            lag = _values(observation)
            committed, current = parse_lsn(lag["committed_lsn"]), parse_lsn(lag["upstream_lsn"])
            assert before < committed <= current  # the inserts were taken in
            assert lag["replication_lag_bytes"] == current - committed
            assert lag["lag_seconds"] >= 0

            sink = dg.materialize(
                [a for a in by_key.values() if SINK in a.keys],
                resources=resources,
                instance=instance,
            )
            (event,) = sink.get_asset_materialization_events()
            recorded = _values(event.step_materialization_data.materialization)
            now = table()
            snapshot = now.current_snapshot()
            assert snapshot is not None
            assert recorded["snapshot_id"] == str(snapshot.snapshot_id)
            assert recorded["iceberg_table"] == "n.per_kind"
            upper = committed_upper(now)
            assert upper is not None and round(recorded["upper"] * 1000) == upper

            # The timestamp sensor ticks over them: no run for the sink (the
            # server runs it), the subsource observed with its frontiers.
            sensor = defs.resolve_sensor_def("tidemark_timestamps")
            with dg.build_sensor_context(
                instance=instance,
                resources=resources,
                repository_def=defs.get_repository_def(),
            ) as context:
                tick = sensor.evaluate_tick(context)
            assert all(SINK not in (r.asset_selection or []) for r in tick.run_requests or [])
            assert SUBSOURCE in {
                e.asset_key for e in tick.asset_events if isinstance(e, dg.AssetObservation)
            }
    finally:
        server.stop()
