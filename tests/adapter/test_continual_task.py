"""CREATE CONTINUAL TASK (sql/plan_continual_task.py, adapter/continual_task.py):
the body runs once per input time over the rows inserted at that time and the
task's contents just before it, durably and exactly once."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.adapter.client import Handle, SessionClient, serve
from coordinator_lib.adapter.continual_task import ContinualTask
from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.persist.shard import Shard
from tests.adapter.conftest import Run, fast_config, run_on

UPSERT = (
    "CREATE CONTINUAL TASK upsert (k int, v int) ON INPUT t AS ("
    "DELETE FROM upsert WHERE k IN (SELECT k FROM t);"
    " INSERT INTO upsert SELECT k, max(v) FROM t GROUP BY k;)"
)
# One row per input time: how many rows came in, their sum, and how many
# rows the log had before (its own contents just before the time).
LOG = (
    "CREATE CONTINUAL TASK log (n bigint, total bigint, before bigint) ON INPUT t AS ("
    "INSERT INTO log SELECT count(*), sum(v), (SELECT count(*) FROM log) FROM t;)"
)


def error_of(session: SessionClient, sql: str) -> AdapterError:
    with pytest.raises(AdapterError) as caught:
        for response in session.execute(sql):
            if response.rows is not None:
                list(response.rows)
    return caught.value


def open_env(path: Path, **overrides: Any) -> tuple[Handle, SessionClient, Run]:
    """No Spark: everything here is small enough to run in-process."""
    handle = serve(fast_config(path, **overrides), None)
    session = handle.client.startup("materialize", "materialize")
    return handle, session, run_on(session)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[Handle, SessionClient, Run]]:
    handle, session, sql = open_env(tmp_path / "env")
    try:
        yield handle, session, sql
    finally:
        handle.shutdown()


def task(handle: Handle, name: str) -> ContinualTask:
    coord = handle.coordinator
    (item,) = [i for i in coord.catalog.items() if i.name.item == name]
    return coord._tasks[item.id]


# ------------------------------------------------------------------ semantics
def test_the_input_means_its_inserted_rows(env: Any) -> None:
    """`t` in the body is what was inserted into t at the time, not t's
    contents; deletes and rows from before the task do not run it."""
    _, _, sql = env
    sql("CREATE TABLE t (k int, v int)")
    sql("INSERT INTO t VALUES (0, 100)")  # before the task: never seen
    sql(LOG)
    sql(UPSERT)
    sql("INSERT INTO t VALUES (1, 10), (2, 20)")
    sql("INSERT INTO t VALUES (1, 11)")
    sql("DELETE FROM t WHERE k = 2")  # no inserts: the tasks do not run
    sql("INSERT INTO t VALUES (3, NULL), (3, 5)")
    assert sql("SELECT k, v FROM upsert ORDER BY k") == [(1, 11), (2, 20), (3, 5)]
    assert sql("SELECT n, total, before FROM log ORDER BY before") == [
        (2, 30, 0),
        (1, 11, 1),
        (2, 5, 2),
    ]


def test_statements_see_the_earlier_statements_changes(env: Any) -> None:
    """The second statement reads the task as the first left it at `t`."""
    _, _, sql = env
    sql("CREATE TABLE t (k int)")
    sql(
        "CREATE CONTINUAL TASK latest (k int, n bigint) ON INPUT t AS ("
        "DELETE FROM latest;"
        " INSERT INTO latest SELECT k, (SELECT count(*) FROM latest) FROM t;)"
    )
    sql("INSERT INTO t VALUES (1), (2)")
    sql("INSERT INTO t VALUES (3)")
    assert sql("SELECT k, n FROM latest") == [(3, 0)]


def test_select_subscribe_show_and_drop(env: Any) -> None:
    handle, session, sql = env
    sql("CREATE TABLE t (k int, v int)")
    sql(UPSERT)
    sql("INSERT INTO t VALUES (1, 1)")
    assert sql("SELECT * FROM upsert") == [(1, 1)]
    assert sql("SHOW CONTINUAL TASKS") == [("upsert", "quickstart")]
    assert ("upsert", "continual task") in sql("SHOW OBJECTS")
    assert sql("SELECT type FROM mz_objects WHERE name = 'upsert'") == [("continual-task",)]
    ((name, create_sql),) = sql("SHOW CREATE CONTINUAL TASK upsert")
    assert name == "materialize.public.upsert"
    assert create_sql.startswith("CREATE CONTINUAL TASK materialize.public.upsert (k INT, v INT)")
    assert (
        "DELETE FROM materialize.public.upsert WHERE k IN (SELECT k FROM materialize.public.t)"
        in create_sql
    )
    # A view over the task, and SUBSCRIBE to it.
    assert sql("SELECT count(*) FROM upsert JOIN t USING (k)") == [(1,)]
    sql("BEGIN")
    sql("DECLARE c CURSOR FOR SUBSCRIBE upsert")
    rows = sql("FETCH ALL c WITH (TIMEOUT = '20s')")
    assert [(diff, k, v) for _, diff, k, v in rows] == [(1, 1, 1)]
    sql("COMMIT")
    # The input cannot go while the task reads it.
    assert error_of(session, "DROP TABLE t").code == "2BP01"
    sql("DROP CONTINUAL TASK upsert")
    assert sql("SHOW CONTINUAL TASKS") == []
    assert error_of(session, "SELECT * FROM upsert").code == "42P01"
    sql("DROP TABLE t")
    assert not handle.coordinator._tasks


@pytest.mark.parametrize(
    ("body", "code", "at"),
    [
        ("SELECT 1 FROM t;", "0A000", "SELECT 1"),
        ("INSERT INTO other SELECT k FROM t;", "0A000", "other SELECT"),
        ("INSERT INTO ct SELECT nope FROM t;", "42703", "nope"),
        ("INSERT INTO ct SELECT true FROM t;", "42804", "true"),
        ("DELETE FROM ct WHERE missing > 1;", "42703", "missing"),
        ("INSERT INTO ct SELECT k FROM nowhere;", "42P01", "nowhere"),
        ("INSERT INTO ct SELEC k FROM t;", "42601", None),
        ("INSERT INTO ct SELECT k FROM t; UPDATE ct SET k = 1;", "0A000", "UPDATE"),
    ],
)
def test_bad_bodies_are_refused_with_a_position(
    env: Any, body: str, code: str, at: str | None
) -> None:
    _, session, sql = env
    sql("CREATE TABLE t (k int)")
    sql("CREATE TABLE other (k int)")
    text = f"CREATE CONTINUAL TASK ct (k int) ON INPUT t AS ({body})"
    error = error_of(session, text)
    assert error.code == code, error.message
    assert error.position is not None
    if at is not None:
        assert error.position == text.index(at) + 1, error.message
    assert sql("SHOW CONTINUAL TASKS") == []


def test_bad_inputs_and_names(env: Any) -> None:
    _, session, sql = env
    sql("CREATE TABLE t (k int)")
    sql("CREATE VIEW v AS SELECT k FROM t")
    text = "CREATE CONTINUAL TASK ct (k int) ON INPUT v AS (INSERT INTO ct SELECT k FROM v;)"
    error = error_of(session, text)
    assert (error.code, error.position) == ("42809", text.index("v AS") + 1)
    sql("CREATE CONTINUAL TASK ct (k int) ON INPUT t AS (INSERT INTO ct SELECT k FROM t;)")
    error = error_of(session, "CREATE CONTINUAL TASK ct (k int) ON INPUT t AS (DELETE FROM ct;)")
    assert error.code == "42P07"
    error = error_of(session, "INSERT INTO ct VALUES (1)")
    assert error.code == "42809"  # only the task writes to itself


# ------------------------------------------------------------------ durability
def test_restart_resumes_from_the_upper_without_rerunning_or_skipping(tmp_path: Path) -> None:
    """Times processed before the restart are not processed again; times
    written while nobody ran the task are processed once after it."""
    path = tmp_path / "env"
    # No maintenance thread: the task steps only when a read waits for it.
    handle, _, sql = open_env(path, background=False)
    sql("CREATE TABLE t (k int, v int)")
    sql(LOG)
    sql("INSERT INTO t VALUES (1, 1)")
    sql("INSERT INTO t VALUES (2, 2), (3, 3)")
    assert sql("SELECT n, total, before FROM log ORDER BY before") == [(1, 1, 0), (2, 5, 1)]
    upper_before = handle.coordinator.storage.collection_frontiers(task(handle, "log").id)[1]
    sql("INSERT INTO t VALUES (4, 4)")  # not processed before the shutdown
    sql("INSERT INTO t VALUES (5, 5)")
    assert task(handle, "log").steps == 1
    handle.shutdown()

    handle, _, sql = open_env(path, background=False)
    try:
        log = task(handle, "log")
        upper = handle.coordinator.storage.collection_frontiers(log.id)[1]
        assert upper == upper_before  # nothing ran while it was down
        sql("INSERT INTO t VALUES (6, NULL)")
        assert sql("SELECT n, total, before FROM log ORDER BY before") == [
            (1, 1, 0),
            (2, 5, 1),
            (1, 4, 2),
            (1, 5, 3),
            (1, None, 4),
        ]
        assert log.steps == 1  # one step for the three times since the upper
    finally:
        handle.shutdown()


class Crash(Exception):
    pass


def test_a_crash_before_the_append_loses_and_duplicates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step that dies before its compare_and_append lands leaves the upper
    where it was; the next step runs the same times once."""
    handle, _, sql = open_env(tmp_path / "env", background=False)
    try:
        sql("CREATE TABLE t (k int, v int)")
        sql(LOG)
        log = task(handle, "log")
        shard = handle.coordinator.storage.shard(log.id)
        upper = shard.upper()
        original = Shard.compare_and_append
        crashes: list[Any] = []

        def crash_once(self: Shard, *args: Any, **kwargs: Any) -> None:
            if self is shard and not crashes:
                crashes.append(args)
                raise Crash()
            return original(self, *args, **kwargs)

        monkeypatch.setattr(Shard, "compare_and_append", crash_once)
        sql("INSERT INTO t VALUES (1, 1)")
        sql("INSERT INTO t VALUES (2, 2)")
        with pytest.raises(Crash):
            log.step()
        assert len(crashes[0][0]) == 2  # both times were computed, then lost
        assert shard.upper() == upper
        assert sql("SELECT n, total, before FROM log ORDER BY before") == [(1, 1, 0), (1, 2, 1)]
    finally:
        handle.shutdown()


