"""The coordinator through its session interface: DDL into a durable
catalog, writes by group commit, reads at chosen timestamps, SHOW, system
relations, sessions and transactions."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator_lib.adapter.client import Handle, SessionClient, serve
from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.responses import ExecuteResponseKind as Kind
from tests.adapter.conftest import Run, fast_config, run_on


def error_of(session: SessionClient, sql: str) -> AdapterError:
    with pytest.raises(AdapterError) as caught:
        for response in session.execute(sql):
            if response.rows is not None:
                list(response.rows)
    return caught.value


# ------------------------------------------------------------ DDL and catalog
def test_tables_views_and_reads(sql: Run) -> None:
    sql("CREATE TABLE t (id bigint NOT NULL, name text)")
    sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, NULL)")
    sql("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n FROM t")
    sql("CREATE VIEW named AS SELECT id FROM t WHERE name IS NOT NULL")
    assert sql("SELECT * FROM t ORDER BY id") == [(1, "a"), (2, "b"), (3, None)]
    assert sql("SELECT n FROM mv") == [(3,)]
    assert sql("SELECT id FROM named ORDER BY id") == [(1,), (2,)]
    sql("DELETE FROM t WHERE id = 1")
    sql("UPDATE t SET name = 'c' WHERE id = 3")
    assert sql("SELECT n FROM mv") == [(2,)]
    assert sql("SELECT id, name FROM t ORDER BY id") == [(2, "b"), (3, "c")]


def test_responses_carry_kinds_and_tags(session: SessionClient) -> None:
    def one(text: str) -> Any:
        (response,) = list(session.execute(text))
        return response

    assert one("CREATE TABLE t (a int)").kind is Kind.CREATED_TABLE
    insert = one("INSERT INTO t VALUES (1), (2)")
    assert (insert.kind, insert.tag) == (Kind.INSERTED, "INSERT 0 2")
    select = one("SELECT a FROM t")
    assert select.kind is Kind.SENDING_ROWS
    assert [c.name for c in select.columns] == ["a"]
    assert sorted(select.rows) == [(1,), (2,)]
    assert one("DELETE FROM t WHERE a = 1").tag == "DELETE 1"
    assert one("DROP TABLE t").tag == "DROP TABLE"
    assert one("").kind is Kind.EMPTY_QUERY


def test_not_null_violation_writes_nothing(session: SessionClient, sql: Run) -> None:
    sql("CREATE TABLE t (id bigint NOT NULL)")
    error = error_of(session, "INSERT INTO t VALUES (1), (NULL)")
    assert error.code == "23502"
    assert sql("SELECT count(*) FROM t") == [(0,)]


def test_syntax_error_has_position(session: SessionClient) -> None:
    error = error_of(session, "SELECT 1 FROM WHERE")
    assert error.code == "42601"
    assert error.position is not None


def test_unknown_object(session: SessionClient) -> None:
    error = error_of(session, "SELECT * FROM nope")
    assert error.code == "42P01"
    assert "nope" in error.message
    assert error.position == 15


def test_drop_names_dependents_and_cascades(session: SessionClient, sql: Run) -> None:
    sql("CREATE TABLE t (a int)")
    sql("CREATE MATERIALIZED VIEW mv AS SELECT a FROM t")
    sql("CREATE VIEW v AS SELECT a FROM mv")
    error = error_of(session, "DROP TABLE t")
    assert error.code == "2BP01"
    assert "mv" in error.message
    assert sql("SHOW TABLES") == [("t", "")]
    sql("DROP TABLE t CASCADE")
    assert sql("SHOW OBJECTS") == []


def test_show_commands(sql: Run) -> None:
    sql("CREATE TABLE t (a int NOT NULL, b text)")
    sql("CREATE MATERIALIZED VIEW mv AS SELECT a FROM t")
    sql("CREATE VIEW v AS SELECT b FROM t")
    sql("CREATE INDEX t_a ON t (a)")
    sql("CREATE SCHEMA other")
    sql("CREATE TABLE other.o (x int)")
    assert sql("SHOW TABLES") == [("t", "")]
    assert sql("SHOW TABLES FROM other") == [("o", "")]
    assert sql("SHOW VIEWS") == [("v",)]
    assert [r[0] for r in sql("SHOW MATERIALIZED VIEWS")] == ["mv"]
    assert sql("SHOW INDEXES")[0][:2] == ("t_a", "t")
    assert sql("SHOW OBJECTS") == [
        ("mv", "materialized view"),
        ("t", "table"),
        ("t_a", "index"),
        ("v", "view"),
    ]
    assert ("other",) in sql("SHOW SCHEMAS")
    assert sql("SHOW COLUMNS FROM t") == [("a", False, "integer"), ("b", True, "text")]
    ((name, create_sql),) = sql("SHOW CREATE MATERIALIZED VIEW mv")
    assert name == "materialize.public.mv"
    assert "materialize.public.t" in create_sql


def test_alter_rename_keeps_dependents_working(sql: Run) -> None:
    sql("CREATE TABLE t (a int)")
    sql("INSERT INTO t VALUES (1)")
    sql("CREATE MATERIALIZED VIEW mv AS SELECT a FROM t")
    sql("ALTER TABLE t RENAME TO t2")
    assert sql("SHOW TABLES") == [("t2", "")]
    sql("INSERT INTO t2 VALUES (2)")
    assert sorted(sql("SELECT a FROM mv")) == [(1,), (2,)]
    ((_, create_sql),) = sql("SHOW CREATE MATERIALIZED VIEW mv")
    assert "t2" in create_sql


def test_system_relations(sql: Run) -> None:
    sql("CREATE TABLE t (a int NOT NULL)")
    sql("CREATE MATERIALIZED VIEW mv AS SELECT a FROM t")
    objects = sql("SELECT id, name, type FROM mz_objects ORDER BY id")
    assert [(n, k) for _, n, k in objects] == [("t", "table"), ("mv", "materialized-view")]
    t_id, mv_id = objects[0][0], objects[1][0]
    assert sql(f"SELECT name, nullable, type FROM mz_columns WHERE id = '{t_id}'") == [
        ("a", False, "integer")
    ]
    dependencies = "SELECT object_id, referenced_object_id FROM mz_internal.mz_object_dependencies"
    assert sql(dependencies) == [(mv_id, t_id)]
    frontiers = dict((row[0], row[1:]) for row in sql("SELECT * FROM mz_internal.mz_frontiers"))
    since, upper = frontiers[t_id]
    assert since <= upper


def test_pg_type_and_regtype(local_session: SessionClient, local_sql: Run) -> None:
    """What psycopg's type lookup asks (SQLAlchemy runs it for hstore on
    connect): pg_type rows, to_regtype, ::regtype both ways."""
    sql, session = local_sql, local_session
    lookup = (
        "SELECT typname AS name, oid, typarray AS array_oid, oid::regtype::text AS regtype, "
        "typdelim AS delimiter FROM pg_type t WHERE t.oid = to_regtype('{}') ORDER BY t.oid"
    )
    assert sql(lookup.format("hstore")) == []
    assert sql(lookup.format("integer")) == [("int4", 23, 1007, "integer", ",")]
    assert sql(lookup.format("pg_catalog.timestamptz")) == [
        ("timestamptz", 1184, 1185, "timestamp with time zone", ",")
    ]
    assert sql("SELECT 'int8'::regtype, to_regtype('double precision')") == [(20, 701)]
    assert sql("SELECT to_regtype('nope') IS NULL") == [(True,)]
    assert sql("SELECT oid::regtype FROM pg_catalog.pg_type WHERE typname = 'float8'") == [
        ("double precision",)
    ]
    error = error_of(session, "SELECT 'hstore'::regtype")
    assert (error.code, error.message) == ("42704", 'type "hstore" does not exist')


def test_statement_log_is_queryable(local_sql: Run, local_session: SessionClient) -> None:
    """Every statement with when it began, how long it took and how it ended
    (success, error, canceled)."""
    sql, session = local_sql, local_session
    sql("CREATE TABLE t (a int)")
    before = dt.datetime.now(dt.UTC)
    sql("SELECT 1")
    error_of(session, "SELECT * FROM missing_table")
    sql("SET statement_timeout = 300")
    far = int(time.time() * 1000) + 3_600_000
    error_of(session, f"SELECT * FROM t AS OF {far}")
    sql("RESET statement_timeout")
    after = dt.datetime.now(dt.UTC)
    rows = sql(
        "SELECT sql, status, error_message, began_at, duration_ms "
        "FROM mz_internal.mz_statement_log "
        "WHERE session_id = " + str(session.session.id) + " ORDER BY id"
    )
    logged = {r[0]: r[1:] for r in rows}
    assert logged["SELECT 1"][:2] == ("success", None)
    status, message, _, _ = logged["SELECT * FROM missing_table"]
    assert status == "error" and "missing_table" in message
    status, message, began_at, duration_ms = logged[f"SELECT * FROM t AS OF {far}"]
    assert status == "canceled"
    assert message == "canceling statement due to statement timeout"
    assert before <= began_at <= after
    assert 300 <= duration_ms <= (after - before).total_seconds() * 1000  # until the timeout
    for text in ("SELECT 1", "SELECT * FROM missing_table"):
        _, _, began_at, duration_ms = logged[text]
        assert before <= began_at <= after
        assert 0 <= duration_ms <= (after - before).total_seconds() * 1000
    # Still running while it reads the log: no duration yet.
    ((status, duration_ms),) = [
        r[1:]
        for r in sql(
            "SELECT sql, status, duration_ms FROM mz_internal.mz_statement_log "
            "WHERE sql LIKE '%still running%'"
        )
        if r[0].endswith("'%still running%'")
    ]
    assert (status, duration_ms) == ("running", None)


def test_statement_log_memory_is_bounded_by_text_too(
    local_sql: Run, local_session: SessionClient
) -> None:
    """The log keeps its newest 10,000 statements; one carrying 64 KB of
    literals keeps only its first MAX_SQL_CHARS (PostgreSQL's
    track_activity_query_size), so the log's memory is bounded whatever
    clients send (it kept every byte: 10,000 bulk statements of 1 MB held 10 GB)."""
    from coordinator_lib.adapter.statement_log import MAX_SQL_CHARS

    literal = "x" * 65_536
    statements = [f"SELECT length('{literal}') + {i}" for i in range(20)]
    for i, statement in enumerate(statements):
        assert local_sql(statement) == [(65_536 + i,)]
    logged = local_sql(
        "SELECT sql FROM mz_internal.mz_statement_log "
        f"WHERE session_id = {local_session.session.id} AND sql LIKE 'SELECT length(%' "
        "ORDER BY id"
    )
    assert [row[0] for row in logged] == [s[:MAX_SQL_CHARS] for s in statements]
    kept = sum(len(r.sql) for r in local_session.coordinator.statement_log.records())
    assert kept <= len(local_session.coordinator.statement_log.records()) * MAX_SQL_CHARS


# ------------------------------------------------------------ timestamps
def test_strict_serializable_reads_see_acknowledged_writes(handle: Handle) -> None:
    """Writes by one session are visible to reads that start after their
    acknowledgement, in another session, through a materialized view."""
    writer = run_on(handle.client.startup("materialize"))
    reader = run_on(handle.client.startup("materialize"))
    writer("CREATE TABLE t (a int)")
    writer("CREATE MATERIALIZED VIEW total AS SELECT sum(a) AS s FROM t")
    expected = 0
    for value in range(1, 8):
        writer(f"INSERT INTO t VALUES ({value})")
        expected += value
        assert reader("SELECT s FROM total") == [(expected,)]


def test_explain_timestamp(sql: Run) -> None:
    sql("CREATE TABLE t (a int)")
    ((text,),) = sql("EXPLAIN TIMESTAMP FOR SELECT * FROM t")
    for label in (
        "query timestamp:",
        "oracle read timestamp:",
        "largest not in advance of upper:",
        "upper:",
        "since:",
        "can respond immediately: true",
        "timeline: Some(EpochMilliseconds)",
        "source materialize.public.t",
        "read frontier:",
        "write frontier:",
    ):
        assert label in text, label


def test_as_of_before_since_names_the_inputs(session: SessionClient, sql: Run) -> None:
    sql("CREATE TABLE t (a int)")
    error = error_of(session, "SELECT * FROM t AS OF 1")
    assert "Timestamp (1) is not valid for all inputs" in error.message
    assert "materialize.public.t" in error.message
    # A refusal of the request (snapshot_too_old), never an internal error.
    assert error.code == "72000"


# A short default compaction window, so tests sleep past it briefly.
DEFAULT_WINDOW_MS = 200


@pytest.fixture
def short_window(tmp_path: Path) -> Iterator[Run]:
    handle = serve(fast_config(tmp_path / "env", default_retain_history_ms=DEFAULT_WINDOW_MS))
    try:
        yield run_on(handle.client.startup("materialize"))
    finally:
        handle.shutdown()


def frontiers(sql: Run, name: str) -> tuple[int, int]:
    """(since, upper) of the object called `name`, from mz_frontiers."""
    ((id,),) = sql(f"SELECT id FROM mz_objects WHERE name = '{name}'")
    ((since, upper),) = sql(
        "SELECT read_frontier, write_frontier FROM mz_internal.mz_frontiers "
        f"WHERE object_id = '{id}'"
    )
    return int(since), int(upper)


def read_timestamp(sql: Run, query: str) -> int:
    ((text,),) = sql(f"EXPLAIN TIMESTAMP AS JSON FOR {query}")
    return int(json.loads(text)["determination"]["timestamp"])


def test_as_of_reads_history_kept_by_retain_history(short_window: Run) -> None:
    """After the default window has passed, AS OF an old time reads the
    contents then from a table with RETAIN HISTORY and is refused for one
    without; AS OF AT LEAST that time reads the freshest contents."""
    sql = short_window
    sql("CREATE TABLE kept (a int) WITH (RETAIN HISTORY FOR '1h')")
    sql("CREATE TABLE plain (a int)")
    sql("INSERT INTO kept VALUES (1)")
    sql("INSERT INTO plain VALUES (1)")
    first = read_timestamp(sql, "SELECT * FROM kept, plain")
    sql("INSERT INTO kept VALUES (2)")
    sql("INSERT INTO plain VALUES (2)")
    time.sleep(3 * DEFAULT_WINDOW_MS / 1000 + 0.3)
    assert sql(f"SELECT a FROM kept AS OF {first}") == [(1,)]
    with pytest.raises(AdapterError) as refused:
        sql(f"SELECT a FROM plain AS OF {first}")
    assert f"Timestamp ({first}) is not valid for all inputs" in refused.value.message
    assert "materialize.public.plain" in refused.value.message
    # AT LEAST: the freshest readable time, which is past the second INSERT.
    assert sorted(sql(f"SELECT a FROM kept AS OF AT LEAST {first}")) == [(1,), (2,)]
    assert sorted(sql(f"SELECT a FROM plain AS OF AT LEAST {first}")) == [(1,), (2,)]


def test_retain_history_moves_since(short_window: Run) -> None:
    """RETAIN HISTORY keeps history far beyond the default window; RESET
    brings the since back to upper - default window."""
    sql = short_window
    sql("CREATE TABLE kept (a int)")
    sql("CREATE TABLE plain (a int)")
    sql("ALTER TABLE kept SET (RETAIN HISTORY = FOR '1h')")
    sql("INSERT INTO kept VALUES (1)")
    time.sleep(1.0)
    since, upper = frontiers(sql, "kept")
    # The since follows upper - window, rounded down to a multiple of the
    # window: it stays less than two windows behind.
    assert upper - since > 2 * DEFAULT_WINDOW_MS + 200  # the whole second is kept
    since, upper = frontiers(sql, "plain")
    assert DEFAULT_WINDOW_MS <= upper - since < 2 * DEFAULT_WINDOW_MS
    sql("ALTER TABLE kept RESET (RETAIN HISTORY)")
    time.sleep(0.3)
    since, upper = frontiers(sql, "kept")
    assert DEFAULT_WINDOW_MS <= upper - since < 2 * DEFAULT_WINDOW_MS


def test_serializable_reads_without_waiting(tmp_path: Path) -> None:
    """Without the maintenance thread nothing steps a view but a read that
    waits: a serializable read answers at the view's upper - 1 (the old
    contents) without waiting, a strict serializable one waits for the
    write before it."""
    handle = serve(fast_config(tmp_path / "env", background=False))
    try:
        sql = run_on(handle.client.startup("materialize"))
        sql("CREATE TABLE t (a int)")
        sql("INSERT INTO t VALUES (1)")
        sql("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n FROM t")
        assert sql("SELECT n FROM mv") == [(1,)]  # strict: steps the view
        sql("INSERT INTO t VALUES (2)")
        _, upper = frontiers(sql, "mv")
        sql("SET transaction_isolation = 'serializable'")
        assert sql("SHOW transaction_isolation") == [("serializable",)]
        assert read_timestamp(sql, "SELECT n FROM mv") == upper - 1
        assert sql("SELECT n FROM mv") == [(1,)]
        assert frontiers(sql, "mv")[1] == upper  # nothing waited, nothing stepped
        sql("RESET transaction_isolation")
        assert sql("SHOW transaction_isolation") == [("strict serializable",)]
        assert sql("SELECT n FROM mv") == [(2,)]
    finally:
        handle.shutdown()


# ------------------------------------------------------------ sessions
def test_set_show_reset_and_unknown_variables(session: SessionClient, sql: Run) -> None:
    sql("CREATE SCHEMA s2")
    sql("SET search_path = s2, public")
    assert sql("SHOW search_path") == [("s2, public",)]
    sql("CREATE TABLE in_s2 (a int)")
    assert sql("SHOW TABLES FROM s2") == [("in_s2", "")]
    sql("SET statement_timeout = '5s'")
    assert sql("SHOW statement_timeout") == [("5000ms",)]
    sql("RESET search_path")
    assert sql("SHOW search_path") == [("public",)]
    assert error_of(session, "SET no_such_thing = 1").code == "42704"
    assert error_of(session, "SET transaction_isolation = 'sloppy'").code == "22023"
    assert sql("SELECT current_database(), current_schema()") == [("materialize", "public")]


def test_cluster_variable_places_what_is_created(
    local_session: SessionClient, local_sql: Run
) -> None:
    """SET cluster: materialized views, indexes and sources created without
    IN CLUSTER run on the session's cluster (pinned in their create_sql);
    RESET brings back the default; an unknown cluster is refused at CREATE."""
    sql, session = local_sql, local_session
    assert sql("SHOW cluster") == [("quickstart",)]
    sql("CREATE CLUSTER c1 (REPLICATION FACTOR 1)")
    sql("SET cluster = c1")
    assert sql("SHOW cluster") == [("c1",)]
    sql("CREATE TABLE t (a int)")
    sql("INSERT INTO t VALUES (1)")
    sql("CREATE MATERIALIZED VIEW on_c1 AS SELECT sum(a) AS s FROM t")
    sql("CREATE MATERIALIZED VIEW named AS SELECT a FROM t")
    sql("CREATE MATERIALIZED VIEW explicit IN CLUSTER quickstart AS SELECT a FROM t")
    ((_, create_sql),) = sql("SHOW CREATE MATERIALIZED VIEW on_c1")
    assert "IN CLUSTER c1" in create_sql
    sql("RESET cluster")
    assert sql("SHOW cluster") == [("quickstart",)]
    sql("CREATE MATERIALIZED VIEW on_default AS SELECT a FROM t")
    assert sorted(sql("SHOW MATERIALIZED VIEWS")) == [
        ("explicit", "quickstart"),
        ("named", "c1"),
        ("on_c1", "c1"),
        ("on_default", "quickstart"),
    ]
    sql("INSERT INTO t VALUES (2)")
    assert sql("SELECT s FROM on_c1") == [(3,)]  # maintained here: no workers
    error = error_of(session, "DROP CLUSTER c1")
    assert error.code == "2BP01"  # what runs on it keeps it
    sql("SET cluster = 'nope'")
    assert sql("SHOW cluster") == [("nope",)]
    error = error_of(session, "CREATE MATERIALIZED VIEW lost AS SELECT a FROM t")
    assert (error.code, error.message) == ("42704", "unknown cluster 'nope'")
    sql("CREATE TABLE plain (a int)")  # tables do not run on a cluster
    sql("DROP CLUSTER c1 CASCADE")
    assert sorted(r[0] for r in sql("SHOW MATERIALIZED VIEWS")) == ["explicit", "on_default"]


def test_cluster_variable_places_indexes(sql: Run) -> None:
    """An index (hydrated on Spark) goes to the session's cluster too."""
    sql("CREATE CLUSTER c1 (REPLICATION FACTOR 1)")
    sql("CREATE TABLE t (a int)")
    sql("SET cluster = c1")
    sql("CREATE INDEX on_c1 ON t (a)")
    sql("RESET cluster")
    sql("CREATE INDEX on_default ON t (a)")
    rows = sql("SHOW INDEXES")
    assert sorted((name, cluster) for name, _, cluster, _ in rows) == [
        ("on_c1", "c1"),
        ("on_default", "quickstart"),
    ]


