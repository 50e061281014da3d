"""SIGKILL `tidemark serve` while it replicates, twice, and restart it on
the same data directory: every upstream change is in the subsource exactly
once (the progress record and the data land in one compare-and-set, and
replication resumes after the recorded LSN)."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.fixtures.serve_process import Server
from tests.sources.conftest import PASSWORD, connection_sql, wait_until

Conn = psycopg.Connection[Any]


class Writer(threading.Thread):
    """Upstream transactions of 1-3 changes (inserts, updates, deletes) until stopped."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.transactions = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(3)
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                next_id = 1
                while not self.stop.is_set():
                    with conn.transaction():
                        for _ in range(rng.randint(1, 3)):
                            roll = rng.random()
                            if roll < 0.6 or next_id < 5:
                                conn.execute("INSERT INTO ev VALUES (%s, 0)", (next_id,))
                                next_id += 1
                            elif roll < 0.85:
                                conn.execute(
                                    "UPDATE ev SET at = at + 1 WHERE id = %s",
                                    (rng.randrange(1, next_id),),
                                )
                            else:
                                conn.execute(
                                    "DELETE FROM ev WHERE id = %s", (rng.randrange(1, next_id),)
                                )
                    self.transactions += 1
        except BaseException as error:  # reported by the test
            self.error = error


def count(server: Server) -> int:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM ev").fetchone()
        return int(row[0]) if row else 0


@pytest.mark.slow
def test_sigkilled_server_resumes_replication_exactly(
    upstream: Conn, upstream_url: str, tmp_path: Path
) -> None:
    upstream.execute("CREATE TABLE ev (id int PRIMARY KEY, at int NOT NULL)")
    upstream.execute("ALTER TABLE ev REPLICA IDENTITY FULL")
    upstream.execute("CREATE PUBLICATION p FOR TABLE ev")
    data, log = tmp_path / "data", tmp_path / "serve.log"
    server = Server(data, log)
    writer = Writer(upstream_url)
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SECRET pgpass AS '{PASSWORD}'")
            conn.execute(connection_sql(upstream_url))
            conn.execute(
                "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR ALL TABLES"
            )
        writer.start()
        for _ in range(2):
            running, seen = server, count(server)
            wait_until(lambda: count(running) > seen + 20, "replication to move on")  # noqa: B023
            server.kill()  # mid-stream: the writer keeps going upstream
            server = Server(data, log)
        wait_until(lambda: count(server) > 0, "the restarted server to read")
        writer.stop.set()
        writer.join(30)
        assert writer.error is None, writer.error
        assert writer.transactions > 50
        query = "SELECT id, at FROM ev"
        expected = sorted(upstream.execute(query).fetchall())
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            wait_until(
                lambda: sorted(conn.execute(query).fetchall()) == expected,
                "the subsource to equal the upstream table",
            )
            duplicates = conn.execute(
                "SELECT id, count(*) FROM ev GROUP BY id HAVING count(*) > 1"
            ).fetchall()
            assert duplicates == []
    finally:
        writer.stop.set()
        server.stop()
