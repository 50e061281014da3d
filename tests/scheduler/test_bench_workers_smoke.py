"""bench/scheduler_workers.py (a drain with real `tidemark worker`
processes) at a tiny scale, so the benchmark does not rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import scheduler_workers


@pytest.mark.slow
def test_scheduler_workers_bench_smoke(tmp_path: Path) -> None:
    args = ["--views", "3", "--rows", "20", "--concurrency", "3"]
    assert scheduler_workers.main([*args, "--out", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "scheduler_workers.json").read_text())
    [run] = document["runs"]
    assert run["views"] == 3 and run["max_task_concurrency"] == 3
    for key in ("create_s", "placement_s", "drain_s", "fresh_after_drain_s"):
        assert run[key] > 0, key
    assert "drain a worker holding 3 views" in (tmp_path / "scheduler_workers.md").read_text()
