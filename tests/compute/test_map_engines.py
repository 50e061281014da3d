"""Materialized views of Materialize's maps and lists on both engines: one
of map_agg, MAP[...] and the map operators, one of list_agg, the list
functions and string_agg ordered by another column. Stepped on Spark, then
in-process while rows come and go (the in-process step retracts what Spark
wrote), their contents printed as pgwire prints them and held to
Materialize's documented rules (tests/server/test_map_operators.py and
test_list_type.py write them out). A switch of engines only works if both
compute the same values. One session and one step per engine for both
views: a Spark step costs seconds."""

from __future__ import annotations

import decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.compute.sql_session import SqlSession
from tests.compute.test_interval_engines import _ours
from tests.server.test_map_operators import _maps, _text

pytestmark = [pytest.mark.spark]

# After `built`: maps of integers, numerics and maps (map[text=>T]), and text
# read as a map per row (in the same view: a view more is a Spark step more).
VIEW = (
    "SELECT g, m, m @> '{a=>1}' AS a1, m ?& '{a,b}'::text[] AS ab, m ?| ARRAY['c'] AS c,"
    " '{b=>2}' <@ m AS b2, map_length(m) AS n, MAP['g' => g, g => 'x'] AS built,"
    " mi, (mi -> 'a') + 1 AS ia1, map_length(mi) AS ni, h, MAP[g => mi] AS nested,"
    " mi @> '{b=>2}' AS ib2, total"
    " FROM (SELECT (id % 2)::text AS g, map_agg(k, v ORDER BY o) AS m,"
    " map_agg(k, o ORDER BY o) AS mi, map_agg(k, o / 4.0 ORDER BY o) AS h,"
    " sum(('{x=>' || o || '}')::map[text=>int] -> 'x') AS total FROM kv GROUP BY 1) AS s"
)
LIST_VIEW = (
    "SELECT g, vs, list_length(vs) AS n, vs[2:] AS rest, vs || 0 AS appended,"
    " list_cat(vs, '{7}'::int list)[1] AS head, s FROM (SELECT id % 2 AS g,"
    " list_agg(v ORDER BY id DESC) AS vs, string_agg(t, '-' ORDER BY id DESC) AS s"
    " FROM lt GROUP BY 1) AS q"
)
Row = tuple[int, str | None, str | None, int]
STEPS: list[tuple[list[Row], list[int]]] = [
    ([(1, "a", "1", 1), (2, "b", "2", 2), (3, "b", "2", 3)], []),
    ([(5, "a", "9", 5), (4, None, "x", 4), (6, "c", None, 6), (7, "c", "3", 7)], [2]),
]
ListRow = tuple[int, int | None, str | None]
LIST_STEPS: list[tuple[list[ListRow], list[int]]] = [
    ([(1, 10, "a"), (2, 20, "b"), (3, None, "c")], []),
    ([(4, 40, None), (5, 50, "e")], [1]),
]


def _sql(value: object) -> str:
    return "NULL" if value is None else f"'{value}'" if isinstance(value, str) else str(value)


def _write(session: SqlSession, table: str, inserted: list, deleted: list[int]) -> None:
    values = ", ".join(f"({', '.join(map(_sql, r))})" for r in inserted)
    session.execute(f"INSERT INTO {table} VALUES {values}")
    if deleted:
        session.execute(f"DELETE FROM {table} WHERE id IN ({', '.join(map(str, deleted))})")


def test_map_and_list_views_on_both_engines(spark: SparkSession, tmp_path: Path) -> None:
    session = SqlSession(spark, tmp_path, engine="spark")
    try:
        session.execute("CREATE TABLE kv (id int, k text, v text, o int)")
        session.execute("CREATE TABLE lt (id int, v int, t text)")
        session.execute(f"CREATE MATERIALIZED VIEW kv_view AS {VIEW}")
        session.execute(f"CREATE MATERIALIZED VIEW lt_view AS {LIST_VIEW}")
        id, list_id = session.views
        rows: dict[int, tuple[str | None, str | None, int]] = {}
        list_rows: dict[int, tuple[int | None, str | None]] = {}
        for engine, (inserted, deleted), (list_inserted, list_deleted) in zip(
            ["spark", "local"], STEPS, LIST_STEPS, strict=True
        ):
            session.set_engine(engine)
            _write(session, "kv", inserted, deleted)
            _write(session, "lt", list_inserted, list_deleted)
            rows |= {r[0]: r[1:] for r in inserted}
            for gone in deleted:
                del rows[gone]
            list_rows |= {r[0]: r[1:] for r in list_inserted}
            for gone in list_deleted:
                del list_rows[gone]
            session.step()
            assert dict(_ours(session, list_id)) == _lists(list_rows), engine
            typed = _typed(rows)
            expected = {
                (
                    g,
                    _text(m),
                    *("t" if b else "f" for b in _tests(m)),
                    str(len(m)),
                    _text({"g": g, g: "x"}),
                    *typed[g],
                ): 1
                for g, m in _maps(rows).items()
            }
            assert dict(_ours(session, id)) == expected, engine
    finally:
        session.close()


def _typed(rows: dict[int, tuple[str | None, str | None, int]]) -> dict[str, tuple]:
    """VIEW's columns after `built` per group, by Materialize's documented
    rules (map_agg's: a NULL key left out, of equal keys the value last in
    the ORDER BY)."""
    out = {}
    for g in sorted({str(id % 2) for id in rows}):
        group = sorted((o, k) for id, (k, _v, o) in rows.items() if str(id % 2) == g)
        m = {k: o for o, k in group if k is not None}
        shown = _text({k: str(o) for k, o in m.items()})
        quarters = _text({k: f"{decimal.Decimal(o) / 4:f}" for k, o in m.items()})
        a1 = None if "a" not in m else str(m["a"] + 1)
        b2 = "t" if m.get("b") == 2 else "f"
        nested = "{" + g + "=>" + shown + "}"
        total = str(sum(o for o, _k in group))
        out[g] = (shown, a1, str(len(m)), quarters, nested, b2, total)
    return out


def _tests(m: dict[str, str | None]) -> tuple[bool, ...]:
    return (m.get("a") == "1", "a" in m and "b" in m, "c" in m, m.get("b") == "2")


def _list_text(values: list[int | None]) -> str:
    return "{" + ",".join("NULL" if v is None else str(v) for v in values) + "}"


def _lists(rows: dict[int, tuple[int | None, str | None]]) -> dict[tuple, int]:
    """LIST_VIEW's rows by Materialize's documented rules."""
    out = {}
    for g in sorted({id % 2 for id in rows}):
        ids = sorted((id for id in rows if id % 2 == g), reverse=True)
        vs = [rows[id][0] for id in ids]
        texts = [t for t in (rows[id][1] for id in ids) if t is not None]
        head = None if vs[0] is None else str(vs[0])
        rest = _list_text(vs[1:]) if len(vs) > 1 else None  # an empty slice is NULL
        shown = (_list_text(vs), str(len(vs)), rest, _list_text([*vs, 0]))
        out[(str(g), *shown, head, "-".join(texts) or None)] = 1
    return out
