"""The scheduler's owner, inside `tidemark serve`: wins the owner election
in consensus, then runs one `Scheduler` per cluster that has workers, ticks
them, and persists each cluster's global watermark.

Every `tidemark serve` process runs an `Owner` and calls `tick()`
periodically (`run`); only the one holding the owner lease schedules. When
it dies, its lease expires and another process's `Owner` wins the next
election with a higher revision: its Schedulers start empty, learn where
every task runs from the captures' heartbeat answers (nothing is scheduled
before every live capture has answered), and carry on. Messages of the
deposed owner carry the old revision, which captures ignore once they have
heard from the new one.

The watermark of a cluster is persisted under `scheduler/checkpoint/<cluster>`
as `{"checkpoint_ts", "resolved_ts", "revision"}`, only ever raised (a write
takes the max with what is there), so it never regresses, across owners
too; a new owner starts its Schedulers from it. `checkpoint_ts` is the
least durable upper over the cluster's views: all of them are readable
together at `checkpoint_ts - 1` (`consistent_read_ts`).

Clusters and their tasks come from `tasks()`: cluster name -> the spans
(materialized view ids) that should run there, for the clusters that have
workers (`adapter/clusters.py`). A cluster that disappears from it has its
Scheduler closed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coordinator_lib.persist.consensus import Consensus, VersionedData
from coordinator_lib.scheduler.consensus_lease import DEFAULT_PREFIX, ConsensusLeaseStore
from coordinator_lib.scheduler.consensus_transport import ConsensusTransport
from coordinator_lib.scheduler.lease import OwnerLease
from coordinator_lib.scheduler.messages import (
    CHECKPOINT_CANNOT_PROCEED,
    Barrier,
    CaptureId,
    Span,
    Watermark,
)
from coordinator_lib.scheduler.replication_set import ReplicationSetError
from coordinator_lib.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

DEFAULT_OWNER_TTL_MS = 10_000
_PERSIST_INTERVAL_S = 0.2


class NotOwner(Exception):
    """This process does not hold the owner lease; `owner` names who does."""

    def __init__(self, owner: str | None) -> None:
        super().__init__(f"not the scheduler owner (owner: {owner or 'none'})")
        self.owner = owner


class UnknownCapture(Exception):
    pass


class Owner:
    def __init__(
        self,
        consensus: Consensus,
        owner_id: str,
        tasks: Callable[[], Mapping[str, Sequence[Span]]],
        *,
        barrier: Callable[[], Barrier | None] | None = None,
        lease_ttl_ms: int = DEFAULT_OWNER_TTL_MS,
        scheduler_options: Mapping[str, Any] | None = None,
        prefix: str = DEFAULT_PREFIX,
        on_elected: Callable[[int], None] | None = None,
        on_deposed: Callable[[], None] | None = None,
    ) -> None:
        self.consensus = consensus
        self.owner_id = owner_id
        self.tasks = tasks
        self.barrier = barrier
        self.lease_ttl_ms = lease_ttl_ms
        self.scheduler_options = dict(scheduler_options or {})
        self.prefix = prefix
        self.on_elected = on_elected
        self.on_deposed = on_deposed
        self.leases = ConsensusLeaseStore(consensus, prefix=prefix)
        self.lease: OwnerLease | None = None
        self._renewed_at = 0.0
        self._cluster_leases: dict[str, ConsensusLeaseStore] = {}
        self._schedulers: dict[str, Scheduler] = {}
        self._watermarks: dict[str, Watermark] = {}
        self._persisted: dict[str, Watermark] = {}
        self._persisted_at: dict[str, float] = {}
        self._lock = threading.Lock()  # the dicts above, for API threads
        self._lease_lock = threading.RLock()  # campaign, renewal, resignation
        self.elections = 0

    # -- the loop --------------------------------------------------------------

    @property
    def is_owner(self) -> bool:
        lease = self.lease
        return lease is not None and self.leases.clock.now_ms() < lease.expires_at_ms

    def tick(self) -> None:
        """One round: campaign or renew, then tick every cluster's Scheduler."""
        if not self._hold_lease():
            return
        assert self.lease is not None
        wanted = self.tasks()
        barrier = self.barrier() if self.barrier is not None else None
        with self._lock:
            for cluster in set(self._schedulers) - set(wanted):
                log.info("cluster %s has no workers now: its scheduler stops", cluster)
                self._schedulers.pop(cluster).close()
                self._watermarks.pop(cluster, None)
            for cluster in wanted:
                if cluster not in self._schedulers:
                    self._schedulers[cluster] = self._new_scheduler(cluster)
            schedulers = dict(self._schedulers)
        for cluster, scheduler in schedulers.items():
            leases = self._cluster_leases.get(cluster)
            if leases is None:
                leases = ConsensusLeaseStore(self.consensus, cluster=cluster, prefix=self.prefix)
                self._cluster_leases[cluster] = leases
            try:
                watermark = scheduler.tick(
                    self._checkpoint(cluster).checkpoint_ts,
                    list(wanted[cluster]),
                    leases.alive_captures(),
                    barrier,
                )
            except ReplicationSetError as error:
                # TiCDC restarts the changefeed: a fresh Scheduler rebuilds
                # everything from the captures' reports.
                log.error("cluster %s: %s; starting a fresh scheduler", cluster, error)
                with self._lock:
                    scheduler.close()
                    self._schedulers[cluster] = self._new_scheduler(cluster)
                continue
            if watermark.checkpoint_ts != CHECKPOINT_CANNOT_PROCEED:
                with self._lock:
                    self._watermarks[cluster] = watermark
                self._persist(cluster, watermark)

    def run(self, stop: threading.Event, interval_s: float = 0.1) -> None:
        """Tick until `stop` is set; then resign if owner."""
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.tick()
            except Exception:
                log.exception("scheduler owner tick failed")
            stop.wait(max(0.0, interval_s - (time.monotonic() - started)))
        self.resign()

    def resign(self) -> None:
        with self._lease_lock:
            lease = self.lease
            if lease is not None:
                self._depose()
                self.leases.resign_owner(lease)

    def _hold_lease(self) -> bool:
        if self.lease is None:
            with self._lease_lock:
                lease = self.leases.campaign_owner(self.owner_id, self.lease_ttl_ms)
                if lease is None:
                    return False
                log.info("%s is the scheduler owner at revision %d", self.owner_id, lease.revision)
                self.lease, self._renewed_at = lease, time.monotonic()
                self.elections += 1
                with self._lock:
                    self._persisted.clear()
                    self._persisted_at.clear()
            if self.on_elected is not None:
                self.on_elected(lease.revision)
            return True
        return self.keep_alive()

    def keep_alive(self) -> bool:
        """Renew the owner lease if a quarter of its TTL has passed; False
        (and deposed) if it was lost. `tick` calls it; call it from another
        thread too when ticks may take long (`ClusterService` does), so slow
        rounds do not cost the lease."""
        with self._lease_lock:
            lease = self.lease
            if lease is None:
                return False
            now = time.monotonic()
            if now - self._renewed_at < self.lease_ttl_ms / 4000 and self.is_owner:
                return True
            renewed = self.leases.renew_owner_lease(lease, self.lease_ttl_ms)
            if renewed is None:
                log.warning("%s lost the owner lease", self.owner_id)
                self._depose()
                return False
            self.lease, self._renewed_at = renewed, now
            return True

    def _depose(self) -> None:
        self.lease = None
        with self._lock:
            for scheduler in self._schedulers.values():
                scheduler.close()
            self._schedulers.clear()
            self._watermarks.clear()
        if self.on_deposed is not None:
            self.on_deposed()

    def _new_scheduler(self, cluster: str) -> Scheduler:
        assert self.lease is not None
        transport = ConsensusTransport.for_owner(self.consensus, cluster, self.prefix)
        transport.recv()  # what earlier owners were told is not ours to handle
        return Scheduler(self.owner_id, self.lease.revision, transport, **self.scheduler_options)

    # -- the persisted watermark ------------------------------------------------

    def _checkpoint_key(self, cluster: str) -> str:
        return f"{self.prefix}checkpoint/{cluster}"

    def _read_checkpoint(self, cluster: str) -> tuple[int | None, dict[str, Any] | None]:
        head = self.consensus.head(self._checkpoint_key(cluster))
        if head is None:
            return None, None
        return head.seqno, json.loads(head.data)

    def _checkpoint(self, cluster: str) -> Watermark:
        persisted = self._persisted.get(cluster)
        if persisted is None:
            _, record = self._read_checkpoint(cluster)
            persisted = (
                Watermark(0, 0)
                if record is None
                else Watermark(record["checkpoint_ts"], record["resolved_ts"])
            )
            self._persisted[cluster] = persisted
        return persisted

    def _persist(self, cluster: str, watermark: Watermark) -> None:
        current = self._checkpoint(cluster)
        if (
            watermark.checkpoint_ts <= current.checkpoint_ts
            and watermark.resolved_ts <= current.resolved_ts
        ):
            return
        now = time.monotonic()
        if now - self._persisted_at.get(cluster, 0.0) < _PERSIST_INTERVAL_S:
            return
        assert self.lease is not None
        revision = self.lease.revision
        key = self._checkpoint_key(cluster)
        while True:
            seqno, record = self._read_checkpoint(cluster)
            old = record or {"checkpoint_ts": 0, "resolved_ts": 0, "revision": 0}
            if old["revision"] > revision:
                return  # a newer owner writes it now
            new = {
                "checkpoint_ts": max(old["checkpoint_ts"], watermark.checkpoint_ts),
                "resolved_ts": max(old["resolved_ts"], watermark.resolved_ts),
                "revision": revision,
            }
            data = json.dumps(new, sort_keys=True).encode()
            if self.consensus.compare_and_set(key, seqno, VersionedData((seqno or 0) + 1, data)):
                self._persisted[cluster] = Watermark(new["checkpoint_ts"], new["resolved_ts"])
                self._persisted_at[cluster] = now
                return

    def persisted_watermark(self, cluster: str) -> Watermark | None:
        """The cluster's watermark as consensus has it (any process may ask)."""
        _, record = self._read_checkpoint(cluster)
        if record is None:
            return None
        return Watermark(record["checkpoint_ts"], record["resolved_ts"])

    # -- the API (thread-safe) -----------------------------------------------------

    def _require_owner(self) -> dict[str, Scheduler]:
        if not self.is_owner:
            owner = self.leases.get_owner()
            raise NotOwner(owner.owner_id if owner is not None else None)
        with self._lock:
            return dict(self._schedulers)

    def watermark(self) -> Watermark:
        """The least watermark over the clusters (CHECKPOINT_CANNOT_PROCEED
        while some cluster has none yet)."""
        schedulers = self._require_owner()
        with self._lock:
            marks = [self._watermarks.get(c) for c in schedulers]
        if any(m is None for m in marks):
            return Watermark(CHECKPOINT_CANNOT_PROCEED, CHECKPOINT_CANNOT_PROCEED)
        if not marks:
            return Watermark(CHECKPOINT_CANNOT_PROCEED, CHECKPOINT_CANNOT_PROCEED)
        return Watermark(
            min(m.checkpoint_ts for m in marks if m is not None),
            min(m.resolved_ts for m in marks if m is not None),
        )

    def consistent_read_ts(self) -> int | None:
        """The freshest time at which every worker-maintained view can be
        read together (None while unknown)."""
        watermark = self.watermark()
        if watermark.checkpoint_ts == CHECKPOINT_CANNOT_PROCEED:
            return None
        return watermark.checkpoint_ts - 1

    def status(self) -> dict[str, Any]:
        """`{"checkpoint_ts", "resolved_ts", "captures": {capture: [{"task",
        "state", "role", "checkpoint_ts"}]}}` over live captures, plus the
        owner, its revision and each cluster's watermark."""
        schedulers = self._require_owner()
        watermark = self.watermark()
        captures: dict[str, list[dict[str, Any]]] = {}
        clusters: dict[str, Any] = {}
        for cluster, scheduler in sorted(schedulers.items()):
            report = scheduler.task_report()
            for capture_id, tasks in report.items():
                captures[capture_id] = [t._asdict() for t in tasks]
            with self._lock:
                mark = self._watermarks.get(cluster)
            clusters[cluster] = {
                "checkpoint_ts": mark.checkpoint_ts if mark else CHECKPOINT_CANNOT_PROCEED,
                "resolved_ts": mark.resolved_ts if mark else CHECKPOINT_CANNOT_PROCEED,
                "captures": sorted(report),
            }
        lease = self.lease
        return {
            "checkpoint_ts": watermark.checkpoint_ts,
            "resolved_ts": watermark.resolved_ts,
            "captures": dict(sorted(captures.items())),
            "owner": self.owner_id,
            "revision": lease.revision if lease is not None else None,
            "clusters": clusters,
        }

    def _scheduler_of_capture(self, capture_id: CaptureId) -> Scheduler:
        for scheduler in self._require_owner().values():
            if capture_id in scheduler.capture_manager.captures:
                return scheduler
        raise UnknownCapture(f"no live capture {capture_id!r}")

    def move_table(self, span: Span, target: CaptureId) -> bool:
        """Move `span` to the capture `target` (of the cluster running it)."""
        scheduler = self._scheduler_of_capture(target)
        if span not in scheduler.replication_sets:
            raise UnknownCapture(f"task {span!r} does not run on {target!r}'s cluster")
        return scheduler.move_table(span, target)

    def rebalance(self, cluster: str | None = None) -> bool:
        """Spread every cluster's tasks (or one cluster's) evenly."""
        schedulers = self._require_owner()
        if cluster is not None:
            if cluster not in schedulers:
                raise UnknownCapture(f"no cluster {cluster!r} with workers")
            schedulers = {cluster: schedulers[cluster]}
        results = [s.rebalance() for s in schedulers.values()]
        return bool(results) and all(results)

    def drain_capture(self, target: CaptureId) -> int:
        """Move every task off `target`; how many it still holds as primary."""
        return self._scheduler_of_capture(target).drain_capture(target)
