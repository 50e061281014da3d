"""SIGKILL `tidemark serve` while its Iceberg sink commits, twice: after a
restart the Iceberg table holds every row of the table exactly once (the
sink resumes from the upper its last Iceberg snapshot records)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from coordinator_lib.storage.iceberg_sink import committed_upper, open_catalog
from tests.fixtures.serve_process import Server
from tests.sources.conftest import wait_until


class Inserter(threading.Thread):
    """INSERTs of fresh ids through whichever server is up (errors while it is down)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.dsn = ""
        self.stop = threading.Event()
        self.next_id = 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=2) as conn:
                    while not self.stop.is_set():
                        rows = [(self.next_id + i,) for i in range(5)]
                        self.next_id += 5
                        with conn.cursor() as cur:
                            cur.executemany("INSERT INTO t VALUES (%s)", rows)
                        time.sleep(0.01)
            except psycopg.Error:
                time.sleep(0.1)


def _iceberg_rows(props: dict[str, str]) -> tuple[int | None, Counter[int]]:
    table = open_catalog(props).load_table(("n", "t"))
    counts: Counter[int] = Counter()
    for row in table.scan().to_arrow().to_pylist():
        counts[row["id"]] += row["mz_diff"]
    return committed_upper(table), counts


@pytest.mark.slow
def test_sigkilled_server_sink_writes_every_row_once(tmp_path: Path) -> None:
    (tmp_path / "wh").mkdir()
    props = {
        "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "warehouse": f"file://{tmp_path / 'wh'}",
    }
    data, log = tmp_path / "data", tmp_path / "serve.log"
    server = Server(data, log)
    inserter = Inserter()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(
                f"CREATE CONNECTION ice TO ICEBERG CATALOG (URI '{props['uri']}', "
                f"WAREHOUSE '{props['warehouse']}')"
            )
            conn.execute("CREATE TABLE t (id int NOT NULL)")
            conn.execute(
                "CREATE SINK k FROM t INTO ICEBERG CATALOG CONNECTION ice "
                "(NAMESPACE 'n', TABLE 't') MODE APPEND"
            )
        inserter.dsn = server.dsn
        inserter.start()
        for _ in range(2):
            wait_until(
                lambda: (
                    open_catalog(props).table_exists(("n", "t"))
                    and (_iceberg_rows(props)[0] or 0) > 0
                ),
                "the sink to commit",
            )
            seen = _iceberg_rows(props)[0] or 0
            wait_until(lambda: (_iceberg_rows(props)[0] or 0) > seen, "another commit")  # noqa: B023
            server.kill()
            server = Server(data, log)
            inserter.dsn = server.dsn
        mark = inserter.next_id
        wait_until(lambda: inserter.next_id > mark + 20, "inserts into the restarted server")
        inserter.stop.set()
        inserter.join(30)
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            expected = Counter(row[0] for row in conn.execute("SELECT id FROM t").fetchall())
            assert len(expected) > 20

            def complete() -> bool:
                return _iceberg_rows(props)[1] == expected

            wait_until(complete, "the Iceberg table to hold every row of t")
        _, counts = _iceberg_rows(props)
        assert set(counts.values()) == {1}  # no row written twice
    finally:
        inserter.stop.set()
        server.stop()
