"""Read policies: how a collection's `since` follows its `upper`.

`frontier(upper)` is the *implied capability* the policy grants for a write
frontier. The since of a collection is the least of that and every read hold.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.timestamp import Timestamp


class ReadPolicy(ABC):
    """Base of the four policies; see each subclass."""

    @abstractmethod
    def frontier(self, write_frontier: Frontier) -> Frontier:
        """The implied read capability for this write frontier."""

    @abstractmethod
    def to_json(self) -> dict:
        """A JSON-able form, read back by `ReadPolicy.from_json`."""

    @staticmethod
    def from_json(data: dict) -> ReadPolicy:
        kind = data["kind"]
        if kind == "valid_from":
            return ValidFrom(Frontier.from_json(data["frontier"]))
        if kind == "lag_write_frontier":
            return LagWriteFrontier(int(data["lag"]))
        if kind == "no_policy":
            return NoPolicy(Frontier.from_json(data["initial"]))
        if kind == "multiple":
            return Multiple(tuple(ReadPolicy.from_json(p) for p in data["policies"]))
        raise ValueError(f"unknown read policy kind {kind!r}")


@dataclass(frozen=True)
class ValidFrom(ReadPolicy):
    """Hold the since at a fixed frontier."""

    since: Frontier

    def frontier(self, write_frontier: Frontier) -> Frontier:
        return self.since

    def to_json(self) -> dict:
        return {"kind": "valid_from", "frontier": self.since.to_json()}


@dataclass(frozen=True)
class LagWriteFrontier(ReadPolicy):
    """since = upper - lag, rounded down to a multiple of min(lag, 1000 ms) so
    that compaction happens in steps rather than on every tick. A closed
    collection (empty upper: a view of constants) grants the minimum, as
    Materialize's `lag_writes_by` does: its since stays where it was, and
    it stays readable from there on."""

    lag: Timestamp

    def __post_init__(self) -> None:
        if self.lag < 0:
            raise ValueError(f"lag must be >= 0, got {self.lag}")

    def frontier(self, write_frontier: Frontier) -> Frontier:
        if write_frontier.is_empty:
            return Frontier.minimum()
        assert write_frontier.time is not None
        since = max(write_frontier.time - self.lag, 0)
        granule = min(self.lag, 1000)
        if granule > 0:
            since -= since % granule
        return Frontier.at(since)

    def to_json(self) -> dict:
        return {"kind": "lag_write_frontier", "lag": self.lag}


@dataclass(frozen=True)
class NoPolicy(ReadPolicy):
    """No automatic compaction: the since stays at `initial`."""

    initial: Frontier

    def frontier(self, write_frontier: Frontier) -> Frontier:
        return self.initial

    def to_json(self) -> dict:
        return {"kind": "no_policy", "initial": self.initial.to_json()}


@dataclass(frozen=True)
class Multiple(ReadPolicy):
    """The least of several policies (the most conservative wins)."""

    policies: tuple[ReadPolicy, ...]

    def frontier(self, write_frontier: Frontier) -> Frontier:
        result = Frontier.empty()
        for policy in self.policies:
            result = result.meet(policy.frontier(write_frontier))
        return result

    def to_json(self) -> dict:
        return {"kind": "multiple", "policies": [p.to_json() for p in self.policies]}
