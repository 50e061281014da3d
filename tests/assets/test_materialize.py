"""Materializing the whole demo graph through Dagster, twice: the second run
is incremental (each view reads exactly its inputs' updates since the first
run) and no frontier moves back."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg

from assets.metadata import INDEX_ARRANGEMENT
from coordinator_lib.sql.catalog import ItemKind
from tests.assets.support import demo_env, id_of, metadata_values, run_sql, updates_between

VIEWS = ("auction_bids", "item_stats", "watched_items", "item_interest", "auctions_per_item")
INPUTS = {
    "auction_bids": ("auctions", "bids"),
    "item_stats": ("auction_bids",),
    "watched_items": ("watchlist", "item_stats"),
    "item_interest": ("item_views", "item_stats"),
    "auctions_per_item": ("auctions",),
}


def _materializations(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, object]]:
    out = {}
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        out[materialization.asset_key.path[-1]] = metadata_values(materialization)
    return out


def test_materialize_demo_twice_second_run_is_incremental(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    everything = [*env.assets(), *env.checks()]
    with dg.instance_for_test() as instance:
        first = dg.materialize(
            everything, resources={"coordinator": env.resource}, instance=instance
        )
        assert first.success
        one = _materializations(first)
        assert set(one) >= {
            "auction", "auctions", "bids", "watchlist", "item_views", "item_stats_by_item", *VIEWS
        }  # fmt: skip
        for name, values in one.items():
            assert values["since"] is None or values["since"] <= values["upper"], name
            for field in (
                "lag_seconds",
                "rows_inserted",
                "rows_retracted",
                "dagster/row_count",
                "plan",
            ):
                assert field in values, (name, field)
            seconds = values["spark_seconds"]
            assert isinstance(seconds, float) and 0 <= seconds <= values["step_seconds"], name
        # The first run hydrates every view and the index.
        for name in (*VIEWS, "item_stats_by_item"):
            assert one[name]["step_kind"] == "hydration", name
            assert str(one[name]["step"]).endswith(" hydration"), name
        # The demo's data is small: its index steps in-process, as its views.
        assert one["item_stats_by_item"]["engine"] == "local"
        assert one["item_stats_by_item"]["spark_seconds"] == 0
        # Every source and view of the run sits at the run's one seal timestamp.
        uppers = {one[n]["upper"] for n in ("auctions", "bids", "watchlist", "item_views", *VIEWS)}
        assert len(uppers) == 1
        evaluations = first.get_asset_check_evaluations()
        assert evaluations and all(e.passed for e in evaluations), [
            (e.asset_key.to_user_string(), e.check_name, e.description)
            for e in evaluations
            if not e.passed
        ]

        # Between the runs: table and webhook writes, and new auction ticks.
        with env.coordinator() as other:
            run_sql(
                other,
                [
                    "INSERT INTO watchlist VALUES "
                    "(1, 'Best Pizza in Town', 50), (2, 'Gift Basket', 10)",
                ],
            )
            views_id = id_of(other, "item_views")
            other.commit_writes({views_id: [(("Best Pizza in Town",), 1), (("Gift Basket",), 1)]})
        time.sleep(1.2)

        second = dg.materialize(
            everything, resources={"coordinator": env.resource}, instance=instance
        )
        assert second.success
        two = _materializations(second)
        with env.coordinator() as other:
            for view in VIEWS:
                before, after = one[view], two[view]
                lower, upper = before["upper"], after["upper"]
                assert isinstance(lower, int) and isinstance(upper, int) and upper > lower
                assert after["previous_upper"] == lower
                # One incremental step from where the first run left the view...
                assert after["step"] == f"[{lower}, {upper}) ms", view
                # ...reading exactly its inputs' updates in between, no more.
                delta = sum(updates_between(other, name, lower, upper) for name in INPUTS[view])
                assert after["rows_read"] == delta, view
                assert after["rows_read"] == sum(two[name]["updates"] for name in INPUTS[view])
                assert after["changes_from"] == lower
                assert after["since"] >= before["since"], view
                shard = other.storage.shard(id_of(other, view))
                changes = shard.updates_between(
                    lower, other.storage.collection_frontiers(id_of(other, view))[1]
                )
                assert after["rows_inserted"] == sum(u.diff for u in changes if u.diff > 0)
                assert after["rows_retracted"] == -sum(u.diff for u in changes if u.diff < 0)
            for source in ("auctions", "bids", "watchlist", "item_views"):
                assert two[source]["upper"] > one[source]["upper"]
                assert two[source]["since"] >= one[source]["since"]
            assert other.catalog.get(id_of(other, "item_stats_by_item")).kind is ItemKind.INDEX
        # Views only catch up (their state is their durable output); with no
        # tidemark serve, the index's arrangement lived in the first run's
        # process, so this run builds it again, reading item_stats' whole
        # snapshot, and says the index is the server's whenever one runs.
        for view in VIEWS:
            assert two[view]["step_kind"] == "catch-up", view
        index = two["item_stats_by_item"]
        assert index["step_kind"] == "hydration"
        assert index["arrangement"] == INDEX_ARRANGEMENT
        assert index["rows_read"] >= two["item_stats"]["dagster/row_count"]
        assert two["watchlist"]["rows_inserted"] == 2
        assert two["item_views"]["rows_inserted"] == 2
        assert two["watched_items"]["dagster/row_count"] >= 0
        assert all(e.passed for e in second.get_asset_check_evaluations())
