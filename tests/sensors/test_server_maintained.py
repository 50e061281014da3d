"""One model: while `tidemark serve` maintains the views, Dagster observes
them instead of re-running them. The timestamp sensor reports each server
step as a materialization without a run (frontiers as dates, data version =
upper, who stepped it), requests no run, and the eager views over views are
not requested for a parent the server stepped. When the server stops, its
heartbeat lapses and runs maintain the views again."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.loader import LoadingContextForTest

from assets import load_project
from coordinator_lib.adapter import operations
from coordinator_lib.adapter.coordinator import Config
from coordinator_lib.adapter.operations.frontiers import Frontiers
from coordinator_lib.server.environment import Environment
from sensors import TimestampCursor, plan_tick
from sensors.timestamps import Observed
from tests.adapter.conftest import run_on
from tests.assets.support import DemoEnv, demo_env, key, project_env
from tests.sensors.test_timestamps import SHOP, _automation, _selected, _tick

VIEWS = {"order_counts", "click_counts", "interest"}


def _wait_for(condition, what: str, seconds: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_server_steps_are_reported_not_rerun(tmp_path: Path) -> None:
    env = project_env(tmp_path, SHOP)
    server = Environment(
        Config(data_dir=str(env.data_dir), maintenance_interval_ms=50),
        pgwire_port=0,
        http_port=0,
    )
    server.start()
    session = server.handle.client.startup("materialize", "materialize")
    sql = run_on(session)
    stopped = False
    try:
        with env.coordinator() as other:
            live = operations.maintainer(other)
            assert live is not None and live.holder.startswith("tidemark serve")
        with dg.instance_for_test() as instance:
            eager = dg.evaluate_automation_conditions(defs=env.defs, instance=instance)
            first = _tick(env, instance, None)
            assert first.run_requests == []  # the server hydrates, not a run
            reported = {
                e.asset_key.path[-1]: e
                for e in first.asset_events
                if isinstance(e, dg.AssetMaterialization)
            }
            assert set(reported) == VIEWS
            for name, event in reported.items():
                metadata = event.metadata
                assert isinstance(metadata["upper"], dg.TimestampMetadataValue), name
                upper_ms = round(metadata["upper"].value * 1000)
                assert event.tags["dagster/data_version"] == str(upper_ms)
                assert metadata["maintained_by"].value == live.holder
            cursor = TimestampCursor.parse(first.cursor)

            # An INSERT: the server steps order_counts and interest; the next
            # tick reports them (order_counts with the updates it wrote) and
            # still requests no run.
            sql("INSERT INTO orders VALUES (1, 'kettle'), (2, 'lamp')")
            before = cursor.uppers[key("order_counts").to_user_string()]
            assert before is not None

            def stepped() -> bool:
                rows = sql("SELECT count(*) FROM order_counts")
                return rows == [(2,)]

            _wait_for(stepped, "the server to step order_counts")
            second = _tick(env, instance, first.cursor)
            assert second.run_requests == []
            moved = {
                e.asset_key.path[-1]: e.metadata
                for e in second.asset_events
                if isinstance(e, dg.AssetMaterialization)
            }
            assert "order_counts" in moved
            assert moved["order_counts"]["updates"].value >= 2
            for event in second.asset_events:
                instance.report_runless_asset_event(event)
            # The server stepped interest too: eager asks for no run of it.
            eager, requested = _automation(env, instance, eager)
            assert requested == set()

            # The server stops: its heartbeat is withdrawn, and new rows get a
            # run again (written through a process that maintains nothing).
            session.terminate()
            server.stop()
            stopped = True
            with env.coordinator() as other:
                assert operations.maintainer(other) is None
            writer = Environment(
                Config(data_dir=str(env.data_dir), background=False), pgwire_port=0, http_port=0
            )
            writer_session = writer.handle.client.startup("materialize", "materialize")
            try:
                run_on(writer_session)("INSERT INTO orders VALUES (3, 'lamp')")
                third = _tick(env, instance, second.cursor)
            finally:
                writer_session.terminate()
                writer.stop()
            (request,) = third.run_requests
            assert "order_counts" in _selected(request)
            assert not any(isinstance(e, dg.AssetMaterialization) for e in third.asset_events)
    finally:
        if not stopped:
            session.terminate()
            server.stop()


def test_no_server_means_runs(tmp_path: Path) -> None:
    """Without a live heartbeat the sensor plans runs as before (the views
    never computed are hydrated by one)."""
    env = project_env(tmp_path, SHOP)
    with dg.instance_for_test() as instance:
        first = _tick(env, instance, None)
        (request,) = first.run_requests
        assert _selected(request) == VIEWS
        assert not any(isinstance(e, dg.AssetMaterialization) for e in first.asset_events)


def _schedule_tick(env: DemoEnv, instance: dg.DagsterInstance) -> list[object]:
    schedule = env.defs.resolve_schedule_def("refresh_materialize_public_auctions_per_item")
    with dg.build_schedule_context(
        instance=instance,
        resources={"coordinator": env.resource},
        repository_def=env.defs.get_repository_def(),
    ) as context:
        data = schedule.evaluate_tick(context)
    return [*(data.run_requests or []), *([data.skip_message] if data.skip_message else [])]


def test_refresh_every_schedule_skips_while_the_server_maintains(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    with dg.instance_for_test() as instance:
        (request,) = _schedule_tick(env, instance)
        assert isinstance(request, dg.RunRequest)  # nobody maintains it: a run
        server = Environment(Config(data_dir=str(env.data_dir)), pgwire_port=0, http_port=0)
        server.start()
        try:
            _wait_for(lambda: _maintained(env), "the server's heartbeat")
            (skipped,) = _schedule_tick(env, instance)
            assert isinstance(skipped, str) and "tidemark serve" in skipped
        finally:
            server.stop()
        (request,) = _schedule_tick(env, instance)
        assert isinstance(request, dg.RunRequest)  # a clean stop hands it back at once


def _maintained(env: DemoEnv) -> bool:
    with env.coordinator() as other:
        return operations.maintainer(other) is not None


def test_reported_steps_carry_provenance_so_unsynced_means_an_upper_moved(
    tmp_path: Path,
) -> None:
    """`interest` reads two views. The server's step of all three is reported
    with each input's data version (its upper). A later materialization of a
    parent at the same upper (a run that had nothing to step) leaves
    `interest` in sync; a parent whose upper moved makes it unsynced."""
    env = project_env(tmp_path, SHOP)
    graph = env.defs.resolve_asset_graph()
    names = ("orders", "clicks", "order_counts", "click_counts", "interest")
    keys = {n: key(n).to_user_string() for n in names}
    frontiers = {keys[n]: Frontiers(1, 100) for n in names}
    observed = Observed(frontiers, {}, "tidemark serve test", {})
    plan = plan_tick(load_project(env.resource, None).objects, observed, TimestampCursor())
    with dg.instance_for_test() as instance:
        for event in plan.reported:
            instance.report_runless_asset_event(event)
        same = dg.AssetMaterialization(
            asset_key=key("order_counts"), tags={"dagster/data_version": "100"}
        )
        instance.report_runless_asset_event(same)
        resolver = CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))
        assert resolver.get_status(key("interest")) is StaleStatus.FRESH
        moved = dg.AssetMaterialization(
            asset_key=key("order_counts"), tags={"dagster/data_version": "200"}
        )
        instance.report_runless_asset_event(moved)
        resolver = CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))
        assert resolver.get_status(key("interest")) is StaleStatus.STALE
