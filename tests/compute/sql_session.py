"""A test-only SQL executor: statements in, storage and compute doing the work.

The real executor is the adapter (a later issue); this one is just enough to
drive maintained views with SQL text in tests:

- CREATE TABLE: a table collection (ids from the catalog: u1, u2, ...).
- INSERT / UPDATE / DELETE: the rows to write are read at the current time
  (read-then-write, evaluated by the test oracle `tests.sql.reference_eval`
  over the table's snapshot), then appended at the next timestamp.
- CREATE MATERIALIZED VIEW: a collection (since = now) and a dataflow that
  writes it; CREATE VIEW: catalog only (the planner inlines it).
- SELECT: a transient indexed dataflow at the current time, peeked.

Views step on Spark (`engine="spark"`) or in-process (`engine="local"`).

The clock is logical: every write statement gets its own timestamp `t` and
advances every table's upper to `t + 1`, so the views can step to it
(`step()`). With `retain_history` every collection is held at its creation
time, so tests can read any time since.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from coordinator_lib.compute import ComputeController, DataflowDescription
from coordinator_lib.compute.error_collection import errors_at
from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr import Frontier, GlobalId, Update
from coordinator_lib.sql import (
    CreateTablePlan,
    CreateViewPlan,
    DeletePlan,
    InMemoryCatalog,
    InsertPlan,
    SelectPlan,
    UpdatePlan,
    plan_statement,
)
from coordinator_lib.storage import (
    CollectionDescription,
    DataSource,
    ReadHold,
    StorageController,
    table_description,
)
from tests.sql.reference_eval import evaluate, finish

Row = tuple[Any, ...]
INSTANCE = "default"


class NoSpark:
    """The SparkSession of an in-process session: any use of it fails.

    In-process tests take no `spark` fixture, so they run beside the JVM
    tests instead of queueing behind them (tests/fixtures/one_jvm.py); this
    keeps them honest about not reaching Spark."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"an in-process SqlSession reached Spark (.{name})")