def test_terminate_releases_the_sessions_read_holds(tmp_path: Path) -> None:
    """A read transaction holds its inputs at its timestamp (the since stays
    there past the compaction window); terminating the session lets go."""
    handle = serve(fast_config(tmp_path / "env", default_retain_history_ms=DEFAULT_WINDOW_MS))
    try:
        watcher = run_on(handle.client.startup("materialize"))
        watcher("CREATE TABLE t (a int)")
        reader_session = handle.client.startup("materialize")
        reader = run_on(reader_session)
        reader("BEGIN")
        reader("SELECT * FROM t")
        held = reader_session.session.transaction.timestamp
        time.sleep(5 * DEFAULT_WINDOW_MS / 1000)
        since, upper = frontiers(watcher, "t")
        assert since <= held < upper - 2 * DEFAULT_WINDOW_MS  # held back by the read
        reader_session.terminate()
        deadline = time.monotonic() + 10
        while frontiers(watcher, "t")[0] <= held and time.monotonic() < deadline:
            time.sleep(0.05)
        since, upper = frontiers(watcher, "t")
        assert since > held
        assert upper - since < 2 * DEFAULT_WINDOW_MS  # back to the policy
    finally:
        handle.shutdown()


def test_read_transaction_reads_at_one_timestamp(handle: Handle) -> None:
    writer = run_on(handle.client.startup("materialize"))
    reader_session = handle.client.startup("materialize")
    reader = run_on(reader_session)
    writer("CREATE TABLE t (a int)")
    writer("INSERT INTO t VALUES (1)")
    reader("BEGIN")
    assert reader_session.transaction_status == "T"
    assert reader("SELECT a FROM t") == [(1,)]
    writer("INSERT INTO t VALUES (2)")
    assert reader("SELECT a FROM t") == [(1,)]  # still the transaction's time
    reader("COMMIT")
    assert sorted(reader("SELECT a FROM t")) == [(1,), (2,)]


