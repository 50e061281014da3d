"""PersistClient: the entry point to an environment's durable state.

An environment is a consensus store (SQLite file or PostgreSQL URL) plus a
blob root; every process that opens the same pair sees the same shards.
"""

from __future__ import annotations

import os
from pathlib import Path

from coordinator_lib.persist.blob import BlobStore
from coordinator_lib.persist.consensus import Consensus, open_consensus
from coordinator_lib.persist.machine import SHARD_KEY_PREFIX, Machine
from coordinator_lib.persist.private import make_private
from coordinator_lib.persist.shard import Shard
from coordinator_lib.repr.relation import RelationDesc


class PersistClient:
    def __init__(self, consensus: Consensus, blob: BlobStore) -> None:
        self.consensus = consensus
        self.blob = blob

    @staticmethod
    def open(
        data_dir: str | os.PathLike[str] | None = None,
        consensus_url: str | None = None,
        blob_root: str | os.PathLike[str] | None = None,
    ) -> PersistClient:
        """Open an environment. Defaults: `<data_dir>/consensus.db` (SQLite)
        and `<data_dir>/blob`."""
        if data_dir is None and (consensus_url is None or blob_root is None):
            raise ValueError("give a data_dir, or both a consensus_url and a blob_root")
        base = Path(data_dir) if data_dir is not None else None
        if base is not None:
            make_private(base)
        if consensus_url is None:
            assert base is not None
            consensus_url = f"sqlite:///{(base / 'consensus.db').resolve()}"
        if blob_root is None:
            assert base is not None
            blob_root = base / "blob"
        return PersistClient(open_consensus(consensus_url), BlobStore(blob_root))

    def open_shard(self, shard_id: str, desc: RelationDesc, initial_since: int = 0) -> Shard:
        """Open (creating if new) the shard `shard_id` with schema `desc`."""
        return Shard.open(Machine(self.consensus, shard_id), self.blob, desc, initial_since)

    def shard_ids(self) -> list[str]:
        return [key[len(SHARD_KEY_PREFIX) :] for key in self.consensus.list_keys(SHARD_KEY_PREFIX)]

    def close(self) -> None:
        self.consensus.close()
