"""Reads on Spark racing compaction (issue 18): a `SELECT count(*)` over a
table being written, above `local_max_rows`, plans its batch files on Spark
while the maintenance loop compacts the table and deletes replaced batches.
Its seqno hold keeps the planned files until the job ran, so no read fails
(before, about one in eight failed with FAILED_READ_FILE.FILE_NOT_EXIST)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config

pytestmark = [pytest.mark.spark, pytest.mark.slow]

READS = 5


@pytest.fixture
def environment(tmp_path: Path, spark: Any) -> Iterator[Environment]:
    # Every read goes to Spark; compaction runs as often as it can, with a
    # short history so the since (and so compaction) follows the writes.
    config = fast_config(
        tmp_path / "env",
        local_max_rows=10,
        compaction_interval_ms=20,
        default_retain_history_ms=50,
    )
    env = Environment(config, pgwire_port=0, http_port=0, spark=spark)
    env.start()
    try:
        yield env
    finally:
        env.stop()


def _dsn(env: Environment) -> str:
    return f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize"


def test_spark_reads_racing_compaction_never_lose_files(environment: Environment) -> None:
    acknowledged = 0
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        nonlocal acknowledged
        try:
            with psycopg.connect(_dsn(environment), autocommit=True) as conn:
                while not stop.is_set():
                    conn.execute("INSERT INTO t VALUES (1), (2), (3)")
                    with lock:
                        acknowledged += 3
        except BaseException as error:  # reported by the test below
            errors.append(error)

    with psycopg.connect(_dsn(environment), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (a int)")
        conn.execute("INSERT INTO t VALUES " + ", ".join(f"({i})" for i in range(30)))
        acknowledged = 30
        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        try:
            counts = []
            for _ in range(READS):
                with lock:
                    before = acknowledged
                (count,) = conn.execute("SELECT count(*) FROM t").fetchone()  # type: ignore[misc]
                # Strict serializable: every write acknowledged before the read.
                assert count >= before
                counts.append(count)
        finally:
            stop.set()
            writer.join(timeout=30)
        assert not errors
        assert counts == sorted(counts)
        assert counts[-1] > counts[0]  # the table really was written meanwhile
        # The session is still fine and the data complete.
        with lock:
            final = acknowledged
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (final,)
