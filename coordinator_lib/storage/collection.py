"""Descriptions and in-memory state of storage collections.

`CollectionDescription` is what the adapter asks for (schema, where the data
comes from, initial since); `CollectionState` is what the controller tracks:
the write frontier, the read policy and the read holds that together decide
how far the collection's since may advance.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.read_policy import LagWriteFrontier, ReadPolicy
from coordinator_lib.repr.relation import RelationDesc

DEFAULT_READ_POLICY: ReadPolicy = LagWriteFrontier(1000)


class DataSourceKind(StrEnum):
    """Who writes the collection (seed 002's DataSource)."""

    TABLE = "table"  # written by the storage controller's append
    WEBHOOK = "webhook"  # appended by the webhook endpoint through append
    INGESTION = "ingestion"  # written by a running ingestion (load generator)
    INTROSPECTION = "introspection"  # written by the controller about itself
    OTHER = "other"  # written by someone else, e.g. a materialized view's dataflow


@dataclass(frozen=True)
class IngestionDescription:
    """A load generator output: tick k carries time start_ms + k * tick_interval_ms."""

    generator: str
    output: str
    start_ms: int
    tick_interval_ms: int = 1000
    options: tuple[tuple[str, Any], ...] = ()
    instance_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "generator": self.generator,
            "output": self.output,
            "start_ms": self.start_ms,
            "tick_interval_ms": self.tick_interval_ms,
            "options": [list(kv) for kv in self.options],
            "instance_id": self.instance_id,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> IngestionDescription:
        return IngestionDescription(
            generator=data["generator"],
            output=data["output"],
            start_ms=data["start_ms"],
            tick_interval_ms=data["tick_interval_ms"],
            options=tuple((k, v) for k, v in data["options"]),
            instance_id=data["instance_id"],
        )


@dataclass(frozen=True)
class DataSource:
    kind: DataSourceKind
    ingestion: IngestionDescription | None = None
    introspection: str | None = None

    @staticmethod
    def table() -> DataSource:
        return DataSource(DataSourceKind.TABLE)

    @staticmethod
    def webhook() -> DataSource:
        return DataSource(DataSourceKind.WEBHOOK)

    @staticmethod
    def ingestion_of(description: IngestionDescription) -> DataSource:
        return DataSource(DataSourceKind.INGESTION, ingestion=description)

    @staticmethod
    def introspection_of(kind: str) -> DataSource:
        return DataSource(DataSourceKind.INTROSPECTION, introspection=kind)

    @staticmethod
    def other() -> DataSource:
        return DataSource(DataSourceKind.OTHER)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "ingestion": self.ingestion.to_json() if self.ingestion else None,
            "introspection": self.introspection,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> DataSource:
        ingestion = data.get("ingestion")
        return DataSource(
            DataSourceKind(data["kind"]),
            IngestionDescription.from_json(ingestion) if ingestion else None,
            data.get("introspection"),
        )


@dataclass(frozen=True)
class CollectionDescription:
    desc: RelationDesc
    data_source: DataSource
    since: Frontier | None = None  # initial since (and upper) of a new collection


@dataclass
class CollectionState:
    """What the controller knows of one collection.

    `since` and `write_frontier` are the last values seen in the shard.
    `read_holds` counts this process's holds per time; with the implied
    capability of the read policy they are the collection's read
    capabilities, and their least element bounds how far since may go.
    """

    description: CollectionDescription
    shard_id: str
    read_policy: ReadPolicy
    write_frontier: Frontier
    implied_capability: Frontier
    since: Frontier
    read_holds: Counter[int] = field(default_factory=Counter)

    @property
    def read_capabilities(self) -> Counter[int]:
        """Implied capability plus holds, as time -> count (empty frontier absent)."""
        caps = Counter(self.read_holds)
        if self.implied_capability.time is not None:
            caps[self.implied_capability.time] += 1
        return caps

    @property
    def least_hold(self) -> Frontier:
        times = [t for t, n in self.read_holds.items() if n > 0]
        return Frontier.at(min(times)) if times else Frontier.empty()
