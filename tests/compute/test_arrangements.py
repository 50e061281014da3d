"""Arrangements (compute/arranged.py): an in-process step reads its delta and
the arranged state at the keys the delta touches, never an input's old
contents; the views stay exact against DuckDB across a restart between
steps (state reopened from disk), a step whose state write was lost
(SIGKILL between the output and the state), and two writers racing."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from coordinator_lib.compute import arranged, spark_spool
from coordinator_lib.compute.dataflow import StepResult
from coordinator_lib.compute.engine import (
    HYDRATE_SHARE,
    LOCAL_MAX_ROWS,
    Engine,
    Work,
    choose_engine,
)
from coordinator_lib.compute.spark_spool import spooled_rows
from coordinator_lib.persist.arrangement_store import ArrangementStore
from coordinator_lib.persist.scratch import SCRATCH
from coordinator_lib.repr import GlobalId
from tests.compute.sql_session import INSTANCE, SqlSession
from tests.compute.test_sql_differential import DUCK_TABLES, TABLES, as_multiset

# Views with a stateful operator each: a join under MAX and count(DISTINCT),
# MIN and string_agg per group, a top-1 per group (TopK), a Distinct, count,
# sum and max per group.
QUERIES = {
    "join_max": (
        "SELECT u.name, max(t.v) AS m, count(DISTINCT t.s) AS d"
        " FROM t JOIN u ON t.k = u.k GROUP BY u.name"
    ),
    "min_agg": "SELECT k, min(v) AS m, string_agg(s, ',' ORDER BY s) AS a FROM t GROUP BY k",
    "top1": "SELECT DISTINCT ON (k) k, v FROM t ORDER BY k, v DESC NULLS LAST",
    "distinct_ks": "SELECT DISTINCT k, s FROM t",
    # Accumulators (count, sum) and a MAX's values in order.
    "sum_max": "SELECT k, count(*) AS n, sum(v) AS s, max(v) AS m FROM t GROUP BY k",
}
DUCK = {
    "min_agg": "SELECT k, min(v) AS m, string_agg(s, ',' ORDER BY s) AS a FROM t GROUP BY k",
}
BASE_T, BASE_U, KEYS = 10_000, 1_000, 1_000


def _session(root: Path) -> SqlSession:
    return SqlSession(None, root, engine="local")


def _ids(session: SqlSession) -> dict[str, GlobalId]:
    return {name: id for id, name in session.tables.items()}


def _t_row(rng: random.Random) -> tuple[int, int, str]:
    return (rng.randrange(KEYS), rng.randrange(10**6), f"s{rng.randrange(50)}")


def _base(session: SqlSession, rng: random.Random) -> None:
    ids = _ids(session)
    t = [_t_row(rng) for _ in range(BASE_T)]
    u = [(k, k % 7, f"n{k}") for k in range(BASE_U)]
    session._write(ids["t"], Counter(t))
    session._write(ids["u"], Counter(u))


def _small_delta(session: SqlSession, rng: random.Random) -> None:
    ids = _ids(session)
    t_now = session.snapshot(ids["t"], session.now)
    changes: Counter = Counter()
    for _ in range(10):
        changes[_t_row(rng)] += 1
    for row, _ in rng.sample(t_now, 5):  # deletes too: MIN/MAX must look past them
        changes[row] -= 1
    session._write(ids["t"], changes)


def _check(
    session: SqlSession, views: dict[str, GlobalId], queries: dict[str, str] = QUERIES
) -> None:
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    for ddl in DUCK_TABLES:
        con.execute(ddl)
    for name, id in _ids(session).items():
        rows = session.table_rows(id, session.now)
        if not rows:
            continue
        columns = {f"c{i}": [row[i] for row in rows] for i in range(len(rows[0]))}
        con.register("loaded", pa.table(columns))
        con.execute(f"INSERT INTO {name} SELECT * FROM loaded")
        con.unregister("loaded")
    for name, id in views.items():
        want = as_multiset(
            [(tuple(r), 1) for r in con.execute(DUCK.get(name, queries[name])).fetchall()]
        )
        got = as_multiset(session.snapshot(id, session.now))
        assert got == want, name
    con.close()


def _last_step(session: SqlSession, id: GlobalId) -> StepResult:
    return session.compute.dataflow(INSTANCE, id).steps[-1]


def _setup(root: Path) -> tuple[SqlSession, dict[str, GlobalId], random.Random]:
    rng = random.Random(14)
    session = _session(root)
    for ddl in TABLES:
        session.execute(ddl)
    _base(session, rng)
    views = {}
    for name, sql in QUERIES.items():
        session.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    views = {name: id for id, name in session.views.items()}
    session.step()  # hydration: reads the snapshots once
    return session, views, rng


def test_a_small_step_over_a_large_base_reads_no_snapshot(tmp_path: Path) -> None:
    session, views, rng = _setup(tmp_path)
    # The inputs store more than the in-process limit, the delta far less:
    # the step runs in-process (this session has no Spark at all).
    session.compute.local_max_rows = BASE_T // 10
    try:
        for _ in range(2):
            _small_delta(session, rng)
            session.step()
            for name, id in views.items():
                assert _last_step(session, id).engine == "local"
                reads = _last_step(session, id).reads
                assert reads is not None and reads.delta <= 30, name
                # Not one row of an input's old contents: the touched keys'
                # rows come from the arrangements (a few per key here).
                assert reads.snapshot == 0, (name, reads)
                assert reads.state <= 1_000, (name, reads)
        _check(session, views)
    finally:
        session.close()


def test_a_small_step_over_large_inputs_runs_in_process_from_state() -> None:
    small, limit = 100, LOCAL_MAX_ROWS
    huge = HYDRATE_SHARE * limit + 1

    def engine(stored: int, delta: int, arranged: bool, spark_hydrates: bool = False) -> Engine:
        return choose_engine(
            Work.STEP,
            stored,
            limit,
            delta_rows=delta,
            arranged=arranged,
            spark_hydrates=spark_hydrates,
        )

    assert engine(huge, small, arranged=True) is Engine.LOCAL
    # Without state the step would first read the inputs whole in-process,
    # unless Spark builds the state (arranged.hydrate).
    assert engine(huge, small, arranged=False) is Engine.SPARK
    assert engine(huge, small, arranged=False, spark_hydrates=True) is Engine.LOCAL
    assert engine(huge, limit, arranged=False, spark_hydrates=True) is Engine.SPARK
    assert engine(limit + 1, small, arranged=False) is Engine.LOCAL  # built once, affordably
    assert engine(huge, limit, arranged=True) is Engine.SPARK  # a large delta


@pytest.mark.spark
def test_spark_builds_the_state_of_views_over_inputs_too_large_to_read_in_process(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Over inputs storing more than HYDRATE_SHARE * local_max_rows updates,
    a view's first step runs on Spark (which keeps no arrangements); the
    next small step has Spark compute each stateful operator's input and
    the in-process rules key it into the store, then runs in-process; the
    step after reads its delta and the state only. Exact against DuckDB."""
    rng = random.Random(14)
    session = SqlSession(spark, tmp_path, engine="spark")
    # A join under a Reduce (the Reduce's input, the join, is Spark's to
    # compute; a join's inputs are read from persist) and a TopK.
    queries = {name: QUERIES[name] for name in ("join_max", "top1")}
    try:
        for ddl in TABLES:
            session.execute(ddl)
        _base(session, rng)
        for name, sql in queries.items():
            session.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        views = {name: id for id, name in session.views.items()}
        session.step()  # the first step: every row is new, on Spark
        limit = BASE_T // 50  # stored 11,000 > HYDRATE_SHARE * 200; a delta < 20
        assert HYDRATE_SHARE * limit < BASE_T + BASE_U
        session.compute.local_max_rows = limit
        for name, id in views.items():
            assert _last_step(session, id).engine == "spark", name
            assert arranged.dataflow_state(*_state_of(session, id)).upper() is None
        _small_delta(session, rng)
        session.step()
        for name, id in views.items():
            result = _last_step(session, id)
            assert result.engine == "local", name  # on Spark before: no state
            assert result.hydrated_by == "spark", name
        # Spark's output for the hydration (Parquet in a scratch directory) is gone.
        scratch = session.storage.shard(views["top1"]).blob.root / SCRATCH
        assert [p.name for p in scratch.iterdir()] == []
        _check(session, views, queries)
        for _ in range(2):
            _small_delta(session, rng)
            session.step()
            for name, id in views.items():
                result = _last_step(session, id)
                assert (result.engine, result.hydrated_by) == ("local", None), name
                reads = result.reads
                assert reads is not None and reads.snapshot == 0, (name, reads)
                assert reads.delta <= 30 and reads.state <= 1_000, (name, reads)
            _check(session, views, queries)
    finally:
        session.close()


