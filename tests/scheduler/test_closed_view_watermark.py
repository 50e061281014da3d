"""A view that is complete for all time (its upper is the empty frontier,
here a view of constants) on a worker cluster holds back no other view:
the cluster's global watermark keeps moving with the live views, so
serializable reads of them, which happen at that watermark, stay fresh
(issue 18). With real `tidemark worker` processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator_lib.scheduler.consensus_lease import ConsensusLeaseStore
from tests.scheduler.workers import (
    Cluster,
    all_replicating,
    scheduler_config,
    update_times,
    wait_for,
)


@pytest.mark.slow  # starts a worker process: about 40 s on a loaded machine
def test_a_closed_view_does_not_pin_the_global_watermark(tmp_path: Path) -> None:
    cluster = Cluster(scheduler_config(tmp_path / "env", workers=1))
    try:
        consensus = cluster.coord.storage.persist.consensus
        leases = ConsensusLeaseStore(consensus, cluster="quickstart")
        wait_for("a worker", lambda: len(leases.alive_captures()) == 1)
        cluster.sql("CREATE TABLE t (k bigint)")
        cluster.sql("CREATE MATERIALIZED VIEW constant AS SELECT 1 AS one")
        cluster.sql("CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n FROM t")
        constant, total = cluster.id_of("constant"), cluster.id_of("total")
        wait_for("views placed", lambda: all_replicating(cluster, {str(constant), str(total)}, 1))
        storage = cluster.coord.storage
        wait_for(
            "the constant view closed",
            lambda: storage.collection_frontiers(constant)[1].time is None,
        )

        cluster.sql("INSERT INTO t VALUES (1), (2)")
        last = update_times(cluster, cluster.id_of("t"))[-1]
        wait_for(
            "the global checkpoint past the insert",
            lambda: (cluster.status() or {}).get("checkpoint_ts", 0) > last,
            timeout=30,
        )
        cluster.sql("SET transaction_isolation = serializable")
        assert cluster.sql("SELECT n FROM total") == [(2,)]
        assert cluster.sql("SELECT one FROM constant") == [(1,)]
    finally:
        cluster.close()