def test_write_transaction_commits_atomically(handle: Handle) -> None:
    writer = run_on(handle.client.startup("materialize"))
    reader = run_on(handle.client.startup("materialize"))
    writer("CREATE TABLE t (a int)")
    writer("BEGIN")
    writer("INSERT INTO t VALUES (1)")
    writer("INSERT INTO t VALUES (2)")
    assert reader("SELECT a FROM t") == []
    writer("COMMIT")
    assert sorted(reader("SELECT a FROM t")) == [(1,), (2,)]
    writer("BEGIN")
    writer("INSERT INTO t VALUES (3)")
    writer("ROLLBACK")
    assert sorted(reader("SELECT a FROM t")) == [(1,), (2,)]


def test_failed_transaction_refuses_until_rollback(session: SessionClient, sql: Run) -> None:
    sql("CREATE TABLE t (a int)")
    sql("BEGIN")
    error_of(session, "SELECT * FROM nope")
    assert session.transaction_status == "E"
    assert error_of(session, "SELECT 1").code == "25P02"
    sql("ROLLBACK")
    assert session.transaction_status == "I"
    assert sql("SELECT 1") == [(1,)]


def test_reads_and_writes_do_not_mix_in_a_transaction(session: SessionClient, sql: Run) -> None:
    sql("CREATE TABLE t (a int)")
    sql("BEGIN")
    sql("SELECT * FROM t")
    assert error_of(session, "INSERT INTO t VALUES (1)").code == "25000"
    sql("ROLLBACK")


