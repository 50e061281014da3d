"""A coordinator on a fresh environment, and sessions on it (no servers:
the adapter's own front door, `SessionClient`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator_lib.adapter.client import Handle, SessionClient, serve
from tests.fixtures.served import fast_config

__all__ = ["fast_config", "run_on"]


@pytest.fixture
def handle(tmp_path: Path, spark: Any) -> Iterator[Handle]:
    handle = serve(fast_config(tmp_path / "env"), spark)
    try:
        yield handle
    finally:
        handle.shutdown()


Run = Callable[[str], list[tuple[Any, ...]]]


def run_on(session: SessionClient) -> Run:
    """Run SQL text; the rows of the last statement that returned rows."""

    def run(sql: str) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        for response in session.execute(sql):
            if response.rows is not None:
                rows = list(response.rows)
        return rows

    return run


@pytest.fixture
def session(handle: Handle) -> Iterator[SessionClient]:
    session = handle.client.startup("materialize", "materialize")
    try:
        yield session
    finally:
        session.terminate()


@pytest.fixture
def sql(session: SessionClient) -> Run:
    return run_on(session)


@pytest.fixture
def local_handle(tmp_path: Path) -> Iterator[Handle]:
    """A coordinator with a lazy Spark session: tests over small data run
    in-process and never start the JVM."""
    handle = serve(fast_config(tmp_path / "env"))
    try:
        yield handle
    finally:
        handle.shutdown()


@pytest.fixture
def local_session(local_handle: Handle) -> Iterator[SessionClient]:
    session = local_handle.client.startup("materialize", "materialize")
    try:
        yield session
    finally:
        session.terminate()


@pytest.fixture
def local_sql(local_session: SessionClient) -> Run:
    return run_on(local_session)
