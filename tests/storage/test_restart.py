"""Restarts (invariant 7) and dropping: a reopened controller that re-creates
its collections finds them as they were (shard, frontiers, policy, contents);
reconcile_state drops the durable collections nobody re-created; a dropped
collection's shard is closed and finalized, at once or, if another process
still holds it, at the first maintain() after that hold goes away."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from coordinator_lib.persist import shard as shard_module
from coordinator_lib.repr import Frontier, GlobalId, LagWriteFrontier, ValidFrom
from coordinator_lib.storage import (
    AppendCommand,
    IdentifierMissing,
    StorageController,
    StorageParameters,
    table_description,
)
from coordinator_lib.storage.controller import COLLECTION_PREFIX
from tests.storage.support import (
    DESC,
    Env,
    blob_batches,
    canonical,
    create_table,
    rows,
    shard_state,
    start_holder,
    uid,
    wait_until,
)

T1, T2, T3 = uid(1), uid(2), uid(3)
LEASE_MS = 500


def fill(controller: StorageController, id: GlobalId, uppers: list[int]) -> None:
    """One append per upper, each inserting a row at the previous upper."""
    lower = controller.collection_frontiers(id)[1].time
    for upper in uppers:
        controller.append([AppendCommand(id, rows((upper, f"r{id}"), time=lower), upper)])  # type: ignore[arg-type]
        lower = upper


def assert_finalized(controller: StorageController, blob_root: Path, shard_id: str) -> None:
    state = shard_state(controller, shard_id)
    assert state.finalized
    assert state.upper_frontier == Frontier.empty() == state.since_frontier
    assert not (blob_root / shard_id).exists()


# ------------------------------------------------------------------ restart


def test_recreated_collections_keep_their_state(env: Env) -> None:
    first = env.open()
    create_table(first, T1)
    first.set_read_policy([(T1, LagWriteFrontier(1500))])
    fill(first, T1, [1000, 5000, 12345])
    before = first.collection(T1)
    frontiers = first.collection_frontiers(T1)
    assert frontiers == (Frontier.at(10000), Frontier.at(12345))
    contents = {t: canonical(first.snapshot(T1, t)) for t in (10000, 12344)}
    first.close()

    second = env.open()
    create_table(second, T1, since=0)  # the initial since of a new collection is moot
    after = second.collection(T1)
    assert after.shard_id == before.shard_id
    assert after.read_policy == LagWriteFrontier(1500)
    assert second.collection_frontiers(T1) == frontiers
    assert after.write_frontier == Frontier.at(12345)
    assert {t: canonical(second.snapshot(T1, t)) for t in (10000, 12344)} == contents
    # It carries on from the durable upper.
    fill(second, T1, [20000])
    assert second.collection_frontiers(T1) == (Frontier.at(18000), Frontier.at(20000))


def test_restart_with_a_data_dir(tmp_path: Path) -> None:
    controller = StorageController.open(data_dir=str(tmp_path / "env"))
    create_table(controller, T1)
    fill(controller, T1, [10, 20])
    controller.close()
    controller = StorageController.open(data_dir=str(tmp_path / "env"))
    try:
        create_table(controller, T1)
        assert canonical(controller.snapshot(T1, 19)) == [((10, "ru1"), 1), ((20, "ru1"), 1)]
    finally:
        controller.close()


def test_closing_releases_holds(env: Env) -> None:
    first = env.open()
    create_table(first, T1)
    first.set_read_policy([(T1, ValidFrom(Frontier.at(0)))])
    fill(first, T1, [3000])
    first.acquire_read_hold(T1, 0)
    first.set_read_policy([(T1, LagWriteFrontier(0))])
    assert first.collection_frontiers(T1)[0] == Frontier.at(0)
    first.close()
    second = env.open()
    create_table(second, T1)
    assert second.collection_frontiers(T1)[0] == Frontier.at(3000)


def test_reconcile_drops_what_was_not_recreated(env: Env, tmp_path: Path) -> None:
    first = env.open()
    for id in (T1, T2, T3):
        create_table(first, id)
        fill(first, id, [100, 200])
    first.process()
    shards = {id: first.collection(id).shard_id for id in (T1, T2, T3)}
    first.close()

    second = env.open()
    create_table(second, T1)
    create_table(second, T3)
    assert sorted(second.reconcile_state()) == [T2]
    assert_finalized(second, env.blob_root, shards[T2])
    keys = second.persist.consensus.list_keys(COLLECTION_PREFIX)
    assert keys == [COLLECTION_PREFIX + "u1", COLLECTION_PREFIX + "u3"]
    with pytest.raises(IdentifierMissing):
        second.collection(T2)
    for id in (T1, T3):
        assert second.collection(id).shard_id == shards[id]
        assert canonical(second.snapshot(id, 199)) == [((100, f"r{id}"), 1), ((200, f"r{id}"), 1)]
    # A later collection with T2's id starts over, on a new shard.
    create_table(second, T2)
    assert second.collection(T2).shard_id != shards[T2]
    assert second.collection_frontiers(T2) == (Frontier.at(0), Frontier.at(0))


# ------------------------------------------------------------------ dropping


@pytest.fixture
def blob_batches_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch in blob (small ones are otherwise carried in the shard
    state): the tests using it watch finalization delete the blobs."""
    monkeypatch.setattr(shard_module, "INLINE_TOTAL_BYTES", 0)


