"""Iceberg sinks: a view's changes written to an Iceberg table (pyiceberg's
SQL catalog on SQLite, a local warehouse), read back with pyiceberg and
DuckDB and compared with the view at the upper the table records."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
from pyiceberg.exceptions import NoSuchTableError

from coordinator_lib.adapter.client import Client
from coordinator_lib.adapter.coordinator import Config, Coordinator
from coordinator_lib.adapter.iceberg_sink import make_sink
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.read_policy import LagWriteFrontier
from coordinator_lib.server.environment import Environment
from coordinator_lib.sql.plan_iceberg import CreateIcebergSinkPlan
from coordinator_lib.storage.iceberg_sink import committed_upper, open_catalog
from tests.adapter.conftest import fast_config
from tests.sources.conftest import wait_until

Conn = psycopg.Connection[Any]


def _catalog(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "wh").mkdir(exist_ok=True)
    return {"uri": f"sqlite:///{tmp_path / 'catalog.db'}", "warehouse": f"file://{tmp_path / 'wh'}"}


def _start(data: Path) -> Environment:
    env = Environment(fast_config(data), pgwire_port=0, http_port=0)
    env.start()
    return env


def _connect(env: Environment) -> Conn:
    dsn = f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize"
    return psycopg.connect(dsn, autocommit=True)


def _iceberg(
    props: dict[str, str], name: str
) -> tuple[int | None, list[tuple[Any, ...]], list[str]]:
    """(committed upper, rows read by pyiceberg, data files) of table n.<name>."""
    table = open_catalog(props).load_table(("n", name))
    rows = [tuple(r.values()) for r in table.scan().to_arrow().to_pylist()]
    files = [task.file.file_path for task in table.scan().plan_files()]
    return committed_upper(table), rows, files


def _duckdb(files: list[str]) -> list[tuple[Any, ...]]:
    paths = [f.removeprefix("file://") for f in files]
    return duckdb.sql(f"SELECT * FROM read_parquet({paths!r})").fetchall() if paths else []


def _changes(conn: Conn, rng: random.Random) -> None:
    for _ in range(rng.randint(3, 8)):
        k = rng.randint(1, 6)
        roll = rng.random()
        if roll < 0.5:
            conn.execute("INSERT INTO t VALUES (%s, %s)", (k, f"v{rng.randint(0, 9)}"))
        elif roll < 0.75:
            conn.execute("UPDATE t SET v = %s WHERE k = %s", (f"u{rng.randint(0, 9)}", k))
        else:
            conn.execute("DELETE FROM t WHERE k = %s", (k,))


def _check(conn: Conn, props: dict[str, str]) -> None:
    """Each table equals its input at the upper it records (pyiceberg and
    DuckDB agree), and has caught up with the input's current contents."""
    current_view = sorted(conn.execute("SELECT k, n, v FROM per_key").fetchall())
    current_table = Counter(conn.execute("SELECT k, v FROM t").fetchall())

    def caught_up() -> bool:
        try:
            _, up_rows, _ = _iceberg(props, "per_key")
            _, app_rows, _ = _iceberg(props, "changes")
        except NoSuchTableError:  # the sinks have not created them yet
            return False
        consolidated = Counter()
        for k, v, _, diff in app_rows:
            consolidated[(k, v)] += diff
        return sorted(up_rows) == current_view and +consolidated == current_table

    wait_until(caught_up, "the Iceberg tables to catch up")
    upper, rows, files = _iceberg(props, "per_key")
    assert upper is not None
    assert sorted(rows) == sorted(_duckdb(files))
    at = sorted(conn.execute(f"SELECT k, n, v FROM per_key AS OF {upper - 1}").fetchall())
    assert sorted(rows) == at
    upper, rows, files = _iceberg(props, "changes")
    assert upper is not None
    assert sorted(rows) == sorted(_duckdb(files))
    assert all(time < upper for _, _, time, _ in rows)
    consolidated: Counter[tuple[Any, ...]] = Counter()
    for k, v, _, diff in rows:
        consolidated[(k, v)] += diff
    at_t = Counter(conn.execute(f"SELECT k, v FROM t AS OF {upper - 1}").fetchall())
    assert +consolidated == at_t


def test_sinks_match_their_views_across_a_restart(tmp_path: Path) -> None:
    props = _catalog(tmp_path)
    data = tmp_path / "env"
    env = _start(data)
    try:
        with _connect(env) as conn:
            conn.execute(
                f"CREATE CONNECTION ice TO ICEBERG CATALOG (URI '{props['uri']}', "
                f"WAREHOUSE '{props['warehouse']}')"
            )
            conn.execute("CREATE TABLE t (k int, v text) WITH (RETAIN HISTORY FOR '1h')")
            conn.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (2, 'c')")
            conn.execute(
                "CREATE MATERIALIZED VIEW per_key WITH (RETAIN HISTORY FOR '1h') AS "
                "SELECT k, count(*) AS n, max(v) AS v FROM t GROUP BY k"
            )
            conn.execute(
                "CREATE SINK up FROM per_key INTO ICEBERG CATALOG CONNECTION ice "
                "(NAMESPACE 'n', TABLE 'per_key') MODE UPSERT KEY (k)"
            )
            conn.execute(
                "CREATE SINK app FROM t INTO ICEBERG CATALOG CONNECTION ice "
                "(NAMESPACE 'n', TABLE 'changes') MODE APPEND"
            )
            assert conn.execute("SHOW CONNECTIONS").fetchall() == [("ice", "iceberg-catalog")]
            rng = random.Random(11)
            _check(conn, props)
            for _ in range(3):
                _changes(conn, rng)
                _check(conn, props)
        env.stop()
        env = _start(data)  # the sinks resume from the uppers their tables record
        with _connect(env) as conn:
            for _ in range(2):
                _changes(conn, rng)
                _check(conn, props)
            conn.execute("DROP SINK up")
            conn.execute("DROP SINK app")
    finally:
        env.stop()


