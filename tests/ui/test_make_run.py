"""`make run` (scripts/run_demo.sh) end to end: on a copy of the demo
project and free ports it serves Tidemark (pgwire, HTTP) and Dagster's
webserver; the README's write steps work against it; Ctrl-C (SIGINT to the
script's process group) stops every process it started, and the data is
under the project folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
import requests

from tests.ui.ports import free_port
from tests.ui.processes import MARKER_VARIABLE, jvms, marked

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "run_demo.sh"


def _wait(
    what: str, ready: Callable[[], bool], process: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + 240
    while not ready():
        if process.poll() is not None:
            raise AssertionError(f"run_demo.sh exited before {what}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after 240 s:\n{log.read_text()[-4000:]}")
        time.sleep(0.5)


def _get_ok(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_make_run_serves_both_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    project = tmp_path / "demo"
    shutil.copytree(REPO / "demo" / "sql", project / "sql")
    (project / "dagster_home").mkdir()
    shutil.copy(REPO / "demo" / "dagster_home" / "dagster.yaml", project / "dagster_home")
    ports = {"DAGSTER_PORT": free_port(), "PGWIRE_PORT": free_port(), "HTTP_PORT": free_port()}
    marker = f"tidemark-make-run-{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIDEMARK_", "DAGSTER_"))}
    env.update({k: str(v) for k, v in ports.items()})
    env.update({"TIDEMARK_PROJECT": str(project), MARKER_VARIABLE: marker})
    log = tmp_path / "run_demo.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(SCRIPT)], cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    http = f"http://127.0.0.1:{ports['HTTP_PORT']}"
    dagster = f"http://127.0.0.1:{ports['DAGSTER_PORT']}"
    try:
        _wait("Tidemark's /api/health", lambda: _get_ok(f"{http}/api/health"), process, log)
        _wait("Dagster's /server_info", lambda: _get_ok(f"{dagster}/server_info"), process, log)
        assert requests.get(f"{http}/api/health", timeout=5).json() == {"status": "ok"}
        info = requests.get(f"{dagster}/server_info", timeout=5).json()
        assert "dagster_webserver_version" in info

        # The README's steps (psql and curl), with psycopg and requests.
        dsn = f"host=127.0.0.1 port={ports['PGWIRE_PORT']} user=materialize dbname=materialize"
        with psycopg.connect(dsn, autocommit=True, connect_timeout=30) as conn:
            conn.execute("INSERT INTO watchlist VALUES (1, 'Best Pizza in Town', 50)")
            assert conn.execute("SELECT user_id, item FROM watchlist").fetchall() == [
                (1, "Best Pizza in Town")
            ]
        posted = requests.post(
            f"{http}/api/webhook/materialize/public/item_views",
            data=b"Best Pizza in Town",
            timeout=30,
        )
        assert posted.status_code == 200
        started = marked(marker)
        assert len(started) >= 3  # the script, tidemark serve, dagster dev (and its children)
        # The demo's data is small: its views and its index step in-process.
        assert jvms(marker) == [], "tidemark serve started a JVM"
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the terminal
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired as error:
            os.killpg(process.pid, signal.SIGKILL)
            for pid in marked(marker):
                os.kill(pid, signal.SIGKILL)
            tail = log.read_text()[-4000:]
            raise AssertionError(f"run_demo.sh did not stop on SIGINT:\n{tail}") from error

    deadline = time.monotonic() + 10  # reaped by init a moment after the script exits
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = marked(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left running after Ctrl-C: {left}"
    assert not any(_listening(port) for port in ports.values())
    assert "stopping tidemark serve and dagster dev" in log.read_text()

    # The environment and Dagster's instance live in the project folder.
    data = project / "data"
    # consensus.db holds the shards' states (small writes inline in them).
    assert any(data.rglob("consensus.db")), sorted(p.name for p in data.rglob("*"))[:20]
    assert any(p.is_file() for p in (project / "dagster_home").rglob("*.db"))