def test_two_runners_racing_write_each_time_once(env: Any) -> None:
    """Two runners of one task (as two processes would have) step at once
    while the input grows: compare_and_append lets one win each time."""
    handle, _, sql = env
    sql("CREATE TABLE t (k int, v int)")
    sql(LOG)
    first = task(handle, "log")
    second = ContinualTask(handle.coordinator, first.id, first.plan)
    stop = threading.Event()
    errors: list[BaseException] = []

    def race(runner: ContinualTask) -> None:
        try:
            while not stop.is_set():
                runner.step()
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=race, args=(r,)) for r in (first, second)]
    for thread in threads:
        thread.start()
    try:
        for i in range(12):
            sql(f"INSERT INTO t VALUES ({i}, {i})")
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not errors
    rows = sql("SELECT n, total, before FROM log ORDER BY before")
    assert rows == [(1, i, i) for i in range(12)]
    assert first.steps + second.steps >= 1


# ------------------------------------------------------------------ randomized
keys = st.one_of(st.none(), st.integers(0, 3))
values = st.one_of(st.none(), st.integers(-5, 5))
insert = st.lists(st.tuples(keys, values), min_size=1, max_size=3).map(
    lambda rows: ("insert", rows)
)
delete = st.integers(0, 3).map(lambda k: ("delete", k))
update = st.tuples(st.integers(0, 3), st.integers(-1, 1)).map(lambda a: ("update", a))
workload = st.lists(st.one_of(insert, insert, delete, update), min_size=1, max_size=8)


