"""Every answer of POST /api/webhook/... from a real HTTP client against a
real server, an HMAC check with a real secret, and the body formats."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import http.client
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config, run_on
from tests.fixtures.served import connect
from tests.webhook.conftest import Sql, post, signature, webhook_url

SECRET = b"whsec-7f3a9c"
SIGNED = """CREATE SOURCE signed FROM WEBHOOK BODY FORMAT JSON
  CHECK (
    WITH (HEADERS, BODY AS request_body, SECRET whsec AS validation_secret)
    constant_time_eq(decode(headers->>'x-signature', 'hex'),
                     hmac(request_body, validation_secret, 'sha256'))
  )"""


def _signed(sql: Sql) -> None:
    sql(f"CREATE SECRET whsec AS '{SECRET.decode()}'")
    sql(SIGNED)


def _count(sql: Sql, source: str) -> int:
    return sql(f"SELECT count(*) FROM {source}")[0][0]


def _raw_post(env: Environment, path: str, headers: list[tuple[str, str]], body: bytes) -> Any:
    """http.client, which (unlike requests) sends a header twice if told to."""
    connection = http.client.HTTPConnection("127.0.0.1", env.http.port, timeout=30)
    try:
        connection.putrequest("POST", path)
        for name, value in [*headers, ("Content-Length", str(len(body)))]:
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_200_400_401_404_413_503_with_a_signed_source(environment: Environment, sql: Sql) -> None:
    _signed(sql)
    body = b'{"event": "paid", "amount": 12}'
    ok = post(environment, "signed", body, **{"X-Signature": signature(SECRET, body)})
    assert (ok.status_code, ok.text) == (200, "")
    assert sql("SELECT body FROM signed") == [('{"event": "paid", "amount": 12}',)]

    refused = {
        "check false": (body, {"X-Signature": signature(b"wrong", body)}),
        "check NULL (no header)": (body, {}),
        "check errors (not hex)": (body, {"X-Signature": "zz"}),
        "body not JSON": (b'{"event":', {"X-Signature": signature(SECRET, b'{"event":')}),
    }
    for reason, (data, headers) in refused.items():
        answer = post(environment, "signed", data, **headers)
        assert answer.status_code == 400, reason
        assert SECRET.decode() not in answer.text, reason
    check = post(environment, "signed", body, **{"X-Signature": "00"})
    assert check.text == "failed to validate the request"
    assert post(environment, "signed", body, **{"X-Signature": "zz"}).text == (
        "error occurred while running validation"
    )

    sig = signature(SECRET, body)
    path = "/api/webhook/materialize/public/signed"
    twice = [("X-Signature", sig), ("x-signature", sig)]
    status, text = _raw_post(environment, path, twice, body)
    assert status == 401 and "x-signature provided more than once" in text

    assert post(environment, "nope", body).status_code == 404
    assert requests.post(webhook_url(environment, "signed", "nodb"), data=body).status_code == 404
    sql("CREATE TABLE t (a int)")
    assert post(environment, "t", body).status_code == 404  # a table is no webhook source

    too_big = b"[" + b" " * (2 * 1024 * 1024) + b"]"
    answer = post(environment, "signed", too_big, **{"X-Signature": signature(SECRET, too_big)})
    assert answer.status_code == 413

    assert _count(sql, "signed") == 1  # only the first request wrote anything
    sql("CREATE SOURCE dropped FROM WEBHOOK BODY FORMAT TEXT")
    sql("DROP SOURCE dropped")
    assert post(environment, "dropped", "x").status_code == 404

    # Shutting down: /api/health says 503 while load balancers drain, and so
    # does the webhook endpoint (the server still answers, nothing is written).
    stopping = threading.Thread(target=environment.http.shutdown, kwargs={"drain_seconds": 2})
    stopping.start()
    while not environment.http.app.state.shutting_down:
        time.sleep(0.01)
    answer = post(environment, "signed", body, **{"X-Signature": sig})
    assert (answer.status_code, answer.text) == (503, "service unavailable")
    stopping.join(30)
    assert _count(sql, "signed") == 1


def test_413_is_exactly_over_the_limit(environment: Environment, sql: Sql) -> None:
    sql("CREATE SOURCE raw FROM WEBHOOK BODY FORMAT BYTES")
    limit = environment.handle.coordinator.config.webhook_max_body_bytes
    assert limit == 2 * 1024 * 1024
    assert post(environment, "raw", b"x" * limit).status_code == 200
    assert post(environment, "raw", b"x" * (limit + 1)).status_code == 413
    assert _count(sql, "raw") == 1


def test_413_limit_set_in_config(tmp_path: Path) -> None:
    env = Environment(
        fast_config(tmp_path / "env", webhook_max_body_bytes=100), pgwire_port=0, http_port=0
    )
    env.start()
    session = env.handle.client.startup("materialize", "materialize")
    try:
        sql = run_on(session)
        sql("CREATE SOURCE raw FROM WEBHOOK BODY FORMAT BYTES")
        assert post(env, "raw", b"x" * 100).status_code == 200
        answer = post(env, "raw", b"x" * 101)
        assert answer.status_code == 413
        assert _count(sql, "raw") == 1
    finally:
        session.terminate()
        env.stop()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_413_limit_set_by_the_serve_flag(tmp_path: Path) -> None:
    """`tidemark serve --webhook-max-body-bytes N`, as a user starts it."""
    http_port = _free_port()
    base = f"http://127.0.0.1:{http_port}"
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "tidemark"), "serve", "--data-dir",
         str(tmp_path / "env"), "--pgwire-port", str(_free_port()), "--http-port",
         str(http_port), "--webhook-max-body-bytes", "64"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(f"{base}/api/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.3)
        created = requests.post(
            f"{base}/api/sql",
            json={"query": "CREATE SOURCE raw FROM WEBHOOK BODY FORMAT BYTES"},
            timeout=30,
        )
        assert created.status_code == 200, created.text
        url = f"{base}/api/webhook/materialize/public/raw"
        assert requests.post(url, data=b"x" * 64, timeout=30).status_code == 200
        assert requests.post(url, data=b"x" * 65, timeout=30).status_code == 413
        counted = requests.post(
            f"{base}/api/sql", json={"query": "SELECT count(*) FROM raw"}, timeout=60
        )
        assert counted.json()["results"][0]["rows"] == [[1]]
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output


def test_include_header_names_in_any_case(environment: Environment, sql: Sql) -> None:
    """Header names in the SQL match whatever case they are written and sent in."""
    sql(
        "CREATE SOURCE h FROM WEBHOOK BODY FORMAT TEXT "
        "INCLUDE HEADERS ('X-Keep') INCLUDE HEADER 'X-A' AS a INCLUDE HEADER 'x-B' AS b BYTES"
    )
    sent = [("x-a", "1"), ("X-B", "2"), ("X-KEEP", "3"), ("x-other", "4")]
    assert _raw_post(environment, "/api/webhook/materialize/public/h", sent, b"hi")[0] == 200
    [(body, headers, a, b)] = sql("SELECT body, headers, a, b FROM h")
    assert (body, a, b) == ("hi", "1", b"2")
    assert json.loads(headers) == {"x-keep": "3"}
    shown = sql("SHOW CREATE SOURCE h")[0][1]
    assert "INCLUDE HEADER 'x-a' AS a" in shown


@pytest.fixture
def one_at_a_time(tmp_path: Path) -> Iterator[Environment]:
    config = fast_config(tmp_path / "env", webhook_max_concurrency=1)
    env = Environment(config, pgwire_port=0, http_port=0)
    env.start()
    try:
        yield env
    finally:
        env.stop()


def test_429_over_the_concurrency_limit_and_500_for_a_bug(
    one_at_a_time: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = one_at_a_time
    session = env.handle.client.startup("materialize", "materialize")
    sql = run_on(session)
    sql("CREATE SOURCE events FROM WEBHOOK BODY FORMAT TEXT")
    coord = env.handle.coordinator
    commit = coord.commit_writes
    entered, release = threading.Event(), threading.Event()

    def slow_commit(changes: Any, encoded: Any = None) -> int:
        entered.set()
        release.wait(30)
        return commit(changes, encoded)

    monkeypatch.setattr(coord, "commit_writes", slow_commit)
    first: list[int] = []
    worker = threading.Thread(target=lambda: first.append(post(env, "events", "a").status_code))
    worker.start()
    assert entered.wait(30)
    busy = post(env, "events", "b")
    assert (busy.status_code, busy.text) == (429, "too many requests")
    release.set()
    worker.join(30)
    assert first == [200]

    def broken_commit(changes: Any, encoded: Any = None) -> int:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(coord, "commit_writes", broken_commit)
    failed = post(env, "events", "c")
    assert (failed.status_code, failed.text) == (500, "internal error")
    monkeypatch.setattr(coord, "commit_writes", commit)
    assert sql("SELECT body FROM events") == [("a",)]
    session.terminate()


def test_hmac_check_with_a_real_secret_now_and_rotation(environment: Environment, sql: Sql) -> None:
    """A Stripe-like scheme: base64 HMAC over "<timestamp>.<body>", and the
    timestamp may not lie in the future of the request's receipt (now())."""
    sql("CREATE SECRET stripe AS decode('c3RyaXBlLXNlY3JldA==', 'base64')")  # stripe-secret
    sql(
        """CREATE SOURCE payments FROM WEBHOOK BODY FORMAT JSON
        INCLUDE HEADER 'x-sent-at' AS sent_at
        CHECK (
          WITH (HEADERS, BODY, SECRET stripe AS key BYTES)
          constant_time_eq(
            headers->>'x-sig',
            encode(hmac((headers->>'x-sent-at') || '.' || body, key, 'sha256'), 'base64'))
          AND (headers->>'x-sent-at')::timestamptz <= now()
        )"""
    )

    def send(body: bytes, key: bytes, sent_at: dt.datetime) -> int:
        stamp = sent_at.isoformat()
        mac = hmac.new(key, stamp.encode() + b"." + body, hashlib.sha256).digest()
        headers = {"x-sig": base64.b64encode(mac).decode(), "x-sent-at": stamp}
        return post(environment, "payments", body, **headers).status_code

    now = dt.datetime.now(dt.UTC)
    body = json.dumps({"id": "evt_1", "amount": 500}).encode()
    assert send(body, b"stripe-secret", now) == 200
    assert send(body, b"other-secret", now) == 400
    assert send(body, b"stripe-secret", now + dt.timedelta(hours=1)) == 400  # from the future
    sql("ALTER SECRET stripe AS 'rotated'")
    assert send(body, b"stripe-secret", now) == 400
    assert send(body, b"rotated", now) == 200
    rows = sql("SELECT body, sent_at FROM payments")
    assert len(rows) == 2 and all(r[1] == now.isoformat() for r in rows)


