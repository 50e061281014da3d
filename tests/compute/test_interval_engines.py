"""Interval, time and char(n) views on both engines against a real PostgreSQL: the
same materialized views stepped on Spark, then in-process, then on Spark
again while rows change, each step's contents printed as pgwire prints them
and held to PostgreSQL's text for the same query. A switch of engines only
works if both compute identical values (a step retracts what the other
engine wrote), so the struct Spark keeps is checked against the Interval the
in-process engine keeps too.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.string import TextLoader
from pyspark.sql import SparkSession

from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.server.pg_types import encode_text
from tests.compute.sql_session import SqlSession

pytestmark = [pytest.mark.spark]

INTERVALS = {
    "table": "CREATE TABLE ev (id int, a timestamp, b timestamp, i interval)",
    "rows": "INSERT INTO ev VALUES (1, '2020-01-31 10:00:00', '2020-01-01 12:30:00.5', '1 month'),"
    " (2, '2021-03-01', '2021-03-02 01:02:03', '-1 year -2 months'),"
    " (3, '2020-02-29 23:59:59', '2019-02-28', '30 days'),"
    " (4, '2000-01-01', '2000-01-01', '1 day 02:03:04.25'), (5, '2024-05-31', NULL, NULL)",
    "views": {
        # with typmod casts, and sum/avg(interval) over a window
        "diff": "SELECT id, a - b AS d, b - a AS back, extract(epoch FROM a - b) AS e,"
        " i::interval hour AS h, (a - b)::interval(0) AS p0,"
        " CAST(a - b AS interval day to second(1)) AS ds, avg(i) OVER (ORDER BY id) AS wa,"
        " sum(i) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS ws FROM ev",
        "moved": "SELECT id, a + i AS m, a - INTERVAL '1 month' AS b, a + INTERVAL '1' YEAR AS y,"
        " i * 1.5 AS scaled, -i AS neg, i + INTERVAL '1 day' AS more FROM ev",
        "compared": "SELECT id, i, i::text AS t FROM ev WHERE i >= INTERVAL '30 days'",
        # max(i * id) is '90 days' by PostgreSQL's order, '1 mon' by field
        "grouped": "SELECT count(*) AS n, sum(extract(day FROM a - b)) AS days,"
        " max(i * id) AS top FROM ev WHERE a - b < INTERVAL '400 days'",
        # '1 mon' = '30 days': one group (printed '1 mon', PostgreSQL's first
        # read); window order by PostgreSQL's key; sum/avg field by field,
        # DISTINCT by key
        "by_key": "SELECT i, count(*) AS n, rank() OVER (ORDER BY i) AS r FROM ev GROUP BY i",
        "sums": "SELECT sum(i) AS s, avg(i) AS a, count(DISTINCT i) AS k,"
        " extract(epoch FROM sum(DISTINCT i)) AS ds,"
        " avg(DISTINCT i) FILTER (WHERE id <> 3) AS da FROM ev",
        # matched by key: '2 mons' (after the UPDATE) = '60 days', '1 mon' = '720 hours'
        "matched": "SELECT 'i' AS op, i FROM (SELECT INTERVAL '60 days' AS i INTERSECT"
        " SELECT i FROM ev) AS x UNION ALL SELECT 'e', i FROM (SELECT i FROM ev"
        " EXCEPT ALL SELECT INTERVAL '720 hours') AS y",
    },
    "writes": [
        "INSERT INTO ev VALUES (6, '2020-12-31', '2020-02-29', '2 mons 1 day'),"
        " (7, NULL, NULL, '1h')",
        "UPDATE ev SET i = i * 2, a = a + INTERVAL '1 month' WHERE id IN (1, 4, 6)",
        "DELETE FROM ev WHERE i = INTERVAL '60 days' OR id = 2",
    ],
}
TIMES = {
    "table": "CREATE TABLE tm (id int, a timestamp, t time)",
    "rows": "INSERT INTO tm VALUES (1, '2020-01-31 10:00:00', '04:05:06.5'),"
    " (2, '2021-03-01', '23:00'), (3, NULL, NULL), (4, '2000-01-01', '00:00:00.000001')",
    "views": {
        "times": "SELECT id, t, t + INTERVAL '2 hours' AS later, t - TIME '01:00' AS since,"
        " a::time AS at, extract(second FROM t) AS s FROM tm WHERE t > '00:00'",
        "time_bounds": "SELECT min(t) AS early, max(t) AS late, count(t) AS n FROM tm",
    },
    "writes": [
        "INSERT INTO tm VALUES (5, '2020-12-31 13:14:15', '13:14'), (6, NULL, '00:00')",
        "UPDATE tm SET t = t + INTERVAL '90 minutes' WHERE id IN (1, 2)",
        "DELETE FROM tm WHERE t < '01:00'",
    ],
}
# char(n) is kept padded; Spark compares and converts it without the blanks.
# Also column modifiers (issue 19): an `interval hour` column's writes are
# restricted to hours, UNION / CASE of varchars, a table without columns.
CHARS = {
    "table": [
        "CREATE TABLE ch (id int, c char(4), v varchar(3), h interval hour)",
        "CREATE TABLE nl ()",
    ],
    "rows": "INSERT INTO ch VALUES (1, 'ab', 'ab', '1 day 3 hours 5 minutes'),"
    " (2, 'ab  ', 'x', '5'), (3, 'abcd', NULL, NULL)",
    "views": {
        "chars": "SELECT id, c, c || '|' AS cc, length(c) AS n, v FROM ch WHERE c = 'ab'",
        "modifiers": "SELECT id, h, CASE WHEN id > 1 THEN v ELSE 'y' END AS w FROM ch"
        " UNION ALL SELECT count(*)::int, NULL, NULL FROM nl",
    },
    "writes": [
        "INSERT INTO ch VALUES (4, 'ab ', 'abc', '2 hours 59 minutes'), (5, 'a', 'a', NULL)",
        "UPDATE ch SET c = 'ab', h = h + INTERVAL '1 hour 59 minutes' WHERE id IN (1, 5)",
        "DELETE FROM ch WHERE id = 2",
    ],
}
# Read as text, so the output format is compared; numerics by value
# (PostgreSQL keeps trailing zeros, Materialize and Tidemark do not).
TEXT_TYPES = ("interval", "timestamp", "int4", "int8", "text", "time", "bpchar", "varchar")


def _ours(session: SqlSession, id: Any) -> Counter:
    """The view's rows at its latest time, as pgwire prints them (numerics
    as values)."""
    desc = session.storage.collection(id).description.desc
    types = [t.scalar_type for t in desc.types]
    upper = session.upper(id)
    assert upper is not None
    out: Counter = Counter()
    for row, diff in session.snapshot(id, upper - 1):
        shown = (
            v if st is ScalarType.NUMERIC else encode_text(v, st)
            for v, st in zip(row, types, strict=True)
        )
        out[tuple(shown)] += diff
    return +out


@pytest.mark.parametrize("case", [INTERVALS, TIMES, CHARS], ids=["interval", "time", "char"])
def test_views_on_both_engines_match_postgres(
    spark: SparkSession, tmp_path: Path, postgres_url: str, case: dict[str, Any]
) -> None:
    session = SqlSession(spark, tmp_path, engine="spark")
    views: dict[str, str] = case["views"]
    with psycopg.connect(postgres_url, autocommit=True) as postgres:
        for name in TEXT_TYPES:
            postgres.adapters.register_loader(name, TextLoader)
        tables = case["table"] if isinstance(case["table"], list) else [case["table"]]
        for table in tables:
            postgres.execute(table.replace("CREATE TABLE", "CREATE TEMP TABLE"))
        postgres.execute(case["rows"])

        def theirs(query: str) -> Counter:
            return Counter(tuple(row) for row in postgres.execute(query).fetchall())

        try:
            for table in tables:
                session.execute(table)
            session.execute(case["rows"])
            for name, query in views.items():
                session.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
            ids = {name: id for id, name in session.views.items()}
            session.step()
            for engine, write in zip(["local", "spark", "local"], case["writes"], strict=True):
                for name, query in views.items():
                    assert _ours(session, ids[name]) == theirs(query), name
                session.execute(write)
                postgres.execute(write)
                session.set_engine(engine)
                session.step()
            for name, query in views.items():
                assert _ours(session, ids[name]) == theirs(query), name
        finally:
            session.close()
