"""The storage controller's collection API (seed 002): creating collections,
appending to tables, reading snapshots, frontiers and statistics, and the
typed errors of each method. Every error leaves the durable state exactly as
it was: same upper, same contents, same stored batches."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from coordinator_lib.repr import (
    Frontier,
    GlobalId,
    LagWriteFrontier,
    NoPolicy,
    RelationDesc,
    Update,
)
from coordinator_lib.repr.relation import DIFF_COLUMN
from coordinator_lib.storage import (
    AppendCommand,
    CollectionDescription,
    DataSource,
    DataSourceKind,
    IdentifierExists,
    IdentifierMissing,
    InvalidUpdate,
    InvalidUppers,
    NotWritable,
    ReadBeforeSince,
    ReadBeyondUpper,
    StorageController,
    StorageError,
    StorageParameters,
    UpdateBeyondUpper,
    table_description,
)
from tests.storage.support import (
    DESC,
    Env,
    canonical,
    counter_description,
    create_table,
    fingerprint,
    model_snapshot,
    rows,
    uid,
)

T1 = uid(41)  # ids whose text is no prefix of another's, so "u41" in a message names T1
T2 = uid(52)
MISSING = uid(99)


def seed_table(controller: StorageController, id: GlobalId = T1) -> list[Update]:
    """A table with two appends (upper 2000); returns what was written."""
    create_table(controller, id)
    first = rows((1, "a"), (2, "b"), time=100)
    second = [*rows((3, None), time=1500), Update((1, "a"), 1700, -1)]
    controller.append([AppendCommand(id, first, 1000)])
    controller.append([AppendCommand(id, second, 2000)])
    return first + second


# ------------------------------------------------------------- collections


def test_new_table_starts_empty_at_its_since(controller: StorageController) -> None:
    description = create_table(controller, T1, since=5000)
    state = controller.collection(T1)
    assert state.description == description
    assert state.description.data_source.kind is DataSourceKind.TABLE
    assert controller.collection_frontiers(T1) == (Frontier.at(5000), Frontier.at(5000))
    assert [id for id, _ in controller.collections()] == [T1]
    assert controller.collection_statistics(T1).rows == 0
    # Nothing is readable until the upper passes the since.
    with pytest.raises(ReadBeyondUpper):
        controller.snapshot(T1, 5000)
    controller.append([AppendCommand(T1, rows((7, "x"), time=5000), 5001)])
    assert controller.snapshot(T1, 5000) == [((7, "x"), 1)]


def test_create_collections_twice(controller: StorageController) -> None:
    create_table(controller, T1)
    shard_id = controller.collection(T1).shard_id
    controller.append([AppendCommand(T1, rows((1, "a"), time=0), 10)])
    create_table(controller, T1)  # same description: nothing happens
    assert controller.collection(T1).shard_id == shard_id
    assert controller.collection_frontiers(T1)[1] == Frontier.at(10)
    other = CollectionDescription(RelationDesc.of(("x", "text")), DataSource.table())
    with pytest.raises(IdentifierExists, match="u41"):
        controller.create_collections([(T1, other)])
    assert controller.collection(T1).description.desc == DESC


def test_append_and_snapshot_at_every_time(controller: StorageController) -> None:
    written = seed_table(controller)
    for as_of in [1000, 1499, 1500, 1699, 1700, 1999]:
        assert canonical(controller.snapshot(T1, as_of)) == model_snapshot(written, as_of)
    table = controller.snapshot_table(T1, 1999)
    assert isinstance(table, pa.Table)
    got = sorted(
        zip(table.column("k").to_pylist(), table.column(DIFF_COLUMN).to_pylist(), strict=True)
    )
    assert got == [(2, 1), (3, 1)]


def test_append_with_explicit_expected_upper(controller: StorageController) -> None:
    create_table(controller, T1)
    controller.append([AppendCommand(T1, rows((1, "a"), time=0), 1000, expected_upper=0)])
    controller.append(
        [AppendCommand(T1, rows((2, "b"), time=1000), Frontier.at(2000), Frontier.at(1000))]
    )
    assert controller.collection_frontiers(T1)[1] == Frontier.at(2000)
    assert canonical(controller.snapshot(T1, 1999)) == [((1, "a"), 1), ((2, "b"), 1)]


def test_append_accepts_plain_tuples(controller: StorageController) -> None:
    create_table(controller, T1)
    controller.append([(T1, [((5, "t"), 3, 2)], 10)])
    assert controller.snapshot(T1, 9) == [((5, "t"), 2)]


def test_append_advancing_the_upper_without_updates(controller: StorageController) -> None:
    create_table(controller, T1)
    controller.append([AppendCommand(T1, [], 12345)])
    assert controller.collection_frontiers(T1)[1] == Frontier.at(12345)
    assert controller.snapshot(T1, 12344) == []


# ------------------------------------------------------------ append errors


def test_wrong_expected_upper_reports_the_current_upper(
    controller: StorageController, env: Env
) -> None:
    seed_table(controller)
    before = fingerprint(controller, T1, env.blob_root)
    with pytest.raises(InvalidUppers) as caught:
        controller.append([AppendCommand(T1, rows((9, "z"), time=1000), 3000, expected_upper=1000)])
    assert caught.value.current_uppers == {T1: Frontier.at(2000)}
    assert "u41" in str(caught.value)
    assert fingerprint(controller, T1, env.blob_root) == before


def test_stale_upper_after_another_controller_wrote(env: Env) -> None:
    first, second = env.open(), env.open()
    create_table(first, T1)
    create_table(second, T1)
    second.append([AppendCommand(T1, rows((1, "second"), time=0), 500)])
    with pytest.raises(InvalidUppers) as caught:
        first.append([AppendCommand(T1, rows((2, "first"), time=0), 400)])
    assert caught.value.current_uppers == {T1: Frontier.at(500)}
    assert first.snapshot(T1, 499) == [((1, "second"), 1)]
    # The error taught `first` the current upper: a retry lands.
    first.append([AppendCommand(T1, rows((2, "first"), time=500), 600)])
    assert canonical(second.snapshot(T1, 599)) == [((1, "second"), 1), ((2, "first"), 1)]


BAD_APPENDS: dict[str, tuple[list[Any], int, type[StorageError]]] = {
    "time at new upper": ([((1, "a"), 3000, 1)], 3000, UpdateBeyondUpper),
    "time beyond new upper": ([((1, "a"), 2500, 1), ((2, "b"), 9000, 1)], 3000, UpdateBeyondUpper),
    "time before upper": ([((1, "a"), 2500, 1), ((2, "b"), 1999, 1)], 3000, InvalidUpdate),
    "too few columns": ([((1, "a"), 2500, 1), ((2,), 2500, 1)], 3000, InvalidUpdate),
    "too many columns": ([((1, "a", "x"), 2500, 1)], 3000, InvalidUpdate),
    "wrong type": ([((1, "a"), 2500, 1), (("one", "b"), 2500, 1)], 3000, InvalidUpdate),
    "NULL in NOT NULL": ([((None, "a"), 2500, 1)], 3000, InvalidUpdate),
    "int out of range": ([((2**63, "a"), 2500, 1)], 3000, InvalidUpdate),
    "text gets a date": ([((1, dt.date(2024, 1, 1)), 2500, 1)], 3000, InvalidUpdate),
    "upper does not advance": ([], 2000, InvalidUpdate),
    "upper goes back": ([], 1000, InvalidUpdate),
}


@pytest.mark.parametrize("case", list(BAD_APPENDS))
def test_bad_append_is_refused_and_writes_nothing(
    controller: StorageController, env: Env, case: str
) -> None:
    updates, upper, error = BAD_APPENDS[case]
    seed_table(controller)
    before = fingerprint(controller, T1, env.blob_root)
    with pytest.raises(error, match="u41"):
        controller.append([AppendCommand(T1, updates, upper)])
    assert fingerprint(controller, T1, env.blob_root) == before
    # The collection still takes a good append afterwards.
    controller.append([AppendCommand(T1, rows((9, "ok"), time=2000), 3000)])
    assert ((9, "ok"), 1) in controller.snapshot(T1, 2999)


def test_append_to_a_closed_collection_is_refused(controller: StorageController) -> None:
    create_table(controller, T1)
    controller.append([AppendCommand(T1, rows((1, "a"), time=0), Frontier.empty())])
    with pytest.raises(StorageError, match="u41"):
        controller.append([AppendCommand(T1, rows((2, "b"), time=5), 10)])
    assert controller.collection_frontiers(T1)[1] == Frontier.empty()


@pytest.mark.parametrize(
    "description",
    [counter_description(), CollectionDescription(DESC, DataSource.other())],
    ids=["ingestion", "other"],
)
def test_append_to_a_collection_the_controller_does_not_write(
    controller: StorageController, env: Env, description: CollectionDescription
) -> None:
    controller.create_collections([(T2, description)])
    before = fingerprint(controller, T2, env.blob_root)
    row = (1,) if description.desc.arity == 1 else (1, "a")
    with pytest.raises(NotWritable, match="u52"):
        controller.append([AppendCommand(T2, [(row, 0, 1)], 10)])
    assert fingerprint(controller, T2, env.blob_root) == before


def test_webhook_and_introspection_collections_are_writable(controller: StorageController) -> None:
    controller.create_collections(
        [
            (T1, CollectionDescription(DESC, DataSource.webhook())),
            (T2, CollectionDescription(DESC, DataSource.introspection_of("frontiers"))),
        ]
    )
    controller.append([AppendCommand(T1, rows((1, "w"), time=0), 5)])
    controller.append([AppendCommand(T2, rows((2, "i"), time=0), 5)])
    assert controller.snapshot(T1, 4) == [((1, "w"), 1)]
    assert controller.snapshot(T2, 4) == [((2, "i"), 1)]


def _second(
    make: Callable[[GlobalId], AppendCommand], error: type[StorageError]
) -> tuple[Callable[[GlobalId], AppendCommand], type[StorageError]]:
    return make, error


SECOND_COMMANDS = {
    "bad row": _second(lambda id: AppendCommand(id, [((1, 2), 0, 1)], 100), InvalidUpdate),
    "time beyond upper": _second(
        lambda id: AppendCommand(id, rows((1, "b"), time=100), 100), UpdateBeyondUpper
    ),
    "unknown id": _second(
        lambda id: AppendCommand(MISSING, rows((1, "b"), time=0), 100), IdentifierMissing
    ),
    "wrong expected upper": _second(
        lambda id: AppendCommand(id, rows((1, "b"), time=50), 100, expected_upper=50),
        InvalidUppers,
    ),
    "not writable": _second(lambda id: AppendCommand(uid(77), [((1,), 0, 1)], 100), NotWritable),
}


@pytest.mark.parametrize("case", list(SECOND_COMMANDS))
def test_multi_collection_append_with_a_bad_second_command_writes_nothing(
    controller: StorageController, env: Env, case: str
) -> None:
    make_second, error = SECOND_COMMANDS[case]
    create_table(controller, T1)
    create_table(controller, T2)
    controller.create_collections([(uid(77), counter_description())])
    before = [fingerprint(controller, id, env.blob_root) for id in (T1, T2)]
    with pytest.raises(error):
        controller.append(
            [AppendCommand(T1, rows((1, "a"), time=0), 100), make_second(T2)],
        )
    assert [fingerprint(controller, id, env.blob_root) for id in (T1, T2)] == before


def test_multi_collection_append_writes_every_collection(controller: StorageController) -> None:
    create_table(controller, T1)
    create_table(controller, T2)
    controller.append(
        [
            AppendCommand(T1, rows((1, "a"), time=0), 100),
            AppendCommand(T2, rows((2, "b"), time=0), 200),
        ]
    )
    assert controller.snapshot(T1, 99) == [((1, "a"), 1)]
    assert controller.snapshot(T2, 199) == [((2, "b"), 1)]
    assert controller.collection_frontiers(T1)[1] == Frontier.at(100)
    assert controller.collection_frontiers(T2)[1] == Frontier.at(200)


def test_one_append_naming_a_collection_twice_is_all_or_nothing(
    controller: StorageController, env: Env
) -> None:
    """Two commands for one id in one call: either both land or neither."""
    create_table(controller, T1)
    before = fingerprint(controller, T1, env.blob_root)
    try:
        controller.append(
            [
                AppendCommand(T1, rows((1, "a"), time=0), 100),
                AppendCommand(T1, rows((2, "b"), time=0), 100),
            ]
        )
    except StorageError as error:
        assert "u41" in str(error)
        assert fingerprint(controller, T1, env.blob_root) == before
    else:
        assert canonical(controller.snapshot(T1, 99)) == [((1, "a"), 1), ((2, "b"), 1)]


# ---------------------------------------------------------------- snapshots


@pytest.mark.parametrize("read", ["snapshot", "snapshot_table"])
def test_reads_outside_since_and_upper_are_refused(
    controller: StorageController, read: str
) -> None:
    seed_table(controller)
    controller.set_read_policy([(T1, LagWriteFrontier(500))])
    assert controller.collection_frontiers(T1) == (Frontier.at(1500), Frontier.at(2000))
    method = getattr(controller, read)
    with pytest.raises(ReadBeforeSince, match="u41") as before:
        method(T1, 1499)
    assert before.value.since == Frontier.at(1500)
    assert before.value.as_of == 1499
    for as_of in (2000, 2001, 10**13):
        with pytest.raises(ReadBeyondUpper, match="u41") as beyond:
            method(T1, as_of)
        assert beyond.value.upper == Frontier.at(2000)
    method(T1, 1500)  # both ends of [since, upper) are exact
    method(T1, 1999)


# --------------------------------------------------------- unknown identifiers

UNKNOWN_ID_CALLS: dict[str, Callable[[StorageController], object]] = {
    "collection": lambda c: c.collection(MISSING),
    "shard": lambda c: c.shard(MISSING),
    "collection_frontiers": lambda c: c.collection_frontiers(MISSING),
    "collection_statistics": lambda c: c.collection_statistics(MISSING),
    "snapshot": lambda c: c.snapshot(MISSING, 0),
    "snapshot_table": lambda c: c.snapshot_table(MISSING, 0),
    "append": lambda c: c.append([AppendCommand(T1, [], 5000), AppendCommand(MISSING, [], 10)]),
    "set_read_policy": lambda c: c.set_read_policy(
        [(T1, LagWriteFrontier(0)), (MISSING, LagWriteFrontier(0))]
    ),
    "update_write_frontiers": lambda c: c.update_write_frontiers(
        [(T1, Frontier.at(5000)), (MISSING, Frontier.at(5000))]
    ),
    "update_read_capabilities": lambda c: c.update_read_capabilities(
        {T1: Counter({0: 1}), MISSING: Counter({0: 1})}
    ),
    "acquire_read_hold": lambda c: c.acquire_read_hold(MISSING),
    "drop_sources": lambda c: c.drop_sources([T1, MISSING]),
}


@pytest.mark.parametrize("method", list(UNKNOWN_ID_CALLS))
def test_unknown_identifier_is_refused_and_changes_nothing(
    controller: StorageController, env: Env, method: str
) -> None:
    create_table(controller, T1)
    controller.append([AppendCommand(T1, rows((1, "a"), time=0), 3000)])
    policy = controller.collection(T1).read_policy
    before = fingerprint(controller, T1, env.blob_root)
    with pytest.raises(IdentifierMissing, match="u99") as caught:
        UNKNOWN_ID_CALLS[method](controller)
    assert caught.value.id == MISSING
    assert [id for id, _ in controller.collections()] == [T1]
    assert fingerprint(controller, T1, env.blob_root) == before
    state = controller.collection(T1)
    assert state.read_policy == policy
    assert state.write_frontier == Frontier.at(3000)
    assert not state.read_holds


# ----------------------------------------------------------------- frontiers


def test_write_frontier_reported_by_another_writer(controller: StorageController) -> None:
    """A collection compute writes (kind OTHER): its writer appends to the
    shard and reports the upper; the since follows the read policy."""
    controller.create_collections([(T1, CollectionDescription(DESC, DataSource.other()))])
    shard = controller.shard(T1)
    shard.compare_and_append(rows((1, "mv"), time=0), Frontier.at(0), Frontier.at(4321))
    controller.update_write_frontiers([(T1, Frontier.at(4321))])
    state = controller.collection(T1)
    assert state.write_frontier == Frontier.at(4321)
    assert state.since == Frontier.at(3000)  # LagWriteFrontier(1000), the default
    assert controller.collection_frontiers(T1) == (Frontier.at(3000), Frontier.at(4321))
    # Reports of an older upper change nothing.
    controller.update_write_frontiers([(T1, Frontier.at(100))])
    assert controller.collection(T1).write_frontier == Frontier.at(4321)
    assert controller.collection_frontiers(T1) == (Frontier.at(3000), Frontier.at(4321))


def test_update_read_capabilities_holds_the_since(controller: StorageController) -> None:
    create_table(controller, T1)
    controller.set_read_policy([(T1, LagWriteFrontier(0))])
    controller.append([AppendCommand(T1, [], 1000)])
    controller.update_read_capabilities({T1: Counter({1000: 1})})
    controller.append([AppendCommand(T1, [], 5000)])
    assert controller.collection_frontiers(T1)[0] == Frontier.at(1000)
    controller.update_read_capabilities({T1: Counter({1000: -1, 3000: 1})})
    assert controller.collection_frontiers(T1)[0] == Frontier.at(3000)
    with pytest.raises(StorageError, match="u41"):
        controller.update_read_capabilities({T1: Counter({3000: -2})})
    assert controller.collection(T1).read_holds == Counter({3000: 1})
    assert controller.collection_frontiers(T1)[0] == Frontier.at(3000)
    controller.update_read_capabilities({T1: Counter({3000: -1})})
    assert controller.collection_frontiers(T1)[0] == Frontier.at(5000)


# --------------------------------------------------------------- statistics


def test_statistics_count_rows_bytes_batches_and_maintain_merges(
    controller: StorageController,
) -> None:
    create_table(controller, T1)
    for i in range(5):
        controller.append([AppendCommand(T1, rows((i, "v"), (i + 100, None), time=i), i + 1)])
    stats = controller.collection_statistics(T1)
    assert (stats.rows, stats.batches) == (10, 5)
    assert stats.bytes > 0
    controller.append([AppendCommand(T1, rows((0, "v"), time=5, diff=-1), 6)])
    assert controller.collection_statistics(T1).batches == 6
    contents = controller.snapshot(T1, 5)
    controller.set_read_policy([(T1, LagWriteFrontier(1))])
    assert controller.collection_frontiers(T1) == (Frontier.at(5), Frontier.at(6))
    report = controller.maintain()
    assert report.compacted_batches == 6
    stats = controller.collection_statistics(T1)
    assert stats.batches == 1
    assert stats.rows == 9  # the retraction cancelled (0, "v")
    assert controller.snapshot(T1, 5) == contents


# ---------------------------------------------------------- instances, misc


def test_storage_instances(controller: StorageController) -> None:
    controller.create_instance("i1")
    with pytest.raises(StorageError, match="i1"):
        controller.create_instance("i1")
    with pytest.raises(StorageError, match="i2"):
        controller.connect_replica("i2", "local")
    with pytest.raises(StorageError, match="i2"):
        controller.drop_instance("i2")
    controller.connect_replica("i1", "local")
    controller.drop_instance("i1")
    with pytest.raises(StorageError, match="i1"):
        controller.connect_replica("i1", "local")


def test_migrate_collections_checks_stored_schemas(env: Env) -> None:
    first = env.open()
    create_table(first, T1)
    first.close()
    second = env.open()
    second.migrate_collections([(T1, table_description(DESC)), (T2, table_description(DESC))])
    other = table_description(RelationDesc.of(("k", "bigint", False)))
    with pytest.raises(StorageError, match="u41"):
        second.migrate_collections([(T1, other)])
    with pytest.raises(StorageError, match="u41"):
        second.create_collections([(T1, other)])
    assert list(second.collections()) == []


def test_open_needs_a_location(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        StorageController.open(consensus_url=f"sqlite://{tmp_path / 'c.db'}")


def test_update_configuration_changes_compaction(controller: StorageController) -> None:
    """With the since held at 0 only the batch count triggers compaction,
    and update_configuration sets how many batches are too many."""
    create_table(controller, T1)
    controller.set_read_policy([(T1, NoPolicy(Frontier.at(0)))])
    for i in range(4):
        controller.append([AppendCommand(T1, rows((i, "v"), time=i), i + 1)])
    assert controller.maintain().compacted_batches == 0  # 4 <= 8, the default
    assert controller.collection_statistics(T1).batches == 4
    controller.update_configuration(StorageParameters(compaction_max_batches=2))
    assert controller.parameters.compaction_max_batches == 2
    assert controller.maintain().compacted_batches == 4
    assert controller.collection_statistics(T1).batches == 1
    assert canonical(controller.snapshot(T1, 0)) == [((0, "v"), 1)]
    assert len(controller.snapshot(T1, 3)) == 4
