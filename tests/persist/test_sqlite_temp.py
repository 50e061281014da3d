"""SQLite's temporary structures stay in memory on the server's connections
(persist/sqlite_temp.py): a compare-and-set or an arrangement apply must not
open a temporary pager, whose 85 KiB first allocation churned glibc's heap
about 180 times a second in issue 18's soak and left it fragmented."""

from __future__ import annotations

import _sqlite3
import ctypes
from collections.abc import Callable
from pathlib import Path

from coordinator_lib.persist.arrangement_store import ArrangementStore
from coordinator_lib.persist.consensus import KeyChange, VersionedData
from coordinator_lib.persist.sqlite_consensus import SqliteConsensus

_status64 = ctypes.CDLL(_sqlite3.__file__).sqlite3_status64
_status64.argtypes = [
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_int64),
    ctypes.POINTER(ctypes.c_int64),
    ctypes.c_int,
]
_SQLITE_STATUS_MALLOC_SIZE = 5  # the largest single allocation requested

# Pages and statements allocate a few KiB at a time; a temporary pager's
# first cache block is 85 KiB and a statement journal's chunk 64 KiB.
LARGEST_BYTES = 16 * 1024


def largest_allocation(action: Callable[[int], object], times: int) -> int:
    """The largest single block SQLite allocated during `times` calls of `action(i)`."""
    current, largest = ctypes.c_int64(), ctypes.c_int64()
    _status64(_SQLITE_STATUS_MALLOC_SIZE, ctypes.byref(current), ctypes.byref(largest), 1)
    for i in range(times):
        action(i)
    _status64(_SQLITE_STATUS_MALLOC_SIZE, ctypes.byref(current), ctypes.byref(largest), 0)
    return largest.value


def test_a_compare_and_set_allocates_no_temporary_pager(tmp_path: Path) -> None:
    consensus = SqliteConsensus(tmp_path / "consensus.db")
    keys = [f"shard/{n}" for n in range(3)]
    for key in keys:
        assert consensus.compare_and_set(key, None, VersionedData(1, b"x" * 2000))

    def advance(i: int) -> None:
        changes = [KeyChange(key, i + 1, VersionedData(i + 2, b"y" * 2000)) for key in keys]
        assert consensus.compare_and_set_all(changes)

    try:
        largest = largest_allocation(advance, 20)
    finally:
        consensus.close()
    assert largest < LARGEST_BYTES, f"a compare-and-set allocated {largest} bytes at once"


def test_an_apply_allocates_no_temporary_pager(tmp_path: Path) -> None:
    state = ArrangementStore(tmp_path / "a.db").state("df")
    assert state.apply({"op": [((k,), (k, "v"), 1) for k in range(200)]}, None, 1)

    def step(i: int) -> None:
        updates = [((k,), (k, "v"), 1 if i % 2 else -1) for k in range(i, i + 20)]
        assert state.apply({"op": updates}, i + 1, i + 2)

    largest = largest_allocation(step, 20)
    assert largest < LARGEST_BYTES, f"an apply allocated {largest} bytes at once"
