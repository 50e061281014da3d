"""Helpers shared by the persist suites: the test schema, client set-up and
the model answers (plain Python) that shard reads are checked against."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path

from coordinator_lib.persist import PersistClient
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.repr.update import Row, Update, consolidate_rows, row_sort_key

# `k` NOT NULL bigint, `v` nullable text: small enough to collide often.
DESC = RelationDesc.of(("k", "bigint", False), ("v", "text"))


def open_client(consensus_url: str, tmp_path: Path) -> PersistClient:
    """A client on the parametrized consensus backend with blobs under tmp_path."""
    return PersistClient.open(consensus_url=consensus_url, blob_root=tmp_path / "blob")


def new_shard_id(prefix: str = "s") -> str:
    """A fresh shard id (hypothesis examples share one database)."""
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def canonical(pairs: Iterable[tuple[Row, int]]) -> list[tuple[Row, int]]:
    """Sort (row, diff) pairs without merging them, so an unconsolidated answer
    (a duplicate row or a zero diff) still differs from the model's."""
    return sorted(((tuple(r), d) for r, d in pairs), key=lambda rd: (row_sort_key(rd[0]), rd[1]))


def model_snapshot(updates: Iterable[Update], as_of: int) -> list[tuple[Row, int]]:
    """The consolidated contents at `as_of` of a plain list of updates."""
    return consolidate_rows((u.row, u.diff) for u in updates if u.time <= as_of)


def blob_files(root: Path, shard_id: str) -> dict[str, int]:
    """Every file under a shard's blob directory (relative path -> size)."""
    base = root / shard_id
    if not base.exists():
        return {}
    return {str(p.relative_to(base)): p.stat().st_size for p in base.rglob("*") if p.is_file()}
