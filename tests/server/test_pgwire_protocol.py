"""The wire protocol message by message, with a raw socket client: startup
negotiation, the extended protocol's corner cases (row-limited Execute,
skip-until-Sync), malformed input, cancel requests, disconnects, shutdown."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from coordinator_lib.server.pgwire import PgwireServer
from tests.server.fake_client import FakeClient, running_server

pytestmark = pytest.mark.timeout(60)

Message = tuple[bytes, bytes]


def cstr(text: str) -> bytes:
    return text.encode() + b"\x00"


def error_fields(body: bytes) -> dict[str, str]:
    """An ErrorResponse/NoticeResponse body as {field code: value}."""
    fields = {}
    for part in body.rstrip(b"\x00").split(b"\x00"):
        if part:
            fields[part[:1].decode()] = part[1:].decode()
    return fields


def data_row(body: bytes) -> list[bytes | None]:
    (count,) = struct.unpack(">h", body[:2])
    values: list[bytes | None] = []
    pos = 2
    for _ in range(count):
        (length,) = struct.unpack(">i", body[pos : pos + 4])
        pos += 4
        if length < 0:
            values.append(None)
        else:
            values.append(body[pos : pos + length])
            pos += length
    return values


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


class Raw:
    """A frontend that sends exactly the bytes a test asks for."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buffer = b""
        self.key: tuple[int, int] | None = None

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, tag: bytes, payload: bytes = b"") -> None:
        self.send_raw(tag + struct.pack(">i", len(payload) + 4) + payload)

    def startup_packet(self, params: dict[str, str], version: int = 3 << 16) -> None:
        body = struct.pack(">i", version)
        body += b"".join(cstr(k) + cstr(v) for k, v in params.items()) + b"\x00"
        self.send_raw(struct.pack(">i", len(body) + 4) + body)

    def read(self, n: int) -> bytes | None:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def recv(self) -> Message | None:
        header = self.read(5)
        if header is None:
            return None
        (length,) = struct.unpack(">i", header[1:])
        body = self.read(length - 4)
        assert body is not None
        return header[:1], body

    def until(self, tag: bytes = b"Z") -> list[Message]:
        messages = []
        while True:
            message = self.recv()
            assert message is not None, f"connection closed; got {messages}"
            messages.append(message)
            if message[0] == tag:
                return messages

    def connect(self, user: str = "materialize", **params: str) -> list[Message]:
        self.startup_packet({"user": user, "database": "materialize", **params})
        messages = self.until(b"Z")
        for tag, body in messages:
            if tag == b"K":
                self.key = struct.unpack(">II", body)
        return messages

    def query(self, sql: str) -> list[Message]:
        self.send(b"Q", cstr(sql))
        return self.until(b"Z")

    def parse(self, sql: str, name: str = "", oids: tuple[int, ...] = ()) -> None:
        payload = cstr(name) + cstr(sql) + struct.pack(f">h{len(oids)}i", len(oids), *oids)
        self.send(b"P", payload)

    def bind(
        self,
        portal: str = "",
        statement: str = "",
        params: tuple[bytes | None, ...] = (),
        param_formats: tuple[int, ...] = (),
        result_formats: tuple[int, ...] = (),
    ) -> None:
        payload = cstr(portal) + cstr(statement)
        payload += struct.pack(f">h{len(param_formats)}h", len(param_formats), *param_formats)
        payload += struct.pack(">h", len(params))
        for value in params:
            payload += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value))
            payload += value or b""
        payload += struct.pack(f">h{len(result_formats)}h", len(result_formats), *result_formats)
        self.send(b"B", payload)

    def describe(self, kind: bytes, name: str = "") -> None:
        self.send(b"D", kind + cstr(name))

    def execute(self, portal: str = "", max_rows: int = 0) -> None:
        self.send(b"E", cstr(portal) + struct.pack(">i", max_rows))

    def sync(self) -> None:
        self.send(b"S")


def tags(messages: list[Message]) -> bytes:
    return b"".join(tag for tag, _ in messages)


@pytest.fixture
def client() -> FakeClient:
    return FakeClient()


@pytest.fixture
def server(client: FakeClient) -> Iterator[PgwireServer]:
    with running_server(client) as server:
        yield server


