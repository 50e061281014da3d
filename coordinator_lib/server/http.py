"""The HTTP server (port 6876): Materialize's session-less SQL API, Prometheus
metrics and a health check, served by uvicorn from a background thread.

`POST /api/sql` follows Materialize's HTTP API (docs "Connect to Materialize
via HTTP", and `src/environmentd/src/http/sql.rs`):

- request `{"query": "<statements separated by ;>"}` (simple: one implicit
  transaction, no parameters) or `{"queries": [{"query": "<one statement>",
  "params": ["1", null]}]}` (extended: parameters are text or null);
  `?options=<url-encoded JSON object>` sets session variables;
- response `{"results": [...]}`, one entry per statement run:
  `{"tag", "rows", "desc": {"columns": [{"name", "type_oid", "type_len",
  "type_mod"}]}, "notices"}` for rows, `{"ok": <tag>, "notices"}` otherwise,
  `{"error": {"message", "code", "detail"?, "hint"?, "position"?},
  "notices"}` for the statement that failed. Processing stops at the first
  error: later statements are not run and get no entry;
- SQL errors are HTTP 200; a malformed body is 400 (also an extended query
  that is not exactly one statement), bad credentials 401, each with a body
  `{"error": {"message", "code"}}`;
- statements whose results do not fit one response (SUBSCRIBE, COPY,
  DECLARE, FETCH, CLOSE) are refused as "unsupported via this API", before
  anything of that simple query (or extended entry) runs.

Values in rows: integers, floats and booleans as JSON numbers/booleans,
numeric as a string (as Materialize, so JavaScript does not round it),
text as a string, jsonb as parsed JSON, date and timestamps in PostgreSQL's
text form, bytea as `\\x` hex. Deviations from Materialize: bytea is
`\\x<hex>` (Materialize sends an array of byte values) and timestamps are
text (its JSON encoder has sent epoch milliseconds).

Authentication is HTTP basic; without an Authorization header the user is
`materialize` with no password, which the coordinator accepts only where
`password_required` says none is needed.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import json
import logging
import math
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from coordinator_lib.adapter.errors import AdapterError, AdapterNotice
from coordinator_lib.adapter.metrics import Metrics
from coordinator_lib.adapter.responses import ExecuteResponse, ExecuteResponseKind, ResultColumn
from coordinator_lib.repr.numeric import numeric_display
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.server.pg_types import PG_TYPES
from coordinator_lib.sql.depth import allow_deep_statements
from coordinator_lib.sql.dialect import split_statements
from coordinator_lib.sql.escape_string import invalid_byte_sequence

if TYPE_CHECKING:
    from coordinator_lib.adapter.client import Client, SessionClient

logger = logging.getLogger(__name__)

DEFAULT_PORT = 6876
DEFAULT_USER = "materialize"
DEFAULT_DATABASE = "materialize"
# Materialize caps request bodies too (MAX_REQUEST_SIZE); a SQL text this big is a mistake.
MAX_REQUEST_BYTES = 64 * 1024 * 1024

# Statements whose results are a stream or live in a session that ends with
# the request; Materialize refuses the same ones.
_UNSUPPORTED_STATEMENTS = frozenset({"SUBSCRIBE", "COPY", "DECLARE", "FETCH", "CLOSE"})
# Backstop for what the up-front check misses: the response kinds of those statements.
_UNSUPPORTED_KINDS = {
    ExecuteResponseKind.COPY_TO: "SUBSCRIBE or COPY ... TO STDOUT",
    ExecuteResponseKind.DECLARED_CURSOR: "DECLARE",
    ExecuteResponseKind.FETCHED: "FETCH",
    ExecuteResponseKind.CLOSED_CURSOR: "CLOSE",
}


# -- routes --------------------------------------------------------------


def build_app(
    client: Client, metrics: Metrics, extra_routes: Sequence[BaseRoute] = ()
) -> Starlette:
    """The ASGI app: `ROUTES` plus `extra_routes`. Endpoints find the client
    and metrics in `app.state`, so a route added later (the webhook's) needs
    no other wiring."""
    app = Starlette(routes=[*ROUTES, *extra_routes])
    app.state.client = client
    app.state.metrics = metrics
    app.state.shutting_down = False
    return app


async def sql_endpoint(request: Request) -> Response:
    try:
        user, password = _credentials(request)
        queries = _parse_request(await request.body())
        options = _session_options(request)
        results = await run_in_threadpool(
            _serve_sql,
            request.app.state.client,
            user,
            password,
            options,
            is_loopback(request),
            queries,
        )
    except _HttpError as error:
        return error.response()
    return JSONResponse({"results": results})


async def health_endpoint(request: Request) -> Response:
    if request.app.state.shutting_down:
        return JSONResponse({"status": "shutting down"}, status_code=503)
    return JSONResponse({"status": "ok"})


async def metrics_endpoint(request: Request) -> Response:
    metrics: Metrics = request.app.state.metrics
    return Response(metrics.render(), media_type=metrics.content_type)


ROUTES: tuple[BaseRoute, ...] = (
    Route("/api/sql", sql_endpoint, methods=["POST"], max_body_size=MAX_REQUEST_BYTES),
    Route("/api/health", health_endpoint, methods=["GET"]),
    Route("/metrics", metrics_endpoint, methods=["GET"]),
    # Webhook sources are a raw route (server/webhook.py), ahead of these.
)


class RawRoute(Protocol):
    """An endpoint served straight from uvicorn, before Starlette's
    middleware and router (the webhook's: its per-request cost is all that
    bounds it). `match` says whether a request is its own (with what the
    path named); `serve` answers it. `scope["app"]` is the Starlette app."""

    def match(self, scope: Scope) -> Any | None: ...

    async def serve(self, scope: Scope, receive: Receive, send: Send, matched: Any) -> None: ...


Respond = Callable[[int, str], None]


class FastRoute(RawRoute, Protocol):
    """A raw route that also answers from the HTTP protocol itself, with no
    ASGI request cycle or task (`_FastProtocol`): for a request it takes,
    `fast_match` sees the method, the URL's path and the headers (names
    lower case) once they are read, and `fast_serve` gets the whole body
    and `respond`, which it calls once, on the event loop, with the status
    and a plain-text body. A request `fast_match` declines goes the ASGI
    way (`match`/`serve`)."""

    def fast_match(self, method: bytes, path: bytes, headers: list[tuple[bytes, bytes]]) -> Any: ...

    def fast_serve(
        self,
        app: Starlette,
        matched: Any,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        respond: Respond,
    ) -> None: ...


class _FrontDoor:
    """The ASGI app uvicorn serves: raw routes first, then Starlette."""

    def __init__(self, app: Starlette, raw_routes: Sequence[RawRoute]) -> None:
        self.app, self.raw_routes = app, tuple(raw_routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for route in self.raw_routes:
                matched = route.match(scope)
                if matched is not None:
                    scope["app"] = self.app
                    await route.serve(scope, receive, send, matched)
                    return
        await self.app(scope, receive, send)


class _FastCycle:
    """A request taken by a fast route: what uvicorn's protocol reads of its
    RequestResponseCycle (`response_complete`, `keep_alive`,
    `disconnected`, `message_event`), and its body as it arrives."""

    __slots__ = (
        "body",
        "disconnected",
        "keep_alive",
        "matched",
        "message_event",
        "response_complete",
        "route",
    )

    def __init__(self, route: FastRoute, matched: Any, keep_alive: bool) -> None:
        self.route, self.matched, self.keep_alive = route, matched, keep_alive
        self.body: list[bytes] = []
        self.response_complete = False
        self.disconnected = False
        self.message_event = _NoEvent()


class _NoEvent:
    """Nothing waits on a fast request's body (uvicorn sets this on disconnect)."""

    def set(self) -> None:
        pass


