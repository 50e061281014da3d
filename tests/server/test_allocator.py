"""The server's Arrow memory goes to the system allocator (issue 18: pyarrow's
bundled mimalloc kept the pages of ended connection threads, and `tidemark
serve` grew by hundreds of MB an hour; bench/soak.py measures it)."""

from __future__ import annotations

import pyarrow as pa

from coordinator_lib.server.allocator import use_server_allocators


def test_server_arrow_allocations_use_the_system_allocator() -> None:
    before = pa.default_memory_pool()
    try:
        use_server_allocators()
        assert pa.default_memory_pool().backend_name == "system"
        table = pa.table({"x": list(range(1000))})
        assert pa.system_memory_pool().bytes_allocated() >= table.nbytes
    finally:
        pa.set_memory_pool(before)
