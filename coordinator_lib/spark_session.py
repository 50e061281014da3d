"""The one way Tidemark obtains a SparkSession.

Settings and why (measured on this stack):

- Per-job overhead (0.1-0.3 s locally) dominates the small deltas we mostly
  process, and a 1k-row groupBy took 0.7 s with 200 shuffle partitions against
  0.14-0.27 s with 2 (or with AQE), so
  we default to 2 shuffle partitions and keep adaptive query execution on
  (it coalesces partitions when inputs are bigger than we guessed).
- The session time zone is UTC: `timestamptz` is stored as UTC instants and
  casts between `timestamp` and `timestamptz` must not depend on the host.
- Parquet timestamps are written as INT64 microseconds (not Spark's legacy
  INT96) so pyarrow reads them as `timestamp("us", tz="UTC")`, the type
  `RelationDesc.arrow_schema` declares.
- Dates and timestamps are read and written proleptic Gregorian
  (`CORRECTED`), as pyarrow does, so pre-1582 values are not shifted.
- Arrow is used for pandas conversion (much faster `toPandas`).
- No web UI and WARN-level logging: tests and services start many sessions
  and the UI port plus INFO chatter cost time and noise for nothing.

`local[...]` and `spark://` masters start (or join) a classic session; an
`sc://` address connects to a Spark Connect server, where only SQL settings
can be applied from the client (the rest are the server's business).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from pyspark.sql import SparkSession

# Runtime SQL settings: valid for classic sessions and Spark Connect alike.
_SQL_CONF: dict[str, str] = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # Dates and timestamps are proleptic Gregorian on both sides (pyarrow
    # writes them so); Spark 4's default, pinned against LEGACY cluster defaults
    # that would shift pre-1582 values.
    "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    # The `time` type's columns (TimeType, Parquet TIME(MICROS)); off by default.
    "spark.sql.timeType.enabled": "true",
}

# Settings that only a classic (driver-in-this-process) session can take.
_DRIVER_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Modest: the driver holds small deltas and collected results, not data.
    "spark.driver.memory": "2g",
    # Blocks of RDDs nobody references (an index's replaced localCheckpoints,
    # old broadcasts and shuffles) are freed by Spark's ContextCleaner only
    # when a JVM garbage collection finds them, and a long-lived driver with
    # headroom rarely collects its old generation: by default Spark forces
    # one every 30 minutes. In issue 18's soak the JVM sat at 2.3-2.7 GB
    # between those and fell to 1.4 GB after one.
    "spark.cleaner.periodicGC.interval": "5min",
}

_LOG_LEVEL = "WARN"


def get_or_create_spark(
    master: str = "local[2]",
    app_name: str = "tidemark",
    shuffle_partitions: int = 2,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """Return the process's SparkSession, creating it with Tidemark's settings.

    If a session already exists it is returned with the SQL settings applied
    again (static settings such as driver memory keep their first value)."""
    sql_conf = {**_SQL_CONF, "spark.sql.shuffle.partitions": str(shuffle_partitions)}
    builder = SparkSession.builder.appName(app_name)
    if master.startswith("sc://"):
        builder = builder.remote(master)
        conf = {**sql_conf, **(extra_conf or {})}
    else:
        builder = builder.master(master)
        conf = {**_DRIVER_CONF, **sql_conf, **(extra_conf or {})}
        # Python workers (the jsonb operators' UDFs, expr/functions/)
        # run this interpreter, which has coordinator_lib and pyarrow.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if not master.startswith("sc://"):
        spark.sparkContext.setLogLevel(_LOG_LEVEL)
    return spark


def spark_conf(
    master: str = "local[2]", app_name: str = "tidemark", shuffle_partitions: int = 2
) -> dict[str, str]:
    """Tidemark's settings as one flat config (master and app name included),
    for code that builds the session itself (dagster-pyspark's resource)."""
    conf = {"spark.app.name": app_name, **_SQL_CONF}
    conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    if master.startswith("sc://"):
        return {"spark.remote": master, **conf}
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # as get_or_create_spark
    return {"spark.master": master, **_DRIVER_CONF, **conf}


class LazySparkSession:
    """Stands in for a SparkSession that is created on first use.

    A coordinator whose work is all small runs every step in-process and
    never needs the JVM (5-6 s to start); a Dagster sensor must not start
    one at all. Code that only passes the session along does not start it;
    the first attribute access does."""

    def __init__(
        self, master: str = "local[2]", factory: Callable[[], SparkSession] | None = None
    ) -> None:
        """`factory` makes the session (default: `get_or_create_spark(master)`)."""
        self._master = master
        self._factory = factory
        self._session: SparkSession | None = None

    @property
    def started(self) -> bool:
        return self._session is not None

    def get(self) -> SparkSession:
        if self._session is None:
            if self._factory is None:
                self._session = get_or_create_spark(self._master)
            else:
                self._session = self._factory()
        return self._session

    def __getattr__(self, name: str) -> object:
        return getattr(self.get(), name)
