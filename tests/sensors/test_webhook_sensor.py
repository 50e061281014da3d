"""Issue 6 end to end: a POST to a webhook source on a real `tidemark serve`
environment is acknowledged, the timestamp sensor (build_sensor_context)
seals it and requests the views that depend on it under a frontier run key,
and materializing that request makes the posted row visible in the view."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import requests

from coordinator_lib.adapter.coordinator import Config
from coordinator_lib.server.environment import Environment
from sensors import TimestampCursor
from tests.adapter.conftest import run_on
from tests.assets.support import demo_env, key
from tests.sensors.test_timestamps import _tick

pytestmark = pytest.mark.spark


def _run_keys(request: dg.RunRequest) -> dict[str, int]:
    return {k: int(v) for k, v in (p.rsplit("@", 1) for p in (request.run_key or "").split(","))}


def _planned(result: dg.SensorResult, name: str) -> int:  # type: ignore[type-arg]
    return TimestampCursor.parse(result.cursor).requested[key(name).to_user_string()]


def test_webhook_post_leads_to_a_run_of_its_dependent_views(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    # The server only ingests here (no background maintenance): Dagster runs
    # are what advance the views, as in a deployment that leaves it to them.
    # Reads name a time the runs reached (AS OF AT LEAST), so they never wait
    # for the server to step anything.
    server = Environment(
        Config(data_dir=str(env.data_dir), background=False), pgwire_port=0, http_port=0
    )
    server.start()
    session = server.handle.client.startup("materialize", "materialize")
    sql = run_on(session)
    try:
        with dg.instance_for_test() as instance:
            first = _tick(env, instance, None)
            (request,) = first.run_requests
            assert dg.materialize(
                env.assets(),
                selection=request.asset_selection,
                resources={"coordinator": env.resource},
                instance=instance,
                tags=request.tags,
            ).success
            at = _planned(first, "item_interest") - 1
            items = sql(f"SELECT item FROM auction_bids ORDER BY item LIMIT 1 AS OF AT LEAST {at}")
            assert items, "the auction generator gave auction_bids no bid"
            [(item,)] = items
            query = f"SELECT views FROM item_interest WHERE item = '{item}' AS OF AT LEAST "
            before = sql(f"{query}{at}")
            url = f"{server.http.url}/api/webhook/materialize/public/item_views"
            for _ in range(3):
                assert requests.post(url, data=item.encode(), timeout=30).status_code == 200

            second = _tick(env, instance, first.cursor)
            (again,) = second.run_requests
            assert "item_interest" in {k.path[-1] for k in again.asset_selection or []}
            interest = key("item_interest").to_user_string()
            assert f"{interest}:new-rows" in again.tags["tidemark/reasons"]
            assert _run_keys(again)[interest] > _run_keys(request)[interest]
            views = {e.asset_key.path[-1]: e for e in second.asset_events}["item_views"]
            assert views.metadata["new_updates"].value == 3  # three requests, one row each
            assert _planned(second, "item_interest") >= _run_keys(again)[interest]

            assert dg.materialize(
                env.assets(),
                selection=again.asset_selection,
                resources={"coordinator": env.resource},
                instance=instance,
                tags=again.tags,
            ).success
            at = _planned(second, "item_interest") - 1
            after = sql(f"{query}{at}")
            views_before = before[0][0] if before else 0
            assert after == [(views_before + 3,)]
    finally:
        session.terminate()
        server.stop()
