"""The adapter half of webhooks: group commit of concurrent requests at one
timestamp, durability before the answer, uppers that advance like tables',
and Idempotency-Key deduplication (concurrent, failed, after a restart)."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator_lib.adapter import webhook as webhook_module
from coordinator_lib.adapter.client import Handle, serve
from coordinator_lib.adapter.idempotency import IdempotencyKeys
from coordinator_lib.adapter.webhook import (
    AppendResult,
    AppendWebhookError,
    WebhookAppender,
    WebhookRequest,
    jsonb_text,
)
from coordinator_lib.repr.errors import InvalidRow
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.jsonb import canonical_jsonb
from coordinator_lib.repr.relation import TIME_COLUMN
from coordinator_lib.sql.plan_webhook import WebhookBodyFormat
from tests.adapter.conftest import fast_config, run_on
from tests.webhook.conftest import Sql

NOW = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


@pytest.fixture
def handle(tmp_path: Path) -> Iterator[Handle]:
    handle = serve(fast_config(tmp_path / "env"), None)
    try:
        yield handle
    finally:
        handle.shutdown()


@pytest.fixture
def sql(handle: Handle) -> Iterator[Sql]:
    session = handle.client.startup("materialize", "materialize")
    try:
        yield run_on(session)
    finally:
        session.terminate()


def _append(appender: WebhookAppender, source: str, body: str, **headers: str) -> AppendResult:
    return appender.append("materialize", "public", source, body.encode(), headers, NOW)


def _id(handle: Handle, name: str) -> GlobalId:
    return next(i.id for i in handle.coordinator.catalog.items() if i.name.item == name)


def test_concurrent_requests_share_one_durable_append(
    handle: Handle, sql: Sql, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql("CREATE SOURCE events FROM WEBHOOK BODY FORMAT TEXT")
    coord = handle.coordinator
    source = _id(handle, "events")
    appender = WebhookAppender(coord)
    storage_append = coord.storage.append
    appends: list[set[int]] = []  # the update times of each append with rows for `events`

    def slow_append(commands: Any, records: Any = ()) -> None:  # callers queue behind one commit
        time.sleep(0.05)
        storage_append(commands, records)
        for command in commands:
            if command.id == source and len(command.updates):  # group commit's encoded table
                appends.append(set(command.updates.column(TIME_COLUMN).to_pylist()))

    def request(n: int) -> AppendResult:
        result = _append(appender, "events", str(n))
        # Durable and readable at its timestamp as soon as it is answered.
        assert result.timestamp is not None
        assert ((str(n),), 1) in coord.storage.snapshot(source, result.timestamp)
        return result

    monkeypatch.setattr(coord.storage, "append", slow_append)
    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(request, range(32)))
    timestamps = {r.timestamp for r in results}
    assert None not in timestamps and len(timestamps) < 32 / 4
    # One append per commit, all of its rows at the commit's one timestamp.
    assert all(len(times) == 1 for times in appends)
    assert len(appends) == len(timestamps)
    assert {t for times in appends for t in times} == timestamps
    _, upper = coord.storage.collection_frontiers(source)
    latest = max(t for t in timestamps if t is not None)
    assert upper.time is not None and upper.time > latest
    assert len(coord.storage.snapshot(source, latest)) == 32
    assert sorted(int(b) for (b,) in sql("SELECT body FROM events")) == list(range(32))


def test_webhook_uppers_advance_with_the_tables(handle: Handle, sql: Sql) -> None:
    sql("CREATE TABLE t (a int)")
    sql("CREATE SOURCE events FROM WEBHOOK BODY FORMAT TEXT")
    coord = handle.coordinator
    source, table = _id(handle, "events"), _id(handle, "t")
    assert set(coord.group_committed()) == {source, table}
    first = coord.storage.collection_frontiers(source)[1].time
    assert first is not None
    deadline = time.monotonic() + 10
    while coord.storage.collection_frontiers(source)[1].time == first:
        assert time.monotonic() < deadline, "an idle webhook source's upper never advanced"
        time.sleep(0.05)
    # A write to the table advances the webhook source to the same upper, in
    # the same commit (reads at the oracle's time need not wait for it).
    timestamp = coord.commit_writes({table: [((1,), 1)]})
    assert (coord.storage.collection_frontiers(source)[1].time or 0) > timestamp


def test_idempotency_keys_window_and_outcomes() -> None:
    clock = [0.0]
    keys = IdempotencyKeys(window_ms=1000, max_keys=2, clock=lambda: clock[0])
    source = GlobalId.user(1)
    assert keys.claim(source, "a")
    keys.release(source, "a", appended=False)  # failed: the retry appends
    assert keys.claim(source, "a")
    keys.release(source, "a", appended=True)
    assert not keys.claim(source, "a")
    assert keys.claim(GlobalId.user(2), "a")  # per source
    keys.release(GlobalId.user(2), "a", appended=True)
    clock[0] = 1.5
    assert keys.claim(source, "a")  # forgotten after the window
    keys.release(source, "a", appended=True)
    keys.seed(source, ["b", "c"])  # at most two remembered: "a" goes first
    assert len(keys) == 2 and keys.claim(source, "a")


def test_a_concurrent_duplicate_waits_for_the_first_outcome() -> None:
    keys = IdempotencyKeys(window_ms=60_000)
    source = GlobalId.user(1)
    assert keys.claim(source, "k")
    outcome: list[bool] = []
    waiter = threading.Thread(target=lambda: outcome.append(keys.claim(source, "k")))
    waiter.start()
    time.sleep(0.1)
    assert not outcome  # still waiting for the first
    keys.release(source, "k", appended=True)
    waiter.join(10)
    assert outcome == [False]


def test_duplicates_write_nothing_and_failures_can_be_retried(
    handle: Handle, sql: Sql, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql("CREATE SOURCE events FROM WEBHOOK BODY FORMAT TEXT")
    coord = handle.coordinator
    appender = WebhookAppender(coord)
    key = {"idempotency-key": "k1"}
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: _append(appender, "events", "x", **key), range(8)))
    assert sorted(r.duplicate for r in results) == [False] + [True] * 7
    commit = coord.commit_writes

    def failing(changes: Any, encoded: Any = None) -> int:
        raise RuntimeError("storage is down")

    monkeypatch.setattr(coord, "commit_writes", failing)
    with pytest.raises(RuntimeError):
        _append(appender, "events", "y", **{"idempotency-key": "k2"})
    monkeypatch.setattr(coord, "commit_writes", commit)
    assert not _append(appender, "events", "y", **{"idempotency-key": "k2"}).duplicate
    assert _append(appender, "events", "y", **{"idempotency-key": "k2"}).duplicate
    assert sorted(sql("SELECT body FROM events")) == [("x",), ("y",)]


def test_keys_kept_in_a_column_survive_a_restart(tmp_path: Path) -> None:
    config = fast_config(tmp_path / "env")
    for round in range(2):
        handle = serve(config, None)
        try:
            session = handle.client.startup("materialize", "materialize")
            sql = run_on(session)
            if round == 0:
                sql("CREATE SOURCE h FROM WEBHOOK BODY FORMAT TEXT INCLUDE HEADERS")
                sql("CREATE SOURCE n FROM WEBHOOK BODY FORMAT TEXT")
            appender = WebhookAppender(handle.coordinator)
            for source in ("h", "n"):
                result = _append(appender, source, "once", **{"idempotency-key": "k"})
                # The headers column keeps the key: the restarted process knows it.
                # Without such a column, the memory is the process's only.
                assert result.duplicate == (round == 1 and source == "h")
            assert sql("SELECT count(*) FROM h") == [(1,)]
            assert sql("SELECT count(*) FROM n") == [(round + 1,)]
            session.terminate()
        finally:
            handle.shutdown()


def test_shutting_down_is_503(handle: Handle, sql: Sql) -> None:
    sql("CREATE SOURCE events FROM WEBHOOK BODY FORMAT TEXT")
    appender = WebhookAppender(handle.coordinator)
    handle.coordinator._closed.set()
    with pytest.raises(AppendWebhookError) as closing:
        _append(appender, "events", "x")
    assert closing.value.status == 503


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


def _has_infinity(value: Any) -> bool:
    if isinstance(value, float):
        return value in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return any(_has_infinity(v) for v in value.values())
    return isinstance(value, list) and any(_has_infinity(v) for v in value)


def _has_nul(value: Any) -> bool:
    """PostgreSQL's jsonb refuses \\u0000 in strings and keys."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    return isinstance(value, list) and any(_has_nul(v) for v in value)