def _state_of(session: SqlSession, id: GlobalId) -> tuple[Any, Any]:
    """(output shard, plan) of the view `id`'s dataflow."""
    return session.storage.shard(id), session.compute.dataflow(INSTANCE, id).description.expr


def _reopen(old: SqlSession, root: Path, close_old: bool = True) -> SqlSession:
    """Another controller over the same data directory, as a restarted
    process (or a second replica) has: the dataflows resume at their
    outputs' uppers."""
    collections = [(id, old.storage.collection(id).description) for id in (*old.tables, *old.views)]
    dataflows = [old.compute.dataflow(INSTANCE, id).description for id in old.views]
    state = (old.now, dict(old.tables), dict(old.views), old.catalog)
    if close_old:
        old.close()
    again = _session(root)
    again.now, again.tables, again.views, again.catalog = state
    again.storage.create_collections(collections)
    for description in dataflows:
        again.compute.create_dataflow(INSTANCE, description)
    return again


@pytest.mark.slow
def test_views_stay_exact_across_a_restart_between_steps(tmp_path: Path) -> None:
    session, views, rng = _setup(tmp_path)
    _small_delta(session, rng)
    session.step()
    again = _reopen(session, tmp_path)
    try:
        _small_delta(again, rng)
        again.step()
        for name, id in views.items():
            reads = _last_step(again, id).reads
            assert reads is not None and reads.snapshot == 0, (name, reads)
        _check(again, views)
    finally:
        again.close()