def test_body_formats_and_headers(environment: Environment, sql: Sql) -> None:
    sql("CREATE SOURCE j FROM WEBHOOK BODY FORMAT JSON")
    sql("CREATE SOURCE ja FROM WEBHOOK BODY FORMAT JSON ARRAY")
    sql("CREATE SOURCE t FROM WEBHOOK BODY FORMAT TEXT INCLUDE HEADERS ('x-a', 'x-b')")
    sql(
        "CREATE SOURCE b FROM WEBHOOK BODY FORMAT BYTES INCLUDE HEADERS (NOT 'x-secret') "
        "INCLUDE HEADER 'x-a' AS a INCLUDE HEADER 'x-b' AS b BYTES"
    )
    assert post(environment, "j", '{"a": 1}\n{"a": 2}\n\n[3, 4]').status_code == 200
    assert sorted(sql("SELECT body FROM j")) == [("[3, 4]",), ('{"a": 1}',), ('{"a": 2}',)]
    assert post(environment, "ja", '[{"a": 1}, {"a": 2}]\n{"a": 3}\n[]').status_code == 200
    assert sorted(sql("SELECT body FROM ja")) == [('{"a": 1}',), ('{"a": 2}',), ('{"a": 3}',)]
    assert post(environment, "t", "héllo", **{"X-A": "1", "X-C": "3"}).status_code == 200
    assert sql("SELECT body, headers::text FROM t") == [("héllo", "{x-a=>1}")]
    assert post(environment, "t", b"\xff\xfe").status_code == 400  # not UTF-8
    answer = post(environment, "b", b"\x00\x01", **{"X-A": "1", "X-Secret": "s"})
    assert answer.status_code == 200
    [(body, secret, x_a, a, b)] = sql(
        "SELECT body, headers ? 'x-secret', headers -> 'x-a', a, b FROM b"
    )
    assert (body, secret, x_a, a, b) == (b"\x00\x01", False, "1", "1", None)