@given(json_values)
def test_stored_jsonb_text_is_canonical(value: Any) -> None:
    """The appender's fast encoder writes what `canonical_jsonb` (the SQL
    layer's jsonb text) would, and refuses what cannot be stored."""
    try:
        expected = canonical_jsonb(value)
        expected.encode("utf-8")
        storable = not _has_infinity(value) and not _has_nul(value)
    except UnicodeEncodeError:
        storable = False
    if storable:
        assert jsonb_text(value) == expected
    else:
        with pytest.raises(ValueError):
            jsonb_text(value)


def _stored_or_refused(body: bytes, parse: Any) -> Any:
    """What `parse` makes of `body`, None if it refuses it."""
    try:
        return parse(body)
    except (AppendWebhookError, ValueError, RecursionError):
        return None


def _by_jsonb_text(body: bytes) -> list[str]:
    """The stored texts the way `jsonb_text` makes them from a plain parse."""
    return [jsonb_text(value) for value in webhook_module.json_values(body, False)]


def _as_a_body(body: bytes) -> list[str]:
    return webhook_module.body_values(body, WebhookBodyFormat.JSON)


@given(json_values)
def test_a_json_body_is_stored_as_jsonb_text_would_store_it(value: Any) -> None:
    """A JSON body's objects are put in jsonb's key order as they are
    parsed (`_jsonb_object`), and the encoded text is checked rather than
    the value walked: the same text, or the same refusal, as `jsonb_text`."""
    body = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    assert _stored_or_refused(body, _as_a_body) == _stored_or_refused(body, _by_jsonb_text)