def _step_and_die_before_the_state(session: SqlSession, view: GlobalId) -> None:
    """In a forked child: land the view's output, then SIGKILL before its
    state is written."""
    from coordinator_lib.compute import dataflow

    def die(*args: Any) -> bool:
        os.kill(os.getpid(), signal.SIGKILL)
        return False

    dataflow.land = die  # type: ignore[assignment]
    session.compute.step_dataflow(view)


@pytest.mark.slow
def test_sigkill_between_output_and_state_is_caught_up(tmp_path: Path) -> None:
    session, views, rng = _setup(tmp_path)
    try:
        _small_delta(session, rng)
        for id in views.values():
            child = multiprocessing.get_context("fork").Process(
                target=_step_and_die_before_the_state, args=(session, id)
            )
            child.start()
            child.join(120)
            assert child.exitcode == -signal.SIGKILL
        for name, id in views.items():
            # The output moved on and its state did not.
            state = arranged.dataflow_state(
                session.storage.shard(id), session.compute.dataflow(INSTANCE, id).description.expr
            )
            assert session.upper(id) == session.now + 1, name
            assert state.upper() == session.now, name
        _small_delta(session, rng)
        session.step()
        for name, id in views.items():
            reads = _last_step(session, id).reads
            # Caught up from the inputs' updates, not rebuilt from snapshots.
            assert reads is not None and reads.snapshot == 0, (name, reads)
        _check(session, views)
    finally:
        session.close()


@pytest.mark.slow
def test_a_writer_that_loses_the_race_writes_no_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, views, rng = _setup(tmp_path)
    rival = _reopen(session, tmp_path, close_old=False)
    try:
        from coordinator_lib.compute import dataflow

        real = dataflow.plan_step_local
        raced: list[int] = []

        def racing(*args: Any) -> Any:
            result = real(*args)
            if not raced:  # between this writer's read of the state and its CaS
                raced.append(1)
                for id in views.values():
                    rival.compute.step_dataflow(id)
            return result

        _small_delta(rival, rng)
        monkeypatch.setattr(dataflow, "plan_step_local", racing)
        results = [session.compute.step_dataflow(id) for id in views.values()]
        assert raced and results[0] is not None and not results[0].landed
        monkeypatch.undo()
        for _ in range(2):
            _small_delta(rival, rng)
            rival.step()
        for name, id in views.items():
            reads = _last_step(rival, id).reads
            assert reads is not None and reads.snapshot == 0, (name, reads)
        _check(rival, views)
    finally:
        rival.close()
        session.close()


# Rows of r present while now is in [w, x): most from 0 until far later, a
# few arriving or leaving at each of the next steps.
TEMPORAL = "SELECT w, x FROM r WHERE mz_now() >= w AND mz_now() < x"


def _temporal_check(session: SqlSession, view: GlobalId) -> None:
    import duckdb
    import pyarrow as pa

    rows = session.table_rows(_ids(session)["r"], session.now)
    con = duckdb.connect()
    con.register("rows", pa.table({"w": [w for w, _ in rows], "x": [x for _, x in rows]}))
    con.execute("CREATE TABLE r AS SELECT w::INTEGER AS w, x::BIGINT AS x FROM rows")
    at_now = TEMPORAL.replace("mz_now()", str(session.now))
    want = as_multiset([(tuple(row), 1) for row in con.execute(at_now).fetchall()])
    con.close()
    assert as_multiset(session.snapshot(view, session.now)) == want


