"""Webhook sources and secrets in the catalog: syntax round trips, planning
errors, secrets never printed, dependencies, system relations, restarts."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator_lib.adapter.catalog import CATALOG_KEY
from coordinator_lib.adapter.client import Handle, serve
from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.webhook import WebhookAppender
from coordinator_lib.sql.dialect import Tidemark, parse_sql
from tests.adapter.conftest import fast_config, run_on
from tests.webhook.conftest import Sql, signature

VALUE = "hunter2-but-longer"


@pytest.fixture
def handle(tmp_path: Path) -> Iterator[Handle]:
    handle = serve(fast_config(tmp_path / "env"), None)
    try:
        yield handle
    finally:
        handle.shutdown()


@pytest.fixture
def sql(handle: Handle) -> Iterator[Sql]:
    session = handle.client.startup("materialize", "materialize")
    try:
        yield run_on(session)
    finally:
        session.terminate()


@pytest.mark.parametrize(
    "text",
    [
        "CREATE SOURCE w FROM WEBHOOK BODY FORMAT TEXT",
        "CREATE SOURCE IF NOT EXISTS s.w IN CLUSTER c FROM WEBHOOK BODY FORMAT JSON ARRAY "
        "(id BIGINT NOT NULL, \"Name\" TEXT) INCLUDE HEADERS (NOT 'authorization', 'x-a') "
        "INCLUDE HEADER 'x-sig' AS sig BYTES",
        "CREATE SOURCE w FROM WEBHOOK BODY FORMAT BYTES CHECK (WITH (HEADERS, BODY AS b BYTES, "
        "SECRET db.s.k AS key) CONSTANT_TIME_EQ(b, key))",
        "CREATE SOURCE w FROM WEBHOOK BODY FORMAT JSON CHECK (headers IS NULL)",
    ],
)
def test_syntax_round_trips(text: str) -> None:
    [statement] = parse_sql(text)
    printed = statement.sql(dialect=Tidemark)
    assert printed == text
    assert parse_sql(printed)[0].sql(dialect=Tidemark) == printed


def test_secret_values_are_never_printed(handle: Handle, sql: Sql) -> None:
    sql(f"CREATE SECRET k AS '{VALUE}'")
    sql(f"CREATE SECRET k2 AS decode('{VALUE.encode().hex()}', 'hex'); ALTER SECRET k AS 'x'")
    sql(f"ALTER SECRET k AS '{VALUE}'")
    sql(
        "CREATE SOURCE w FROM WEBHOOK BODY FORMAT TEXT "
        "CHECK (WITH (BODY, SECRET k) constant_time_eq(body, k))"
    )
    shown = [
        *sql("SHOW CREATE SOURCE w"),
        *sql("SELECT sql, error_message FROM mz_internal.mz_statement_log"),
        *sql("SELECT * FROM mz_catalog.mz_objects"),
    ]
    assert VALUE not in repr(shown) and VALUE.encode().hex() not in repr(shown)
    entries = [e.create_sql for e in handle.coordinator.catalog.entries()]
    assert "CREATE SECRET materialize.public.k AS '********'" in entries
    with pytest.raises(AdapterError) as bad:
        sql("CREATE SECRET k3 AS '\\xZZ-secretish'")
    assert "secretish" not in str(bad.value)
    with pytest.raises(AdapterError, match="secrets cannot be selected from"):
        sql("SELECT * FROM k")
    # Stored in the durable catalog record, encrypted (adapter/secrets_key.py).
    record = handle.coordinator.storage.persist.consensus.head(CATALOG_KEY)
    assert record is not None
    assert base64.b64encode(VALUE.encode()).decode() not in record.data.decode()
    assert VALUE not in record.data.decode()


def test_check_planning_errors(sql: Sql) -> None:
    sql("CREATE SECRET k AS 'v'")
    sql("CREATE TABLE t (a int)")
    for statement, message in [
        ("CHECK (WITH (BODY) body)", "must be type boolean"),
        ("CHECK (WITH (BODY) nope = 'a')", 'column "nope" does not exist'),
        ("CHECK (WITH (SECRET t) true)", "not a secret"),
        ("CHECK (WITH (SECRET missing) true)", "unknown catalog item"),
        ("CHECK (WITH (BODY, SECRET k AS body) true)", "given more than once"),
        ("CHECK (WITH (HEADERS BYTES) true)", "HEADERS ... BYTES is not supported"),
        ("CHECK (WITH (BODY) count(*) > 0)", "aggregate functions are not allowed"),
    ]:
        with pytest.raises(AdapterError, match=message):
            sql(f"CREATE SOURCE w FROM WEBHOOK BODY FORMAT TEXT {statement}")
    with pytest.raises(AdapterError, match="specified more than once"):
        sql("CREATE SOURCE w FROM WEBHOOK BODY FORMAT TEXT INCLUDE HEADER 'a' AS body")
    with pytest.raises(AdapterError, match="syntax error"):
        sql("CREATE SOURCE w FROM WEBHOOK BODY FORMAT TEXT (a int)")
    with pytest.raises(AdapterError, match="already exists"):
        sql("CREATE SOURCE t FROM WEBHOOK BODY FORMAT TEXT")
    assert sql("SHOW SOURCES") == []


def test_dependencies_system_relations_and_drop(handle: Handle, sql: Sql) -> None:
    sql("CREATE SECRET k AS 'v'")
    sql(
        "CREATE SOURCE w FROM WEBHOOK BODY FORMAT JSON INCLUDE HEADERS "
        "CHECK (WITH (BODY, SECRET k) constant_time_eq(body, k))"
    )
    [(source_id,)] = sql("SELECT id FROM mz_catalog.mz_sources WHERE name = 'w'")
    assert sql("SELECT name, url FROM mz_internal.mz_webhook_sources") == [
        ("w", "/api/webhook/materialize/public/w")
    ]
    assert sql("SELECT name FROM mz_catalog.mz_secrets") == [("k",)]
    assert sql(f"SELECT type FROM mz_catalog.mz_objects WHERE id = '{source_id}'") == [("source",)]
    [(since, upper)] = sql(
        "SELECT read_frontier, write_frontier FROM mz_internal.mz_frontiers "
        f"WHERE object_id = '{source_id}'"
    )
    assert since is not None and upper > since
    assert sql("SELECT name, type FROM mz_catalog.mz_columns WHERE id = '" + source_id + "'") == [
        ("body", "jsonb"),
        ("headers", "map[text=>text]"),
    ]
    assert sql("SHOW SOURCES") == [("w", "quickstart")]
    with pytest.raises(AdapterError, match="still depended upon by source"):
        sql("DROP SECRET k")
    sql("DROP SECRET k CASCADE")
    assert sql("SHOW OBJECTS") == []
    assert not handle.coordinator.group_committed()


def test_sources_and_secrets_survive_a_restart(tmp_path: Path) -> None:
    config = fast_config(tmp_path / "env")
    body = b'{"n": 1}'
    for round in range(2):
        handle = serve(config, None)
        try:
            session = handle.client.startup("materialize", "materialize")
            sql = run_on(session)
            if round == 0:
                sql(f"CREATE SECRET k AS '{VALUE}'")
                sql(
                    "CREATE SOURCE w FROM WEBHOOK BODY FORMAT JSON CHECK (WITH (HEADERS, "
                    "BODY, SECRET k) decode(headers->>'x-sig', 'hex') = hmac(body, k, 'sha256'))"
                )
            appender = WebhookAppender(handle.coordinator)
            headers = {"x-sig": signature(VALUE.encode(), body)}
            appender.append("materialize", "public", "w", body, headers, dt.datetime.now(dt.UTC))
            assert sql("SELECT body FROM w") == [('{"n": 1}',)] * (round + 1)
            session.terminate()
        finally:
            handle.shutdown()
