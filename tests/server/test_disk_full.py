"""Disk full (issue 18): a write that finds no space left answers SQLSTATE
53100 disk_full with a message, the session stays usable, nothing
acknowledged is lost, and once space is freed writes succeed again without
restarting the server. Before, the connection was dropped ("server closed
the connection unexpectedly"). A webhook request answers 507 meanwhile.

The disk is a small tmpfs mounted for the test (root can mount one); where
mounting is not allowed, the same failure is injected: Parquet writes raise
OSError(ENOSPC) while the "disk" is full (SQLite's own SQLITE_FULL is then
not exercised)."""

from __future__ import annotations

import errno
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from psycopg import errors

from coordinator_lib.persist import batch as batch_io
from coordinator_lib.persist.shard import INLINE_BATCH_BYTES
from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config


class SmallDisk:
    """A directory on a small filesystem that can be filled and freed."""

    def __init__(self, path: Path, fill: Callable[[], None], free: Callable[[], None]) -> None:
        self.path = path
        self.fill = fill
        self.free = free


def _tmpfs(path: Path) -> SmallDisk | None:
    path.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8M", "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        return None
    filler = path / "filler"

    def fill() -> None:
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as error:
            assert error.errno == errno.ENOSPC
        finally:
            os.close(fd)

    return SmallDisk(path, fill, lambda: filler.unlink())


@pytest.fixture
def small_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SmallDisk]:
    path = Path("/tmp") / f"tidemark-disk-{uuid.uuid4().hex[:8]}"
    disk = _tmpfs(path)
    if disk is not None:
        try:
            yield disk
        finally:
            subprocess.run(["umount", "-l", str(path)], check=False)
            path.rmdir()
        return
    path.rmdir()
    full = False
    real_write = batch_io.pq.write_table

    def write_table(*args: Any, **kwargs: Any) -> None:
        if full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(*args, **kwargs)

    def set_full(value: bool) -> None:
        nonlocal full
        full = value

    monkeypatch.setattr(batch_io.pq, "write_table", write_table)
    yield SmallDisk(tmp_path / "disk", lambda: set_full(True), lambda: set_full(False))


def _start(config_dir: Path, **overrides: Any) -> Environment:
    env = Environment(fast_config(config_dir, **overrides), pgwire_port=0, http_port=0)
    env.start()
    return env


def _dsn(env: Environment) -> str:
    return f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize"


LARGE = 2 * INLINE_BATCH_BYTES  # a refused write: more than an inline batch holds


@pytest.mark.parametrize("where", ["blob", "data_dir"])
def test_disk_full_answers_53100_and_recovers(
    small_disk: SmallDisk, tmp_path: Path, where: str
) -> None:
    """`blob`: the batches' filesystem fills (Parquet writes fail); `data_dir`:
    everything, consensus included, lives on the full disk. The refused
    writes are larger than a batch kept inline in the shard's state (INLINE_BATCH_BYTES),
    so they need the blob store in both cases."""
    if where == "blob":
        env = _start(tmp_path / "env", blob_root=str(small_disk.path / "blob"))
    else:
        env = _start(small_disk.path / "env")
    try:
        with psycopg.connect(_dsn(env), autocommit=True) as conn:
            conn.execute("CREATE TABLE t (id int, payload text)")
            conn.execute("CREATE SOURCE wh FROM WEBHOOK BODY FORMAT TEXT")
            conn.execute("INSERT INTO t VALUES (1, 'before')")
            acknowledged = {1}
            webhook = f"http://127.0.0.1:{env.http.port}/api/webhook/materialize/public/wh"
            small_disk.fill()
            refused = requests.post(webhook, data="x" * LARGE, timeout=30)
            assert (refused.status_code, refused.text) == (
                507,
                "insufficient storage: the disk is full",
            )
            for id in (2, 3):
                with pytest.raises(errors.DiskFull) as full:
                    conn.execute("INSERT INTO t VALUES (%s, %s)", (id, "x" * LARGE))
                assert full.value.diag.sqlstate == "53100"
                assert "disk full" in str(full.value)
                # The same session answers the next statement.
                assert conn.execute("SELECT 1").fetchone() == (1,)
            small_disk.free()
            for id in (4, 5):  # no restart: the same server and session write again
                conn.execute("INSERT INTO t VALUES (%s, 'after')", (id,))
                acknowledged.add(id)
            rows = conn.execute("SELECT id FROM t ORDER BY id").fetchall()
            assert {r[0] for r in rows} == acknowledged
            assert requests.post(webhook, data="after", timeout=30).status_code == 200
            assert conn.execute("SELECT body FROM wh").fetchall() == [("after",)]
        with psycopg.connect(_dsn(env), autocommit=True) as other:  # new sessions too
            other.execute("INSERT INTO t VALUES (6, 'new session')")
            assert other.execute("SELECT count(*) FROM t").fetchone() == (len(acknowledged) + 1,)
    finally:
        env.stop()
