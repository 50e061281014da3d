"""The timestamp-assignment sensor through build_sensor_context: it seals
tables, webhook sources and load generators, steps nothing, requests one run
of the views whose inputs advanced under a run key made of frontiers, keeps
a cursor, and never requests the same thing twice."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from coordinator_lib.adapter import operations
from sensors import TimestampCursor, plan_tick
from tests.assets.support import DemoEnv, demo_env, id_of, key

ON_COMMIT_VIEWS = {"auction_bids", "item_stats", "watched_items", "item_interest"}
SOURCES = {"auction", "organizations", "users", "accounts", "auctions", "bids"}
SEALED = SOURCES | {"watchlist", "item_views"}


def _tick(env: DemoEnv, instance: dg.DagsterInstance, cursor: str | None):  # type: ignore[no-untyped-def]
    sensor = env.defs.resolve_sensor_def("tidemark_timestamps")
    with dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"coordinator": env.resource},
        repository_def=env.defs.get_repository_def(),
    ) as context:
        return sensor.evaluate_tick(context)


def _uppers(env: DemoEnv, names: set[str]) -> dict[str, int | None]:
    with env.coordinator() as other:
        out = {}
        for name in names:
            frontiers = operations.observe(other, id_of(other, name))
            out[name] = frontiers.upper if frontiers else None
        return out


def test_timestamp_sensor_seals_sources_and_requests_views_once(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    sensor = env.defs.resolve_sensor_def("tidemark_timestamps")
    assert sensor.default_status is dg.DefaultSensorStatus.RUNNING
    views_before = _uppers(env, ON_COMMIT_VIEWS | {"auctions_per_item"})
    sealed_before = _uppers(env, {"watchlist", "item_views", "bids"})
    with dg.instance_for_test() as instance:
        first = _tick(env, instance, None)
        (request,) = first.run_requests
        selected = {k.path[-1] for k in request.asset_selection or []}
        assert selected == ON_COMMIT_VIEWS  # not the REFRESH EVERY view, not the index
        targets = dict(part.rsplit("@", 1) for part in (request.run_key or "").split(","))
        assert set(targets) == {key(v).to_user_string() for v in ON_COMMIT_VIEWS}
        observed = {e.asset_key.path[-1] for e in first.asset_events}
        assert observed == SEALED
        # Sealed: tables, webhooks and load generators moved; no view was stepped.
        sealed_after = _uppers(env, {"watchlist", "item_views", "bids"})
        for name, upper in sealed_after.items():
            assert upper is not None and sealed_before[name] is not None
            assert upper > sealed_before[name], name
        assert _uppers(env, ON_COMMIT_VIEWS | {"auctions_per_item"}) == views_before
        cursor = TimestampCursor.parse(first.cursor)
        assert set(cursor.requested) == set(targets)
        assert all(cursor.uppers[key(n).to_user_string()] is not None for n in SEALED)

        # The next tick seals at a later time: a new run, under a new key.
        second = _tick(env, instance, first.cursor)
        (again,) = second.run_requests
        assert again.run_key != request.run_key
        later = dict(part.rsplit("@", 1) for part in (again.run_key or "").split(","))
        assert all(int(later[k]) > int(targets[k]) for k in targets)


def test_same_frontiers_request_nothing_twice(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    with env.resource.open(spark=False) as opened:
        objects = tuple(operations.catalog_objects(opened))
    project_keys = {key(o.name).to_user_string(): o for o in objects}
    frontiers = {
        k: operations.Frontiers(0, 100 if o.kind.value in ("source", "table") else 50)
        for k, o in project_keys.items()
        if o.kind.value != "index"
    }
    first = plan_tick(objects, frontiers, TimestampCursor())
    assert first.run_request is not None
    assert len(first.observations) == len(SEALED)
    # Views over views are requested with the upper their inputs will reach.
    assert f"{key('item_stats').to_user_string()}@100" in (first.run_request.run_key or "")
    repeat = plan_tick(objects, frontiers, first.cursor)
    assert repeat.run_request is None and not repeat.observations
    assert repeat.cursor == first.cursor
    # The run happened (views at 100); then the auction and the webhook move
    # on, the table does not: only views downstream of what moved are asked.
    moved = dict(frontiers)
    for view in ON_COMMIT_VIEWS:
        moved[key(view).to_user_string()] = operations.Frontiers(0, 100)
    for source in ("auctions", "bids", "item_views"):
        moved[key(source).to_user_string()] = operations.Frontiers(0, 150)
    third = plan_tick(objects, moved, repeat.cursor)
    assert third.run_request is not None
    selected = {k.path[-1] for k in third.run_request.asset_selection or []}
    assert selected == {"auction_bids", "item_stats", "item_interest"}  # not watched_items
    assert {o.asset_key.path[-1] for o in third.observations} == {"auctions", "bids", "item_views"}
