"""The Spark session of a Dagster run, from dagster-pyspark.

`LazyPySparkResource` creates the session on first use only: a run whose
steps are all small (in-process) never starts the JVM, and a sensor tick,
which must not start Spark (ticks time out at 60 s), never asks for it. The
session carries Tidemark's settings (coordinator_lib.spark_session); with the
in-process executor a run has one JVM, which dagster-pyspark never stops (it
goes with the run's process).
"""

from __future__ import annotations

from dagster_pyspark import LazyPySparkResource

from coordinator_lib.spark_session import spark_conf

__all__ = ["pyspark_resource"]


def pyspark_resource(master: str = "local[2]") -> LazyPySparkResource:
    """dagster-pyspark's lazy session, configured as Tidemark configures Spark."""
    return LazyPySparkResource(spark_config=spark_conf(master, app_name="tidemark-dagster"))
