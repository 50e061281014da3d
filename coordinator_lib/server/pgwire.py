"""PostgreSQL wire protocol (v3) server in front of the adapter's `Client`.

Why threads: `SessionClient` is blocking, so each connection gets a thread that
runs its session and reads the client's messages itself. The first time rows
stream, a reader thread takes over reading (into a queue, for the rest of the
connection): it notices a client that goes away while rows stream (a
SUBSCRIBE over COPY blocks forever otherwise) and cancels the statement. A
connection that only writes (one-row INSERTs, COPY FROM) has one thread and
no queue hop per message.

    server = PgwireServer(handle.client, port=6875)
    server.start()
    ...
    server.shutdown()

Protocol notes (PostgreSQL's behaviour unless said otherwise):
- SSLRequest is answered 'S' (then TLS) when the server has a certificate,
  else 'N'; GSSENCRequest 'N'; protocol 3.x with x > 0 gets
  NegotiateProtocolVersion back to 3.0.
- Password authentication is SCRAM-SHA-256 (no channel binding), asked
  whenever `Client.password_required` says so (adapter/roles.py).
- Extended protocol: Parse describes the statement (errors surface at Parse),
  Execute runs it once and keeps the rows on the portal for row-limited
  Executes; after an error every message up to Sync is discarded; Sync
  outside a transaction drops the portals.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import re
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from coordinator_lib.adapter.errors import AdapterError, AdapterNotice
from coordinator_lib.adapter.responses import ExecuteResponse, ExecuteResponseKind, ResultColumn
from coordinator_lib.adapter.scram import MECHANISM, ScramExchange, ScramFailure
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.server.copy_arrow import (
    ArrowCopyReader,
    ArrowPiece,
    Piece,
    fast_path_applies,
)
from coordinator_lib.server.copy_in import CsvDecoder, TextDecoder, copy_decoder
from coordinator_lib.server.pg_types import (
    PG_TYPES,
    TYPES_BY_OID,
    InvalidEncoding,
    UnsupportedFormat,
    decode_param,
    encode_binary,
    encode_text,
)
from coordinator_lib.server.sql_prepare import Prepare, parse_execute, parse_prepare
from coordinator_lib.server.tls_stream import TlsStream
from coordinator_lib.sql.depth import allow_deep_statements

if TYPE_CHECKING:
    # Types only: importing client.py at run time would load the whole coordinator.
    from coordinator_lib.adapter.responses import StatementDescription

logger = logging.getLogger(__name__)

DEFAULT_PORT = 6875

_PROTOCOL_3 = 3 << 16
_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_CANCEL_REQUEST = 80877102
_MAX_STARTUP_PACKET = 10_000
_MAX_MESSAGE = 1 << 30
STARTUP_TIMEOUT = 60.0  # seconds a client may take to finish startup and auth
_FLUSH_AT = 64 * 1024
_INBOX_SIZE = 256
_TEXT_OID = PG_TYPES[ScalarType.TEXT].oid
_BINARY_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
# Startup parameters that are not session settings.
_NOT_SETTINGS = {"user", "database", "options", "replication"}


class AdapterClient(Protocol):
    """What the server needs of `coordinator_lib.adapter.client.Client`."""

    def password_required(self, user: str, loopback: bool) -> bool: ...

    def scram_verifier(self, user: str) -> str | None: ...

    def startup(
        self,
        user: str,
        database: str,
        password: str | None = None,
        options: Mapping[str, str] = ...,
        loopback: bool = True,
        authenticated: bool = False,
    ) -> AdapterSession: ...

    def cancel_request(self, session_id: int, secret_key: int) -> None: ...


class AdapterSession(Protocol):
    """What the server needs of `coordinator_lib.adapter.client.SessionClient`."""

    startup_response: Any
    transaction_status: str

    def execute(
        self,
        sql: str,
        params: Sequence[str | None] = (),
        param_types: Sequence[ScalarType | None] = (),
    ) -> Iterator[ExecuteResponse]: ...

    def describe(
        self, sql: str, param_types: Sequence[ScalarType | None] = ()
    ) -> StatementDescription: ...

    def cursor_columns(self, name: str) -> tuple[ResultColumn, ...] | None: ...

    def cancel(self) -> None: ...

    def terminate(self) -> None: ...


class ProtocolViolation(AdapterError):
    """The client broke the protocol: reported, then the connection closes."""

    code = "08P01"
    severity = "FATAL"


class _Fatal(AdapterError):
    """An error that ends the connection after it is sent (startup errors)."""

    severity = "FATAL"


# ---------------------------------------------------------------------------
# Backend messages
# ---------------------------------------------------------------------------


def _cstr(text: str) -> bytes:
    return text.replace("\x00", "").encode() + b"\x00"


def _message(tag: bytes, payload: bytes = b"") -> bytes:
    return tag + struct.pack(">i", len(payload) + 4) + payload


def _error_message(
    tag: bytes,
    severity: str,
    code: str,
    message: str,
    detail: str | None = None,
    hint: str | None = None,
    position: int | None = None,
    context: str | None = None,
) -> bytes:
    """ErrorResponse ('E') or NoticeResponse ('N')."""
    fields = [b"S" + _cstr(severity), b"V" + _cstr(severity), b"C" + _cstr(code)]
    fields.append(b"M" + _cstr(message))
    if detail:
        fields.append(b"D" + _cstr(detail))
    if hint:
        fields.append(b"H" + _cstr(hint))
    if position is not None:
        fields.append(b"P" + _cstr(str(position)))
    if context:
        fields.append(b"W" + _cstr(context))
    return _message(tag, b"".join(fields) + b"\x00")


def _error(error: AdapterError, severity: str | None = None) -> bytes:
    return _error_message(
        b"E",
        severity or error.severity,
        error.code,
        error.message,
        error.detail,
        error.hint,
        error.position,
        getattr(error, "context", None),
    )


def _notice(notice: AdapterNotice) -> bytes:
    return _error_message(
        b"N", notice.severity, notice.code, notice.message, notice.detail, notice.hint
    )


def _row_description(columns: Sequence[ResultColumn], formats: Sequence[int]) -> bytes:
    parts = [struct.pack(">h", len(columns))]
    for column, fmt in zip(columns, formats, strict=True):
        pg = PG_TYPES[column.scalar_type]
        oid = pg.oid if column.type_oid is None else column.type_oid
        parts.append(
            _cstr(column.name) + struct.pack(">ihihih", 0, 0, oid, pg.size, column.typmod, fmt)
        )
    return _message(b"T", b"".join(parts))


def _parameter_description(oids: Sequence[int]) -> bytes:
    return _message(b"t", struct.pack(f">h{len(oids)}i", len(oids), *oids))


def _command_complete(tag: str) -> bytes:
    return _message(b"C", _cstr(tag))


# DEALLOCATE [PREPARE] name | ALL, alone in a simple query.
_DEALLOCATE = re.compile(
    r'\s*deallocate\s+(?:prepare\s+)?(?P<name>"(?:[^"]|"")+"|[a-z_][a-z0-9_$]*)\s*;?\s*',
    re.IGNORECASE,
)


def _ready_for_query(status: str) -> bytes:
    return _message(b"Z", status.encode()[:1] or b"I")


_AUTH_OK = _message(b"R", struct.pack(">i", 0))
_PARSE_COMPLETE = _message(b"1")
_BIND_COMPLETE = _message(b"2")
_CLOSE_COMPLETE = _message(b"3")
_NO_DATA = _message(b"n")
_PORTAL_SUSPENDED = _message(b"s")
_EMPTY_QUERY = _message(b"I")
_COPY_DONE = _message(b"c")


# ---------------------------------------------------------------------------
# Row encoding
# ---------------------------------------------------------------------------

Encoder = Callable[[Any], bytes | None]


def _text_encoder(scalar_type: ScalarType) -> Encoder:
    def encode(value: Any) -> bytes | None:
        text = encode_text(value, scalar_type)
        return None if text is None else text.encode()

    return encode


def _binary_encoder(scalar_type: ScalarType) -> Encoder:
    return lambda value: encode_binary(value, scalar_type)


def _encoders(columns: Sequence[ResultColumn], formats: Sequence[int]) -> list[Encoder]:
    return [
        _binary_encoder(c.scalar_type) if f == 1 else _text_encoder(c.scalar_type)
        for c, f in zip(columns, formats, strict=True)
    ]


def _encode_fields(row: Sequence[Any], encoders: Sequence[Encoder]) -> list[bytes | None]:
    if len(row) != len(encoders):
        raise AdapterError(f"internal error: row has {len(row)} values for {len(encoders)} columns")
    try:
        return [encode(value) for encode, value in zip(encoders, row, strict=True)]
    except (TypeError, ValueError, OverflowError, struct.error, AttributeError) as exc:
        raise AdapterError(f"internal error: cannot encode a result value: {exc}") from exc


def _data_row(row: Sequence[Any], encoders: Sequence[Encoder]) -> bytes:
    fields = _encode_fields(row, encoders)
    out = bytearray(struct.pack(">h", len(fields)))
    for value in fields:
        if value is None:
            out += b"\xff\xff\xff\xff"
        else:
            out += struct.pack(">i", len(value))
            out += value
    return _message(b"D", bytes(out))


_COPY_TEXT_ESCAPES = str.maketrans(
    {"\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
)


def copy_text_line(fields: Sequence[str | None]) -> str:
    """One row in COPY's text format: tab separated, `\\N` for NULL, with
    backslash escapes for the delimiter, newlines and other controls."""
    return "\t".join("\\N" if f is None else f.translate(_COPY_TEXT_ESCAPES) for f in fields) + "\n"


def copy_csv_line(fields: Sequence[str | None]) -> str:
    """One row in COPY's CSV format: NULL is an empty unquoted field, so an
    empty string is quoted; fields with a comma, quote or newline are quoted,
    and so is a lone `\\.` (it would read as end-of-data)."""
    lone = len(fields) == 1

    def quote(value: str | None) -> str:
        if value is None:
            return ""
        if value == "" or (lone and value == "\\.") or any(c in value for c in ',"\r\n'):
            return '"' + value.replace('"', '""') + '"'
        return value

    return ",".join(quote(f) for f in fields) + "\n"


def _copy_row_encoder(
    columns: Sequence[ResultColumn], copy_format: str
) -> Callable[[Sequence[Any]], bytes]:
    """Row -> the bytes of one CopyData for COPY's text, csv or binary format."""
    if copy_format == "binary":
        binary = [_binary_encoder(c.scalar_type) for c in columns]

        def encode_binary_tuple(row: Sequence[Any]) -> bytes:
            out = bytearray(struct.pack(">h", len(binary)))
            for value in _encode_fields(row, binary):
                if value is None:
                    out += b"\xff\xff\xff\xff"
                else:
                    out += struct.pack(">i", len(value)) + value
            return bytes(out)

        return encode_binary_tuple
    line = copy_csv_line if copy_format == "csv" else copy_text_line
    text: list[Encoder] = [_text_encoder(c.scalar_type) for c in columns]
    return lambda row: line(
        [None if f is None else f.decode() for f in _encode_fields(row, text)]
    ).encode()


