"""SQLite's temporary structures in memory, for the server's long-lived connections.

With SQLite's default `temp_store` (a file), every statement that needs a
temporary b-tree opens a temporary pager, and its page cache starts with one
bulk allocation of 20 pages (85 KiB with 4 KiB pages); a statement journal
(for an INSERT ... ON CONFLICT inside a transaction) buffers in 64 KiB
chunks. Consensus's compare-and-set materializes its `change` CTE that way
twice, so in issue 18's soak (`make bench-soak`, in-process) SQLite
allocated and freed two 85 KiB blocks about 180 times a second and the
arrangement store's applies 64 KiB chunks about 40 times a second (memray,
native traces). Blocks that size come from glibc's heap (below its 128 KiB
mmap threshold, server/allocator.py), where each one freed around a
longer-lived small block leaves a hole: glibc's free bytes grew with the run.
In memory, the same structures are a few small pages and 1 KiB chunks.
They hold what one statement's temporary tables need: consensus's and the
arrangement store's are a handful of rows (their sorts use indexes).
"""

from __future__ import annotations

import sqlite3


def keep_temp_in_memory(conn: sqlite3.Connection) -> None:
    """Temporary tables, indexes and statement journals of `conn` in memory."""
    conn.execute("PRAGMA temp_store=MEMORY")
