"""A newcomer's path through the Dagster UI of a fresh `make run`, driven
by Playwright in Debian's Chromium: open the lineage, press "Materialize
all", see every run green, open a view's page and read its frontiers as
dates. Screenshots of the lineage and the view's page are kept in
tests/artifacts/ (the README's come from there)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
import requests
from playwright.sync_api import Page, sync_playwright

from assets.metadata import frontier_ms
from tests.ui.ports import free_port
from tests.ui.processes import MARKER_VARIABLE, jvms

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "run_demo.sh"
ARTIFACTS = REPO / "tests" / "artifacts"
DEMO_ASSETS = [
    "auction", "organizations", "users", "accounts", "auctions", "bids", "item_views",
    "watchlist", "auction_bids", "item_stats", "watched_items", "item_interest",
    "auctions_per_item", "item_stats_by_item",
]  # fmt: skip
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ONBOARDING = "Join the Dagster community"


@dataclass
class Demo:
    dagster: str
    project: Path
    marker: str  # in the environment of every process the script started


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    """`make run`'s script on a copy of demo/ with free ports."""
    project = tmp_path / "demo"
    shutil.copytree(REPO / "demo" / "sql", project / "sql")
    (project / "dagster_home").mkdir()
    shutil.copy(REPO / "demo" / "dagster_home" / "dagster.yaml", project / "dagster_home")
    ports = {"DAGSTER_PORT": free_port(), "PGWIRE_PORT": free_port(), "HTTP_PORT": free_port()}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIDEMARK_", "DAGSTER_"))}
    env.update({k: str(v) for k, v in ports.items()})
    env["TIDEMARK_PROJECT"] = str(project)
    marker = f"tidemark-dagster-ui-{uuid.uuid4().hex}"
    env[MARKER_VARIABLE] = marker
    log = (tmp_path / "run_demo.log").open("wb")
    process = subprocess.Popen(
        [str(SCRIPT)], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    dagster = f"http://127.0.0.1:{ports['DAGSTER_PORT']}"
    http = f"http://127.0.0.1:{ports['HTTP_PORT']}"
    try:
        for url in (f"{http}/api/health", f"{dagster}/server_info"):
            deadline = time.monotonic() + 180
            while True:
                try:
                    if requests.get(url, timeout=2).status_code == 200:
                        break
                except requests.RequestException:
                    pass
                assert process.poll() is None, f"run_demo.sh exited: see {log.name}"
                assert time.monotonic() < deadline, f"{url} did not answer: see {log.name}"
                time.sleep(0.5)
        yield Demo(dagster, project, marker)
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.close()


def _skip_onboarding(page: Page) -> None:
    """Dagster's first visit asks to join its community: skip it."""
    skip = page.get_by_role("button", name="Skip")
    try:
        skip.wait_for(timeout=5_000)
    except Exception:
        return
    skip.click()
    page.get_by_text(ONBOARDING).wait_for(state="hidden")


def _runs(demo: Demo) -> list[dg.DagsterRun]:
    with dg.DagsterInstance.from_config(str(demo.project / "dagster_home")) as instance:
        return list(instance.get_runs())


def _materialize_all_run(demo: Demo, before: set[str]) -> dg.DagsterRun | None:
    for run in _runs(demo):
        if run.run_id not in before and len(run.asset_selection or ()) == len(DEMO_ASSETS):
            return run
    return None


def test_newcomer_materializes_all_and_reads_frontiers_as_dates(demo: Demo) -> None:
    executable = shutil.which("chromium")
    assert executable is not None, "no Chromium: `make setup` installs Debian's"
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.set_default_timeout(120_000)

        # The lineage: every object of the demo, wired from the SQL.
        page.goto(f"{demo.dagster}/asset-groups")
        page.get_by_text("Global asset lineage").wait_for()
        for name in DEMO_ASSETS:
            page.get_by_text(name, exact=True).first.wait_for()
        _skip_onboarding(page)
        page.screenshot(path=ARTIFACTS / "dagster_lineage.png")

        # Materialize all: one run of every asset, green.
        before = {run.run_id for run in _runs(demo)}
        page.get_by_role("button", name="Materialize all").click()
        deadline = time.monotonic() + 900
        run = None
        while time.monotonic() < deadline:
            run = _materialize_all_run(demo, before)
            if run is not None and run.is_finished:
                break
            time.sleep(2)
        assert run is not None, "Materialize all launched no run"
        assert run.status is dg.DagsterRunStatus.SUCCESS, run.status
        page.goto(f"{demo.dagster}/runs")
        page.get_by_text("Success").first.wait_for()
        failed = [r.run_id for r in _runs(demo) if r.status is dg.DagsterRunStatus.FAILURE]
        assert failed == []  # no run failed, the sensors' and schedules' neither
        assert page.get_by_text("Failure", exact=True).count() == 0
        # The demo's data is small: the run and the server step in-process.
        assert jvms(demo.marker) == [], "Materialize all started a JVM"

        # A view's page: its frontiers read as dates.
        with dg.DagsterInstance.from_config(str(demo.project / "dagster_home")) as instance:
            key = dg.AssetKey(["materialize", "public", "item_stats"])
            event = instance.get_latest_materialization_event(key)
        assert event is not None and event.asset_materialization is not None
        upper = frontier_ms(event.asset_materialization.metadata["upper"].value)
        assert upper is not None
        shown = datetime.fromtimestamp(upper / 1000, UTC)
        page.goto(f"{demo.dagster}/assets/materialize/public/item_stats")
        _skip_onboarding(page)
        # Dagster shows timestamp metadata in the browser's zone (UTC here),
        # to the second (the event times beside it are to the minute). The
        # server may have stepped the view again since: any such date counts.
        as_date = re.compile(rf"^{shown:%b} {shown.day}, \d{{1,2}}:\d\d:\d\d [AP]M UTC$")
        date = page.get_by_text(as_date).first
        date.wait_for()
        date.scroll_into_view_if_needed()
        page.screenshot(path=ARTIFACTS / "dagster_view_page.png", full_page=True)
        browser.close()
    for name in ("dagster_lineage.png", "dagster_view_page.png"):
        assert (ARTIFACTS / name).stat().st_size > 10_000
