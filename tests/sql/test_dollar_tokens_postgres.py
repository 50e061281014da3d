"""`$` read as PostgreSQL reads it, held to a real PostgreSQL 15 (the
`postgres_url` fixture): parameters `$n` in any spacing, dollar quotes with
and without tags, and the texts in between (`$1$`, `$$` unterminated, `$a`,
`$1abc`, identifiers containing `$`).

Each example is `SELECT <items>` with items built from `$`-heavy pieces.
PostgreSQL prepares it with nine text parameters and executes it with
'v1' .. 'v9'; Tidemark parses it. Both must agree on whether it is a syntax
error (42601), and where PostgreSQL returns a row, Tidemark's select list
must be the same string constants and parameters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from coordinator_lib.sql.dialect import parse_sql
from coordinator_lib.sql.errors import ParseError

PARAMS = 9
TAG = st.from_regex(r"\A(|[a-zé_][a-z0-9é_]{0,2})\Z")
BODY = st.lists(
    st.sampled_from(["$", "1", "a", "_", " ", ",", "'", "\n", "$$", "$1"]), max_size=8
).map("".join)
# No bare commas or quotes: a trailing comma in a select list and `z 'x'`
# (a typed literal in PostgreSQL) are sqlglot's differences, not the
# tokenizer's.
PIECES = ["$", "$$", "$1", "$12", "$a", "a$", "$a$", "$1$", " ", "z", "$_$", "é", "$é$"]


@st.composite
def dollar_quoted(draw: st.DrawFn) -> str:
    tag = draw(TAG)
    close = draw(st.sampled_from([f"${tag}$", f"${tag}$", "$$", "$x$", ""]))
    return f"${tag}${draw(BODY)}{close}"


ITEM = st.one_of(
    dollar_quoted(),
    st.integers(1, 12).map(lambda n: f"${n}"),
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=4).map("".join).filter(str.strip),
)


@pytest.fixture(scope="module")
def pg(postgres_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


def postgres_outcome(pg: psycopg.Connection, select: str) -> tuple[str, Any]:
    types = ", ".join(["text"] * PARAMS)
    values = ", ".join(f"'v{n}'" for n in range(1, PARAMS + 1))
    try:
        pg.execute(f"PREPARE fuzz ({types}) AS {select}")
    except psycopg.Error as error:
        return ("syntax", None) if error.sqlstate == "42601" else ("other", error.sqlstate)
    try:
        row = pg.execute(f"EXECUTE fuzz ({values})").fetchone()
        return ("row", tuple(row or ()))
    except psycopg.Error as error:
        return ("other", error.sqlstate)
    finally:
        pg.execute("DEALLOCATE fuzz")


def tidemark_outcome(select: str) -> tuple[str, Any]:
    try:
        statements = parse_sql(select)
    except ParseError:
        return ("syntax", None)
    if len(statements) != 1 or not isinstance(statements[0], exp.Select):
        return ("other", None)
    values: list[str | int] = []
    for item in statements[0].expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Literal) and node.is_string:
            values.append(node.this)
        elif isinstance(node, exp.Literal) and node.this.isdigit():
            values.append(int(node.this))  # `$$$$,1`: an unclosed quote's body
        elif isinstance(node, exp.Parameter) and 1 <= int(node.name) <= PARAMS:
            values.append(f"v{node.name}")
        else:
            return ("other", None)  # a column, or a parameter PostgreSQL has no value for
    return ("row", tuple(values))


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(items=st.lists(ITEM, min_size=1, max_size=3), sep=st.sampled_from([",", ", ", " ,"]))
def test_dollar_tokens_match_postgres(pg: psycopg.Connection, items: list[str], sep: str) -> None:
    select = "SELECT " + sep.join(items)
    expected = postgres_outcome(pg, select)
    got = tidemark_outcome(select)
    if expected[0] == "other":  # a semantic error in PostgreSQL: not a syntax error here
        assert got[0] != "syntax", select
    else:
        assert got == expected, select


@pytest.mark.parametrize(
    "select",
    [
        "SELECT $1,$2,$3",
        "SELECT $$a$$,$1",
        "SELECT $t$ $1 $$ $t$,$2",
        "SELECT $1$",
        "SELECT $1abc",
        "SELECT 1a",  # PostgreSQL 15: trailing junk after numeric literal
        "SELECT $$$x$,$$,1a$$",  # the same after a dollar quote (found by the test above)
        "SELECT $$$$,,a$$",  # an empty list item is a syntax error (found by the test above)
        "SELECT 1,,2",
        "SELECT coalesce(,1)",
        "SELECT $a",
        "SELECT $$never closed",
        "SELECT a$1",
        "SELECT $_$x$_$",
        "SELECT a$ $$$$",  # a typed literal of type `a$`: PostgreSQL's 42704, not a syntax error
        "SELECT foo 'x'",
        "SELECT $$$$,1",
    ],
)
def test_dollar_examples_match_postgres(pg: psycopg.Connection, select: str) -> None:
    expected = postgres_outcome(pg, select)
    got = tidemark_outcome(select)
    if expected[0] == "other":
        assert got[0] != "syntax", select
    else:
        assert got == expected, select
