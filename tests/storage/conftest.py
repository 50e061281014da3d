"""Fixtures of the storage controller suites: an environment on each
consensus backend (SQLite file, fresh PostgreSQL database) and a controller
opened on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator_lib.storage import StorageController
from tests.storage.support import Env


@pytest.fixture
def env(consensus_url: str, tmp_path: Path) -> Iterator[Env]:
    """An empty environment; controllers opened through it close at teardown."""
    environment = Env(consensus_url, tmp_path / "blob")
    try:
        yield environment
    finally:
        environment.close_all()


@pytest.fixture
def controller(env: Env) -> StorageController:
    """A storage controller on `env`."""
    return env.open()
