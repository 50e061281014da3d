"""Constants and arithmetic held to a real PostgreSQL over pgwire (psycopg on
both sides): the same value or the same SQLSTATE.

- `E'...'` escape strings (sql/escape_string.py): every escape PostgreSQL's
  scanner knows, invalid UTF-8 and NUL (22021), malformed Unicode escapes;
- real / double precision overflow and underflow (22003, never `inf`);
- numeric within its documented bound (repr/numeric.py: numeric(38, 10)),
  compared with PostgreSQL's `numeric(38, 10)`: many fractional digits
  round, 1e30, 1e40 and 1e100 * 1e100 are 22003 "numeric field overflow",
  never an internal error; division by zero 22012.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures.served import connect, served

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tidemark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[psycopg.Connection[Any]]:
    with served(tmp_path_factory.mktemp("values") / "env") as env, connect(env) as conn:
        conn.execute("CREATE TABLE nums (n numeric, r real, d double precision)")
        conn.execute("INSERT INTO nums VALUES (1e25, 3e38, 1e300), (2.5, 1, 1e-300)")
        yield conn


@pytest.fixture(scope="module")
def postgres(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS nums")
        conn.execute("CREATE TEMP TABLE nums (n numeric(38, 10), r real, d double precision)")
        conn.execute("INSERT INTO nums VALUES (1e25, 3e38, 1e300), (2.5, 1, 1e-300)")
        yield conn


def outcome(conn: psycopg.Connection[Any], query: str) -> tuple[str, Any]:
    """("rows", rows) or ("error", SQLSTATE)."""
    try:
        return "rows", conn.execute(query).fetchall()
    except psycopg.Error as error:
        return "error", error.sqlstate


ESCAPES = [
    r"E'\x41'",
    r"E'caf\xc3\xa9'",
    r"E'\101\102\7'",
    r"E'\u00e9\U0001F600'",
    r"E'\uD83D\uDE00'",
    r"E'\b\f\n\r\t'",
    r"E'\z\\\'q'",
    r"E'it''s'",
    r"e'\x4g\x'",
    r"E'\777\1010'",
    r"E'tab\	x'",
    r"E'\xff'",
    r"E'\xc3'",
    r"E'\xc3\x28'",
    r"E'\x00'",
    r"E'\0'",
    r"E'\400'",
    r"E'\u12'",
    r"E'\U0001F6'",
    r"E'\u0000'",
    r"E'\U00110000'",
    r"E'\uD800'",
    r"E'\uDE00'",
    r"E'\uD83Dx'",
]


@pytest.mark.parametrize("constant", ESCAPES)
def test_escape_strings_as_postgres(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any], constant: str
) -> None:
    query = f"SELECT {constant} AS v, length({constant}) AS n"
    assert outcome(tidemark, query) == outcome(postgres, query)


def test_escape_string_errors_name_the_bytes(tidemark: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.errors.CharacterNotInRepertoire) as caught:
        tidemark.execute(r"SELECT E'ok\xc3\x28'")
    assert caught.value.diag.message_primary == (
        'invalid byte sequence for encoding "UTF8": 0xc3 0x28'
    )
    with pytest.raises(psycopg.errors.InvalidEscapeSequence) as escape:
        tidemark.execute(r"SELECT E'\u12'")
    assert escape.value.diag.message_primary == "invalid Unicode escape"
    assert escape.value.diag.statement_position == "10"


NUMBERS = [
    # real and double precision: overflow and underflow are 22003, never inf / 0.
    "SELECT 1e39::real",
    "SELECT 1e309::float8",
    "SELECT 1e300::float8, 1e-20::float8, -1e-300::float8",
    "SELECT 1e300::float8 * 1e300::float8",
    "SELECT 1e-300::float8 * 1e-300::float8",
    "SELECT 1e300::float8 / 1e-300::float8",
    "SELECT 3.4e38::real * 10::real",
    "SELECT '1e400'::float8",
    "SELECT '-1e400'::float8",
    "SELECT '1e-400'::float8",
    "SELECT '1e39'::real",
    "SELECT '1e-50'::real",
    "SELECT 'Infinity'::float8 * 2",
    "SELECT r * 10::real FROM nums ORDER BY r",
    "SELECT d * d FROM nums ORDER BY d",
    "SELECT 1.5::float8 / 0",
    # numeric, compared with PostgreSQL's numeric(38, 10).
    "SELECT CAST(0.12345678901234 AS {numeric})",
    "SELECT CAST(0.00000000005 AS {numeric}), CAST(-0.00000000005 AS {numeric})",
    "SELECT CAST(1e30 AS {numeric})",
    "SELECT CAST(1e40 AS {numeric})",
    "SELECT CAST(1e100 * 1e100 AS {numeric})",
    "SELECT CAST(9999999999999999999999999999.99999999994 AS {numeric})",
    "SELECT CAST(9999999999999999999999999999.99999999995 AS {numeric})",
    "SELECT CAST('1e30' AS {numeric})",
    "SELECT CAST(n * 1000 AS {numeric}) FROM nums ORDER BY n",
    "SELECT CAST(n * n AS {numeric}) FROM nums ORDER BY n",
    "SELECT CAST(n + 1 AS {numeric}) FROM nums ORDER BY n",
    "SELECT CAST(n / 0 AS {numeric}) FROM nums",
    "SELECT CAST(sum(n + 0.1234567891) AS {numeric}) FROM nums",
    "SELECT CAST(-(n + 0.1234567891) AS {numeric}), abs(-n - 0.1234567891) FROM nums ORDER BY n",
    "SELECT CAST(1.0 / 0 AS {numeric})",
    "SELECT CAST(1e100 AS double precision)",
    "SELECT CAST(1e-100 AS double precision)",
]


@pytest.mark.parametrize("template", NUMBERS)
def test_numbers_as_postgres(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any], template: str
) -> None:
    ours = outcome(tidemark, template.format(numeric="numeric"))
    theirs = outcome(postgres, template.format(numeric="numeric(38, 10)"))
    assert ours == theirs
    assert ours != ("error", "XX000")