def test_cancel_stops_a_waiting_read(handle: Handle, session: SessionClient, sql: Run) -> None:
    sql("CREATE TABLE t (a int)")
    far = int(time.time() * 1000) + 3_600_000
    threading.Timer(0.5, session.cancel).start()
    started = time.monotonic()
    error = error_of(session, f"SELECT * FROM t AS OF {far}")
    assert error.code == "57014"
    assert time.monotonic() - started < 10
    assert sql("SELECT 1") == [(1,)]  # the session stays usable


def test_statement_timeout(session: SessionClient, sql: Run) -> None:
    sql("CREATE TABLE t (a int)")
    sql("SET statement_timeout = 300")
    far = int(time.time() * 1000) + 3_600_000
    error = error_of(session, f"SELECT * FROM t AS OF {far}")
    assert error.code == "57014"
    assert "timeout" in error.message


# ------------------------------------------------------------ SUBSCRIBE
def test_subscribe_through_a_cursor(handle: Handle, sql: Run) -> None:
    sql("CREATE TABLE t (a int)")
    sql("INSERT INTO t VALUES (1)")
    sql("CREATE VIEW doubled AS SELECT a * 2 AS b FROM t")
    sql("BEGIN")
    sql("DECLARE c CURSOR FOR SUBSCRIBE doubled")
    rows = sql("FETCH ALL c WITH (TIMEOUT = '20s')")
    assert [(diff, b) for _, diff, b in rows] == [(1, 2)]
    snapshot_ts = rows[0][0]
    writer = run_on(handle.client.startup("materialize"))
    writer("INSERT INTO t VALUES (5)")
    writer("DELETE FROM t WHERE a = 1")
    seen: list[tuple] = []
    deadline = time.monotonic() + 30
    while len(seen) < 2 and time.monotonic() < deadline:
        seen += sql("FETCH ALL c WITH (TIMEOUT = '1s')")
    assert sorted((diff, b) for _, diff, b in seen) == [(-1, 2), (1, 10)]
    assert all(isinstance(ts, decimal.Decimal) and ts > snapshot_ts for ts, _, _ in seen)
    sql("COMMIT")


