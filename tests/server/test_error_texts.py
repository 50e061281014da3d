"""No error a user sees shows the parser's internals. Malformed statements
are made from well-formed ones by cutting each at every token, dropping one
token and doubling one (deterministic, some 860 statements); every
error they give over pgwire must be a PostgreSQL SQLSTATE other than XX000,
with a message, detail and hint free of sqlglot's class names
(`<class 'sqlglot.expressions...'>`), of names made snake case from them, and
of sqlglot's catch-all "Invalid expression / Unexpected token"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures.served import connect, served

pytestmark = pytest.mark.timeout(300)

WELL_FORMED = [
    "SELECT a, b FROM t WHERE a > 1 AND b < 2 ORDER BY a DESC LIMIT 3 OFFSET 1",
    "SELECT count(*) FILTER (WHERE a > 1), sum(a) FROM t GROUP BY b HAVING sum(a) > 1",
    "SELECT CASE WHEN a = 1 THEN 'x' ELSE 'y' END, a * 2 + b % 3 FROM t",
    "SELECT * FROM t JOIN u ON t.a = u.c LEFT JOIN t t2 USING (a)",
    "SELECT a FROM t WHERE a IN (SELECT c FROM u) OR EXISTS (SELECT 1 FROM u WHERE c = a)",
    "WITH x AS (SELECT a FROM t) SELECT * FROM x UNION ALL SELECT c FROM u",
    "SELECT row_number() OVER (PARTITION BY b ORDER BY a) FROM t",
    "SELECT a::text, CAST(b AS bigint), '{1}'::int[], ARRAY[1, 2], (1, 2) = (1, 2) FROM t",
    "SELECT substring('abc' FROM 1 FOR 2), trim(both 'x' FROM 'xax'), extract(year FROM now())",
    "SELECT a BETWEEN 1 AND 2, a IS NOT NULL, a IS DISTINCT FROM b, NOT a = 1 FROM t",
    "SELECT DISTINCT ON (a) a, b FROM t ORDER BY a, b",
    "SELECT '{\"a\": 1}'::jsonb -> 'a', 'x' || 'y', 'a' LIKE 'b%' ESCAPE '!'",
    "INSERT INTO t (a, b) VALUES (1, 2), (3, 4)",
    "UPDATE t SET a = a + 1 WHERE b = 2",
    "DELETE FROM t WHERE a = 1",
]
TOKEN = re.compile(r"'[^']*'|\"[^\"]*\"|\w+|::|<=|>=|<>|!=|->|\|\||\S")


def malformed() -> list[str]:
    out: set[str] = set()
    for statement in WELL_FORMED:
        tokens = TOKEN.findall(statement)
        for i in range(1, len(tokens)):
            out.add(" ".join(tokens[:i]))
            out.add(" ".join(tokens[:i] + tokens[i + 1 :]))
            out.add(" ".join(tokens[: i + 1] + tokens[i:]))
    return sorted(out - set(WELL_FORMED))


def shows_internals(text: str) -> bool:
    return (
        "sqlglot" in text
        or "<class" in text
        or "Invalid expression" in text
        or re.search(r"\b[a-z](_[a-z]){2,}", text) is not None  # j_s_o_n_b_...
    )


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[psycopg.Connection[Any]]:
    with served(tmp_path_factory.mktemp("error-texts") / "env") as env, connect(env) as c:
        c.execute("CREATE TABLE t (a int, b int)")
        c.execute("CREATE TABLE u (c int)")
        yield c


def test_no_error_shows_parser_internals(conn: psycopg.Connection[Any]) -> None:
    statements = malformed()
    assert len(statements) > 800
    bad = []
    for statement in statements:
        try:
            conn.execute(statement)  # writes that parse change scratch tables
        except psycopg.Error as error:
            diag = error.diag
            shown = " ".join(
                filter(None, [diag.message_primary, diag.message_detail, diag.message_hint])
            )
            if error.sqlstate in (None, "XX000") or shows_internals(shown):
                bad.append((statement, error.sqlstate, shown))
    assert bad == []
