"""Native allocators for a long-running server process.

`tidemark serve` answers every pgwire connection on its own short-lived
thread and moves Arrow batches on them (persist reads and writes, COPY,
Spark results). pyarrow's default pool, its bundled mimalloc, keeps the
pages of threads that ended: in issue 18's soak (`make bench-soak`) its
region grew by about 10 MB a minute while `pyarrow.total_allocated_bytes()`
stayed 0 (nothing alive). glibc likewise gives each new thread an arena
(up to 8 per core) whose freed chunks stay resident. So the server sends
Arrow to the system allocator and caps glibc at two arenas. Arrow's C++
default pool (Parquet, IPC, compute) is chosen once, from
ARROW_DEFAULT_MEMORY_POOL, when pyarrow first allocates: so this runs
before anything imports pyarrow (`pyarrow.set_memory_pool` only moves
pyarrow's Python-level allocations).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

_M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)
GLIBC_ARENAS = 2


def use_server_allocators() -> None:
    """Call once at server start, before pyarrow is imported (affects the whole process)."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    import pyarrow as pa

    if pa.default_memory_pool().backend_name != os.environ["ARROW_DEFAULT_MEMORY_POOL"]:
        log.warning("pyarrow was loaded first: Arrow keeps its default allocator")
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # not glibc: nothing to cap
        return
    if mallopt(_M_ARENA_MAX, GLIBC_ARENAS) != 1:
        log.warning("could not cap glibc malloc arenas at %d", GLIBC_ARENAS)