def test_a_temporal_filter_reads_only_the_changes_due_in_its_step(tmp_path: Path) -> None:
    rng = random.Random(14)
    session = _session(tmp_path)
    try:
        for ddl in TABLES:
            session.execute(ddl)
        r = _ids(session)["r"]
        base: Counter = Counter((0, 10**6 + i) for i in range(BASE_T))
        for due in range(3, 9):  # a few rows arrive (w) or leave (x) at each time
            base.update([(due, 10**6), (0, due), (due, due + 2)])
        session._write(r, base)
        session.execute(f"CREATE MATERIALIZED VIEW tf AS {TEMPORAL}")
        (view,) = session.views
        session.step()
        session.compute.local_max_rows = BASE_T // 10
        for round in range(4):
            if round == 2:  # the pending changes survive a restart (reopened from disk)
                session = _reopen(session, tmp_path)
                session.compute.local_max_rows = BASE_T // 10
            changes: Counter = Counter({(rng.randrange(3, 12), rng.randrange(4, 12)): 1})
            changes[(0, 10**6 + rng.randrange(BASE_T))] -= 1  # a retraction of a pending row
            session._write(r, changes)
            session.step()
            reads = _last_step(session, view).reads
            assert reads is not None and reads.delta <= 4, reads
            # Only the insertions and retractions due in the step, never the
            # input's old contents.
            assert reads.snapshot == 0 and reads.state <= 10, reads
            _temporal_check(session, view)
    finally:
        session.close()


# COUNT/SUM/avg per group and over the whole table: each group's accumulators.
SUMS = {
    "sums": "SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a, count(s) AS c FROM t GROUP BY k",
    "total": "SELECT count(*) AS n, sum(v) AS s FROM t",
}


def test_a_one_row_step_reads_one_accumulator_row_per_touched_group(tmp_path: Path) -> None:
    rng = random.Random(14)
    session = _session(tmp_path)
    try:
        for ddl in TABLES:
            session.execute(ddl)
        t = _ids(session)["t"]
        big: Counter = Counter((1, rng.randrange(-100, 100), f"s{i % 7}") for i in range(BASE_T))
        big.update([(2, 5, None), (2, None, "x"), (3, 7, "y")])
        session._write(t, big)
        for name, sql in SUMS.items():
            session.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        views = {name: id for id, name in session.views.items()}
        session.step()
        changes: list[Counter] = [
            Counter({(1, 3, "z"): 1}),
            Counter({(1, 3, "z"): -1, (2, None, "x"): -1}),
        ]
        for change in changes:
            session._write(t, change)
            session.step()
            for name, id in views.items():
                reads = _last_step(session, id).reads
                assert reads is not None and reads.snapshot == 0, (name, reads)
                # One row per touched group (k = 1 holds 10,000 rows).
                assert reads.state <= 2, (name, reads)
            _check(session, views, SUMS)
    finally:
        session.close()


# Whole-table aggregates and a top 3 (no group key): one group, kept in order.
KEYLESS = {
    "extremes": "SELECT max(v) AS hi, min(v) AS lo, count(*) AS n FROM t",
    "top3": "SELECT k, v FROM t ORDER BY v DESC NULLS LAST, k LIMIT 3",
}


def test_a_keyless_min_max_and_top_k_read_their_first_rows(tmp_path: Path) -> None:
    rng = random.Random(14)
    session = _session(tmp_path)
    try:
        for ddl in TABLES:
            session.execute(ddl)
        _base(session, rng)
        for name, sql in KEYLESS.items():
            session.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        views = {name: id for id, name in session.views.items()}
        session.step()
        t = _ids(session)["t"]
        for _ in range(2):
            _small_delta(session, rng)
            top = max(session.snapshot(t, session.now), key=lambda item: item[0][1])
            session._write(t, Counter({top[0]: -1}))  # the greatest v goes
            session.step()
            for name, id in views.items():
                reads = _last_step(session, id).reads
                assert reads is not None and reads.snapshot == 0, (name, reads)
                # One accumulator row and, per MIN/MAX, the first values
                # past what the delta retracts (6 a step): about 15, twice
                # (the plan reads the Reduce again for the empty table's
                # default row); not the table's 10,000.
                assert reads.state <= 40, (name, reads)
            _check(session, views, KEYLESS)
    finally:
        session.close()


