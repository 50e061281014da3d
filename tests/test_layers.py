"""The layers contract (`[tool.importlinter]` in pyproject.toml, run by `make lint`)
holds on the tree, and it does fail when a lower layer imports an upper one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _copy_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    shutil.copytree(
        ROOT / "coordinator_lib",
        tree / "coordinator_lib",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return tree


def test_contract_kept_and_broken_by_an_upward_import(tmp_path: Path) -> None:
    tree = _copy_tree(tmp_path)
    kept = _lint(tree)
    assert kept.returncode == 0, kept.stdout + kept.stderr

    # persist/ (a low layer) importing the adapter (a high one) must be refused.
    victim = tree / "coordinator_lib" / "persist" / "blob.py"
    victim.write_text(
        "from coordinator_lib.adapter import coordinator  # noqa: F401\n" + victim.read_text()
    )
    broken = _lint(tree)
    assert broken.returncode != 0
    assert "coordinator_lib.persist is not allowed to import coordinator_lib.adapter" in (
        broken.stdout
    )