def test_typed_body_schema(environment: Environment, sql: Sql) -> None:
    sql(
        "CREATE SOURCE orders FROM WEBHOOK BODY FORMAT JSON ARRAY "
        "(id bigint NOT NULL, amount numeric, at timestamptz, tags jsonb, ok boolean)"
    )
    good = [
        {"id": 1, "amount": 12.5, "at": "2024-05-01T10:00:00Z", "tags": ["a"], "ok": True},
        {"id": 2, "extra": "ignored"},
    ]
    assert post(environment, "orders", json.dumps(good)).status_code == 200
    rows = sorted(sql("SELECT id, amount::text, at::text, tags, ok FROM orders"))
    assert rows[0][0] == 1 and rows[0][1].startswith("12.5") and rows[0][3] == '["a"]'
    assert rows[1] == (2, None, None, None, None)
    for bad, column in [
        ([{"id": "one"}], '"id"'),
        ([{"amount": 1}], '"id"'),
        ([{"id": 3, "at": "yesterday"}], '"at"'),
        ([{"id": 3, "ok": "yes"}], '"ok"'),
        ([{"id": 2**70}], '"id"'),
    ]:
        answer = post(environment, "orders", json.dumps(bad))
        assert answer.status_code == 400 and column in answer.text, (bad, answer.text)
    assert post(environment, "orders", "[1, 2]").status_code == 400
    assert len(sql("SELECT * FROM orders")) == 2


