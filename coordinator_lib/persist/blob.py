"""Blob storage: immutable batch directories under a root folder.

A batch is a directory `<root>/<shard_id>/<batch_key>/` holding one or more
Parquet files. Files are written and fsynced before any state names them, so
a crash mid-write leaves only an orphan that garbage collection removes.
Readers ignore names starting with `.` or `_` (Spark's `_SUCCESS`, `.crc`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


class BlobStore:
    """A local (or mounted shared) directory of shard batch directories."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def batch_path(self, shard_id: str, batch_key: str) -> Path:
        return self.root / shard_id / batch_key

    def list_batches(self, shard_id: str) -> list[str]:
        """Every batch directory of a shard, complete or not."""
        shard_dir = self.root / shard_id
        if not shard_dir.exists():
            return []
        return sorted(p.name for p in shard_dir.iterdir() if p.is_dir())

    def batch_mtime_ms(self, shard_id: str, batch_key: str) -> int:
        return int(self.batch_path(shard_id, batch_key).stat().st_mtime * 1000)

    def batch_files(self, shard_id: str, batch_key: str) -> list[Path]:
        """The Parquet files of a batch. Raises FileNotFoundError if it is gone
        (deleted by compaction after the reader fetched its state)."""
        path = self.batch_path(shard_id, batch_key)
        files = sorted(
            p
            for p in path.iterdir()
            if p.is_file() and not p.name.startswith((".", "_")) and p.suffix == ".parquet"
        )
        return files

    def delete_batch(self, shard_id: str, batch_key: str) -> None:
        shutil.rmtree(self.batch_path(shard_id, batch_key), ignore_errors=True)

    def delete_shard(self, shard_id: str) -> None:
        shutil.rmtree(self.root / shard_id, ignore_errors=True)


def fsync_dir(path: Path) -> None:
    """Make a directory entry (a created or renamed file) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
