"""ReadHold: a capability to read a collection at `time` or later.

While a hold exists, the collection's since stays at or before `time`. Holds
are counted by the storage controller and backed by a leased reader on the
shard, so they also bind other processes and vanish if this one dies.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import TYPE_CHECKING

from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.storage.errors import IdentifierMissing

if TYPE_CHECKING:
    from coordinator_lib.storage.controller import StorageController


class ReadHold:
    def __init__(self, controller: StorageController, id: GlobalId, time: int) -> None:
        self.controller = controller
        self.id = id
        self.time: int | None = time

    @property
    def released(self) -> bool:
        return self.time is None

    def downgrade(self, time: int) -> None:
        """Let the since advance up to `time` (a hold never moves backwards)."""
        if self.time is None:
            raise ValueError(f"read hold on {self.id} was released")
        if time <= self.time:
            return
        change = Counter({time: 1})
        change[self.time] -= 1
        self.controller.update_read_capabilities({self.id: change})
        self.time = time

    def release(self) -> None:
        if self.time is None:
            return
        change: Counter[int] = Counter()
        change[self.time] -= 1
        self.time = None
        # If the collection was dropped, its holds went with it.
        with contextlib.suppress(IdentifierMissing):
            self.controller.update_read_capabilities({self.id: change})

    def __enter__(self) -> ReadHold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"ReadHold({self.id} @ {self.time})"


class DependencyHold:
    """A materialized view's durable hold on one of its inputs.

    Unlike a ReadHold it outlives its process: it is a critical reader on the
    input's shard named after the dependent view, shared by every process
    that maintains the view and moved forward by whichever steps it. So an
    input cannot compact past what the view needs next while nobody runs the
    view (a server restarting, a Dagster run that has ended), as Materialize's
    storage controller holds a materialized view's dependencies. Released
    only when the view is dropped."""

    def __init__(self, controller: StorageController, id: GlobalId, dependent: GlobalId) -> None:
        self.controller = controller
        self.id = id
        self.dependent = dependent
        self.time: int | None = None

    @property
    def reader_id(self) -> str:
        return f"dependent-{self.dependent}"

    @property
    def released(self) -> bool:
        return self.time is None

    def downgrade(self, time: int) -> None:
        """Let the input's since advance up to `time` (never backwards)."""
        from coordinator_lib.repr.frontier import Frontier

        if self.time is not None and time <= self.time:
            return  # held there already: no consensus read or write

        with contextlib.suppress(IdentifierMissing):
            shard = self.controller.shard(self.id)
            shard.downgrade_critical_since(self.reader_id, Frontier.at(time))
        self.time = time if self.time is None else max(self.time, time)

    def release(self) -> None:
        """The view is gone: stop holding its input back (in every process)."""
        self.time = None
        with contextlib.suppress(IdentifierMissing):
            self.controller.shard(self.id).expire_critical_reader(self.reader_id)

    def __repr__(self) -> str:
        return f"DependencyHold({self.id} for {self.dependent} @ {self.time})"
