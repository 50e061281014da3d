"""Two coordinators on one environment (as `tidemark serve` and a Dagster
run are) write the same tables: each may move a table's upper between the
other's reading of it and its append. A write must then be retried, never
answered with an internal error, and a table must be installed by both.

CI saw both races: an INSERT into a keyed table failed with XX000 "new
upper must be after expected upper" (its time was proposed before another
process advanced the table), and a table was left uninstalled with "could
not install table: invalid uppers"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator_lib.adapter.client import Handle, serve
from tests.adapter.conftest import fast_config, run_on

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Handle, Handle]]:
    first = serve(fast_config(tmp_path / "env"), None)
    second = serve(fast_config(tmp_path / "env"), None)
    try:
        yield first, second
    finally:
        second.shutdown()
        first.shutdown()


@pytest.mark.parametrize("table", ["k (a int PRIMARY KEY)", "k (a int)"])
def test_insert_whose_proposed_time_another_process_passes_lands(
    pair: tuple[Handle, Handle], monkeypatch: pytest.MonkeyPatch, table: str
) -> None:
    first, second = pair
    session = first.client.startup("materialize", "materialize")
    run = run_on(session)
    run(f"CREATE TABLE {table}")
    run("INSERT INTO k VALUES (1)")
    second.coordinator.refresh_catalog()
    oracle = first.coordinator.oracle
    propose = oracle.propose_write_ts
    passed = 0

    def propose_then_other_advances() -> Any:
        nonlocal passed
        proposal = propose()
        if passed == 0:
            passed += 1
            second.coordinator.group_commit.advance()  # every table past `proposal`
        return proposal

    monkeypatch.setattr(oracle, "propose_write_ts", propose_then_other_advances)
    run("INSERT INTO k VALUES (2)")
    assert passed == 1
    assert sorted(run("SELECT a FROM k")) == [(1,), (2,)]
    session.terminate()


def test_insert_whose_table_upper_is_learned_while_it_commits_lands(
    pair: tuple[Handle, Handle], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other process advances the table after this one chose its time,
    and this one learns the new upper before appending (a concurrent read
    refreshes it: `collection_frontiers`). The append must expect the upper
    its time was chosen from, fail its compare-and-set and choose again:
    make run's demo answered an INSERT with XX000 "new upper must be after
    expected upper" in CI (the Dagster run sealing the table)."""
    first, second = pair
    session = first.client.startup("materialize", "materialize")
    run = run_on(session)
    run("CREATE TABLE k (a int)")
    run("INSERT INTO k VALUES (1)")
    second.coordinator.refresh_catalog()
    oracle = first.coordinator.oracle
    claim = oracle.claim
    passed = 0

    def other_advances_and_a_read_learns_it(timestamp: int) -> Any:
        nonlocal passed
        if passed == 0:
            passed += 1
            second.coordinator.group_commit.advance()  # every table past `timestamp`
            for id in first.coordinator.group_commit.tables():
                first.coordinator.storage.collection_frontiers(id)
        return claim(timestamp)

    monkeypatch.setattr(oracle, "claim", other_advances_and_a_read_learns_it)
    run("INSERT INTO k VALUES (2)")
    assert passed == 1
    assert sorted(run("SELECT a FROM k")) == [(1,), (2,)]
    session.terminate()


def test_table_created_while_another_process_advances_is_installed_by_both(
    pair: tuple[Handle, Handle], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = pair
    session = first.client.startup("materialize", "materialize")
    run = run_on(session)
    storage = second.coordinator.storage
    append = storage.append
    raced = 0

    def first_advances_then_append(commands: Any, *args: Any, **kwargs: Any) -> Any:
        """Installing `t`, the second moves its upper past its creation
        time: the first advances it in between."""
        nonlocal raced
        installing = [c for c in commands if c[0] not in second.coordinator._installed]
        if installing and raced == 0:
            raced += 1
            first.coordinator.group_commit.advance()  # moves the new table's upper
        return append(commands, *args, **kwargs)

    monkeypatch.setattr(storage, "append", first_advances_then_append)
    run("CREATE TABLE t (a int)")
    second.coordinator.refresh_catalog()
    assert raced == 1
    assert not [r for r in caplog.records if "could not install" in r.getMessage()]
    other = second.client.startup("materialize", "materialize")
    run_on(other)("INSERT INTO t VALUES (7)")
    assert run("SELECT a FROM t") == [(7,)]
    other.terminate()
    session.terminate()