def _lit(value: Any) -> str:
    return "NULL" if value is None else str(value)


def _apply(table: Counter, op: tuple[str, Any]) -> tuple[str, Counter]:
    """The SQL for `op` and t's contents after it (the model of the table)."""
    kind, arg = op
    after = Counter(table)
    if kind == "insert":
        after.update(arg)
        return "INSERT INTO t VALUES " + ", ".join(f"({_lit(k)}, {_lit(v)})" for k, v in arg), after
    if kind == "delete":
        for row in list(after):
            if row[0] == arg:
                del after[row]
        return f"DELETE FROM t WHERE k = {arg}", after
    key, delta = arg
    after = Counter()
    for (k, v), n in table.items():
        after[(k, v + delta if k == key and v is not None else v)] += n
    return f"UPDATE t SET v = v + {delta} WHERE k = {key}", after


def _model_step(upsert: Counter, log: list[tuple], inserted: Counter) -> Counter:
    """Both tasks at one input time, computed directly."""
    keys_in = {k for (k, _), n in inserted.items() if k is not None}
    out = Counter({row: n for row, n in upsert.items() if row[0] not in keys_in})
    groups: dict[Any, list[Any]] = {}
    for (k, v), n in inserted.items():
        groups.setdefault(k, []).extend([v] * n)
    for k, vs in groups.items():
        present = [v for v in vs if v is not None]
        out[(k, max(present) if present else None)] += 1
    present = [v for (_, v), n in inserted.items() for _ in range(n) if v is not None]
    total = sum(present) if present else None
    log.append((sum(inserted.values()), total, len(log)))
    return out


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=workload)
def test_tasks_match_a_direct_computation(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, Any]]
) -> None:
    handle, _, sql = open_env(tmp_path_factory.mktemp("ct") / "env")
    try:
        sql("CREATE TABLE t (k int, v int)")
        sql(UPSERT)
        sql(LOG)
        table: Counter = Counter()
        upsert: Counter = Counter()
        log: list[tuple] = []
        for op in ops:
            text, after = _apply(table, op)
            sql(text)
            inserted = after - table  # what the statement inserted, consolidated
            table = after
            if inserted:
                upsert = _model_step(upsert, log, inserted)
            assert Counter(sql("SELECT k, v FROM upsert")) == upsert, text
            assert sorted(sql("SELECT * FROM log"), key=lambda r: r[2]) == log, text
    finally:
        handle.shutdown()
