"""Subqueries and outer joins through the coordinator's front door: runtime
errors keep PostgreSQL's SQLSTATE, and a materialized view using both is
stored (its create_sql re-planned) and maintained like any other."""

from __future__ import annotations

import pytest

from coordinator_lib.adapter.errors import AdapterError
from tests.adapter.conftest import Run


def test_runtime_errors_keep_their_sqlstate(sql: Run) -> None:
    sql("CREATE TABLE t (a int, b int)")
    sql("INSERT INTO t VALUES (1, 10), (1, 11), (2, 20)")
    rows = sql("SELECT a, (SELECT b FROM t AS s WHERE s.a = t.a AND s.b > 10) FROM t")
    assert sorted(rows) == [(1, 11), (1, 11), (2, 20)]
    with pytest.raises(AdapterError) as caught:
        sql("SELECT a, (SELECT b FROM t AS s WHERE s.a = t.a) FROM t")
    assert caught.value.code == "21000"
    assert caught.value.message == "more than one record produced in subquery"
    with pytest.raises(AdapterError) as caught:
        sql("SELECT 1 / (a - 1) FROM t")
    assert caught.value.code == "22012"


def test_view_with_subqueries_and_outer_join(sql: Run) -> None:
    sql("CREATE TABLE t (k int, v int)")
    sql("CREATE TABLE u (k int NOT NULL, name text)")
    sql(
        "CREATE MATERIALIZED VIEW mv AS SELECT t.k, u.name, "
        "(SELECT count(*) FROM u AS x WHERE x.k = t.k) AS n, "
        "t.v IN (SELECT k FROM u) AS hit "
        "FROM t LEFT JOIN u ON t.k = u.k WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.v)"
    )
    sql("INSERT INTO t VALUES (1, 5), (2, 1), (3, NULL)")
    sql("INSERT INTO u VALUES (1, 'a'), (4, 'd')")
    assert sorted(sql("SELECT * FROM mv"), key=repr) == sorted(
        [(1, "a", 1, False), (3, None, 0, None)], key=repr
    )
    sql("DELETE FROM u WHERE k = 1")
    assert sorted(sql("SELECT * FROM mv"), key=repr) == sorted(
        [(1, None, 0, False), (2, None, 0, False), (3, None, 0, None)], key=repr
    )