# ---------------------------------------------------------------------------
# Frontend messages
# ---------------------------------------------------------------------------


class _Body:
    """Cursor over one message body; a short or malformed body is a
    protocol violation."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolViolation("invalid message format")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def take_rest(self) -> bytes:
        return self.take(len(self.data) - self.pos)

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def uint32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def cstr(self) -> str:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise ProtocolViolation("invalid string in message")
        raw = self.data[self.pos : end]
        self.pos = end + 1
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise ProtocolViolation("invalid byte sequence for encoding UTF8") from None

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ProtocolViolation("invalid message format")


def _read_exact(rfile: Any, n: int) -> bytes | None:
    """n bytes, or None if the peer closed first."""
    data = rfile.read(n)
    return data if data is not None and len(data) == n else None


def _read_message(rfile: Any) -> tuple[bytes, bytes] | None:
    header = _read_exact(rfile, 5)
    if header is None:
        return None
    (length,) = struct.unpack(">i", header[1:])
    if length < 4 or length > _MAX_MESSAGE:
        raise ProtocolViolation(f"invalid message length {length}")
    body = _read_exact(rfile, length - 4)
    if body is None:
        return None
    return header[:1], body


def parse_options(text: str) -> dict[str, str]:
    """The `options` startup parameter: `-c name=value` / `--name=value`
    words separated by unescaped spaces (`\\ ` is a space, `\\\\` a backslash);
    dashes in names become underscores, as in PostgreSQL."""
    words: list[str] = []
    current: list[str] = []
    escaped = False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char.isspace():
            if current:
                words.append("".join(current))
                current = []
        else:
            current.append(char)
    if current:
        words.append("".join(current))
    settings: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word == "-c" and i + 1 < len(words):
            i += 1
            setting = words[i]
        elif word.startswith(("-c", "--")) and len(word) > 2:
            setting = word[2:]
        else:
            raise _Fatal(f"invalid command-line argument for server process: {word}", code="22023")
        name, sep, value = setting.partition("=")
        if not sep or not name:
            raise _Fatal(f"invalid command-line argument for server process: {word}", code="22023")
        settings[name.replace("-", "_")] = value
        i += 1
    return settings


# ---------------------------------------------------------------------------
# Extended protocol state
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _NoDescription:
    """The description of an empty query string (never sent to describe)."""

    param_types: tuple[ScalarType | None, ...] = ()
    columns: tuple[ResultColumn, ...] | None = None


@dataclass
class _Statement:
    sql: str
    param_oids: tuple[int, ...]  # what the client declared (0: unspecified)
    description: StatementDescription | _NoDescription

    @property
    def param_count(self) -> int:
        return max(len(self.param_oids), len(self.description.param_types))

    def param_type(self, i: int) -> ScalarType | None:
        declared = self.param_oids[i] if i < len(self.param_oids) else 0
        if declared and declared in TYPES_BY_OID:
            return TYPES_BY_OID[declared]
        described = self.description.param_types
        return described[i] if i < len(described) else None

    def param_oid(self, i: int) -> int:
        """The type a parameter is reported and decoded as (text if unknown)."""
        declared = self.param_oids[i] if i < len(self.param_oids) else 0
        if declared:
            return declared
        scalar_type = self.param_type(i)
        return PG_TYPES[scalar_type].oid if scalar_type else _TEXT_OID


@dataclass
class _Portal:
    statement: _Statement
    params: tuple[str | None, ...]
    param_types: tuple[ScalarType | None, ...]
    result_formats: tuple[int, ...]  # one per result column
    responses: Iterator[ExecuteResponse] | None = None
    response: ExecuteResponse | None = None
    done: bool = False

    def close(self) -> None:
        if self.responses is not None:
            with contextlib.suppress(Exception):
                self.responses.close()  # type: ignore[attr-defined]
            self.responses = None


@dataclass
class _SharedState:
    """What a connection's threads (session, reader, server shutdown) share."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    streaming: bool = False  # rows of a statement are being sent
    busy: bool = False  # a statement is running
    peer_closed: bool = False
    closing: bool = False  # server shutdown


