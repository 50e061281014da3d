"""The compute layer (seed 001): views rendered on Spark as delta rules,
maintained by dataflows, served by indexes, peeks and subscribes."""

from coordinator_lib.compute.controller import (
    CollectionFrontiers,
    ComputeController,
    SubscribeBatch,
)
from coordinator_lib.compute.dataflow import DataflowDescription, StepResult
from coordinator_lib.compute.errors import (
    CollectionMissing,
    ComputeError,
    DataflowCreationError,
    InstanceExists,
    InstanceMissing,
    PeekError,
    ReplicaMissing,
)

__all__ = [
    "CollectionFrontiers",
    "CollectionMissing",
    "ComputeController",
    "ComputeError",
    "DataflowCreationError",
    "DataflowDescription",
    "InstanceExists",
    "InstanceMissing",
    "PeekError",
    "ReplicaMissing",
    "StepResult",
    "SubscribeBatch",
]
