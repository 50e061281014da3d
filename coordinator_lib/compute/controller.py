"""The compute controller (seed 001): instances, replicas, dataflows, peeks
and subscribes, and the read holds that stop inputs from compacting past
what a dataflow still needs.

A dataflow reads its inputs at (its upper - 1) and at later times, so the
controller holds each input there and moves the holds forward after each
step: compaction of an input never passes the dataflow (invariant 5).

Replicas here are in-process executors sharing the controller's Spark
session; each hydrates its dataflows one at a time in creation order
(sequential hydration) and steps them. A materialized view may be maintained
by any number of replicas: compare_and_append on the output shard decides
who lands each step. Worker processes and their scheduling come with the
scheduler (seed 004).

Deviations from seed 001: methods are synchronous; `process()` is the work
loop (the seed's `ready`/`process` pair folded into one).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import SparkSession

from coordinator_lib.compute import budget
from coordinator_lib.compute.arranged import stream_peek
from coordinator_lib.compute.arrangement import (
    Arrangement,
    LocalArrangement,
    SparkArrangement,
)
from coordinator_lib.compute.dataflow import (
    DataflowDescription,
    StepResult,
    next_step_bounds,
    plan_step,
    plan_step_local,
    step,
    step_frontier,
    stored_rows,
)
from coordinator_lib.compute.engine import LOCAL_MAX_ROWS, Engine, Work, choose_engine
from coordinator_lib.compute.error_collection import (
    join_keys_mapped,
    raise_errors,
    raise_errors_from,
    raise_first,
)
from coordinator_lib.compute.errors import (
    CollectionMissing,
    DataflowCreationError,
    InstanceExists,
    InstanceMissing,
    PeekError,
    ReplicaMissing,
)
from coordinator_lib.compute.local_scalar import EvalError
from coordinator_lib.compute.spark_cancel import cancelable_jobs
from coordinator_lib.compute.spark_errors import exact_on_failure
from coordinator_lib.expr.relation import Get, RelationExpr
from coordinator_lib.expr.temporal import substitute_mz_now
from coordinator_lib.persist.read_scope import held_reads
from coordinator_lib.persist.shard import Shard
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.read_policy import LagWriteFrontier, ReadPolicy
from coordinator_lib.repr.relation import DIFF_COLUMN, column_pylist
from coordinator_lib.repr.update import Row, Update
from coordinator_lib.storage.controller import StorageController
from coordinator_lib.storage.errors import StorageError
from coordinator_lib.storage.read_hold import DependencyHold, ReadHold

log = logging.getLogger(__name__)

# How many of a dataflow's latest step results it keeps (for tests and
# introspection): a dataflow steps every tick for as long as it runs, so
# keeping them all grows the server without bound (issue 18's soak).
RECENT_STEPS = 64


@dataclass
class Dataflow:
    description: DataflowDescription
    input_holds: dict[GlobalId, ReadHold | DependencyHold]
    output: Shard | None  # the materialized view's shard
    arrangement: Arrangement | None  # the index
    read_policy: ReadPolicy = field(default_factory=lambda: LagWriteFrontier(1000))
    steps: deque[StepResult] = field(default_factory=lambda: deque(maxlen=RECENT_STEPS))
    # Times peeks are waiting to read the arrangement at: it does not compact past them.
    peek_holds: list[int] = field(default_factory=list)
    # Why the last step failed, if it did (process() logs each new one once;
    # reads waiting for the dataflow answer with it).
    failure: Exception | None = None

    @property
    def write_frontier(self) -> Frontier:
        if self.output is not None:
            return self.output.upper()
        assert self.arrangement is not None
        return self.arrangement.upper


def _hydrated(dataflow: Dataflow) -> bool:
    """Past its as_of: its first step landed (or closed it for good)."""
    return dataflow.write_frontier > Frontier.at(dataflow.description.as_of)


@dataclass
class Replica:
    id: str
    hydrated: set[GlobalId] = field(default_factory=set)


@dataclass
class Instance:
    id: str
    replicas: dict[str, Replica] = field(default_factory=dict)
    dataflows: dict[GlobalId, Dataflow] = field(default_factory=dict)


@dataclass(frozen=True)
class CollectionFrontiers:
    """A compute collection's write frontier and read frontier (since)."""

    write_frontier: Frontier
    read_frontier: Frontier


@dataclass(frozen=True)
class SubscribeBatch:
    """Updates with times in [lower, upper), then progress to `upper`."""

    updates: tuple[Update, ...]
    upper: Frontier


