"""A real server (coordinator, pgwire, HTTP with the webhook route) on
loopback, without Spark: webhook sources never need it."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import run_on

Sql = Callable[[str], list[tuple[Any, ...]]]


@pytest.fixture
def sql(environment: Environment) -> Iterator[Sql]:
    session = environment.handle.client.startup("materialize", "materialize")
    try:
        yield run_on(session)
    finally:
        session.terminate()


def webhook_url(env: Environment, source: str, database: str = "materialize") -> str:
    return f"{env.http.url}/api/webhook/{database}/public/{source}"


def post(env: Environment, source: str, body: bytes | str, **headers: str) -> requests.Response:
    data = body.encode() if isinstance(body, str) else body
    return requests.post(webhook_url(env, source), data=data, headers=headers, timeout=30)


def signature(secret: bytes, body: bytes) -> str:
    """What a sender puts in its signature header: hex HMAC-SHA256 of the body."""
    return hmac.new(secret, body, hashlib.sha256).hexdigest()