def test_subscribe_with_progress_and_up_to(session: SessionClient, sql: Run) -> None:
    sql("CREATE TABLE t (a int)")
    sql("INSERT INTO t VALUES (1)")
    ((text,),) = sql("EXPLAIN TIMESTAMP AS JSON FOR SELECT * FROM t")
    import json

    now = json.loads(text)["determination"]["timestamp"]
    (response,) = list(
        session.execute(f"COPY (SUBSCRIBE t WITH (PROGRESS) AS OF {now} UP TO {now + 2}) TO STDOUT")
    )
    assert response.kind is Kind.COPY_TO
    assert [c.name for c in response.columns] == ["mz_timestamp", "mz_progressed", "mz_diff", "a"]
    rows = list(response.rows)  # ends at UP TO
    data = [r for r in rows if r[1] is False]
    progress = [r for r in rows if r[1] is True]
    assert [(r[2], r[3]) for r in data] == [(1, 1)]
    assert progress and all(r[2] is None for r in progress)


def fetch_changes(sql: Run, cursor: str, count: int, seconds: float = 30) -> list[tuple]:
    """(diff, columns...) of the next `count` rows of a SUBSCRIBE cursor."""
    seen: list[tuple] = []
    deadline = time.monotonic() + seconds
    while len(seen) < count and time.monotonic() < deadline:
        seen += sql(f"FETCH ALL {cursor} WITH (TIMEOUT = '0.5s')")
    return sorted(row[1:] for row in seen)