@pytest.mark.parametrize(
    ("first", "late"),
    [
        (["abcdefghZ", "abcdefghA"], "abcdefghM"),  # texts sharing their first 8 bytes
        ([2**60 + 1, 2**60], 2**60 + 1),  # bigints a double cannot tell apart
    ],
)
def test_a_top_k_by_two_columns_keeps_its_first_row(
    tmp_path: Path, first: list[Any], late: Any
) -> None:
    """ORDER BY a, b LIMIT 1 where the first rows' a values tie in the
    arrangement's order bytes and b orders them the other way: a later row
    must not replace the true first one (it did, leaving a row at -1)."""
    session = _session(tmp_path)
    try:
        kind = "text" if isinstance(late, str) else "bigint"
        session.execute(f"CREATE TABLE x (a {kind}, b int)")
        table = next(id for id, name in session.tables.items() if name == "x")
        session._write(table, Counter({(first[0], 1): 1, (first[1], 2): 1}))
        session.execute("CREATE MATERIALIZED VIEW top1 AS SELECT a, b FROM x ORDER BY a, b LIMIT 1")
        view = next(id for id, name in session.views.items() if name == "top1")
        session.step()
        session._write(table, Counter({(late, 0): 1}))
        session.step()
        assert session.snapshot(view, session.now) == [((first[1], 2), 1)]
    finally:
        session.close()


def _one_large_group(session: SqlSession, rng: random.Random) -> GlobalId:
    """t with one group (k = 1) of 10,000 rows over 200 values of v and 7 of s."""
    for ddl in TABLES:
        session.execute(ddl)
    t = _ids(session)["t"]
    big: Counter = Counter((1, rng.randrange(-100, 100), f"s{i % 7}") for i in range(BASE_T))
    big.update([(2, 5, None), (2, None, "x"), (3, 7, "y")])
    session._write(t, big)
    return t


def _views_over_one_large_group_read_within(
    root: Path, queries: dict[str, str], bounds: dict[str, int]
) -> None:
    """The views `queries` over t with one group of 10,000 rows, hydrated,
    then two steps each touching the large group: each view's state reads
    within its bound and no snapshot read, and exact against DuckDB."""
    session = _session(root)
    try:
        t = _one_large_group(session, random.Random(14))
        for name, sql in queries.items():
            session.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        views = {name: id for id, name in session.views.items()}
        session.step()
        for change in (
            Counter({(1, 3, "z"): 1, (2, 8, "s1"): 1}),
            Counter({(1, 3, "z"): -1, (2, None, "x"): -1, (1, 250, "s2"): 1}),
        ):
            session._write(t, change)
            session.step()
            for name, id in views.items():
                reads = _last_step(session, id).reads
                assert reads is not None and reads.snapshot == 0, (name, reads)
                assert reads.state <= bounds[name], (name, reads)
            _check(session, views, {**QUERIES, **VALUES, **SUMS, **FLOATS, **DISTINCTS})
    finally:
        session.close()


# Aggregates of a group's values (not running sums): the touched group is
# read as its distinct values with multiplicities, not its rows.
VALUES = {
    "strings": "SELECT k, string_agg(s, ',' ORDER BY s) AS a, min(s) AS m FROM t GROUP BY k",
    "arrays": "SELECT k, array_agg(s ORDER BY s) AS a FROM t GROUP BY k",
    "jsons": "SELECT k, jsonb_agg(s ORDER BY s) AS a FROM t GROUP BY k",
}
DUCK["jsons"] = (
    "SELECT k, replace(to_json(list(s ORDER BY s NULLS LAST))::varchar, ',', ', ') AS a"
    " FROM t GROUP BY k"
)


def test_a_touched_group_is_read_as_its_values(tmp_path: Path) -> None:
    # k = 1's 10,000 rows hold 7 values of s (8 with the delta's) and
    # k = 2 three; not the group's rows.
    _views_over_one_large_group_read_within(tmp_path, VALUES, dict.fromkeys(VALUES, 12))


# Float sums kept running, exact (compute/float_sum.py): one accumulator row
# per touched group, as an integer sum has.
FLOATS = {
    "float_sums": (
        "SELECT k, sum(v::float8 / 4) AS f, avg(v::float8) AS a, sum(v::real) AS r"
        " FROM t GROUP BY k"
    ),
    "float_total": "SELECT sum(v::float8 / 8) AS f, count(*) AS n FROM t",
}


def test_a_float_sum_reads_one_accumulator_row_per_touched_group(tmp_path: Path) -> None:
    # k = 1 and k = 2 touched: their accumulator rows, not k = 1's 200
    # values (10,000 rows).
    _views_over_one_large_group_read_within(tmp_path, FLOATS, dict.fromkeys(FLOATS, 2))


