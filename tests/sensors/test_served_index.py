"""An index asset is the index `tidemark serve` keeps (issue 16).

An index lives in the memory of the process that maintains it. While the
server is live, its heartbeat carries each index's frontiers and rows: the
timestamp sensor reports them as runless materializations, and a run
materializing the index records the server's index instead of building a
throwaway one. With no server, a run builds it to check it is readable and
says that the index is the server's once one runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.metadata import INDEX_ARRANGEMENT, SERVED_ARRANGEMENT
from coordinator_lib.adapter import operations
from coordinator_lib.adapter.coordinator import Config
from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import run_on
from tests.assets.support import project_env

pytestmark = pytest.mark.spark

SQL = """
CREATE TABLE orders (id bigint NOT NULL, item text NOT NULL);
CREATE MATERIALIZED VIEW order_counts AS
    SELECT item, count(*) AS orders FROM orders GROUP BY item;
CREATE INDEX order_counts_by_item ON order_counts (item);
"""
INDEX = dg.AssetKey(["materialize", "public", "order_counts_by_item"])


def _tick(env: Any, instance: dg.DagsterInstance, cursor: str | None) -> Any:
    sensor = env.defs.resolve_sensor_def("tidemark_timestamps")
    with dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"coordinator": env.resource},
        repository_def=env.defs.get_repository_def(),
    ) as context:
        return sensor.evaluate_tick(context)


def _served_rows(env: Any) -> int | None:
    """The index's rows as the live server's heartbeat reports them."""
    with env.coordinator() as other:
        server = operations.maintainer(other)
        index = operations.find(other, "materialize", "public", "order_counts_by_item")
        state = server.indexes.get(str(index)) if server is not None else None
        return state.rows if state is not None and state.hydrated else None


def _index_materialization(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    (event,) = [e for e in result.get_asset_materialization_events() if e.asset_key == INDEX]
    materialization = event.step_materialization_data.materialization
    return {k: v.value for k, v in materialization.metadata.items()}


def test_the_index_asset_is_the_servers_index(tmp_path: Path, spark: Any) -> None:
    env = project_env(tmp_path, SQL)
    server = Environment(
        Config(data_dir=str(env.data_dir), maintenance_interval_ms=50),
        pgwire_port=0,
        http_port=0,
        spark=spark,
    )
    server.start()
    session = server.handle.client.startup("materialize", "materialize")
    sql = run_on(session)
    stopped = False
    try:
        sql("INSERT INTO orders VALUES (1, 'kettle'), (2, 'lamp'), (3, 'lamp'), (4, 'desk')")
        deadline = time.monotonic() + 120
        while _served_rows(env) != 3:  # three items, arranged by the server
            assert time.monotonic() < deadline, "the server did not report its index"
            time.sleep(0.5)
        with env.coordinator() as other:
            holder = operations.maintainer(other).holder  # type: ignore[union-attr]
        with dg.instance_for_test() as instance:
            # The sensor reports the server's index: no run, its rows and frontiers.
            tick = _tick(env, instance, None)
            assert tick.run_requests == []
            (reported,) = [
                e
                for e in tick.asset_events
                if isinstance(e, dg.AssetMaterialization) and e.asset_key == INDEX
            ]
            assert reported.metadata["dagster/row_count"].value == 3
            assert reported.metadata["maintained_by"].value == holder
            assert isinstance(reported.metadata["upper"], dg.TimestampMetadataValue)
            upper_ms = round(reported.metadata["upper"].value * 1000)
            assert (reported.tags or {})["dagster/data_version"] == str(upper_ms)

            # A run materializing the index records the server's, builds none.
            sql("INSERT INTO orders VALUES (5, 'chair')")
            while _served_rows(env) != 4:
                assert time.monotonic() < deadline, "the server did not step its index"
                time.sleep(0.5)
            served = dg.materialize(
                [*env.assets(), *env.checks()],
                selection=[INDEX],
                resources={"coordinator": env.resource},
                instance=instance,
            )
            metadata = _index_materialization(served)
            assert metadata["maintained_by"] == holder
            assert metadata["dagster/row_count"] == 4
            assert metadata["arrangement"] == SERVED_ARRANGEMENT
            # Its frontiers check looks at the server's index, which is
            # readable (since < upper), not at the run's own unbuilt one.
            (check,) = [
                e for e in served.get_asset_check_evaluations() if e.check_name == "frontiers"
            ]
            assert check.passed
            since, upper = (check.metadata[name].value for name in ("since", "upper"))
            assert isinstance(since, int) and isinstance(upper, int) and since < upper

            # The server stops: a run builds the index itself, checks it
            # reads, and says the index is the server's when one runs.
            session.terminate()
            server.stop()
            stopped = True
            alone = dg.materialize(
                env.assets(),
                selection=[INDEX],
                resources={"coordinator": env.resource},
                instance=instance,
            )
            metadata = _index_materialization(alone)
            assert "maintained_by" not in metadata
            assert metadata["dagster/row_count"] == 4
            assert metadata["arrangement"] == INDEX_ARRANGEMENT
    finally:
        if not stopped:
            session.terminate()
            server.stop()
