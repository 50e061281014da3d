"""A capture's life in a `tidemark worker` process: a liveness lease, an
`Agent`, a transport and a `TableExecutor` that can `advance()` its tasks.

Each incarnation acquires a capture lease (a new epoch) and runs an Agent
for that epoch. A thread renews the lease every `ttl / 4`; if a renewal
fails (the lease expired, e.g. the process was paused, or another process
took the same capture id), the incarnation ends at once: every task stops
(`executor.close()`) and a new incarnation starts with a new epoch, which
the owner sees as the old capture gone (its tasks rescheduled) and a new one
joining. The main loop alternates an agent tick (take the owner's messages,
report, apply dispatches) and a bounded round of dataflow steps, so a
dispatched remove always runs between steps.

The executor gets the incarnation's `LeaseFence` (scheduler/lease.py): it
starts no step once the lease's last known expiry has passed, and a step
that lost the compare-and-append on its view's upper makes it check the
lease in consensus. Either way a fenced incarnation ends at once, so a
process resuming from a freeze past its TTL stops acting as primary before
its renewal thread even notices; writes themselves are decided by the CaS.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from coordinator_lib.persist.consensus import Consensus
from coordinator_lib.scheduler.agent import Agent, TableExecutor
from coordinator_lib.scheduler.consensus_lease import ConsensusLeaseStore
from coordinator_lib.scheduler.consensus_transport import ConsensusTransport
from coordinator_lib.scheduler.lease import CaptureLease, LeaseFence

log = logging.getLogger(__name__)

DEFAULT_LEASE_TTL_MS = 10_000


class SteppingExecutor(TableExecutor, Protocol):
    def advance(self, budget_s: float = ...) -> int: ...

    def close(self) -> None: ...


class CaptureRunner:
    def __init__(
        self,
        consensus: Consensus,
        capture_id: str,
        cluster: str,
        make_executor: Callable[[LeaseFence], SteppingExecutor],
        *,
        lease_ttl_ms: int = DEFAULT_LEASE_TTL_MS,
        tick_s: float = 0.05,
        step_budget_s: float = 0.2,
        address: str = "",
    ) -> None:
        self.consensus = consensus
        self.capture_id = capture_id
        self.cluster = cluster
        self.make_executor = make_executor
        self.lease_ttl_ms = lease_ttl_ms
        self.tick_s = tick_s
        self.step_budget_s = step_budget_s
        self.address = address
        self.leases = ConsensusLeaseStore(consensus, cluster=cluster)
        self.transport = ConsensusTransport.for_capture(consensus, capture_id, cluster)
        self.stop_event = threading.Event()
        self.lease: CaptureLease | None = None
        self.agent: Agent | None = None
        self.executor: SteppingExecutor | None = None
        self.incarnations = 0
        self.fence: LeaseFence | None = None
        self._lost = threading.Event()

    def stop(self) -> None:
        self.stop_event.set()

    def run(self) -> None:
        """Serve incarnations until `stop()`; then release the lease."""
        while not self.stop_event.is_set():
            self._lost.clear()
            lease = self.leases.acquire_capture_lease(
                self.capture_id, self.lease_ttl_ms, self.address
            )
            self.lease = lease
            self.incarnations += 1
            fence = self.fence = LeaseFence(self.leases, lease, self.leases.clock, self._lost)
            executor = self.executor = self.make_executor(fence)
            self.agent = Agent(self.capture_id, lease.epoch, executor)
            log.info("capture %s@%d (cluster %s) up", self.capture_id, lease.epoch, self.cluster)
            renewer = threading.Thread(
                target=self._renew_loop, args=(lease,), name="capture-lease", daemon=True
            )
            renewer.start()
            try:
                self._serve(executor)
            finally:
                executor.close()  # nothing of this incarnation writes after this
                if self.stop_event.is_set() and self.lease is not None:
                    self.leases.release_capture_lease(self.lease)
                self._lost.set()  # ends the renewer
                renewer.join(timeout=5)
            if not self.stop_event.is_set():
                log.warning(
                    "capture %s@%d lost its lease (%s): restarting",
                    self.capture_id,
                    lease.epoch,
                    fence.reason or "renewal refused",
                )

    def _serve(self, executor: SteppingExecutor) -> None:
        assert self.agent is not None
        while not self.stop_event.is_set() and not self._lost.is_set():
            started = time.monotonic()
            self.transport.send(self.agent.tick(self.transport.recv()))
            executor.advance(self.step_budget_s)
            if self._lost.is_set():
                return
            rest = self.tick_s - (time.monotonic() - started)
            if rest > 0:
                self.stop_event.wait(rest)

    def _renew_loop(self, lease: CaptureLease) -> None:
        interval = self.lease_ttl_ms / 4000
        while not self._lost.wait(interval):
            try:
                renewed = self.leases.renew_capture_lease(lease, self.lease_ttl_ms)
            except Exception:
                log.exception("lease renewal failed; retrying")
                continue
            if renewed is None:
                if self.fence is not None and self.fence.lease.epoch == lease.epoch:
                    self.fence.lose("renewal refused")
                self._lost.set()
                return
            lease = renewed
            if self.lease is not None and self.lease.epoch == lease.epoch:
                self.lease = lease
            if self.fence is not None:
                self.fence.renewed(lease)
