"""Asset checks pass on good data and fail on broken data: frontiers,
the pandera schema of the RelationDesc, and a view's consistency with a
recompute of its query."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets import build_assets
from assets.project import Project
from coordinator_lib.adapter import operations
from coordinator_lib.adapter.operations import checks as check_questions
from coordinator_lib.adapter.operations.frontiers import Frontiers
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.update import Update
from tests.assets.support import DemoEnv, demo_env, id_of, key, metadata_values

# Everything but the index: its arrangement needs Spark, these checks do not.
SKIP = {key("item_stats_by_item")}


def _materialize_demo(env: DemoEnv, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    assets = [a for a in env.assets() if not set(a.keys) & SKIP]
    checks = [c for c in env.checks() if not {k.asset_key for k in c.check_keys} & SKIP]
    return dg.materialize(
        [*assets, *checks], resources={"coordinator": env.resource}, instance=instance
    )


def _evaluations(
    result: dg.ExecuteInProcessResult,
) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    return {(e.asset_key.path[-1], e.check_name): e for e in result.get_asset_check_evaluations()}


def _run_checks(
    env: DemoEnv, instance: dg.DagsterInstance, asset: str, checks: list[dg.AssetChecksDefinition]
) -> dict[str, dg.AssetCheckEvaluation]:
    """Only the checks of `asset` (no materialization), as the UI's "Execute checks"."""
    assets = [a for a in env.assets() if not set(a.keys) & SKIP]
    result = dg.materialize(
        [*assets, *checks],
        selection=dg.AssetSelection.checks_for_assets(key(asset)),
        resources={"coordinator": env.resource},
        instance=instance,
        raise_on_error=False,
    )
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_checks_pass_on_good_data_and_fail_on_broken_data(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    with dg.instance_for_test() as instance:
        result = _materialize_demo(env, instance)
        evaluations = _evaluations(result)
        assert {name for name, _ in evaluations} >= {"item_stats", "watchlist", "bids"}
        assert {check for _, check in evaluations} == {"frontiers", "schema", "consistency"}
        failing = [k for k, e in evaluations.items() if not e.passed]
        assert not failing
        consistency = evaluations[("item_stats", "consistency")]
        assert consistency.metadata["differences"].value == 0

        # Break the view: one of its rows a second time, as a buggy writer
        # would, at a time its input (auction_bids, advanced first) covers.
        with env.coordinator() as other:
            operations.assign_timestamps(other)
            operations.materialize(other, id_of(other, "auction_bids"))
            view = id_of(other, "item_stats")
            _, upper = other.storage.collection_frontiers(view)
            assert upper.time is not None
            row, _ = other.storage.snapshot(view, upper.time - 1)[0]
            other.storage.shard(view).compare_and_append(
                [Update(row, upper.time, 1)], upper, Frontier.at(upper.time + 1)
            )
        broken = _run_checks(env, instance, "item_stats", env.checks())
        assert not broken["consistency"].passed
        assert "extra" in (broken["consistency"].description or "")
        assert not broken["schema"].passed  # the key (item) now repeats
        assert "item" in (broken["schema"].description or "")
        assert broken["frontiers"].passed  # frontiers are still fine


def test_frontier_check_fails_when_lag_exceeds_the_declared_freshness(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    with dg.instance_for_test() as instance:
        assert all(e.passed for e in _materialize_demo(env, instance).get_asset_check_evaluations())
        # The same objects, declaring a freshness no view can meet.
        strict = Project(tuple(o for o in _objects(env)), freshness_ms=0)
        _, checks = build_assets(strict)
        evaluations = _run_checks(env, instance, "watchlist", checks)
        assert not evaluations["frontiers"].passed
        assert "exceeds the declared freshness" in (evaluations["frontiers"].description or "")
        assert evaluations["schema"].passed


def _objects(env: DemoEnv):  # type: ignore[no-untyped-def]
    with env.resource.open(spark=False) as opened:
        return operations.catalog_objects(opened)


def test_frontier_check_fails_on_since_after_upper_and_on_frontiers_going_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Frontiers a broken environment could report, injected where the check
    reads them (`observe` in adapter/operations/checks.py) for one collection."""
    env = demo_env(tmp_path)
    with dg.instance_for_test() as instance:
        result = _materialize_demo(env, instance)
        assert result.success
        metadata = {
            e.materialization.asset_key.path[-1]: metadata_values(e.materialization)
            for e in result.get_asset_materialization_events()
        }
        for name, values in metadata.items():  # shown on every materialization
            assert isinstance(values["spark_seconds"], float), name
            assert 0 <= values["spark_seconds"] <= values["step_seconds"], name
        since, upper = metadata["watchlist"]["since"], metadata["watchlist"]["upper"]
        assert isinstance(since, int) and isinstance(upper, int)
        with env.coordinator() as other:
            watchlist = id_of(other, "watchlist")
        real = operations.observe

        def reporting(change):  # type: ignore[no-untyped-def]
            def observe(coordinator, id):  # type: ignore[no-untyped-def]
                found = real(coordinator, id)
                return change(found) if id == watchlist and found is not None else found

            return observe

        def frontiers_check() -> dg.AssetCheckEvaluation:
            return _run_checks(env, instance, "watchlist", env.checks())["frontiers"]

        assert frontiers_check().passed

        crossing = reporting(lambda f: Frontiers(f.upper + 5, f.upper))
        monkeypatch.setattr(check_questions, "observe", crossing)
        crossed = frontiers_check()
        assert not crossed.passed
        assert "is after upper" in (crossed.description or "")

        monkeypatch.setattr(
            check_questions, "observe", reporting(lambda f: Frontiers(since - 1, upper - 1))
        )
        back = frontiers_check()
        assert not back.passed
        assert f"upper {upper - 1} went back from {upper}" in (back.description or "")
        assert f"since {since - 1} went back from {since}" in (back.description or "")

        monkeypatch.undo()
        assert frontiers_check().passed
