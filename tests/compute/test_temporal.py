"""Temporal filters (mz_now() in a view's WHERE / HAVING) against DuckDB.

Invariant 6 for views whose contents change as time passes: at every
readable time t, a view equals its query evaluated by DuckDB over the
inputs' snapshot at t with mz_now() replaced by t (as a number of
milliseconds, or the timestamp that many milliseconds after the epoch).

The session's clock is logical (tests/compute/sql_session.py: every write
is one millisecond), and `advance` moves every table's upper with no write,
so a view must also change at the times its rows' bounds name when no input
changed (the updates past a step's upper are re-derived by a later step from
the input's old contents: compute/temporal.py). Timestamps near the epoch
with microseconds check the rounding of a bound to milliseconds.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from coordinator_lib.compute.temporal import bound_limits, exact_ms
from coordinator_lib.expr.scalar import COMPARISON_OPERATORS, BinaryFunc
from coordinator_lib.expr.temporal import mz_now_value
from coordinator_lib.repr import GlobalId
from coordinator_lib.repr.relation import ScalarType
from tests.compute.sql_session import SqlSession

TABLE = "CREATE TABLE ev (id integer, ts timestamp, lo bigint, hi bigint, amt numeric)"
DUCK_TABLE = "CREATE TABLE ev (id INTEGER, ts TIMESTAMP, lo BIGINT, hi BIGINT, amt DECIMAL(38, 10))"

# name -> (our SQL, DuckDB's with {ms} / {ts} for the time as a number / timestamp)
QUERIES: dict[str, tuple[str, str]] = {
    "window": (
        "SELECT id, lo, hi FROM ev WHERE mz_now() >= lo AND mz_now() < hi",
        "SELECT id, lo, hi FROM ev WHERE {ms} >= lo AND {ms} < hi",
    ),
    "recent_ts": (
        "SELECT id, ts FROM ev WHERE mz_now() <= ts + INTERVAL '5 milliseconds'",
        "SELECT id, ts FROM ev WHERE {ts} <= ts + INTERVAL 5 MILLISECOND",
    ),
    "ts_after": (
        "SELECT id FROM ev WHERE ts < mz_now() AND mz_now() <= ts + INTERVAL '0.0075 seconds'"
        " AND id > 0",
        "SELECT id FROM ev WHERE ts < {ts} AND {ts} <= ts + INTERVAL 7500 MICROSECOND AND id > 0",
    ),
    "numeric": (
        "SELECT id, amt FROM ev WHERE amt + 3 > mz_now() AND mz_now() >= amt",
        "SELECT id, amt FROM ev WHERE amt + 3 > {ms} AND {ms} >= amt",
    ),
    "instant": (
        "SELECT id FROM ev WHERE mz_now() = lo",
        "SELECT id FROM ev WHERE {ms} = lo",
    ),
    "between_grouped": (
        "SELECT id, count(*) AS n, max(ts) AS last FROM ev"
        " WHERE mz_now() BETWEEN lo AND hi GROUP BY id",
        "SELECT id, count(*), max(ts) FROM ev WHERE {ms} BETWEEN lo AND hi GROUP BY id",
    ),
    "having": (
        "SELECT id, max(hi) AS top FROM ev GROUP BY id HAVING mz_now() < max(hi)",
        "SELECT id, max(hi) FROM ev GROUP BY id HAVING {ms} < max(hi)",
    ),
    "joined": (
        "SELECT a.id, b.lo FROM ev AS a JOIN ev AS b ON a.id = b.id"
        " WHERE mz_now() > a.lo AND b.hi + 2 >= mz_now()",
        "SELECT a.id, b.lo FROM ev AS a JOIN ev AS b ON a.id = b.id"
        " WHERE {ms} > a.lo AND b.hi + 2 >= {ms}",
    ),
}

EPOCH = dt.datetime(1970, 1, 1)
IDS = st.one_of(st.none(), st.integers(0, 3))
MS = st.one_of(st.none(), st.integers(0, 25))
MICROS = st.one_of(st.none(), st.integers(0, 25_000))
AMOUNTS = st.one_of(st.none(), st.integers(0, 100).map(lambda q: decimal.Decimal(q) / 4))


def _lit(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    return str(value)


row = st.tuples(
    IDS,
    MICROS.map(lambda us: None if us is None else EPOCH + dt.timedelta(microseconds=us)),
    MS,
    MS,
    AMOUNTS,
)
insert = st.lists(row, min_size=1, max_size=3).map(
    lambda rows: (
        "INSERT INTO ev VALUES "
        + ", ".join("(" + ", ".join(_lit(v) for v in r) + ")" for r in rows)
    )
)
change = st.one_of(
    insert,
    insert,
    st.builds(lambda i: f"DELETE FROM ev WHERE id = {i}", st.integers(0, 3)),
    st.builds(
        lambda d, i: f"UPDATE ev SET hi = hi + {d} WHERE id = {i}",
        st.integers(-3, 3),
        st.integers(0, 3),
    ),
    st.builds(lambda d: f"UPDATE ev SET lo = lo + {d}", st.integers(-3, 3)),
    # no write: the tables' uppers move by 1-4 ms (a view changes by time alone)
    st.integers(1, 4),
)
rounds_strategy = st.lists(st.lists(change, min_size=1, max_size=4), min_size=2, max_size=5)


def advance(session: SqlSession, ms: int) -> None:
    """Every table's upper moves `ms` ahead, nothing written."""
    session.now += ms
    session.storage.append([(table, [], session.now + 1) for table in session.tables])


