"""Who keeps the views of an environment fresh: a heartbeat in consensus.

`tidemark serve` maintains every materialized view itself (its maintenance
loop steps them as their inputs change). Dagster, which shares only the
durable state with it, must know that, or it would run the same steps a
second time. The serving coordinator therefore renews one record in
consensus, `maintainer`, with its identity and an expiry; Dagster's sensors
read it (`current_maintainer`) and, while it is live, report the server's
steps instead of launching runs. A server that dies stops renewing and the
record lapses after `ttl_ms`, so runs take over again.

An index lives only in the memory of the process that maintains it, so the
record also carries the server's indexes (`IndexState`: frontiers and rows),
refreshed after each maintenance round: Dagster reports them, and a run
materializing an index checks the server's instead of building its own.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from coordinator_lib.adapter.oracle import wall_clock_ms
from coordinator_lib.compute.controller import ComputeController
from coordinator_lib.persist.consensus import Consensus, VersionedData
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId

__all__ = [
    "MAINTAINER_KEY",
    "IndexState",
    "Maintainer",
    "MaintainerHeartbeat",
    "current_maintainer",
    "index_states",
]

log = logging.getLogger(__name__)

MAINTAINER_KEY = "maintainer"
DEFAULT_TTL_MS = 15_000


@dataclass(frozen=True)
class IndexState:
    """An index as the maintaining process holds it: readable at times in
    [since, upper) (None: the empty frontier), `rows` rows at upper - 1.
    Hydrated once its upper passed its as_of (the first step landed)."""

    since: int | None
    upper: int | None
    rows: int
    hydrated: bool


@dataclass(frozen=True)
class Maintainer:
    """A live maintainer: which process, since when, until when, and the
    indexes it keeps (by GlobalId text)."""

    holder: str
    host: str
    pid: int
    started_ms: int
    expires_ms: int
    indexes: Mapping[str, IndexState] = field(default_factory=dict)


def _decode(data: bytes) -> Maintainer:
    record = json.loads(data)
    indexes = {id: IndexState(**state) for id, state in record.get("indexes", {}).items()}
    return Maintainer(
        record["holder"],
        record["host"],
        record["pid"],
        record["started_ms"],
        record["expires_ms"],
        indexes,
    )


def index_states(compute: ComputeController, ids: Iterable[GlobalId]) -> dict[str, IndexState]:
    """The indexes among `ids` this process maintains, as they stand now."""
    states = {}
    for id in ids:
        found = compute.find_dataflow(id)
        arrangement = found[1].arrangement if found is not None else None
        if found is None or arrangement is None:
            continue
        states[str(id)] = IndexState(
            arrangement.since.time,
            arrangement.upper.time,
            arrangement.rows,
            arrangement.upper > Frontier.at(found[1].description.as_of),
        )
    return states


def current_maintainer(consensus: Consensus, now_ms: int | None = None) -> Maintainer | None:
    """The process maintaining the views now, if its heartbeat is live."""
    head = consensus.head(MAINTAINER_KEY)
    if head is None:
        return None
    maintainer = _decode(head.data)
    now = wall_clock_ms() if now_ms is None else now_ms
    return maintainer if maintainer.expires_ms > now else None


class MaintainerHeartbeat:
    """The serving coordinator's record, renewed by a thread of its own every
    quarter of the TTL (a long step of the maintenance loop, such as a Spark
    hydration, must not let it lapse), withdrawn by `stop()`."""

    def __init__(self, consensus: Consensus, ttl_ms: int = DEFAULT_TTL_MS) -> None:
        self.consensus = consensus
        self.ttl_ms = ttl_ms
        self.holder = f"tidemark serve {uuid.uuid4().hex[:8]}"
        self._started_ms = wall_clock_ms()
        self._indexes: dict[str, IndexState] = {}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="maintainer-heartbeat", daemon=True)

    def start(self) -> None:
        self._write(wall_clock_ms() + self.ttl_ms)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self.ttl_ms / 4000):
            try:
                self._write(wall_clock_ms() + self.ttl_ms)
            except Exception:
                log.warning("maintainer heartbeat not renewed", exc_info=True)

    def report_indexes(self, indexes: dict[str, IndexState]) -> None:
        """The indexes as the last maintenance round left them; written
        with the next renewal."""
        self._indexes = indexes

    def stop(self) -> None:
        """Stop renewing and expire the record now if it is still ours (a
        clean shutdown hands the views back to Dagster at once)."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        head = self.consensus.head(MAINTAINER_KEY)
        if head is not None and _decode(head.data).holder == self.holder:
            self._write(wall_clock_ms())

    def _write(self, expires_ms: int) -> None:
        record = {
            "holder": self.holder,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_ms": self._started_ms,
            "expires_ms": expires_ms,
            "indexes": {
                id: {
                    "since": state.since,
                    "upper": state.upper,
                    "rows": state.rows,
                    "hydrated": state.hydrated,
                }
                for id, state in self._indexes.items()
            },
        }
        data = json.dumps(record).encode()
        for _ in range(5):  # another server renewing at the same moment: last one wins
            head = self.consensus.head(MAINTAINER_KEY)
            expected = head.seqno if head is not None else None
            new = VersionedData((expected or 0) + 1, data)
            if self.consensus.compare_and_set(MAINTAINER_KEY, expected, new):
                return
