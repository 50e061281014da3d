"""Exports (sinks): a collection's changes copied out as Parquet files.

An export starts at an `as_of` chosen while a CreateExportToken holds back
compaction of the collection it reads; it writes the snapshot at as_of, then
one file per step with the updates in [write_frontier, upper). File names
carry their time range, so a step repeated after a crash overwrites rather
than duplicates.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator_lib.persist import batch as batch_io
from coordinator_lib.persist.shard import Shard
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import DIFF_COLUMN, TIME_COLUMN, column_pylist
from coordinator_lib.repr.update import Update

if TYPE_CHECKING:
    from coordinator_lib.storage.read_hold import ReadHold


@dataclass
class CreateExportToken:
    """Proof that compaction of `from_id` is held back (at `hold.time`) until
    the export `id` is created; give it back with cancel_prepare_export."""

    id: GlobalId
    from_id: GlobalId
    hold: ReadHold


@dataclass(frozen=True)
class ExportDescription:
    from_id: GlobalId
    path: str

    def to_json(self) -> dict[str, Any]:
        return {"from_id": str(self.from_id), "path": self.path}

    @staticmethod
    def from_json(data: dict[str, Any]) -> ExportDescription:
        return ExportDescription(GlobalId.parse(data["from_id"]), data["path"])


@dataclass
class ExportState:
    id: GlobalId
    description: ExportDescription
    as_of: int
    write_frontier: Frontier  # everything before it has been exported
    hold: ReadHold
    files: list[str] = field(default_factory=list)


def export_step(state: ExportState, shard: Shard) -> bool:
    """Write what is new since the export's write frontier. Returns True if
    the write frontier advanced."""
    upper = shard.upper()
    frontier = state.write_frontier
    if upper.time is not None and upper.time <= (frontier.time or 0):
        return False
    if frontier.is_empty:
        return False
    directory = Path(state.description.path)
    directory.mkdir(parents=True, exist_ok=True)
    # A step that crashed after writing but before its write frontier was
    # recorded left files the record does not name; this step rewrites them.
    for stale in directory.glob("*.parquet"):
        if stale.name not in state.files:
            stale.unlink()
    assert frontier.time is not None
    if frontier.time == state.as_of and not state.files:
        # First step: the snapshot at as_of, stamped at as_of.
        snapshot = shard.snapshot_table(state.as_of)
        times = pa.array([state.as_of] * snapshot.num_rows, type=pa.int64())
        table = snapshot.append_column(TIME_COLUMN, times)
        _write(table.select(shard.desc.arrow_schema(True).names), directory, "snapshot", state)
        start = state.as_of + 1
    else:
        start = frontier.time
    updates: list[Update] = shard.updates_between(start, upper)
    if updates:
        table = batch_io.updates_to_table(updates, shard.desc)
        end = "inf" if upper.is_empty else str(upper.time)
        _write(table, directory, f"{start}-{end}", state)
    state.write_frontier = upper
    return True


def _write(table: pa.Table, directory: Path, name: str, state: ExportState) -> None:
    final = directory / f"{name}.parquet"
    temp = directory / f".{name}.parquet.tmp"
    pq.write_table(table, temp)
    with open(temp, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(temp, final)
    if final.name not in state.files:
        state.files.append(final.name)


def read_export(path: str) -> list[tuple[tuple[Any, ...], int, int]]:
    """Every (row, time, diff) an export wrote, for checking it."""
    out = []
    for file in sorted(Path(path).glob("*.parquet")):
        table = pq.read_table(file)
        names = [n for n in table.column_names if n not in (TIME_COLUMN, DIFF_COLUMN)]
        columns = [column_pylist(table.column(n)) for n in names]
        times = table.column(TIME_COLUMN).to_pylist()
        diffs = table.column(DIFF_COLUMN).to_pylist()
        for i in range(table.num_rows):
            out.append((tuple(c[i] for c in columns), times[i], diffs[i]))
    return out