# ---------------------------------------------------------------------------
# Connections
# ---------------------------------------------------------------------------


class _Connection:
    """One client connection: startup, then the message loop."""

    def __init__(self, server: PgwireServer, sock: socket.socket, address: Any) -> None:
        self.server = server
        self.client = server.client
        self.sock = sock
        self.address = address
        self.rfile = sock.makefile("rb", buffering=64 * 1024)
        self.state = _SharedState()
        self.write_lock = threading.Lock()
        self.out = bytearray()
        self.inbox: queue.Queue[tuple[bytes, bytes] | ProtocolViolation | None] = queue.Queue(
            _INBOX_SIZE
        )
        self.session: AdapterSession | None = None
        self.statements: dict[str, _Statement] = {}
        self.portals: dict[str, _Portal] = {}
        self.ignore_till_sync = False
        self.thread = threading.Thread(target=self.run, name=f"pgwire-{address}", daemon=True)
        self.reader: threading.Thread | None = None
        self.tls = False  # SSLRequest accepted: the socket is an ssl.SSLSocket

    # -- output ---------------------------------------------------------------

    def send(self, data: bytes) -> None:
        self.out += data
        if len(self.out) >= _FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        if not self.out:
            return
        data = bytes(self.out)
        self.out.clear()
        with self.write_lock:
            if self.state.closing:
                return
            self.sock.sendall(data)

    # -- lifecycle ------------------------------------------------------------

    def run(self) -> None:
        try:
            if self.startup():
                self.loop()
        except OSError:
            pass  # the client went away
        except Exception:
            logger.exception("pgwire connection %s failed", self.address)
        finally:
            self.cleanup()

    def cleanup(self) -> None:
        for portal in self.portals.values():
            portal.close()
        self.portals.clear()
        session, self.session = self.session, None
        if session is not None:
            try:
                session.terminate()
            except Exception:
                logger.exception("terminating session of %s failed", self.address)
        with self.state.lock:
            self.state.closing = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.rfile.close()
        with contextlib.suppress(OSError):
            self.sock.close()
        self.server._forget(self)

    def shutdown(self) -> None:
        """Server shutdown: cancel what runs, tell the client (FATAL 57P01), close."""
        with self.state.lock:
            busy = self.state.busy
        session = self.session
        if busy and session is not None:
            with contextlib.suppress(Exception):
                session.cancel()
        # The session thread may be stuck sending to a client that does not
        # read: then give up on the goodbye and just close.
        acquired = self.write_lock.acquire(timeout=1.0)
        try:
            if acquired and session is not None:
                error = AdapterError(
                    "terminating connection due to administrator command", code="57P01"
                )
                with contextlib.suppress(OSError):
                    self.sock.settimeout(1.0)
                    self.sock.sendall(_error(error, "FATAL"))
            with self.state.lock:
                self.state.closing = True  # nothing more is sent after the goodbye
        finally:
            if acquired:
                self.write_lock.release()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    # -- startup --------------------------------------------------------------

    def startup(self) -> bool:
        """Negotiate, authenticate and start the session; False: close now."""
        self.sock.settimeout(STARTUP_TIMEOUT)
        try:
            params = self.read_startup_packet()
            if params is None:
                return False
            self.session = self.authenticate(params)
        except AdapterError as error:
            with contextlib.suppress(OSError):
                self.send(_error(error, "FATAL"))
                self.flush()
            return False
        except TimeoutError:
            return False
        except OSError:
            raise
        except Exception as exc:
            logger.exception("pgwire startup failed")
            with contextlib.suppress(OSError):
                self.send(_error(AdapterError(f"internal error: {exc}"), "FATAL"))
                self.flush()
            return False
        response = self.session.startup_response
        self.send(_AUTH_OK)
        for name, value in response.parameter_status.items():
            self.send(_message(b"S", _cstr(name) + _cstr(value)))
        key = struct.pack(">II", response.session_id & 0xFFFFFFFF, response.secret_key & 0xFFFFFFFF)
        self.send(_message(b"K", key))
        self.send(_ready_for_query(self.transaction_status()))
        self.flush()
        self.sock.settimeout(None)
        return True

    def read_startup_packet(self) -> dict[str, str] | None:
        """The StartupMessage's parameters after any SSL/GSS negotiation;
        None for a cancel request or a client that left."""
        while True:
            header = _read_exact(self.rfile, 4)
            if header is None:
                return None
            (length,) = struct.unpack(">i", header)
            if length < 8 or length > _MAX_STARTUP_PACKET:
                raise ProtocolViolation("invalid length of startup packet")
            raw = _read_exact(self.rfile, length - 4)
            if raw is None:
                return None
            body = _Body(raw)
            code = body.int32()
            if code == _SSL_REQUEST and self.server.ssl_context is not None and not self.tls:
                self.start_tls(self.server.ssl_context)
                continue
            if code in (_SSL_REQUEST, _GSSENC_REQUEST):
                with self.write_lock:
                    self.sock.sendall(b"N")
                continue
            if code == _CANCEL_REQUEST:
                session_id, secret_key = body.uint32(), body.uint32()
                try:
                    self.client.cancel_request(session_id, secret_key)
                except Exception:
                    logger.exception("cancel request failed")
                return None
            if code >> 16 != 3:
                raise _Fatal(
                    f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: "
                    "server supports 3.0",
                    code="0A000",
                )
            params: dict[str, str] = {}
            while True:
                name = body.cstr()
                if not name:
                    break
                params[name] = body.cstr()
            body.end()
            unknown = [name for name in params if name.startswith("_pq_.")]
            if code & 0xFFFF or unknown:
                payload = struct.pack(">ii", _PROTOCOL_3, len(unknown))
                self.send(_message(b"v", payload + b"".join(_cstr(n) for n in unknown)))
            return {k: v for k, v in params.items() if not k.startswith("_pq_.")}

    def start_tls(self, context: ssl.SSLContext) -> None:
        """Answer an SSLRequest with 'S' and run the rest over TLS. Bytes the
        client sent before the handshake are refused (they would be read as
        if they had come encrypted: CVE-2021-23214)."""
        self.sock.settimeout(0.0)
        try:
            pending = self.rfile.peek(1)
        except (BlockingIOError, TimeoutError):
            pending = b""
        finally:
            self.sock.settimeout(STARTUP_TIMEOUT)
        if pending:
            raise ProtocolViolation("received unencrypted data after SSL request")
        with self.write_lock:
            self.sock.sendall(b"S")
        stream = TlsStream(context.wrap_socket(self.sock, server_side=True))
        self.sock = stream  # type: ignore[assignment]
        self.rfile = stream.makefile()
        self.tls = True

    def authenticate(self, params: dict[str, str]) -> AdapterSession:
        user = params.get("user", "")
        if not user:
            raise _Fatal("no PostgreSQL user name specified in startup packet", code="28000")
        database = params.get("database") or user
        options = {k: v for k, v in params.items() if k not in _NOT_SETTINGS}
        options.update(parse_options(params.get("options", "")))
        loopback = _is_loopback(self.address)
        authenticated = False
        if self.client.password_required(user, loopback):
            self.scram(user)
            authenticated = True
        return self.client.startup(
            user, database, options=options, loopback=loopback, authenticated=authenticated
        )

    def sasl_message(self) -> _Body:
        """The client's next SASLInitialResponse / SASLResponse ('p')."""
        message = _read_message(self.rfile)
        if message is None:
            raise _Fatal("connection closed during authentication", code="08006")
        tag, raw = message
        if tag != b"p":
            raise ProtocolViolation(
                f"expected SASL response, got message type {tag.decode('latin-1')!r}"
            )
        return _Body(raw)

    def scram(self, user: str) -> None:
        """SCRAM-SHA-256 (adapter/scram.py); an unknown user runs the same
        exchange and fails like a wrong password (28P01)."""
        failed = _Fatal(f'password authentication failed for user "{user}"', code="28P01")
        exchange = ScramExchange(self.client.scram_verifier(user))
        self.send(_message(b"R", struct.pack(">i", 10) + _cstr(MECHANISM) + b"\0"))
        self.flush()
        body = self.sasl_message()
        if body.cstr() != MECHANISM:
            raise _Fatal("client selected an invalid SASL authentication mechanism", code="28000")
        length = body.int32()
        client_first = body.take(length).decode("utf-8", "replace") if length >= 0 else ""
        try:
            server_first = exchange.first(client_first)
            self.send(_message(b"R", struct.pack(">i", 11) + server_first.encode()))
            self.flush()
            client_final = self.sasl_message().take_rest().decode("utf-8", "replace")
            server_final = exchange.final(client_final)
        except ScramFailure:
            raise failed from None
        self.send(_message(b"R", struct.pack(">i", 12) + server_final.encode()))

    # -- message loop ---------------------------------------------------------

    def read_loop(self) -> None:
        """Reader thread: parse messages into the inbox until EOF or Terminate.
        Either one while rows stream cancels the statement: nobody will read them."""
        item: tuple[bytes, bytes] | ProtocolViolation | None = None
        try:
            while True:
                item = _read_message(self.rfile)
                if item is None:
                    break
                self.put(item)
                if item[0] == b"X":
                    item = None
                    break
        except ProtocolViolation as error:
            item = error
        except (OSError, ValueError):
            item = None
        with self.state.lock:
            self.state.peer_closed = True
            streaming = self.state.streaming
        session = self.session
        if streaming and session is not None:
            with contextlib.suppress(Exception):
                session.cancel()
        self.put(item)

    def put(self, item: tuple[bytes, bytes] | ProtocolViolation | None) -> None:
        while True:
            try:
                self.inbox.put(item, timeout=0.5)
                return
            except queue.Full:
                with self.state.lock:
                    if self.state.closing:
                        return

    def start_reader(self) -> None:
        """From now on a reader thread reads the client's messages (the
        session thread takes them from the inbox): called between two
        messages, by the session thread, which then reads no more itself."""
        self.reader = threading.Thread(
            target=self.read_loop, name=f"pgwire-reader-{self.address}", daemon=True
        )
        self.reader.start()

    def next_message(self) -> tuple[bytes, bytes] | ProtocolViolation | None:
        """The client's next message: read here until a reader thread takes
        over (`start_reader`), then from its inbox. None: the client went away."""
        if self.reader is not None:
            return self.inbox.get()
        item: tuple[bytes, bytes] | ProtocolViolation | None
        try:
            item = _read_message(self.rfile)
        except ProtocolViolation as error:
            item = error
        except (OSError, ValueError):
            item = None
        if item is None or isinstance(item, ProtocolViolation) or item[0] == b"X":
            with self.state.lock:
                self.state.peer_closed = True
        return item

    def loop(self) -> None:
        while True:
            item = self.next_message()
            if item is None:
                return
            if isinstance(item, ProtocolViolation):
                self.send(_error(item))
                self.flush()
                return
            tag, raw = item
            if not self.dispatch(tag, _Body(raw)):
                return

    def dispatch(self, tag: bytes, body: _Body) -> bool:
        """Handle one message; False ends the connection."""
        if tag == b"X":
            return False
        if tag == b"S":
            self.ignore_till_sync = False
            self.sync()
            return True
        if tag in (b"d", b"c", b"f"):
            return True  # stray COPY data after a failed COPY: ignored, as PostgreSQL does
        if self.ignore_till_sync:
            return True
        handler = self.HANDLERS.get(tag)
        extended = tag != b"Q"
        try:
            if handler is None:
                raise ProtocolViolation(f"invalid frontend message type {tag.decode('latin-1')!r}")
            handler(self, body)
        except AdapterError as error:
            self.report(error)
            if error.severity == "FATAL":
                return False
            if extended:
                self.ignore_till_sync = True
            else:
                self.send(_ready_for_query(self.transaction_status()))
                self.flush()
        except OSError:
            raise
        except Exception as exc:  # a bug below us: report it, keep the connection
            logger.exception("pgwire: statement failed unexpectedly")
            self.report(AdapterError(f"internal error: {exc}"))
            if extended:
                self.ignore_till_sync = True
            else:
                self.send(_ready_for_query(self.transaction_status()))
                self.flush()
        return True

    def report(self, error: AdapterError) -> None:
        self.send(_error(error))
        self.flush()

    def transaction_status(self) -> str:
        try:
            status = self.session.transaction_status if self.session else "I"
        except Exception:
            logger.exception("transaction_status failed")
            return "I"
        return status if status in ("I", "T", "E") else "I"

    # -- simple query ---------------------------------------------------------

    def on_query(self, body: _Body) -> None:
        sql = body.cstr()
        body.end()
        assert self.session is not None
        self.statements.pop("", None)
        self.close_portal("")
        deallocate = _DEALLOCATE.fullmatch(sql)
        if deallocate is not None:
            self.deallocate(deallocate.group("name"))
            return
        prepare = parse_prepare(sql)
        if prepare is not None:
            self.prepare(prepare)
            return
        execute = parse_execute(sql)
        if execute is not None:
            statement = self.statements.get(execute.name)
            if statement is None or not execute.name:
                raise AdapterError(
                    f'prepared statement "{execute.name}" does not exist', code="26000"
                )
            if len(execute.values) != statement.param_count:
                raise AdapterError(
                    f'wrong number of parameters for prepared statement "{execute.name}"',
                    code="42601",
                    detail=f"Expected {statement.param_count} parameters but got "
                    f"{len(execute.values)}.",
                )
            types = [statement.param_type(i) for i in range(statement.param_count)]
            responses = self.session.execute(statement.sql, execute.values, types)
        else:
            responses = self.session.execute(sql)
        try:
            for response in self.running(responses):
                self.send_response(response)
        finally:
            _close_iterator(responses)
        self.send(_ready_for_query(self.transaction_status()))
        self.flush()

    def prepare(self, prepare: Prepare) -> None:
        """SQL PREPARE: a prepared statement as Parse makes one."""
        if prepare.name in self.statements:
            raise AdapterError(f'prepared statement "{prepare.name}" already exists', code="42P05")
        assert self.session is not None
        param_types = [TYPES_BY_OID.get(oid) for oid in prepare.param_oids]
        with self.busy():
            description = self.session.describe(prepare.body, param_types)
        self.statements[prepare.name] = _Statement(prepare.body, prepare.param_oids, description)
        self.send(_command_complete("PREPARE"))
        self.send(_ready_for_query(self.transaction_status()))
        self.flush()

    def deallocate(self, name: str) -> None:
        """DEALLOCATE [PREPARE] name | ALL: prepared statements are this
        connection's (psycopg sends DEALLOCATE ALL after a rollback that
        followed prepared statements)."""
        if name.lower() == "all":
            self.statements = {k: v for k, v in self.statements.items() if not k}
            tag = "DEALLOCATE ALL"
        else:
            key = name[1:-1].replace('""', '"') if name.startswith('"') else name.lower()
            if key not in self.statements or not key:
                raise AdapterError(f'prepared statement "{key}" does not exist', code="26000")
            del self.statements[key]
            tag = "DEALLOCATE"
        self.send(_command_complete(tag))
        self.send(_ready_for_query(self.transaction_status()))
        self.flush()

    def running(self, responses: Iterator[ExecuteResponse]) -> Iterator[ExecuteResponse]:
        """`responses` with the connection marked busy while each statement runs."""
        while True:
            with self.state.lock:
                self.state.busy = True
            try:
                response = next(responses, None)
            finally:
                with self.state.lock:
                    self.state.busy = False
            if response is None:
                return
            yield response

    def send_response(self, response: ExecuteResponse) -> None:
        """A whole response of the simple query protocol."""
        for notice in response.notices:
            self.send(_notice(notice))
        if response.kind is ExecuteResponseKind.EMPTY_QUERY:
            self.send(_EMPTY_QUERY)
        elif response.kind is ExecuteResponseKind.COPY_TO:
            self.send_copy_out(response)
        elif response.kind is ExecuteResponseKind.COPY_IN:
            self.receive_copy_in(response)
        elif response.rows is not None and response.columns is not None:
            formats = [0] * len(response.columns)
            self.send(_row_description(response.columns, formats))
            count, _ = self.send_rows(response, _encoders(response.columns, formats), 0)
            self.send(_command_complete(response.complete_tag(count)))
        else:
            self.send(_command_complete(response.tag))

    def send_rows(
        self, response: ExecuteResponse, encoders: Sequence[Encoder], limit: int
    ) -> tuple[int, bool]:
        """DataRows from the response's iterator: (rows sent, exhausted).
        Rows that may trickle in (FETCH of a SUBSCRIBE) are flushed one by one."""
        assert response.rows is not None
        rows = response.rows = iter(response.rows)  # kept on the portal if suspended
        eager = response.kind is not ExecuteResponseKind.SENDING_ROWS
        count = 0
        with self.streaming():
            while not limit or count < limit:
                row = next(rows, _END)
                if row is _END:
                    return count, True
                self.send(_data_row(row, encoders))
                count += 1
                if eager:
                    self.flush()
        return count, False

    def send_copy_out(self, response: ExecuteResponse) -> None:
        """COPY ... TO STDOUT: CopyOutResponse, a CopyData per row, CopyDone.
        Every row is flushed at once: a SUBSCRIBE's rows come as updates arrive."""
        columns = response.columns or ()
        copy_format = (response.copy_format or "text").lower()
        binary = copy_format == "binary"
        fmt = 1 if binary else 0
        self.send(
            _message(
                b"H", struct.pack(f">bh{len(columns)}h", fmt, len(columns), *[fmt] * len(columns))
            )
        )
        # Binary COPY's header goes in front of the first CopyData, as PostgreSQL
        # sends it (psycopg expects it there).
        prefix = _BINARY_COPY_HEADER if binary else b""
        encode_row = _copy_row_encoder(columns, copy_format)
        self.flush()
        count = 0
        with self.streaming():
            for row in response.rows or ():
                self.send(_message(b"d", prefix + encode_row(row)))
                prefix = b""
                self.flush()
                count += 1
        if binary:
            self.send(_message(b"d", prefix + struct.pack(">h", -1)))
        self.send(_COPY_DONE)
        self.send(_command_complete(response.complete_tag(count)))

    def receive_copy_in(self, response: ExecuteResponse) -> None:
        """COPY ... FROM STDIN: CopyInResponse, then CopyData until CopyDone
        (or CopyFail), decoded chunk by chunk (server/copy_in.py) into the
        adapter's CopyIn, which writes everything at CopyDone. An error ends
        the COPY at once; the client's remaining CopyData, CopyDone or
        CopyFail are then dropped by `dispatch`, as PostgreSQL does."""
        sink = response.copy_in
        plan = sink.plan
        decoder = copy_decoder(plan, [PG_TYPES[st].oid for st in sink.types])
        reader = (
            ArrowCopyReader(plan, sink.types, decoder)
            if sink.columnar
            and isinstance(decoder, TextDecoder | CsvDecoder)
            and fast_path_applies(plan, sink.types)
            else None
        )

        def deliver(pieces: list[Piece]) -> None:
            for piece in pieces:
                if isinstance(piece, ArrowPiece):
                    assert reader is not None
                    sink.add_columns(piece.table, lambda p=piece: reader.redo(p.raw, p.first_line))
                else:
                    sink.add(piece)

        fmt = 1 if plan.format == "binary" else 0
        width = len(sink.types)
        self.send(_message(b"G", struct.pack(f">bh{width}h", fmt, width, *[fmt] * width)))
        self.flush()
        while True:
            item = self.next_message()
            if item is None:
                raise OSError("client went away during COPY")
            if isinstance(item, ProtocolViolation):
                raise item
            tag, raw = item
            if tag == b"d":
                deliver(reader.feed(raw) if reader else [decoder.feed(raw)])
            elif tag == b"c":
                deliver(reader.finish() if reader else [decoder.finish()])
                with self.busy():
                    count = sink.finish()
                self.send(_command_complete(f"COPY {count}"))
                return
            elif tag == b"f":
                reason = _Body(raw).cstr()
                raise AdapterError(f"COPY from stdin failed: {reason}", code="57014")
            elif tag not in (b"H", b"S"):  # Flush and Sync mean nothing here
                raise ProtocolViolation(
                    f"unexpected message type 0x{tag.hex()} during COPY from stdin"
                )

    @contextlib.contextmanager
    def streaming(self) -> Iterator[None]:
        """Rows are being sent: a client that disconnects now cancels the
        statement (the reader thread sees the EOF)."""
        if self.reader is None:
            self.start_reader()
        with self.state.lock:
            self.state.streaming = True
            self.state.busy = True
            peer_closed = self.state.peer_closed
        if peer_closed and self.session is not None:
            self.session.cancel()
        try:
            yield
        finally:
            with self.state.lock:
                self.state.streaming = False
                self.state.busy = False

    # -- extended protocol ----------------------------------------------------

    def on_parse(self, body: _Body) -> None:
        name, sql = body.cstr(), body.cstr()
        count = body.int16()
        if count < 0:
            raise ProtocolViolation("invalid parameter count in Parse")
        oids = tuple(body.uint32() for _ in range(count))
        body.end()
        if name and name in self.statements:
            raise AdapterError(f'prepared statement "{name}" already exists', code="42P05")
        assert self.session is not None
        param_types = [TYPES_BY_OID.get(oid) for oid in oids]
        if sql.strip():
            with self.busy():
                description = self.session.describe(sql, param_types)
        else:
            description = _NoDescription()
        self.statements[name] = _Statement(sql, oids, description)
        self.send(_PARSE_COMPLETE)

    def on_bind(self, body: _Body) -> None:
        portal_name, statement_name = body.cstr(), body.cstr()
        param_formats = [body.int16() for _ in range(max(body.int16(), 0))]
        values: list[bytes | None] = []
        for _ in range(max(body.int16(), 0)):
            length = body.int32()
            values.append(None if length == -1 else body.take(length))
        result_formats = [body.int16() for _ in range(max(body.int16(), 0))]
        body.end()
        statement = self.statements.get(statement_name)
        if statement is None:
            raise AdapterError(
                f'prepared statement "{statement_name}" does not exist', code="26000"
            )
        if portal_name and portal_name in self.portals:
            raise AdapterError(f'portal "{portal_name}" already exists', code="42P03")
        if len(values) != statement.param_count:
            raise AdapterError(
                f"bind message supplies {len(values)} parameters, "
                f'but prepared statement "{statement_name}" requires {statement.param_count}',
                code="08P01",
            )
        formats = _expand_formats(param_formats, len(values), "parameter")
        params = tuple(self.decode(i, data, formats[i], statement) for i, data in enumerate(values))
        columns = statement.description.columns or ()
        self.close_portal(portal_name)
        self.portals[portal_name] = _Portal(
            statement,
            params,
            tuple(statement.param_type(i) for i in range(len(values))),
            _expand_formats(result_formats, len(columns), "result"),
        )
        self.send(_BIND_COMPLETE)

    @staticmethod
    def decode(i: int, data: bytes | None, fmt: int, statement: _Statement) -> str | None:
        oid = statement.param_oid(i)
        try:
            return decode_param(data, fmt, oid)
        except UnsupportedFormat as exc:
            raise AdapterError(f"parameter ${i + 1}: {exc}", code="0A000") from None
        except InvalidEncoding as exc:
            raise AdapterError(str(exc), code="22021") from None
        except ValueError as exc:
            raise AdapterError(
                f"incorrect binary data format in bind parameter {i + 1}: {exc}"
                if fmt
                else f"invalid text in bind parameter {i + 1}: {exc}",
                code="22P03" if fmt else "22021",
            ) from None

    def on_describe(self, body: _Body) -> None:
        kind, name = body.take(1), body.cstr()
        body.end()
        if kind == b"S":
            statement = self.statements.get(name)
            if statement is None:
                raise AdapterError(f'prepared statement "{name}" does not exist', code="26000")
            oids = [statement.param_oid(i) for i in range(statement.param_count)]
            self.send(_parameter_description(oids))
            columns = statement.description.columns
            formats: Sequence[int] = [0] * len(columns or ())
        elif kind == b"P":
            portal = self.portals.get(name)
            declared = self.session.cursor_columns(name) if self.session is not None else None
            if portal is not None:
                columns = portal.statement.description.columns
                formats = portal.result_formats
            elif declared is not None:  # a DECLAREd cursor is a portal too (FETCH sends text)
                columns = declared
                formats = [0] * len(columns)
            else:
                raise AdapterError(f'portal "{name}" does not exist', code="34000")
        else:
            raise ProtocolViolation(f"invalid DESCRIBE message subtype {kind!r}")
        self.send(_NO_DATA if columns is None else _row_description(columns, formats))

    def on_execute(self, body: _Body) -> None:
        name, limit = body.cstr(), body.int32()
        body.end()
        portal = self.portals.get(name)
        if portal is None:
            raise AdapterError(f'portal "{name}" does not exist', code="34000")
        assert self.session is not None
        try:
            self.execute(portal, max(limit, 0))
        except BaseException:
            portal.done = True
            portal.close()
            raise

    def execute(self, portal: _Portal, limit: int) -> None:
        if portal.done:
            response = portal.response
            tag = response.complete_tag(0) if response else "SELECT 0"
            self.send(_EMPTY_QUERY if response is None else _command_complete(tag))
            return
        response = portal.response
        if response is None:
            assert self.session is not None
            portal.responses = self.session.execute(
                portal.statement.sql, portal.params, portal.param_types
            )
            with self.busy():
                response = next(portal.responses, None)
            portal.response = response
            if response is None or response.kind is ExecuteResponseKind.EMPTY_QUERY:
                self.finish(portal)
                self.send(_EMPTY_QUERY)
                return
            for notice in response.notices:
                self.send(_notice(notice))
            if response.kind is ExecuteResponseKind.COPY_TO:
                self.send_copy_out(response)
                self.finish(portal)
                return
            if response.kind is ExecuteResponseKind.COPY_IN:
                self.finish(portal)
                self.receive_copy_in(response)
                return
            if response.rows is None or response.columns is None:
                self.finish(portal)
                self.send(_command_complete(response.tag))
                return
        assert response.columns is not None
        encoders = _encoders(response.columns, _fit(portal.result_formats, response.columns))
        count, exhausted = self.send_rows(response, encoders, limit)
        if exhausted:
            self.finish(portal)
            self.send(_command_complete(response.complete_tag(count)))
        else:
            self.send(_PORTAL_SUSPENDED)

    def finish(self, portal: _Portal) -> None:
        """The statement is done: let the session's generator run to its end."""
        portal.done = True
        if portal.responses is not None:
            with self.busy():
                next(portal.responses, None)
            portal.close()

    def on_close(self, body: _Body) -> None:
        kind, name = body.take(1), body.cstr()
        body.end()
        if kind == b"S":
            self.statements.pop(name, None)
        elif kind == b"P":
            self.close_portal(name)
        else:
            raise ProtocolViolation(f"invalid CLOSE message subtype {kind!r}")
        self.send(_CLOSE_COMPLETE)

    def on_flush(self, body: _Body) -> None:
        body.end()
        self.flush()

    def on_function_call(self, body: _Body) -> None:
        raise AdapterError("function call protocol is not supported", code="0A000")

    def sync(self) -> None:
        if self.transaction_status() == "I":
            for name in list(self.portals):
                self.close_portal(name)
        self.send(_ready_for_query(self.transaction_status()))
        self.flush()

    def close_portal(self, name: str) -> None:
        portal = self.portals.pop(name, None)
        if portal is not None:
            portal.close()

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        with self.state.lock:
            self.state.busy = True
        try:
            yield
        finally:
            with self.state.lock:
                self.state.busy = False

    HANDLERS: dict[bytes, Callable[[_Connection, _Body], None]] = {
        b"Q": on_query,
        b"P": on_parse,
        b"B": on_bind,
        b"D": on_describe,
        b"E": on_execute,
        b"C": on_close,
        b"H": on_flush,
        b"F": on_function_call,
    }


