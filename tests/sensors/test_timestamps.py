"""The timestamp-assignment sensor through build_sensor_context: it seals
tables, webhook sources and load generators and steps nothing; it requests a
run of the views refreshed on commit only when their tables or sources have
new updates (sealing alone moves every upper and asks for nothing; a view
parent's new rows are eager's), under a run key made of frontiers, and never
requests the same updates twice. The views over views then follow through
their eager condition (dg.evaluate_automation_conditions), each once."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import requests

from coordinator_lib.adapter import operations
from coordinator_lib.adapter.coordinator import Config
from coordinator_lib.adapter.operations.frontiers import Frontiers, UpdateSpan
from coordinator_lib.server.environment import Environment
from sensors import TimestampCursor, plan_tick
from sensors.timestamps import Observed
from tests.adapter.conftest import run_on
from tests.assets.support import DemoEnv, demo_env, id_of, key, project_env

ON_COMMIT_VIEWS = {"auction_bids", "item_stats", "watched_items", "item_interest"}
SOURCES = {"auction", "organizations", "users", "accounts", "auctions", "bids"}
SEALED = SOURCES | {"watchlist", "item_views"}

SHOP = """
CREATE TABLE orders (id bigint NOT NULL, item text NOT NULL);
CREATE SOURCE clicks FROM WEBHOOK BODY FORMAT TEXT;
CREATE MATERIALIZED VIEW order_counts AS
    SELECT item, count(*) AS orders FROM orders GROUP BY item;
CREATE MATERIALIZED VIEW click_counts AS
    SELECT body AS item, count(*) AS clicks FROM clicks GROUP BY body;
CREATE MATERIALIZED VIEW interest AS
    SELECT o.item, o.orders, c.clicks
    FROM order_counts o JOIN click_counts c ON c.item = o.item;