def test_bad_iceberg_connections_and_sinks(tmp_path: Path) -> None:
    props = _catalog(tmp_path)
    env = _start(tmp_path / "env")
    try:
        with _connect(env) as conn:
            with pytest.raises(psycopg.errors.UndefinedFile, match="is not a directory"):
                conn.execute(
                    f"CREATE CONNECTION ice TO ICEBERG CATALOG (URI '{props['uri']}', "
                    f"WAREHOUSE 'file://{tmp_path / 'missing'}')"
                )
            with pytest.raises(psycopg.errors.SqlclientUnableToEstablishSqlconnection):
                conn.execute(
                    "CREATE CONNECTION ice TO ICEBERG CATALOG (URI 'nosuchdb://x', "
                    f"WAREHOUSE '{props['warehouse']}')"
                )
            assert conn.execute("SHOW CONNECTIONS").fetchall() == []
            conn.execute(
                f"CREATE CONNECTION ice TO ICEBERG CATALOG (URI '{props['uri']}', "
                f"WAREHOUSE '{props['warehouse']}')"
            )
            conn.execute("CREATE TABLE t (k int, v text)")
            conn.execute("CREATE VIEW plain AS SELECT k FROM t")
            with pytest.raises(psycopg.errors.UndefinedColumn, match='column "nope"'):
                conn.execute(
                    "CREATE SINK s FROM t INTO ICEBERG CATALOG CONNECTION ice "
                    "(NAMESPACE 'n', TABLE 't') MODE UPSERT KEY (nope)"
                )
            with pytest.raises(psycopg.errors.WrongObjectType, match="cannot sink view"):
                conn.execute(
                    "CREATE SINK s FROM plain INTO ICEBERG CATALOG CONNECTION ice "
                    "(NAMESPACE 'n', TABLE 't') MODE APPEND"
                )
            with pytest.raises(psycopg.errors.SyntaxError):
                conn.execute(
                    "CREATE SINK s FROM t INTO ICEBERG CATALOG CONNECTION ice "
                    "(NAMESPACE 'n', TABLE 't')"
                )
            objects = "SELECT name, type FROM mz_catalog.mz_objects WHERE id LIKE 'u%' ORDER BY 1"
            assert conn.execute(objects).fetchall() == [
                ("ice", "connection"),
                ("plain", "view"),
                ("t", "table"),
            ]
            assert conn.execute("SHOW SINKS").fetchall() == []
            conn.execute(
                "CREATE SINK s FROM t INTO ICEBERG CATALOG CONNECTION ice "
                "(NAMESPACE 'n', TABLE 't') MODE APPEND"
            )
            shown = conn.execute("SHOW SINKS")
            assert [c.name for c in shown.description or ()] == [
                "name",
                "type",
                "cluster",
                "comment",
            ]
            assert shown.fetchall() == [("s", "iceberg", "quickstart", "")]
    finally:
        env.stop()


def test_a_new_sink_holds_its_start_time_before_compaction_can_pass_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new sink starts at its input's latest readable time. If the input
    compacts past that time between reading it and holding it (another
    process writing with a since that follows the upper closely), the
    durable hold is refused and the sink fails and retries. The time is
    pinned before it is read, so the race is made certain here: right
    before the durable hold, a write moves the upper on under a read policy
    of no lag."""
    props = _catalog(tmp_path)
    coordinator = Coordinator(Config(data_dir=str(tmp_path / "env"), background=False))
    try:
        session = Client(coordinator).startup("materialize")

        def run(sql: str) -> None:
            list(session.execute(sql))

        run(
            f"CREATE CONNECTION ice TO ICEBERG CATALOG (URI '{props['uri']}', "
            f"WAREHOUSE '{props['warehouse']}')"
        )
        run("CREATE TABLE t (k int, v text)")
        run("INSERT INTO t VALUES (1, 'a')")
        run(
            "CREATE SINK app FROM t INTO ICEBERG CATALOG CONNECTION ice "
            "(NAMESPACE 'n', TABLE 'changes') MODE APPEND"
        )
        plans = coordinator.catalog.index.plans
        sink_id = next(id for id, plan in plans.items() if isinstance(plan, CreateIcebergSinkPlan))
        plan = plans[sink_id]
        assert isinstance(plan, CreateIcebergSinkPlan)
        storage = coordinator.storage
        acquire = storage.acquire_dependency_hold
        raced: list[int] = []

        def compaction_first(id: GlobalId, dependent: GlobalId, time: int) -> Any:
            if not raced:
                raced.append(time)
                storage.set_read_policy([(id, LagWriteFrontier(0))])
                run("INSERT INTO t VALUES (2, 'b')")
            return acquire(id, dependent, time)

        monkeypatch.setattr(storage, "acquire_dependency_hold", compaction_first)
        sink, _ = make_sink(storage, coordinator.catalog, sink_id)
        assert sink.step(sink._table())  # its first commit; raised ReadBeforeSince before
        committed, rows, _ = _iceberg(props, "changes")
        assert raced and committed is not None
        as_of = committed - 1
        _, upper = storage.collection_frontiers(plan.from_id)
        assert upper.time is not None and upper.time > committed  # the race happened
        assert rows == [(1, "a", as_of, 1)]  # the input as it was at the start
        session.terminate()
    finally:
        coordinator.close()
