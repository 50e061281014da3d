"""Materialize's map operators and map_agg over pgwire, as Materialize's
documentation (sql/types/map, sql/functions/map_agg) describes them:
`a @> b` (every entry of b is in a), `a <@ b`, `m ? key`, `m ?& keys` (all
of a text[]), `m ?| keys` (any), map_length, and map_agg (a NULL key left
out, of equal keys the value last in the ORDER BY). PostgreSQL has no map
type, so the answers are the documented ones; a materialized view over a
table of maps and one of map_agg follow inserts and deletes, held to the
same rules written out in Python. In-process engine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures.served import connect, served

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tidemark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[psycopg.Connection[Any]]:
    with served(tmp_path_factory.mktemp("maps") / "env") as env, connect(env) as conn:
        yield conn


M = "'{a=>1, b=>2}'::map[text=>text]"
DOCUMENTED = [
    (f"SELECT {M} @> '{{a=>1}}'::map[text=>text]", True),
    (f"SELECT {M} @> '{{a=>2}}'::map[text=>text]", False),
    (f"SELECT {M} <@ '{{a=>1}}'::map[text=>text]", False),
    (f"SELECT '{{a=>1}}'::map[text=>text] <@ {M}", True),
    (f"SELECT {M} ? 'a'", True),
    (f"SELECT {M} ?& '{{a, b}}'::text[]", True),
    (f"SELECT {M} ?& ARRAY['a', 'c']", False),
    (f"SELECT {M} ?| '{{c, b}}'::text[]", True),
    (f"SELECT {M} ?| ARRAY['c']", False),
    (f"SELECT map_length({M})", 2),
    # a NULL value is a value: {a=>NULL} contains {a=>NULL}, not {a=>1}
    ("SELECT '{a=>NULL}'::map[text=>text] @> '{a=>NULL}'", True),
    ("SELECT '{a=>NULL}'::map[text=>text] @> '{a=>1}'", False),
    (
        "SELECT map_agg(k, v ORDER BY o)::text FROM (VALUES ('a', '1', 1), ('b', '2', 2),"
        " ('a', '3', 3), (NULL, '4', 4), ('c', NULL, 5)) AS t(k, v, o)",
        "{a=>3,b=>2,c=>NULL}",
    ),
    (
        "SELECT map_agg(k, v ORDER BY o DESC)::text FROM (VALUES ('a', '1', 1), ('a', '3', 3))"
        " AS t(k, v, o)",
        "{a=>1}",
    ),
    # MAP[...] (sql/types/map's examples, with text values: Tidemark's maps hold text)
    ("SELECT MAP['a' => '1', 'b' => '2']::text", "{a=>1,b=>2}"),
    ("SELECT MAP['a' => '1', 'b' => '2'] -> 'a'", "1"),
    ("SELECT MAP['a' => '1', 'b' => '2'] -> 'c'", None),
    ("SELECT MAP['a' => '1', 'b' => '2'] @> MAP['a' => '1']", True),
    ("SELECT MAP['a' => '1', 'b' => '2'] <@ MAP['a' => '1']", False),
    ("SELECT MAP['a' => '1', 'b' => '2'] ?& ARRAY['b', 'a']", True),
    ("SELECT MAP['a' => '1', 'b' => '2'] ?| ARRAY['c', 'd', '1']", False),
    ("SELECT map_length(MAP['a' => '1', 'b' => '2'])", 2),
    # the last value of a key wins (a NULL key is left out, as map_agg does)
    ("SELECT MAP['a' => '1', 'a' => '3', NULL => 'x', 'c' => NULL]::text", "{a=>3,c=>NULL}"),
]


@pytest.mark.parametrize(("query", "expected"), DOCUMENTED, ids=range(len(DOCUMENTED)))
def test_map_operators_as_materialize_documents(
    tidemark: psycopg.Connection[Any], query: str, expected: Any
) -> None:
    assert tidemark.execute(query).fetchall() == [(expected,)]


def test_operators_name_no_column(tidemark: psycopg.Connection[Any]) -> None:
    """An operator's column is `?column?`, as in Materialize and PostgreSQL."""
    description = tidemark.execute(f"SELECT {M} ?& ARRAY['a'], {M} @> {M}").description
    assert description is not None
    assert [c.name for c in description] == ["?column?", "?column?"]