@pytest.fixture
def raw(server: PgwireServer) -> Iterator[Raw]:
    raw = Raw(server.port)
    yield raw
    raw.close()


def test_startup_sends_parameters_key_and_ready(raw: Raw, client: FakeClient) -> None:
    messages = raw.connect(application_name="raw", options="-c cluster=c1")
    assert tags(messages) == b"R" + b"S" * 9 + b"KZ"
    assert messages[0][1] == struct.pack(">i", 0)
    status = dict(body.rstrip(b"\x00").decode().split("\x00") for t, body in messages if t == b"S")
    assert status["server_version"] == "9.5.0" and status["application_name"] == "raw"
    assert messages[-1][1] == b"I"
    assert client.startups[-1]["options"] == {"application_name": "raw", "cluster": "c1"}
    assert client.startups[-1]["loopback"] is True


def test_ssl_and_gssenc_requests_are_declined(raw: Raw) -> None:
    for code in (80877103, 80877104):
        raw.send_raw(struct.pack(">ii", 8, code))
        assert raw.read(1) == b"N"
    assert tags(raw.connect())[-1:] == b"Z"


def test_newer_minor_version_is_negotiated_down(raw: Raw) -> None:
    raw.startup_packet({"user": "u", "database": "materialize", "_pq_.x": "1"}, (3 << 16) | 2)
    messages = raw.until(b"Z")
    assert messages[0][0] == b"v"
    assert messages[0][1] == struct.pack(">ii", 3 << 16, 1) + cstr("_pq_.x")


@pytest.mark.parametrize(
    ("params", "version", "code"),
    [
        ({"user": "u"}, 2 << 16, "0A000"),
        ({"database": "materialize"}, 3 << 16, "28000"),
        ({"user": "u", "database": "nope"}, 3 << 16, "3D000"),
        ({"user": "u", "options": "garbage"}, 3 << 16, "22023"),
    ],
)
def test_startup_errors_are_fatal(
    raw: Raw, params: dict[str, str], version: int, code: str
) -> None:
    raw.startup_packet(params, version)
    tag, body = raw.recv() or (b"", b"")
    assert tag == b"E"
    assert error_fields(body)["S"] == "FATAL" and error_fields(body)["C"] == code
    assert raw.recv() is None


def test_bad_startup_length_is_a_protocol_violation(raw: Raw) -> None:
    raw.send_raw(struct.pack(">i", 1_000_000))
    tag, body = raw.recv() or (b"", b"")
    assert tag == b"E" and error_fields(body)["C"] == "08P01"
    assert raw.recv() is None


def test_simple_query_messages(raw: Raw) -> None:
    raw.connect()
    messages = raw.query("SELECT * FROM typed")
    assert tags(messages) == b"TDDCZ"
    (count,) = struct.unpack(">h", messages[0][1][:2])
    assert count == 13
    first = data_row(messages[1][1])
    assert first[0] == b"t" and first[4] == b"1.5" and first[8] == b"\\x00ff6162"
    assert first[10] == b"2024-02-29 12:34:56.789" and first[11] == b"2024-02-29 12:34:56+00"
    assert data_row(messages[2][1]) == [None] * 13
    assert messages[3][1] == cstr("SELECT 2")
    assert tags(raw.query("")) == b"IZ"
    assert tags(raw.query("SELECT 1; SELECT 2; DROP TABLE IF EXISTS x")) == b"TDCTDCNCZ"


def test_simple_query_errors_and_transaction_status(raw: Raw) -> None:
    raw.connect()
    assert raw.query("BEGIN")[-1] == (b"Z", b"T")
    messages = raw.query("SELECT 1; SELECT error; SELECT 2")
    assert tags(messages) == b"TDCEZ"
    fields = error_fields(messages[3][1])
    assert fields["C"] == "42703" and fields["P"] == "8" and fields["H"] == "a hint"
    assert messages[-1] == (b"Z", b"E")
    assert error_fields(raw.query("SELECT 1")[0][1])["C"] == "25P02"
    assert raw.query("ROLLBACK")[-1] == (b"Z", b"I")
    # an error after some rows were sent
    messages = raw.query("SELECT fail_midway")
    assert tags(messages) == b"TDEZ" and error_fields(messages[2][1])["C"] == "22012"


