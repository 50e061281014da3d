"""The Dagster UI, as served by `dagster dev -f definitions.py`, opened in
headless Chromium: the demo's assets are in the global lineage graph, and an
asset's page shows its latest materialization's since and upper. Screenshots
of both are kept in tests/artifacts/ (gitignored)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from assets.metadata import frontier_ms
from tests.ui.browser import Browser, chromium_path, free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"
BIN = Path(sys.executable).parent
DEMO_ASSETS = [
    "auction", "organizations", "users", "accounts", "auctions", "bids", "item_views",
    "watchlist", "auction_bids", "item_stats", "watched_items", "item_interest",
    "auctions_per_item", "item_stats_by_item",
]  # fmt: skip
MATERIALIZED = "materialize/public/auctions,materialize/public/bids,materialize/public/auction_bids"
SHOW_METADATA = """
for (const e of document.querySelectorAll('td')) {
  if (e.innerText && e.innerText.trim() === 'since') { e.scrollIntoView({block: 'start'}); break; }
}
"""
ONBOARDING = "Join the Dagster community"


def _dismiss_onboarding(browser: Browser) -> None:
    """Dagster's first visit asks to join its community: skip it (it shows
    up a moment after the page)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if ONBOARDING in browser.text():
            browser.click_button("Skip")
            deadline = time.monotonic() + 1  # gone, and stays gone
        time.sleep(0.25)
    assert ONBOARDING not in browser.text()


@pytest.fixture
def dagster_dev(tmp_path: Path) -> Iterator[str]:
    """`dagster dev` on the demo project with its own instance and data; its URL."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "demo" / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(home), "TIDEMARK_DATA_DIR": str(tmp_path / "data")}
    # One materialization to show: sources and a view, no Spark needed.
    subprocess.run(
        [str(BIN / "dagster"), "asset", "materialize", "-f", "definitions.py", "--select",
         MATERIALIZED],
        cwd=REPO, env=env, check=True, capture_output=True, timeout=180,
    )  # fmt: skip
    port = free_port()
    log = (tmp_path / "dagster_dev.log").open("w")
    process = subprocess.Popen(
        ["env", "--default-signal=INT", str(BIN / "dagster"), "dev", "-f", "definitions.py",
         "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/server_info", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise AssertionError("dagster dev did not start: see " + str(log.name))
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.close()


def _latest_upper(home: Path, key: dg.AssetKey) -> int:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        event = instance.get_latest_materialization_event(key)
        assert event is not None and event.asset_materialization is not None
        value = frontier_ms(event.asset_materialization.metadata["upper"].value)
        assert value is not None
        return value


def test_ui_shows_demo_graph_and_frontier_metadata(dagster_dev: str, tmp_path: Path) -> None:
    executable = chromium_path()
    assert executable is not None, "no Chromium: `make setup` installs it"
    upper = _latest_upper(tmp_path / "dagster_home", dg.AssetKey(["materialize", "public", "bids"]))
    browser = Browser(executable, tmp_path / "chromium")
    try:
        browser.open(f"{dagster_dev}/asset-groups")
        graph = browser.wait_for_text(["Global asset lineage", *DEMO_ASSETS])
        assert "Materialize all" in graph
        _dismiss_onboarding(browser)
        browser.screenshot(ARTIFACTS / "dagster_asset_graph.png")

        browser.open(f"{dagster_dev}/assets/materialize/public/bids")
        page = browser.wait_for_text(["since", "upper", str(upper), "rows_inserted", "Spark"])
        assert "Source" in page and "SQL" in page  # kinds
        _dismiss_onboarding(browser)
        browser.evaluate(SHOW_METADATA)
        time.sleep(0.5)
        browser.screenshot(ARTIFACTS / "dagster_materialization_metadata.png")
    finally:
        browser.close()
    for name in ("dagster_asset_graph.png", "dagster_materialization_metadata.png"):
        assert (ARTIFACTS / name).stat().st_size > 10_000
