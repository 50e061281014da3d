"""Liveness leases and owner election, behind an interface the real thing
can put in consensus (TiCDC keeps both in etcd sessions).

- A capture holds a lease; each acquisition is a new incarnation with a new
  `epoch` (strictly increasing per store). The lease must be renewed before
  it expires; an expired or superseded lease can never be renewed, so its
  holder must stop everything and start over as a new incarnation. The
  owner's `alive_captures` are the captures with an unexpired lease, and a
  capture whose lease expired is treated as stopped: its tasks are
  rescheduled.
- Owner election: at most one unexpired owner lease at a time; each
  election gets an owner revision greater than every earlier one, which
  fences messages of deposed owners.

Writes are not fenced by the lease: a view's compare_and_append checks
its upper only, and that CaS decides who lands each step (invariant 9). A
`LeaseFence` makes an incarnation whose lease is gone stop acting as
primary: it starts no step once its lease's last known expiry has passed
(a lease that expired can never be renewed), and after a step lost the CaS
it asks the store (`is_live(capture_id, epoch)`) whether it still holds its
lease. A step already in flight when the process froze still reaches its
CaS, which lands it only if nobody advanced the view meanwhile.

Acquiring a capture lease for an id that still holds an unexpired one
supersedes it (a restarted worker with the same `--id` need not wait for
its old lease to run out; the old incarnation is dead at once).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol

from coordinator_lib.scheduler.messages import CaptureId, CaptureInfo


class Clock(Protocol):
    def now_ms(self) -> int: ...


class FakeClock:
    """Time that moves only when told to (milliseconds)."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("time does not go backwards")
        self._now += ms


@dataclass(frozen=True, slots=True)
class CaptureLease:
    capture_id: CaptureId
    epoch: int
    expires_at_ms: int
    address: str = ""


@dataclass(frozen=True, slots=True)
class OwnerLease:
    owner_id: str
    revision: int
    expires_at_ms: int


class LeaseStore(ABC):
    """Capture liveness leases and the owner election."""

    @abstractmethod
    def acquire_capture_lease(
        self, capture_id: CaptureId, ttl_ms: int, address: str = ""
    ) -> CaptureLease:
        """A new incarnation of `capture_id` (a new epoch), superseding any other."""

    @abstractmethod
    def renew_capture_lease(self, lease: CaptureLease, ttl_ms: int) -> CaptureLease | None:
        """Extend `lease`; None if it expired or was superseded (then its
        holder must stop all its tasks and acquire a new lease)."""

    @abstractmethod
    def release_capture_lease(self, lease: CaptureLease) -> None:
        """End `lease` now (graceful shutdown); no-op if no longer current."""

    @abstractmethod
    def alive_captures(self) -> dict[CaptureId, CaptureInfo]:
        """Captures holding an unexpired lease, by id (sorted)."""

    @abstractmethod
    def is_live(self, capture_id: CaptureId, epoch: int) -> bool:
        """Whether incarnation `epoch` of `capture_id` still holds its lease."""

    @abstractmethod
    def campaign_owner(self, candidate: str, ttl_ms: int) -> OwnerLease | None:
        """Become owner if there is none (a new, higher revision); None if
        another owner's lease is unexpired."""

    @abstractmethod
    def renew_owner_lease(self, lease: OwnerLease, ttl_ms: int) -> OwnerLease | None:
        """Stay owner; None if `lease` expired or another owner was elected."""

    @abstractmethod
    def resign_owner(self, lease: OwnerLease) -> None:
        """Give up ownership now; no-op if `lease` is no longer current."""

    @abstractmethod
    def get_owner(self) -> OwnerLease | None:
        """The current owner, if its lease is unexpired."""


