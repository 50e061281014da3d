"""An upstream PostgreSQL database per test (on the logical-replication
server of `tests/fixtures/postgres.py`) and a Tidemark server on loopback,
reached with psycopg over pgwire as a user would."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config
from tests.fixtures.postgres import with_dbname

REPLICATOR = "replicator"
PASSWORD = "s3cret-pw"


@pytest.fixture
def upstream_url(postgres_upstream_url: str) -> Iterator[str]:
    """A fresh upstream database with a REPLICATION role `replicator`
    (password PASSWORD) that may read its tables; dropped afterwards with
    any slot left in it."""
    name = f"up_{uuid.uuid4().hex[:12]}"
    admin = with_dbname(postgres_upstream_url, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (REPLICATOR,)).fetchone()
        if not exists:
            conn.execute(
                sql.SQL("CREATE ROLE {} WITH LOGIN REPLICATION PASSWORD {}").format(
                    sql.Identifier(REPLICATOR), sql.Literal(PASSWORD)
                )
            )
    url = with_dbname(postgres_upstream_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(
                sql.Identifier(REPLICATOR)
            )
        )
        conn.execute(
            sql.SQL(
                "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {}"
            ).format(sql.Identifier(REPLICATOR))
        )
    try:
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
                " WHERE database = %s AND active_pid IS NOT NULL",
                (name,),
            )
            time.sleep(0.2)
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                " WHERE database = %s AND NOT active",
                (name,),
            )
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def upstream(upstream_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(upstream_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def environment(tmp_path: Path) -> Iterator[Environment]:
    env = Environment(fast_config(tmp_path / "env"), pgwire_port=0, http_port=0)
    env.start()
    try:
        yield env
    finally:
        env.stop()


@pytest.fixture
def tidemark(environment: Environment) -> Iterator[psycopg.Connection[Any]]:
    dsn = f"host=127.0.0.1 port={environment.pgwire.port} user=materialize dbname=materialize"
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


def connection_sql(upstream_url: str, name: str = "pg", password_secret: str = "pgpass") -> str:
    """CREATE CONNECTION for the upstream database as `replicator`."""
    parts = psycopg.conninfo.conninfo_to_dict(upstream_url)
    return (
        f"CREATE CONNECTION {name} TO POSTGRES (HOST '{parts['host']}', PORT {parts['port']}, "
        f"USER '{REPLICATOR}', PASSWORD SECRET {password_secret}, DATABASE '{parts['dbname']}', "
        "SSL MODE 'disable')"
    )


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
