"""Typed errors of the compute controller; each names what it is about."""

from __future__ import annotations

from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId


class ComputeError(Exception):
    """Base of every compute controller error."""


class InstanceMissing(ComputeError):
    def __init__(self, id: str) -> None:
        super().__init__(f"compute instance {id} does not exist")
        self.id = id


class InstanceExists(ComputeError):
    def __init__(self, id: str) -> None:
        super().__init__(f"compute instance {id} already exists")
        self.id = id


class ReplicaMissing(ComputeError):
    def __init__(self, instance: str, replica: str) -> None:
        super().__init__(f"replica {replica} of compute instance {instance} does not exist")


class CollectionMissing(ComputeError):
    def __init__(self, id: GlobalId) -> None:
        super().__init__(f"compute collection {id} does not exist")
        self.id = id


class DataflowCreationError(ComputeError):
    """A dataflow's as_of is not readable for one of its inputs."""

    def __init__(self, id: GlobalId, input_id: GlobalId, as_of: int, since: Frontier) -> None:
        super().__init__(
            f"dataflow {id}: as_of {as_of} is before the since {since!r} of its input {input_id}"
        )
        self.id = id


class PeekError(ComputeError):
    """A peek at a time the collection cannot answer."""
