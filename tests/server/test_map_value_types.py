"""Materialize's `map[text=>T]` with values other than text, over pgwire:
the examples of Materialize's documentation (sql/types/map: MAP[...] of
integers, numerics and maps, `->` chained through maps of maps and giving
the value type, `@>`, `<@`, `?`, `?&`, `?|`, map_length, text input of
`map[text=>double]` and of nested maps), map_agg of such values, and a
materialized view of them across INSERT and DELETE held to the same rules
written out in Python. PostgreSQL has no map type, so the answers are the
documented ones. In-process engine (test_map_engines runs Spark)."""

from __future__ import annotations

import decimal
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures.served import connect, served

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tidemark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[psycopg.Connection[Any]]:
    with served(tmp_path_factory.mktemp("typed_maps") / "env") as env, connect(env) as conn:
        yield conn


D = decimal.Decimal
DOCUMENTED = [
    # sql/types/map, "Construction" and "text to map casts"
    ("SELECT MAP['a' => 1, 'b' => 2]::text", "{a=>1,b=>2}"),
    ("SELECT MAP['a' => MAP['b' => 'c']]::text", "{a=>{b=>c}}"),
    ("SELECT '{a=>123.4, b=>111.1}'::map[text=>double precision]::text", "{a=>123.4,b=>111.1}"),
    (
        "SELECT '{a=>{b=>{c=>d}}}'::map[text=>map[text=>map[text=>text]]]::text",
        "{a=>{b=>{c=>d}}}",
    ),
    # "Retrieve value with key": the value is of the map's value type
    ("SELECT MAP['a' => 1, 'b' => 2] -> 'a'", 1),
    ("SELECT MAP['a' => 1, 'b' => 2] -> 'c'", None),
    ("SELECT MAP['a' => MAP['b' => 1], 'c' => MAP['d' => 2]] -> 'a' -> 'b'", 1),
    ("SELECT (MAP['a' => 1, 'b' => 2] -> 'a') + 1", 2),
    ("SELECT MAP['a' => 1.9, 'b' => 2.0] -> 'b'", D("2")),
    ("SELECT MAP['a' => 1.9, 'b' => 2.0]::text", "{a=>1.9,b=>2}"),
    # the operators' examples
    ("SELECT MAP['a' => 1, 'b' => 2] @> MAP['a' => 1]", True),
    ("SELECT MAP['a' => 1, 'b' => 2] <@ MAP['a' => 1]", False),
    ("SELECT MAP['a' => 1.9, 'b' => 2.0] ? 'a'", True),
    ("SELECT MAP['a' => MAP['aa' => 1.9], 'b' => MAP['bb' => 2.0]] ? 'aa'", False),
    ("SELECT MAP['a' => 1, 'b' => 2] ?& ARRAY['b', 'a']", True),
    ("SELECT MAP['a' => 1, 'b' => 2] ?& ARRAY['c', 'b']", False),
    ("SELECT MAP['a' => 1, 'b' => 2] ?| ARRAY['c', 'b']", True),
    ("SELECT MAP['a' => 1, 'b' => 2] ?| ARRAY['c', 'd', '1']", False),
    ("SELECT map_length(MAP['a' => 1, 'b' => 2])", 2),
    # text input read by the value type: equal values are equal maps
    ("SELECT '{a=>1.50, b=>NULL}'::map[text=>numeric] = MAP['a' => 1.5, 'b' => NULL]", True),
    ("SELECT '{a=>1.50}'::map[text=>numeric] @> '{a=>1.5}'", True),
    ("SELECT '{a=>\"{\\\"x\\\": [1, 2]}\"}'::map[text=>jsonb] -> 'a' -> 'x'", [1, 2]),
    ("SELECT '{a=>{b=>1}, c=>{}}'::map[text=>map[text=>int]] -> 'a' -> 'b'", 1),
    ("SELECT '{a=>{b=>1}, c=>{}}'::map[text=>map[text=>int]]::text", "{a=>{b=>1},c=>{}}"),
    ("SELECT ('{x=>' || 7 || '}')::map[text=>bigint] -> 'x'", 7),
    (
        "SELECT map_agg(k, v ORDER BY o)::text FROM (VALUES ('a', 1, 1), ('b', 2, 2),"
        " ('a', 3, 3), (NULL, 4, 4), ('c', NULL, 5)) AS t(k, v, o)",
        "{a=>3,b=>2,c=>NULL}",
    ),
    ("SELECT map_agg(k, v) -> 'a' FROM (VALUES ('a', 2.50)) AS t(k, v)", D("2.5")),
]


