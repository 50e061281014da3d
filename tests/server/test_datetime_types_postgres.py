"""The interval and time types held to a real PostgreSQL over pgwire: as
columns (CREATE TABLE, INSERT), intervals in arithmetic with timestamps,
dates, intervals and numbers, compared and ordered by PostgreSQL's
30-day-month rule, extract and justify_*; times compared, cast, moved by
intervals and subtracted; as one-off queries and as materialized views
kept up to date as rows change. Values are compared as the text each
server prints (psycopg's text loader), so the output format is checked too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.string import TextLoader

from tests.fixtures.served import connect, served
from tests.server.test_sql_answers_postgres import outcome

pytestmark = pytest.mark.timeout(180)

TABLES = [
    "CREATE TABLE ev (id int, a timestamp, b timestamp, d date, i interval)",
    "CREATE TABLE tz (id int, t timestamptz, i interval)",
    "CREATE TABLE tm (id int, t time, d date)",
]
ROWS = [
    "INSERT INTO ev VALUES"
    " (1, '2020-01-31 10:00:00', '2020-01-01 12:30:00.5', '2020-02-29', '1 month'),"
    " (2, '2021-03-01 00:00:00', '2021-03-02 01:02:03', '2021-01-31', '-1 year -2 months'),"
    " (3, '2020-02-29 23:59:59', '2019-02-28 00:00:00', '2020-03-31', '30 days'),"
    " (4, '2000-01-01 00:00:00', '2000-01-01 00:00:00', '2000-01-01', '1 day 02:03:04.25'),"
    " (5, '2024-05-31 08:00:00', NULL, NULL, NULL),"
    " (6, '1999-12-31 00:00:00', '1999-01-01', '1999-12-31', '-0.5 seconds')",
    "INSERT INTO tz VALUES (1, '2020-01-31 10:00:00+00', '1 mon 2 days'),"
    " (2, '2020-03-01 00:00:00+00', '-36 hours')",
    "INSERT INTO tm VALUES (1, '04:05:06.789', '2020-02-29'), (2, '23:59:59.999999', NULL),"
    " (3, '00:00', '1999-12-31'), (4, NULL, '2000-01-01'), (5, '12:30:00.5', '2024-05-31')",
]


def _text_intervals(conn: psycopg.Connection[Any]) -> None:
    for name in ("interval", "time"):
        conn.adapters.register_loader(name, TextLoader)


@pytest.fixture(scope="module")
def tidemark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[psycopg.Connection[Any]]:
    with served(tmp_path_factory.mktemp("interval") / "env") as env, connect(env) as conn:
        _text_intervals(conn)
        for statement in TABLES + ROWS:
            conn.execute(statement)
        yield conn


@pytest.fixture(scope="module")
def postgres(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        _text_intervals(conn)
        conn.execute("SET TIME ZONE 'UTC'")
        for statement in TABLES:
            conn.execute(statement.replace("CREATE TABLE", "CREATE TEMP TABLE"))
        for statement in ROWS:
            conn.execute(statement)
        yield conn


QUERIES = {
    "column": "SELECT id, i FROM ev",
    "timestamp_minus_timestamp": "SELECT id, a - b AS diff, b - a AS back FROM ev",
    "date_minus_date": "SELECT id, d - DATE '2020-01-01' AS days FROM ev",
    "timestamp_plus_interval": "SELECT id, a + i AS moved, a - i AS back, i + a AS commuted,"
    " d + i AS from_date FROM ev",
    "month_clamping": "SELECT id, a + INTERVAL '1 month' AS m, a + INTERVAL '1' YEAR AS y,"
    " a - '1 month'::interval AS back, a + '13 months' AS untyped FROM ev",
    "interval_plus_interval": "SELECT id, i + i AS twice, i - INTERVAL '1 day' AS less,"
    " -i AS neg FROM ev",
    "interval_times_number": "SELECT id, i * 2 AS i2, i * 1.5 AS i15, 3 * i AS i3,"
    " i / 4 AS q, i * 0.1 AS tenth FROM ev",
    "compare": "SELECT id, i > INTERVAL '29 days' AS gt, i = INTERVAL '30 days' AS eq,"
    " i <= '1 mon' AS le FROM ev",
    "order_by": "SELECT id, i FROM ev WHERE i IS NOT NULL ORDER BY i, id",
    "filter": "SELECT id FROM ev WHERE a - b > INTERVAL '1 day'",
    "extract": "SELECT id, extract(epoch FROM i) AS e, extract(day FROM a - b) AS dd,"
    " extract(hour FROM a - b) AS hh, extract(month FROM i) AS mm, extract(year FROM i) AS yy,"
    " extract(second FROM i) AS ss, date_part('minute', i) AS mi FROM ev",
    "justify": "SELECT id, justify_days(i * 3) AS jd, justify_hours(a - b) AS jh,"
    " justify_interval(i - INTERVAL '40 hours') AS ji FROM ev",
    "text": "SELECT id, i::text AS t, ('1 day ' || id || ' hours')::interval AS parsed FROM ev",
    "timestamptz": "SELECT id, t + i AS moved, t - TIMESTAMPTZ '2020-01-01 00:00:00+00' AS d"
    " FROM tz",
    "constants": "SELECT INTERVAL '1 day 02:03:04' AS a, INTERVAL '-1 years -2 mons' AS b,"
    " INTERVAL '0.5 seconds' AS c, INTERVAL '100 hours' AS d, INTERVAL '0' AS z,"
    " '-1 day +02:00:00'::interval AS e, INTERVAL '1.5 months' AS f FROM ev WHERE id = 1",
    # '1 mon' = '30 days' (PostgreSQL's interval_cmp): one group, printed as
    # the value with the most months (PostgreSQL's first read, here '1 mon')
    "group_by_interval": "SELECT i, count(*) AS n, min(id) AS first FROM ev GROUP BY i",
    "group_by_expression": "SELECT i * 2 AS j, count(*) AS n FROM ev GROUP BY i * 2",
    "distinct_interval": "SELECT DISTINCT i FROM ev",
    "union_interval": "SELECT i FROM ev UNION SELECT INTERVAL '720 hours'",
    # INTERSECT and EXCEPT match '720 hours' with '1 mon' and '30 days'; a
    # group prints its left side's value (PostgreSQL's first read here)
    "intersect_interval": "SELECT INTERVAL '720 hours' AS i INTERSECT SELECT i FROM ev",
    "except_interval": "SELECT i FROM ev EXCEPT SELECT INTERVAL '24 hours' + INTERVAL '2:03:04.25'",
    "except_all_interval": "SELECT i FROM ev EXCEPT ALL SELECT INTERVAL '720 hours'",
    "intersect_all_interval": "(VALUES (INTERVAL '720 hours'), ('720 hours'), ('-14 mons'))"
    " INTERSECT ALL SELECT i FROM ev",
    "count_distinct_interval": "SELECT count(DISTINCT i) AS n, count(DISTINCT i) FILTER"
    " (WHERE id > 1) AS m FROM ev",
    "join_on_interval": "SELECT x.id, y.id AS other FROM ev x JOIN ev y ON x.i = y.i",
    "partition_by_interval": "SELECT id, count(*) OVER (PARTITION BY i) AS n,"
    " rank() OVER (ORDER BY i) AS r FROM ev",
    "order_by_interval_limit": "SELECT id FROM ev ORDER BY i, id LIMIT 4",
    # sum/avg add months, days and microseconds apart; avg divides as interval / count
    "sum_avg": "SELECT sum(i) AS s, avg(i) AS a, sum(a - b) AS sd, avg(a - b) AS ad FROM ev",
    "sum_avg_grouped": "SELECT id % 2 AS odd, sum(i) AS s, avg(i) FILTER (WHERE id > 1) AS a,"
    " avg(i * 1.7) AS scaled FROM ev GROUP BY 1",
    "sum_avg_empty": "SELECT sum(i) AS s, avg(i) AS a FROM ev WHERE id > 100",
    # DISTINCT by PostgreSQL's `=`: '1 mon' and '30 days' count once (which
    # one PostgreSQL adds is its sort's choice: compared by epoch)
    "sum_avg_distinct": "SELECT extract(epoch FROM sum(DISTINCT i)) AS se,"
    " extract(epoch FROM avg(DISTINCT i)) AS ae, sum(DISTINCT i) FILTER (WHERE id <> 3) AS s,"
    " avg(DISTINCT i) FILTER (WHERE id <> 3) AS a FROM ev",
    "sum_avg_distinct_grouped": "SELECT id % 2 AS odd, extract(epoch FROM sum(DISTINCT i)) AS s,"
    " extract(epoch FROM avg(DISTINCT i)) AS a FROM ev GROUP BY 1",
    "sum_avg_over": "SELECT id, sum(i) OVER (ORDER BY id) AS s, avg(i) OVER (PARTITION BY id % 2"
    " ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS a, avg(i) OVER () AS t FROM ev",
    # time: a time of day to the microsecond
    "time_column": "SELECT id, t, t::text AS s FROM tm",
    "time_arithmetic": "SELECT id, t + INTERVAL '2 hours' AS later, t - INTERVAL '5 min 1.5 s'"
    " AS earlier, INTERVAL '1 day 3 hours' + t AS wrapped, t - TIME '01:00' AS since,"
    " d + t AS at FROM tm",
    "time_compare": "SELECT id FROM tm WHERE t > '04:00' AND t < TIME '23:59:59.9999994'",
    "time_casts": "SELECT id, a::time AS t, a::time::interval AS i, (i + INTERVAL '3 hours')::time"
    " AS wrapped, '13:14:15.1234567'::time AS rounded FROM ev WHERE id < 5",
    "time_extract": "SELECT id, extract(hour FROM t) AS h, extract(epoch FROM t) AS e,"
    " extract(second FROM t) AS s, date_part('minute', t) AS m FROM tm",
    "time_order": "SELECT id, t FROM tm ORDER BY t DESC NULLS LAST, id",
    "time_group": "SELECT t < '12:00' AS am, count(*) AS n, min(t) AS lo, max(t) AS hi FROM tm"
    " GROUP BY 1",
}


@pytest.mark.parametrize("query", list(QUERIES.values()), ids=list(QUERIES))
def test_query_as_postgres(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any], query: str
) -> None:
    assert outcome(tidemark, query) == outcome(postgres, query)


def test_order_by_follows_postgres_order(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """ORDER BY an interval orders by the 30-day-month total, not by field:
    '-1 year -2 mons' < '-00:00:00.5' < '1 day ...' < '1 mon' = '30 days'."""
    query = "SELECT id FROM ev WHERE i IS NOT NULL ORDER BY i DESC, id"
    assert tidemark.execute(query).fetchall() == postgres.execute(query).fetchall()


@pytest.mark.parametrize("name", list(QUERIES))
def test_materialized_view_as_postgres(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any], name: str
) -> None:
    """Dropped after: the module's server keeps every view it holds up to
    date, so each one left behind slows every later test's reads."""
    query = QUERIES[name]
    tidemark.execute(f"CREATE MATERIALIZED VIEW iv_{name} AS {query}")
    try:
        assert outcome(tidemark, f"SELECT * FROM iv_{name}") == outcome(postgres, query)
    finally:
        tidemark.execute(f"DROP MATERIALIZED VIEW iv_{name}")


