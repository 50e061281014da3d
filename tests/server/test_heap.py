"""`tidemark serve` moves its start-up heap out of the garbage collector's
generations once it is up (`server/heap.py`): full collections under load
walk only what came after, instead of pausing every request for 150-310 ms."""

from __future__ import annotations

import gc
import signal
from typing import Any

import pytest

from coordinator_lib.server import environment as environment_module


class _Started:
    """An environment whose start records the collector's frozen count and
    then asks `run_forever` to stop (as SIGTERM would)."""

    def __init__(self, handlers: dict[int, Any]) -> None:
        self.handlers = handlers
        self.frozen_at_start: int | None = None
        self.stopped = False
        self.pgwire = type("P", (), {"port": 0})()
        self.http = type("H", (), {"url": "http://127.0.0.1:0"})()

    def start(self) -> None:
        self.frozen_at_start = gc.get_freeze_count()
        self.handlers[signal.SIGTERM](signal.SIGTERM, None)

    def stop(self) -> None:
        self.stopped = True


def test_serve_freezes_the_heap_it_started_with(monkeypatch: pytest.MonkeyPatch) -> None:
    handlers: dict[int, Any] = {}

    def install(signum: int, handler: Any) -> None:
        handlers[signum] = handler

    monkeypatch.setattr(signal, "signal", install)
    environment = _Started(handlers)
    gc.unfreeze()
    try:
        environment_module.run_forever(environment)  # type: ignore[arg-type]
        assert environment.frozen_at_start == 0
        assert gc.get_freeze_count() > 0, "the start-up heap was not frozen"
        assert environment.stopped
    finally:
        gc.unfreeze()