@pytest.mark.parametrize(("query", "expected"), DOCUMENTED, ids=range(len(DOCUMENTED)))
def test_typed_maps_as_materialize_documents(
    tidemark: psycopg.Connection[Any], query: str, expected: Any
) -> None:
    assert tidemark.execute(query).fetchall() == [(expected,)]


def test_bad_values_are_refused(tidemark: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.errors.InvalidTextRepresentation, match="type integer"):
        tidemark.execute("SELECT '{a=>x}'::map[text=>int]")
    with pytest.raises(psycopg.errors.InvalidTextRepresentation, match="type map"):
        tidemark.execute("SELECT '{a=>1}'::map[text=>map[text=>int]]")


Row = tuple[int, str | None, int | None, str | None]


def _expected(rows: dict[int, tuple[str | None, int | None, str | None]]) -> list[tuple]:
    """The view's rows by Materialize's documented rules: per group g the map
    of k to v (a NULL key left out, of equal keys the value of the highest
    id), its value at 'a' plus one, its length, and the map of g to it."""
    out = []
    for g in sorted({id % 2 for id in rows}):
        entries: dict[str, int | None] = {}
        prices: dict[str, decimal.Decimal | None] = {}
        for id in sorted(i for i in rows if i % 2 == g):
            k, v, p = rows[id]
            if k is not None:
                entries[k] = v
                prices[k] = None if p is None else D(p)
        ints = _text({k: None if v is None else str(v) for k, v in entries.items()})
        nums = _text({k: None if v is None else f"{v.normalize():f}" for k, v in prices.items()})
        a = entries.get("a")
        out.append((g, ints, None if a is None else a + 1, len(entries), nums, f"{{{g}=>{ints}}}"))
    return out


def _text(entries: dict[str, str | None]) -> str:
    shown = ",".join(f"{k}=>{'NULL' if v is None else v}" for k, v in sorted(entries.items()))
    return "{" + shown + "}"


def test_view_of_typed_maps_follows_writes(tidemark: psycopg.Connection[Any]) -> None:
    tidemark.execute("CREATE TABLE tkv (id int, k text, v int, p numeric)")
    tidemark.execute(
        "CREATE MATERIALIZED VIEW tkv_maps AS SELECT g, m::text AS m, (m -> 'a') + 1 AS a1,"
        " map_length(m) AS n, ps::text AS ps, MAP[g::text => m]::text AS nested FROM"
        " (SELECT id % 2 AS g, map_agg(k, v ORDER BY id) AS m, map_agg(k, p ORDER BY id) AS ps"
        " FROM tkv GROUP BY 1) AS s"
    )
    steps: list[tuple[list[tuple], list[int]]] = [
        ([(1, "a", 1, "1.50"), (2, "b", 2, "2"), (3, "b", None, "0.10")], []),
        ([(5, "a", 9, None), (4, None, 4, "4"), (6, "c", 6, "6.000"), (7, "a", 7, "7.7")], [2]),
        ([], [7, 3]),
    ]
    rows: dict[int, tuple[str | None, int | None, str | None]] = {}
    for inserted, deleted in steps:
        if inserted:
            values = ", ".join(["(%s, %s, %s, %s::numeric)"] * len(inserted))
            tidemark.execute(f"INSERT INTO tkv VALUES {values}", [v for r in inserted for v in r])
        if deleted:
            tidemark.execute(f"DELETE FROM tkv WHERE id IN ({', '.join(map(str, deleted))})")
        rows |= {r[0]: r[1:] for r in inserted}
        for id in deleted:
            del rows[id]
        got = tidemark.execute("SELECT g, m, a1, n, ps, nested FROM tkv_maps ORDER BY g")
        assert got.fetchall() == _expected(rows)
