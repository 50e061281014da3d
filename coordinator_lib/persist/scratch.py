"""Scratch directories under the blob root, removed even if their owner dies.

Why under the blob root: Spark writes there already (batches), so Spark's
executors and this process see the same files whether Spark runs
in-process, on a cluster, or over Spark Connect; the system temporary
directory is only this host's. A scratch directory is
`<blob root>/_scratch/<host>.<pid>.<random>/` (readers and GC skip names
starting with `_`), removed when its `scratch_dir` block ends. A process
killed inside the block leaves it behind, so each new one first removes
this host's directories whose owner is gone: the owner holds an exclusive
`flock` on the file beside it, `<dir>.lock`, for as long as the directory
lives, and the kernel drops the lock when the process dies (a lock, not a
pid, which is reused). The lock file is locked under a hidden name before
it is renamed to its own, so a sweeper never sees it free while its owner
lives (a hidden one is swept once it is a minute old). Only this host's
directories are swept: another host's lock on a shared mount may not be
visible here.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from coordinator_lib.persist.blob import BlobStore

SCRATCH = "_scratch"
# Seconds after which a hidden lock file (`.<dir>.locking`) whose lock is
# free is a leftover: its owner died between creating and renaming it.
_LOCKING_AGE_S = 60.0


def _host() -> str:
    return socket.gethostname().replace(".", "-") or "host"


@contextlib.contextmanager
def scratch_dir(blob: BlobStore) -> Iterator[Path]:
    """A new empty directory under `blob`'s root for the block's files,
    removed with them when the block ends (the leftovers of dead owners on
    this host are removed first)."""
    parent = blob.root / SCRATCH
    parent.mkdir(exist_ok=True)
    sweep_dead(blob)
    path = parent / f"{_host()}.{os.getpid()}.{secrets.token_hex(8)}"
    locking = path.with_name(f".{path.name}.locking")
    fd = os.open(locking, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        lock = path.with_name(path.name + ".lock")
        os.rename(locking, lock)
        try:
            path.mkdir()
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
            lock.unlink(missing_ok=True)
    finally:
        locking.unlink(missing_ok=True)
        os.close(fd)


def sweep_dead(blob: BlobStore) -> list[Path]:
    """Remove this host's scratch directories whose owner is gone (their
    lock is free); returns them."""
    parent = blob.root / SCRATCH
    if not parent.is_dir():
        return []
    removed = []
    now = time.time()
    for lock in parent.iterdir():
        hidden = lock.name.startswith(".")
        name = lock.name.removeprefix(".")
        if name.split(".", 1)[0] != _host() or lock.suffix != (".locking" if hidden else ".lock"):
            continue
        if hidden and now - _mtime(lock) < _LOCKING_AGE_S:
            continue
        if _owner_gone(lock):
            path = parent / name.rsplit(".", 1)[0]
            shutil.rmtree(path, ignore_errors=True)
            lock.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()


def _owner_gone(lock: Path) -> bool:
    """Whether no process holds `lock` (False if it is gone already)."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


__all__ = ["SCRATCH", "scratch_dir", "sweep_dead"]