_END = object()


def _close_iterator(iterator: Iterator[Any]) -> None:
    close = getattr(iterator, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            close()


def _expand_formats(codes: Sequence[int], count: int, what: str) -> tuple[int, ...]:
    """Bind's format codes: none (all text), one for all, or one each."""
    for code in codes:
        if code not in (0, 1):
            raise AdapterError(f"unsupported format code: {code}", code="22023")
    if not codes:
        return (0,) * count
    if len(codes) == 1:
        return (codes[0],) * count
    if len(codes) != count:
        raise AdapterError(
            f"bind message has {len(codes)} {what} formats but {count} {what}s", code="08P01"
        )
    return tuple(codes)


def _fit(formats: Sequence[int], columns: Sequence[ResultColumn]) -> Sequence[int]:
    """Result formats for the columns actually returned (text if the
    description differed from the execution)."""
    return formats if len(formats) == len(columns) else [0] * len(columns)


def _is_loopback(address: Any) -> bool:
    host = address[0] if isinstance(address, tuple) and address else ""
    return host == "::1" or host.startswith("127.") or host.startswith("::ffff:127.") or host == ""


# ---------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------


class PgwireServer:
    """Accepts PostgreSQL connections and serves each on its own thread."""

    def __init__(
        self,
        client: AdapterClient,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.client = client
        self.host = host
        self.port = port
        # With a context SSLRequest is answered 'S' (TLS), without one 'N'.
        self.ssl_context = ssl_context
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[_Connection] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def start(self) -> None:
        """Listen (port 0 picks a free port, then `.port` tells which) and
        accept connections on a background thread."""
        allow_deep_statements()  # connection threads get the stack deep SQL needs
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, self.port))
            listener.listen(128)
        except OSError:
            listener.close()
            raise
        listener.settimeout(0.5)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, name="pgwire-accept", daemon=True)
        self._thread.start()
        logger.info("pgwire listening on %s:%d", self.host, self.port)

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                sock, address = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stopping.is_set():
                    return
                logger.exception("pgwire accept failed")
                time.sleep(0.1)  # e.g. out of file descriptors: do not spin
                continue
            sock.settimeout(None)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            connection = _Connection(self, sock, address)
            with self._lock:
                if self._stopping.is_set():
                    sock.close()
                    return
                self._connections.add(connection)
            connection.thread.start()

    def _forget(self, connection: _Connection) -> None:
        with self._lock:
            self._connections.discard(connection)

    @property
    def connection_count(self) -> int:
        with self._lock:
            return len(self._connections)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop accepting, end every connection (FATAL 57P01 admin_shutdown to
        established sessions; running statements are canceled), wait for the
        connection threads up to `timeout` seconds."""
        self._stopping.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept() on Linux
            with contextlib.suppress(OSError):
                self._listener.close()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            connection.shutdown()
        for connection in connections:
            connection.thread.join(timeout)

    def __enter__(self) -> PgwireServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