def _fast_protocol(app: Starlette, routes: Sequence[FastRoute]) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol, but a request one of `routes` takes is
    answered from the protocol: no ASGI scope, cycle, task, middleware or
    send messages. What uvicorn spent on those per request was about as
    much as the webhook's appending (py-spy `--gil`, 64 clients). The
    fast path takes only plain requests: HTTP/1.1, nothing else in flight
    on the connection (a pipelined request behind one goes uvicorn's way,
    queued, so answers keep their order), no `Expect: 100-continue`, no
    upgrade, a path without `%` or `?`; `fast_match` decides the rest."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    ok = _EmptyOk()

    class _FastProtocol(HttpToolsProtocol):
        def on_message_begin(self) -> None:
            # uvicorn's also builds the ASGI scope (a dict and a copy of the
            # app state a request), which a fast request never reads; it is
            # built in `on_headers_complete` for one that goes uvicorn's way.
            self.url = b""
            self.expect_100_continue = False
            self.headers = []

        def on_headers_complete(self) -> None:
            fast = self._fast_route()
            if fast is None:
                url, headers, expect = self.url, self.headers, self.expect_100_continue
                super().on_message_begin()  # the scope, with the request read so far
                self.url, self.headers, self.expect_100_continue = url, headers, expect
                self.scope["headers"] = headers
                super().on_headers_complete()
                return
            route, matched = fast
            self.cycle = _FastCycle(route, matched, self.parser.should_keep_alive())  # type: ignore[assignment]

        def _fast_route(self) -> tuple[FastRoute, Any] | None:
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                return None
            url = self.url
            if self.expect_100_continue or b"%" in url or b"?" in url or not url.startswith(b"/"):
                return None
            parser = self.parser
            if parser.get_http_version() != "1.1" or parser.should_upgrade():
                return None
            method = parser.get_method()
            for route in routes:
                matched = route.fast_match(method, url, self.headers)
                if matched is not None:
                    return route, matched
            return None

        def on_body(self, body: bytes) -> None:
            cycle = self.cycle
            if isinstance(cycle, _FastCycle):
                cycle.body.append(body)
            else:
                super().on_body(body)

        def on_message_complete(self) -> None:
            cycle = self.cycle
            if not isinstance(cycle, _FastCycle):
                super().on_message_complete()
                return
            body = cycle.body[0] if len(cycle.body) == 1 else b"".join(cycle.body)
            cycle.body = []

            def respond(status: int, text: str) -> None:
                self._fast_respond(cycle, status, text)

            try:
                cycle.route.fast_serve(app, cycle.matched, self.headers, body, respond)
            except Exception:
                logger.exception("fast route failed")
                if not cycle.response_complete:
                    self._fast_respond(cycle, 500, "internal error")

        def _fast_respond(self, cycle: _FastCycle, status: int, text: str) -> None:
            if cycle.response_complete:
                return
            cycle.response_complete = True
            transport = self.transport
            if transport.is_closing():  # the client hung up: nobody to answer
                return
            defaults = self.server_state.default_headers
            if status == 200 and not text and cycle.keep_alive:
                transport.write(ok.answer(defaults))
            else:
                transport.write(_answer(status, text, defaults, cycle.keep_alive))
            if not cycle.keep_alive:
                transport.close()
            # uvicorn's: starts a queued request, or the keep-alive timer
            self.on_response_complete()

    return _FastProtocol


