"""Reading and writing one batch with pyarrow (the small, fast path).

A batch's Parquet schema is the collection's RelationDesc plus two int64
columns, `__time` and `__diff` (see repr.relation). Spark reads and writes the
same layout (persist.spark_batches).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from coordinator_lib.persist.blob import fsync_dir
from coordinator_lib.persist.errors import DiskFull, is_disk_full
from coordinator_lib.repr.errors import InvalidRow
from coordinator_lib.repr.interval import Interval
from coordinator_lib.repr.relation import (
    DIFF_COLUMN,
    TIME_COLUMN,
    RelationDesc,
    ScalarType,
    column_pylist,
)
from coordinator_lib.repr.update import Update


def updates_to_table(updates: Sequence[Update], desc: RelationDesc) -> pa.Table:
    """Rows must already be validated against `desc`. A value its column's
    Arrow type cannot hold (a numeric with more digits than decimal128(38,
    10) keeps) raises InvalidRow naming it: encoding is the last check before
    anything is written."""
    columns: list[list] = [[] for _ in range(desc.arity)]
    times: list[int] = []
    diffs: list[int] = []
    for row, time, diff in updates:
        for i, value in enumerate(row):
            columns[i].append(value)
        times.append(time)
        diffs.append(diff)
    return _columns_table(columns, times, diffs, desc)


def inserts_to_table(rows: Sequence[tuple[Any, ...]], desc: RelationDesc) -> pa.Table:
    """`updates_to_table` of each row inserted once at time 0 (what group
    commit takes before it sets the time), without an Update per row."""
    if not rows:
        return updates_to_table([], desc)
    columns = [list(column) for column in zip(*rows, strict=True)]
    if len(columns) != desc.arity:
        raise ValueError(f"rows of {len(columns)} columns for a relation of {desc.arity}")
    return _columns_table(columns, [0] * len(rows), [1] * len(rows), desc)


def _columns_table(
    columns: list[list], times: list[int], diffs: list[int], desc: RelationDesc
) -> pa.Table:
    for i, column_type in enumerate(desc.types):
        if column_type.scalar_type is ScalarType.TIMESTAMPTZ:
            columns[i] = [_utc(value) for value in columns[i]]
        elif column_type.scalar_type is ScalarType.TIMESTAMPTZ_ARRAY:
            columns[i] = [None if v is None else [_utc(x) for x in v] for v in columns[i]]
        elif column_type.scalar_type is ScalarType.INTERVAL:
            columns[i] = [None if v is None else v.as_struct() for v in columns[i]]
        elif column_type.scalar_type is ScalarType.INTERVAL_ARRAY:
            columns[i] = [_structs(v) for v in columns[i]]
    schema = desc.arrow_schema(with_time_diff=True)
    arrays = [_encode_column(col, schema.field(i)) for i, col in enumerate(columns)]
    arrays.append(pa.array(times, type=pa.int64()))
    arrays.append(pa.array(diffs, type=pa.int64()))
    return pa.Table.from_arrays(arrays, schema=schema)


def at_time(table: pa.Table, time: int) -> pa.Table:
    """A batch table with every update moved to `time`."""
    index = table.schema.get_field_index(TIME_COLUMN)
    times = pa.repeat(pa.scalar(time, pa.int64()), table.num_rows)
    return table.set_column(index, TIME_COLUMN, times)


def _encode_column(values: list[Any], field: pa.Field) -> pa.Array:
    try:
        return pa.array(values, type=field.type)
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as error:
        bad = next((v for v in values if not _encodes(v, field.type)), None)
        shown = "a value" if bad is None else repr(bad) if isinstance(bad, str) else str(bad)
        if pa.types.is_decimal(field.type):
            raise InvalidRow(
                "numeric field overflow",
                sqlstate="22003",
                detail=(
                    f'{shown} in column "{field.name}" does not fit: numeric values are stored'
                    f" with precision {field.type.precision} and scale {field.type.scale}"
                    f" (at most {field.type.precision - field.type.scale} digits before the"
                    f" decimal point and {field.type.scale} after it)"
                ),
            ) from error
        raise InvalidRow(
            f'{shown} in column "{field.name}" cannot be stored as {field.type}: {error}'
        ) from error


def _encodes(value: Any, arrow_type: pa.DataType) -> bool:
    try:
        pa.array([value], type=arrow_type)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        return False
    return True


def _stored(value: Any) -> Any:
    """A value read by column_pylist as Arrow takes it back (intervals as structs)."""
    if isinstance(value, Interval):
        return value.as_struct()
    if isinstance(value, tuple):
        return _structs(value) if any(isinstance(v, Interval) for v in value) else list(value)
    return value


def _structs(values: tuple | None) -> list | None:
    """An interval array's elements as the structs Arrow stores."""
    return None if values is None else [None if v is None else v.as_struct() for v in values]


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    """The same instant in UTC. pyarrow drops a datetime's offset instead of
    converting it when PYARROW_IGNORE_TIMEZONE is set, and importing pandera
    sets it for the whole process; converting first makes the stored instant
    independent of that switch."""
    return None if value is None else value.astimezone(dt.UTC)


