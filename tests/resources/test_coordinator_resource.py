"""CoordinatorResource: a run shares one coordinator (closed at teardown)
and seals at one timestamp; a sensor's coordinator refuses Spark."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from coordinator_lib.adapter.client import serve
from coordinator_lib.adapter.coordinator import Config
from resources import CoordinatorResource, NoSparkInSensors, pyspark_resource


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
