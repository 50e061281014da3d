"""Types and tables of Materialize's SQL held to a real PostgreSQL over
pgwire (issue 19): the same statements run on both, each with the same
rows (and column names) or the same SQLSTATE, as one-off queries and
through views. In-process engine; the Spark view test is in
tests/compute/test_materialize_types_spark.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures.served import connect, served
from tests.server.test_sql_answers_postgres import outcome

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def tidemark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[psycopg.Connection[Any]]:
    with served(tmp_path_factory.mktemp("mz_types") / "env") as env, connect(env) as conn:
        conn.port = env.pgwire.port  # type: ignore[attr-defined]
        yield conn


@pytest.fixture(scope="module")
def postgres(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


def _both(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any], steps: list[str]
) -> None:
    """Each step answers on Tidemark as on PostgreSQL (tables and views are
    temporary there, so reruns start clean)."""
    for step in steps:
        theirs = outcome(
            postgres,
            step.replace("CREATE TABLE", "CREATE TEMP TABLE").replace(
                "CREATE MATERIALIZED VIEW", "CREATE TEMP VIEW"
            ),
        )
        assert outcome(tidemark, step) == theirs, step


def test_a_table_without_columns(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """`CREATE TABLE t ()`: rows without columns, counted, inserted, deleted."""
    _both(
        tidemark,
        postgres,
        [
            "CREATE TABLE nullary ()",
            "SELECT * FROM nullary",
            "SELECT count(*) FROM nullary",
            "INSERT INTO nullary DEFAULT VALUES",
            "INSERT INTO nullary SELECT",
            "INSERT INTO nullary SELECT FROM generate_series(1, 3)",
            "CREATE MATERIALIZED VIEW nullary_count AS SELECT count(*) AS n FROM nullary",
            "CREATE VIEW nullary_all AS SELECT * FROM nullary",
            "SELECT * FROM nullary",
            "SELECT count(*) FROM nullary",
            "SELECT 1 AS x FROM nullary",
            "SELECT n FROM nullary_count",
            "SELECT * FROM nullary_all",
            "SELECT * FROM nullary, (VALUES (1), (2)) v (a)",
            "INSERT INTO nullary VALUES (1)",
            "DELETE FROM nullary",
            "SELECT count(*) FROM nullary",
            "SELECT n FROM nullary_count",
        ],
    )
