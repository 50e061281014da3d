"""server/webhook.py's AppendQueue: how requests from the event loop are
batched into appends, with a stand-in appender (no storage)."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import Sequence

import pytest

from coordinator_lib.adapter.webhook import AppendResult, Outcome, WebhookRequest
from coordinator_lib.server.webhook import AppendQueue, Settle


class _Appender:
    """Answers every request appended; the first call waits for `release`."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.first_started = threading.Event()
        self.release = threading.Event()

    def append_all(self, requests: Sequence[WebhookRequest]) -> list[Outcome]:
        self.sizes.append(len(requests))
        if len(self.sizes) == 1:
            self.first_started.set()
            self.release.wait(60)
        return [AppendResult(1, 1) for _ in requests]


def _request(n: int) -> WebhookRequest:
    return WebhookRequest("d", "s", "n", b"%d" % n, {}, dt.datetime.now(dt.UTC))


def test_clients_answered_together_join_the_next_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four clients are in the first append; four more queue meanwhile.
    When the first four are answered they send again at once: the thread
    waits for them (the bound made long here, so timing cannot decide), and
    the next append holds all eight instead of the four that were queued
    (which left the two groups taking turns, half the clients a commit)."""
    appender = _Appender()
    monkeypatch.setattr(AppendQueue, "_gather_bound", lambda self, took: 60.0)
    queue = AppendQueue(appender)  # type: ignore[arg-type]

    async def clients() -> list[int]:
        loop = asyncio.get_running_loop()
        answered: list[int] = []
        all_answered = asyncio.Event()

        def client(n: int, rounds: int) -> Settle:
            def settle(outcome: Outcome) -> None:
                assert isinstance(outcome, AppendResult)
                answered.append(n)
                if rounds > 1:
                    queue.submit_then(_request(n), loop, client(n, rounds - 1))
                if len(answered) == 12:
                    all_answered.set()

            return settle

        with queue._ready:  # the four arrive together
            for n in range(4):
                queue.submit_then(_request(n), loop, client(n, 2))
        await asyncio.to_thread(appender.first_started.wait, 60)
        for n in range(4, 8):
            queue.submit_then(_request(n), loop, client(n, 1))
        appender.release.set()
        await asyncio.wait_for(all_answered.wait(), 60)
        return answered

    try:
        answered = asyncio.run(clients())
    finally:
        queue.close()
    assert sorted(answered) == sorted([*range(8), *range(4)])
    assert appender.sizes == [4, 8]


def test_a_single_client_never_waits() -> None:
    """One client sending again as soon as it is answered: one append per
    request, each as soon as it arrives (the wait's bound is never used)."""
    appender = _Appender()
    appender.release.set()
    queue = AppendQueue(appender)  # type: ignore[arg-type]
    queue._gather_bound = lambda took: 60.0  # type: ignore[method-assign]

    async def client() -> None:
        for n in range(20):
            await asyncio.wait_for(queue.submit(_request(n)), 30)

    try:
        asyncio.run(client())
    finally:
        queue.close()
    assert appender.sizes == [1] * 20
