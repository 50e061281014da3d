"""Tidemark as a Dagster component, through Dagster's own `dg` CLI: the demo
project checks clean, and a new `dg` project adds Tidemark the way Dagster's
docs teach (scaffold the component, write SQL, check and list the defs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DG = Path(sys.executable).with_name("dg")


def _dg(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DG), *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_dg_check_defs_passes_on_the_demo(tmp_path: Path) -> None:
    checked = _dg(["check", "defs"], ROOT, TIDEMARK_DATA_DIR=str(tmp_path / "data"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr
    assert (tmp_path / "data").is_dir()  # the component opened the environment given


@pytest.mark.slow  # four dg commands, each loading Dagster (about 90 s)
def test_a_new_dg_project_adds_tidemark_as_a_component(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    (project / "shop" / "defs").mkdir(parents=True)
    (project / "shop" / "__init__.py").write_text("")
    (project / "shop" / "defs" / "__init__.py").write_text("")
    # What `create-dagster project` writes: the definitions are the defs folder.
    (project / "shop" / "definitions.py").write_text(
        "from pathlib import Path\n\nimport dagster as dg\n\n\n"
        "@dg.definitions\ndef defs():\n"
        "    return dg.load_from_defs_folder(project_root=Path(__file__).parent.parent)\n"
    )
    (project / "pyproject.toml").write_text(
        '[project]\nname = "shop"\nversion = "0"\n\n'
        '[tool.dg]\ndirectory_type = "project"\n\n'
        '[tool.dg.project]\nroot_module = "shop"\n'
    )
    env = {"PYTHONPATH": str(project)}
    listed = _dg(["list", "components", "--json"], project, **env)
    assert listed.returncode == 0, listed.stderr
    assert "assets.component.TidemarkProject" in listed.stdout

    scaffolded = _dg(
        ["scaffold", "defs", "assets.component.TidemarkProject", "tidemark"], project, **env
    )
    assert scaffolded.returncode == 0, scaffolded.stderr
    folder = project / "shop" / "defs" / "tidemark"
    defs_yaml = (folder / "defs.yaml").read_text()
    assert "type: assets.component.TidemarkProject" in defs_yaml
    assert (folder / "sql").is_dir()
    (folder / "sql" / "01_orders.sql").write_text(
        "CREATE TABLE orders (id bigint NOT NULL, item text NOT NULL);\n"
        "CREATE MATERIALIZED VIEW order_counts AS\n"
        "    SELECT item, count(*) AS orders FROM orders GROUP BY item;\n"
    )

    checked = _dg(["check", "defs"], project, **env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    defs = _dg(["list", "defs", "--json"], project, **env)
    assert defs.returncode == 0, defs.stderr
    listing = json.loads(defs.stdout)
    keys = {asset["asset_key"] for asset in listing["assets"]}
    assert {"materialize/public/orders", "materialize/public/order_counts"} <= keys
    sensors = {sensor["name"] for sensor in listing["sensors"]}
    assert "tidemark_timestamps" in sensors
    assert (folder / "data").is_dir()  # data_dir: data, beside the defs.yaml
