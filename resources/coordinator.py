"""CoordinatorResource: how Dagster runs and sensors open a Tidemark environment.

Dagster shares nothing with `tidemark serve` or workers but the durable state
(consensus and blobs), so the resource opens its own `Coordinator` on the same
environment, with `background=False`: no maintenance thread, nothing stepped
unless an operation says so (coordinator_lib.adapter.operations).

- In a run (in-process executor: every step in one process) one coordinator
  is opened on first use and closed when the run ends, so the run's steps
  share it, its index arrangements and its Spark session; all sources a run
  seals are sealed at one timestamp (`seal_timestamp`).
- A sensor tick opens one with `open(spark=False)` and closes it at once: any
  attempt to use Spark there raises instead of starting a JVM.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import PrivateAttr

from coordinator_lib.adapter import operations
from coordinator_lib.adapter.coordinator import Config, Coordinator
from coordinator_lib.spark_session import LazySparkSession

__all__ = ["CoordinatorResource", "NoSparkInSensors"]


class NoSparkInSensors(RuntimeError):
    """Something tried to use Spark where it must not start (a sensor tick)."""


class _NoSpark:
    """Stands in for the SparkSession in sensor ticks."""

    started = False

    def __getattr__(self, name: str) -> Any:
        raise NoSparkInSensors(f"Spark is not available in a sensor tick (asked for {name!r})")


class CoordinatorResource(dg.ConfigurableResource):
    """Settings for opening a Tidemark environment from Dagster runs and sensors.

    `data_dir` is the environment directory: the SQLite consensus file and the
    blob directory live under it unless `consensus_url` (e.g. a PostgreSQL URL)
    or `blob_root` (a shared or Hadoop path) override them. `spark_master` is
    the Spark master for compute (`local[2]`, `spark://...` or `sc://...`);
    `pyspark` is dagster-pyspark's lazy session (resources.spark), built for
    `spark_master` when not given.
    """

    data_dir: str = "demo/data"
    consensus_url: str | None = None
    blob_root: str | None = None
    spark_master: str = "local[2]"
    pyspark: LazyPySparkResource | None = None

    _coordinator: Coordinator | None = PrivateAttr(default=None)
    _seal_timestamp: int | None = PrivateAttr(default=None)

    def config(self) -> Config:
        return Config(
            data_dir=self.data_dir,
            consensus_url=self.consensus_url,
            blob_root=self.blob_root,
            spark_master=self.spark_master,
            background=False,
        )

    def _spark(self) -> LazySparkSession:
        pyspark = self.pyspark
        if pyspark is None:
            return LazySparkSession(self.spark_master)

        def session() -> Any:
            spark = pyspark.spark_session
            spark.sparkContext.setLogLevel("WARN")
            return spark

        return LazySparkSession(self.spark_master, factory=session)

    @contextlib.contextmanager
    def open(self, spark: bool = True) -> Iterator[Coordinator]:
        """A coordinator for one piece of work (a sensor tick, loading the
        code location), closed afterwards. `spark=False` forbids Spark."""
        coordinator = Coordinator(self.config(), self._spark() if spark else _NoSpark())
        try:
            yield coordinator
        finally:
            coordinator.close()

    def coordinator(self) -> Coordinator:
        """The run's coordinator, opened on first use (closed at teardown)."""
        if self._coordinator is None:
            self._coordinator = Coordinator(self.config(), self._spark())
        return self._coordinator

    def seal_timestamp(self) -> int:
        """The one timestamp this run seals sources at (chosen on first use)."""
        if self._seal_timestamp is None:
            self._seal_timestamp = operations.seal_timestamp(self.coordinator())
        return self._seal_timestamp

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._coordinator is not None:
            self._coordinator.close()
            self._coordinator = None
        self._seal_timestamp = None