def test_row_limited_execute_suspends_and_resumes(raw: Raw, client: FakeClient) -> None:
    raw.connect()
    raw.parse("SELECT generate_series(1, 5)")
    raw.bind()
    raw.execute(max_rows=2)
    raw.execute(max_rows=2)
    raw.execute(max_rows=2)
    raw.sync()
    messages = raw.until(b"Z")
    assert tags(messages) == b"12DDsDDsDCZ"
    values = [data_row(body)[0] for tag, body in messages if tag == b"D"]
    assert values == [b"1", b"2", b"3", b"4", b"5"]
    assert messages[-2][1] == cstr("SELECT 1")
    assert client.statements().count("SELECT generate_series(1, 5)") == 1


def test_describe_statement_and_portal(raw: Raw) -> None:
    raw.connect()
    raw.parse("SELECT $1::int8, $2", name="s1", oids=(0, 25))
    raw.describe(b"S", "s1")
    raw.bind("p1", "s1", (struct.pack(">q", 42), b"hi"), (1, 0), (1,))
    raw.describe(b"P", "p1")
    raw.execute("p1")
    raw.sync()
    messages = raw.until(b"Z")
    assert tags(messages) == b"1tT2TDCZ"
    assert messages[1][1] == struct.pack(">hii", 2, 20, 25)
    portal_description = messages[4][1]
    assert portal_description.endswith(struct.pack(">h", 1))  # binary result format
    assert data_row(messages[5][1]) == [struct.pack(">q", 42), b"hi"]
    # statements outlive Sync; portals do not (outside a transaction)
    raw.describe(b"P", "p1")
    raw.describe(b"S", "s1")
    raw.sync()
    messages = raw.until(b"Z")
    assert tags(messages) == b"EZ" and error_fields(messages[0][1])["C"] == "34000"
    raw.describe(b"S", "s1")
    raw.parse("SELECT 1", name="s1")
    raw.sync()
    messages = raw.until(b"Z")
    assert tags(messages) == b"tTEZ" and error_fields(messages[2][1])["C"] == "42P05"
    raw.send(b"C", b"S" + cstr("s1"))
    raw.bind("", "s1")
    raw.sync()
    messages = raw.until(b"Z")
    assert tags(messages) == b"3EZ" and error_fields(messages[1][1])["C"] == "26000"


def test_no_data_and_empty_query_in_extended_mode(raw: Raw) -> None:
    raw.connect()
    raw.parse("INSERT INTO t VALUES (1)")
    raw.describe(b"S")
    raw.bind()
    raw.execute()
    raw.parse("")
    raw.bind()
    raw.describe(b"P")
    raw.execute()
    raw.sync()
    messages = raw.until(b"Z")
    assert tags(messages) == b"1tn2C12nIZ"
    assert messages[4][1] == cstr("INSERT 0 1")


def test_error_skips_messages_until_sync(raw: Raw, client: FakeClient) -> None:
    raw.connect()
    raw.parse("SELECT error")
    raw.bind()
    raw.execute()
    raw.send(b"Q", cstr("SELECT 1"))  # skipped too
    raw.sync()
    messages = raw.until(b"Z")
    assert tags(messages) == b"EZ"
    assert error_fields(messages[0][1])["P"] == "8"
    assert "SELECT 1" not in client.statements()
    assert tags(raw.query("SELECT 1")) == b"TDCZ"


@pytest.mark.parametrize(
    ("bind", "code"),
    [
        ({"params": (b"1",)}, "08P01"),  # SELECT 1 has no parameters
        ({"result_formats": (2,)}, "22023"),
        ({"result_formats": (0, 0)}, "08P01"),
    ],
)
def test_bind_errors_are_not_fatal(raw: Raw, bind: dict, code: str) -> None:
    raw.connect()
    raw.parse("SELECT 1")
    raw.bind(**bind)
    raw.execute()
    raw.sync()
    messages = raw.until(b"Z")
    assert tags(messages) == b"1EZ" and error_fields(messages[1][1])["C"] == code
    assert tags(raw.query("SELECT 1")) == b"TDCZ"


def test_binary_params_of_unknown_type_are_refused(raw: Raw) -> None:
    raw.connect()
    raw.parse("SELECT $1", oids=(2950,))  # uuid
    raw.bind(params=(b"\x00" * 16,), param_formats=(1,))
    raw.sync()
    messages = raw.until(b"Z")
    assert tags(messages) == b"1EZ" and error_fields(messages[1][1])["C"] == "0A000"


