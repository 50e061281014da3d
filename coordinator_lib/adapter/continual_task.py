"""Running continual tasks (`sql/plan_continual_task.py` says what they mean).

A task's output is a storage collection written only here. A step reads the
input's updates in `[upper, limit)` (`limit`: the least upper of the input
and every other relation the body reads), and for each time `t` there with
inserted rows, in order, runs the statements over: the rows inserted at `t`
(for the input), the task's contents before `t` plus the changes of the
earlier statements (for itself), and the other relations at `t`. All the
changes go to the collection in one `compare_and_append` from `upper` to
`limit`: a crash before it leaves nothing, so the next step (this process
after a restart, or another) runs the same times again from the durable
upper; a lost race (another process moved the upper) discards the result
and re-reads the contents. So every input time is processed exactly once.

The task holds its input with a `DependencyHold` at `upper - 1`, so the
input's updates at `upper` and after keep their own times while nobody runs
the task. Relations the body reads other than the input and itself are read
at `t` without a hold (a task far behind them may find them compacted: the
step then fails and is retried, reading them as of their since).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

from coordinator_lib.adapter.verify import verify_datum_desc
from coordinator_lib.expr.relation import Constant, Get, RelationExpr, replace_gets
from coordinator_lib.persist.errors import UpperMismatch
from coordinator_lib.repr import Frontier, GlobalId, Update
from coordinator_lib.sql.plan_continual_task import SELF, CreateContinualTaskPlan
from coordinator_lib.storage import CollectionDescription, DataSource

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator

log = logging.getLogger(__name__)
Row = tuple[Any, ...]


class ContinualTask:
    def __init__(self, coord: Coordinator, id: GlobalId, plan: CreateContinualTaskPlan) -> None:
        self.coord = coord
        self.id = id
        self.plan = plan
        self.references = sorted(set(plan.depends_on) - {plan.input})
        # The task's contents at `_contents_at` (its upper - 1), kept between
        # steps so a step reads only the input's new updates.
        self._contents: Counter | None = None
        self._contents_at: int | None = None
        self.hold: Any = None
        self.steps = 0  # committed steps (tests)
        self._stepping = threading.Lock()  # one step at a time in this process

    # ------------------------------------------------------------ lifecycle
    def install(self) -> None:
        """Create the collection (a new task starts at the input's upper: it
        reacts to inserts after it was created) or reopen it, and hold the
        input at the task's upper - 1."""
        storage = self.coord.storage
        # The start (the input's newest readable time + 1) is chosen, and the
        # input held there, under a hold at its since (Coordinator.held_as_of).
        with self.coord.held_as_of({self.plan.input}) as as_of:
            description = CollectionDescription(
                self.plan.desc, DataSource.other(), Frontier.at(as_of + 1)
            )
            storage.create_collections([(self.id, description)])
            _, own_upper = storage.collection_frontiers(self.id)
            if own_upper.time is not None:
                self.hold = storage.acquire_dependency_hold(
                    self.plan.input, self.id, max(own_upper.time - 1, 0)
                )

    def release(self) -> None:
        if self.hold is not None:
            self.hold.release()
            self.hold = None

    # ------------------------------------------------------------ stepping
    def limit(self) -> int | None:
        """The first time the task cannot process yet."""
        storage = self.coord.storage
        limit = None
        for id in [self.plan.input, *self.references]:
            if id.kind == "s":
                continue
            upper = storage.collection_frontiers(id)[1].time
            if upper is None:
                continue
            limit = upper if limit is None else min(limit, upper)
        return limit

    def step(self) -> int:
        """Process every input time it can; returns how many (0: nothing to
        do, another thread is stepping, or another process won the race)."""
        if not self._stepping.acquire(blocking=False):
            return 0
        try:
            return self._step()
        finally:
            self._stepping.release()

    def _step(self) -> int:
        storage = self.coord.storage
        since, upper = storage.collection_frontiers(self.id)
        lower = upper.time
        limit = self.limit()
        if lower is None or limit is None or limit <= lower:
            return 0
        input_shard = storage.shard(self.plan.input)
        inserted: dict[int, Counter] = {}
        for row, t, diff in input_shard.updates_between(lower, Frontier.at(limit)):
            if diff > 0:
                inserted.setdefault(t, Counter())[tuple(row)] += diff
        contents = self._contents_before(lower, since.time)
        writes: list[Update] = []
        for t in sorted(inserted):
            changes = self._run_at(t, inserted[t], contents)
            for row, diff in changes.items():
                if diff:
                    writes.append(Update(row, t, diff))
                    contents[row] += diff
            contents = +contents
        try:
            storage.shard(self.id).compare_and_append(
                writes, Frontier.at(lower), Frontier.at(limit)
            )
        except UpperMismatch as error:
            storage.update_write_frontiers([(self.id, error.current)])
            self._contents = None
            return 0
        storage.update_write_frontiers([(self.id, Frontier.at(limit))])
        self._contents, self._contents_at = contents, limit - 1
        if self.hold is not None:
            self.hold.downgrade(limit - 1)
        self.steps += 1
        return len(inserted)

    def _contents_before(self, lower: int, since: int | None) -> Counter:
        """The task's contents at `lower - 1` (empty before its first write)."""
        if self._contents is not None and self._contents_at == lower - 1:
            return Counter(self._contents)
        if since is None or since > lower - 1:
            return Counter()  # nothing written yet: the collection starts at `lower`
        contents: Counter = Counter()
        for row, diff in self.coord.storage.snapshot(self.id, lower - 1):
            contents[tuple(row)] += diff
        return +contents

    def _run_at(self, t: int, inserted: Counter, contents: Counter) -> Counter:
        """The statements at `t`: the changes they make (signed)."""
        changes: Counter = Counter()
        for kind, expr in self.plan.statements:
            current = Counter(contents)
            current.update(changes)
            rows = self._evaluate(expr, t, inserted, +current)
            if kind == "insert":
                verify_datum_desc(self.plan.desc, [row for row, diff in rows if diff > 0])
                for row, diff in rows:
                    changes[tuple(row)] += diff
            else:
                for row, diff in rows:
                    changes[tuple(row)] -= diff
        return changes

    def _evaluate(
        self, expr: RelationExpr, t: int, inserted: Counter, current: Counter
    ) -> list[tuple[Row, int]]:
        def fill(get: Get) -> RelationExpr | None:
            if get.id == self.plan.input:
                return Constant(tuple(inserted.items()), get.desc)
            if get.id == SELF:
                return Constant(tuple(current.items()), get.desc)
            return None

        bound = self.coord.with_system_relations(replace_gets(expr, fill))
        return self.coord.compute.peek_expr(bound, t)