class SqlSession:
    """One environment: storage, compute (one instance, one replica), catalog."""

    def __init__(
        self,
        spark: SparkSession | None,
        root: Path,
        engine: str = "spark",
        retain_history: bool = True,
    ) -> None:
        """`engine`: "spark" runs every step on Spark, "local" in-process;
        `spark` None: in-process only (engine "local")."""
        self.storage = StorageController.open(str(root))
        self.compute = ComputeController(self.storage, spark or NoSpark())  # type: ignore[arg-type]
        self.set_engine(engine)
        self.compute.create_instance(INSTANCE)
        self.compute.add_replica(INSTANCE, "r1")
        self.catalog = InMemoryCatalog()
        self.now = 0  # the last timestamp written; tables' upper is now + 1
        self.tables: dict[GlobalId, str] = {}
        self.views: dict[GlobalId, str] = {}  # materialized views
        self.retain_history = retain_history
        self._holds: list[ReadHold] = []
        self._transient = 0

    def set_engine(self, engine: str) -> None:
        """Where the next steps run: "spark" or "local" (in-process)."""
        self.compute.local_max_rows = {"spark": 0, "local": 10**9}[engine]

    def close(self) -> None:
        for hold in self._holds:
            hold.release()
        self.storage.close()

    # ------------------------------------------------------------ statements
    def execute(self, sql: str) -> list[Row] | None:
        """Run one statement; a SELECT returns its rows, others None."""
        plan = plan_statement(sql, self.catalog)
        if isinstance(plan, CreateTablePlan):
            self._create_table(plan)
        elif isinstance(plan, CreateViewPlan):
            self._create_view(plan)
        elif isinstance(plan, InsertPlan):
            self._write(plan.id, self._read(plan.expr))
        elif isinstance(plan, DeletePlan):
            retract = self._read(plan.retract)
            self._write(plan.id, Counter({row: -n for row, n in retract.items()}))
        elif isinstance(plan, UpdatePlan):
            changes = self._read(plan.insert)
            changes.subtract(self._read(plan.retract))
            self._write(plan.id, changes)
        elif isinstance(plan, SelectPlan):
            return finish(self._peek(plan.expr), plan.finishing)
        else:
            raise TypeError(f"the test session cannot run {type(plan).__name__}")
        return None

    def _hold(self, id: GlobalId) -> None:
        if self.retain_history:
            self._holds.append(self.storage.acquire_read_hold(id, self.now))

    def _create_table(self, plan: CreateTablePlan) -> None:
        (item,) = self.catalog.apply(plan)
        self.storage.create_collections([(item.id, table_description(plan.desc, self.now))])
        self.storage.append([(item.id, [], self.now + 1)])
        self.tables[item.id] = item.name.item
        self._hold(item.id)

    def _create_view(self, plan: CreateViewPlan) -> None:
        (item,) = self.catalog.apply(plan)
        if not plan.materialized:
            return
        since = Frontier.at(self.now)
        self.storage.create_collections(
            [(item.id, CollectionDescription(plan.desc, DataSource.other(), since))]
        )
        self._hold(item.id)
        self.compute.create_dataflow(
            INSTANCE, DataflowDescription(item.id, plan.expr, self.now, sink_id=item.id)
        )
        self.views[item.id] = item.name.item

    def _read(self, expr: RelationExpr) -> Counter[Row]:
        """`expr` over the tables at the current time (for read-then-write)."""
        tables = {
            id: self.table_rows(id, self.now) for id in expr.depends_on() if id in self.tables
        }
        return evaluate(expr, tables)

    def _write(self, id: GlobalId, changes: Counter[Row]) -> None:
        """Append `changes` to table `id` at the next time; advance every table."""
        desc = self.storage.collection(id).description.desc
        for row, diff in changes.items():
            for value, column, name in zip(row, desc.types, desc.names, strict=True):
                if value is None and not column.nullable and diff > 0:
                    raise ValueError(f'null value in column "{name}" violates not-null')
        t = self.now + 1
        updates = [Update(row, t, diff) for row, diff in changes.items() if diff != 0]
        self.storage.append(
            [(table, updates if table == id else [], t + 1) for table in self.tables]
        )
        self.now = t

    # ----------------------------------------------------------------- reads
    def table_rows(self, id: GlobalId, t: int) -> list[Row]:
        """A table's rows at `t`, each repeated by its multiplicity."""
        return [row for row, diff in self.storage.snapshot(id, t) for _ in range(diff)]

    def snapshot(self, id: GlobalId, t: int) -> list[tuple[Row, int]]:
        return self.storage.snapshot(id, t)

    def errors(self, id: GlobalId, t: int) -> list[tuple[str, str, int]]:
        """A view's error collection at `t`: (code, message, count)."""
        return errors_at(self.storage.shard(id), t)

    def upper(self, id: GlobalId) -> int | None:
        return self.storage.shard(id).upper().time

    def _peek(self, expr: RelationExpr) -> Counter[Row]:
        """Evaluate `expr` at the current time with a transient indexed dataflow."""
        self._transient += 1
        id = GlobalId.transient(self._transient)
        self.compute.create_dataflow(
            INSTANCE, DataflowDescription(id, expr, self.now, index_key=())
        )
        try:
            while self.compute.collection_frontiers(INSTANCE, id).write_frontier.less_equal(
                self.now
            ):
                self.compute.process()
            return Counter({row: diff for row, diff in self.compute.peek(INSTANCE, id, self.now)})
        finally:
            self.compute.drop_collections(INSTANCE, [id])

    # -------------------------------------------------------------- stepping
    def step(self) -> int:
        """Process until every materialized view's upper reaches the tables'
        upper; returns the number of process() rounds."""
        target = self.now + 1
        rounds = 0
        while any(self.upper(id) != target for id in self.views):
            if rounds > len(self.views) + 10:
                lagging = [n for id, n in self.views.items() if self.upper(id) != target]
                raise RuntimeError(f"views {lagging} do not reach {target}")
            self.compute.process()
            rounds += 1
        return rounds