@pytest.mark.parametrize(
    "body",
    [
        rb'{"b": 1, "a": 2, "b": 3}',  # a key twice: the last value
        rb'{"\\u0000": "\\u0000", "s": "Infinity", "NaN": -0.0}',  # look like refusals
        rb'{"k": "\u0000"}',  # NUL: refused
        rb'{"\u0000": 1}',
        rb'{"big": 1e999}',  # out of range: refused
        rb'{"\u00e9": 1, "z": 2, "\u00e9\u00e9": {"y": [1, {"b": 2, "a": 1}]}}',
        rb'{"lone": "\ud800"}',  # a lone surrogate: refused
        rb'[{"b": 1, "a": 2}] {"d": 1, "c": 2}',
    ],
)
def test_a_json_body_like_a_refusal_is_stored_as_jsonb_text_would(body: bytes) -> None:
    """Texts that hold what a refusal shows as (`\\u0000`, `Infinity`) and
    the refusals themselves, duplicate and non-ASCII keys, NDJSON."""
    assert _stored_or_refused(body, _as_a_body) == _stored_or_refused(body, _by_jsonb_text)


def test_a_request_that_cannot_be_encoded_fails_alone(
    handle: Handle, sql: Sql, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's rows are encoded together; if that fails, only the request
    whose rows cannot be stored is refused (400), and the rest commit."""
    sql("CREATE SOURCE events FROM WEBHOOK BODY FORMAT TEXT")
    appender = WebhookAppender(handle.coordinator)
    encode = webhook_module.batch_io.inserts_to_table

    def refusing(rows: Any, desc: Any) -> Any:
        if any(row[0] == "unstorable" for row in rows):
            raise InvalidRow("no room for it")
        return encode(rows, desc)

    monkeypatch.setattr(webhook_module.batch_io, "inserts_to_table", refusing)
    bodies = ["a", "unstorable", "b"]
    requests = [
        WebhookRequest("materialize", "public", "events", body.encode(), {}, NOW) for body in bodies
    ]
    first, bad, last = appender.append_all(requests)
    assert isinstance(first, AppendResult) and isinstance(last, AppendResult)
    assert first.timestamp == last.timestamp  # one commit
    assert isinstance(bad, AppendWebhookError) and bad.status == 400
    assert "no room for it" in bad.message
    assert sorted(sql("SELECT body FROM events")) == [("a",), ("b",)]


def test_a_commit_advances_the_other_sources_in_its_one_append(tmp_path: Path) -> None:
    """Group commit moves every other table and webhook source to the new
    upper in the same atomic append as the rows (one consensus write a
    commit, however many there are), not in an append of its own each."""
    handle = serve(fast_config(tmp_path / "env", advance_interval_ms=3_600_000), None)
    session = handle.client.startup("materialize", "materialize")
    try:
        sql = run_on(session)
        for name in ("events", "idle_a", "idle_b", "idle_c"):
            sql(f"CREATE SOURCE {name} FROM WEBHOOK BODY FORMAT TEXT")
        coord = handle.coordinator
        ids = {name: _id(handle, name) for name in ("events", "idle_a", "idle_b", "idle_c")}
        storage_append = coord.storage.append
        mine: list[set[GlobalId]] = []  # collections of each append made by this thread

        def append(commands: Any, records: Any = ()) -> None:
            if threading.get_ident() == caller:
                mine.append({command.id for command in commands})
            storage_append(commands, records)

        caller = threading.get_ident()
        coord.storage.append = append  # type: ignore[method-assign]
        result = WebhookAppender(coord).append("materialize", "public", "events", b"x", {}, NOW)
        coord.storage.append = storage_append  # type: ignore[method-assign]
        assert mine == [set(ids.values())]
        assert result.timestamp is not None
        for id in ids.values():
            upper = coord.storage.collection_frontiers(id)[1].time
            assert upper == result.timestamp + 1
    finally:
        session.terminate()
        handle.shutdown()