def test_views_follow_writes(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """Views over interval columns stay equal to PostgreSQL's answer as rows
    are inserted, updated and deleted (incremental steps)."""
    queries = {
        "iv_follow_diff": "SELECT id, a - b AS diff, a + i AS moved FROM ev WHERE i < '40 days'",
        "iv_follow_sum": "SELECT count(*) AS n, max(a - b) > INTERVAL '1 day' AS big FROM ev",
        # the group of '1 mon' and '30 days' loses '1 mon' (UPDATE): it prints '30 days'
        "iv_follow_group": "SELECT i, count(*) AS n FROM ev GROUP BY i",
        "iv_follow_avg": "SELECT sum(i) AS s, avg(i) AS a, avg(a - b) AS d FROM ev",
        "iv_follow_intersect": "SELECT INTERVAL '60 days' AS i INTERSECT SELECT i FROM ev",
        "iv_follow_except": "SELECT i FROM ev EXCEPT ALL SELECT INTERVAL '720 hours'",
        "iv_follow_distinct": "SELECT extract(epoch FROM sum(DISTINCT i)) AS s,"
        " extract(epoch FROM avg(DISTINCT i)) AS a FROM ev",
        "iv_follow_over": "SELECT id, avg(i) OVER (ORDER BY id) AS a FROM ev",
    }
    for name, query in queries.items():
        tidemark.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
    writes = [
        "INSERT INTO ev VALUES (7, '2020-01-31', '2020-01-30', '2020-01-31', '1 mon -1 day')",
        "UPDATE ev SET i = i * 2 WHERE id IN (1, 4)",
        "DELETE FROM ev WHERE i = INTERVAL '30 days'",
    ]
    try:
        for write in writes:
            tidemark.execute(write)
            postgres.execute(write)
            for name, query in queries.items():
                assert outcome(tidemark, f"SELECT * FROM {name}") == outcome(postgres, query)
    finally:
        for undo in [
            "DELETE FROM ev WHERE id = 7",
            "UPDATE ev SET i = i / 2 WHERE id IN (1, 4)",
        ]:
            tidemark.execute(undo)
            postgres.execute(undo)


# SQL's interval qualifiers (fields restrict the value) and ISO 8601 input
INPUTS = [
    "SELECT INTERVAL '1-2' YEAR TO MONTH AS a, INTERVAL '-1-2' YEAR TO MONTH AS b,"
    " INTERVAL '1.5' YEAR AS c, INTERVAL '1 year 2 months 3 days' MONTH AS d",
    "SELECT INTERVAL '1 2:03' DAY TO MINUTE AS a, INTERVAL '1 2:03:04.5' DAY TO SECOND AS b,"
    " INTERVAL '1 2' DAY TO HOUR AS c, INTERVAL '5' DAY TO MINUTE AS d,"
    " INTERVAL '1-2' DAY TO SECOND AS e, INTERVAL '1 2:03' YEAR TO MONTH AS f",
    "SELECT INTERVAL '2:03' HOUR TO MINUTE AS a, INTERVAL '1:2' MINUTE TO SECOND AS b,"
    " INTERVAL '1:2' HOUR TO SECOND AS c, INTERVAL '1 day 2 hours 3 minutes 4.5 seconds'"
    " MINUTE AS d, INTERVAL '-1.5' MINUTE AS e, INTERVAL '1 2' HOUR AS f",
    "SELECT INTERVAL '1 2:03:04.123456' DAY TO SECOND(3) AS a,"
    " INTERVAL '-00:00:04.56789' SECOND(2) AS b, INTERVAL '1 day 2 hours' DAY AS c",
    "SELECT 'P1Y2M3DT4H5M6S'::interval AS a, 'P1Y2M3DT4H5M6.5S'::interval AS b,"
    " 'PT1H'::interval AS c, 'P1W2D'::interval AS d, 'P-1Y-2M'::interval AS e,"
    " 'P1.5Y2.5M'::interval AS f, 'PT'::interval AS g, 'P0.5W'::interval AS h",
    "SELECT 'P0001-02-03T04:05:06'::interval AS a, 'P00010203T040506'::interval AS b,"
    " 'P1-2-3T4:5:6'::interval AS c, 'P0001-02'::interval AS d, 'P1'::interval AS e,"
    " 'PT0405'::interval AS f, INTERVAL 'P1Y2M' YEAR AS g",
    "SELECT '1-2'::interval AS a, '1 2:03'::interval AS b, '-1 2:03'::interval AS c,"
    " '1-2 3 4:05:06'::interval AS d, '1 week 2 days'::interval AS e",
    "SELECT id, ('P' || id || 'DT' || id || 'H')::interval AS a, (id || '-2')::interval AS b,"
    " (id || ' 2:03')::interval AS c FROM ev",
    # the type's qualifier and precision in a cast: a literal reads with
    # them ('5' HOUR is 5 hours), a value is cut and rounded
    "SELECT '1 day 02:03:04.5678'::interval hour AS a, '1 day 02:03:04.5678'::interval(2) AS b,"
    " '5'::interval hour AS c, '1 day 02:03:04.5678'::interval second(1) AS d,"
    " CAST('1 2:03:04.5678' AS interval day to second(0)) AS e,"
    " '1 year 2 months'::interval year AS f, '2:03'::interval minute to second AS g,"
    " '1'::interval week",  # no field: `week` is the column's name
    "SELECT id, i::interval hour AS h, i::interval(0) AS p0, (a - b)::interval(1) AS p1,"
    " i::interval year AS y, (a - b)::interval day to minute AS dm,"
    " CAST(a - b AS interval minute to second(1)) AS ms FROM ev",
]


@pytest.mark.parametrize("n", range(len(INPUTS)))
def test_interval_input_as_postgres(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any], n: int
) -> None:
    """As a query, and as a view (stored as text and read again: the
    qualifier must survive)."""
    query = INPUTS[n]
    assert outcome(tidemark, query) == outcome(postgres, query)
    tidemark.execute(f"CREATE MATERIALIZED VIEW iv_input_{n} AS {query}")
    assert outcome(tidemark, f"SELECT * FROM iv_input_{n}") == outcome(postgres, query)


