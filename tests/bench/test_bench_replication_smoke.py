"""bench/replication.py at a tiny scale, so the benchmark does not rot: a
real upstream PostgreSQL, pgbench and `tidemark serve`; the replicated
tables end equal to the upstream's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import replication

pytestmark = pytest.mark.slow


def test_bench_replication_tiny(tmp_path: Path) -> None:
    assert replication.main(["--seconds", "2", "--clients", "1", "--out", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "replication.json").read_text())
    assert document["rows_match"] is True
    assert document["transactions"] > 0 and document["visible_tps"] > 0
    assert "| upstream commits/s |" in (tmp_path / "replication.md").read_text()
