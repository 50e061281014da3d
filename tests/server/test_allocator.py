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
