"""A materialized view of map_agg and the map operators on both engines:
stepped on Spark, then in-process while rows come and go (the in-process
step retracts what Spark wrote), its contents printed as pgwire prints
them and held to Materialize's documented rules
(tests/server/test_map_operators.py writes them out). A switch of engines
only works if both compute the same maps."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.compute.sql_session import SqlSession
from tests.compute.test_interval_engines import _ours
from tests.server.test_map_operators import _maps, _text

pytestmark = [pytest.mark.spark]

VIEW = (
    "SELECT g, m, m @> '{a=>1}' AS a1, m ?& '{a,b}'::text[] AS ab, m ?| ARRAY['c'] AS c,"
    " '{b=>2}' <@ m AS b2, map_length(m) AS n FROM (SELECT (id % 2)::text AS g,"
    " map_agg(k, v ORDER BY o) AS m FROM kv GROUP BY 1) AS s"
)
Row = tuple[int, str | None, str | None, int]
STEPS: list[tuple[list[Row], list[int]]] = [
    ([(1, "a", "1", 1), (2, "b", "2", 2), (3, "b", "2", 3)], []),
    ([(5, "a", "9", 5), (4, None, "x", 4), (6, "c", None, 6), (7, "c", "3", 7)], [2]),
]


def _sql(value: object) -> str:
    return "NULL" if value is None else f"'{value}'" if isinstance(value, str) else str(value)


def test_map_view_on_both_engines(spark: SparkSession, tmp_path: Path) -> None:
    session = SqlSession(spark, tmp_path, engine="spark")
    try:
        session.execute("CREATE TABLE kv (id int, k text, v text, o int)")
        session.execute(f"CREATE MATERIALIZED VIEW kv_view AS {VIEW}")
        (id,) = session.views
        rows: dict[int, tuple[str | None, str | None, int]] = {}
        for engine, (inserted, deleted) in zip(["spark", "local"], STEPS, strict=True):
            session.set_engine(engine)
            if inserted:
                values = ", ".join(f"({', '.join(map(_sql, r))})" for r in inserted)
                session.execute(f"INSERT INTO kv VALUES {values}")
            if deleted:
                session.execute(f"DELETE FROM kv WHERE id IN ({', '.join(map(str, deleted))})")
            rows |= {r[0]: r[1:] for r in inserted}
            for gone in deleted:
                del rows[gone]
            session.step()
            expected = {
                (g, _text(m), *("t" if b else "f" for b in _tests(m)), str(len(m))): 1
                for g, m in _maps(rows).items()
            }
            assert dict(_ours(session, id)) == expected, engine
    finally:
        session.close()


def _tests(m: dict[str, str | None]) -> tuple[bool, ...]:
    return (m.get("a") == "1", "a" in m and "b" in m, "c" in m, m.get("b") == "2")