def normalize(value: Any) -> Any:
    if isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool):
        return decimal.Decimal(value).quantize(decimal.Decimal("0.0001"))
    return value


def duck_answer(con: Any, sql: str, t: int) -> Counter:
    ts = f"make_timestamp({t * 1000})"
    rows = con.execute(sql.format(ms=t, ts=ts)).fetchall()
    return Counter(tuple(normalize(v) for v in r) for r in rows)


def check_views(
    session: SqlSession, table: GlobalId, views: dict[str, GlobalId], start: int
) -> int:
    """Every view at every time from `start` to its upper (earlier times were
    checked by an earlier round and are below the upper: they cannot change)."""
    checked = 0
    upper = min(u for u in (session.upper(id) for id in views.values()) if u is not None)
    con = duckdb.connect()
    con.execute(DUCK_TABLE)
    for t in range(start, upper):
        con.execute("DELETE FROM ev")
        rows = session.table_rows(table, t)
        if rows:
            con.executemany("INSERT INTO ev VALUES (?, ?, ?, ?, ?)", rows)
        for name, id in views.items():
            raw = session.snapshot(id, t)
            assert all(diff > 0 for _, diff in raw), (name, t, raw)
            got: Counter = Counter()
            for r, diff in raw:
                got[tuple(normalize(v) for v in r)] += diff
            want = duck_answer(con, QUERIES[name][1], t)
            assert got == want, f"view {name} at {t}: ours {dict(got)} != duckdb {dict(want)}"
            checked += 1
    con.close()
    return checked


def run(session: SqlSession, initial: list[str], rounds: list[list[Any]], names: list[str]) -> int:
    session.execute(TABLE)
    (table,) = session.tables
    for sql in initial:
        session.execute(sql)
    for name in names:
        session.execute(f"CREATE MATERIALIZED VIEW tf_{name} AS {QUERIES[name][0]}")
    views = {n.removeprefix("tf_"): id for id, n in session.views.items()}
    checked, start = 0, session.now  # the views' as_of
    for round_ in rounds:
        for action in round_:
            if isinstance(action, int):
                advance(session, action)
            else:
                session.execute(action)
        session.step()
        checked += check_views(session, table, views, start)
        start = session.now + 1
    return checked


SETTINGS: dict[str, Any] = {
    "deadline": None,
    "phases": [Phase.explicit, Phase.reuse, Phase.generate],
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
}
EXAMPLE_INITIAL = [
    "INSERT INTO ev VALUES (1, TIMESTAMP '1970-01-01 00:00:00.002500', 2, 9, 2.25),"
    " (2, TIMESTAMP '1970-01-01 00:00:00.004', 0, 3, 1.5)",
    "INSERT INTO ev VALUES (1, NULL, 5, 6, NULL), (3, TIMESTAMP '1970-01-01 00:00:00.000001',"
    " NULL, 20, 7.75)",
]
EXAMPLE_ROUNDS: list[list[Any]] = [
    [3, "UPDATE ev SET hi = hi + 2 WHERE id = 1"],
    [4, 4],  # nothing written: rows come and go by their bounds alone
    ["DELETE FROM ev WHERE id = 3", 2],
]