def test_flush_sends_without_sync(raw: Raw) -> None:
    raw.connect()
    raw.parse("SELECT 1")
    raw.send(b"H")
    assert raw.recv() == (b"1", b"")


def test_function_call_is_refused(raw: Raw) -> None:
    raw.connect()
    raw.send(b"F", struct.pack(">i", 1))
    raw.sync()
    messages = raw.until(b"Z")
    assert tags(messages) == b"EZ" and error_fields(messages[0][1])["C"] == "0A000"


@pytest.mark.parametrize(
    "bad",
    [
        b"B" + struct.pack(">i", 6) + b"\x00\x00",  # truncated Bind
        b"?" + struct.pack(">i", 4),  # unknown message type
        b"Q" + struct.pack(">i", 2),  # length below 4
        b"Q" + struct.pack(">i", 9) + b"SELECT",  # no terminating NUL
    ],
)
def test_malformed_messages_close_the_connection(raw: Raw, client: FakeClient, bad: bytes) -> None:
    raw.connect()
    session = client.only_session()
    raw.send_raw(bad)
    tag, body = raw.recv() or (b"", b"")
    assert tag == b"E" and error_fields(body)["C"] == "08P01"
    assert error_fields(body)["S"] == "FATAL"
    assert raw.recv() is None
    wait_for(lambda: session.terminated)


def test_terminate_and_eof_end_the_session(server: PgwireServer, client: FakeClient) -> None:
    first = Raw(server.port)
    first.connect()
    session = client.only_session()
    first.send(b"X")
    wait_for(lambda: session.terminated)
    assert first.recv() is None
    second = Raw(server.port)
    second.connect()
    session = client.only_session()
    second.close()
    wait_for(lambda: session.terminated)
    wait_for(lambda: server.connection_count == 0)


def run_blocking(raw: Raw, sql: str) -> tuple[threading.Thread, list[list[Message]]]:
    """Send `sql` and collect its answer (up to ReadyForQuery or EOF) on a thread."""
    result: list[list[Message]] = []

    def run() -> None:
        raw.send(b"Q", cstr(sql))
        messages = []
        while (message := raw.recv()) is not None:
            messages.append(message)
            if message[0] == b"Z":
                break
        result.append(messages)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def test_cancel_request(server: PgwireServer, client: FakeClient, raw: Raw) -> None:
    raw.connect()
    session = client.only_session()
    thread, result = run_blocking(raw, "SELECT block")
    assert session.blocking.wait(10)
    assert raw.key is not None
    wrong = Raw(server.port)
    wrong.send_raw(struct.pack(">iiII", 16, 80877102, raw.key[0], raw.key[1] ^ 1))
    assert wrong.recv() is None  # the server just closes
    assert not session.canceled.is_set()
    canceler = Raw(server.port)
    canceler.send_raw(struct.pack(">ii", 8, 80877103))  # libpq tries SSL first
    assert canceler.read(1) == b"N"
    canceler.send_raw(struct.pack(">iiII", 16, 80877102, *raw.key))
    assert canceler.recv() is None
    thread.join(10)
    messages = result[0]
    assert tags(messages) == b"EZ" and error_fields(messages[0][1])["C"] == "57014"
    assert client.cancel_requests[-1] == raw.key
    assert tags(raw.query("SELECT 1")) == b"TDCZ"


def test_blocked_session_does_not_block_others(server: PgwireServer, client: FakeClient) -> None:
    blocked = Raw(server.port)
    blocked.connect()
    session = client.only_session()
    thread, result = run_blocking(blocked, "SELECT block")
    assert session.blocking.wait(10)
    other = Raw(server.port)
    other.connect()
    assert tags(other.query("SELECT 1")) == b"TDCZ"
    session.cancel()
    thread.join(10)
    assert tags(result[0]) == b"EZ"


