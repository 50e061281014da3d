"""Bad connections and sources: a clear error with its SQLSTATE, and nothing
created (no catalog item, no replication slot upstream). Secrets are never
printed back."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.fixtures.serve_process import free_port
from tests.sources.conftest import PASSWORD, REPLICATOR, connection_sql
from tests.sources.test_postgres_source import connect_tidemark, setup_upstream

Conn = psycopg.Connection[Any]
SLOTS = "SELECT slot_name FROM pg_replication_slots WHERE database = current_database()"


def test_connection_errors_name_the_problem(
    upstream: Conn, tidemark: Conn, upstream_url: str
) -> None:
    tidemark.execute("CREATE SECRET wrong AS 'not-the-password'")
    with pytest.raises(psycopg.errors.InvalidPassword, match="password authentication failed"):
        tidemark.execute(connection_sql(upstream_url, password_secret="wrong"))
    unreachable = connection_sql(upstream_url, password_secret="wrong").replace(
        f"PORT {psycopg.conninfo.conninfo_to_dict(upstream_url)['port']}", f"PORT {free_port()}"
    )
    with pytest.raises(
        psycopg.errors.SqlclientUnableToEstablishSqlconnection, match="cannot connect"
    ):
        tidemark.execute(unreachable)
    upstream.execute("DROP ROLE IF EXISTS plain")
    upstream.execute(f"CREATE ROLE plain LOGIN PASSWORD '{PASSWORD}'")
    tidemark.execute(f"CREATE SECRET pgpass AS '{PASSWORD}'")
    plain = connection_sql(upstream_url).replace(f"USER '{REPLICATOR}'", "USER 'plain'")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="REPLICATION"):
        tidemark.execute(plain)
    with pytest.raises(psycopg.errors.SyntaxError):
        tidemark.execute("CREATE CONNECTION c TO POSTGRES (HOST 'h', PASSWORD 'inline')")
    assert tidemark.execute("SHOW CONNECTIONS").fetchall() == []
    upstream.execute("DROP ROLE plain")


def test_connections_are_listed_without_their_password(
    upstream: Conn, tidemark: Conn, upstream_url: str
) -> None:
    connect_tidemark(tidemark, upstream_url)
    assert tidemark.execute("SHOW CONNECTIONS").fetchall() == [("pg", "postgres")]
    ((_, create_sql),) = tidemark.execute("SHOW CREATE CONNECTION pg").fetchall()
    assert "PASSWORD SECRET materialize.public.pgpass" in create_sql
    log = tidemark.execute("SELECT sql FROM mz_internal.mz_statement_log").fetchall()
    shown = [create_sql, *(row[0] for row in log)]
    assert not any(PASSWORD in text for text in shown)
    with pytest.raises(psycopg.errors.DependentObjectsStillExist):
        tidemark.execute("DROP SECRET pgpass")
    tidemark.execute("DROP CONNECTION pg")
    assert tidemark.execute("SHOW CONNECTIONS").fetchall() == []


@pytest.mark.parametrize(
    ("prepare", "statement", "error", "message"),
    [
        (
            "",
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'nope') FOR ALL TABLES",
            psycopg.errors.UndefinedObject,
            'publication "nope" does not exist',
        ),
        (
            "",
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR TABLES (missing)",
            psycopg.errors.UndefinedTable,
            'table "missing" is not in publication "p"',
        ),
        (
            "CREATE TABLE c (id int PRIMARY KEY); ALTER PUBLICATION p ADD TABLE c",
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR ALL TABLES",
            psycopg.errors.ObjectNotInPrerequisiteState,
            'table "public.c" does not have REPLICA IDENTITY FULL',
        ),
        (
            "CREATE TABLE c (id int, at point); ALTER TABLE c REPLICA IDENTITY FULL;"
            " ALTER PUBLICATION p ADD TABLE c",
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR TABLES (a, c)",
            psycopg.errors.FeatureNotSupported,
            'column "at" of table "public.c" has type point',
        ),
        (
            "",
            "CREATE SOURCE s FROM POSTGRES CONNECTION pgpass (PUBLICATION 'p') FOR ALL TABLES",
            psycopg.errors.WrongObjectType,
            "not a connection",
        ),
    ],
    ids=["publication", "table", "replica-identity", "type", "not-a-connection"],
)
def test_bad_sources_create_nothing(
    upstream: Conn,
    tidemark: Conn,
    upstream_url: str,
    prepare: str,
    statement: str,
    error: type[Exception],
    message: str,
) -> None:
    setup_upstream(upstream)
    for part in filter(None, prepare.split(";")):
        upstream.execute(part)
    connect_tidemark(tidemark, upstream_url)
    with pytest.raises(error, match=message):
        tidemark.execute(statement)
    assert tidemark.execute("SHOW SOURCES").fetchall() == []
    assert upstream.execute(SLOTS).fetchall() == []
    # The name is free: a good statement creates the source.
    tidemark.execute("CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR TABLES (a)")
    assert tidemark.execute("SHOW SOURCES").fetchall() == [("a", "quickstart"), ("s", "quickstart")]


def test_ssl_mode_is_what_libpq_is_given(upstream: Conn, tidemark: Conn, upstream_url: str) -> None:
    """SSL MODE reaches the upstream connection as libpq's sslmode: the test's
    PostgreSQL serves no TLS, so 'require' is refused at CREATE with libpq's
    reason, 'disable' and 'prefer' connect; an unknown mode names the modes."""
    tidemark.execute(f"CREATE SECRET pgpass AS '{PASSWORD}'")
    disabled = connection_sql(upstream_url)
    with pytest.raises(psycopg.errors.SqlclientUnableToEstablishSqlconnection, match="SSL"):
        tidemark.execute(disabled.replace("SSL MODE 'disable'", "SSL MODE 'require'"))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="invalid SSL MODE 'sometimes'"):
        tidemark.execute(disabled.replace("SSL MODE 'disable'", "SSL MODE 'sometimes'"))
    assert tidemark.execute("SHOW CONNECTIONS").fetchall() == []
    tidemark.execute(disabled.replace("SSL MODE 'disable'", "SSL MODE 'prefer'"))
    tidemark.execute(connection_sql(upstream_url, name="plain"))
    assert sorted(tidemark.execute("SHOW CONNECTIONS").fetchall()) == [
        ("pg", "postgres"),
        ("plain", "postgres"),
    ]
    tidemark.execute("DROP CONNECTION pg")
    tidemark.execute("DROP CONNECTION plain")