"""


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


def _run_keys(request: dg.RunRequest) -> dict[str, int]:
    parts = (p.rsplit("@", 1) for p in (request.run_key or "").split(","))
    return {k.split("/")[-1]: int(v) for k, v in parts}


def _selected(request: dg.RunRequest) -> set[str]:
    return {k.path[-1] for k in request.asset_selection or []}


def _run(env: DemoEnv, instance: dg.DagsterInstance, request: dg.RunRequest) -> None:
    result = dg.materialize(
        env.assets(),
        selection=request.asset_selection,
        resources={"coordinator": env.resource},
        instance=instance,
        tags=request.tags,
    )
    assert result.success


def _automation(
    env: DemoEnv, instance: dg.DagsterInstance, previous: dg.EvaluateAutomationConditionsResult
) -> tuple[dg.EvaluateAutomationConditionsResult, set[str]]:
    """One evaluation of the eager conditions (what tidemark_automation does),
    and the views it requests."""
    result = dg.evaluate_automation_conditions(
        defs=env.defs, instance=instance, cursor=previous.cursor
    )
    names = {k.path[-1] for k in env.defs.resolve_asset_graph().get_all_asset_keys()}
    return result, {n for n in names if result.get_num_requested(key(n))}


def _run_eager(env: DemoEnv, instance: dg.DagsterInstance, names: set[str]) -> None:
    """The run the automation sensor would launch: no targets tag."""
    _run(env, instance, dg.RunRequest(asset_selection=[key(n) for n in names]))


def test_runs_follow_new_updates_not_sealing(tmp_path: Path) -> None:
    """Idle ticks ask for nothing; an INSERT, then a webhook POST, each give
    exactly one run of the views over them (and of the other view that
    `interest` reads, so it finds both at the new time); `interest`, over two
    views, follows by eager, once; the same updates are never requested
    under a new key."""
    env = project_env(tmp_path, SHOP)
    server = Environment(
        Config(data_dir=str(env.data_dir), background=False), pgwire_port=0, http_port=0
    )
    server.start()
    session = server.handle.client.startup("materialize", "materialize")
    sql = run_on(session)
    url = f"{server.http.url}/api/webhook/materialize/public/clicks"
    try:
        with dg.instance_for_test() as instance:
            # Never computed: one run hydrates every view.
            eager = dg.evaluate_automation_conditions(defs=env.defs, instance=instance)
            first = _tick(env, instance, None)
            (hydrate,) = first.run_requests
            assert _selected(hydrate) == {"order_counts", "click_counts", "interest"}
            assert hydrate.tags["tidemark/reasons"].count(":hydrate") == 3
            _run(env, instance, hydrate)
            eager, requested = _automation(env, instance, eager)
            assert requested == set()  # interest was in the run with its parents

            # Idle: sealing moved the table's and the webhook's uppers, but
            # nothing was written, so nothing is requested.
            before = _uppers(env, {"orders", "clicks"})
            idle = _tick(env, instance, first.cursor)
            assert idle.run_requests == []
            after = _uppers(env, {"orders", "clicks"})
            assert all(after[n] > before[n] for n in after)  # type: ignore[operator]
            moved = {e.asset_key.path[-1]: e.metadata for e in idle.asset_events}
            assert set(moved) == {"orders", "clicks"}
            assert all(m["new_updates"].value == 0 for m in moved.values())

            # An INSERT: one run for the view over the table (and click_counts,
            # stepped without new rows so interest can reach the insert's time);
            # interest reads views only: eager's.
            sql("INSERT INTO orders VALUES (1, 'kettle'), (2, 'kettle'), (3, 'lamp')")
            insert = _tick(env, instance, idle.cursor)
            (by_insert,) = insert.run_requests
            assert set(_run_keys(by_insert)) == {"order_counts"}
            assert _selected(by_insert) == {"order_counts", "click_counts"}
            moved = {e.asset_key.path[-1]: e.metadata for e in insert.asset_events}
            assert moved["orders"]["new_updates"].value == 3
            assert moved["clicks"]["new_updates"].value == 0
            again = _tick(env, instance, insert.cursor)
            assert again.run_requests == []  # requested already: not twice
            _run(env, instance, by_insert)
            assert _tick(env, instance, again.cursor).run_requests == []
            eager, requested = _automation(env, instance, eager)
            assert requested == {"interest"}
            _run_eager(env, instance, requested)
            eager, requested = _automation(env, instance, eager)
            assert requested == set()
            assert _tick(env, instance, again.cursor).run_requests == []

            # A webhook POST: one run for the view over the webhook source.
            for _ in range(2):
                assert requests.post(url, data=b"kettle", timeout=30).status_code == 200
            posted = _tick(env, instance, again.cursor)
            (by_post,) = posted.run_requests
            assert set(_run_keys(by_post)) == {"click_counts"}
            assert _selected(by_post) == {"click_counts", "order_counts"}
            assert "order_counts" not in by_post.tags["tidemark/reasons"]
            # Evaluated again with the old cursor (a tick whose cursor was not
            # kept): the same updates give the same run key, which Dagster
            # does not run twice; with the new cursor, nothing.
            retried = _tick(env, instance, again.cursor)
            (same,) = retried.run_requests
            assert same.run_key == by_post.run_key
            assert _tick(env, instance, posted.cursor).run_requests == []

            _run(env, instance, by_post)
            eager, requested = _automation(env, instance, eager)
            assert requested == {"interest"}
            _run_eager(env, instance, requested)
            eager, requested = _automation(env, instance, eager)
            assert requested == set()
            planned = TimestampCursor.parse(posted.cursor).requested
            target = min(planned[key(n).to_user_string()] for n in ("order_counts", "click_counts"))
            rows = sql(f"SELECT item, orders, clicks FROM interest AS OF AT LEAST {target - 1}")
            assert rows == [("kettle", 2, 2)]
            assert _tick(env, instance, posted.cursor).run_requests == []
    finally:
        session.terminate()
        server.stop()


def test_timestamp_sensor_seals_sources_and_steps_nothing(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    sensor = env.defs.resolve_sensor_def("tidemark_timestamps")
    assert sensor.default_status is dg.DefaultSensorStatus.RUNNING
    views_before = _uppers(env, ON_COMMIT_VIEWS | {"auctions_per_item"})
    sealed_before = _uppers(env, {"watchlist", "item_views", "bids"})
    with dg.instance_for_test() as instance:
        first = _tick(env, instance, None)
        (request,) = first.run_requests
        # Never computed: the on-commit views, not the REFRESH EVERY view or the index.
        assert _selected(request) == ON_COMMIT_VIEWS
        assert set(_run_keys(request)) == ON_COMMIT_VIEWS
        assert {e.asset_key.path[-1] for e in first.asset_events} == SEALED
        sealed_after = _uppers(env, {"watchlist", "item_views", "bids"})
        for name, upper in sealed_after.items():
            assert upper is not None and sealed_before[name] is not None
            assert upper > sealed_before[name], name
        assert _uppers(env, ON_COMMIT_VIEWS | {"auctions_per_item"}) == views_before
        cursor = TimestampCursor.parse(first.cursor)
        assert {k.split("/")[-1] for k in cursor.requested} == ON_COMMIT_VIEWS
        assert all(cursor.uppers[key(n).to_user_string()] is not None for n in SEALED)


def test_plan_tick_views_over_views_freshness_and_keys(tmp_path: Path) -> None:
    """plan_tick on the demo catalog with made-up frontiers and spans."""
    env = demo_env(tmp_path)
    with env.resource.open(spark=False) as opened:
        objects = tuple(operations.catalog_objects(opened))
    by_key = {key(o.name).to_user_string(): o for o in objects if o.kind.value != "index"}
    kind = {k: o.kind.value for k, o in by_key.items()}
    k = {o.name: key(o.name).to_user_string() for o in objects}

    def observed(source_upper: int, spans: dict[str, list[UpdateSpan]]) -> Observed:
        frontiers = {
            name: Frontiers(0, source_upper if kind[name] in ("source", "table") else 100)
            for name in by_key
        }
        return Observed(frontiers, {k[n]: s for n, s in spans.items()})

    seen = TimestampCursor(requested={k[v]: 100 for v in ON_COMMIT_VIEWS})
    # Every upper moved, no updates after the views' uppers: nothing.
    old = observed(150, {"bids": [UpdateSpan(50, 90, 7)]})
    quiet = plan_tick(objects, old, seen)
    assert quiet.run_request is None and not quiet.reasons
    assert len(quiet.observations) == len(SEALED)

    # New rows in a view only (auction_bids): its readers are eager's, not ours.
    view_rows = observed(150, {"auction_bids": [UpdateSpan(120, 130, 3)]})
    assert plan_tick(objects, view_rows, seen).run_request is None

    # New bids: the view over them runs; item_stats and the views reading it
    # follow by eager when auction_bids materializes.
    bids = observed(150, {"bids": [UpdateSpan(50, 90, 7), UpdateSpan(120, 130, 3)]})
    plan = plan_tick(objects, bids, seen)
    assert plan.run_request is not None
    assert _selected(plan.run_request) == {"auction_bids"}
    assert _run_keys(plan.run_request) == {"auction_bids": 130}
    assert plan.cursor.requested == {**seen.requested, k["auction_bids"]: 150}
    assert plan_tick(objects, bids, plan.cursor).run_request is None
    # Later frontiers, the same bids, the old cursor: the same key.
    later = observed(170, {"bids": [UpdateSpan(50, 90, 7), UpdateSpan(120, 130, 3)]})
    repeat = plan_tick(objects, later, seen)
    assert repeat.run_request is not None and repeat.run_request.run_key == plan.run_request.run_key

    # A watchlist INSERT: watched_items, with item_stats and auction_bids
    # stepped (no new rows) so it can reach the insert's time.
    watch = observed(150, {"watchlist": [UpdateSpan(140, 141, 1)]})
    watched = plan_tick(objects, watch, seen)
    assert watched.run_request is not None
    assert set(_run_keys(watched.run_request)) == {"watched_items"}
    assert _selected(watched.run_request) == {"watched_items", "item_stats", "auction_bids"}

    # A webhook update: item_interest, with item_stats and auction_bids
    # stepped (no new rows) so it can reach the update's time.
    views = observed(150, {"item_views": [UpdateSpan(140, 141, 1)]})
    webhook = plan_tick(objects, views, seen)
    assert webhook.run_request is not None
    assert set(_run_keys(webhook.run_request)) == {"item_interest"}
    assert _selected(webhook.run_request) == {"item_interest", "item_stats", "auction_bids"}

    # Idle for longer than half the declared freshness: a run to keep the
    # views over tables and sources fresh (item_stats, over a view only,
    # follows auction_bids by eager; it steps here as watched_items' input).
    freshness = {k[v]: 1_000 for v in ON_COMMIT_VIEWS}
    stale = plan_tick(objects, old, seen, freshness, now_ms=100 + 400)
    assert stale.run_request is None
    stale = plan_tick(objects, old, seen, freshness, now_ms=100 + 600)
    readers = ON_COMMIT_VIEWS - {"item_stats"}
    assert stale.reasons == {k[v]: "freshness" for v in readers}
    assert stale.run_request is not None and _selected(stale.run_request) == ON_COMMIT_VIEWS