def test_maps_of_other_values_are_refused(tidemark: psycopg.Connection[Any]) -> None:
    """Value types Tidemark has no map type for (ScalarType names each one)."""
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="map_agg of date values"):
        tidemark.execute("SELECT map_agg(k, o) FROM (VALUES ('a', DATE '2026-01-01')) AS t(k, o)")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="MAP values of type date"):
        tidemark.execute("SELECT MAP['a' => DATE '2026-01-01']")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="MAP\\(subquery\\)"):
        tidemark.execute("SELECT MAP(SELECT 'a', 'b')")


def _maps(
    rows: dict[int, tuple[str | None, str | None, int]],
) -> dict[str, dict[str, str | None]]:
    """map_agg(k, v ORDER BY o) per group, by the documented rule."""
    out: dict[str, dict[str, str | None]] = {}
    for g, (k, v, _o) in sorted(rows.items(), key=lambda item: item[1][2]):
        entries = out.setdefault(str(g % 2), {})
        if k is not None:
            entries[k] = v
    return out


def test_views_follow_writes(tidemark: psycopg.Connection[Any]) -> None:
    """A view of map_agg per group and of the operators on it, maintained
    as rows come and go, equals the documented rule at each step."""
    tidemark.execute("CREATE TABLE kv (id int, k text, v text, o int)")
    tidemark.execute(
        "CREATE MATERIALIZED VIEW kv_maps AS SELECT (id % 2)::text AS g,"
        " map_agg(k, v ORDER BY o) AS m FROM kv GROUP BY 1"
    )
    tidemark.execute(
        "CREATE MATERIALIZED VIEW kv_tests AS SELECT g, m @> '{a=>1}' AS a1, m ?& '{a,b}'::text[]"
        " AS ab, m ?| ARRAY['c'] AS c, '{b=>2}' <@ m AS b2, map_length(m) AS n FROM kv_maps"
    )
    tidemark.execute(
        "CREATE MATERIALIZED VIEW kv_built AS SELECT id, MAP[k => v, 'id' => id::text]::text AS m"
        " FROM kv"
    )
    Row = tuple[int, str | None, str | None, int]
    steps: list[tuple[list[Row], list[int]]] = [
        ([(1, "a", "1", 1), (2, "b", "2", 2), (3, "b", "2", 3)], []),
        ([(5, "a", "9", 5), (4, None, "x", 4), (6, "c", None, 6)], []),
        ([], [5, 2]),
    ]
    rows: dict[int, tuple[str | None, str | None, int]] = {}
    for inserted, deleted in steps:
        if inserted:
            values = ", ".join(["(%s, %s, %s, %s)"] * len(inserted))
            tidemark.execute(f"INSERT INTO kv VALUES {values}", [v for r in inserted for v in r])
        if deleted:
            tidemark.execute(f"DELETE FROM kv WHERE id IN ({', '.join(map(str, deleted))})")
        rows |= {r[0]: r[1:] for r in inserted}
        for id in deleted:
            del rows[id]
        expected = _maps(rows)
        maps = tidemark.execute("SELECT g, m::text FROM kv_maps").fetchall()
        assert sorted(maps) == sorted((g, _text(m)) for g, m in expected.items())
        built = tidemark.execute("SELECT id, m FROM kv_built").fetchall()
        assert sorted(built) == sorted(
            (id, _text({"id": str(id)} if k is None else {k: v, "id": str(id)}))
            for id, (k, v, _o) in rows.items()
        )
        tests = tidemark.execute("SELECT g, a1, ab, c, b2, n FROM kv_tests").fetchall()
        assert sorted(tests) == sorted(
            (g, m.get("a") == "1", "a" in m and "b" in m, "c" in m, m.get("b") == "2", len(m))
            for g, m in expected.items()
        )


def _text(entries: dict[str, str | None]) -> str:
    """Materialize's text of a map (keys in order; these keys and values print bare)."""
    shown = ",".join(f"{k}=>{'NULL' if v is None else v}" for k, v in sorted(entries.items()))
    return "{" + shown + "}"
