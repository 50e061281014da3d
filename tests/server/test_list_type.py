"""Materialize's list type over pgwire, as Materialize's documentation
(sql/types/list, sql/functions/list_agg) and its test/sqllogictest/list.slt
(where the two differ, as for an empty slice, list.slt) print its answers: LIST[...],
`'{...}'::int list`, `int list` columns, indexing, slicing, list_length,
list_cat / list_append / list_prepend and `||`, list_agg [ORDER BY], casts,
the text format and the OID (16384, Materialize's `list`; psycopg reads the
value as text). PostgreSQL has no list type, so the answers are the
documented ones; a view of list_agg follows inserts and deletes, held to
the same rule written out in Python. In-process engine
(tests/compute/test_map_engines.py: a list view on Spark and in-process)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures.served import connect, served

pytestmark = pytest.mark.timeout(120)

LIST_OID = 16384


@pytest.fixture(scope="module")
def tidemark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[psycopg.Connection[Any]]:
    with served(tmp_path_factory.mktemp("lists") / "env") as env, connect(env) as conn:
        yield conn


L5 = "LIST[1,2,3,4,5]"
DOCUMENTED = [
    ("SELECT LIST[1, 2, 3]", "{1,2,3}"),
    ("SELECT LIST['a', 'white space', NULL, '', 'x\\y']", '{a,"white space",NULL,"","x\\\\y"}'),
    ("SELECT '{2001-02-03, 2004-05-06}'::date list", "{2001-02-03,2004-05-06}"),
    ("SELECT '{1, NULL}'::int list", "{1,NULL}"),
    (f"SELECT {L5}[2:4]", "{2,3,4}"),
    (f"SELECT {L5}[:3]", "{1,2,3}"),
    (f"SELECT {L5}[3:]", "{3,4,5}"),
    # an empty slice is NULL: Materialize's list.slt (its docs page shows `{}`)
    (f"SELECT {L5}[10:]", None),
    (f"SELECT {L5}[2:1]", None),
    (f"SELECT {L5}[-100:2]", "{1,2}"),
    (f"SELECT {L5}[1:NULL]", None),
    (f"SELECT {L5}[2:10]", "{2,3,4,5}"),
    (f"SELECT {L5}[2:][2:3]", "{3,4}"),
    ("SELECT LIST['a', 'b'][2]", "b"),
    ("SELECT LIST['a', 'b'][5]", None),
    ("SELECT LIST['a', 'b'][0]", None),
    ("SELECT list_length(LIST[1, NULL, 3])", 3),
    ("SELECT list_cat(LIST[1], LIST[2, 3])", "{1,2,3}"),
    ("SELECT LIST[1] || LIST[2, 3]", "{1,2,3}"),
    ("SELECT list_append(LIST[1], 2)", "{1,2}"),
    ("SELECT LIST[1] || 2", "{1,2}"),
    ("SELECT LIST[1] || NULL::int", "{1,NULL}"),
    ("SELECT NULL::int list || 1", "{1}"),  # list.slt: a NULL list takes the element
    ("SELECT list_prepend(NULL::int, NULL::int list)", "{NULL}"),
    ("SELECT LIST[1] || NULL::int list", "{1}"),
    ("SELECT LIST[]::int list", "{}"),
    # list.slt: only `NULL` in capitals is quoted
    (
        "SELECT LIST['foo', 'f}o', '\"\\', NULL, 'null', 'NULL']",
        '{foo,"f}o","\\"\\\\",NULL,null,"NULL"}',
    ),
    ("SELECT list_prepend(0, LIST[1])", "{0,1}"),
    ("SELECT 0 || LIST[1]", "{0,1}"),
    ("SELECT LIST[1.5, NULL, 2.25]::int list", "{2,NULL,2}"),
    ("SELECT LIST[1.5, 2.25]::text", "{1.5,2.25}"),
    ("SELECT length(LIST[1, 22]::text)", 6),
    ("SELECT ARRAY[1, 2]::int list", "{1,2}"),
    ("SELECT LIST[1, 2] = LIST[1, 2]", True),
    # lists order as arrays: element by element, NULL elements last, a prefix first
    ("SELECT LIST[1, 2] < LIST[1, 3]", True),
    ("SELECT LIST[1, NULL] > LIST[1, 5]", True),
    ("SELECT LIST[1] < LIST[1, 0]", True),
    ("SELECT LIST['b'] >= LIST['a', 'z']", True),
    ("SELECT LIST[NULL::int] <= LIST[1]", False),
    (
        "SELECT l::text AS s FROM (VALUES (LIST[1]), (LIST[1, NULL]), (LIST[2]),"
        " (LIST[]::int list), (LIST[1, 2])) AS t(l) ORDER BY l DESC LIMIT 1 OFFSET 1",
        "{1,NULL}",
    ),
    ("SELECT pg_typeof(LIST[1])", "integer list"),
    (
        "SELECT list_agg(x ORDER BY o DESC) FROM (VALUES (1, 1), (NULL, 2), (3, 3)) AS t(x, o)",
        "{3,NULL,1}",
    ),
    ("SELECT list_agg(x) FROM (VALUES ('b'), ('a')) AS t(x) WHERE x > 'z'", None),
    # LIST(subquery): the column in the subquery's order; {} without rows
    ("SELECT LIST(SELECT x FROM (VALUES (2), (NULL), (1)) AS t(x) ORDER BY x)", "{1,2,NULL}"),
    ("SELECT LIST(SELECT x FROM (VALUES ('b'), ('a')) AS t(x) ORDER BY 1 DESC LIMIT 1)", "{b}"),
    ("SELECT LIST(SELECT 1 WHERE false)", "{}"),
]


@pytest.mark.parametrize(("query", "expected"), DOCUMENTED, ids=range(len(DOCUMENTED)))
def test_lists_as_materialize_documents(
    tidemark: psycopg.Connection[Any], query: str, expected: Any
) -> None:
    assert tidemark.execute(query).fetchall() == [(expected,)]


def test_list_columns_are_named_and_typed_as_materialize(
    tidemark: psycopg.Connection[Any],
) -> None:
    """A list goes out as Materialize's `list` (OID 16384), in text; the
    constructor's column is `list`, list_agg's `list_agg`."""
    cursor = tidemark.execute(
        "SELECT LIST[1], '{a}'::text list, list_agg(1), LIST[1][1:1] AS s, list_length(LIST[1])"
    )
    assert cursor.description is not None
    assert [(c.name, c.type_code) for c in cursor.description] == [
        ("list", LIST_OID),
        ("list", LIST_OID),
        ("list_agg", LIST_OID),
        ("s", LIST_OID),
        ("list_length", 23),
    ]
    with tidemark.cursor(binary=True) as binary:  # no binary form: the text
        assert binary.execute("SELECT LIST[1, 2]").fetchall() == [(b"{1,2}",)]


def test_unnest_of_a_list(tidemark: psycopg.Connection[Any]) -> None:
    query = "SELECT * FROM unnest(LIST[3, NULL, 1]) WITH ORDINALITY AS u(x, n) ORDER BY n"
    assert tidemark.execute(query).fetchall() == [(3, 1), (None, 2), (1, 3)]


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("SELECT LIST[1] = ARRAY[1]", psycopg.errors.UndefinedFunction),
        ("SELECT LIST[1] || LIST['a']", psycopg.errors.UndefinedFunction),
        ("SELECT list_length(ARRAY[1])", psycopg.errors.UndefinedFunction),
        ("SELECT LIST[LIST[1]]", psycopg.errors.FeatureNotSupported),
        ("SELECT '{1,x}'::int list", psycopg.errors.InvalidTextRepresentation),
        ("SELECT '{1,2'::int list", psycopg.errors.InvalidTextRepresentation),
    ],
)
def test_bad_list_input_is_refused(
    tidemark: psycopg.Connection[Any], query: str, error: type[Exception]
) -> None:
    with pytest.raises(error) as info:
        tidemark.execute(query)
    if "'{1,2'" in query:  # Materialize's word
        assert 'malformed list literal: "{1,2"' in str(info.value)


def _expected(rows: dict[int, tuple[int, int | None]]) -> list[tuple[int, str, int, str]]:
    """list_agg(v ORDER BY id DESC) per g, its length and its first two, by the documented rules."""
    out = []
    for g in sorted({g for g, _ in rows.values()}):
        values = [v for id, (h, v) in sorted(rows.items(), reverse=True) if h == g]
        shown = ["NULL" if v is None else str(v) for v in values]
        out.append((g, "{" + ",".join(shown) + "}", len(values), "{" + ",".join(shown[:2]) + "}"))
    return out


def test_list_view_follows_writes(tidemark: psycopg.Connection[Any]) -> None:
    """A view of list_agg over an `int list` column's elements, maintained as
    rows come and go, equals the documented rule at each step."""
    tidemark.execute("CREATE TABLE lt (id int, g int, l int list)")
    tidemark.execute(
        "CREATE MATERIALIZED VIEW lt_lists AS SELECT g, list_agg(l[1] ORDER BY id DESC) AS vs,"
        " list_length(list_agg(id)) AS n, list_agg(l[1] ORDER BY id DESC)[:2] AS firsts"
        " FROM lt GROUP BY g"
    )
    rows: dict[int, tuple[int, int | None]] = {}
    steps: list[tuple[list[tuple[int, int, str | None]], list[int]]] = [
        ([(1, 1, "{10,11}"), (2, 1, "{20}"), (3, 2, None)], []),
        ([(4, 1, "{}"), (5, 2, "{50,NULL}")], [2]),
        ([(6, 1, "{60}")], [3, 4]),
    ]
    for inserted, deleted in steps:
        values = ", ".join(["(%s, %s, %s::int list)"] * len(inserted))
        tidemark.execute(f"INSERT INTO lt VALUES {values}", [v for r in inserted for v in r])
        if deleted:
            tidemark.execute(f"DELETE FROM lt WHERE id IN ({', '.join(map(str, deleted))})")
        for id, g, text in inserted:
            first = None if text is None or text == "{}" else int(text[1:-1].split(",")[0])
            rows[id] = (g, first)
        for id in deleted:
            del rows[id]
        got = tidemark.execute("SELECT g, vs, n, firsts FROM lt_lists ORDER BY g").fetchall()
        assert got == _expected(rows)