BAD_INPUTS = [
    "SELECT 'P'::interval",
    "SELECT 'P1H'::interval",
    "SELECT 'p1y'::interval",
    "SELECT '-P1D'::interval",
    "SELECT 'P1Y2M ago'::interval",
    "SELECT INTERVAL '1-13' YEAR TO MONTH",
    "SELECT INTERVAL '1 2' DAY",
    "SELECT INTERVAL 'abc' DAY",
    "SELECT '1 day 2 days'::interval",
    "SELECT INTERVAL '1.5:2' MINUTE TO SECOND",
    "SELECT ('P' || id || 'X')::interval FROM ev WHERE id = 2",
]


@pytest.mark.parametrize("statement", BAD_INPUTS)
def test_bad_interval_input_as_postgres(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any], statement: str
) -> None:
    """22007 (22015 for a field out of range) with PostgreSQL's message and position."""

    def error(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(statement)
        diag = caught.value.diag
        return caught.value.sqlstate, diag.message_primary, diag.statement_position

    assert error(tidemark) == error(postgres)


ERRORS = [
    "SELECT 'nonsense'::interval",
    "SELECT INTERVAL '1 fortnight'",
    "SELECT extract(dow FROM i) FROM ev",
    "SELECT extract(foo FROM i) FROM ev",
    "SELECT i * i FROM ev",
    "SELECT i + 1 FROM ev",
    "SELECT i / 0 FROM ev",
    "SELECT d - i > i FROM ev",
    "SELECT INTERVAL '2147483647 days' + INTERVAL '1 day'",
    "SELECT sum(INTERVAL '2147483647 days') FROM ev",
    "SELECT '25:00'::time",
    "SELECT 'noon'::time",
    "SELECT extract(day FROM t) FROM tm",
    "SELECT t + 1 FROM tm",
]


@pytest.mark.parametrize("statement", ERRORS)
def test_errors_as_postgres(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any], statement: str
) -> None:
    expected = outcome(postgres, statement)
    assert expected[0] == "error"
    assert outcome(tidemark, statement) == expected
