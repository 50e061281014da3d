"""A replica in its own process, for the crash test: it opens the
environment, maintains the view `u2 = sum(v) by k over u1` and steps forever
until it is killed."""

from __future__ import annotations

import sys
import time

from coordinator_lib.compute import ComputeController, DataflowDescription
from coordinator_lib.spark_session import get_or_create_spark
from coordinator_lib.storage import (
    CollectionDescription,
    DataSource,
    StorageController,
    table_description,
)
from tests.compute.test_controller import DESC, VIEW, T, _sum_by_k


def main(data_dir: str, ready_file: str) -> None:
    spark = get_or_create_spark("local[1]", shuffle_partitions=1)
    storage = StorageController.open(data_dir)
    expr = _sum_by_k()
    storage.create_collections(
        [
            (T, table_description(DESC)),
            (VIEW, CollectionDescription(expr.desc, DataSource.other())),
        ]
    )
    compute = ComputeController(storage, spark)
    compute.create_instance("default")
    compute.add_replica("default", "worker")
    as_of = storage.collection_frontiers(VIEW)[1].time
    assert as_of is not None
    compute.create_dataflow(
        "default", DataflowDescription(VIEW, expr, max(as_of - 1, 0), sink_id=VIEW)
    )
    with open(ready_file, "w") as handle:
        handle.write("ready")
    while True:
        compute.process()
        time.sleep(0.01)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
