"""A lean HTTP/1.1 POST load generator for the webhook benchmarks.

`clients` keep-alive connections on one asyncio event loop (uvloop), each
sending its next request as soon as the previous one is answered; answers
are parsed by httptools (C). A request costs this process a few tens of
microseconds of CPU (threads with http.client cost several times that),
so on a 2-core machine the server gets most of the CPU, and the load
generator's own CPU is measured and reported beside the server's.

Every request gets a sequence number (`body_of(seq)` builds its body), so
the caller can check exactly which requests were acknowledged. When the
time is up no new request is sent, and the ones in flight are waited for:
every request sent is answered (or its connection fails) before `run`
returns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import cast

import httptools
import uvloop


@dataclass(frozen=True)
class Answer:
    seq: int
    status: int  # 0: the connection failed before an answer
    seconds: float  # from sending the request to its complete answer
    in_window: bool  # answered before the time was up (counts for the rate)


@dataclass
class Load:
    answers: list[Answer]
    seconds: float  # the measured window
    cpu_seconds: float  # this process's CPU (user + system) over the run


@dataclass
class _Shared:
    head: bytes
    body_of: Callable[[int], bytes]
    deadline: float
    answers: list[Answer] = field(default_factory=list)
    next_seq: int = 0


class _Connection(asyncio.Protocol):
    """One keep-alive connection sending requests one after another."""

    def __init__(self, shared: _Shared, done: asyncio.Future[None]) -> None:
        self.shared, self.done = shared, done
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.seq = -1
        self.sent_at = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._send()

    def _send(self) -> None:
        shared = self.shared
        if time.perf_counter() >= shared.deadline:
            self._finish()
            return
        self.seq, shared.next_seq = shared.next_seq, shared.next_seq + 1
        body = shared.body_of(self.seq)
        assert self.transport is not None
        self.sent_at = time.perf_counter()
        self.transport.write(shared.head + b"%d\r\n\r\n" % len(body) + body)

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        now = time.perf_counter()
        status = self.parser.get_status_code()
        answer = Answer(self.seq, status, now - self.sent_at, now <= self.shared.deadline)
        self.shared.answers.append(answer)
        self.seq = -1
        self._send()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.seq >= 0:  # sent, never answered
            self.shared.answers.append(Answer(self.seq, 0, 0.0, False))
            self.seq = -1
        self._finish()

    def _finish(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        if not self.done.done():
            self.done.set_result(None)


def run(
    port: int, path: str, body_of: Callable[[int], bytes], clients: int, seconds: float
) -> Load:
    """POST to `http://127.0.0.1:{port}{path}` from `clients` connections for
    `seconds`, then wait for the requests in flight."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\nContent-Length: "
    ).encode()

    async def main() -> Load:
        loop = asyncio.get_running_loop()
        cpu = time.process_time()
        began = time.perf_counter()
        shared = _Shared(head, body_of, began + seconds)
        waits: list[asyncio.Future[None]] = []
        for _ in range(clients):
            done: asyncio.Future[None] = loop.create_future()
            waits.append(done)
            await loop.create_connection(partial(_Connection, shared, done), "127.0.0.1", port)
        await asyncio.wait_for(asyncio.gather(*waits), seconds + 120)
        window = min(time.perf_counter(), shared.deadline) - began
        return Load(shared.answers, window, time.process_time() - cpu)

    return uvloop.run(main())


__all__ = ["Answer", "Load", "run"]
