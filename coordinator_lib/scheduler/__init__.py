"""A TiCDC-style table scheduler (seed 004): the owner's `Scheduler` places
tasks (maintained dataflows) on captures (`tidemark worker` processes), each
running an `Agent` over a `TableExecutor`; liveness and ownership come from
leases (`LeaseStore`). The protocol is pure logic; across processes, leases
and mailboxes live in consensus (`consensus_lease`, `consensus_transport`),
the owner runs in `tidemark serve` (`owner`) and captures are `tidemark
worker` processes (`capture`, `dataflow_executor`; docs/scheduler.md).
"""

from coordinator_lib.scheduler.agent import Agent, TableExecutor
from coordinator_lib.scheduler.consensus_lease import ConsensusLeaseStore, WallClock
from coordinator_lib.scheduler.consensus_transport import ConsensusTransport
from coordinator_lib.scheduler.lease import (
    CaptureLease,
    Clock,
    FakeClock,
    InMemoryLeaseStore,
    LeaseStore,
    OwnerLease,
)
from coordinator_lib.scheduler.memory_executor import ClockWriter, InMemoryTableExecutor, TaskWriter
from coordinator_lib.scheduler.messages import (
    CHECKPOINT_CANNOT_PROCEED,
    AddTableRequest,
    AddTableResponse,
    Barrier,
    CaptureId,
    CaptureInfo,
    Checkpoint,
    DispatchTableRequest,
    DispatchTableResponse,
    Heartbeat,
    HeartbeatResponse,
    Liveness,
    Message,
    RemoveTableRequest,
    RemoveTableResponse,
    Span,
    TableState,
    TableStatus,
    Watermark,
)
from coordinator_lib.scheduler.owner import NotOwner, Owner
from coordinator_lib.scheduler.replication_set import (
    MultiplePrimaryError,
    ReplicationSet,
    ReplicationSetError,
    ReplicationSetState,
    Role,
)
from coordinator_lib.scheduler.scheduler import Scheduler, TaskReport
from coordinator_lib.scheduler.transport import QueueTransport, Transport

__all__ = [
    "CHECKPOINT_CANNOT_PROCEED",
    "AddTableRequest",
    "AddTableResponse",
    "Agent",
    "Barrier",
    "CaptureId",
    "CaptureInfo",
    "CaptureLease",
    "Checkpoint",
    "Clock",
    "ClockWriter",
    "ConsensusLeaseStore",
    "ConsensusTransport",
    "DispatchTableRequest",
    "DispatchTableResponse",
    "FakeClock",
    "Heartbeat",
    "HeartbeatResponse",
    "InMemoryLeaseStore",
    "InMemoryTableExecutor",
    "LeaseStore",
    "Liveness",
    "Message",
    "MultiplePrimaryError",
    "NotOwner",
    "Owner",
    "OwnerLease",
    "QueueTransport",
    "RemoveTableRequest",
    "RemoveTableResponse",
    "ReplicationSet",
    "ReplicationSetError",
    "ReplicationSetState",
    "Role",
    "Scheduler",
    "Span",
    "TableExecutor",
    "TableState",
    "TableStatus",
    "TaskReport",
    "TaskWriter",
    "Transport",
    "WallClock",
    "Watermark",
]
