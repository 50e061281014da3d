"""bench/scheduler_bench.py at a tiny scale, so the benchmark does not rot."""

from __future__ import annotations

import json
from pathlib import Path

from bench import scheduler_bench


def test_scheduler_bench_smoke(tmp_path: Path) -> None:
    args = ["--tasks", "200", "--captures", "4", "--ticks", "6", "--drain-tasks", "10"]
    assert scheduler_bench.main([*args, "--out", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "scheduler.json").read_text())
    steady = document["steady"]
    assert steady["all"]["ticks"] == 6 and steady["all"]["median_ms"] > 0
    assert {r["all"]["ticks"] for r in document["rebalance"]} == {6}
    for drain in document["drain"]:
        assert drain["held"] == 10 and drain["ticks"] > 0
    assert "drain a capture holding 10 tasks" in (tmp_path / "scheduler.md").read_text()