class ComputeController:
    def __init__(
        self,
        storage: StorageController,
        spark: SparkSession,
        local_max_rows: int = LOCAL_MAX_ROWS,
    ) -> None:
        """`local_max_rows`: steps over inputs storing at most this many updates
        run in-process instead of on Spark (0: always Spark)."""
        self.storage = storage
        self.spark = spark
        self.local_max_rows = local_max_rows
        self._instances: dict[str, Instance] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------ instances
    def _instance(self, id: str) -> Instance:
        try:
            return self._instances[id]
        except KeyError:
            raise InstanceMissing(id) from None

    def create_instance(self, id: str) -> None:
        with self._lock:
            if id in self._instances:
                raise InstanceExists(id)
            self._instances[id] = Instance(id)

    def drop_instance(self, id: str) -> None:
        with self._lock:
            instance = self._instance(id)
            self.drop_collections(id, list(instance.dataflows))
            del self._instances[id]

    def add_replica(self, instance_id: str, replica_id: str) -> None:
        with self._lock:
            instance = self._instance(instance_id)
            instance.replicas.setdefault(replica_id, Replica(replica_id))

    def drop_replica(self, instance_id: str, replica_id: str) -> None:
        with self._lock:
            instance = self._instance(instance_id)
            if replica_id not in instance.replicas:
                raise ReplicaMissing(instance_id, replica_id)
            del instance.replicas[replica_id]

    # ------------------------------------------------------------ dataflows
    def create_dataflow(self, instance_id: str, description: DataflowDescription) -> None:
        """Install a dataflow: hold every input at its as_of (inputs cannot
        compact past the dataflow's since), then let replicas hydrate it."""
        with self._lock:
            instance = self._instance(instance_id)
            holds: dict[GlobalId, ReadHold | DependencyHold] = {}
            # A materialized view holds its inputs durably (it resumes in any
            # process, at any later time); indexes, peeks and subscribes are
            # this process's business and hold with leases.
            sink = description.sink_id
            durable = sink is not None and sink.kind == "u"
            try:
                for input_id in sorted(description.imports):
                    try:
                        if durable:
                            assert sink is not None
                            holds[input_id] = self.storage.acquire_dependency_hold(
                                input_id, sink, description.as_of
                            )
                        else:
                            holds[input_id] = self.storage.acquire_read_hold(
                                input_id, description.as_of
                            )
                    except StorageError as error:
                        since = self.storage.collection(input_id).since
                        raise DataflowCreationError(
                            description.id, input_id, description.as_of, since
                        ) from error
            except BaseException:
                for hold in holds.values():
                    if isinstance(hold, ReadHold):  # a durable hold may be another process's
                        hold.release()
                raise
            output = None
            if description.sink_id is not None:
                output = self.storage.shard(description.sink_id)
            arrangement = None
            if description.index_key is not None:
                arrangement = LocalArrangement(
                    description.desc, description.index_key, description.as_of
                )
            # Join keys that can fail become Map columns: their errors are row errors.
            runs = dataclasses.replace(description, expr=join_keys_mapped(description.expr))
            instance.dataflows[description.id] = Dataflow(runs, holds, output, arrangement)

    def drop_collections(self, instance_id: str, ids: list[GlobalId]) -> None:
        """Remove dataflows and release their holds on inputs."""
        with self._lock:
            instance = self._instance(instance_id)
            for id in ids:
                if id not in instance.dataflows:
                    raise CollectionMissing(id)
            for id in ids:
                dataflow = instance.dataflows.pop(id)
                for hold in dataflow.input_holds.values():
                    hold.release()
                for replica in instance.replicas.values():
                    replica.hydrated.discard(id)

    def forget_dataflows(self, instance_id: str, ids: list[GlobalId]) -> None:
        """Stop running dataflows here without dropping their views: this
        process's leased holds are released, the views' durable dependency
        holds stay (another process runs them now: the table scheduler moved
        them)."""
        with self._lock:
            instance = self._instance(instance_id)
            for id in ids:
                dataflow = instance.dataflows.pop(id, None)
                if dataflow is None:
                    continue
                for hold in dataflow.input_holds.values():
                    if isinstance(hold, ReadHold):
                        hold.release()
                for replica in instance.replicas.values():
                    replica.hydrated.discard(id)

    def set_read_policy(
        self, instance_id: str, policies: list[tuple[GlobalId, ReadPolicy]]
    ) -> None:
        with self._lock:
            instance = self._instance(instance_id)
            for id, policy in policies:
                dataflow = instance.dataflows.get(id)
                if dataflow is None:
                    raise CollectionMissing(id)
                dataflow.read_policy = policy
                if dataflow.output is not None and dataflow.description.sink_id is not None:
                    self.storage.set_read_policy([(dataflow.description.sink_id, policy)])

    def collection_frontiers(self, instance_id: str, id: GlobalId) -> CollectionFrontiers:
        with self._lock:
            dataflow = self._dataflow(instance_id, id)
            if dataflow.arrangement is not None:
                return CollectionFrontiers(dataflow.arrangement.upper, dataflow.arrangement.since)
            assert dataflow.output is not None
            return CollectionFrontiers(dataflow.output.upper(), dataflow.output.since())

    def _dataflow(self, instance_id: str, id: GlobalId) -> Dataflow:
        dataflow = self._instance(instance_id).dataflows.get(id)
        if dataflow is None:
            raise CollectionMissing(id)
        return dataflow

    def instance_ids(self) -> list[str]:
        with self._lock:
            return list(self._instances)

    def find_dataflow(self, id: GlobalId) -> tuple[str, Dataflow] | None:
        """The instance running dataflow `id`, and the dataflow."""
        with self._lock:
            for instance_id, instance in self._instances.items():
                if id in instance.dataflows:
                    return instance_id, instance.dataflows[id]
        return None

    def index_of(self, id: GlobalId) -> tuple[str, Dataflow] | None:
        """An index dataflow arranging the collection `id` itself, if any."""
        with self._lock:
            for instance_id, instance in self._instances.items():
                for dataflow in instance.dataflows.values():
                    d = dataflow.description
                    if d.index_key is not None and isinstance(d.expr, Get) and d.expr.id == id:
                        return instance_id, dataflow
        return None

    def transient_readers(self, id: GlobalId) -> list[GlobalId]:
        """The transient dataflows (a SUBSCRIBE's view) that read `id`."""
        with self._lock:
            return [
                reader
                for instance in self._instances.values()
                for reader, dataflow in instance.dataflows.items()
                if reader.kind == "t" and id in dataflow.description.imports
            ]

    def recent_steps(self) -> dict[GlobalId, list[StepResult]]:
        """Each dataflow's latest step results (mz_internal). Read without
        the lock, which a step holds for as long as it runs: copying a dict
        or a deque is one operation under the GIL."""
        return {
            id: list(dataflow.steps)
            for instance in list(self._instances.values())
            for id, dataflow in list(instance.dataflows.items())
        }

    def dataflow(self, instance_id: str, id: GlobalId) -> Dataflow:
        with self._lock:
            return self._dataflow(instance_id, id)

    # ------------------------------------------------------------- stepping
    def process(self, until: int | None = None) -> list[StepResult]:
        """One round of work on every replica: hydrate the next dataflow not
        yet hydrated (sequential hydration), step the hydrated ones."""
        results: list[StepResult] = []
        with self._lock:
            for instance in self._instances.values():
                for replica in instance.replicas.values():
                    results += self._process_replica(instance, replica, until)
        return results

    def _process_replica(
        self, instance: Instance, replica: Replica, until: int | None
    ) -> list[StepResult]:
        results = []
        hydrating_one = False
        for id, dataflow in instance.dataflows.items():
            hydrated = id in replica.hydrated
            if not hydrated and hydrating_one:
                continue  # one hydration at a time, in creation order
            try:
                result = self._step_dataflow(dataflow, until)
            except Exception as error:
                # One dataflow's failure (an error its error collection does
                # not cover) stops only that dataflow, and is logged once.
                self._failed(dataflow, error)
                continue
            dataflow.failure = None
            if result is not None:
                results.append(result)
                # Only a hydration that did work takes the round's turn: one
                # whose inputs have not moved past its as_of yet must not
                # hold back the dataflows created after it.
                hydrating_one = hydrating_one or not hydrated
            if _hydrated(dataflow):
                replica.hydrated.add(id)
        return results

    @staticmethod
    def _failed(dataflow: Dataflow, error: Exception) -> None:
        error = _evaluation_error(error)
        previous = dataflow.failure
        if previous is None or (type(previous), str(previous)) != (type(error), str(error)):
            log.warning(
                "dataflow %s failed to step: %s: %s",
                dataflow.description.id,
                type(error).__name__,
                error,
            )
        dataflow.failure = error

    def step_dataflow(self, id: GlobalId, until: int | None = None) -> StepResult | None:
        """Step one dataflow once (its hydration, if it has none yet), on
        whichever instance runs it: an orchestrator materializing one view or
        index does this instead of a whole `process()` round."""
        with self._lock:
            found = self.find_dataflow(id)
            if found is None:
                raise CollectionMissing(id)
            instance_id, dataflow = found
            result = self._step_dataflow(dataflow, until)
            if _hydrated(dataflow):
                for replica in self._instances[instance_id].replicas.values():
                    replica.hydrated.add(id)
            return result

    def _step_dataflow(self, dataflow: Dataflow, until: int | None) -> StepResult | None:
        inputs = {id: self.storage.shard(id) for id in dataflow.description.imports}
        # The step's Spark jobs run before it returns (its output is written,
        # an index checkpoints eagerly): hold what they planned until then.
        with held_reads():
            if dataflow.output is not None:
                result = step(
                    self.spark,
                    dataflow.description,
                    inputs,
                    dataflow.output,
                    until,
                    local_max_rows=self.local_max_rows,
                )
            else:
                result = self._step_index(dataflow, inputs, until)
        if result is not None:
            dataflow.steps.append(result)
        self._downgrade_holds(dataflow)
        return result

    def _step_index(
        self, dataflow: Dataflow, inputs: dict[GlobalId, Shard], until: int | None
    ) -> StepResult | None:
        arrangement = dataflow.arrangement
        assert arrangement is not None
        started = time.perf_counter()
        lower = arrangement.upper.time
        upper = next_step_bounds(lower, inputs, until)
        if upper is None or lower is None:
            return None
        on_spark = isinstance(arrangement, SparkArrangement)
        engine = choose_engine(
            Work.INDEX_STEP, stored_rows(inputs), self.local_max_rows, has_state=on_spark
        )
        if engine is Engine.LOCAL:
            assert isinstance(arrangement, LocalArrangement)
            # The rows are computed before the arrangement changes: a step
            # that raises leaves it as it was.
            updates, errors, rules = plan_step_local(dataflow.description, inputs, lower, upper)
            arrangement.apply(updates, lower, step_frontier(upper), errors)
        else:
            if isinstance(arrangement, LocalArrangement):  # its inputs outgrew the local engine
                arrangement = dataflow.arrangement = SparkArrangement.moved_from(
                    self.spark, arrangement
                )
            assert isinstance(arrangement, SparkArrangement)
            spark_arrangement = arrangement

            def apply() -> list[tuple[str, str]]:
                delta, errors, rules = plan_step(
                    self.spark, dataflow.description, inputs, lower, upper
                )
                spark_arrangement.apply(delta, lower, step_frontier(upper), errors)
                return rules

            rules = exact_on_failure(apply)
        policy_since = dataflow.read_policy.frontier(arrangement.upper)
        if dataflow.peek_holds:
            policy_since = policy_since.meet(Frontier.at(min(dataflow.peek_holds)))
        if policy_since > arrangement.since:
            arrangement.compact(policy_since)
        return StepResult(lower, upper, 0, True, time.perf_counter() - started, rules, engine)

    def _downgrade_holds(self, dataflow: Dataflow) -> None:
        """The next step reads inputs at (write frontier - 1) and later."""
        frontier = dataflow.write_frontier
        if frontier.time is None or frontier.time == 0:
            return
        for hold in dataflow.input_holds.values():
            hold.downgrade(max(frontier.time - 1, dataflow.description.as_of))

    # ---------------------------------------------------------------- reads
    def hold_index(self, instance_id: str, id: GlobalId, timestamp: int) -> bool:
        """Keep index `id` readable at `timestamp` until `release_index`;
        False (no hold taken) if it has compacted past it already."""
        with self._lock:
            dataflow = self._dataflow(instance_id, id)
            arrangement = dataflow.arrangement
            if arrangement is None or not arrangement.since.less_equal(timestamp):
                return False
            dataflow.peek_holds.append(timestamp)
            return True

    def release_index(self, instance_id: str, id: GlobalId, timestamp: int) -> None:
        with self._lock:
            found = self._instance(instance_id).dataflows.get(id)
            if found is not None and timestamp in found.peek_holds:
                found.peek_holds.remove(timestamp)

    def peek(self, instance_id: str, id: GlobalId, timestamp: int) -> list[tuple[Row, int]]:
        """The contents of `id` at `timestamp`: from the index arrangement when
        there is one (no persist read), else from its storage collection."""
        with self._lock:
            instance = self._instance(instance_id)
            for dataflow in instance.dataflows.values():
                arrangement = dataflow.arrangement
                if arrangement is not None and (
                    dataflow.description.id == id or dataflow.description.sink_id == id
                ):
                    try:
                        rows = arrangement.peek_rows(timestamp)
                    except ValueError as error:
                        raise PeekError(f"peek of {id}: {error}") from error
                    for code, message in arrangement.errors_at(timestamp):
                        raise EvalError(message, code)
                    return rows
        with self.storage.acquire_read_hold(id, timestamp):
            return self.storage.snapshot(id, timestamp)

    def peek_expr(self, expr: RelationExpr, timestamp: int) -> list[tuple[Row, int]]:
        """`stream_expr`'s rows, all of them."""
        return list(self.stream_expr(expr, timestamp))

    def stream_expr(self, expr: RelationExpr, timestamp: int) -> Iterable[tuple[Row, int]]:
        """Evaluate `expr` over its inputs at `timestamp` once (a transient
        dataflow that hydrates and is dropped): in-process when the inputs
        are small, its rows computed as they are read (arranged.stream_peek),
        else one Spark job. The caller holds the inputs readable at
        `timestamp` and waited for their uppers to pass it; the inputs are
        read before this returns."""
        expr = substitute_mz_now(expr, timestamp)  # mz_now() is the time read at
        expr = join_keys_mapped(expr)  # a failing join key fails as its Map (exact errors)
        inputs = {id: self.storage.shard(id) for id in expr.depends_on()}
        description = DataflowDescription(GlobalId.transient(0), expr, timestamp)
        engine = choose_engine(Work.PEEK, stored_rows(inputs), self.local_max_rows)
        if engine is Engine.LOCAL:
            return stream_peek(description.expr, inputs, timestamp)
        with held_reads(), cancelable_jobs(self.spark, budget.current()):
            table = exact_on_failure(lambda: self._spark_peek(description, inputs, timestamp))
            if table is None:
                return []
        names = list(description.desc.names)
        columns = [column_pylist(table.column(i)) for i in range(len(names))]
        diffs = table.column(DIFF_COLUMN).to_pylist()
        rows = [(tuple(c[i] for c in columns), diffs[i]) for i in range(table.num_rows)]
        return budget.charge_list(rows)

    def _spark_peek(
        self, description: DataflowDescription, inputs: dict[GlobalId, Shard], timestamp: int
    ) -> pa.Table | None:
        delta, errors, _ = plan_step(self.spark, description, inputs, timestamp, timestamp + 1)
        raise_first(errors)
        return None if delta is None else delta.toArrow()

    def raise_errors(self, ids: set[GlobalId], timestamp: int) -> None:
        """A read of `ids` at `timestamp` fails with the first error of any of
        their error collections (compute/error_collection.py)."""
        raise_errors([self.storage.shard(id) for id in sorted(ids)], timestamp)

    def subscribe(
        self,
        id: GlobalId,
        as_of: int,
        up_to: int | None = None,
        timeout_s: float | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[SubscribeBatch]:
        """The snapshot at `as_of` (stamped `as_of`), then every change after
        it, in batches that end with the progress made; stops at `up_to`,
        after `timeout_s`, or soon after `stop` is set. Raises the
        collection's error (EvalError) at the first time it has one, as a
        read at that time would (compute/error_collection.py)."""
        shard = self.storage.shard(id)
        hold = self.storage.acquire_read_hold(id, as_of)
        stopped = stop.is_set if stop is not None else (lambda: False)
        try:
            while shard.upper().less_equal(as_of):
                if stopped():
                    return
                time.sleep(0.05)
            raise_errors([shard], as_of)
            snapshot = tuple(Update(row, as_of, diff) for row, diff in shard.snapshot(as_of))
            listen = shard.listen(as_of)
            hold.release()
            try:
                yield SubscribeBatch(snapshot, Frontier.at(as_of + 1))
                pending: list[Update] = []
                lower = as_of + 1
                deadline = None if timeout_s is None else time.monotonic() + timeout_s
                while not listen.done and not stopped():
                    if deadline is not None and time.monotonic() > deadline:
                        return
                    for event in listen.events(0.25):
                        if event.updates:
                            pending += [u for u in event.updates if up_to is None or u.time < up_to]
                        if event.progress is not None:
                            upper = event.progress
                            if up_to is not None and not upper.less_than(up_to):
                                upper = Frontier.at(up_to)
                            raise_errors_from(shard, lower, upper)
                            yield SubscribeBatch(tuple(pending), upper)
                            if upper.time is None or upper.time == up_to:
                                return
                            pending, lower = [], upper.time
            finally:
                listen.close()
        finally:
            hold.release()


def _evaluation_error(error: Exception) -> Exception:
    """A Spark job's data exception (SQLSTATE class 22: overflow, a bad cast)
    as the EvalError it is, with Spark's SQLSTATE (PostgreSQL's codes) and
    the first line of its message; any other failure as it is."""
    sql_state = getattr(error, "getSqlState", None)
    code = sql_state() if callable(sql_state) else None
    if isinstance(code, str) and code.startswith("22"):
        return EvalError(str(error).strip().splitlines()[0], code)
    return error
