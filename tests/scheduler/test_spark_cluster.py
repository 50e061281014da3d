"""Spark cluster mode: a standalone Spark master and two Spark workers on
loopback; a `tidemark worker` whose Spark session uses that master (every
step on Spark: `local_max_rows=0`) maintains views through them, exactly
(checked against DuckDB at every time), and both Spark workers run its
executors."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
import requests

from coordinator_lib.scheduler.consensus_lease import ConsensusLeaseStore
from tests.scheduler.workers import (
    Cluster,
    all_replicating,
    check_views_exact,
    scheduler_config,
    update_times,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]  # starts Spark JVMs: run under the Spark lock

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
VIEWS = {
    "sums": "SELECT k, sum(v) AS s FROM t GROUP BY k",
    "big": "SELECT k, v FROM t WHERE v > 50",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StandaloneSpark:
    """A master and two workers (1 core, 1 GiB each), all on 127.0.0.1."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_WORKER_DIR": str(root / "work"),
            "PYSPARK_PYTHON": sys.executable,
        }
        self.processes: list[subprocess.Popen] = []
        self.logs: list[Path] = []
        master = self._start(
            "master",
            "org.apache.spark.deploy.master.Master --host 127.0.0.1 "
            f"--port {self.port} --webui-port 0".split(),
        )
        self.ui = wait_for(
            "the Spark master",
            lambda: self._match(master, r"service 'MasterUI' on port (\d+)"),
            timeout=120,
        )
        wait_for("master leadership", lambda: "elected leader" in master.read_text(), 60)
        for i in range(2):
            self._start(
                f"worker{i}",
                f"org.apache.spark.deploy.worker.Worker {self.url} --host 127.0.0.1 "
                "--cores 1 --memory 1g --webui-port 0".split(),
            )
        wait_for("two Spark workers", lambda: len(self.state()["workers"]) == 2, timeout=120)

    def _start(self, name: str, args: list[str]) -> Path:
        log = self.root / f"{name}.log"
        self.logs.append(log)
        self.processes.append(
            subprocess.Popen(
                [str(SPARK_CLASS), *args],
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )
        )
        return log

    def _match(self, log: Path, pattern: str) -> int | None:
        found = re.search(pattern, log.read_text())
        return int(found.group(1)) if found else None

    def state(self) -> dict:
        return requests.get(f"http://127.0.0.1:{self.ui}/json/", timeout=10).json()

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture
def spark_cluster(tmp_path: Path) -> Iterator[StandaloneSpark]:
    (tmp_path / "spark").mkdir()
    cluster = StandaloneSpark(tmp_path / "spark")
    try:
        yield cluster
    finally:
        cluster.stop()


def test_views_maintained_through_a_standalone_spark_cluster(
    tmp_path: Path, spark_cluster: StandaloneSpark, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    config = scheduler_config(
        tmp_path / "env",
        workers=1,
        spark_master=spark_cluster.url,
        local_max_rows=0,  # every step a Spark job
        scheduler_lease_ttl_ms=10_000,
    )
    cluster = Cluster(config)
    try:
        leases = ConsensusLeaseStore(cluster.coord.storage.persist.consensus)
        wait_for("the worker", lambda: len(leases.alive_captures()) == 1, timeout=60)
        cluster.sql("CREATE TABLE t (k bigint, v bigint) WITH (RETAIN HISTORY FOR '1h')")
        for name, query in VIEWS.items():
            cluster.sql(
                f"CREATE MATERIALIZED VIEW {name} WITH (RETAIN HISTORY FOR '1h') AS {query}"
            )
        tasks = {str(cluster.id_of(name)) for name in VIEWS}
        wait_for("views placed", lambda: all_replicating(cluster, tasks, 1), timeout=60)
        for batch in ("(1, 10), (2, 60)", "(1, 70), (3, 5), (2, -60)"):
            cluster.sql(f"INSERT INTO t VALUES {batch}")
            for name in VIEWS:
                cluster.sql(f"SELECT * FROM {name}")  # waits for the worker's step
        state = spark_cluster.state()
        apps = [a for a in state["activeapps"] if a["name"] == "tidemark"]
        assert apps and apps[0]["cores"] == 2, state["activeapps"]
        assert all(w["coresused"] == 1 for w in state["workers"]), state["workers"]
        table = cluster.id_of("t")
        times = update_times(cluster, table)
        assert len(times) >= 2
        check_views_exact(cluster, table, "k bigint, v bigint", VIEWS, times)
        # (A persist fast-path read: a query needing a dataflow would start a
        # second Spark application here, which waits for the cores the
        # worker's holds.)
        assert sorted((k, int(s)) for k, s in cluster.sql("SELECT * FROM sums")) == [
            (1, 80),
            (2, 0),
            (3, 5),
        ]
    finally:
        cluster.close()