def table_to_updates(table: pa.Table, desc: RelationDesc) -> list[Update]:
    data = [column_pylist(table.column(name)) for name in desc.names]
    times = table.column(TIME_COLUMN).to_pylist()
    diffs = table.column(DIFF_COLUMN).to_pylist()
    rows = list(zip(*data, strict=True)) if data else [() for _ in times]
    return [Update(row, t, d) for row, t, d in zip(rows, times, diffs, strict=True)]


def write_batch_table(table: pa.Table, batch_dir: Path) -> int:
    """Write `table` as one Parquet file in a new batch directory, durably.
    Returns the bytes written. Out of space, it removes what it wrote and
    raises DiskFull."""
    try:
        batch_dir.mkdir(parents=True, exist_ok=False)
    except OSError as error:
        if is_disk_full(error):
            raise DiskFull(f"could not write batch {batch_dir.name}: {error}") from error
        raise
    final = batch_dir / "part-00000.parquet"
    temp = batch_dir / ".part-00000.parquet.tmp"
    try:
        pq.write_table(table, temp, compression="zstd")
        with open(temp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, final)
        fsync_dir(batch_dir)
        fsync_dir(batch_dir.parent)
    except OSError as error:
        shutil.rmtree(batch_dir, ignore_errors=True)
        if is_disk_full(error):
            raise DiskFull(f"could not write batch {batch_dir.name}: {error}") from error
        raise
    return final.stat().st_size


def inline_bytes(table: pa.Table) -> bytes:
    """`table` as an Arrow IPC stream: an inline batch's bytes (`persist.shard`),
    a twentieth of a Parquet file's cost to write or read at this size."""
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def read_inline(data: bytes) -> pa.Table:
    """The batch table `inline_bytes` wrote."""
    return ipc.open_stream(pa.BufferReader(data)).read_all()


def materialize_batch(table: pa.Table, batch_dir: Path) -> None:
    """Make `batch_dir` hold `table` as a Parquet file, for a reader that
    opens files itself (an inline batch has none until one is needed).
    Written under a temporary name, fsynced, then renamed: a file there is
    whole, and readers that race here each write their own and rename."""
    final = batch_dir / "part-00000.parquet"
    if final.exists():
        return
    batch_dir.mkdir(parents=True, exist_ok=True)
    temp = batch_dir / f".part-00000.parquet.{os.getpid()}-{threading.get_ident()}.tmp"
    pq.write_table(table, temp, compression="zstd")
    with open(temp, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(temp, final)
    fsync_dir(batch_dir)
    fsync_dir(batch_dir.parent)


def read_batch_table(files: Sequence[Path], desc: RelationDesc) -> pa.Table:
    """Read a batch's files as one table in the desc's schema."""
    schema = desc.arrow_schema(with_time_diff=True)
    if not files:
        return schema.empty_table()
    tables = [pq.read_table(f, schema=schema) for f in files]
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def consolidate_table(table: pa.Table, desc: RelationDesc, as_of: int | None) -> pa.Table:
    """Advance times to `as_of` (dropping times after it), sum diffs per row,
    drop zeros. Without `as_of`, consolidate per (row, time) instead.
    Returns the data columns plus `__diff` (and `__time` without `as_of`)."""
    if as_of is not None:
        table = table.filter(pc.less_equal(table.column(TIME_COLUMN), as_of))
        keys = list(desc.names)
    else:
        keys = [*desc.names, TIME_COLUMN]
    if table.num_rows == 0:
        return table.select([*keys, DIFF_COLUMN])
    if not keys:
        total = pc.sum(table.column(DIFF_COLUMN)).as_py() or 0
        return pa.table({DIFF_COLUMN: pa.array([total] if total else [], type=pa.int64())})
    # Arrow cannot group by list (array) or struct (interval) columns: group
    # by a code per distinct value instead and put the values back afterwards.
    decoded: dict[str, tuple[list, pa.DataType]] = {}
    for name in keys:
        column = table.column(name)
        if pa.types.is_list(column.type) or pa.types.is_struct(column.type):
            codes: dict = {}
            values = column_pylist(column)
            code_column = [codes.setdefault(v, len(codes)) for v in values]
            decoded[name] = (list(codes), column.type)
            index = table.column_names.index(name)
            table = table.set_column(index, name, pa.array(code_column, type=pa.int64()))
    # group_by puts the aggregate after the keys, named `__diff_sum`.
    grouped = table.group_by(keys, use_threads=False).aggregate([(DIFF_COLUMN, "sum")])
    grouped = grouped.rename_columns([*keys, DIFF_COLUMN])
    for name, (values, list_type) in decoded.items():
        index = grouped.column_names.index(name)
        restored = [_stored(values[c]) for c in grouped.column(name).to_pylist()]
        grouped = grouped.set_column(index, name, pa.array(restored, type=list_type))
    return grouped.filter(pc.not_equal(grouped.column(DIFF_COLUMN), 0))
