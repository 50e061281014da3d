"""SIGKILL `tidemark serve` while clients post; after a restart every
request that got a 200 is present exactly once (invariants 3 and 7 for
webhook sources), and clients retrying with their Idempotency-Key get each
request appended exactly once in the end."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.fixtures.serve_process import Server

pytestmark = pytest.mark.slow

CLIENTS = 8
SOURCE = (
    "CREATE SOURCE events FROM WEBHOOK BODY FORMAT JSON INCLUDE HEADER 'idempotency-key' AS ikey"
)


def _request(key: str) -> bytes:
    client, seq = key.split("-")
    return json.dumps({"client": int(client), "seq": int(seq)}).encode()


def _post(session: requests.Session, url: str, key: str) -> int | None:
    try:
        answer = session.post(url, data=_request(key), headers={"Idempotency-Key": key}, timeout=30)
    except requests.RequestException:
        return None  # the server died under us: the outcome is unknown
    return answer.status_code


def test_sigkill_while_posting_loses_and_duplicates_nothing_acknowledged(tmp_path: Path) -> None:
    data, log = tmp_path / "env", tmp_path / "serve.log"
    server = Server(data, log)
    server.sql(SOURCE)
    url = f"{server.url}/api/webhook/materialize/public/events"
    acked: set[str] = set()
    unknown: set[str] = set()
    refused: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(number: int) -> None:
        session = requests.Session()
        seq = 0
        while not stop.is_set():
            key = f"{number}-{seq}"
            status = _post(session, url, key)
            with lock:
                (acked if status == 200 else unknown).add(key)
            if status != 200:
                if status is not None:
                    refused.append(status)
                return
            seq += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(acked) < 300 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.kill()  # mid-flight: clients have requests outstanding
    stop.set()
    for thread in threads:
        thread.join(60)
    assert not refused, f"answers other than 200 before the kill: {refused}"
    assert len(acked) >= 300, "too few requests acknowledged before the kill"
    assert unknown, "the kill found no request in flight"

    server = Server(data, log)
    try:
        keys = [row[0] for row in server.sql("SELECT ikey FROM events")]
        missing = acked - set(keys)
        assert not missing, f"acknowledged but lost: {sorted(missing)[:5]}"
        assert len(keys) == len(set(keys)), "a request was appended twice"
        assert set(keys) <= acked | unknown

        # Clients retry what they got no answer for, and some that lost
        # nothing retry anyway: every retry is a 200, and nothing doubles.
        session = requests.Session()
        url = f"{server.url}/api/webhook/materialize/public/events"
        retried = sorted(unknown) + sorted(acked)[:50]
        for key in retried:
            assert _post(session, url, key) == 200
        keys = [row[0] for row in server.sql("SELECT ikey FROM events")]
        assert len(keys) == len(set(keys)), "a retried request was appended twice"
        assert set(keys) == acked | unknown
        bodies = server.sql("SELECT body FROM events")
        assert sorted(body["seq"] for [body] in bodies) == sorted(
            int(k.split("-")[1]) for k in acked | unknown
        )
    finally:
        server.stop()
