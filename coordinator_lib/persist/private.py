"""An environment's files are private to the user that runs it.

Why: the consensus database and the Parquet batches hold every table's data
(and the catalog, roles' password verifiers, encrypted secrets); other local
users must not read them. Like PostgreSQL's postmaster, opening a data
directory sets the process umask to 077, so every file and directory created
afterwards (SQLite's database, WAL and SHM files, batch files, Spark's
output) is 0600 / 0700, and makes the data directory itself 0700 and the
files already in it 0600 (directories made by an older version).
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_UMASK = 0o077


def make_private(data_dir: Path) -> None:
    """Create `data_dir` (0700) if needed and keep everything in it private."""
    os.umask(PRIVATE_UMASK)
    data_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(data_dir, 0o700)
    for path in data_dir.iterdir():
        if path.is_file() and not path.is_symlink():
            os.chmod(path, 0o600)
        elif path.is_dir() and not path.is_symlink():
            os.chmod(path, 0o700)
