"""The HTTP server end to end: a real uvicorn on 127.0.0.1 (a free port), a
real HTTP client, the scripted FakeClient as coordinator."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from coordinator_lib.adapter.metrics import Metrics
from coordinator_lib.adapter.responses import ExecuteResponseKind
from coordinator_lib.server.http import HttpServer
from tests.server.http_fake_client import FakeClient, ok

TIMEOUT = 10


@pytest.fixture
def client() -> FakeClient:
    return FakeClient(passwords={"alice": "secret"})


@pytest.fixture
def server(client: FakeClient) -> Iterator[HttpServer]:
    server = HttpServer(client, client.metrics, port=0)
    server.start()
    yield server
    server.shutdown()


def post_sql(server: HttpServer, body: object, **kwargs: object) -> requests.Response:
    return requests.post(f"{server.url}/api/sql", json=body, timeout=TIMEOUT, **kwargs)


def sql_results(server: HttpServer, body: object, **kwargs: object) -> list[dict]:
    response = post_sql(server, body, **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()["results"]


INT4 = {"name": "?column?", "type_oid": 23, "type_len": 4, "type_mod": -1}


# -- request shapes ------------------------------------------------------


def test_simple_request_runs_every_statement(server: HttpServer, client: FakeClient) -> None:
    results = sql_results(server, {"query": "SELECT 1; SELECT 2;"})
    assert results == [
        {"tag": "SELECT 1", "rows": [[1]], "desc": {"columns": [INT4]}, "notices": []},
        {"tag": "SELECT 1", "rows": [[2]], "desc": {"columns": [INT4]}, "notices": []},
    ]
    assert client.executed == ["SELECT 1", "SELECT 2"]


def test_extended_request_binds_text_and_null_params(
    server: HttpServer, client: FakeClient
) -> None:
    results = sql_results(
        server,
        {
            "queries": [
                {"query": "CREATE TABLE t (a int)"},
                {"query": "INSERT INTO t VALUES ($1)", "params": ["100"]},
                {"query": "SELECT $1::int + 1", "params": ["41"]},
                {"query": "SELECT $1::int + 1", "params": [None]},
            ]
        },
    )
    assert results == [
        {"ok": "CREATE TABLE", "notices": []},
        {"ok": "INSERT 0 1", "notices": []},
        {"tag": "SELECT 1", "rows": [[42]], "desc": {"columns": [INT4]}, "notices": []},
        {"tag": "SELECT 1", "rows": [[None]], "desc": {"columns": [INT4]}, "notices": []},
    ]


def test_empty_simple_query_has_no_results(server: HttpServer, client: FakeClient) -> None:
    assert sql_results(server, {"query": " ; -- nothing\n"}) == []
    assert sql_results(server, {"queries": []}) == []
    assert client.executed == []


def test_notices_are_reported_with_their_statement(server: HttpServer) -> None:
    results = sql_results(server, {"query": "DROP TABLE IF EXISTS missing"})
    assert results == [
        {
            "ok": "DROP TABLE",
            "notices": [
                {
                    "message": 'table "missing" does not exist, skipping',
                    "code": "00000",
                    "severity": "notice",
                }
            ],
        }
    ]


def test_values_are_encoded_as_materialize_does(server: HttpServer) -> None:
    (result,) = sql_results(server, {"query": "SELECT * FROM every_type"})
    assert result["tag"] == "SELECT 3"
    assert [c["type_oid"] for c in result["desc"]["columns"]] == [
        16, 21, 20, 700, 701, 1700, 25, 17, 1082, 1114, 1184, 3802
    ]  # fmt: skip
    assert [c["type_len"] for c in result["desc"]["columns"]][:5] == [1, 2, 8, 4, 8]
    full, nulls, edge = result["rows"]
    assert full == [
        True,
        -3,
        2**62,
        0.1,  # float4 0.1 is not 0.10000000149011612
        1.5,
        "12345678901234567890.125",  # numeric as a string
        "héllo",
        "\\x00ff41",
        "2024-02-29",
        "2024-01-02 03:04:05.25",
        "2024-01-02 03:04:05+00",
        {"a": [1, 2.5, None], "b": "x"},  # jsonb as parsed JSON
    ]
    assert nulls == [None] * 12
    # JSON has no NaN/Infinity (null, as Materialize); numeric never uses exponents.
    assert edge[:8] == [False, 0, 0, None, None, "-1000", "", "\\x"]


# -- errors --------------------------------------------------------------


def test_error_stops_the_simple_request(server: HttpServer, client: FakeClient) -> None:
    results = sql_results(server, {"query": "SELECT 1; SELECT missing; SELECT 2"})
    assert results == [
        {"tag": "SELECT 1", "rows": [[1]], "desc": {"columns": [INT4]}, "notices": []},
        {
            "error": {
                "message": 'column "missing" does not exist',
                "code": "42703",
                "hint": "check it",
                "position": 8,
            },
            "notices": [],
        },
    ]
    assert client.executed == ["SELECT 1", "SELECT missing"]  # SELECT 2 never ran


def test_error_stops_the_extended_request(server: HttpServer, client: FakeClient) -> None:
    results = sql_results(
        server,
        {"queries": [{"query": "SELECT 1"}, {"query": "SELEC 1"}, {"query": "SELECT 2"}]},
    )
    assert len(results) == 2
    assert results[1] == {
        "error": {"message": 'syntax error at or near "SELEC"', "code": "42601", "position": 1},
        "notices": [],
    }
    assert client.executed == ["SELECT 1", "SELEC 1"]


def test_internal_errors_become_an_error_result(server: HttpServer, client: FakeClient) -> None:
    def broken(params: object) -> object:
        raise RuntimeError("boom")

    client.statements["SELECT broken"] = broken  # type: ignore[assignment]
    (result,) = sql_results(server, {"query": "SELECT broken; SELECT 1"})
    assert result == {"error": {"message": "internal error: boom", "code": "XX000"}, "notices": []}
    assert client.active == 0


def test_subscribe_is_refused_before_anything_runs(server: HttpServer, client: FakeClient) -> None:
    results = sql_results(server, {"query": "SELECT 1; subscribe t"})
    assert len(results) == 1
    assert results[0]["error"]["message"] == "unsupported via this API: subscribe t"
    assert results[0]["error"]["code"] == "XX000"
    assert client.executed == []

    results = sql_results(
        server,
        {"queries": [{"query": "SELECT 1"}, {"query": "SUBSCRIBE t"}, {"query": "SELECT 2"}]},
    )
    assert [sorted(r) for r in results] == [
        ["desc", "notices", "rows", "tag"],
        ["error", "notices"],
    ]
    assert client.executed == ["SELECT 1"]
    for statement in ("COPY t TO STDOUT", "DECLARE c CURSOR FOR SELECT 1", "FETCH c", "CLOSE c"):
        (result,) = sql_results(server, {"query": statement})
        assert result["error"]["message"] == f"unsupported via this API: {statement}"


def test_streaming_responses_are_refused(server: HttpServer, client: FakeClient) -> None:
    # Not caught by the statement's first word: refused by its response kind.
    (result,) = sql_results(server, {"query": "EXPLAIN SUBSCRIBE t; SELECT 1"})
    assert result["error"]["message"].startswith("unsupported via this API: SUBSCRIBE")
    assert client.executed == ["EXPLAIN SUBSCRIBE t"]


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[1, 2]",
        b'{"sql": "SELECT 1"}',
        b'{"queries": [{"query": "SELECT $1::int + 1", "params": [1]}]}',
        b'{"queries": [{"query": "SELECT 1; SELECT 2"}]}',
        b'{"queries": [{"query": "  "}]}',
        b'{"queries": ["SELECT 1"]}',
        b"\xff\xfe",
    ],
)
def test_malformed_request_is_400(server: HttpServer, client: FakeClient, body: bytes) -> None:
    response = requests.post(f"{server.url}/api/sql", data=body, timeout=TIMEOUT)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "08P01" and error["message"]
    assert client.executed == [] and client.startups == []


def test_malformed_options_are_400(server: HttpServer) -> None:
    response = post_sql(server, {"query": "SELECT 1"}, params={"options": "{oops"})
    assert response.status_code == 400


def test_only_post(server: HttpServer) -> None:
    assert requests.get(f"{server.url}/api/sql", timeout=TIMEOUT).status_code == 405


# -- sessions and authentication ----------------------------------------


def test_each_request_has_its_own_session(server: HttpServer, client: FakeClient) -> None:
    sql_results(server, {"query": "SELECT 1"})
    sql_results(server, {"query": "SELECT missing"})
    assert client.terminated == 2 and client.active == 0
    assert client.startups[0] == {
        "user": "materialize",
        "database": "materialize",
        "options": {},
        "loopback": True,
    }


def test_options_reach_the_session(server: HttpServer, client: FakeClient) -> None:
    options = '{"application_name": "app", "cluster": "quickstart"}'
    sql_results(server, {"query": "SELECT 1"}, params={"options": options})
    assert client.startups[-1]["options"] == {"application_name": "app", "cluster": "quickstart"}

    response = post_sql(server, {"query": "SELECT 1"}, params={"options": '{"database": "x"}'})
    assert response.status_code == 400
    assert response.json()["error"] == {"message": 'database "x" does not exist', "code": "3D000"}


def test_basic_auth(server: HttpServer, client: FakeClient) -> None:
    assert sql_results(server, {"query": "SELECT 1"}, auth=("alice", "secret"))
    assert client.startups[-1]["user"] == "alice"

    wrong = post_sql(server, {"query": "SELECT 1"}, auth=("alice", "guess"))
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"].startswith("Basic")
    assert wrong.json()["error"] == {
        "message": 'password authentication failed for user "alice"',
        "code": "28P01",
    }

    for header in ("Bearer token", "Basic !!", "Basic YWxpY2U="):  # the last: "alice", no colon
        refused = post_sql(server, {"query": "SELECT 1"}, headers={"Authorization": header})
        assert refused.status_code == 401, header
        assert refused.json()["error"]["code"] == "28000"
    assert client.executed == ["SELECT 1"]


def test_password_required_without_credentials_is_401(client: FakeClient) -> None:
    client.passwords["materialize"] = "pw"
    with HttpServer(client, client.metrics, port=0) as server:
        response = post_sql(server, {"query": "SELECT 1"})
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "28000"
        assert sql_results(server, {"query": "SELECT 1"}, auth=("materialize", "pw"))


# -- concurrency ---------------------------------------------------------


def test_slow_statement_does_not_block_the_server(server: HttpServer, client: FakeClient) -> None:
    release = threading.Event()

    def slow(params: object) -> object:
        assert release.wait(TIMEOUT)
        return ok(ExecuteResponseKind.INSERTED, "INSERT 0 1")

    client.statements["INSERT slowly"] = slow  # type: ignore[assignment]
    outcome: list[requests.Response] = []
    thread = threading.Thread(
        target=lambda: outcome.append(post_sql(server, {"query": "INSERT slowly"}))
    )
    thread.start()
    try:
        deadline = time.monotonic() + TIMEOUT
        while "INSERT slowly" not in client.executed and time.monotonic() < deadline:
            time.sleep(0.01)
        # While one statement blocks its worker thread, other requests are served.
        assert sql_results(server, {"query": "SELECT 1"})[0]["rows"] == [[1]]
        assert requests.get(f"{server.url}/api/health", timeout=TIMEOUT).status_code == 200
    finally:
        release.set()
        thread.join(TIMEOUT)
    assert outcome[0].json()["results"] == [{"ok": "INSERT 0 1", "notices": []}]


# -- metrics and health --------------------------------------------------


def _samples(server: HttpServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = requests.get(f"{server.url}/metrics", timeout=TIMEOUT)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_metrics_count_statements(server: HttpServer) -> None:
    key = ("tidemark_statements_total", (("kind", "select"), ("status", "ok")))
    assert key not in _samples(server)
    sql_results(server, {"query": "SELECT 1; SELECT 2; SELECT missing"})
    samples = _samples(server)
    assert samples[key] == 2
    assert samples[("tidemark_statements_total", (("kind", "select"), ("status", "error")))] == 1
    assert samples[("tidemark_statement_duration_seconds_count", (("kind", "select"),))] == 3
    assert samples[("tidemark_sessions_total", ())] == 1
    assert samples[("tidemark_active_sessions", ())] == 0
    assert samples[("tidemark_active_statements", ())] == 0


def test_two_servers_have_their_own_metrics() -> None:
    first, second = FakeClient(), FakeClient()
    with (
        HttpServer(first, first.metrics, port=0) as a,
        HttpServer(second, second.metrics, port=0) as b,
    ):
        assert a.port != b.port and 0 not in (a.port, b.port)
        sql_results(a, {"query": "SELECT 1"})
        assert _samples(a)[("tidemark_sessions_total", ())] == 1
        assert _samples(b)[("tidemark_sessions_total", ())] == 0


def test_health_turns_503_when_shutdown_begins(client: FakeClient) -> None:
    server = HttpServer(client, Metrics(), port=0)
    server.start()
    url = f"{server.url}/api/health"
    response = requests.get(url, timeout=TIMEOUT)
    assert (response.status_code, response.json()) == (200, {"status": "ok"})

    stopping = threading.Thread(target=server.shutdown, kwargs={"drain_seconds": 1.0})
    stopping.start()
    try:
        deadline = time.monotonic() + TIMEOUT
        response = requests.get(url, timeout=TIMEOUT)
        while response.status_code == 200 and time.monotonic() < deadline:
            response = requests.get(url, timeout=TIMEOUT)
        assert (response.status_code, response.json()) == (503, {"status": "shutting down"})
    finally:
        stopping.join(TIMEOUT)
    assert not stopping.is_alive()
    with pytest.raises(requests.ConnectionError):
        requests.get(url, timeout=TIMEOUT)


def test_extra_routes_are_served(client: FakeClient) -> None:
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def webhook(request: Request) -> JSONResponse:
        assert request.app.state.client is client
        return JSONResponse(dict(request.path_params))

    route = Route("/api/webhook/{database}/{schema}/{source}", webhook, methods=["POST"])
    with HttpServer(client, client.metrics, port=0, extra_routes=[route]) as server:
        response = requests.post(f"{server.url}/api/webhook/d/s/src", timeout=TIMEOUT)
        assert response.json() == {"database": "d", "schema": "s", "source": "src"}


def test_start_fails_on_a_port_in_use(client: FakeClient) -> None:
    with HttpServer(client, client.metrics, port=0) as first:
        second = HttpServer(client, client.metrics, port=first.port)
        with pytest.raises(OSError):
            second.start()
