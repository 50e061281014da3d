"""DDL committed by another coordinator (a Dagster run, a scheduler worker,
a second `tidemark serve`) is seen by the next statement of a served
environment: the catalog check each statement makes must stay a read of
the shared catalog record, however cheap it is made. The other coordinator
runs in this process (an OS process costs seconds of imports) on its own
consensus connections, so all it shares with the served one is the file."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from coordinator_lib.adapter.client import Client
from coordinator_lib.adapter.coordinator import Config, Coordinator
from tests.fixtures.served import connect, served

pytestmark = pytest.mark.timeout(120)


def _elsewhere(data_dir: Path, *statements: str) -> None:
    coordinator = Coordinator(Config(data_dir=str(data_dir), background=False))
    try:
        session = Client(coordinator).startup("materialize")
        for sql in statements:
            list(session.execute(sql))
        session.terminate()
    finally:
        coordinator.close()


def test_ddl_of_another_coordinator_is_seen_by_the_next_statement(tmp_path: Path) -> None:
    data_dir = tmp_path / "env"
    with served(data_dir) as env, connect(env) as conn:
        conn.execute("CREATE TABLE mine (a int)")
        conn.execute("INSERT INTO mine VALUES (1)")  # the catalog is cached by now
        _elsewhere(data_dir, "CREATE TABLE theirs (b text)", "DROP TABLE mine")
        conn.execute("INSERT INTO theirs VALUES ('seen')")
        assert conn.execute("SELECT b FROM theirs").fetchall() == [("seen",)]
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("INSERT INTO mine VALUES (2)")