def test_subscribe_forms_end_to_end(local_handle: Handle) -> None:
    """SUBSCRIBE TO t WITH (SNAPSHOT = false) sends only later changes;
    SUBSCRIBE (query) maintains the query (a transient view) from its
    snapshot on; both through DECLARE / FETCH."""
    writer = run_on(local_handle.client.startup("materialize"))
    writer("CREATE TABLE t (a int)")
    writer("INSERT INTO t VALUES (1), (2)")
    plain = run_on(local_handle.client.startup("materialize"))
    plain("BEGIN")
    plain("DECLARE c CURSOR FOR SUBSCRIBE TO t WITH (SNAPSHOT = false)")
    query = run_on(local_handle.client.startup("materialize"))
    query("BEGIN")
    query("DECLARE q CURSOR FOR SUBSCRIBE (SELECT a * 10 AS b FROM t WHERE a > 1)")
    assert fetch_changes(query, "q", 1) == [(1, 20)]  # the snapshot, filtered
    writer("INSERT INTO t VALUES (5)")
    writer("DELETE FROM t WHERE a = 2")
    # No snapshot: the rows 1 and 2 are only ever seen as the later changes.
    assert fetch_changes(plain, "c", 2) == [(-1, 2), (1, 5)]
    assert fetch_changes(query, "q", 2) == [(-1, 20), (1, 50)]
    assert plain("FETCH ALL c WITH (TIMEOUT = '0.2s')") == []  # nothing else
    plain("COMMIT")
    query("COMMIT")


# ------------------------------------------------------------ restart
def test_catalog_and_frontiers_survive_a_restart(tmp_path: Path) -> None:
    """A reopened environment has the catalog, and every collection's since
    and upper as they were (nothing rebuilt, nothing compacted beyond its
    policy): AS OF a time before the restart reads the contents then."""
    config = fast_config(tmp_path / "env")
    first = serve(config)
    try:
        sql = run_on(first.client.startup("materialize"))
        sql("CREATE TABLE t (a int) WITH (RETAIN HISTORY FOR '1h')")
        sql("CREATE TABLE plain (a int)")
        sql("INSERT INTO t VALUES (1), (2)")
        sql(
            "CREATE MATERIALIZED VIEW mv WITH (RETAIN HISTORY FOR '1h') AS "
            "SELECT count(*) AS n FROM t"
        )
        assert sql("SELECT n FROM mv") == [(2,)]
        before = read_timestamp(sql, "SELECT * FROM t, mv")
        sql("INSERT INTO t VALUES (3)")
        assert sql("SELECT n FROM mv") == [(3,)]
        frontiers_before = {name: frontiers(sql, name) for name in ("t", "mv", "plain")}
    finally:
        first.shutdown()

    second = serve(config)
    try:
        sql = run_on(second.client.startup("materialize"))
        assert sql("SHOW TABLES") == [("plain", ""), ("t", "")]
        assert sql("SHOW MATERIALIZED VIEWS")[0][0] == "mv"
        after = {name: frontiers(sql, name) for name in ("t", "mv", "plain")}
        for name in ("t", "mv"):  # an hour of history: the since stays put
            (since_before, upper_before), (since_after, upper_after) = (
                frontiers_before[name],
                after[name],
            )
            assert since_after == since_before, name
            assert upper_after >= upper_before, name  # resumed, not rebuilt
        (since_before, upper_before), (since_after, upper_after) = (
            frontiers_before["plain"],
            after["plain"],
        )
        window = config.default_retain_history_ms
        assert upper_after >= upper_before
        # Never back; never past the policy (upper - window), unless it had
        # not got that far yet (a young table keeps its first since).
        assert since_before <= since_after <= max(since_before, upper_after - window)
        # Pre-restart contents at a pre-restart time; the latest after it.
        assert sorted(sql(f"SELECT a FROM t AS OF {before}")) == [(1,), (2,)]
        assert sql(f"SELECT n FROM mv AS OF {before}") == [(2,)]
        assert sql("SELECT n FROM mv") == [(3,)]
        sql("INSERT INTO t VALUES (4)")
        assert sql("SELECT n FROM mv") == [(4,)]
    finally:
        second.shutdown()