def test_the_documented_example(environment: Environment, sql: Sql) -> None:
    """docs/webhooks.md's GitHub example, signed like GitHub signs."""
    sql("CREATE SECRET github_secret AS 'the shared secret'")
    sql(
        """CREATE SOURCE github FROM WEBHOOK
          BODY FORMAT JSON
          INCLUDE HEADER 'x-github-event' AS event
          CHECK (
            WITH (HEADERS, BODY AS request_body, SECRET github_secret AS key)
            constant_time_eq(
              headers->>'x-hub-signature-256',
              'sha256=' || encode(hmac(request_body, key, 'sha256'), 'hex'))
          )"""
    )
    body = b'{"action": "opened", "number": 7}'
    mac = "sha256=" + signature(b"the shared secret", body)
    headers = {"X-GitHub-Event": "pull_request", "X-Hub-Signature-256": mac}
    assert post(environment, "github", body, **headers).status_code == 200
    headers["X-Hub-Signature-256"] = "sha256=" + signature(b"guess", body)
    assert post(environment, "github", body, **headers).status_code == 400
    assert sql("SELECT body, event FROM github") == [
        ('{"action": "opened", "number": 7}', "pull_request")
    ]


def test_the_readme_example(environment: Environment, sql: Sql) -> None:
    sql("CREATE SECRET hook_key AS 'shared secret'")
    sql(
        """CREATE SOURCE orders FROM WEBHOOK BODY FORMAT JSON ARRAY
             (id bigint NOT NULL, amount numeric)
           CHECK (WITH (HEADERS, BODY, SECRET hook_key)
             constant_time_eq(decode(headers->>'x-signature', 'hex'),
                              hmac(body, hook_key, 'sha256')))"""
    )
    body = b'[{"id": 1, "amount": 9.99}, {"id": 2, "amount": 5}]'
    answer = post(environment, "orders", body, **{"X-Signature": signature(b"shared secret", body)})
    assert answer.status_code == 200
    assert sql("SELECT id, amount::text FROM orders ORDER BY id") == [
        (1, "9.99"),  # numeric text without trailing zeros, as Materialize
        (2, "5"),
    ]


