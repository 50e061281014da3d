"""Deep statements and text PostgreSQL cannot hold, through the front doors
of a real server (pgwire with psycopg, HTTP /api/sql, webhooks).

- 1,000 nested parentheses, a 1,000-term OR, 200 nested IN / EXISTS
  subqueries and 200 nested scalar subqueries (in SELECT and in WHERE) are
  answered as PostgreSQL answers them, and a materialized view over 30
  nested scalar subqueries stays so after an INSERT; 100,000 parentheses
  are 54001 "stack depth limit exceeded" (sql/depth.py), never an internal
  error;
- a deeply nested JSON body or a lone surrogate on /api/sql is HTTP 400
  with a JSON error; NUL in a query or parameter is 400 / 22021 and writes
  nothing; a NUL text parameter over pgwire is 22021;
- a webhook body with NUL (text) or \\u0000 (JSON) is 400 and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import requests

from coordinator_lib.server.environment import Environment
from tests.fixtures.served import connect, served

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    with served(tmp_path_factory.mktemp("deep") / "env") as environment:
        yield environment


@pytest.fixture(scope="module")
def tidemark(env: Environment) -> Iterator[psycopg.Connection[Any]]:
    with connect(env) as conn:
        conn.execute("CREATE TABLE t (a int, s text)")
        conn.execute("INSERT INTO t VALUES (1, 'x'), (2, 'y'), (3, NULL)")
        conn.execute("CREATE SOURCE w FROM WEBHOOK BODY FORMAT TEXT")
        conn.execute("CREATE SOURCE wj FROM WEBHOOK BODY FORMAT JSON")
        yield conn


@pytest.fixture(scope="module")
def postgres(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE t (a int, s text)")
        conn.execute("INSERT INTO t VALUES (1, 'x'), (2, 'y'), (3, NULL)")
        yield conn


DEEP = {
    "parentheses": "SELECT " + "(" * 1000 + "a + 1" + ")" * 1000 + " FROM t ORDER BY 1",
    "or": "SELECT a FROM t WHERE "
    + " OR ".join(f"a = {i}" for i in range(2, 1002))
    + " ORDER BY a",
    "in": "SELECT a FROM t WHERE a IN "
    + "(SELECT a FROM t WHERE a IN " * 200
    + "(SELECT 2)"
    + ")" * 200,
    "exists": "SELECT a FROM t WHERE EXISTS "
    + "(SELECT 1 FROM t AS u WHERE u.a = 1 AND EXISTS " * 200
    + "(SELECT 1)"
    + ")" * 200
    + " ORDER BY a",
    # Each level's value is checked to be one row (21000 otherwise): the
    # lowering read the level below three times, exponential in the depth.
    "scalar-select": "SELECT a, "
    + "(SELECT " * 200
    + "a FROM t AS u WHERE u.a = 2"
    + ")" * 200
    + " FROM t ORDER BY 1",
    "scalar-where": "SELECT a, s FROM t WHERE a = "
    + "(SELECT a FROM t WHERE a = " * 200
    + "2"
    + ")" * 200,
}


@pytest.mark.timeout(120)  # exponential plans took hours at depth 200
@pytest.mark.parametrize("name", DEEP)
def test_deep_statements_as_postgres(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any], name: str
) -> None:
    query = DEEP[name]
    assert tidemark.execute(query).fetchall() == postgres.execute(query).fetchall()


@pytest.mark.timeout(120)
def test_view_over_nested_scalar_subqueries_as_postgres(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """A view whose value is 30 scalar subqueries deep, the innermost
    correlated with the view's table, stays PostgreSQL's answer as it changes."""
    query = (
        "SELECT a, "
        + "(SELECT " * 30
        + "(SELECT max(u.a) FROM m AS u WHERE u.a < m.a)"
        + ")" * 30
        + " AS below FROM m"
    )
    tidemark.execute("CREATE TABLE m (a int)")
    postgres.execute("CREATE TEMP TABLE m (a int)")
    tidemark.execute(f"CREATE MATERIALIZED VIEW deep_mv AS {query}")
    for rows in ("(1), (5)", "(3), (7), (NULL)"):
        for conn in (tidemark, postgres):
            conn.execute(f"INSERT INTO m VALUES {rows}")
        got = tidemark.execute("SELECT * FROM deep_mv ORDER BY a").fetchall()
        assert got == postgres.execute(f"{query} ORDER BY a").fetchall()


def test_far_too_deep_is_stack_depth_exceeded(tidemark: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.errors.StatementTooComplex) as caught:
        tidemark.execute("SELECT " + "(" * 100_000 + "1" + ")" * 100_000)
    assert caught.value.sqlstate == "54001"
    assert caught.value.diag.message_primary == "stack depth limit exceeded"
    assert tidemark.execute("SELECT 1").fetchall() == [(1,)]  # the session goes on


def test_nul_text_parameter_over_pgwire(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """libpq sends text-format values as C strings, so a NUL can only come
    in a binary-format text parameter: PostgreSQL's SQLSTATE, nothing written."""
    codes = []
    for conn in (tidemark, postgres):
        result = conn.pgconn.exec_params(
            b"INSERT INTO t VALUES (9, $1)", [b"a\x00b"], param_types=[25], param_formats=[1]
        )
        codes.append(result.error_field(psycopg.pq.DiagnosticField.SQLSTATE))
        assert conn.execute("SELECT count(*) FROM t WHERE a = 9").fetchall() == [(0,)]
    assert codes[0] == codes[1] == b"22021"


def post_sql(env: Environment, body: str | bytes) -> requests.Response:
    return requests.post(
        f"{env.http.url}/api/sql",
        data=body.encode() if isinstance(body, str) else body,
        headers={"content-type": "application/json"},
        timeout=60,
    )


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("[" * 100_000, "08P01"),
        ('{"query": ' + "[" * 50_000 + "]" * 50_000 + "}", "08P01"),
        ('{"query": "SELECT \'\\ud800\'"}', "22021"),
        ('{"queries": [{"query": "SELECT $1", "params": ["\\udfff"]}]}', "22021"),
        (json.dumps({"query": "INSERT INTO t VALUES (8, 'a\x00b')"}), "22021"),
        (
            json.dumps(
                {"queries": [{"query": "INSERT INTO t VALUES (8, $1)", "params": ["\x00"]}]}
            ),
            "22021",
        ),
    ],
    ids=[
        "deep-array",
        "deep-query",
        "surrogate-query",
        "surrogate-param",
        "nul-query",
        "nul-param",
    ],
)
def test_api_sql_refuses_with_json(
    env: Environment, tidemark: psycopg.Connection[Any], body: str, code: str
) -> None:
    response = post_sql(env, body)
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    assert tidemark.execute("SELECT count(*) FROM t WHERE a = 8").fetchall() == [(0,)]


@pytest.mark.parametrize(
    ("source", "body", "message"),
    [
        ("w", b"a\x00b", 'invalid byte sequence for encoding "UTF8": 0x00'),
        ("wj", b'{"a": "x\\u0000y"}', "\\u0000 cannot be converted to text"),
        ("wj", b'{"k\\u0000": 1}', "\\u0000 cannot be converted to text"),
    ],
)
def test_webhook_refuses_nul(
    env: Environment, tidemark: psycopg.Connection[Any], source: str, body: bytes, message: str
) -> None:
    url = f"{env.http.url}/api/webhook/materialize/public/{source}"
    response = requests.post(url, data=body, timeout=60)
    assert response.status_code == 400
    assert message in response.text
    assert tidemark.execute(f"SELECT count(*) FROM {source}").fetchall() == [(0,)]