# DISTINCT COUNT/SUM as accumulators of the values present, and each value's
# multiplicity arranged by group key and value.
DISTINCTS = {
    "distincts": (
        "SELECT k, count(DISTINCT v) AS nv, sum(DISTINCT v) AS sv, count(DISTINCT s) AS ns,"
        " count(*) AS n FROM t GROUP BY k"
    ),
    "distinct_total": "SELECT count(DISTINCT v) AS nv, sum(DISTINCT v::float8 / 4) AS sv FROM t",
}


def test_a_distinct_aggregate_reads_the_touched_values_only(tmp_path: Path) -> None:
    # Per touched group its accumulator row and, per DISTINCT aggregate,
    # the multiplicity of each value the delta brings or takes (at most
    # 3 rows a step; the keyless one twice: the plan reads it again for
    # the empty table's default row): not k = 1's 200 values of v.
    _views_over_one_large_group_read_within(
        tmp_path, DISTINCTS, {"distincts": 2 + 3 * 3, "distinct_total": 2 * (1 + 3 * 2)}
    )


def test_a_float_sum_after_a_retraction_equals_a_recompute(tmp_path: Path) -> None:
    """A float sum kept running would be order-dependent: 1e16 + 1 - 1e16
    is 0 in floats. The view's sum after the DELETE is the recompute's 1."""
    session = _session(tmp_path)
    try:
        session.execute("CREATE TABLE f (k int, x double precision)")
        table = next(id for id, name in session.tables.items() if name == "f")
        session._write(table, Counter({(1, 1e16): 1, (1, 1.0): 1, (2, 0.5): 1}))
        session.execute("CREATE MATERIALIZED VIEW fs AS SELECT k, sum(x) AS s FROM f GROUP BY k")
        view = next(id for id, name in session.views.items() if name == "fs")
        session.step()
        assert sorted(session.snapshot(view, session.now)) == [((1, 1e16 + 1.0), 1), ((2, 0.5), 1)]
        session._write(table, Counter({(1, 1e16): -1}))
        session.step()
        assert sorted(session.snapshot(view, session.now)) == [((1, 1.0), 1), ((2, 0.5), 1)]
    finally:
        session.close()


# ------------------------------------------------- hydration in bounded memory
# arranged.hydrate, as Spark drives it (dataflow.step), with each stateful
# operator's input's old rows computed in-process as a one-off query streams
# them (arranged.stream_peek) instead of by a Spark job: what is under test
# is what hydration holds and writes, not Spark.
HYDRATED = {name: QUERIES[name] for name in ("join_max", "top1")}


def _hydrated_session(root: Path, t_rows: int, view: str) -> tuple[SqlSession, dict[str, GlobalId]]:
    """`view`, join_max (a join under MAX and count(DISTINCT)) or top1 (a
    TopK), over `t_rows` rows of t, stepped once in-process. join_max has 7 groups
    (names of u), so its accumulators (kept in memory while hydrating, one
    per group with its DISTINCT values' counts) do not grow with t."""
    rng = random.Random(14)
    session = _session(root)
    for ddl in TABLES:
        session.execute(ddl)
    ids = _ids(session)
    session._write(ids["t"], Counter(_t_row(rng) for _ in range(t_rows)))
    session._write(ids["u"], Counter((k, k % 7, f"n{k % 7}") for k in range(BASE_U)))
    session.execute(f"CREATE MATERIALIZED VIEW {view} AS {HYDRATED[view]}")
    session.step()
    return session, {name: id for id, name in session.views.items()}


def _hydrate(
    session: SqlSession, id: GlobalId, spool: Path, during: Any = None
) -> tuple[bool, arranged.StepReads]:
    """arranged.hydrate the view `id` at its output's upper, each stateful
    operator's input's old rows read from a Parquet file in `spool` as Spark's
    are (spark_spool.spooled_rows), written there first by an in-process query
    if missing; `during`, if given, is called once, after the first 1,000
    old rows."""
    output, expr = _state_of(session, id)
    description = session.compute.dataflow(INSTANCE, id).description
    inputs = {i: session.storage.shard(i) for i in expr.depends_on()}
    at = output.upper().time
    called: list[int] = []

    def olds(step: Any) -> Any:
        path = spool / f"{arranged.fingerprint(step.expr)}.parquet"
        if not path.exists():
            _spool(step.expr, {i: inputs[i] for i in step.expr.depends_on()}, at - 1, path)

        def rows() -> Any:
            for n, item in enumerate(spooled_rows(str(path), step.expr.desc.arity)):
                if n == 1_000 and during is not None and not called:
                    called.append(1)
                    during()
                yield item

        return rows

    reads = arranged.StepReads()
    return arranged.hydrate(description, inputs, output, at, olds, reads), reads