def test_materialize_documented_check_over_headers_map(environment: Environment, sql: Sql) -> None:
    """Materialize's documented CHECK reads `headers -> 'x-signature'` as text
    (headers is a map[text=>text]; it was jsonb, so decode(jsonb, ...) was
    42883). The map answers `->`, `?` and map_length, and prints as
    Materialize prints it."""
    sql(f"CREATE SECRET whsec AS '{SECRET.decode()}'")
    sql(
        """CREATE SOURCE docs FROM WEBHOOK BODY FORMAT TEXT INCLUDE HEADERS ('x-signature', 'x-n')
          CHECK (
            WITH (HEADERS, BODY AS request_body, SECRET whsec)
            decode(headers->'x-signature', 'base64') = hmac(request_body, whsec, 'sha256')
          )"""
    )
    body = b"paid 12"
    signed = base64.b64encode(hmac.new(SECRET, body, hashlib.sha256).digest()).decode()
    assert post(environment, "docs", body, **{"X-Signature": signed, "X-N": "3"}).status_code == 200
    wrong = base64.b64encode(hmac.new(b"wrong", body, hashlib.sha256).digest()).decode()
    assert post(environment, "docs", body, **{"X-Signature": wrong}).status_code == 400
    assert sql(
        "SELECT headers->'x-n', headers ? 'x-n', headers ? 'x-m', map_length(headers),"
        " headers::text LIKE '{x-n=>3,x-signature=>%}' FROM docs"
    ) == [("3", True, False, 2, True)]
    assert sql(
        "SELECT '{a=>1,b=>2}'::map[text=>text]::text, '{ b => 2, a=>1 }'::map[text=>text] -> 'b'"
    ) == [("{a=>1,b=>2}", "2")]
    with connect(environment) as conn:  # pgwire prints a map as Materialize does
        [(shown,)] = conn.execute("SELECT headers FROM docs").fetchall()
        assert shown.startswith("{x-n=>3,x-signature=>")


def test_concurrent_posts_land_exactly_once_in_shared_commits(
    environment: Environment, sql: Sql, monkeypatch: pytest.MonkeyPatch
) -> None:
    """48 clients POST at once while a commit is slow: every one gets its
    200 only once its event is stored, each event is stored once, and the
    requests that queued meanwhile went into a few commits of many
    requests each (one `commit_writes` per batch, not per request)."""
    sql("CREATE SOURCE burst FROM WEBHOOK BODY FORMAT JSON")
    coord = environment.handle.coordinator
    commit = coord.commit_writes
    commits: list[int] = []  # rows in each commit of `burst`

    def slow_commit(changes: Any, encoded: Any = None) -> int:
        time.sleep(0.2)  # requests arriving meanwhile queue for the next commit
        commits.append(sum(table.num_rows for table in encoded.values()))
        return commit(changes, encoded)

    monkeypatch.setattr(coord, "commit_writes", slow_commit)
    clients = 48
    start = threading.Barrier(clients)

    def send(n: int) -> int:
        start.wait(30)
        return post(environment, "burst", json.dumps({"n": n})).status_code

    with ThreadPoolExecutor(clients) as pool:
        assert list(pool.map(send, range(clients))) == [200] * clients
    stored = sorted(json.loads(body)["n"] for (body,) in sql("SELECT body FROM burst"))
    assert stored == list(range(clients))
    assert sum(commits) == clients and len(commits) <= clients // 8, commits


