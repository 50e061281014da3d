"""bench/webhook.py at a tiny scale, so the benchmark does not rot: it runs
a real `tidemark serve`, every phase gets answers, none is an error, and
its own check (the sources hold exactly the acknowledged events) passed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from bench import webhook
from coordinator_lib.cli import build_parser


@pytest.mark.slow
def test_bench_webhook_tiny(tmp_path: Path) -> None:
    argv = ["--seconds", "0.5", "--concurrency", "1,4", "--array-concurrency", "2"]
    assert webhook.main([*argv, "--out", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "webhook.json").read_text())
    phases = document["phases"]
    assert [(p["name"], p["concurrency"]) for p in phases] == [
        ("1 event", 1),
        ("1 event", 4),
        ("ARRAY of 100", 2),
    ]
    assert all(p["requests"] > 0 and p["errors"] == 0 for p in phases)
    assert phases[-1]["events_per_s"] == pytest.approx(phases[-1]["requests_per_s"] * 100, 0.01)
    assert "| 1 event | 4 |" in (tmp_path / "webhook.md").read_text()


def test_the_landed_check_finds_lost_repeated_and_unacknowledged_events() -> None:
    """`check_landed` (what every phase ends with) fails on an acknowledged
    request whose event is missing, an event stored twice, or one stored
    for a request that was not acknowledged; it passes on an exact match."""
    stored = [[1, 1], [2, 2], [4, 1]]  # request number, events stored
    server = cast(Any, SimpleNamespace(sql=lambda query: stored))
    with pytest.raises(AssertionError) as failed:
        webhook.check_landed(server, "events", [1, 2, 3], 1)
    assert "missing [3], unacknowledged [4], not exactly once [2]" in str(failed.value)
    stored[:] = [[1, 1], [2, 1]]
    webhook.check_landed(server, "events", [1, 2], 1)


def test_bench_servers_answer_every_query_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The benchmarks' `tidemark serve` never sends a peek to Spark, however
    many rows the load stored: the landed check counting a webhook source
    over `--local-max-rows` updates started a JVM on a loaded machine and
    timed out (bench.write ran with 10 * BENCH_WRITE_COPY_ROWS, 10,000)."""
    started: list[list[str]] = []

    def popen(command: list[str], **_: object) -> Any:
        started.append(command)
        return SimpleNamespace(poll=lambda: None)

    monkeypatch.setattr(webhook.subprocess, "Popen", popen)
    monkeypatch.setattr(webhook.requests, "get", lambda *_, **__: SimpleNamespace(status_code=200))
    webhook.Server(tmp_path / "env")
    command = started[0]
    assert command[1:4] == ["-m", "coordinator_lib.cli", "serve"]
    args = build_parser().parse_args(command[3:])
    assert args.local_max_rows >= 10**12
