"""A real server (coordinator, pgwire, HTTP) on loopback without Spark, for
the ways users load data: client parameters, COPY, many writers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config


@pytest.fixture
def environment(tmp_path: Path) -> Iterator[Environment]:
    env = Environment(fast_config(tmp_path / "env"), pgwire_port=0, http_port=0)
    env.start()
    try:
        yield env
    finally:
        env.stop()


def dsn(env: Environment) -> str:
    return f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize"


def url(env: Environment, driver: str) -> str:
    """A SQLAlchemy URL for `driver` (psycopg, pg8000)."""
    return f"postgresql+{driver}://materialize@127.0.0.1:{env.pgwire.port}/materialize"
