"""Catalog changes are typed operations applied in one compare-and-set
(`adapter/catalog_ops.py`): a DDL statement with several effects lands whole
or not at all, even when the server dies right after its commit; and no
adapter module reaches into another's private names to change the catalog."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]


class CrashServer:
    """tests/adapter/catalog_crash_server.py in its own process."""

    def __init__(self, data_dir: Path, arm: Path, log: Path) -> None:
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.adapter.catalog_crash_server", str(data_dir), str(arm)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"the crash server did not start; see {log}")
        self.dsn = (
            f"host=127.0.0.1 port={int(line)} user=materialize dbname=materialize"
            " connect_timeout=10"
        )

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn, autocommit=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self.log.close()


@pytest.fixture
def paths(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    yield tmp_path / "env", tmp_path / "arm", tmp_path / "server.log"


def names(conn: psycopg.Connection[Any], show: str) -> set[str]:
    return {row[0] for row in conn.execute(show).fetchall()}


def test_drop_cluster_cascade_is_one_commit_a_crash_cannot_split(
    paths: tuple[Path, Path, Path],
) -> None:
    """DROP CLUSTER ... CASCADE drops the materialized views on the cluster,
    the view on them and the cluster. The server is SIGKILLed right after
    the statement's first catalog commit lands: after a restart either all
    of it is gone or none of it (here all: the one commit landed). When the
    items and the cluster were two commits, the restart found the views gone
    and the cluster still there."""
    data_dir, arm, log = paths
    server = CrashServer(data_dir, arm, log)
    try:
        with server.connect() as conn:
            conn.execute("CREATE CLUSTER c1 (REPLICATION FACTOR 1)")
            conn.execute("CREATE TABLE t (a int)")
            conn.execute("INSERT INTO t VALUES (1), (2)")
            conn.execute(
                "CREATE MATERIALIZED VIEW total IN CLUSTER c1 AS SELECT sum(a) AS s FROM t"
            )
            conn.execute("CREATE MATERIALIZED VIEW copy IN CLUSTER c1 AS SELECT a FROM t")
            conn.execute("CREATE VIEW doubled AS SELECT s * 2 AS d FROM total")
            assert conn.execute("SELECT d FROM doubled").fetchall() == [(6,)]
            arm.touch()
            with pytest.raises(psycopg.OperationalError):  # the server dies under it
                conn.execute("DROP CLUSTER c1 CASCADE")
        assert server.proc.wait(30) == -9, "the server was not killed at the catalog commit"
    finally:
        server.stop()
    arm.unlink()
    server = CrashServer(data_dir, arm, log)
    try:
        with server.connect() as conn:
            clusters = names(conn, "SHOW CLUSTERS")
            views = names(conn, "SHOW MATERIALIZED VIEWS") | names(conn, "SHOW VIEWS")
            assert ("c1" in clusters, views) in [
                (True, {"total", "copy", "doubled"}),
                (False, set()),
            ], "DROP CLUSTER landed in part"
            assert "c1" not in clusters  # the one commit landed before the kill
            assert conn.execute("SELECT a FROM t ORDER BY a").fetchall() == [(1,), (2,)]
    finally:
        server.stop()


def _private_imports(path: Path) -> list[str]:
    """`from coordinator_lib.x import _y` and `module._y` where `module` is
    a coordinator_lib module imported by name."""
    tree = ast.parse(path.read_text())
    modules: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("coordinator_lib"):
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append(f"{path.name}:{node.lineno} imports {node.module}.{alias.name}")
                else:
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{path.name}:{node.lineno} uses {node.value.id}.{node.attr}")
    return found


def test_no_module_uses_anothers_private_names() -> None:
    """Every module of the engine and the Dagster code location uses the
    others' public names only (DDL used to call `sequence._commit`,
    `_drop_ids`, `_doomed`; a plan module borrowed another's `_column_def`)."""
    files = [
        *sorted((ROOT / "coordinator_lib").rglob("*.py")),
        *(p for d in ("assets", "resources", "sensors") for p in sorted((ROOT / d).glob("*.py"))),
        ROOT / "definitions.py",
    ]
    found = [hit for path in files for hit in _private_imports(path)]
    assert found == []


def test_only_catalog_transact_stores_the_catalog() -> None:
    """The catalog record is stored only by adapter/catalog_ops.py."""
    writers = []
    for path in sorted((ROOT / "coordinator_lib").rglob("*.py")):
        text = path.read_text()
        if "catalog.commit(" in text or ("update_record(" in text and "CATALOG_KEY" in text):
            writers.append(path.relative_to(ROOT).as_posix())
    assert writers == ["coordinator_lib/adapter/catalog_ops.py"]
