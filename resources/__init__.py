"""Dagster resources: the code location's only door into coordinator_lib."""

import dagster as dg

__all__ = ["CoordinatorResource"]


class CoordinatorResource(dg.ConfigurableResource):
    """Settings for opening a Tidemark environment from Dagster runs and sensors.

    It opens the environment through coordinator_lib's public API, so Dagster
    shares nothing with `tidemark serve` or workers but the durable state. The
    methods that do so are added by later issues.

    `data_dir` is the environment directory: the SQLite consensus file and the
    blob directory live under it unless `consensus_url` (e.g. a PostgreSQL URL)
    or `blob_root` (a shared or Hadoop path) override them. `spark_master` is
    the Spark master for compute (`local[2]`, `spark://...` or `sc://...`).
    """

    data_dir: str = "data/dagster"
    consensus_url: str | None = None
    blob_root: str | None = None
    spark_master: str = "local[2]"