class InMemoryLeaseStore(LeaseStore):
    """Leases in a dict, timed by a `Clock` (a `FakeClock` in tests)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._captures: dict[CaptureId, CaptureLease] = {}
        self._epoch = 0
        self._owner: OwnerLease | None = None
        self._revision = 0
        self._lock = threading.Lock()

    def _unexpired(self, expires_at_ms: int) -> bool:
        return self.clock.now_ms() < expires_at_ms

    def acquire_capture_lease(
        self, capture_id: CaptureId, ttl_ms: int, address: str = ""
    ) -> CaptureLease:
        with self._lock:
            self._epoch += 1
            lease = CaptureLease(capture_id, self._epoch, self.clock.now_ms() + ttl_ms, address)
            self._captures[capture_id] = lease
            return lease

    def renew_capture_lease(self, lease: CaptureLease, ttl_ms: int) -> CaptureLease | None:
        with self._lock:
            current = self._captures.get(lease.capture_id)
            if current is None or current.epoch != lease.epoch:
                return None
            if not self._unexpired(current.expires_at_ms):
                return None
            renewed = CaptureLease(
                lease.capture_id, lease.epoch, self.clock.now_ms() + ttl_ms, lease.address
            )
            self._captures[lease.capture_id] = renewed
            return renewed

    def release_capture_lease(self, lease: CaptureLease) -> None:
        with self._lock:
            current = self._captures.get(lease.capture_id)
            if current is not None and current.epoch == lease.epoch:
                del self._captures[lease.capture_id]

    def alive_captures(self) -> dict[CaptureId, CaptureInfo]:
        with self._lock:
            return {
                c: CaptureInfo(c, lease.epoch, lease.address)
                for c, lease in sorted(self._captures.items())
                if self._unexpired(lease.expires_at_ms)
            }

    def is_live(self, capture_id: CaptureId, epoch: int) -> bool:
        with self._lock:
            lease = self._captures.get(capture_id)
            return (
                lease is not None and lease.epoch == epoch and self._unexpired(lease.expires_at_ms)
            )

    def campaign_owner(self, candidate: str, ttl_ms: int) -> OwnerLease | None:
        with self._lock:
            owner = self._owner
            if owner is not None and self._unexpired(owner.expires_at_ms):
                return None
            self._revision += 1
            self._owner = OwnerLease(candidate, self._revision, self.clock.now_ms() + ttl_ms)
            return self._owner

    def renew_owner_lease(self, lease: OwnerLease, ttl_ms: int) -> OwnerLease | None:
        with self._lock:
            owner = self._owner
            if owner is None or owner.revision != lease.revision:
                return None
            if not self._unexpired(owner.expires_at_ms):
                return None
            self._owner = OwnerLease(lease.owner_id, lease.revision, self.clock.now_ms() + ttl_ms)
            return self._owner

    def resign_owner(self, lease: OwnerLease) -> None:
        with self._lock:
            if self._owner is not None and self._owner.revision == lease.revision:
                self._owner = None

    def get_owner(self) -> OwnerLease | None:
        with self._lock:
            owner = self._owner
            if owner is None or not self._unexpired(owner.expires_at_ms):
                return None
            return owner


class LeaseFence:
    """The write side of one capture incarnation's lease (see the module
    docstring): a stepping executor asks `may_write()` before each step (no
    I/O: this process's own knowledge of its lease) and `after_lost_race()`
    when a step's compare_and_append lost to another writer. Once either
    says no, the fence stays `lost` and the incarnation must end: every
    dataflow stops, a new incarnation (new epoch) starts."""

    def __init__(
        self,
        store: LeaseStore,
        lease: CaptureLease,
        clock: Clock,
        lost: threading.Event | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.lease = lease
        self.lost = lost if lost is not None else threading.Event()
        self.reason: str | None = None

    def renewed(self, lease: CaptureLease) -> None:
        """The lease was renewed (called by whoever renews it)."""
        if lease.epoch == self.lease.epoch and lease.expires_at_ms > self.lease.expires_at_ms:
            self.lease = lease

    def lose(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.lost.set()

    def may_write(self) -> bool:
        """False once the lease is lost. While the last known expiry is
        ahead this costs nothing; past it (the process was frozen past its
        TTL, or a renewal is late) the store decides: a lease no longer live
        there can never be renewed."""
        if self.lost.is_set():
            return False
        now = self.clock.now_ms()
        if now < self.lease.expires_at_ms:
            return True
        if self.store.is_live(self.lease.capture_id, self.lease.epoch):
            return True  # a renewal landed that we have not heard of yet
        self.lose(f"lease expired at {self.lease.expires_at_ms} (now {now})")
        return False

    def after_lost_race(self) -> bool:
        """A step lost the CaS on its upper: whoever won may be this task's
        new primary. True if this incarnation still holds its lease (the
        winner was some other writer, e.g. a coordinator without the
        scheduler), else the fence is lost."""
        if self.lost.is_set():
            return False
        if not self.store.is_live(self.lease.capture_id, self.lease.epoch):
            self.lose("lost a write race and no longer holds the lease")
            return False
        return True
