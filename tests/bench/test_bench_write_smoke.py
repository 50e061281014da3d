"""bench/write.py at a tiny scale, so the benchmark does not rot: a real
`tidemark serve` and a real PostgreSQL 15, pgbench against both, COPY of a
few rows into both (counts checked by the bench), webhooks (every
acknowledged event landed once, checked by the bench)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import write

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_bench_write_tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (
        ("BENCH_WRITE_SECONDS", "2"),
        ("BENCH_WRITE_CLIENTS", "2"),
        ("BENCH_WRITE_COPY_ROWS", "300"),
        ("BENCH_WRITE_WEBHOOK_SECONDS", "1"),
        ("BENCH_WRITE_OUT", str(tmp_path)),
    ):
        monkeypatch.setenv(name, value)
    assert write.main() == 0
    document = json.loads((tmp_path / "write.json").read_text())
    assert [(r["system"], r["mode"], r["clients"]) for r in document["pgbench"]] == [
        ("Tidemark", "simple", 2),
        ("PostgreSQL 15", "simple", 2),
        ("Tidemark", "prepared", 2),
        ("PostgreSQL 15", "prepared", 2),
    ]
    assert all(r["tps"] > 0 and r["failed"] == 0 for r in document["pgbench"])
    assert [(c["system"], c["rows"]) for c in document["copy"]] == [
        ("Tidemark", 300),
        ("PostgreSQL 15", 300),
    ]
    assert document["webhook"]["requests"] > 0 and document["webhook"]["errors"] == 0
    assert "| prepared | 2 |" in (tmp_path / "write.md").read_text()
