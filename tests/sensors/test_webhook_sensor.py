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


def test_webhook_post_leads_to_a_run_of_its_dependent_views(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    # The server only ingests here (no background maintenance): Dagster runs
    # are what advance the views, as in a deployment that leaves it to them.
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
            ).success

            items = sql("SELECT item FROM item_stats ORDER BY item LIMIT 1")
            assert items, "the auction generator gave item_stats no item"
            [(item,)] = items
            before = sql(f"SELECT views FROM item_interest WHERE item = '{item}'")
            url = f"{server.http.url}/api/webhook/materialize/public/item_views"
            for _ in range(3):
                assert requests.post(url, data=item.encode(), timeout=30).status_code == 200

            second = _tick(env, instance, first.cursor)
            (again,) = second.run_requests
            selected = {k.path[-1] for k in again.asset_selection or []}
            assert "item_interest" in selected
            keys = _run_keys(again)
            interest = key("item_interest").to_user_string()
            assert keys[interest] > _run_keys(request)[interest]
            assert "item_views" in {e.asset_key.path[-1] for e in second.asset_events}
            assert TimestampCursor.parse(second.cursor).requested[interest] == keys[interest]

            assert dg.materialize(
                env.assets(),
                selection=again.asset_selection,
                resources={"coordinator": env.resource},
                instance=instance,
            ).success
            after = sql(
                f"SELECT views FROM item_interest WHERE item = '{item}' "
                f"AS OF AT LEAST {keys[interest] - 1}"
            )
            views_before = before[0][0] if before else 0
            assert after == [(views_before + 3,)]
    finally:
        session.terminate()
        server.stop()
