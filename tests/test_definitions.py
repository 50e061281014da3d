"""The Dagster code location loads, both in-process and the way Dagster's CLI loads it."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import psycopg

from coordinator_lib.adapter.coordinator import Config
from coordinator_lib.server.environment import Environment
from definitions import DEFAULT_PROJECT, build_definitions
from tests.assets.support import demo_env, key

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_coordinator_resource_defaults() -> None:
    """Runs and sensors reach coordinator_lib only through this resource."""
    from resources import CoordinatorResource

    coordinator = CoordinatorResource()
    assert coordinator.spark_master == "local[2]"
    assert coordinator.data_dir == "demo/data"
    assert coordinator.config().background is False


def test_importing_definitions_builds_nothing() -> None:
    """`defs` is loaded lazily by Dagster's tools: importing the module opens no
    environment (tests import `build_definitions` from it)."""
    import definitions

    assert callable(definitions.defs)
    assert not isinstance(definitions.defs, dg.Definitions)


def test_demo_definitions(tmp_path: Path) -> None:
    """One asset per source, table, view and index, with lineage, kinds,
    groups, code references and column schemas; the in-process executor."""
    env = demo_env(tmp_path)
    graph = env.defs.resolve_asset_graph()
    names = {k.path[-1] for k in graph.get_all_asset_keys()}
    assert names == {
        "auction", "organizations", "users", "accounts", "auctions", "bids", "item_views",
        "watchlist", "auction_bids", "item_stats", "watched_items", "item_interest",
        "auctions_per_item", "item_stats_by_item",
    }  # fmt: skip
    node = graph.get(key("item_stats"))
    assert node.parent_keys == {key("auction_bids")}
    assert graph.get(key("bids")).parent_keys == {key("auction")}
    assert graph.get(key("item_stats_by_item")).parent_keys == {key("item_stats")}
    assert node.group_name == "public"
    assert node.kinds == {"spark", "sql", "view"}
    metadata = node.metadata
    assert [c.name for c in metadata["dagster/column_schema"].columns] == [
        "item", "bids", "total", "top",
    ]  # fmt: skip
    lineage = metadata["dagster/column_lineage"].deps_by_column
    assert [(d.asset_key, d.column_name) for d in lineage["top"]] == [
        (key("auction_bids"), "amount")
    ]
    (reference,) = metadata["dagster/code_references"].code_references
    assert reference.file_path.endswith("demo/sql/03_views.sql") and reference.line_number == 10
    assert "CREATE MATERIALIZED VIEW" in (node.description or "")
    assert "(an aggregate over a view)" in (node.description or "")
    job = env.defs.get_repository_def().get_job("tidemark_views")
    assert job.executor_def is dg.in_process_executor


def test_dagster_definitions_validate(tmp_path: Path) -> None:
    """`dagster definitions validate` is what a deployment runs before serving the location."""
    dagster_cli = Path(sys.executable).parent / "dagster"
    # A throwaway DAGSTER_HOME keeps the CLI's temporary instance out of the
    # repo, and TIDEMARK_DATA_DIR the demo environment.
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path),
        "TIDEMARK_DATA_DIR": str(tmp_path / "data"),
    }
    result = subprocess.run(
        [str(dagster_cli), "definitions", "validate", "-f", "definitions.py"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "data").is_dir()  # the demo SQL was applied there


def test_objects_created_over_pgwire_appear_at_the_next_reload(tmp_path: Path) -> None:
    """A CREATE MATERIALIZED VIEW sent by psycopg to a running server: the
    definitions built again on the same environment (what "Reload
    definitions" does) show it, wired to its input, run by the timestamp
    sensor's job."""
    env = demo_env(tmp_path)
    assert key("big_bids") not in env.defs.resolve_asset_graph().get_all_asset_keys()
    server = Environment(
        Config(data_dir=str(env.data_dir), background=False), pgwire_port=0, http_port=0
    )
    server.start()
    try:
        dsn = f"host=127.0.0.1 port={server.pgwire.port} user=materialize dbname=materialize"
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(
                "CREATE MATERIALIZED VIEW big_bids AS "
                "SELECT auction_id, amount FROM bids WHERE amount > 50"
            )
    finally:
        server.stop()

    reloaded = build_definitions(DEFAULT_PROJECT, env.resource)
    graph = reloaded.resolve_asset_graph()
    node = graph.get(key("big_bids"))
    assert node.parent_keys == {key("bids")}
    assert node.kinds == {"spark", "sql", "view"}
    assert [c.name for c in node.metadata["dagster/column_schema"].columns] == [
        "auction_id",
        "amount",
    ]
    assert "dagster/code_references" not in node.metadata  # not in the project's SQL
    job = reloaded.get_repository_def().get_job("tidemark_views")
    assert key("big_bids") in job.asset_layer.selected_asset_keys
    # The old definitions are unchanged: only a reload shows it.
    assert key("big_bids") not in env.defs.resolve_asset_graph().get_all_asset_keys()