def test_copy_out_formats(raw: Raw) -> None:
    raw.connect()
    messages = raw.query("COPY (SELECT * FROM typed) TO STDOUT")
    assert tags(messages) == b"HddcCZ"
    assert messages[0][1] == struct.pack(">bh", 0, 13) + b"\x00\x00" * 13
    assert messages[1][1].startswith(b"t\t-2\t40000\t1099511627776\t1.5\t0.1\t-12345.6789\t")
    assert b'tab\\there "q", back\\\\slash\\nnewline\t\\\\x00ff6162\t' in messages[1][1]
    assert messages[2][1] == b"\t".join([b"\\N"] * 13) + b"\n"
    assert messages[4][1] == cstr("COPY 2")
    messages = raw.query("COPY (SELECT * FROM typed) TO STDOUT WITH (FORMAT csv)")
    assert b',"tab\there ""q"", back\\slash\nnewline",\\x00ff6162,' in messages[1][1]
    assert messages[2][1] == b"," * 12 + b"\n"
    messages = raw.query("COPY (SELECT generate_series(1, 2)) TO STDOUT WITH (FORMAT binary)")
    assert tags(messages) == b"HdddcCZ"
    assert messages[0][1] == struct.pack(">bhh", 1, 1, 1)
    header = b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8  # in front of the first tuple
    assert messages[1][1] == header + struct.pack(">hiq", 1, 8, 1)
    assert messages[2][1] == struct.pack(">hiq", 1, 8, 2)
    assert messages[3][1] == struct.pack(">h", -1)


def test_copy_out_in_extended_mode(raw: Raw) -> None:
    raw.connect()
    raw.parse("COPY (SELECT generate_series(1, 2)) TO STDOUT")
    raw.bind()
    raw.execute()
    raw.sync()
    messages = raw.until(b"Z")
    assert tags(messages) == b"12HddcCZ"


def test_disconnect_during_subscribe_cancels_it(raw: Raw, client: FakeClient) -> None:
    raw.connect()
    session = client.only_session()
    raw.send(b"Q", cstr("COPY (SUBSCRIBE t) TO STDOUT"))
    messages = [raw.recv() for _ in range(4)]
    assert tags([m for m in messages if m]) == b"Hddd"
    assert data_row_text(messages[1]) == "1000\t1\trow 0\n"
    assert session.blocking.wait(10)
    raw.close()
    wait_for(lambda: session.terminated)
    assert session.canceled.is_set()


def data_row_text(message: Message | None) -> str:
    assert message is not None
    return message[1].decode()


def test_shutdown_tells_idle_clients(client: FakeClient) -> None:
    with running_server(client) as server:
        idle = Raw(server.port)
        idle.connect()
        session = client.only_session()
        busy = Raw(server.port)
        busy.connect()
        busy_session = next(s for s in client.sessions.values() if s is not session)
        thread, result = run_blocking(busy, "SELECT block")
        assert busy_session.blocking.wait(10)
        server.shutdown()
        tag, body = idle.recv() or (b"", b"")
        assert tag == b"E"
        assert error_fields(body)["S"] == "FATAL" and error_fields(body)["C"] == "57P01"
        assert idle.recv() is None
        assert session.terminated and busy_session.terminated
        assert busy_session.canceled.is_set()
        assert server.connection_count == 0
        thread.join(10)
        assert [error_fields(body)["C"] for _, body in result[0]] == ["57P01"]
        with pytest.raises(OSError):
            Raw(server.port)


def _readers() -> int:
    return sum(t.name.startswith("pgwire-reader-") for t in threading.enumerate())


def test_a_connection_reads_its_messages_itself_until_rows_stream(
    raw: Raw, client: FakeClient
) -> None:
    """A connection's session thread reads the client's messages itself (no
    reader thread, no queue hop per message) while it only writes; a reader
    thread takes over the first time rows stream, so a client that leaves
    mid-stream is still noticed (test_disconnect_during_subscribe_cancels_it)."""
    before = _readers()
    raw.connect()
    for _ in range(3):
        raw.parse("INSERT INTO t VALUES (1)")
        raw.bind()
        raw.execute()
        raw.sync()
        assert tags(raw.until(b"Z")) == b"12CZ"
        assert tags(raw.query("INSERT INTO t VALUES (2)")) == b"CZ"
    assert _readers() == before
    assert tags(raw.query("SELECT 1")) == b"TDCZ"
    assert _readers() == before + 1
    assert tags(raw.query("INSERT INTO t VALUES (3)")) == b"CZ"
    session = client.only_session()
    raw.send(b"X")
    wait_for(lambda: session.terminated)
    wait_for(lambda: _readers() == before)
