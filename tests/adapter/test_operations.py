"""coordinator_lib.adapter.operations: what the Dagster code location asks
of an environment (project SQL, catalog objects and lineage, observing and
sealing without Spark, materializing, checks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator_lib.adapter import operations
from coordinator_lib.adapter.coordinator import Config, Coordinator
from coordinator_lib.sql.catalog import ItemKind, QualifiedName
from tests.fixtures.served import connect, served

PROJECT = """
-- People.
CREATE TABLE people (id bigint NOT NULL, name text, city text);

CREATE TABLE visits (person bigint NOT NULL, minutes int);
CREATE VIEW long_visits AS SELECT person, minutes FROM visits WHERE minutes > 5;

-- Minutes per city,
-- a join and an aggregate.
CREATE MATERIALIZED VIEW city_minutes AS
    SELECT p.city, sum(v.minutes) AS minutes, count(*) AS n
    FROM people p JOIN long_visits v ON v.person = p.id GROUP BY p.city;
CREATE MATERIALIZED VIEW hourly WITH (REFRESH EVERY '1 hour') AS SELECT count(*) AS n FROM people;
CREATE INDEX city_minutes_by_city ON city_minutes (city);
CREATE SOURCE counter FROM LOAD GENERATOR COUNTER;
CREATE SOURCE hook FROM WEBHOOK BODY FORMAT TEXT;
"""


class _NoSpark:
    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"Spark was touched ({name})")


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[Coordinator]:
    coordinator = Coordinator(Config(data_dir=str(tmp_path), background=False), _NoSpark())
    try:
        yield coordinator
    finally:
        coordinator.close()


def _id(coordinator: Coordinator, name: str):  # type: ignore[no-untyped-def]
    item = coordinator.catalog.index.lookup(QualifiedName("materialize", "public", name))
    assert item is not None
    return item.id


def test_split_statements_keeps_first_lines() -> None:
    parts = operations.split_statements("-- c\nCREATE TABLE a (x int);\n\n  CREATE TABLE b (y int)")
    assert parts == [("CREATE TABLE a (x int)", 2), ("CREATE TABLE b (y int)", 4)]


def test_apply_sql_is_idempotent_and_only_creates(coordinator: Coordinator) -> None:
    first = operations.apply_sql(coordinator, PROJECT, "project.sql")
    assert all(d.created for d in first)
    city = next(d for d in first if d.name.endswith("city_minutes"))
    assert city.line == 10 and city.comment == "Minutes per city, a join and an aggregate."
    again = operations.apply_sql(coordinator, PROJECT, "project.sql")
    assert [d.name for d in again] == [d.name for d in first]
    assert not any(d.created for d in again)
    assert len(coordinator.catalog.items()) == 8
    with pytest.raises(ValueError, match="CREATE statements only"):
        operations.apply_sql(coordinator, "INSERT INTO people VALUES (1, 'a', 'b')")
    with pytest.raises(ValueError, match="OR REPLACE"):
        operations.apply_sql(coordinator, "CREATE OR REPLACE VIEW w AS SELECT 1 AS one")


def test_catalog_objects_inline_views_and_trace_columns(coordinator: Coordinator) -> None:
    operations.apply_sql(coordinator, PROJECT)
    objects = {o.name: o for o in operations.catalog_objects(coordinator)}
    assert "long_visits" not in objects  # a plain view is inlined where it is used
    people, visits = _id(coordinator, "people"), _id(coordinator, "visits")
    city = objects["city_minutes"]
    assert city.kind is ItemKind.MATERIALIZED_VIEW and set(city.inputs) == {people, visits}
    assert city.lineage == {
        "city": ((people, "city"),),
        "minutes": ((visits, "minutes"),),
        "n": (),
    }
    assert city.refresh_every_ms is None and objects["hourly"].refresh_every_ms == 3_600_000
    index = objects["city_minutes_by_city"]
    assert index.inputs == (city.id,) and index.index_key == ("city",)
    assert objects["counter"].source_type == operations.INGESTION
    assert objects["hook"].source_type == operations.WEBHOOK
    assert [c.name for c in objects["people"].columns] == ["id", "name", "city"]
    assert not objects["people"].columns[0].nullable


def test_assign_timestamps_seals_without_stepping_or_spark(coordinator: Coordinator) -> None:
    operations.apply_sql(coordinator, PROJECT)
    before = {
        n: operations.observe(coordinator, _id(coordinator, n))
        for n in ("people", "hook", "counter", "city_minutes")
    }
    frontiers = operations.assign_timestamps(coordinator)
    for name in ("people", "hook", "counter"):
        after = frontiers[_id(coordinator, name)]
        assert after.upper is not None and after.upper > (before[name].upper or 0), name
    # The same timestamp seals them all.
    assert len({frontiers[_id(coordinator, n)].upper for n in ("people", "hook", "counter")}) == 1
    assert (
        operations.observe(coordinator, _id(coordinator, "city_minutes")) == before["city_minutes"]
    )


def test_materialize_steps_a_view_once_and_never_moves_back(tmp_path: Path) -> None:
    config = Config(data_dir=str(tmp_path), background=False)
    one, two = Coordinator(config, _NoSpark()), Coordinator(config, _NoSpark())
    try:
        operations.apply_sql(one, PROJECT)
        two.refresh_catalog()
        people, visits = _id(one, "people"), _id(one, "visits")
        one.commit_writes({people: [((1, "Ann", "Oslo"), 1)], visits: [((1, 10), 1)]})
        view = _id(one, "city_minutes")
        seen = []
        for coordinator in (one, two, one, two):
            timestamp = operations.seal_timestamp(coordinator)
            operations.materialize(coordinator, people, timestamp)
            operations.materialize(coordinator, visits, timestamp)
            result = operations.materialize(coordinator, view)
            assert result.upper == timestamp + 1 and result.engine == "local"
            seen.append((result.since, result.upper))
            coordinator.commit_writes({visits: [((1, 7), 1)]})
        assert seen == sorted(seen)
        assert operations.check_consistency(two, view).passed
        rows = operations.contents(one, view)
        assert rows == [(("Oslo", 31, 4), 1)]
    finally:
        one.close()
        two.close()


def test_materialize_reports_changes_since_the_previous_upper(coordinator: Coordinator) -> None:
    operations.apply_sql(coordinator, PROJECT)
    people = _id(coordinator, "people")
    first = operations.materialize(coordinator, people)
    coordinator.commit_writes({people: [((1, "Ann", "Oslo"), 1), ((2, "Bo", "Rome"), 1)]})
    second = operations.materialize(coordinator, people, previous_upper=first.upper)
    assert (second.rows_inserted, second.rows_retracted, second.total_rows) == (2, 0, 2)
    assert second.changes_from == first.upper and second.updates == 2
    coordinator.commit_writes({people: [((2, "Bo", "Rome"), -1)]})
    third = operations.materialize(coordinator, people, previous_upper=second.upper)
    assert (third.rows_inserted, third.rows_retracted, third.total_rows) == (0, 1, 1)
    assert operations.check_schema(coordinator, people).passed
    assert operations.check_frontiers(coordinator, people, 60_000).passed


def test_a_seal_never_takes_a_table_past_the_oracle(tmp_path: Path) -> None:
    """Sealing a table (what a Dagster run does before stepping views) is an
    empty group commit at an oracle time, so a table's upper never runs
    ahead of the timestamp oracle: even sealed at a time the oracle has not
    reached (an orchestrator whose clock is ahead), a psycopg client's
    INSERT afterwards lands and is read back. When the seal appended to the
    table itself, its upper went past the oracle and that INSERT failed
    ("new upper ... must be after expected upper", XX000)."""
    with served(tmp_path / "env") as env, connect(env) as conn:
        run = Coordinator(Config(data_dir=str(tmp_path / "env"), background=False), _NoSpark())
        try:
            conn.execute("CREATE TABLE t (a int)")
            run.refresh_catalog()
            operations.seal(run, _id(run, "t"), run.oracle.read_ts() + 60_000)
            conn.execute("INSERT INTO t VALUES (1)")
            assert conn.execute("SELECT a FROM t").fetchall() == [(1,)]
        finally:
            run.close()
