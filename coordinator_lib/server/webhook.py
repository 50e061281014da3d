"""`POST /api/webhook/<database>/<schema>/<source>` on the HTTP port (6876):
the HTTP half of webhook sources (the adapter half is `adapter/webhook.py`).

Answers (an error's body is a short plain-text reason that never carries a
secret or the CHECK's details):

- 200: the request's rows are durable (or its Idempotency-Key was appended
  before: nothing is written again);
- 400: the body does not parse as the source's format or does not fit its
  typed schema; the CHECK is false, NULL or fails;
- 401: a header is sent more than once;
- 404: no webhook source has that name;
- 413: the body is over `Config.webhook_max_body_bytes` (default 2 MiB);
- 429: `Config.webhook_max_concurrency` requests are in flight already;
- 507: the disk holding the data is full (nothing written; retry later);
- 503: the server is shutting down;
- 500: anything else (a bug; logged).

Header names are lower-cased; a header whose value is not visible ASCII is
left out (as Materialize does).

The endpoint is a fast route (`server/http.py`'s `FastRoute`): a plain
POST with a Content-Length within the limit is answered from uvicorn's
HTTP protocol itself, with no ASGI request cycle, task or send messages;
any other request to it (chunked, `Expect: 100-continue`, HTTP/1.0,
pipelined behind another) takes the raw ASGI route, ahead of Starlette's
middleware and router. Both give the same answers. Requests go from the
event loop to one appending thread (`AppendQueue`), which takes every
request queued at once into one `WebhookAppender.append_all`, so requests
in flight together share one group commit, and the thread handoff is once
per batch each way.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.types import Receive, Scope, Send

from coordinator_lib.adapter.webhook import (
    AppendWebhookError,
    Outcome,
    WebhookAppender,
    WebhookRequest,
)
from coordinator_lib.persist.errors import DiskFull

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator

logger = logging.getLogger(__name__)

PREFIX = "/api/webhook/"  # then <database>/<schema>/<source>
_PREFIX_BYTES = PREFIX.encode()
_DRAIN_BYTES = 64 * 1024 * 1024  # read (and drop) this much of a too-large body, then hang up
_TEXT = [(b"content-type", b"text/plain; charset=utf-8")]


class ClientDisconnect(Exception):
    """The client hung up before its body arrived."""


# A header value Materialize keeps: visible ASCII and tabs.
_VISIBLE = re.compile(rb"[\t\x20-\x7e]*")


def request_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header names (lower case) to values; AppendWebhookError 401 for a
    name sent twice. A value is checked with one regular expression on its
    bytes (a generator over its characters was a tenth of the HTTP
    thread's time a request)."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in raw:
        if _VISIBLE.fullmatch(raw_value) is None:
            continue
        name = raw_name.decode("latin-1").lower()
        if name in headers:
            message = f"headers of request were invalid: {name} provided more than once"
            raise AppendWebhookError(401, message)
        headers[name] = raw_value.decode("ascii")
    return headers


def _too_large(limit: int) -> AppendWebhookError:
    return AppendWebhookError(413, f"request body is larger than {limit} bytes")


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The body, or AppendWebhookError 413 once it passes `limit` bytes (the
    rest is read and dropped, so the client gets the answer)."""
    declared = next((v for n, v in scope["headers"] if n.lower() == b"content-length"), b"")
    over = declared.isdigit() and int(declared) > limit
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            over = True
        if not over:
            chunks.append(chunk)
        if not message.get("more_body", False) or size > _DRAIN_BYTES:
            break
    if over:
        raise _too_large(limit)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


Settle = Callable[[Outcome], None]


