"""Durable shards: immutable Parquet batches plus a state record in consensus
changed only by compare-and-set (Materialize's persist, in miniature)."""

from coordinator_lib.persist.blob import BlobStore
from coordinator_lib.persist.client import PersistClient
from coordinator_lib.persist.consensus import (
    Consensus,
    ConsensusBusy,
    ConsensusError,
    open_consensus,
)
from coordinator_lib.persist.errors import (
    InvalidUpdates,
    LeaseExpired,
    PersistError,
    ReadBeforeSince,
    ReadBeyondUpper,
    SchemaMismatch,
    ShardFinalized,
    UpperMismatch,
)
from coordinator_lib.persist.shard import LeasedReader, Listen, ListenEvent, Shard

__all__ = [
    "BlobStore",
    "Consensus",
    "ConsensusBusy",
    "ConsensusError",
    "InvalidUpdates",
    "LeaseExpired",
    "LeasedReader",
    "Listen",
    "ListenEvent",
    "PersistClient",
    "PersistError",
    "ReadBeforeSince",
    "ReadBeyondUpper",
    "SchemaMismatch",
    "Shard",
    "ShardFinalized",
    "UpperMismatch",
    "open_consensus",
]
