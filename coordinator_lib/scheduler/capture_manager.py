r"""The owner's view of captures: TiCDC's `CaptureManager`
(cdc/scheduler/internal/v3/member/capture_manager.go).

```
 UNINITIALIZED --heartbeat response--> INITIALIZED
        \                                  /
         `----------> STOPPING <----------'   (liveness STOPPING: draining)
```

A capture is known by its id and its epoch (the incarnation its liveness
lease was granted for). Nothing is scheduled until every alive capture has
answered a heartbeat with the tasks it holds: a new owner must learn where
everything runs before it moves anything. The first time they all have, the
manager hands out `CaptureChanges.init` (every capture's tasks); after that,
a capture that disappears from the alive set is handed out in
`CaptureChanges.removed`, and its tasks are treated as stopped.

Deviations from TiCDC: captures keep their id across restarts (TiCDC makes
a new id per process), so an alive capture whose epoch changed counts as
the old incarnation removed plus a new one added; heartbeats are counted in
owner ticks, not wall time.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from coordinator_lib.scheduler.messages import (
    Barrier,
    CaptureId,
    CaptureInfo,
    Heartbeat,
    HeartbeatResponse,
    Liveness,
    Span,
    TableStatus,
)

log = logging.getLogger(__name__)


class CaptureState(enum.IntEnum):
    UNINITIALIZED = 1
    """No heartbeat response yet: its tasks are unknown."""
    INITIALIZED = 2
    STOPPING = 3
    """Draining or shutting down: gets no new tasks."""


@dataclass(slots=True)
class CaptureStatus:
    capture_id: CaptureId
    epoch: int
    address: str = ""
    state: CaptureState = CaptureState.UNINITIALIZED
    tables: tuple[TableStatus, ...] = ()
    last_seq: int = 0
    """Highest `seq` accepted from this incarnation (see `messages`)."""

    def handle_heartbeat_response(self, response: HeartbeatResponse) -> None:
        if self.state == CaptureState.UNINITIALIZED:
            self.state = CaptureState.INITIALIZED
            log.info("capture %s@%d initialized", self.capture_id, self.epoch)
        if response.liveness == Liveness.STOPPING and self.state != CaptureState.STOPPING:
            self.state = CaptureState.STOPPING
            log.info("capture %s@%d stopping", self.capture_id, self.epoch)
        self.tables = response.tables


@dataclass(slots=True)
class CaptureChanges:
    init: dict[CaptureId, tuple[TableStatus, ...]] | None = None
    removed: dict[CaptureId, tuple[TableStatus, ...]] = field(default_factory=dict)


class CaptureManager:
    def __init__(self, *, heartbeat_tick: int = 2, collect_stats_tick: int = 200) -> None:
        self.captures: dict[CaptureId, CaptureStatus] = {}
        self.initialized = False
        self._changes: CaptureChanges | None = None
        self._tick_counter = 0
        self.heartbeat_tick = heartbeat_tick
        self.collect_stats_tick = collect_stats_tick
        self._pending_collect = False

    def check_all_capture_initialized(self) -> bool:
        return self.initialized and self._all_initialized()

    def _all_initialized(self) -> bool:
        # STOPPING counts as initialized: its tasks must be moved away.
        if not self.captures:
            return False
        return all(s.state != CaptureState.UNINITIALIZED for s in self.captures.values())

    def accept(self, sender: CaptureId, epoch: int, seq: int) -> bool:
        """Fence a message from a capture: known incarnation, fresh seq."""
        status = self.captures.get(sender)
        if status is None or status.epoch != epoch or seq <= status.last_seq:
            return False
        status.last_seq = seq
        return True

    def tick(
        self,
        spans_by_capture: Callable[[], Mapping[CaptureId, list[Span]]],
        draining_target: CaptureId,
        barrier: Barrier | None,
    ) -> list[Heartbeat]:
        """Every `heartbeat_tick` ticks, a heartbeat to every capture asking
        about the tasks the owner believes it holds (`spans_by_capture` is
        only computed then)."""
        self._tick_counter += 1
        if self._tick_counter % self.collect_stats_tick == 0:
            self._pending_collect = True
        if self._tick_counter % self.heartbeat_tick != 0:
            return []
        collect, self._pending_collect = self._pending_collect, False
        spans = spans_by_capture()
        return [
            Heartbeat(
                to=capture_id,
                spans=tuple(spans.get(capture_id, ())),
                is_stopping=draining_target == capture_id,
                collect_stats=collect,
                barrier=barrier,
            )
            for capture_id in self.captures
        ]

    def handle_heartbeat_response(self, response: HeartbeatResponse) -> None:
        status = self.captures.get(response.sender)
        if status is not None:
            status.handle_heartbeat_response(response)

    def handle_alive_capture_update(
        self, alive: Mapping[CaptureId, CaptureInfo]
    ) -> list[Heartbeat]:
        """Track captures joining, leaving and restarting; greet new ones."""
        greetings = []
        for capture_id, status in list(self.captures.items()):
            info = alive.get(capture_id)
            if info is None or info.epoch != status.epoch:
                log.info("capture %s@%d removed", capture_id, status.epoch)
                del self.captures[capture_id]
                if self.initialized:
                    if self._changes is None:
                        self._changes = CaptureChanges()
                    self._changes.removed[capture_id] = status.tables
        for capture_id, info in alive.items():
            if capture_id not in self.captures:
                log.info("capture %s@%d found", capture_id, info.epoch)
                self.captures[capture_id] = CaptureStatus(capture_id, info.epoch, info.address)
                greetings.append(Heartbeat(to=capture_id))
        self.maybe_initialize()
        return greetings

    def maybe_initialize(self) -> bool:
        """The first time every capture answered: record the initial tables."""
        if self.initialized or not self._all_initialized():
            return False
        self.initialized = True
        changes = self._changes or CaptureChanges()
        changes.init = {c: s.tables for c, s in self.captures.items()}
        self._changes = changes
        log.info("all %d captures initialized", len(self.captures))
        return True

    def take_changes(self) -> CaptureChanges | None:
        if not self.initialized:
            return None
        changes, self._changes = self._changes, None
        return changes
