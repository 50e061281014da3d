"""A real server (coordinator, pgwire, HTTP) on loopback without Spark, for
the ways users load data: client parameters, COPY, many writers."""

from __future__ import annotations

from coordinator_lib.server.environment import Environment


def dsn(env: Environment) -> str:
    return f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize"


def url(env: Environment, driver: str) -> str:
    """A SQLAlchemy URL for `driver` (psycopg, pg8000)."""
    return f"postgresql+{driver}://materialize@127.0.0.1:{env.pgwire.port}/materialize"
