"""Frontiers over a totally ordered time: one time, or empty (closed forever).

A frontier is a lower bound on times still to come. With a total order an
antichain has at most one element, so `Frontier(t)` or `Frontier.empty()`.
The empty frontier is greater than every time-bearing frontier.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import total_ordering

from coordinator_lib.repr.timestamp import Timestamp


@total_ordering
@dataclass(frozen=True, slots=True)
class Frontier:
    """`time is None` means the empty frontier."""

    time: Timestamp | None

    @staticmethod
    def at(t: Timestamp) -> Frontier:
        return Frontier(int(t))

    @staticmethod
    def empty() -> Frontier:
        return Frontier(None)

    @staticmethod
    def minimum() -> Frontier:
        return Frontier(0)

    @property
    def is_empty(self) -> bool:
        return self.time is None

    def less_equal(self, t: Timestamp) -> bool:
        """True if `t` is not yet complete: some element of the frontier is <= t."""
        return self.time is not None and self.time <= t

    def less_than(self, t: Timestamp) -> bool:
        return self.time is not None and self.time < t

    def meet(self, other: Frontier) -> Frontier:
        """The lesser of two frontiers."""
        return min(self, other)

    def join(self, other: Frontier) -> Frontier:
        """The greater of two frontiers."""
        return max(self, other)

    def step_back(self) -> Timestamp | None:
        """The largest time that is complete (`upper - 1`), if any."""
        if self.time is None or self.time == 0:
            return None
        return self.time - 1

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Frontier):
            return NotImplemented
        if self.time is None:
            return False
        if other.time is None:
            return True
        return self.time < other.time

    def to_json(self) -> int | None:
        return self.time

    @staticmethod
    def from_json(value: int | None) -> Frontier:
        return Frontier(value)

    def __repr__(self) -> str:
        return "[]" if self.time is None else f"[{self.time}]"