def _spool(expr: Any, inputs: Any, time: int, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = list(arranged.stream_peek(expr, inputs, time))
    columns = {f"c{i}": [row[i] for row, _ in rows] for i in range(expr.desc.arity)}
    table = pa.table({**columns, "__diff": [d for _, d in rows]})
    pq.write_table(table, str(path), row_group_size=200)  # row groups, as Spark writes


def _staged_rows(session: SqlSession, id: GlobalId) -> int:
    """Rows of hydrations' staged state in the arrangement store of `id`'s host."""
    store = ArrangementStore.for_blob(session.storage.shard(id).blob)
    with store._conn() as conn:
        return int(
            conn.execute(
                "SELECT count(*) FROM arranged JOIN arrangement a ON a.id = arrangement"
                " WHERE a.dataflow LIKE '%#staging.%'"
            ).fetchone()[0]
            + conn.execute(
                "SELECT count(*) FROM ordered JOIN arrangement a ON a.id = arrangement"
                " WHERE a.dataflow LIKE '%#staging.%'"
            ).fetchone()[0]
        )


def test_hydration_holds_a_chunk_of_its_state_not_its_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hydrating a join under MAX and count(DISTINCT) from streamed old
    rows, the Python heap's peak is the same over 4x the rows (before:
    every keyed row was held until one apply, the peak grew with the input:
    0.99 MB -> 3.18 MB at 500 -> 2,000 rows), the state is the one an
    in-process step builds, and the next step from it is exact against
    DuckDB."""
    import tracemalloc

    from coordinator_lib.persist import shard

    monkeypatch.setattr(arranged, "HYDRATE_CHUNK_ROWS", 200, raising=False)
    monkeypatch.setattr(shard, "SNAPSHOT_BATCH_ROWS", 200)  # an input's rows converted at a time
    monkeypatch.setattr(spark_spool, "SPOOL_BATCH_ROWS", 200)  # Spark's rows converted at a time
    peaks = []
    for t_rows in (500, 2_000):
        session, views = _hydrated_session(tmp_path / str(t_rows), t_rows, "join_max")
        try:
            peak = 0
            for name, id in views.items():
                state = arranged.dataflow_state(*_state_of(session, id))
                built = state.stats()  # by the in-process first step
                state.drop()
                spool = tmp_path / f"{t_rows}-{name}"
                spool.mkdir()
                assert _hydrate(session, id, spool)[0], name  # and spools the old rows
                state.drop()
                tracemalloc.start()
                try:
                    hydrated, _ = _hydrate(session, id, spool)
                    peak = max(peak, tracemalloc.get_traced_memory()[1])
                finally:
                    tracemalloc.stop()
                assert hydrated, name
                assert state.stats() == built, name
            peaks.append(peak)
            _small_delta(session, random.Random(t_rows))
            session.step()
            for name, id in views.items():
                reads = _last_step(session, id).reads
                assert reads is not None and reads.snapshot == 0, (name, reads)
            _check(session, views, HYDRATED)
        finally:
            session.close()
    assert peaks[1] < 1.5 * peaks[0], peaks


def test_two_hydrations_racing_the_loser_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hydration (of a TopK) that another one overtakes (it swaps its
    state in while the first is writing its chunks) loses its swap: its
    staged chunks are discarded, the winner's state is untouched and exact."""
    session, views = _hydrated_session(tmp_path / "db", 2_000, "top1")
    rival = _reopen(session, tmp_path / "db", close_old=False)
    try:
        monkeypatch.setattr(arranged, "HYDRATE_CHUNK_ROWS", 200)
        for name, id in views.items():
            state = arranged.dataflow_state(*_state_of(session, id))
            state.drop()
            won: list[Any] = []

            spool = tmp_path / name
            spool.mkdir()

            def overtake(
                id: GlobalId = id, state: Any = state, won: list[Any] = won, spool: Path = spool
            ) -> None:
                # The loser has written chunks of its own by now.
                assert _staged_rows(session, id) > 0
                won.append(_hydrate(rival, id, spool)[0])
                won.append(state.stats())

            hydrated, _ = _hydrate(session, id, spool, during=overtake)
            assert won[0] is True and hydrated is False, name
            assert state.stats() == won[1], name  # the loser changed nothing
            assert _staged_rows(session, id) == 0, name
        monkeypatch.undo()
        _small_delta(session, random.Random(3))
        session.step()
        for name, id in views.items():
            reads = _last_step(session, id).reads
            assert reads is not None and reads.snapshot == 0, (name, reads)
        _check(session, views, HYDRATED)
    finally:
        rival.close()
        session.close()


