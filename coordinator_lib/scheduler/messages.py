"""The table scheduler's wire messages, modelled on TiCDC's `schedulepb` and
`tablepb` (scheduler v3): what the owner and the captures say to each other.

A *span* is one task the scheduler places: a maintained dataflow, named by
the GlobalId of what it writes (TiCDC schedules table spans; we schedule
whole dataflows, so a span is just that name).

Every message carries a header for fencing, so the transport may delay,
drop, reorder and duplicate messages without breaking the protocol:

- `owner_revision`: the owner's election revision (strictly increasing per
  election). Captures ignore messages from an older owner; the owner ignores
  replies addressed to another revision.
- `capture_epoch`: the capture's incarnation, granted with its liveness lease
  (a restart is a new epoch). Captures ignore owner messages stamped with
  another epoch; the owner ignores messages from an incarnation it no longer
  knows.
- `seq`: the sender's message counter, increasing over the sender's life. A
  receiver drops a message whose `seq` is not above the last one it accepted
  from that sender incarnation, which turns a reordering, duplicating network
  into a lossy FIFO channel, the delivery TiCDC's own transport provides.
  (Deviation: TiCDC relies on its gRPC streams for this; without it a delayed
  duplicate `AddTableRequest` could restart a dataflow that was moved away.)

Messages are immutable; senders fill the header when sending (`stamp`),
so the state machines can build them header-less.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import TypeVar

Span = str
"""One schedulable task: the GlobalId of the dataflow's output (e.g. `u7`)."""

CaptureId = str
"""The name a capture (a `tidemark worker --id NAME`) runs under."""

CHECKPOINT_CANNOT_PROCEED = 0
"""The watermark the Scheduler returns while it cannot compute one (some
current task has no known status): the owner must not advance anything."""

CHECKPOINT_CLOSED = 2**62
"""The checkpoint of a task whose view is complete for all time (its upper
is the empty frontier): later than any time, so it holds back no
watermark, which the barrier (the oracle's read time) still bounds."""


class TableState(enum.IntEnum):
    """A task's state on one capture, as that capture's executor reports it."""

    ABSENT = 1
    PREPARING = 2
    PREPARED = 3
    REPLICATING = 4
    STOPPING = 5
    STOPPED = 6


class Liveness(enum.IntEnum):
    """A capture's own view of its life: STOPPING once asked to drain."""

    ALIVE = 0
    STOPPING = 1


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Progress of one task: all output before `checkpoint_ts` is durable;
    all input before `resolved_ts` has been seen."""

    checkpoint_ts: int = 0
    resolved_ts: int = 0


@dataclass(frozen=True, slots=True)
class Watermark:
    """The global progress the Scheduler reports: the least checkpoint (and
    resolved ts) over all current tasks."""

    checkpoint_ts: int
    resolved_ts: int


@dataclass(frozen=True, slots=True)
class Barrier:
    """TiCDC's `BarrierWithMinTs`: no task may be reported past
    `min_table_barrier_ts`, and resolved progress stops at
    `global_barrier_ts` (the coordinator uses it to hold every dataflow at a
    time, e.g. while a view is redefined). Sent to captures in heartbeats."""

    global_barrier_ts: int
    min_table_barrier_ts: int


@dataclass(frozen=True, slots=True)
class CaptureInfo:
    """A live capture as its liveness lease describes it."""

    capture_id: CaptureId
    epoch: int
    address: str = ""


@dataclass(frozen=True, slots=True)
class TableStatus:
    span: Span
    state: TableState
    checkpoint: Checkpoint = Checkpoint()


@dataclass(frozen=True, slots=True)
class AddTableRequest:
    """Start a task: `is_secondary` asks only to prepare it (hydrate from
    persist at `checkpoint` without writing), otherwise to run it as primary."""

    span: Span
    is_secondary: bool
    checkpoint: Checkpoint


@dataclass(frozen=True, slots=True)
class RemoveTableRequest:
    span: Span


@dataclass(frozen=True, slots=True)
class AddTableResponse:
    status: TableStatus
    checkpoint: Checkpoint


@dataclass(frozen=True, slots=True)
class RemoveTableResponse:
    status: TableStatus
    checkpoint: Checkpoint


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """The header every message carries (see the module docstring)."""

    sender: str = ""
    to: str = ""
    owner_revision: int = 0
    capture_epoch: int = 0
    seq: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchTableRequest(Message):
    """Owner to capture: add or remove one task."""

    request: AddTableRequest | RemoveTableRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchTableResponse(Message):
    """Capture to owner: where a dispatched add or remove stands."""

    response: AddTableResponse | RemoveTableResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat(Message):
    """Owner to capture: report the tasks you hold (and these `spans`).
    `is_stopping` asks the capture to drain; `barrier` is passed on to it."""

    spans: tuple[Span, ...] = ()
    is_stopping: bool = False
    collect_stats: bool = False
    barrier: Barrier | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResponse(Message):
    """Capture to owner: the status of every task it holds or was asked about."""

    tables: tuple[TableStatus, ...] = ()
    liveness: Liveness = Liveness.ALIVE


M = TypeVar("M", bound=Message)
_HEADER = frozenset(("sender", "to", "owner_revision", "capture_epoch", "seq"))
_BODY_FIELDS: dict[type, tuple[str, ...]] = {}


def stamp(
    message: M, *, sender: str, to: str, owner_revision: int, capture_epoch: int, seq: int
) -> M:
    """A copy of `message` with this header (what `dataclasses.replace`
    does, several times faster: this runs for every message sent)."""
    cls = type(message)
    body = _BODY_FIELDS.get(cls)
    if body is None:
        body = _BODY_FIELDS[cls] = tuple(f.name for f in fields(cls) if f.name not in _HEADER)
    new = object.__new__(cls)
    set_ = object.__setattr__
    set_(new, "sender", sender)
    set_(new, "to", to)
    set_(new, "owner_revision", owner_revision)
    set_(new, "capture_epoch", capture_epoch)
    set_(new, "seq", seq)
    for name in body:
        set_(new, name, getattr(message, name))
    return new
