"""The Dagster code location loads, both in-process and the way Dagster's CLI loads it."""

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_defs_has_coordinator_resource_with_defaults() -> None:
    """Runs and sensors reach coordinator_lib only through this resource."""
    from definitions import defs
    from resources import CoordinatorResource

    coordinator = defs.resources["coordinator"]
    assert isinstance(coordinator, CoordinatorResource)
    assert coordinator.spark_master == "local[2]"
    assert coordinator.data_dir == "data/dagster"


def test_dagster_definitions_validate(tmp_path: Path) -> None:
    """`dagster definitions validate` is what a deployment runs before serving the location."""
    dagster_cli = Path(sys.executable).parent / "dagster"
    # A throwaway DAGSTER_HOME keeps the CLI's temporary instance out of the repo.
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
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
