"""Plain values every layer speaks: timestamps, frontiers, updates, ids,
relation descriptions. No I/O here."""

from coordinator_lib.repr.errors import InvalidRow
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.read_policy import (
    LagWriteFrontier,
    Multiple,
    NoPolicy,
    ReadPolicy,
    ValidFrom,
)
from coordinator_lib.repr.relation import ColumnType, RelationDesc, ScalarType
from coordinator_lib.repr.timestamp import Timestamp, now_ms
from coordinator_lib.repr.update import Row, Update, consolidate, consolidate_rows

__all__ = [
    "ColumnType",
    "Frontier",
    "GlobalId",
    "InvalidRow",
    "LagWriteFrontier",
    "Multiple",
    "NoPolicy",
    "ReadPolicy",
    "RelationDesc",
    "Row",
    "ScalarType",
    "Timestamp",
    "Update",
    "ValidFrom",
    "consolidate",
    "consolidate_rows",
    "now_ms",
]
