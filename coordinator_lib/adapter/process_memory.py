"""Where this process's memory is, by allocator: exported on /metrics as
`tidemark_process_memory_bytes{part=...}` so a soak (`make bench-soak`) can
tell which part grows (issue 18: RSS alone could not say whether glibc's free
lists, SQLite's page caches, Python's objects or Arrow held the growth).

- `rss`, `rss_anon`: the kernel's view (/proc/self/status VmRSS, RssAnon);
- `malloc_in_use`, `malloc_free`: glibc's `mallinfo2` (bytes in chunks in
  use, heap and mmap()ed; free bytes it keeps resident);
- `sqlite`: `sqlite3_memory_used`, mostly the connections' page caches;
- `arrow`: `pyarrow.total_allocated_bytes`;
- `python_blocks` (a count, not bytes): `sys.getallocatedblocks`, objects
  Python's allocator holds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable
from functools import cache


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@cache
def _mallinfo2() -> Callable[[], _Mallinfo2] | None:
    try:
        function = ctypes.CDLL(ctypes.util.find_library("c")).mallinfo2
    except (OSError, AttributeError, TypeError):  # not glibc 2.33+
        return None
    function.restype = _Mallinfo2
    return function


@cache
def _sqlite_memory_used() -> Callable[[], int] | None:
    import _sqlite3

    try:  # the symbol of the SQLite library the sqlite3 module uses
        function = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int64
    return function


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def process_memory() -> dict[str, int]:
    """Each part this platform can report, in bytes (python_blocks: a count)."""
    parts: dict[str, int | None] = {
        "rss": _status_bytes("VmRSS"),
        "rss_anon": _status_bytes("RssAnon"),
        "python_blocks": sys.getallocatedblocks(),
    }
    if (mallinfo2 := _mallinfo2()) is not None:
        info = mallinfo2()
        parts["malloc_in_use"] = info.uordblks + info.hblkhd
        parts["malloc_free"] = info.fordblks
    if (sqlite_memory_used := _sqlite_memory_used()) is not None:
        parts["sqlite"] = sqlite_memory_used()
    if (pyarrow := sys.modules.get("pyarrow")) is not None:
        parts["arrow"] = pyarrow.total_allocated_bytes()
    return {part: value for part, value in parts.items() if value is not None}
