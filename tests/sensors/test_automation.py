"""The eager condition of on-commit views reading a view, evaluated with
Dagster's own testing API (dg.evaluate_automation_conditions) on a real
instance after real runs: a view parent's materialization requests its
readers once; sources and tables (sealed and observed, never materialized in
Dagster) neither block nor trigger it; a run that already stepped a reader
does not request it again."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from tests.assets.support import DemoEnv, demo_env, key

VIEWS = {"auction_bids", "item_stats", "watched_items", "item_interest", "auctions_per_item"}


Evaluation = dg.EvaluateAutomationConditionsResult


def _evaluate(
    env: DemoEnv, instance: dg.DagsterInstance, previous: Evaluation | None
) -> tuple[Evaluation, set[str]]:
    result = dg.evaluate_automation_conditions(
        defs=env.defs, instance=instance, cursor=previous.cursor if previous else None
    )
    requested = {name for name in VIEWS if result.get_num_requested(key(name))}
    assert result.total_requested == len(requested)  # nothing but views
    return result, requested


def _run(env: DemoEnv, instance: dg.DagsterInstance, *names: str) -> None:
    assets = [key(n) for n in names]
    result = dg.materialize(
        env.assets(), selection=assets, resources={"coordinator": env.resource}, instance=instance
    )
    assert result.success


def test_view_parent_materialized_requests_its_readers_once(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    with dg.instance_for_test() as instance:
        # Nothing materialized: every reader has a missing view parent.
        result, requested = _evaluate(env, instance, None)
        assert requested == set()

        # A run steps auction_bids (what the timestamp sensor asks for on new
        # bids): its reader item_stats is requested, and with it the mixed
        # views reading item_stats (their table and webhook never block).
        _run(env, instance, "auction_bids")
        result, requested = _evaluate(env, instance, result)
        assert requested == {"item_stats", "watched_items", "item_interest"}
        result, requested = _evaluate(env, instance, result)
        assert requested == set()  # requested already: not twice

        _run(env, instance, "item_stats", "watched_items", "item_interest")
        result, requested = _evaluate(env, instance, result)
        assert requested == set()  # item_stats's update came with its readers

        # Sealing a table or a source materializes no view: nothing.
        _run(env, instance, "watchlist", "item_views")
        result, requested = _evaluate(env, instance, result)
        assert requested == set()

        # A timestamp sensor run for new watchlist rows steps watched_items
        # with the views upstream of it: only item_interest, which read
        # item_stats and was not in that run, is requested.
        _run(env, instance, "auction_bids", "item_stats", "watched_items")
        result, requested = _evaluate(env, instance, result)
        assert requested == {"item_interest"}
        result, requested = _evaluate(env, instance, result)
        assert requested == set()
