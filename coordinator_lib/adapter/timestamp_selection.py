"""Choosing the time a read happens at (Materialize's timestamp selection).

- strict serializable (default): the oracle's read timestamp (every write
  acknowledged so far is visible), at least every input's since; the read
  waits until every input's upper passes it.
- serializable: the largest time readable now without waiting; when the
  read touches views maintained by workers, the scheduler's global watermark
  instead (the freshest time at which every worker-maintained view can be
  read together), so successive serializable reads see one consistent cut
  that never goes back.
- AS OF t: exactly t (must be at least every since; waits for the uppers).
- AS OF AT LEAST t: the freshest time readable now that is at least t.

A time before an input's since cannot be served: "Timestamp (t) is not valid
for all inputs: ..." naming them. `TimestampDetermination.explain()` is what
EXPLAIN TIMESTAMP prints.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from coordinator_lib.adapter.errors import InvalidTimestamp
from coordinator_lib.adapter.oracle import EPOCH_MILLISECONDS
from coordinator_lib.adapter.session import SERIALIZABLE
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.sql.plans import AsOfTime


@dataclass(frozen=True)
class InputFrontiers:
    """One input of a read: its name, kind (storage or compute) and frontiers."""

    id: str
    name: str
    since: Frontier
    upper: Frontier
    kind: str = "storage"


@dataclass(frozen=True)
class TimestampDetermination:
    timestamp: int
    oracle_read_ts: int | None
    since: Frontier
    upper: Frontier
    inputs: tuple[InputFrontiers, ...]
    session_wall_time: int
    timeline: str | None = EPOCH_MILLISECONDS
    global_watermark: int | None = None

    @property
    def largest_not_in_advance_of_upper(self) -> int:
        return largest_readable(self.upper, self.since)

    @property
    def respond_immediately(self) -> bool:
        return self.upper.less_equal(self.timestamp) is False

    def explain(self) -> str:
        lines = [
            f"                query timestamp: {_ts(self.timestamp)}",
        ]
        if self.oracle_read_ts is not None:
            lines.append(f"          oracle read timestamp: {_ts(self.oracle_read_ts)}")
        lines += [
            f"largest not in advance of upper: {_ts(self.largest_not_in_advance_of_upper)}",
            f"                          upper:{_frontier(self.upper)}",
            f"                          since:{_frontier(self.since)}",
            f"        can respond immediately: {str(self.respond_immediately).lower()}",
            f"                       timeline: Some({self.timeline})",
            f"              session wall time: {_ts(self.session_wall_time)}",
        ]
        if self.global_watermark is not None:
            lines.append(f"               global watermark: {_ts(self.global_watermark)}")
        for source in self.inputs:
            lines += [
                "",
                f"source {source.name} ({source.id}, {source.kind}):",
                f"                  read frontier:{_frontier(source.since)}",
                f"                 write frontier:{_frontier(source.upper)}",
            ]
        return "\n".join(lines)

    def explain_json(self) -> str:
        return json.dumps(
            {
                "determination": {
                    "timestamp": self.timestamp,
                    "oracle_read_ts": self.oracle_read_ts,
                    "largest_not_in_advance_of_upper": self.largest_not_in_advance_of_upper,
                    "since": self.since.to_json(),
                    "upper": self.upper.to_json(),
                    "respond_immediately": self.respond_immediately,
                    "timeline": self.timeline,
                    "global_watermark": self.global_watermark,
                },
                "sources": [
                    {
                        "name": s.name,
                        "id": s.id,
                        "read_frontier": s.since.to_json(),
                        "write_frontier": s.upper.to_json(),
                    }
                    for s in self.inputs
                ],
            },
            indent=2,
        )


def _ts(t: int) -> str:
    when = dt.datetime.fromtimestamp(t / 1000, dt.UTC) if 0 <= t < 2**53 else None
    shown = when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if when else "?"
    return f"{t} ({shown})"


def _frontier(frontier: Frontier) -> str:
    return "[]" if frontier.time is None else f"[{_ts(frontier.time)}]"


def largest_readable(upper: Frontier, since: Frontier) -> int:
    """The largest time before `upper` (or `since` if the inputs are closed)."""
    if upper.time is None:
        return since.time if since.time is not None else 0
    return max(upper.time - 1, 0)


def determine_timestamp(
    inputs: list[InputFrontiers],
    isolation: str,
    as_of: AsOfTime | None,
    oracle_read_ts: int | None,
    wall_time: int,
    global_watermark: int | None = None,
) -> TimestampDetermination:
    """`global_watermark` is the scheduler's consistent read time, given when
    the read touches worker-maintained views (None otherwise)."""
    since, upper = Frontier.minimum(), Frontier.empty()
    for source in inputs:
        since = since.join(source.since)
        upper = upper.meet(source.upper)
    readable = largest_readable(upper, since)
    if as_of is not None and not as_of.at_least:
        timestamp = as_of.timestamp
    elif as_of is not None:
        timestamp = max(as_of.timestamp, readable)
    elif isolation == SERIALIZABLE and global_watermark is not None:
        timestamp = min(readable, global_watermark)
    elif isolation == SERIALIZABLE or oracle_read_ts is None:
        timestamp = readable if inputs else wall_time
    else:
        timestamp = oracle_read_ts
    exact = as_of is not None and not as_of.at_least
    if not exact and since.time is not None:
        timestamp = max(timestamp, since.time)
    if since.time is None or since.time > timestamp:
        invalid = [s for s in inputs if s.since.time is None or s.since.time > timestamp]
        named = ", ".join(f"{s.name} (since {_frontier(s.since)})" for s in invalid)
        raise InvalidTimestamp(f"Timestamp ({timestamp}) is not valid for all inputs: {named}")
    return TimestampDetermination(
        timestamp,
        oracle_read_ts if (as_of is None and isolation != SERIALIZABLE) else None,
        since,
        upper,
        tuple(inputs),
        wall_time,
        global_watermark=global_watermark,
    )
