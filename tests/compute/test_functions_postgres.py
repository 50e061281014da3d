"""Built-in string, math and date/time functions on both engines against a
real PostgreSQL (the `postgres_url` fixture): same result type, same value
on every row, and an error (same SQLSTATE) where PostgreSQL raises one.

Each expression is planned over table `f` (`sql/function_calls.py`), its scalar
is evaluated per row in-process (`compute/local_scalar.py`) and over the
whole table on Spark (`compute/scalar.py`), and PostgreSQL runs the same
SELECT per row.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.compute.local_scalar import EvalError, eval_scalar
from coordinator_lib.expr.relation import Map
from coordinator_lib.expr.scalar import ScalarExpr
from coordinator_lib.repr.relation import ColumnType, RelationDesc
from coordinator_lib.sql import InMemoryCatalog, SelectPlan, plan_statement

DESC = RelationDesc.of(
    ("id", "integer"),
    ("s", "text"),
    ("n", "integer"),
    ("x", "double precision"),
    ("d", "numeric"),
    ("ts", "timestamp"),
    ("tz", "timestamptz"),
    ("dd", "date"),
    ("b", "boolean"),
    ("j", "jsonb"),
)
PG_COLUMNS = (
    "id int, s text, n int, x double precision, d numeric, ts timestamp, tz timestamptz, "
    "dd date, b boolean, j jsonb"
)
UTC = dt.UTC
ROWS: list[tuple[Any, ...]] = [
    (
        1,
        "  hello world  ",
        3,
        2.5,
        Decimal("2.5"),
        dt.datetime(2020, 2, 29, 13, 45, 30, 500000),
        dt.datetime(2020, 2, 29, 13, 45, 30, tzinfo=UTC),
        dt.date(2021, 1, 3),
        True,
        '{"a": {"b": [1, 2, {"c": null}]}, "k": "v"}',
    ),
    (
        2,
        "abc",
        -2,
        -2.5,
        Decimal("-2.5"),
        dt.datetime(1999, 12, 31, 23, 59, 59, 999999),
        dt.datetime(2000, 1, 1, tzinfo=UTC),
        dt.date(2020, 12, 31),
        False,
        '[1, "x", true, null]',
    ),
    (
        3,
        "",
        0,
        0.5,
        Decimal("1234.5678"),
        dt.datetime(2021, 1, 1),
        dt.datetime(2021, 6, 15, 12, 0, tzinfo=UTC),
        dt.date(2024, 2, 29),
        None,
        '"str"',
    ),
    (4, None, None, None, None, None, None, None, None, None),
    (
        5,
        "a,b,,c",
        10,
        1.5e300,
        Decimal("99999.9999999999"),
        dt.datetime(2016, 1, 3, 12, 0),
        dt.datetime(2016, 1, 1, 23, 59, 59, 123456, tzinfo=UTC),
        dt.date(2016, 1, 1),
        True,
        '{"a": 1, "k": 2}',
    ),
    (
        6,
        "ñandú é",
        1,
        3.5,
        Decimal("-0.5"),
        dt.datetime(1901, 7, 4, 6, 7, 8),
        dt.datetime(2023, 10, 29, 1, 30, tzinfo=UTC),
        dt.date(1999, 1, 1),
        False,
        "{}",
    ),
]

EXPRESSIONS = [
    # text
    "substring(s, 2, 3)",
    "substring(s from 0 for 3)",
    "substring(s, n)",
    "substr(s, -1, n + 2)",
    "substring(s, 1, n)",  # a negative length is an error
    "trim(s)",
    "ltrim(s)",
    "rtrim(s)",
    "btrim(s, ' ab')",
    "trim(both 'a' from s)",
    "trim(leading ' ' from s)",
    "rtrim(s, '')",
    "replace(s, 'l', 'LL')",
    "replace(s, '', 'x')",
    # (not x or d: Spark prints 1.5e+300 as 1.5E300; numeric is stored with 10 places)
    "concat(s, n, NULL, b, dd)",
    "concat_ws('|', s, n, b)",
    "concat_ws(s, 'a', 'b')",
    "s || n",
    "position('b' in s)",
    "strpos(s, '')",
    "strpos(s, 'o w')",
    "left(s, n)",
    "right(s, n)",
    "left(s, -1)",
    "right(s, -2)",
    "lpad(s, n + 5, 'xy')",
    "rpad(s, n + 5)",
    "lpad(s, n)",
    "rpad(s, 8, '')",
    "split_part(s, ',', n)",  # position 0 is an error
    "split_part(s, ',', 2)",
    "split_part(s, ',', -2)",
    "split_part(s, '', 1)",
    "starts_with(s, 'a')",
    "starts_with(s, '')",
    "reverse(s)",
    "repeat(s, n)",
    "md5(s)",
    "octet_length(s)",
    "octet_length(s::char(20))",  # char(n) counts its padding
    "bit_length(s)",
    "length(s)",
    "s LIKE '%b%'",
    "s ILIKE 'A%'",
    # math
    "round(x)",
    "round(d)",
    "round(n)",
    "round(d, 2)",
    "round(d, -2)",
    "round(n, 1)",
    "ceil(x)",
    "ceiling(d)",
    "floor(x)",
    "floor(d)",
    "floor(n)",
    "sqrt(x)",  # negative: an error
    "sqrt(abs(x))",
    "sqrt(abs(d))",
    "sqrt(n)",
    "power(x, 2)",  # 1.5e300 ^ 2 overflows
    "power(n, 2)",
    "power(d, 2)",
    "power(x, 0.5)",  # negative base, fractional power: an error
    "power(n, -1)",  # zero to a negative power: an error
    "power(x, -200)",  # 1.5e300 ^ -200 underflows: an error
    "mod(n, 3)",
    "abs(d)",
    "greatest(n, 2, -5)",
    "least(x, 1)",
    # more math (expr/functions/math.py; UDFs on Spark)
    "ln(x)",  # negative: an error
    "ln(n)",  # zero: another error
    "ln(abs(d) + 1)",
    "exp(x)",  # 1.5e300 overflows
    "exp(n)",
    "exp(d / 10000)",
    "log(abs(x) + 1)",
    "log(abs(d) + 1)",
    "log(2, abs(d) + 1)",
    "log(n)",
    "trunc(x)",
    "trunc(d)",
    "trunc(d, 2)",
    "trunc(d, -1)",
    "trunc(n)",
    "sign(x)",
    "sign(d)",
    "sign(n)",
    "pi()",
    "gcd(n, 6)",
    "gcd(n, -4)",  # never negative
    "gcd(0, 0)",
    "gcd(n, 0)",
    "gcd(-2147483648, n)",  # gcd(-2^31, 0) = 2^31: integer out of range
    "gcd(id * 3000000000, 6000000000)",  # the bigint overload
    "pi() * n",
    "div(d, 2)",
    "div(n, 3)",
    "div(d, n)",  # n = 0: division by zero
    # more text: regular expressions, initcap, ascii, chr, translate
    "regexp_replace(s, 'l+', 'L')",
    "regexp_replace(s, '([a-c])', '<\\1>', 'g')",
    "regexp_replace(s, '[[:space:]]+', '_', 'g')",
    "regexp_replace(s, 'A', '\\&\\&', 'gi')",
    "regexp_replace(s, '^(\\w)(\\w*)', '\\2\\1')",
    "regexp_replace(s, '.', '!', 'q')",  # q: the pattern is literal
    "s ~ 'l{2}'",
    "s ~* '^A'",
    "s !~ ','",
    "s !~* 'B,'",
    "s ~ '\\mw'",
    "initcap(s)",
    "initcap('hello-wORLD 2nd_x')",
    "ascii(s)",
    "chr(n + 64)",
    "chr(n)",  # 0 and negative: errors
    "translate(s, 'lo ', 'L0')",
    # string_to_array (arrays.py; PostgreSQL gives a list, Tidemark a tuple)
    "string_to_array(s, ',')",
    "string_to_array(s, ',', '')",  # '' elements become NULL
    "string_to_array(s, ' ', 'hello')",
    "string_to_array(s, '')",  # the whole text, one element
    "string_to_array(s, NULL)",  # one element per character
    "string_to_array(s, NULL, 'b')",
    "string_to_array(s, ',', NULL)",
    "string_to_array(s, 'l')",
    # one-dimensional arrays' dimensions (arrays.py), casts element by element
    # and from text per row, subscripts beyond the dimensions (NULL)
    "array_ndims(string_to_array(s, ','))",
    "array_dims(string_to_array(s, ','))",
    "array_lower(string_to_array(s, ','), n)",
    "array_upper(string_to_array(s, ','), 1)",
    "('{' || n || ',' || id || ',NULL}')::bigint[]",
    "ARRAY[n, id]::numeric[]",
    "ARRAY[d]::text[]",
    "(string_to_array(s, ','))[1][n]",
    "string_to_array(s, ',') || s",
    "n || ARRAY[id, NULL]",
    "array_cat(string_to_array(s, 'l'), string_to_array(s, ','))",
    # date/time
    "to_timestamp(x)",
    "to_timestamp(x * 1e9)",
    "date_trunc('day', ts)",
    "date_trunc('week', ts)",
    "date_trunc('month', tz)",
    "date_trunc('quarter', ts)",
    "date_trunc('year', tz)",
    # timestamp(p): rounded to p fractional digits, half away from 2000-01-01
    "ts::timestamp(3)",
    "ts::timestamp(0)",
    "tz::timestamptz(1)",
    "d::text",  # numeric text without trailing zeros (the rows' values have none)
    "date_trunc('hour', ts)",
    "date_trunc('minute', ts)",
    "date_trunc('second', ts)",
    "date_trunc('milliseconds', tz)",
    "date_trunc('day', dd)",
    "extract(year from ts)",
    "extract(month from tz)",
    "extract(day from dd)",
    "extract(hour from ts)",
    "extract(minute from tz)",
    "extract(second from ts)",
    "extract(milliseconds from tz)",
    "extract(microseconds from ts)",
    "extract(epoch from ts)",
    "extract(epoch from tz)",
    "extract(epoch from dd)",
    "extract(dow from dd)",
    "extract(isodow from ts)",
    "extract(doy from tz)",
    "extract(week from dd)",
    "extract(isoyear from dd)",
    "extract(quarter from ts)",
    "extract(decade from ts)",
    "extract(century from ts)",
    "extract(millennium from dd)",
    "date_part('year', ts)",
    "date_part('second', tz)",
    "date_part('epoch', ts)",
    "date_part('dow', dd)",
    "ts + interval '1 day'",
    "ts - interval '2 hours 30 minutes'",
    "interval '1' month + ts",
    "dd + interval '1 month -2 days 01:00:00'",
    "tz + interval '1.5 days'",
    "tz - interval '1 year 2 months 10 seconds'",
    "date_trunc('month', ts) + interval '1 month' - interval '1 day'",  # the month's last day
    "ts + interval '0.001 seconds'",
    "dd + n",
    "n + dd",
    "dd - n",
    "dd - dd",
    "dd - date '2020-01-01'",
    "dd - abs(n - 3) * 3000000",  # before 4713 BC: date out of range
    "make_date(2020, n, 1)",  # month 0, -2, 10: out of range
    "make_date(2024, 2, 29)",
    "make_timestamp(2020, 1, n + 1, 12, 30, x)",  # bad days and seconds: out of range
    "make_timestamp(2021, 12, 31, 24, 0, 0)",
    "tz AT TIME ZONE 'America/New_York'",
    "ts AT TIME ZONE 'Asia/Kolkata'",
    "tz AT TIME ZONE 'europe/berlin'",
    "dd AT TIME ZONE 'UTC'",
    "(ts AT TIME ZONE 'Europe/Berlin') AT TIME ZONE 'Europe/Berlin'",
    "timestamp '2023-10-29 02:30' AT TIME ZONE 'Europe/Berlin'",  # happens twice
    "timestamp '2023-03-26 02:30' AT TIME ZONE 'Europe/Berlin'",  # never happens
    # to_char: PostgreSQL's template patterns (a UDF on Spark)
    "to_char(ts, 'YYYY-MM-DD HH24:MI:SS.MS US')",
    "to_char(ts, 'YYY YY Y DDD D Q WW W J CC SSSS SSSSS B.C. b.c.')",
    "to_char(ts, 'HH HH12 AM PM am pm A.M. P.M. a.m. p.m.')",
    "to_char(ts, 'Mon MON mon|Month|MONTH|month|')",
    "to_char(ts, 'Dy DY dy|Day|DAY|day|')",
    "to_char(ts, 'FMMonth FMDay FMDD FMMM FMHH12 FMDDD FMYYYY FMMS FMUS|FMmonth.')",
    "to_char(ts, 'yyyy-mm-dd hh24:mi:ss Y,YYY AD bc A.D.')",
    "to_char(tz, 'YYYY-MM-DD HH24:MI:SS TZ tz')",
    "to_char(ts, 'HH24 TZ|')",  # no zone for a timestamp
    "to_char(dd, 'Day, DD Month YYYY TZ')",
    'to_char(ts, \'"Year" YYYY "quoted \\"DD\\"" DD \\"MM\\" \\HH x\')',
    "to_char(ts, 'FM')",
    "to_char(ts, '')",
    "to_char(ts, 'Ééé! <HH24> % _')",
    # jsonb (a UDF on Spark)
    "j -> 'a'",
    "j ->> 'k'",
    "j -> 1",
    "j ->> -2",
    "j -> 'a' -> 'b' ->> 2",
    "j #> '{a,b,2}'",
    "j #>> '{a,b,0}'",
    "j #> '{}'",
    'j @> \'{"k": "v"}\'',
    'j @> \'{"a": {"b": [2]}}\'',
    "j @> '[true]'",
    "j @> '\"x\"'",
    "j @> '{}'",
]

# PostgreSQL's names where they differ from Tidemark's ScalarType values.
PG_TYPE_NAMES = {"timestamp without time zone": "timestamp"}


@pytest.fixture(scope="module")
def pg(postgres_url: str) -> Any:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute("DROP TABLE IF EXISTS f")
        conn.execute(f"CREATE TABLE f ({PG_COLUMNS})")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO f VALUES ({', '.join(['%s'] * len(DESC.names))})", ROWS)
        yield conn


def plan_scalar(sql: str) -> tuple[ScalarExpr, tuple[ColumnType, ...]]:
    catalog = InMemoryCatalog()
    catalog.add_table("f", DESC)
    plan = plan_statement(f"SELECT {sql} FROM f", catalog)
    assert isinstance(plan, SelectPlan)
    node = plan.expr
    while not isinstance(node, Map):
        node = node.input  # type: ignore[attr-defined]
    return node.scalars[-1], node.input.desc.types


def pg_result(conn: Any, sql: str, row_id: int) -> tuple[str, Any]:
    """('ok', value) or ('error', sqlstate); jsonb as its text (ours is)."""
    escaped = sql.replace("%", "%%")
    try:
        query = f"SELECT pg_typeof({escaped})::text FROM f LIMIT 1"
        (pg_type,) = conn.execute(query).fetchone()
        if pg_type == "jsonb":
            escaped = f"({escaped})::text"
        (value,) = conn.execute(f"SELECT {escaped} FROM f WHERE id = %s", (row_id,)).fetchone()
        return "ok", value
    except psycopg.Error as error:
        return "error", error.sqlstate


def same(ours: Any, theirs: Any) -> bool:
    if ours is None or theirs is None:
        return ours is None and theirs is None
    if isinstance(theirs, list):  # an array: a tuple here
        return isinstance(ours, tuple | list) and list(ours) == theirs
    if isinstance(theirs, float) or isinstance(ours, float):
        if math.isnan(theirs) or math.isnan(ours):
            return math.isnan(theirs) and math.isnan(ours)
        return math.isclose(float(ours), float(theirs), rel_tol=1e-12, abs_tol=1e-300)
    if isinstance(theirs, Decimal):
        # numeric keeps 10 places here; sqrt/power of numeric go through a double.
        diff = abs(Decimal(ours) - theirs)
        return diff <= Decimal("1e-10") or diff <= abs(theirs) * Decimal("1e-14")
    if (
        isinstance(ours, dt.datetime)
        and isinstance(theirs, dt.datetime)
        and (ours.tzinfo is None) != (theirs.tzinfo is None)
    ):
        return False
    return bool(ours == theirs)


@pytest.mark.parametrize("sql", EXPRESSIONS)
def test_local_engine_matches_postgres(pg: Any, sql: str) -> None:
    scalar, types = plan_scalar(sql)
    (pg_type,) = pg.execute(f"SELECT pg_typeof({sql})::text FROM f LIMIT 1").fetchone()
    assert scalar.typ(types).scalar_type.value == PG_TYPE_NAMES.get(pg_type, pg_type)
    for row in ROWS:
        expected = pg_result(pg, sql, row[0])
        try:
            got: tuple[str, Any] = ("ok", eval_scalar(scalar, row, types))
        except EvalError as error:
            got = ("error", error.code)
        assert got[0] == expected[0], (row[0], got, expected)
        if got[0] == "error":
            assert got[1] == expected[1], (row[0], got, expected)
        else:
            assert same(got[1], expected[1]), (row[0], got, expected)


def _spark_value(value: Any, column: ColumnType) -> Any:
    if isinstance(value, dt.datetime) and column.scalar_type.value.endswith("time zone"):
        return value.replace(tzinfo=UTC)  # collect() gives the session's (UTC) local time
    return value


@pytest.mark.spark
@pytest.mark.parametrize("sql", EXPRESSIONS)
def test_spark_engine_matches_postgres(pg: Any, spark: Any, sql: str) -> None:
    from pyspark.errors import PySparkException

    from coordinator_lib.compute.scalar import to_spark
    from coordinator_lib.persist.spark_batches import spark_schema

    scalar, types = plan_scalar(sql)
    frame = spark.createDataFrame(ROWS, spark_schema(DESC, with_time_diff=False))
    frame = frame.toDF(*[f"c{i}" for i in range(len(DESC.names))])
    expected = {row[0]: pg_result(pg, sql, row[0]) for row in ROWS}
    column = frame.select(frame["c0"], to_spark(scalar, types).alias("out"))
    errors = {result[1] for result in expected.values() if result[0] == "error"}
    if errors:
        with pytest.raises(PySparkException) as info:
            column.collect()
        assert any(code in str(info.value) for code in errors), str(info.value)[:500]
        return
    out_type = scalar.typ(types)
    got = {row_id: _spark_value(value, out_type) for row_id, value in column.collect()}
    for row_id, (_, value) in expected.items():
        assert same(got[row_id], value), (row_id, got[row_id], value)


# --- aggregates, end to end (the adapter, in-process peeks and a view) -------------

AGGREGATE_QUERIES = [
    "SELECT n > 0 AS g, string_agg(s, ',') FROM f GROUP BY 1",
    "SELECT b, string_agg(s, '; ' ORDER BY s DESC) FROM f GROUP BY b",
    "SELECT string_agg(DISTINCT split_part(s, ',', 1), '|' ORDER BY split_part(s, ',', 1)) FROM f",
    "SELECT string_agg(s, NULL) FROM f WHERE id < 3",
    "SELECT string_agg(s, ',') FILTER (WHERE n > 0), count(DISTINCT b) FROM f",
    "SELECT string_agg(s, ',') FROM f WHERE id > 100",
    "SELECT n % 2 AS g, bool_and(b), bool_or(b), bool_and(x > 0) FROM f GROUP BY 1",
    "SELECT bool_and(b) FILTER (WHERE id < 3), bool_or(DISTINCT b) FROM f",
    "SELECT bool_and(b), bool_or(b) FROM f WHERE id = 4",
    # array_agg: arrays come back as lists from PostgreSQL, tuples from Tidemark
    "SELECT b, array_agg(s ORDER BY id), array_agg(d ORDER BY id DESC) FROM f GROUP BY b",
    "SELECT array_agg(s ORDER BY id)::text, array_agg(n ORDER BY n DESC NULLS LAST, id)::text"
    " FROM f",
    "SELECT array_agg(ts ORDER BY id)::text, array_agg(b ORDER BY id)::text,"
    " array_agg(dd ORDER BY id)::text, array_agg(j ORDER BY id)::text FROM f",
    "SELECT array_agg(x ORDER BY id) FILTER (WHERE n > 0),"
    " array_agg(id ORDER BY s NULLS FIRST, id), array_agg(id) IS NULL FROM f",
    "SELECT array_agg(id ORDER BY id) = array_agg(id ORDER BY id DESC) FROM f WHERE id = 1",
    "SELECT array_agg(s ORDER BY id) FROM f WHERE id > 100",
]


@pytest.fixture(scope="module")
def tidemark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from coordinator_lib.adapter.client import serve
    from tests.adapter.conftest import fast_config, run_on

    handle = serve(fast_config(tmp_path_factory.mktemp("functions") / "env"), None)
    session = handle.client.startup("materialize", "materialize")
    run = run_on(session)
    run(f"CREATE TABLE f ({PG_COLUMNS})")
    for row in ROWS:
        values = ", ".join("NULL" if v is None else f"'{v}'" for v in row)
        run(f"INSERT INTO f VALUES ({values})")
    try:
        yield run
    finally:
        session.terminate()
        handle.shutdown()


def _sorted_rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda r: tuple((v is None, str(v)) for v in r))


@pytest.mark.parametrize("sql", AGGREGATE_QUERIES)
def test_aggregates_match_postgres(pg: Any, tidemark: Any, sql: str) -> None:
    # Tidemark orders string_agg's values; PostgreSQL only when asked to.
    pg_sql = (
        sql
        if "ORDER BY" in sql
        else sql.replace("string_agg(s, ','", "string_agg(s, ',' ORDER BY s")
    )
    pg_sql = pg_sql.replace("string_agg(s, NULL)", "string_agg(s, NULL ORDER BY s)")
    expected = _sorted_rows(
        [tuple(tuple(v) if isinstance(v, list) else v for v in r) for r in pg.execute(pg_sql)]
    )
    assert _sorted_rows(tidemark(sql)) == expected


def test_new_aggregates_recompute_touched_groups(tidemark: Any) -> None:
    """string_agg and bool_and/bool_or (min/max underneath) are not
    accumulable: EXPLAIN says their Reduce recomputes the touched groups."""
    (plan,), *_ = tidemark(
        "EXPLAIN SELECT b, string_agg(s, ','), bool_and(n > 0) FROM f GROUP BY b"
    )
    reduce_line = next(line for line in plan.splitlines() if "Reduce" in line)
    assert "string_agg(" in reduce_line and "min(" in reduce_line
    assert reduce_line.endswith("[incremental: touched keys]")


# --- random arguments (hypothesis): the in-process engine against PostgreSQL ---------

TEXT_CALLS = [
    "substring({s}, {i}, {j})",
    "substring({s}, {i})",
    "left({s}, {i})",
    "right({s}, {i})",
    "lpad({s}, {i}, {t})",
    "rpad({s}, {i}, {t})",
    "split_part({s}, {t}, {i})",
    "strpos({s}, {t})",
    "replace({s}, {t}, 'Z')",
    "btrim({s}, {t})",
    "ltrim({s}, {t})",
    "rtrim({s}, {t})",
    "repeat({t}, {i})",
    "starts_with({s}, {t})",
    "concat_ws({t}, {s}, {i}, NULL)",
    "regexp_replace({s}, {t}, 'Z')",
    "regexp_replace({s}, {t}, '<\\&>', 'g')",
    "{s} ~ {t}",
    "translate({s}, {t}, 'xy')",
    "initcap({s})",
    "ascii({s})",
]
SHORT_TEXT = st.text(alphabet="ab,-é ", max_size=6)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    call=st.sampled_from(TEXT_CALLS),
    s=SHORT_TEXT,
    t=SHORT_TEXT,
    i=st.integers(-4, 8),
    j=st.integers(-2, 8),
)
def test_text_functions_on_random_arguments(
    pg: Any, call: str, s: str, t: str, i: int, j: int
) -> None:
    def quote(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    sql = call.format(s=quote(s), t=quote(t), i=i, j=j)
    expected = pg_result(pg, sql, 1)
    scalar, types = plan_scalar(sql)
    try:
        got: tuple[str, Any] = ("ok", eval_scalar(scalar, ROWS[0], types))
    except EvalError as error:
        got = ("error", error.code)
    assert got == expected, sql


MATH_CALLS = [
    "round({d}::numeric)",
    "round({d}::numeric, {k})",
    "round({x}::float8)",
    "ceil({d}::numeric)",
    "floor({x}::float8)",
    "ceil({x}::float8)",
    "sqrt({x}::float8)",
    "power({x}::float8, {k})",
    "power({d}::numeric, {k})",
    "mod({i}, {k})",
    "gcd({i}, {k})",
    "gcd({i} * 6, -4 * {i})",
]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    call=st.sampled_from(MATH_CALLS),
    d=st.decimals(-(10**6), 10**6, places=4, allow_nan=False, allow_infinity=False),
    x=st.floats(-1e6, 1e6, allow_nan=False) | st.sampled_from([0.5, 1.5, 2.5, -2.5, -0.5]),
    k=st.integers(-3, 3),
    i=st.integers(-20, 20),
)
def test_math_functions_on_random_arguments(
    pg: Any, call: str, d: Decimal, x: float, k: int, i: int
) -> None:
    sql = call.format(d=f"'{d}'", x=f"'{x!r}'", k=k, i=i)
    expected = pg_result(pg, sql, 1)
    scalar, types = plan_scalar(sql)
    try:
        got: tuple[str, Any] = ("ok", eval_scalar(scalar, ROWS[0], types))
    except EvalError as error:
        got = ("error", error.code)
    assert got[0] == expected[0], (sql, got, expected)
    assert same(got[1], expected[1]) if got[0] == "ok" else got[1] == expected[1], (
        sql,
        got,
        expected,
    )


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ts=st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2100, 12, 31)),
    unit=st.sampled_from(["microseconds", "milliseconds", "second", "minute", "hour", "day"])
    | st.sampled_from(["week", "month", "quarter", "year"]),
    field=st.sampled_from(["year", "month", "day", "hour", "minute", "second", "milliseconds"])
    | st.sampled_from(["dow", "isodow", "doy", "week", "isoyear", "quarter", "epoch"]),
    months=st.integers(-30, 30),
    days=st.integers(-400, 400),
    tz=st.booleans(),
)
def test_date_functions_on_random_arguments(
    pg: Any, ts: dt.datetime, unit: str, field: str, months: int, days: int, tz: bool
) -> None:
    value = (
        f"'{ts.isoformat(sep=' ')}{'+00' if tz else ''}'::{'timestamptz' if tz else 'timestamp'}"
    )
    for sql in (
        f"date_trunc('{unit}', {value})",
        f"extract({field} from {value})",
        f"date_part('{field}', {value})",
        f"{value} + interval '{months} months {days} days 5 seconds'",
    ):
        expected = pg_result(pg, sql, 1)
        scalar, types = plan_scalar(sql)
        got = ("ok", eval_scalar(scalar, ROWS[0], types))
        assert got[0] == expected[0] and same(got[1], expected[1]), (sql, got, expected)


def test_unknown_time_zone_fails_as_in_postgres(pg: Any) -> None:
    from coordinator_lib.sql.errors import InvalidParameter

    sql = "tz AT TIME ZONE 'Mars/Olympus'"
    with pytest.raises(InvalidParameter) as ours:
        plan_scalar(sql)
    with pytest.raises(psycopg.Error) as theirs:
        pg.execute(f"SELECT {sql} FROM f")
    assert ours.value.code == theirs.value.sqlstate == "22023"
    assert 'time zone "Mars/Olympus" not recognized' in str(ours.value)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("to_char(d, '999.99')", "to_char(numeric, text) is not supported"),
        ("to_char(n, '999')", "to_char(integer, text) is not supported"),
        ("to_char(ts, s)", "the template must be a constant"),
        ("to_char(ts, 'IYYY-IW')", 'template pattern "IYYY" is not supported'),
        ("to_char(ts, 'DDth')", 'template pattern "th" is not supported'),
    ],
)
def test_to_char_refusals(pg: Any, sql: str, message: str) -> None:
    """What to_char leaves out is 0A000 (PostgreSQL runs all of these)."""
    from coordinator_lib.sql.errors import UnsupportedFeature

    with pytest.raises(UnsupportedFeature) as ours:
        plan_scalar(sql)
    assert ours.value.code == "0A000" and message in str(ours.value)
    assert pg_result(pg, sql, 1)[0] == "ok"


def test_regexp_flags_fail_as_in_postgres(pg: Any) -> None:
    """An unknown flag is PostgreSQL's 22023 here too; the flags PostgreSQL
    has and Tidemark does not run (x: expanded syntax, ...) are 0A000."""
    for sql, code in (
        ("regexp_replace(s, 'b', 'x', 'z')", "22023"),
        ("regexp_replace(s, 'b', 'x', 'gx')", "0A000"),
    ):
        scalar, types = plan_scalar(sql)
        with pytest.raises(EvalError) as info:
            eval_scalar(scalar, ROWS[0], types)
        assert info.value.code == code, sql
        if code == "22023":
            with pytest.raises(psycopg.Error) as theirs:
                pg.execute(f"SELECT {sql} FROM f")
            assert theirs.value.sqlstate == code
