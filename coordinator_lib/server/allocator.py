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

glibc also moves its thresholds by itself: each freed mmap()ed block raises
the size from which blocks are mmap()ed to that block's size (up to 32 MiB)
and the free memory it keeps at the top of the heap to twice that, so after
one large transient buffer, blocks of up to 32 MiB come from the heap and
stay resident where they fragment it. In the in-process soak this
free-but-resident memory grew from 3 to 12 MB in 40 minutes (near 2 MB with
the thresholds fixed, in 10 minutes). Fixing both at glibc's initial
128 KiB stops that: a large block is unmapped when freed and free memory
over 128 KiB at the heap's top is returned.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
GLIBC_ARENAS = 2
# Setting a threshold turns off glibc's dynamic adjustment of both.
GLIBC_THRESHOLD_BYTES = 128 * 1024


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
    for parameter in (_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD):
        if mallopt(parameter, GLIBC_THRESHOLD_BYTES) != 1:
            log.warning("could not fix glibc malloc threshold %d", parameter)