def _answer(status: int, text: str, defaults: list[tuple[bytes, bytes]], keep_alive: bool) -> bytes:
    """A fast route's answer: status line, uvicorn's default headers (server,
    date), a plain-text body."""
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE

    body = text.encode()
    content = [STATUS_LINE[status]]
    for name, value in defaults:
        content += [name, b": ", value, b"\r\n"]
    if body:
        content.append(b"content-type: text/plain; charset=utf-8\r\n")
    content.append(b"content-length: %d\r\n" % len(body))
    if not keep_alive:
        content.append(b"connection: close\r\n")
    content += [b"\r\n", body]
    return b"".join(content)


class _EmptyOk:
    """The bytes of a keep-alive 200 with no body, made once per value of
    uvicorn's default headers (a new list when its date header changes,
    once a second) rather than once per request."""

    def __init__(self) -> None:
        self._defaults: list[tuple[bytes, bytes]] | None = None
        self._answer = b""

    def answer(self, defaults: list[tuple[bytes, bytes]]) -> bytes:
        if defaults is not self._defaults:
            self._answer = _answer(200, "", defaults, True)
            self._defaults = defaults  # held, so its id is not reused
        return self._answer


# -- the server ----------------------------------------------------------


class HttpServer:
    """`build_app` served by uvicorn on a thread of its own, so the
    coordinator process keeps its main thread (and signal handling)."""

    def __init__(
        self,
        client: Client,
        metrics: Metrics,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        extra_routes: Sequence[BaseRoute] = (),
        raw_routes: Sequence[RawRoute] = (),
        tls: tuple[str, str] | None = None,
    ) -> None:
        self.app = build_app(client, metrics, extra_routes)
        self.raw_routes = raw_routes
        self.host = host
        self.port = port  # the bound port once started (port 0 picks a free one)
        self.tls = tls  # (certificate file, key file): serve https
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        """Bind, start serving, and return once connections are accepted."""
        if self._thread is not None:
            raise RuntimeError("HttpServer already started")
        allow_deep_statements()  # the server's threads get the stack deep SQL needs
        sock = _bind(self.host, self.port)
        self.port = sock.getsockname()[1]
        fast = [r for r in self.raw_routes if hasattr(r, "fast_match")]
        config = uvicorn.Config(
            _FrontDoor(self.app, self.raw_routes),
            http=_fast_protocol(self.app, fast) if fast else "auto",  # type: ignore[arg-type]
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,
            ssl_certfile=self.tls[0] if self.tls else None,
            ssl_keyfile=self.tls[1] if self.tls else None,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run,
            kwargs={"sockets": [sock]},
            name=f"tidemark-http-{self.port}",
            daemon=True,
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive():
                sock.close()
                raise RuntimeError(f"HTTP server on {self.url} failed to start")
            if time.monotonic() > deadline:
                self.shutdown()
                raise TimeoutError(f"HTTP server on {self.url} did not start in {timeout}s")
            time.sleep(0.01)

    def shutdown(self, drain_seconds: float = 0.0, timeout: float = 10.0) -> None:
        """Report unhealthy at once (503 on /api/health), keep serving for
        `drain_seconds` so load balancers can notice, then stop."""
        self.app.state.shutting_down = True
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        if drain_seconds > 0:
            time.sleep(drain_seconds)
        server.should_exit = True
        thread.join(timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout)

    def __enter__(self) -> HttpServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


def _bind(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


# -- requests ------------------------------------------------------------


class _HttpError(Exception):
    """A request refused as a whole (not a statement's SQL error)."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code

    def response(self) -> Response:
        headers = {"WWW-Authenticate": 'Basic realm="tidemark"'} if self.status == 401 else None
        body = {"error": {"message": self.message, "code": self.code}}
        return JSONResponse(body, status_code=self.status, headers=headers)


def _bad_request(message: str) -> _HttpError:
    return _HttpError(400, message, "08P01")  # protocol_violation


@dataclass(frozen=True)
class _Query:
    """One `SessionClient.execute` call: a simple request's whole text or one
    extended entry. `refused` names a statement this API does not run."""

    sql: str
    params: tuple[str | None, ...] = ()
    refused: str | None = None


def _parse_request(body: bytes) -> list[_Query]:
    try:
        request = json.loads(body)
    except RecursionError:
        raise _bad_request("request body is not valid JSON: nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise _bad_request(f"request body is not valid JSON: {error}") from None
    if not isinstance(request, dict):
        raise _bad_request('request body must be a JSON object with "query" or "queries"')
    if isinstance(request.get("query"), str):
        _check_text(request["query"])
        statements = split_statements(request["query"])
        if not statements:
            return []
        return [_Query(request["query"], refused=_first_unsupported(statements))]
    queries = request.get("queries")
    if not isinstance(queries, list):
        raise _bad_request('request body must be a JSON object with "query" or "queries"')
    return [_extended_query(entry) for entry in queries]


def _extended_query(entry: Any) -> _Query:
    if not isinstance(entry, dict) or not isinstance(entry.get("query"), str):
        raise _bad_request('each of "queries" must be an object with a "query" string')
    query = entry["query"]
    params = entry.get("params", [])
    if params is None:
        params = []
    if not isinstance(params, list) or not all(p is None or isinstance(p, str) for p in params):
        raise _bad_request('"params" must be an array of strings or nulls')
    for text in [query, *params]:
        if text is not None:
            _check_text(text)
    statements = split_statements(query)
    if len(statements) != 1:
        raise _bad_request(
            f'each query must contain exactly 1 statement, but "{query}" contains {len(statements)}'
        )
    return _Query(query, tuple(params), refused=_first_unsupported(statements))


def _check_text(text: str) -> None:
    """Refuse what PostgreSQL's text cannot hold (22021): a lone surrogate,
    which JSON's `\\ud800` escapes allow and UTF-8 does not, and NUL."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = f"\\u{ord(error.object[error.start]):04x}"
        raise _HttpError(
            400, f"invalid Unicode in request: lone surrogate {bad}", "22021"
        ) from None
    if "\x00" in text:
        raise _HttpError(400, invalid_byte_sequence(b"\x00"), "22021")


def _first_unsupported(statements: list[str]) -> str | None:
    for statement in statements:
        word = re.match(r"[A-Za-z_]+", statement)
        if word and word.group(0).upper() in _UNSUPPORTED_STATEMENTS:
            return statement
    return None


def _session_options(request: Request) -> dict[str, str]:
    raw = request.query_params.get("options")
    if raw is None:
        return {}
    try:
        options = json.loads(raw)
    except ValueError:
        raise _bad_request('"options" must be a URL-encoded JSON object') from None
    if not isinstance(options, dict) or not all(isinstance(v, str) for v in options.values()):
        raise _bad_request('"options" must be a JSON object of strings')
    return options


def _credentials(request: Request) -> tuple[str, str | None]:
    header = request.headers.get("authorization")
    if header is None:
        return DEFAULT_USER, None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic":
        raise _HttpError(401, "only HTTP basic authentication is supported", "28000")
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise _HttpError(401, "malformed basic authentication credentials", "28000") from None
    user, separator, password = decoded.partition(":")
    if not separator:
        raise _HttpError(401, "malformed basic authentication credentials", "28000")
    return user or DEFAULT_USER, password


def is_loopback(request: Request) -> bool:
    if request.client is None:
        return False
    try:
        address = ipaddress.ip_address(request.client.host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


# -- execution (on a worker thread) --------------------------------------


def _serve_sql(
    client: Client,
    user: str,
    password: str | None,
    options: Mapping[str, str],
    loopback: bool,
    queries: list[_Query],
) -> list[dict[str, Any]]:
    """Authenticate, run `queries` in one session, end the session."""
    if password is None and client.password_required(user, loopback):
        raise _HttpError(401, f'password required for user "{user}"', "28000")
    options = dict(options)
    database = options.pop("database", DEFAULT_DATABASE)
    try:
        session = client.startup(
            user, database, password=password, options=options, loopback=loopback
        )
    except AdapterError as error:
        raise _startup_error(error) from None
    try:
        results: list[dict[str, Any]] = []
        for query in queries:
            if not _run_query(session, query, results):
                break
        return results
    finally:
        session.terminate()


def _startup_error(error: AdapterError) -> _HttpError:
    if error.code.startswith("28"):  # invalid_authorization_specification, invalid_password
        return _HttpError(401, error.message, error.code)
    if error.code in ("57P01", "53300"):  # shutting down, too many connections
        return _HttpError(503, error.message, error.code)
    return _HttpError(400, error.message, error.code)


def _run_query(session: SessionClient, query: _Query, results: list[dict[str, Any]]) -> bool:
    """Append one result per statement of `query`; False once one failed."""
    if query.refused is not None:
        results.append(_unsupported(query.refused))
        return False
    responses = session.execute(query.sql, query.params)
    try:
        for response in responses:
            if response.kind is ExecuteResponseKind.EMPTY_QUERY:
                continue
            if response.kind in _UNSUPPORTED_KINDS:
                results.append(_unsupported(_UNSUPPORTED_KINDS[response.kind]))
                return False
            results.append(_result(response))
    except AdapterError as error:
        results.append({"error": error_json(error), "notices": []})
        return False
    except Exception as error:
        logger.exception("HTTP SQL request failed")  # no SQL: it may hold secrets
        internal = AdapterError(f"internal error: {error}")
        results.append({"error": error_json(internal), "notices": []})
        return False
    finally:
        close = getattr(responses, "close", None)
        if close is not None:
            close()  # a generator we left early: let the coordinator clean up
    return True


def _unsupported(statement: str) -> dict[str, Any]:
    error = AdapterError(f"unsupported via this API: {statement}")
    error.hint = "run it over the PostgreSQL protocol (port 6875) instead"
    return {"error": error_json(error), "notices": []}


def _result(response: ExecuteResponse) -> dict[str, Any]:
    if response.kind is not ExecuteResponseKind.SENDING_ROWS:
        return {"ok": response.tag, "notices": [notice_json(n) for n in response.notices]}
    columns = response.columns or ()
    types = [column.scalar_type for column in columns]
    rows = [
        [json_value(value, scalar_type) for value, scalar_type in zip(row, types, strict=True)]
        for row in response.rows or ()
    ]
    return {
        "tag": response.complete_tag(len(rows)),
        "rows": rows,
        "desc": {"columns": [column_json(column) for column in columns]},
        # Read after the rows: notices raised while producing them land here too.
        "notices": [notice_json(n) for n in response.notices],
    }


# -- JSON encodings ------------------------------------------------------


def error_json(error: AdapterError) -> dict[str, Any]:
    body: dict[str, Any] = {"message": error.message, "code": error.code}
    for key in ("detail", "hint", "position"):
        value = getattr(error, key)
        if value is not None:
            body[key] = value
    return body


def notice_json(notice: AdapterNotice) -> dict[str, Any]:
    body: dict[str, Any] = {
        "message": notice.message,
        "code": notice.code,
        "severity": notice.severity.lower(),
    }
    if notice.detail is not None:
        body["detail"] = notice.detail
    if notice.hint is not None:
        body["hint"] = notice.hint
    return body


def column_json(column: ResultColumn) -> dict[str, Any]:
    pg_type = PG_TYPES[column.scalar_type]
    return {
        "name": column.name,
        "type_oid": pg_type.oid if column.type_oid is None else column.type_oid,
        "type_len": pg_type.size,
        "type_mod": column.typmod,
    }


def json_value(value: Any, scalar_type: ScalarType) -> Any:
    """One value as Materialize's HTTP API shows it (see the module docstring).

    TODO: share the text forms with pgwire's `pg_types.encode_text` once it lands.
    """
    if value is None:
        return None
    element = scalar_type.element
    if element is not None:  # an array: a JSON array of its elements' values
        return [json_value(v, element) for v in value]
    match scalar_type:
        case ScalarType.BOOLEAN:
            return bool(value)
        case ScalarType.SMALLINT | ScalarType.INTEGER | ScalarType.BIGINT:
            return int(value)
        case ScalarType.REAL:
            return _finite(_shortest_float4(float(value)))
        case ScalarType.DOUBLE:
            return _finite(float(value))
        case ScalarType.NUMERIC:
            return numeric_text(value)
        case ScalarType.BYTEA:
            return "\\x" + bytes(value).hex() if not isinstance(value, str) else value
        case ScalarType.DATE:
            return date_text(value) if isinstance(value, date) else str(value)
        case ScalarType.TIMESTAMP:
            return timestamp_text(value) if isinstance(value, datetime) else str(value)
        case ScalarType.TIMESTAMPTZ:
            return timestamptz_text(value) if isinstance(value, datetime) else str(value)
        case ScalarType.JSONB:
            return json.loads(value) if isinstance(value, str | bytes) else value
        case _:
            return str(value)


def _finite(value: float) -> float | None:
    # JSON has no NaN or Infinity; serde_json (Materialize) writes null too.
    return value if math.isfinite(value) else None


def _shortest_float4(value: float) -> float:
    """The shortest decimal that reads back as the same float4, so REAL 0.1
    is 0.1 and not 0.10000000149011612."""
    if not math.isfinite(value):
        return value
    try:
        packed = struct.pack("<f", value)
    except OverflowError:
        return value
    value = struct.unpack("<f", packed)[0]  # the float4 itself, not the double it came from
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if struct.pack("<f", candidate) == packed:
            return candidate
    return value


def numeric_text(value: Any) -> str:
    if isinstance(value, Decimal):
        return format(numeric_display(value), "f")  # as pgwire prints it
    if isinstance(value, float):
        return format(Decimal(repr(value)), "f")
    return str(value)


def date_text(value: date) -> str:
    if isinstance(value, datetime):
        value = value.date()
    return value.isoformat()


def timestamp_text(value: datetime) -> str:
    """PostgreSQL's form: `2024-01-02 03:04:05.25` (no trailing zeros)."""
    text = value.replace(tzinfo=None).isoformat(sep=" ")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def timestamptz_text(value: datetime) -> str:
    """In UTC, as a session with TimeZone 'UTC' shows it: `... 03:04:05+00`."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return timestamp_text(value) + "+00"