@settings(max_examples=10, **SETTINGS)
@given(
    initial=st.lists(insert, min_size=1, max_size=3),
    rounds=rounds_strategy,
)
@example(initial=EXAMPLE_INITIAL, rounds=EXAMPLE_ROUNDS)
def test_temporal_views_match_duckdb_at_every_time_in_process(
    tmp_path_factory: pytest.TempPathFactory, initial: list[str], rounds: list[list[Any]]
) -> None:
    """Every temporal view stepped in-process (no Spark session is started)."""
    session = SqlSession(None, Path(tmp_path_factory.mktemp("tf")), engine="local")
    try:
        assert run(session, initial, rounds, list(QUERIES)) > 0
    finally:
        session.close()


def test_a_view_changes_when_only_time_passes(tmp_path: Path) -> None:
    """A row valid in [5, 9) appears at 5 and is retracted at 9, though the
    table was written only before 5: each step reaches its times."""
    session = SqlSession(None, tmp_path, engine="local")
    try:
        session.execute(TABLE)
        session.execute(f"CREATE MATERIALIZED VIEW w AS {QUERIES['window'][0]}")
        (view,) = session.views
        session.execute("INSERT INTO ev VALUES (1, NULL, 5, 9, NULL)")  # at time 1
        for _ in range(12):
            advance(session, 1)
            session.step()
        updates = session.storage.shard(view).updates_between(
            0, session.storage.shard(view).upper()
        )
        assert sorted((u.row, u.time, u.diff) for u in updates) == [
            ((1, 5, 9), 5, 1),
            ((1, 5, 9), 9, -1),
        ]
    finally:
        session.close()


@pytest.mark.spark
@settings(max_examples=1, **SETTINGS)
@given(initial=st.just(EXAMPLE_INITIAL), rounds=st.just(EXAMPLE_ROUNDS))
def test_temporal_views_match_duckdb_on_spark(
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
    initial: list[str],
    rounds: list[list[Any]],
) -> None:
    """The Spark rendering (timestamp bounds rounded to milliseconds, numeric
    ones) on a fixed workload: hydration, a step with writes, one without."""
    session = SqlSession(spark, Path(tmp_path_factory.mktemp("tf")), engine="spark")
    try:
        assert run(session, initial, rounds[:2], ["ts_after", "numeric"])
    finally:
        session.close()


TYPES = st.sampled_from(
    [ScalarType.BIGINT, ScalarType.NUMERIC, ScalarType.TIMESTAMP, ScalarType.TIMESTAMPTZ]
)


def _value(scalar_type: ScalarType, micros: int) -> Any:
    if scalar_type is ScalarType.BIGINT:
        return micros // 1000
    if scalar_type is ScalarType.NUMERIC:
        return decimal.Decimal(micros) / 1000
    base = EPOCH if scalar_type is ScalarType.TIMESTAMP else EPOCH.replace(tzinfo=dt.UTC)
    return base + dt.timedelta(microseconds=micros)


@settings(max_examples=300, deadline=None)
@given(
    scalar_type=TYPES,
    micros=st.integers(-5_000, 5_000),
    t=st.integers(-8, 8),
    func=st.sampled_from(
        [BinaryFunc.EQ, BinaryFunc.LT, BinaryFunc.LTE, BinaryFunc.GT, BinaryFunc.GTE]
    ),
)
def test_bound_limits_agree_with_comparing_mz_now(
    scalar_type: ScalarType, micros: int, t: int, func: BinaryFunc
) -> None:
    """A view's [L, U) for `mz_now() op e` holds t exactly when a query at t
    (mz_now() the value t in e's type, expr/temporal.py) finds the
    comparison true: the two paths round a bound to milliseconds alike."""
    value = _value(scalar_type, micros)
    lower, upper = bound_limits(func, exact_ms(value, scalar_type))
    inside = (lower is None or lower <= t) and (upper is None or t < upper)
    assert inside == COMPARISON_OPERATORS[func](mz_now_value(t, scalar_type), value)
    assert exact_ms(value, scalar_type) == (
        Fraction(micros // 1000) if scalar_type is ScalarType.BIGINT else Fraction(micros, 1000)
    )