def _exchange(env: Environment, requests_bytes: bytes, answers: int) -> list[tuple[int, bytes]]:
    """Send raw HTTP/1.1 bytes on one connection and read `answers`
    responses in the order they come: (status, body) each (an interim
    100 Continue is skipped)."""
    with socket.create_connection(("127.0.0.1", env.http.port), timeout=30) as sock:
        sock.sendall(requests_bytes)
        stream = sock.makefile("rb")
        got = []
        while len(got) < answers:
            status = int(stream.readline().split()[1])
            length = 0
            while (line := stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if status != 100:
                got.append((status, stream.read(length)))
        return got


def _request(source: str, body: bytes, *headers: str, version: str = "1.1") -> bytes:
    head = [f"POST /api/webhook/materialize/public/{source} HTTP/{version}", "Host: x", *headers]
    if not any(h.lower().startswith("transfer-encoding") for h in headers):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"


def test_fast_path_and_asgi_path_answer_alike(
    environment: Environment, sql: Sql, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain POST is answered from the HTTP protocol (no ASGI task); a
    chunked one, HTTP/1.0, `Expect: 100-continue` or one declaring a body
    over the limit (whose body is read and dropped) goes the ASGI way.
    Both give the same status and text for every kind of answer, and each
    200 stored its event."""
    endpoint = environment.webhooks
    asgi: list[str] = []
    serve = endpoint.serve

    async def counted(scope: Any, receive: Any, send: Any, names: Any) -> None:
        asgi.append(scope["path"])
        await serve(scope, receive, send, names)

    monkeypatch.setattr(endpoint, "serve", counted)
    sql("CREATE SOURCE j FROM WEBHOOK BODY FORMAT JSON")
    sql("CREATE SOURCE r FROM WEBHOOK BODY FORMAT BYTES")
    limit = endpoint.max_body_bytes
    cases = [
        ("j", b'{"n": 1}', ()),
        ("j", b'{"n": ', ()),  # 400: not JSON
        ("nope", b"{}", ()),  # 404
        ("j", b"{}", ("X-A: 1", "x-a: 2")),  # 401: a header twice
        ("r", b"x" * (limit + 1), ()),  # 413
    ]
    fast = []
    for source, body, headers in cases:
        fast.append(_exchange(environment, _request(source, body, *headers), 1)[0])
    assert asgi == ["/api/webhook/materialize/public/r"], "the others took the fast path"
    assert [status for status, _ in fast] == [200, 400, 404, 401, 413]
    assert fast[1][1].startswith(b"failed to deserialize body as jsonb")
    assert fast[4][1] == b"request body is larger than %d bytes" % limit
    other_ways = {
        "chunked": lambda s, b, h: _request(s, _chunked(b), *h, "Transfer-Encoding: chunked"),
        "HTTP/1.0": lambda s, b, h: _request(s, b, *h, version="1.0"),
        "expect": lambda s, b, h: _request(s, b, *h, "Expect: 100-continue"),
    }
    for way, build in other_ways.items():
        before = len(asgi)
        answers = [_exchange(environment, build(s, b, h), 1)[0] for s, b, h in cases]
        assert answers == fast, way
        assert len(asgi) > before, f"{way} went the ASGI way"
    stored = sorted(body for (body,) in sql("SELECT body FROM j"))
    assert stored == ['{"n": 1}'] * 4


def test_pipelined_requests_are_answered_in_order(
    environment: Environment, sql: Sql, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests sent back to back on one connection, the first one's commit
    slow: the answers come in the order the requests were sent (a request
    behind one in flight waits for it), and each 200 stored its event."""
    sql("CREATE SOURCE p FROM WEBHOOK BODY FORMAT JSON")
    coord = environment.handle.coordinator
    commit = coord.commit_writes
    slow = [True]

    def slow_first(changes: Any, encoded: Any = None) -> int:
        if slow.pop() if slow else False:
            time.sleep(0.5)
        return commit(changes, encoded)

    monkeypatch.setattr(coord, "commit_writes", slow_first)
    sent = (
        _request("p", b'{"n": 1}')
        + _request("p", b'{"n": ')
        + b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n"
        + _request("p", b'{"n": 2}')
        + _request("missing", b"{}")
    )
    answers = _exchange(environment, sent, 5)
    assert [status for status, _ in answers] == [200, 400, 200, 200, 404]
    assert sorted(body for (body,) in sql("SELECT body FROM p")) == ['{"n": 1}', '{"n": 2}']


def test_connection_close_is_honoured_on_the_fast_path(environment: Environment, sql: Sql) -> None:
    """`Connection: close`: the answer says so and the server hangs up."""
    sql("CREATE SOURCE c FROM WEBHOOK BODY FORMAT TEXT")
    with socket.create_connection(("127.0.0.1", environment.http.port), timeout=30) as sock:
        sock.sendall(_request("c", b"bye", "Connection: close"))
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head = received.split(b"\r\n\r\n", 1)[0].lower()
    assert head.startswith(b"http/1.1 200") and b"connection: close" in head
    assert sql("SELECT body FROM c") == [("bye",)]
