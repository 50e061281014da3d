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
left out (as Materialize does). The appending runs on a thread pool of its
own, so a request waiting for its group commit holds no event-loop time.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from coordinator_lib.adapter.webhook import AppendWebhookError, WebhookAppender
from coordinator_lib.persist.errors import DiskFull

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator

logger = logging.getLogger(__name__)

PATH = "/api/webhook/{database}/{schema}/{source}"
_THREADS = 64  # appenders blocked on a group commit at once; more requests queue
_DRAIN_BYTES = 64 * 1024 * 1024  # read (and drop) this much of a too-large body, then hang up


def request_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header names (lower case) to values; AppendWebhookError 401 for a
    name sent twice."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in raw:
        try:
            value = raw_value.decode("ascii")
        except UnicodeDecodeError:
            continue
        if not all(" " <= c <= "~" or c == "\t" for c in value):
            continue
        name = raw_name.decode("latin-1").lower()
        if name in headers:
            message = f"headers of request were invalid: {name} provided more than once"
            raise AppendWebhookError(401, message)
        headers[name] = value
    return headers


async def read_body(request: Request, limit: int) -> bytes:
    """The body, or AppendWebhookError 413 once it passes `limit` bytes (the
    rest is read and dropped, so the client gets the answer)."""
    too_large = AppendWebhookError(413, f"request body is larger than {limit} bytes")
    declared = request.headers.get("content-length", "")
    chunks: list[bytes] = []
    size = 0
    over = declared.isdigit() and int(declared) > limit
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            over = True
        if over:
            if size > _DRAIN_BYTES:
                break
            continue
        chunks.append(chunk)
    if over:
        raise too_large
    return b"".join(chunks)


class WebhookEndpoint:
    """The route and its limits; `close()` when the server stops."""

    def __init__(self, coordinator: Coordinator) -> None:
        config = coordinator.config
        self.appender = WebhookAppender(coordinator)
        self.max_body_bytes = config.webhook_max_body_bytes
        self.max_concurrency = config.webhook_max_concurrency
        self.in_flight = 0  # only touched on the event loop
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, min(self.max_concurrency, _THREADS)),
            thread_name_prefix="webhook",
        )

    def routes(self) -> list[BaseRoute]:
        return [Route(PATH, self.handle, methods=["POST"])]

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def handle(self, request: Request) -> Response:
        if request.app.state.shutting_down:
            return _answer(AppendWebhookError.unavailable())
        if self.in_flight >= self.max_concurrency:
            return _answer(AppendWebhookError(429, "too many requests"))
        self.in_flight += 1
        try:
            received_at = dt.datetime.now(dt.UTC)
            params = request.path_params
            headers = request_headers(request.scope["headers"])
            body = await read_body(request, self.max_body_bytes)
            await asyncio.get_running_loop().run_in_executor(
                self._executor,
                self.appender.append,
                params["database"],
                params["schema"],
                params["source"],
                body,
                headers,
                received_at,
            )
            return Response(status_code=200)
        except AppendWebhookError as error:
            return _answer(error)
        except ClientDisconnect:
            return Response(status_code=400)  # nobody is listening
        except DiskFull:  # nothing was written; a retry succeeds once space is freed
            return PlainTextResponse("insufficient storage: the disk is full", status_code=507)
        except RuntimeError as error:
            if request.app.state.shutting_down or "shutdown" in str(error):
                return _answer(AppendWebhookError.unavailable())  # the executor stopped
            logger.exception("webhook request failed")
            return PlainTextResponse("internal error", status_code=500)
        except Exception:
            logger.exception("webhook request failed")  # no body or headers: they may hold secrets
            return PlainTextResponse("internal error", status_code=500)
        finally:
            self.in_flight -= 1


def _answer(error: AppendWebhookError) -> Response:
    return PlainTextResponse(error.message, status_code=error.status)


__all__ = ["PATH", "WebhookEndpoint", "read_body", "request_headers"]
