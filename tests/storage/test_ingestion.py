"""Ingestions: load generator sources run by `process(now)`. Each tick lands
exactly once at its own time whatever happens to the controllers: restarts,
two controllers racing on one environment, long pauses. Ingestions bound to
a storage instance run only once it has a replica."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from coordinator_lib.repr import Frontier, GlobalId, NoPolicy, Update
from coordinator_lib.repr.timestamp import now_ms
from coordinator_lib.repr.update import consolidate_rows
from coordinator_lib.storage import (
    CollectionDescription,
    DataSource,
    IngestionDescription,
    StorageController,
)
from coordinator_lib.storage.load_generator import AuctionGenerator
from tests.storage.support import (
    START_MS,
    TICK_MS,
    Env,
    canonical,
    counter_description,
    uid,
)

C = uid(7)


def install_counter(
    controller: StorageController, description: CollectionDescription | None = None
) -> None:
    """The counter source at C, keeping all history (NoPolicy at 0)."""
    controller.create_collections([(C, description or counter_description())])
    controller.set_read_policy([(C, NoPolicy(Frontier.at(0)))])


def tick_time(k: int) -> int:
    return START_MS + k * TICK_MS


def counter_updates(ticks: int) -> list[Update]:
    """Every update a counter must have written after ticks 0 .. ticks - 1."""
    return [Update((k + 1,), tick_time(k), 1) for k in range(ticks)]


def written(controller: StorageController, id: GlobalId) -> list[Update]:
    """Every stored update of `id`, per (row, time), sorted by time."""
    upper = controller.collection_frontiers(id)[1]
    updates = controller.shard(id).updates_between(0, upper)
    return sorted(updates, key=lambda u: (u.time, u.row))


def test_counter_ticks_land_at_their_times(controller: StorageController) -> None:
    install_counter(controller)
    controller.process(now=START_MS - 1)
    assert controller.collection_frontiers(C)[1] == Frontier.at(START_MS)
    assert controller.snapshot(C, START_MS - 1) == []
    controller.process(now=tick_time(4) + 500)
    assert controller.collection_frontiers(C)[1] == Frontier.at(tick_time(4) + 501)
    for k in range(5):
        assert canonical(controller.snapshot(C, tick_time(k))) == [
            ((v,), 1) for v in range(1, k + 2)
        ]
        assert len(controller.snapshot(C, tick_time(k) - 1)) == k
    assert written(controller, C) == counter_updates(5)
    # The same or an earlier `now` changes nothing.
    stats = controller.collection_statistics(C)
    controller.process(now=tick_time(4) + 500)
    controller.process(now=tick_time(2))
    assert controller.collection_statistics(C) == stats
    assert controller.collection_frontiers(C)[1] == Frontier.at(tick_time(4) + 501)


def test_counter_with_max_cardinality(controller: StorageController) -> None:
    install_counter(controller, counter_description(max_cardinality=3))
    controller.process(now=tick_time(9))
    assert canonical(controller.snapshot(C, tick_time(9))) == [((8,), 1), ((9,), 1), ((10,), 1)]
    assert canonical(controller.snapshot(C, tick_time(1))) == [((1,), 1), ((2,), 1)]


def auction_collections(seed: int) -> list[tuple[GlobalId, CollectionDescription]]:
    outputs = AuctionGenerator(seed).outputs()
    return [
        (
            uid(100 + i),
            CollectionDescription(
                desc,
                DataSource.ingestion_of(
                    IngestionDescription("auction", name, START_MS, TICK_MS, (("seed", seed),))
                ),
            ),
        )
        for i, (name, desc) in enumerate(sorted(outputs.items()))
    ]


def test_auction_contents_are_the_generators(env: Env, tmp_path: Path) -> None:
    """Every output holds exactly the generator's changes, and a separate
    environment ingesting the same source holds the same rows."""
    generator = AuctionGenerator(seed=3)
    contents = []
    for controller in (env.open(), StorageController.open(data_dir=str(tmp_path / "other"))):
        collections = auction_collections(3)
        controller.create_collections(collections)
        controller.process(now=tick_time(12))
        answer = {}
        for id, description in collections:
            output = description.data_source.ingestion.output  # type: ignore[union-attr]
            expected = consolidate_rows(
                change for k in range(13) for change in generator.changes(output, k, tick_time(k))
            )
            answer[output] = canonical(controller.snapshot(id, tick_time(12)))
            assert answer[output] == expected, output
        contents.append(answer)
        if controller not in env.opened:
            controller.close()
    assert contents[0] == contents[1]
    assert len(contents[0]["auctions"]) == 13
    assert len(contents[0]["organizations"]) == AuctionGenerator.ORGANIZATIONS


def test_reopened_controller_resumes_without_gaps_or_duplicates(env: Env) -> None:
    first = env.open()
    install_counter(first)
    first.process(now=tick_time(3))
    first.process(now=tick_time(7) + 10)
    first.close()
    second = env.open()
    second.create_collections([(C, counter_description())])
    assert second.collection_frontiers(C)[1] == Frontier.at(tick_time(7) + 11)
    second.process(now=tick_time(15))
    assert written(second, C) == counter_updates(16)


def test_racing_controllers_ingest_each_tick_once(env: Env) -> None:
    controllers = [env.open(), env.open()]
    for controller in controllers:
        install_counter(controller)
    errors: list[BaseException] = []

    def run(controller: StorageController, offset: int) -> None:
        try:
            for step in range(25):
                controller.process(now=tick_time(step) + offset)
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [
        threading.Thread(target=run, args=(controllers[0], 0)),
        threading.Thread(target=run, args=(controllers[1], 700)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    assert written(controllers[0], C) == counter_updates(25)
    # A step that lost the race leaves its ticks to the next process() call.
    for controller in controllers:
        controller.process(now=tick_time(24) + 700)
    uppers = {c.collection_frontiers(C)[1] for c in controllers}
    assert uppers == {Frontier.at(tick_time(24) + 701)}
    assert written(controllers[1], C) == counter_updates(25)


def test_a_long_pause_is_caught_up_in_bounded_steps(controller: StorageController) -> None:
    fast = IngestionDescription("counter", "counter", START_MS, tick_interval_ms=1)
    install_counter(
        controller, CollectionDescription(counter_description().desc, DataSource.ingestion_of(fast))
    )
    controller.process(now=START_MS + 25_000)
    assert controller.collection_statistics(C).rows == 10_000  # at most 10k ticks per step
    assert controller.collection_frontiers(C)[1] == Frontier.at(START_MS + 10_000)
    controller.process(now=START_MS + 25_000)
    controller.process(now=START_MS + 25_000)
    assert controller.collection_frontiers(C)[1] == Frontier.at(START_MS + 25_001)
    values = sorted(row[0] for row, diff in controller.snapshot(C, START_MS + 25_000) if diff == 1)
    assert values == list(range(1, 25_002))


def test_ingestion_on_an_instance_runs_once_it_has_a_replica(
    controller: StorageController,
) -> None:
    install_counter(controller, counter_description(instance_id="i1"))
    controller.process(now=tick_time(3))
    assert controller.collection_frontiers(C)[1] == Frontier.at(0)
    controller.create_instance("i1")
    controller.process(now=tick_time(3))
    assert controller.collection_frontiers(C)[1] == Frontier.at(0)
    controller.connect_replica("i1", "local")
    controller.process(now=tick_time(3))
    assert written(controller, C) == counter_updates(4)
    controller.drop_instance("i1")
    controller.process(now=tick_time(9))
    assert controller.collection_frontiers(C)[1] == Frontier.at(tick_time(3) + 1)


def test_ready_waits_for_the_next_tick(controller: StorageController) -> None:
    started = time.monotonic()
    controller.ready(timeout_s=0.2)  # nothing to ingest: the timeout
    assert 0.15 <= time.monotonic() - started < 1.0
    now = now_ms()
    controller.create_collections([(C, counter_description(start_ms=now - 5 * TICK_MS))])
    started = time.monotonic()
    controller.ready(timeout_s=5)  # ticks are overdue: at once
    assert time.monotonic() - started < 0.5
    controller.process()
    assert controller.collection_frontiers(C)[1].time >= now + 1  # type: ignore[operator]
    started = time.monotonic()
    controller.ready(timeout_s=5)  # the next tick is at most one interval away
    assert time.monotonic() - started < TICK_MS / 1000 + 0.5
