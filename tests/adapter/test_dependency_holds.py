"""A materialized view holds its inputs durably: it resumes in a later
process even after its inputs advanced (and compacted) far past it while
nobody ran it: a server restart, or Dagster runs that come and go."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from coordinator_lib.adapter.client import serve
from coordinator_lib.adapter.coordinator import Config, Coordinator, compaction_pass
from coordinator_lib.sql.catalog import QualifiedName


@contextmanager
def _opened(data_dir: Path) -> Iterator[Coordinator]:
    handle = serve(Config(data_dir=str(data_dir), background=False))
    try:
        yield handle.coordinator
    finally:
        handle.shutdown()


def _sql(coordinator: Coordinator, sql: str) -> list[tuple]:  # type: ignore[type-arg]
    from coordinator_lib.adapter.client import Client

    session = Client(coordinator).startup("materialize")
    try:
        rows: list[tuple] = []  # type: ignore[type-arg]
        for response in session.execute(sql):
            rows += [tuple(r) for r in (response.rows or [])]
        return rows
    finally:
        session.terminate()


def _id(coordinator: Coordinator, name: str):  # type: ignore[no-untyped-def]
    item = coordinator.catalog.index.lookup(QualifiedName("materialize", "public", name))
    assert item is not None
    return item.id


def test_view_resumes_after_its_inputs_moved_on_without_it(tmp_path: Path) -> None:
    with _opened(tmp_path) as first:
        _sql(first, "CREATE TABLE t (a int)")
        _sql(first, "INSERT INTO t VALUES (1), (2)")
        _sql(first, "CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n, sum(a) AS s FROM t")
        first.step_once()
        view_upper = first.storage.collection_frontiers(_id(first, "v"))[1].time
    # Another process writes and compacts while nobody maintains the view
    # (the table keeps 1 s of history by default).
    with _opened(tmp_path) as writer:
        for value in (3, 4):
            _sql(writer, f"INSERT INTO t VALUES ({value})")
            time.sleep(0.6)
        writer.group_commit.advance()
        compaction_pass(writer.storage)
        table = _id(writer, "t")
        since, upper = writer.storage.collection_frontiers(table)
        assert upper.time is not None and upper.time - view_upper > 1000
        assert since.time is not None and since.time <= view_upper - 1  # held for the view
    with _opened(tmp_path) as later:
        view = _id(later, "v")
        assert later.frontiers_of(view)[1].time == view_upper  # not stepped by the writer
        _sql(later, "INSERT INTO t VALUES (5)")
        assert _sql(later, "SELECT n, s FROM v") == [(5, 15)]


def test_dropping_the_view_releases_its_inputs(tmp_path: Path) -> None:
    with _opened(tmp_path) as coordinator:
        _sql(coordinator, "CREATE TABLE t (a int)")
        _sql(coordinator, "CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n FROM t")
        coordinator.step_once()
        table = _id(coordinator, "t")
        held = coordinator.storage.shard(table).state().critical_readers
        assert any(reader.startswith("dependent-") for reader in held)
        _sql(coordinator, "DROP MATERIALIZED VIEW v")
        held = coordinator.storage.shard(table).state().critical_readers
        assert not any(reader.startswith("dependent-") for reader in held)
