"""Frontiers in the UI (issue 16): a time is a date, but the minimum time
is no date. A view hydrated at 0 (a closed view, whose read policy grants
the minimum, keeps since 0 for ever) showed "since: Jan 1 1970"."""

from __future__ import annotations

import dagster as dg

from assets.metadata import MINIMUM_FRONTIER, frontier_time, recorded_frontiers

KEY = dg.AssetKey(["materialize", "public", "v"])


def test_a_frontier_at_the_minimum_is_no_date() -> None:
    since = frontier_time(0)
    assert not isinstance(since, dg.TimestampMetadataValue)
    assert since.value == MINIMUM_FRONTIER
    assert isinstance(frontier_time(1), dg.TimestampMetadataValue)
    upper = frontier_time(1_795_000_000_000)
    assert isinstance(upper, dg.TimestampMetadataValue)
    assert upper.value == 1_795_000_000
    assert frontier_time(None) == dg.MetadataValue.null()  # closed for ever


def test_recorded_frontiers_read_the_minimum_back() -> None:
    """The frontier check compares with the recorded frontiers: the
    minimum's text reads back as 0, dates as milliseconds."""
    with dg.instance_for_test() as instance:
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                KEY,
                metadata={"since": frontier_time(0), "upper": frontier_time(1_795_000_000_123)},
            )
        )
        assert recorded_frontiers(instance, KEY) == (0, 1_795_000_000_123)
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                KEY, metadata={"since": frontier_time(0), "upper": frontier_time(None)}
            )
        )
        assert recorded_frontiers(instance, KEY) == (0, None)
