"""The storage controller (seed 002): durable collections, their frontiers,
read policies and holds, table appends and ingestions."""

from coordinator_lib.storage.collection import (
    CollectionDescription,
    CollectionState,
    DataSource,
    DataSourceKind,
    IngestionDescription,
)
from coordinator_lib.storage.controller import (
    AppendCommand,
    CollectionStatistics,
    MaintenanceReport,
    StorageController,
    StorageParameters,
    table_description,
)
from coordinator_lib.storage.errors import (
    IdentifierExists,
    IdentifierMissing,
    InvalidUpdate,
    InvalidUppers,
    NotWritable,
    ReadBeforeSince,
    ReadBeyondUpper,
    StorageError,
    UpdateBeyondUpper,
)
from coordinator_lib.storage.read_hold import ReadHold

__all__ = [
    "AppendCommand",
    "CollectionDescription",
    "CollectionState",
    "CollectionStatistics",
    "DataSource",
    "DataSourceKind",
    "IdentifierExists",
    "IdentifierMissing",
    "IngestionDescription",
    "InvalidUpdate",
    "InvalidUppers",
    "MaintenanceReport",
    "NotWritable",
    "ReadBeforeSince",
    "ReadBeyondUpper",
    "ReadHold",
    "StorageController",
    "StorageError",
    "StorageParameters",
    "UpdateBeyondUpper",
    "table_description",
]
