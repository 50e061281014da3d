"""`LeaseStore` in consensus: capture liveness leases and the owner
election as compare-and-set rows, shared by every process of an
environment (TiCDC keeps both in etcd sessions).

Keys (under `prefix`, default `scheduler/`):

- `owner`: `{"owner_id", "revision", "expires_at_ms"}`. An election is a
  CaS that finds no unexpired owner; its revision is the seqno that CaS
  wrote, so revisions grow strictly with every election. The row is never
  deleted (a resignation writes `expires_at_ms: 0`), so seqnos never restart.
- `captures/<capture id>`: `{"epoch", "expires_at_ms", "address", "cluster"}`.
  Renewals keep the epoch and move the expiry; a release writes
  `expires_at_ms: 0`.
- `epochs`: a counter; each capture lease acquisition takes the next value
  by CaS, so epochs grow strictly across the whole store (a restarted
  capture with the same id always gets a new, higher epoch).

Expiry is wall-clock time (`WallClock`): the processes of one environment
must have clocks that agree to well within a lease's TTL (one host, or NTP).
Each capture lease records the cluster its worker serves; a store opened for
a `cluster` lists only that cluster's captures (the owner runs one
Scheduler per cluster), while the owner election is shared.
"""

from __future__ import annotations

import json
import time
from typing import Any

from coordinator_lib.persist.consensus import Consensus, VersionedData
from coordinator_lib.scheduler.lease import CaptureLease, Clock, LeaseStore, OwnerLease
from coordinator_lib.scheduler.messages import CaptureId, CaptureInfo

DEFAULT_PREFIX = "scheduler/"


class WallClock:
    """Milliseconds since the Unix epoch."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ConsensusLeaseStore(LeaseStore):
    """Leases as consensus rows; see the module docstring."""

    def __init__(
        self,
        consensus: Consensus,
        *,
        cluster: str | None = None,
        clock: Clock | None = None,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        """`cluster`: the cluster new capture leases are filed under, and
        the only one `alive_captures` lists (None: every cluster)."""
        self.consensus = consensus
        self.cluster = cluster
        self.clock = clock or WallClock()
        self.prefix = prefix
        self._owner_key = f"{prefix}owner"
        self._epochs_key = f"{prefix}epochs"
        self._captures_prefix = f"{prefix}captures/"

    # -- rows ------------------------------------------------------------------

    def _read(self, key: str) -> tuple[int | None, dict[str, Any] | None]:
        head = self.consensus.head(key)
        if head is None:
            return None, None
        return head.seqno, json.loads(head.data)

    def _cas(self, key: str, seqno: int | None, record: dict[str, Any]) -> int | None:
        """Write `record` over `seqno`; the new seqno, or None if the row moved."""
        new = (seqno or 0) + 1
        data = json.dumps(record, sort_keys=True).encode()
        if self.consensus.compare_and_set(key, seqno, VersionedData(new, data)):
            return new
        return None

    def _unexpired(self, record: dict[str, Any] | None) -> bool:
        return record is not None and self.clock.now_ms() < record["expires_at_ms"]

    def _capture_key(self, capture_id: CaptureId) -> str:
        if "/" in capture_id or not capture_id:
            raise ValueError(f"bad capture id {capture_id!r}")
        return f"{self._captures_prefix}{capture_id}"

    def _next_epoch(self) -> int:
        while True:
            seqno, _ = self._read(self._epochs_key)
            new = self._cas(self._epochs_key, seqno, {})
            if new is not None:
                return new

    # -- captures ----------------------------------------------------------------

    def acquire_capture_lease(
        self, capture_id: CaptureId, ttl_ms: int, address: str = ""
    ) -> CaptureLease:
        key = self._capture_key(capture_id)
        epoch = self._next_epoch()
        while True:
            seqno, _ = self._read(key)
            expires = self.clock.now_ms() + ttl_ms
            record = {
                "epoch": epoch,
                "expires_at_ms": expires,
                "address": address,
                "cluster": self.cluster or "",
            }
            if self._cas(key, seqno, record) is not None:
                return CaptureLease(capture_id, epoch, expires, address)

    def renew_capture_lease(self, lease: CaptureLease, ttl_ms: int) -> CaptureLease | None:
        key = self._capture_key(lease.capture_id)
        while True:
            seqno, record = self._read(key)
            if record is None or record["epoch"] != lease.epoch or not self._unexpired(record):
                return None
            expires = self.clock.now_ms() + ttl_ms
            if self._cas(key, seqno, {**record, "expires_at_ms": expires}) is not None:
                return CaptureLease(lease.capture_id, lease.epoch, expires, lease.address)

    def release_capture_lease(self, lease: CaptureLease) -> None:
        key = self._capture_key(lease.capture_id)
        while True:
            seqno, record = self._read(key)
            if record is None or record["epoch"] != lease.epoch or record["expires_at_ms"] == 0:
                return
            if self._cas(key, seqno, {**record, "expires_at_ms": 0}) is not None:
                return

    def _captures(self) -> dict[CaptureId, dict[str, Any]]:
        out = {}
        for key in self.consensus.list_keys(self._captures_prefix):
            _, record = self._read(key)
            if record is None:
                continue
            if self.cluster is not None and record.get("cluster", "") != self.cluster:
                continue
            out[key[len(self._captures_prefix) :]] = record
        return out

    def alive_captures(self) -> dict[CaptureId, CaptureInfo]:
        return {
            capture_id: CaptureInfo(capture_id, record["epoch"], record.get("address", ""))
            for capture_id, record in sorted(self._captures().items())
            if self._unexpired(record)
        }

    def is_live(self, capture_id: CaptureId, epoch: int) -> bool:
        _, record = self._read(self._capture_key(capture_id))
        return record is not None and record["epoch"] == epoch and self._unexpired(record)

    # -- the owner -----------------------------------------------------------------

    def campaign_owner(self, candidate: str, ttl_ms: int) -> OwnerLease | None:
        seqno, record = self._read(self._owner_key)
        if self._unexpired(record):
            return None
        expires = self.clock.now_ms() + ttl_ms
        # The revision is the seqno this CaS writes: it is stored too, so a
        # renewal (a later seqno) keeps it.
        revision = (seqno or 0) + 1
        new = {"owner_id": candidate, "revision": revision, "expires_at_ms": expires}
        if self._cas(self._owner_key, seqno, new) is None:
            return None  # someone else campaigned at the same moment
        return OwnerLease(candidate, revision, expires)

    def renew_owner_lease(self, lease: OwnerLease, ttl_ms: int) -> OwnerLease | None:
        while True:
            seqno, record = self._read(self._owner_key)
            if record is None or record["revision"] != lease.revision:
                return None
            if not self._unexpired(record):
                return None
            expires = self.clock.now_ms() + ttl_ms
            if self._cas(self._owner_key, seqno, {**record, "expires_at_ms": expires}) is not None:
                return OwnerLease(lease.owner_id, lease.revision, expires)

    def resign_owner(self, lease: OwnerLease) -> None:
        while True:
            seqno, record = self._read(self._owner_key)
            if record is None or record["revision"] != lease.revision:
                return
            if record["expires_at_ms"] == 0:
                return
            if self._cas(self._owner_key, seqno, {**record, "expires_at_ms": 0}) is not None:
                return

    def get_owner(self) -> OwnerLease | None:
        _, record = self._read(self._owner_key)
        if not self._unexpired(record):
            return None
        assert record is not None
        return OwnerLease(record["owner_id"], record["revision"], record["expires_at_ms"])