def test_wrong_password_and_unknown_database(tmp_path: Path, spark: Any) -> None:
    handle = serve(fast_config(tmp_path / "env", users={"alice": "s3cret"}), spark)
    try:
        with pytest.raises(AdapterError) as error:
            handle.client.startup("alice", "materialize", password="wrong")
        assert error.value.code == "28P01"
        handle.client.startup("alice", "materialize", password="s3cret").terminate()
        with pytest.raises(AdapterError) as error:
            handle.client.startup("alice", "nodb", password="s3cret")
        assert error.value.code == "3D000"
        # With a user configured, everybody gives a password (issue 18).
        assert handle.client.password_required("alice", loopback=True)
        assert handle.client.password_required("materialize", loopback=True)
        with pytest.raises(AdapterError) as error:
            handle.client.startup("materialize", "materialize")
        assert error.value.code == "28P01"
    finally:
        handle.shutdown()


def test_concurrent_writers_share_group_commits(
    local_handle: Handle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Autocommit INSERTs that arrive while an append is in flight go into
    the next one together: with a slow append, 8 writers x 8 INSERTs take
    far fewer appends than INSERTs; every row lands exactly once."""
    setup = run_on(local_handle.client.startup("materialize"))
    setup("CREATE TABLE t (writer int, n int)")
    storage = local_handle.coordinator.storage
    real_append = storage.append
    appends_with_rows = 0

    def slow_append(commands: Any, records: Any = ()) -> None:
        nonlocal appends_with_rows
        if any(len(command.updates) for command in commands):
            appends_with_rows += 1
            time.sleep(0.03)
        real_append(commands, records)

    monkeypatch.setattr(storage, "append", slow_append)
    writers, per_writer = 8, 8
    errors: list[BaseException] = []
    barrier = threading.Barrier(writers)

    def write(writer: int) -> None:
        try:
            run = run_on(local_handle.client.startup("materialize"))
            barrier.wait()
            for n in range(per_writer):
                run(f"INSERT INTO t VALUES ({writer}, {n})")
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    inserts = writers * per_writer
    # Serialized, each INSERT would be its own append (64); shared, about
    # one append per round of writers.
    assert appends_with_rows <= inserts // 3, appends_with_rows
    rows = setup("SELECT writer, n, count(*) FROM t GROUP BY writer, n")
    assert sorted(rows) == [(w, n, 1) for w in range(writers) for n in range(per_writer)]


def test_blind_inserts_wait_for_a_read_then_write(local_handle: Handle) -> None:
    """A read-then-write (UPDATE, DELETE, INSERT ... SELECT) holds the write
    lock from its read to its write: a blind INSERT waits meanwhile, and
    runs as soon as it is released."""
    sql = run_on(local_handle.client.startup("materialize"))
    sql("CREATE TABLE t (a int)")
    done = threading.Event()

    def insert() -> None:
        run_on(local_handle.client.startup("materialize"))("INSERT INTO t VALUES (1)")
        done.set()

    with local_handle.coordinator.write_lock.exclusive():
        thread = threading.Thread(target=insert)
        thread.start()
        assert not done.wait(0.3)
    assert done.wait(10)
    thread.join()
    assert sql("SELECT a FROM t") == [(1,)]


def test_load_generator_source_is_readable_without_stalling(sql: Run) -> None:
    sql("CREATE SOURCE counter FROM LOAD GENERATOR COUNTER (TICK INTERVAL '100ms')")
    time.sleep(0.5)
    ((n,),) = sql("SELECT count(*) FROM counter")
    assert n >= 1
    time.sleep(0.5)
    ((m,),) = sql("SELECT count(*) FROM counter")
    assert m > n  # the source keeps ticking and reads keep up with it


def test_savepoints_roll_back_buffered_writes(session: SessionClient, sql: Run) -> None:
    sql("CREATE TABLE t (a int)")
    sql("BEGIN")
    sql("INSERT INTO t VALUES (1)")
    sql('SAVEPOINT "_pg3_1"')
    sql("INSERT INTO t VALUES (2)")
    sql('ROLLBACK TO SAVEPOINT "_pg3_1"')
    sql('RELEASE "_pg3_1"')
    sql("COMMIT")
    assert sql("SELECT a FROM t") == [(1,)]
    assert error_of(session, "SAVEPOINT s").code == "25P01"


def test_small_work_never_starts_spark(tmp_path: Path) -> None:
    """Spark starts on the first step or peek that needs it: a coordinator
    over small data (and a Dagster sensor) never pays for the JVM."""
    handle = serve(fast_config(tmp_path / "env"))
    try:
        sql = run_on(handle.client.startup("materialize"))
        sql("CREATE TABLE t (a int)")
        sql("INSERT INTO t VALUES (1), (2)")
        sql("CREATE MATERIALIZED VIEW mv AS SELECT sum(a) AS s FROM t")
        assert sql("SELECT s FROM mv") == [(3,)]
        assert handle.coordinator.compute.spark.started is False
    finally:
        handle.shutdown()


def test_a_read_does_not_pay_for_the_views_it_steps_while_waiting(tmp_path: Path) -> None:
    """A read waiting for a view steps it meanwhile (here nothing else
    does: no background loop). That step is maintenance, not the read's own
    work: the read's small max_query_memory must not fail it. It did, and
    the read then waited for a view whose steps kept failing (a module of
    many views went past the default 3 GB that way)."""
    handle = serve(fast_config(tmp_path / "env", background=False))
    try:
        sql = run_on(handle.client.startup("materialize"))
        sql("CREATE TABLE t (a int)")
        sql("CREATE MATERIALIZED VIEW mv AS SELECT a, count(*) AS n FROM t GROUP BY a")
        sql("INSERT INTO t SELECT * FROM generate_series(1, 2000)")
        sql("SET max_query_memory = '2kB'")
        sql("SET statement_timeout = '20s'")
        assert sql("SELECT n FROM mv WHERE a = 7") == [(1,)]
    finally:
        handle.shutdown()


def test_an_index_over_small_data_steps_in_process(tmp_path: Path) -> None:
    """An index's arrangement lives where its steps run: over small inputs
    in this process, so an index (the demo has one) never starts the JVM.
    Reads of the indexed collections are answered from it, and a view's
    errors reach them: the error while the bad row is there, the rows once
    it is deleted."""
    handle = serve(fast_config(tmp_path / "env"))
    try:
        session = handle.client.startup("materialize")
        sql = run_on(session)
        sql("CREATE TABLE t (a int, b int)")
        sql("INSERT INTO t VALUES (6, 2), (8, 4)")
        sql("CREATE INDEX t_a ON t (a)")
        sql("CREATE MATERIALIZED VIEW q AS SELECT a / b AS q FROM t")
        sql("CREATE INDEX q_q ON q (q)")
        assert sorted(sql("SELECT * FROM q")) == [(2,), (3,)]
        sql("INSERT INTO t VALUES (1, 0)")
        assert error_of(session, "SELECT * FROM q").code == "22012"
        assert sorted(sql("SELECT * FROM t")) == [(1, 0), (6, 2), (8, 4)]
        sql("DELETE FROM t WHERE b = 0")
        sql("INSERT INTO t VALUES (9, 3)")
        assert sorted(sql("SELECT * FROM t")) == [(6, 2), (8, 4), (9, 3)]
        assert sorted(sql("SELECT * FROM q")) == [(2,), (3,), (3,)]
        engines = sql(
            "SELECT DISTINCT name, engine FROM mz_internal.mz_dataflow_step_reads "
            "WHERE name IN ('t_a', 'q_q') ORDER BY name"
        )
        assert engines == [("q_q", "local"), ("t_a", "local")]
        strategies = sql(
            "SELECT DISTINCT execution_strategy FROM mz_internal.mz_statement_log "
            "WHERE sql LIKE 'SELECT * FROM %' AND execution_strategy IS NOT NULL"
        )
        assert strategies == [("fast-path",)]  # answered from the arrangements
        assert handle.coordinator.compute.spark.started is False
    finally:
        handle.shutdown()


@pytest.mark.spark
def test_an_index_moves_to_spark_when_its_inputs_outgrow_the_local_engine(
    tmp_path: Path, spark: Any
) -> None:
    """Its inputs past `local_max_rows`, an in-process index moves its
    arrangement (updates and frontiers) to Spark and steps there from then
    on, answering as before."""
    handle = serve(fast_config(tmp_path / "env", local_max_rows=4), spark)
    try:
        sql = run_on(handle.client.startup("materialize"))
        sql("CREATE TABLE t (a int, b text)")
        sql("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
        sql("CREATE INDEX t_a ON t (a)")
        assert sorted(sql("SELECT * FROM t")) == [(1, "x"), (2, "y")]
        sql("DELETE FROM t WHERE a = 1")
        assert sorted(sql("SELECT * FROM t")) == [(2, "y")]
        sql("INSERT INTO t VALUES (3, 'z'), (4, NULL), (5, 'w')")
        assert sorted(sql("SELECT * FROM t")) == [(2, "y"), (3, "z"), (4, None), (5, "w")]
        sql("DELETE FROM t WHERE a = 3")
        assert sorted(sql("SELECT * FROM t")) == [(2, "y"), (4, None), (5, "w")]
        engines = sql(
            "SELECT engine FROM mz_internal.mz_dataflow_step_reads "
            "WHERE name = 't_a' ORDER BY lower"
        )
        assert engines[0] == ("local",) and engines[-1] == ("spark",)
    finally:
        handle.shutdown()


def test_peeks_use_indexes_when_there_are_some(sql: Run) -> None:
    """A SELECT of an indexed collection is answered from the arrangement
    (fast path), of an unindexed one from its snapshot, anything else by a
    one-shot dataflow; the statement log says which, and all agree."""
    sql("CREATE TABLE t (a int, b text)")
    sql("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
    assert sorted(sql("SELECT * FROM t")) == [(1, "x"), (2, "y")]
    sql("CREATE INDEX t_a ON t (a)")
    sql("INSERT INTO t VALUES (3, 'z')")
    assert sorted(sql("SELECT * FROM t")) == [(1, "x"), (2, "y"), (3, "z")]
    assert sql("SELECT b FROM t WHERE a > 1 ORDER BY b") == [("y",), ("z",)]
    assert sql("SELECT 1 + 1") == [(2,)]
    strategies = sql(
        "SELECT sql, execution_strategy FROM mz_internal.mz_statement_log "
        "WHERE execution_strategy IS NOT NULL ORDER BY id"
    )
    assert [s for _, s in strategies] == [
        "persist-fast-path",
        "fast-path",
        "standard",
        "constant",
    ]