def _spark_hydration_step(session: SqlSession, id: GlobalId) -> StepResult | None:
    """dataflow.step of the view `id` as a Spark-hydrating step runs it (a
    small delta over inputs storing more than HYDRATE_SHARE * 200 rows, the
    state missing); Spark itself is never called (dataflow._spark_olds is
    the test's, or hydrate is)."""
    from coordinator_lib.compute import dataflow

    output, expr = _state_of(session, id)
    description = session.compute.dataflow(INSTANCE, id).description
    inputs = {i: session.storage.shard(i) for i in expr.depends_on()}
    return dataflow.step(object(), description, inputs, output, local_max_rows=200)  # type: ignore[arg-type]


def _hydrate_and_die(session: SqlSession, id: GlobalId, tmp: Path) -> None:
    """In a forked child: a Spark-hydrating step, SIGKILLed as it hydrates
    (its directory for Spark's output made)."""
    import tempfile

    from coordinator_lib.compute import dataflow

    tempfile.tempdir = str(tmp)  # where a temporary directory would go

    def die(*args: Any) -> bool:
        os.kill(os.getpid(), signal.SIGKILL)
        return False

    dataflow.hydrate = die  # type: ignore[assignment]
    _spark_hydration_step(session, id)


def test_a_killed_hydration_leaves_no_files_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hydration SIGKILLed after Spark's output directory was made leaves
    it behind; the next hydration removes it (and its own), builds the state
    and steps exact against DuckDB. Before, the directory was the system
    temporary directory's and stayed there."""
    from coordinator_lib.compute import dataflow

    session, views = _hydrated_session(tmp_path / "db", 2_000, "top1")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    try:
        (id,) = views.values()
        scratch = session.storage.shard(id).blob.root / SCRATCH
        arranged.dataflow_state(*_state_of(session, id)).drop()
        _small_delta(session, random.Random(5))
        child = multiprocessing.get_context("fork").Process(
            target=_hydrate_and_die, args=(session, id, tmp)
        )
        child.start()
        child.join(120)
        assert child.exitcode == -signal.SIGKILL

        def left() -> list[Path]:
            return [*tmp.iterdir(), *(scratch.iterdir() if scratch.exists() else [])]

        assert left(), "the killed hydration made no directory"

        def olds(spark: Any, inputs: Any, at: int, directory: Any) -> Any:
            def of(step: Any) -> Any:
                path = Path(directory) / f"{arranged.fingerprint(step.expr)}.parquet"
                _spool(step.expr, {i: inputs[i] for i in step.expr.depends_on()}, at - 1, path)
                return lambda: spooled_rows(str(path), step.expr.desc.arity)

            return of

        monkeypatch.setattr(dataflow, "_spark_olds", olds)
        result = _spark_hydration_step(session, id)
        assert result is not None and result.hydrated_by == "spark"
        assert left() == []
        _check(session, views, HYDRATED)
    finally:
        session.close()


def test_a_hydration_reads_a_reduce_input_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Spark hydration reads each stateful operator's input once, however
    many arrangements a Reduce keeps of it (a MAX's values in order, a
    count(DISTINCT)'s values, the accumulators): reading again computes it
    again (Spark's files converted, a collection's snapshot read). Before,
    join_max's join was read 3 times and sum_max's input t twice. The state
    is the one an in-process step builds."""
    for view, t_rows in (("join_max", 600), ("sum_max", 600)):
        monkeypatch.setitem(HYDRATED, view, QUERIES[view])
        session, views = _hydrated_session(tmp_path / view, t_rows, view)
        try:
            id = views[view]
            output, expr = _state_of(session, id)
            state = arranged.dataflow_state(output, expr)
            built = state.stats()
            state.drop()
            description = session.compute.dataflow(INSTANCE, id).description
            inputs = {i: session.storage.shard(i) for i in expr.depends_on()}
            at = output.upper().time
            used: Counter[str] = Counter()

            def olds(
                step: Any, at: int = at, inputs: Any = inputs, used: Any = used, view: str = view
            ) -> Any:
                path = tmp_path / f"{view}-{arranged.fingerprint(step.expr)}.parquet"
                _spool(step.expr, {i: inputs[i] for i in step.expr.depends_on()}, at - 1, path)

                def rows() -> Any:
                    used[arranged.fingerprint(step.expr)] += 1
                    yield from spooled_rows(str(path), step.expr.desc.arity)

                return rows

            reads = arranged.StepReads()
            assert arranged.hydrate(description, inputs, output, at, olds, reads), view
            assert set(used.values()) <= {1}, (view, used)
            stored = sum(s.statistics().rows for s in inputs.values())
            assert reads.snapshot <= stored, (view, reads, stored)  # each input once at most
            assert state.stats() == built, view
        finally:
            session.close()
