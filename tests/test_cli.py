"""The `tidemark` console script as users run it: installed entry point, real exit codes."""

import subprocess
import sys
from pathlib import Path

TIDEMARK = Path(sys.executable).parent / "tidemark"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TIDEMARK), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_version_exits_zero() -> None:
    result = _run("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("tidemark ")


def test_unknown_subcommand_is_usage_error() -> None:
    result = _run("no-such-command")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
    assert result.stdout == ""


def test_missing_subcommand_is_usage_error() -> None:
    result = _run()
    assert result.returncode == 2
    assert "required" in result.stderr
