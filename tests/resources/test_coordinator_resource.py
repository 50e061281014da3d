"""CoordinatorResource: a run shares one coordinator (closed at teardown)
and seals at one timestamp; a sensor's coordinator refuses Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster_pyspark import LazyPySparkResource

from coordinator_lib.adapter.client import serve
from coordinator_lib.adapter.coordinator import Config, Coordinator
from definitions import build_definitions
from resources import CoordinatorResource, NoSparkInSensors, pyspark_resource
from tests.assets.support import metadata_values, run_sql


def test_sensor_coordinator_refuses_spark(tmp_path: Path) -> None:
    resource = CoordinatorResource(data_dir=str(tmp_path))
    with resource.open(spark=False) as coordinator:
        with pytest.raises(NoSparkInSensors):
            coordinator.compute.spark.read  # noqa: B018 - the access is the test
        assert coordinator.config.background is False


def test_run_shares_one_coordinator_and_one_seal_timestamp(tmp_path: Path) -> None:
    seen = []

    @dg.asset
    def first(coordinator: CoordinatorResource) -> None:
        seen.append((coordinator.coordinator(), coordinator.seal_timestamp()))

    @dg.asset(deps=[first])
    def second(coordinator: CoordinatorResource) -> None:
        seen.append((coordinator.coordinator(), coordinator.seal_timestamp()))

    resource = CoordinatorResource(data_dir=str(tmp_path))
    assert dg.materialize([first, second], resources={"coordinator": resource}).success
    (c1, t1), (c2, t2) = seen
    assert c1 is c2 and t1 == t2
    assert c1._closed.is_set()  # torn down with the run
    assert dg.materialize([first], resources={"coordinator": resource}).success
    assert seen[2][1] > t1  # a later run seals later


def test_pyspark_resource_carries_tidemark_settings() -> None:
    config = pyspark_resource("local[2]").spark_config
    assert config["spark.master"] == "local[2]"
    assert config["spark.sql.session.timeZone"] == "UTC"
    assert config["spark.sql.shuffle.partitions"] == "2"
    remote = pyspark_resource("sc://spark:15002").spark_config
    assert remote["spark.remote"] == "sc://spark:15002" and "spark.master" not in remote


def test_resource_sees_another_process_s_objects(tmp_path: Path) -> None:
    """Objects created elsewhere (psql through `tidemark serve`) are in the catalog."""
    handle = serve(Config(data_dir=str(tmp_path), background=False))
    try:
        session = handle.client.startup("materialize")
        list(session.execute("CREATE TABLE t (a int)"))
        session.terminate()
    finally:
        handle.shutdown()
    resource = CoordinatorResource(data_dir=str(tmp_path))
    with resource.open(spark=False) as coordinator:
        assert [str(i.name) for i in coordinator.catalog.items()] == ["materialize.public.t"]


@pytest.mark.spark
def test_a_run_takes_its_spark_session_from_the_pyspark_resource(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index over inputs past `local_max_rows` (0 here) hydrates on
    Spark: the session comes from dagster-pyspark's LazyPySparkResource (the
    test session's JVM, reused: one Spark start)."""
    config = CoordinatorResource.config
    monkeypatch.setattr(
        CoordinatorResource,
        "config",
        lambda self: config(self).model_copy(update={"local_max_rows": 0}),
    )
    asked: list[dict[str, Any]] = []
    real = LazyPySparkResource.spark_session

    def spark_session(self: LazyPySparkResource) -> Any:
        asked.append(dict(self.spark_config))
        return real.fget(self)  # type: ignore[attr-defined]

    monkeypatch.setattr(LazyPySparkResource, "spark_session", property(spark_session))
    project = tmp_path / "project"
    (project / "sql").mkdir(parents=True)
    (project / "sql" / "objects.sql").write_text(
        "CREATE TABLE t (k text NOT NULL, v bigint);\n"
        "CREATE MATERIALIZED VIEW totals AS SELECT k, sum(v) AS v FROM t GROUP BY k;\n"
        "CREATE INDEX totals_by_k ON totals (k);\n"
    )
    resource = CoordinatorResource(data_dir=str(tmp_path / "data"), pyspark=pyspark_resource())
    defs = build_definitions(project, resource)
    other = Coordinator(Config(data_dir=str(tmp_path / "data"), background=False))
    try:
        run_sql(other, ["INSERT INTO t VALUES ('a', 1), ('a', 2), ('b', 5)"])
    finally:
        other.close()
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    with dg.instance_for_test() as instance:
        result = dg.materialize(assets, resources={"coordinator": resource}, instance=instance)
    assert result.success
    index = {
        e.materialization.asset_key.path[-1]: metadata_values(e.materialization)
        for e in result.get_asset_materialization_events()
    }["totals_by_k"]
    assert index["engine"] == "spark" and index["step_kind"] == "hydration"
    assert isinstance(index["spark_seconds"], float) and index["spark_seconds"] > 0
    assert index["dagster/row_count"] == 2
    assert asked, "the run never asked the pyspark resource for its session"
    assert asked[0]["spark.app.name"] == "tidemark-dagster"
    assert asked[0]["spark.sql.session.timeZone"] == "UTC"