class AppendQueue:
    """Requests handed from the event loop to one appending thread. The
    thread takes every request queued at once into one `append_all` (one
    group commit), then settles them with one call into the loop: batches
    grow to what is in flight.

    Clients that send their next request once answered otherwise split
    into groups that take turns: those answered by one commit come back
    while the next commit (of those that queued during the last one) runs,
    so each commit holds about half of them and every request waits for a
    commit it is not in (64 clients: batches of 31, 1,300 requests/s at load
    10). So before taking a batch that is smaller than what was in flight
    when it last answered (that batch and the requests queued then), the
    thread waits for the answered ones to come back, for at most half the
    last append's time (`_gather_bound`, never over 10 ms): the groups
    merge into one, each commit holds nearly all of them (batches of 54,
    2,100 requests/s at the same load), and a client that does not come
    back costs a batch at most that much. A single client never waits."""

    def __init__(self, appender: WebhookAppender) -> None:
        self.appender = appender
        self._pending: list[tuple[WebhookRequest, asyncio.AbstractEventLoop, Settle]] = []
        self._ready = threading.Condition()
        self._closed = False
        self.batches = 0  # append_all calls made (tests count them)
        self._wake_at = 1  # how many queued requests wake the thread
        self._thread = threading.Thread(target=self._run, name="webhook-append", daemon=True)
        self._thread.start()

    def submit(self, request: WebhookRequest) -> asyncio.Future[Outcome]:
        """The request's outcome, once its batch is committed (or refused)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()

        def settle(outcome: Outcome) -> None:
            if not future.done():
                future.set_result(outcome)

        self.submit_then(request, loop, settle)
        return future

    def submit_then(
        self, request: WebhookRequest, loop: asyncio.AbstractEventLoop, settle: Settle
    ) -> None:
        """Call `settle` on `loop` with the request's outcome once its batch
        is committed (or refused)."""
        with self._ready:
            if self._closed:
                raise AppendWebhookError.unavailable()
            self._pending.append((request, loop, settle))
            if len(self._pending) >= self._wake_at:
                self._ready.notify()

    def close(self) -> None:
        """Stop taking requests; those queued and not yet taken get 503."""
        with self._ready:
            self._closed = True
            self._ready.notify()

    def _gather_bound(self, took: float) -> float:
        """How long to wait for the requests answered last (seconds), after
        an append that took `took`."""
        return min(took / 2, 0.010)

    def _run(self) -> None:
        expected, bound = 0, 0.0  # in flight when the last batch was answered; the wait's bound
        while True:
            with self._ready:
                while not self._pending and not self._closed:
                    self._ready.wait()
                if len(self._pending) < expected and not self._closed:
                    self._wake_at = expected
                    self._ready.wait(bound)
                    self._wake_at = 1
                batch, self._pending = self._pending, []
                closed = self._closed
            if not batch:
                return
            requests = [request for request, _, _ in batch]
            outcomes: list[Outcome]
            if closed:
                outcomes = [AppendWebhookError.unavailable() for _ in batch]
            else:
                started = time.perf_counter()
                try:
                    outcomes = self.appender.append_all(requests)
                except Exception as error:  # a bug outside any one request: all of them get it
                    outcomes = [error] * len(batch)
                self.batches += 1
                bound = self._gather_bound(time.perf_counter() - started)
            with self._ready:  # before any of them can come back
                expected = len(batch) + len(self._pending)
            loops: dict[asyncio.AbstractEventLoop, list[tuple[Settle, Outcome]]] = {}
            for (_, loop, settle), outcome in zip(batch, outcomes, strict=True):
                loops.setdefault(loop, []).append((settle, outcome))
            for loop, settled in loops.items():
                try:
                    loop.call_soon_threadsafe(_settle, settled)
                except RuntimeError:  # the loop is closed: nobody is waiting
                    continue


def _settle(settled: list[tuple[Settle, Outcome]]) -> None:
    for settle, outcome in settled:
        try:
            settle(outcome)
        except Exception:  # one answer's failure (a bug) must not keep the others
            logger.exception("answering a webhook request failed")


class WebhookEndpoint:
    """The raw route and its limits; `close()` when the server stops."""

    def __init__(self, coordinator: Coordinator) -> None:
        config = coordinator.config
        self.appender = WebhookAppender(coordinator)
        self.queue = AppendQueue(self.appender)
        self.max_body_bytes = config.webhook_max_body_bytes
        self.max_concurrency = config.webhook_max_concurrency
        self.in_flight = 0  # only touched on the event loop

    def close(self) -> None:
        self.queue.close()

    def fast_match(
        self, method: bytes, path: bytes, headers: list[tuple[bytes, bytes]]
    ) -> tuple[str, str, str] | None:
        """(database, schema, source) of a POST the fast path can take: its
        body's length declared and within the limit (so it is never read in
        part), not chunked."""
        if method != b"POST" or not path.startswith(_PREFIX_BYTES):
            return None
        length = None
        for name, value in headers:
            if name == b"content-length":
                if length is not None or not value.isdigit():
                    return None
                length = int(value)
            elif name == b"transfer-encoding":
                return None
        if length is None or length > self.max_body_bytes:
            return None
        try:
            names = path[len(_PREFIX_BYTES) :].decode("utf-8").split("/")
        except UnicodeDecodeError:
            return None
        if len(names) != 3 or not all(names):
            return None
        return names[0], names[1], names[2]

    def fast_serve(
        self,
        app: Any,
        names: tuple[str, str, str],
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        respond: Callable[[int, str], None],
    ) -> None:
        """`_answer` without a task: the outcome comes back to `respond`."""
        refused = self._refused_now(app)
        if refused is not None:
            respond(*refused)
            return
        self.in_flight += 1

        def settle(outcome: Outcome) -> None:
            self.in_flight -= 1
            respond(*_answer_of(outcome))

        try:
            request = WebhookRequest(
                *names,
                body=body,
                headers=request_headers(headers),
                received_at=dt.datetime.now(dt.UTC),
            )
            self.queue.submit_then(request, asyncio.get_running_loop(), settle)
        except Exception as error:
            settle(error)

    def _refused_now(self, app: Any) -> tuple[int, str] | None:
        """503 while shutting down, 429 with too many requests in flight."""
        if app.state.shutting_down:
            return _refused(AppendWebhookError.unavailable())
        if self.in_flight >= self.max_concurrency:
            return _refused(AppendWebhookError(429, "too many requests"))
        return None

    def match(self, scope: Scope) -> tuple[str, str, str] | None:
        """(database, schema, source) of a `POST /api/webhook/d/s/n`; None
        leaves the request to the other routes (404, 405)."""
        path: str = scope["path"]
        if scope["method"] != "POST" or not path.startswith(PREFIX):
            return None
        names = path[len(PREFIX) :].split("/")
        if len(names) != 3 or not all(names):
            return None
        return names[0], names[1], names[2]

    async def serve(
        self, scope: Scope, receive: Receive, send: Send, names: tuple[str, str, str]
    ) -> None:
        status, text = await self._answer(scope, receive, names)
        body = text.encode()
        headers = [(b"content-length", str(len(body)).encode())]
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": headers + _TEXT if body else headers,
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _answer(
        self, scope: Scope, receive: Receive, names: tuple[str, str, str]
    ) -> tuple[int, str]:
        """The status and plain-text body (empty for 200)."""
        refused = self._refused_now(scope["app"])
        if refused is not None:
            return refused
        self.in_flight += 1
        try:
            received_at = dt.datetime.now(dt.UTC)
            headers = request_headers(scope["headers"])
            body = await read_body(scope, receive, self.max_body_bytes)
            outcome: Outcome = await self.queue.submit(
                WebhookRequest(*names, body=body, headers=headers, received_at=received_at)
            )
        except ClientDisconnect:
            return 400, ""  # nobody is listening
        except Exception as error:
            outcome = error
        finally:
            self.in_flight -= 1
        return _answer_of(outcome)


def _answer_of(outcome: Outcome) -> tuple[int, str]:
    """The status and plain-text body answering a request's outcome."""
    if not isinstance(outcome, Exception):
        return 200, ""
    if isinstance(outcome, AppendWebhookError):
        return _refused(outcome)
    if isinstance(outcome, DiskFull):  # nothing was written; a retry succeeds once space is freed
        return 507, "insufficient storage: the disk is full"
    # No body or headers in the log: they may hold secrets.
    logger.error("webhook request failed", exc_info=outcome)
    return 500, "internal error"


def _refused(error: AppendWebhookError) -> tuple[int, str]:
    return error.status, error.message


__all__ = ["PREFIX", "AppendQueue", "WebhookEndpoint", "read_body", "request_headers"]