@pytest.mark.usefixtures("blob_batches_only")
def test_drop_sources_finalizes_the_shard(controller: StorageController, env: Env) -> None:
    create_table(controller, T1)
    create_table(controller, T2)
    fill(controller, T1, [100, 200])
    fill(controller, T2, [100])
    shard_id = controller.collection(T1).shard_id
    assert blob_batches(env.blob_root, shard_id)
    hold = controller.acquire_read_hold(T1)  # this process's own holds go with it
    controller.drop_sources([T1])
    assert_finalized(controller, env.blob_root, shard_id)
    for call in (controller.collection, controller.collection_frontiers, controller.shard):
        with pytest.raises(IdentifierMissing, match="u1"):
            call(T1)
    with pytest.raises(IdentifierMissing, match="u1"):
        controller.snapshot(T1, 50)
    with pytest.raises(IdentifierMissing, match="u1"):
        controller.drop_sources([T1])
    hold.release()
    assert [id for id, _ in controller.collections()] == [T2]
    assert controller.snapshot(T2, 99) == [((100, "ru2"), 1)]
    controller.drop_sources_unvalidated([T1, uid(77)])  # unknown ids are fine here
    assert controller.maintain().finalized_shards == 0


def test_drop_sources_unvalidated_drops_a_forgotten_collection(env: Env) -> None:
    first = env.open()
    create_table(first, T1)
    fill(first, T1, [100])
    shard_id = first.collection(T1).shard_id
    first.close()
    second = env.open()  # it never re-created T1
    second.drop_sources_unvalidated([T1])
    assert_finalized(second, env.blob_root, shard_id)
    assert second.persist.consensus.list_keys(COLLECTION_PREFIX) == []


@pytest.mark.usefixtures("blob_batches_only")
def test_a_dropped_shard_another_controller_holds_is_finalized_later(env: Env) -> None:
    dropper, holder = env.open(), env.open()
    create_table(dropper, T1)
    fill(dropper, T1, [100, 200])
    shard_id = dropper.collection(T1).shard_id
    create_table(holder, T1)
    hold = holder.acquire_read_hold(T1, 50)
    dropper.drop_sources([T1])
    state = shard_state(dropper, shard_id)
    assert state.upper_frontier == Frontier.empty()
    assert state.since_frontier == Frontier.at(50)
    assert not state.finalized
    assert holder.snapshot(T1, 50) == [((100, "ru1"), 1)]  # still readable where held
    assert dropper.maintain().finalized_shards == 0
    assert blob_batches(env.blob_root, shard_id)
    hold.release()
    assert dropper.maintain().finalized_shards == 1
    assert_finalized(dropper, env.blob_root, shard_id)


@pytest.mark.slow
def test_a_dropped_shard_held_by_another_process(env: Env) -> None:
    controller = env.open(StorageParameters(reader_lease_ms=LEASE_MS))
    create_table(controller, T1)
    create_table(controller, T2)
    fill(controller, T1, [100, 200])
    fill(controller, T2, [100, 200])
    shards = {id: controller.collection(id).shard_id for id in (T1, T2)}
    released = start_holder(env, T1, None, LEASE_MS)
    killed = start_holder(env, T2, None, LEASE_MS)
    controller.drop_sources([T1, T2])
    for id in (T1, T2):
        assert not shard_state(controller, shards[id]).finalized
    time.sleep(3 * LEASE_MS / 1000)  # the holders' heartbeats keep them alive
    assert controller.maintain().finalized_shards == 0
    released.release()
    assert controller.maintain().finalized_shards == 1
    assert_finalized(controller, env.blob_root, shards[T1])
    killed.kill()
    assert wait_until(lambda: controller.maintain().finalized_shards == 1, timeout_s=10)
    assert_finalized(controller, env.blob_root, shards[T2])


def test_recreating_with_another_schema_fails(env: Env) -> None:
    first = env.open()
    create_table(first, T1)
    first.close()
    second = env.open()
    other = table_description(DESC.__class__.of(("k", "text")))
    with pytest.raises(Exception, match="u1"):
        second.create_collections([(T1, other)])
