"""`tidemark serve`'s Arrow memory goes to the system allocator (issue 18:
pyarrow's bundled mimalloc kept the pages of ended connection threads, and
the server grew by hundreds of MB an hour; bench/soak.py measures it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
from coordinator_lib.server.allocator import use_server_allocators
use_server_allocators()
import pyarrow as pa
import pyarrow.parquet as pq
import os, sys
path = os.path.join(sys.argv[1], "part.parquet")
pq.write_table(pa.table({"x": list(range(1000))}), path)
table = pq.read_table(path)  # C++ (Parquet) allocations, from a path as persist reads its parts
print(pa.default_memory_pool().backend_name, pa.mimalloc_memory_pool().bytes_allocated())
"""


def test_server_arrow_allocations_use_the_system_allocator(tmp_path: Path) -> None:
    """The probe reads Parquet from a path, as persist does: pyarrow 26 reading
    through a Python file object (BytesIO) may abort at interpreter exit when
    its thread pool is torn down (apache/arrow#50482), which is not ours."""
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert probe.stdout.split() == ["system", "0"], probe.stderr


FRAGMENT = """
import ctypes, sys
if sys.argv[1] == "server":
    from coordinator_lib.server.allocator import use_server_allocators
    use_server_allocators()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def rss_mb():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmRSS")) / 1024
def touched(size):
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    return block
libc.free(touched(8 << 20))  # one large transient buffer, as a big Arrow batch is
blocks = [touched(1 << 20) for _ in range(64)]
before = rss_mb()
for block in blocks[::2]:  # each freed block between two that live on
    libc.free(block)
print(round(before - rss_mb()))
"""


def test_freed_large_blocks_leave_the_server_process() -> None:
    """32 of 64 blocks of 1 MiB freed, each between two that live on: after
    one large transient buffer glibc's default (dynamic) thresholds serve
    such blocks from the heap, where freed ones stay resident; the server's
    fixed thresholds mmap them, so freeing them gives their memory back."""
    released = {}
    for mode in ("plain", "server"):
        probe = subprocess.run(
            [sys.executable, "-c", FRAGMENT, mode], capture_output=True, text=True, check=True
        )
        released[mode] = int(probe.stdout)
    assert released["plain"] < 8, released  # the probe does show glibc keeping them
    assert released["server"] >= 28, released
