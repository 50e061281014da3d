"""In-process steps over arrangements: a step costs its delta, not the data.

Each stateful operator of a view keeps its input arranged by key in the
arrangement store (persist/arrangement_store.py): a join each input by its
join key, a Reduce its aggregates' values by group key (a COUNT/SUM/MIN/MAX
Reduce only each group's accumulators, its DISTINCT values' multiplicities
and its MIN/MAX values in order), Distinct and Threshold their input by row,
TopK its input by group key in its order, Window by
partition key, and a temporal filter its future insertions and retractions
by time. A step reads its inputs' updates in [lower, upper) and, for each
stateful operator, only the keys its delta touches (`StepState.arrange*`;
of a group in order, its first rows), or the times the step reaches, never
an input's old contents.

The state's upper follows the output's. A step computes the output from
the state at `lower`, lands the output (compare_and_append), then moves the
state from `lower` to `upper` in one fenced apply (`land`). So:
- a writer that lost the output's race writes no state;
- a crash between the two writes leaves the state behind the output, and
  the next step first redoes [state upper, output upper) for the state
  only (`prepare`; every arrangement is a function of the inputs' updates
  in that range, whoever computed the output, Spark steps included);
- if that is impossible (an input compacted past the state) or the state
  is missing or ahead, the step reads the old contents as before and
  replaces the state with them (hydration), once;
- over inputs too large for that (or far ahead of the state, after Spark
  steps), Spark computes each stateful operator's input and the same
  in-process rules key it into the state before the step (`hydrate`),
  a chunk at a time into a staged state that one fenced swap makes the
  view's.
A closing step (inputs closed for ever) and a view without stateful
operators keep no state.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from coordinator_lib.compute import plan
from coordinator_lib.compute.error_collection import input_errors, raise_first
from coordinator_lib.compute.local import (
    LocalContext,
    LocalRendered,
    OldIterable,
    render_local,
    stream_local,
)
from coordinator_lib.expr.relation import (
    Distinct,
    Join,
    Reduce,
    RelationExpr,
    Threshold,
    TopK,
    Window,
)
from coordinator_lib.expr.temporal import TemporalFilter
from coordinator_lib.persist.arrangement_store import (
    ArrangementStats,
    ArrangementStore,
    DataflowState,
    KeyedUpdate,
    OrderedUpdate,
    Staging,
    TimedUpdate,
)
from coordinator_lib.persist.shard import Shard, SnapshotRows
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.update import Row, Update, consolidate

if TYPE_CHECKING:
    from coordinator_lib.compute.dataflow import DataflowDescription

STATEFUL = (Join, Reduce, Distinct, Threshold, TopK, Window, TemporalFilter)
Key = tuple[Any, ...]
KeyedRows = dict[Key, list[tuple[Row, int]]]
T = TypeVar("T")

# Updates of one operator a Spark hydration holds before writing them to the
# staged state (`hydrate`): its Python memory is a few chunks, not the state.
HYDRATE_CHUNK_ROWS = 50_000


class _Spool(list[T]):
    """An operator's pending updates while hydrating into a staged state:
    written out (`drain`) every `size` rows."""

    def __init__(self, write: Callable[[list[T]], None], size: int) -> None:
        super().__init__()
        self._write = write
        self._size = max(size, 1)

    def append(self, item: T) -> None:
        super().append(item)
        if len(self) >= self._size:
            self.drain()

    def extend(self, items: Iterable[T]) -> None:
        iterator = iter(items)
        while chunk := list(itertools.islice(iterator, self._size - len(self))):
            super().extend(chunk)
            if len(self) >= self._size:
                self.drain()

    def drain(self) -> None:
        if self:
            rows = list(self)
            self.clear()
            self._write(rows)


@dataclass
class StepReads:
    """What a step read: its inputs' updates in [lower, upper), rows of
    inputs' old contents (a full snapshot each) and rows of arranged state."""

    delta: int = 0
    snapshot: int = 0
    state: int = 0


@dataclass
class StepState:
    """A step's view of its dataflow's arrangements: keyed reads at the
    step's lower, and the keyed updates it will land at its upper.
    `hydrating`: there is no usable state at lower, so the rules read their
    inputs' old contents and the step writes them all as the new state."""

    state: DataflowState
    expected_upper: int | None
    hydrating: bool
    reads: StepReads
    pending: dict[str, list[KeyedUpdate]] = field(default_factory=dict)
    pending_timed: dict[str, list[TimedUpdate]] = field(default_factory=dict)
    pending_ordered: dict[str, list[OrderedUpdate]] = field(default_factory=dict)
    # A Spark hydration's staged state (`hydrate`): pending updates are
    # written there every `chunk_rows` rows instead of kept until `land`.
    staging: Staging | None = None
    chunk_rows: int = 0
    _operators: int = 0

    def _pending(self, table: dict[str, list[Any]], operator: str, kind: str) -> list[Any]:
        """The list an operator's pending updates go to: a `_Spool` writing
        them to the staged state when hydrating into one."""
        found = table.get(operator)
        if found is None:
            staging = self.staging
            if staging is None:
                found = table[operator] = []
            else:

                def write(rows: list[Any]) -> None:
                    assert staging is not None
                    staging.write(**{kind: {operator: rows}})

                found = table[operator] = _Spool(write, self.chunk_rows)
        return found

    def flush(self) -> None:
        """Write what every operator's spool still holds to the staged state."""
        for table in (self.pending, self.pending_timed, self.pending_ordered):
            for pending in table.values():
                if isinstance(pending, _Spool):
                    pending.drain()

    def _operator(self, kind: str) -> str:
        # Operators are numbered in rendering order, the same at every step.
        self._operators += 1
        return f"{self._operators}.{kind}"

    def _reader(self, operator: str) -> Callable[[Iterable[Key | None]], KeyedRows]:
        def read(keys: Iterable[Key | None]) -> KeyedRows:
            found = self.state.arrangement(operator).read(k for k in keys if k is not None)
            self.reads.state += sum(len(rows) for rows in found.values())
            return found

        return read

    def _keep(
        self,
        operator: str,
        delta: Iterable[Update] | None,
        key_of: Callable[[Row], Key | None],
        keyed_old: Callable[[], Iterable[tuple[Key | None, Row, int]]] | None,
    ) -> None:
        pending = self._pending(self.pending, operator, "changes")
        if self.hydrating and keyed_old is not None:
            pending.extend((k, r, d) for k, r, d in keyed_old() if k is not None)
        for row, _, diff in delta or ():
            key = key_of(row)
            if key is not None:
                pending.append((key, row, diff))

    def arrange(
        self,
        delta: Iterable[tuple[Key, Row, int]],
        keyed_old: Callable[[], Iterable[tuple[Key, Row, int]]] | None,
    ) -> Callable[[Iterable[Key]], KeyedRows] | None:
        """An input arranged by key (a Reduce's values, a Distinct's rows, a
        Window's), `delta` its keyed changes: the reader of its rows at the
        step's lower by key, or None when hydrating (then read `keyed_old`,
        which this writes as the state)."""
        operator = self._operator("by key")
        pending = self._pending(self.pending, operator, "changes")
        if self.hydrating and keyed_old is not None:
            pending.extend(keyed_old())
        pending.extend(delta)
        return None if self.hydrating else self._reader(operator)

    def arrange_accumulators(
        self,
    ) -> tuple[Callable[[Iterable[Key]], KeyedRows] | None, list[KeyedUpdate]]:
        """A Reduce's groups as accumulators (compute/local_groups.py), one
        row per group key: the reader of those at lower (None when
        hydrating), and the list the step adds its changes to (each touched
        group's old row retracted, its new one inserted; when hydrating,
        every group's)."""
        operator = self._operator("accumulators")
        pending = self._pending(self.pending, operator, "changes")
        return (None if self.hydrating else self._reader(operator)), pending

    def arrange_in_order(
        self,
        delta: Iterable[tuple[Key, Row, int]],
        ord_of: Callable[[Row], bytes],
        keyed_old: Callable[[], Iterable[tuple[Key, Row, int]]] | None,
    ) -> Callable[[Key, int | None], list[tuple[Row, int]]] | None:
        """Rows arranged by key and, within a key, in the order `ord_of`
        gives (compute/order_bytes.py): TopK's input, a MIN/MAX's values.
        The reader gives a key's first `count` rows at lower and those tied
        with the last (all for None), or is None when hydrating (then read
        `keyed_old`, which this writes as the state)."""
        operator = self._operator("in order")
        pending = self._pending(self.pending_ordered, operator, "ordered")
        if self.hydrating and keyed_old is not None:
            pending.extend((k, ord_of(r), r, d) for k, r, d in keyed_old())
        pending.extend((k, ord_of(r), r, d) for k, r, d in delta)
        if self.hydrating:
            return None
        arrangement = self.state.arrangement(operator)

        def read(key: Key, count: int | None) -> list[tuple[Row, int]]:
            found = arrangement.read_first(key, count)
            self.reads.state += len(found)
            return found

        return read

    def hydrate_in_order(
        self, delta: Iterable[tuple[Key, Row, int]], ord_of: Callable[[Row], bytes]
    ) -> Callable[[Key, Row, int], None]:
        """`arrange_in_order` when hydrating from old rows its caller reads
        once for several arrangements (a Reduce's MIN/MAX values, DISTINCT
        values and accumulators: reading them again would compute them
        again): the adder of one old row."""
        assert self.hydrating
        operator = self._operator("in order")
        pending = self._pending(self.pending_ordered, operator, "ordered")
        pending.extend((k, ord_of(r), r, d) for k, r, d in delta)
        return lambda k, r, d: pending.append((k, ord_of(r), r, d))

    def hydrate_by_key(
        self, delta: Iterable[tuple[Key, Row, int]]
    ) -> Callable[[Key, Row, int], None]:
        """`arrange` when hydrating from old rows read once for several
        arrangements, as `hydrate_in_order`: the adder of one old row."""
        assert self.hydrating
        operator = self._operator("by key")
        pending = self._pending(self.pending, operator, "changes")
        pending.extend(delta)
        return lambda k, r, d: pending.append((k, r, d))

    def arrange_by_time(self, later: Iterable[Update]) -> Callable[[int, int], list[Update]] | None:
        """A temporal filter's changes arranged by the time they are due:
        `later` (those this step learns of, due at or past its upper) are
        kept; the reader gives those due in [lower, upper), or None when
        hydrating (then `later` must include the old contents' too)."""
        operator = self._operator("by time")
        self._pending(self.pending_timed, operator, "timed").extend(
            (u.time, u.row, u.diff) for u in later
        )
        if self.hydrating:
            return None
        arrangement = self.state.arrangement(operator)

        def read(lower: int, upper: int) -> list[Update]:
            found = [Update(r, t, d) for t, r, d in arrangement.read_between(lower, upper)]
            self.reads.state += len(found)
            return found

        return read

    def arrange_join(
        self,
        left: LocalRendered,
        right: LocalRendered,
        left_key: Callable[[Row], Key | None],
        right_key: Callable[[Row], Key | None],
    ) -> tuple[Callable[[Iterable[Key | None]], KeyedRows], ...] | None:
        """Both inputs of a binary join arranged by their join keys (rows
        whose key has a NULL never match and are not kept): readers of the
        left's and the right's rows at lower, or None when hydrating."""
        sides = (
            (self._operator("join left"), left, left_key),
            (self._operator("join right"), right, right_key),
        )
        for operator, side, key_of in sides:
            old = side.old
            keyed = None if old is None else (lambda old=old, k=key_of: _keyed(old(), k))
            self._keep(operator, side.delta, key_of, keyed)
        if self.hydrating:
            return None
        return tuple(self._reader(operator) for operator, _, _ in sides)


def _keyed(
    rows: Iterable[tuple[Row, int]], key_of: Callable[[Row], Hashable]
) -> Iterator[tuple[Any, Row, int]]:
    return ((key_of(r), r, d) for r, d in rows)


def is_stateful(expr: RelationExpr) -> bool:
    """Whether the plan has an operator that keeps arranged state."""
    seen: set[int] = set()
    todo = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, STATEFUL):
            return True
        if id(node) not in seen:  # subplans may be shared
            seen.add(id(node))
            todo.extend(node.inputs())
    return False


def fingerprint(expr: RelationExpr) -> str:
    """A digest of the plan, linear in its size (a repr would expand shared
    subplans once per use)."""
    memo: dict[int, bytes] = {}

    def digest(node: RelationExpr) -> bytes:
        known = memo.get(id(node))
        if known is None:
            parts = [type(node).__name__]
            for f in dataclasses.fields(node):  # type: ignore[arg-type]
                value = getattr(node, f.name)
                if isinstance(value, RelationExpr):
                    parts.append(digest(value).hex())
                elif isinstance(value, tuple) and value and isinstance(value[0], RelationExpr):
                    parts.extend(digest(v).hex() for v in value)
                else:
                    parts.append(repr(value))
            known = memo[id(node)] = hashlib.blake2b(
                "\x00".join(parts).encode(), digest_size=16
            ).digest()
        return known

    return digest(expr).hex()[:16]


# What each operator keeps, and under which name. State kept by another
# layout is another dataflow's: not read, rebuilt once from the inputs.
# 2: COUNT/SUM/MIN/MAX Reduces keep accumulators and values in order, TopK
# its input in order, temporal filters their pending changes by time.
# 3: a TopK's rows in order by their first ORDER BY value (order_bytes.row_ord).
# 4: a Reduce keeps its aggregates' values, not its input rows
# (plan.Reduce.value_columns); float and DISTINCT COUNT/SUM Reduces keep
# accumulators.
STATE_LAYOUT = 4


def dataflow_state(output: Shard, expr: RelationExpr) -> DataflowState:
    """The arrangements of the dataflow writing `output` with plan `expr`
    (another plan, or another STATE_LAYOUT, for the same shard gets other
    state)."""
    name = f"{output.shard_id}/{fingerprint(expr)}.{STATE_LAYOUT}"
    return ArrangementStore.for_blob(output.blob).state(name)


def state_sizes(output: Shard) -> dict[str, ArrangementStats]:
    """The arranged state of the view writing `output` on this host, per
    operator (every plan it has had)."""
    store = ArrangementStore.for_blob(output.blob)
    sizes: dict[str, ArrangementStats] = {}
    for name in store.dataflows():
        if name.startswith(f"{output.shard_id}/"):
            sizes.update(store.state(name).stats())
    return sizes


def has_state(expr: RelationExpr, output: Shard) -> bool:
    """Whether an in-process step of this view has state to start from (or
    the view keeps none), so it need not read its inputs whole."""
    return not is_stateful(expr) or dataflow_state(output, expr).upper() is not None


def arranged_upper(expr: RelationExpr, output: Shard, inputs: dict[GlobalId, Shard]) -> int | None:
    """The upper of the view's arrangements if a step can catch them up
    from its inputs' updates (None: missing, or the inputs were compacted
    past it)."""
    upper = dataflow_state(output, expr).upper()
    if upper is None or not _readable_from(inputs, upper):
        return None
    return upper


def render_step(
    expr: RelationExpr,
    as_of: int,
    inputs: dict[GlobalId, Shard],
    lower: int,
    upper: int,
    state: StepState | None,
    reads: StepReads,
) -> tuple[list[Update], list[Update], list[tuple[str, str]]]:
    """The view's consolidated updates in [lower, upper), its error updates
    and the rules that ran, in-process."""
    hydrating = lower == as_of
    frames = _read_inputs(inputs, lower, upper, hydrating, reads)
    ctx = LocalContext(lower, upper, frames, hydrating=hydrating, state=state)
    rendered = render_local(expr, ctx)
    errors = ctx.errors + input_errors(inputs.values(), as_of, lower, upper)
    return consolidate(rendered.delta or []), consolidate(errors), ctx.rules


def stream_peek(
    expr: RelationExpr, inputs: dict[GlobalId, Shard], timestamp: int
) -> Iterable[tuple[Row, int]]:
    """`expr`'s rows at `timestamp` in-process, a one-off query: its inputs
    are read now, its rows computed as they are read (local.stream_local)."""
    upper = timestamp + 1
    # Each input is its snapshot at `timestamp` (no update lies in
    # [timestamp + 1, upper)), read now and turned into Python rows a batch at
    # a time as the plan pulls them: a scan, filter, project or aggregate
    # holds a batch of its input, not the table (issue 18's soak).
    frames = {
        id: LocalRendered(None, _StampedSnapshot(shard.snapshot_rows(timestamp), timestamp))
        for id, shard in inputs.items()
    }
    raise_first(input_errors(inputs.values(), timestamp, timestamp, upper))
    ctx = LocalContext(timestamp, upper, frames, hydrating=True, streaming=True)
    return stream_local(expr, ctx)


class _StampedSnapshot:
    """A snapshot's rows as updates at `time`, converted as iterated (again
    on each iteration: a self-join reads its input twice)."""

    def __init__(self, rows: SnapshotRows, time: int) -> None:
        self.rows = rows
        self.time = time

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Update]:
        time = self.time
        return (Update(row, time, diff) for row, diff in self.rows)


def _read_inputs(
    inputs: dict[GlobalId, Shard], lower: int, upper: int, hydrating: bool, reads: StepReads
) -> dict[GlobalId, LocalRendered]:
    """Each input's updates in [lower, upper) (hydrating: its snapshot at
    lower is a delta at lower) and, unless hydrating, its old contents,
    read if a rule asks."""
    frames: dict[GlobalId, LocalRendered] = {}
    for id, shard in inputs.items():
        if hydrating:
            snapshot = [Update(row, lower, diff) for row, diff in shard.snapshot(lower)]
            later = shard.updates_between(lower + 1, Frontier.at(upper))
            reads.snapshot += len(snapshot)
            reads.delta += len(later)
            frames[id] = LocalRendered(None, snapshot + later)
        else:
            delta = shard.updates_between(lower, Frontier.at(upper))
            reads.delta += len(delta)
            frames[id] = LocalRendered(_counted_snapshot(shard, lower - 1, reads), delta or None)
    return frames


def _counted_snapshot(
    shard: Shard, as_of: int, reads: StepReads
) -> Callable[[], list[tuple[Row, int]]]:
    """The input's old contents, read only if a rule asks (and counted)."""
    memo: list[list[tuple[Row, int]]] = []

    def old() -> list[tuple[Row, int]]:
        if not memo:
            memo.append(shard.snapshot(as_of))
            reads.snapshot += len(memo[0])
        return memo[0]

    return old


def prepare(
    description: DataflowDescription,
    inputs: dict[GlobalId, Shard],
    output: Shard,
    lower: int,
    reads: StepReads,
) -> StepState | None:
    """The state a step from `lower` reads, caught up to `lower` if a crash
    or a Spark step left it behind; None for a view without stateful
    operators."""
    expr, as_of = description.expr, description.as_of
    if not is_stateful(expr):
        return None
    state = dataflow_state(output, expr)
    upper = state.upper()
    if upper is not None and as_of < upper < lower and _readable_from(inputs, upper):
        catch_up = StepState(state, upper, hydrating=False, reads=reads)
        render_step(expr, as_of, inputs, upper, lower, catch_up, reads)
        # False: another process caught it up (or moved it on) meanwhile.
        state.apply(
            catch_up.pending,
            upper,
            lower,
            timed=catch_up.pending_timed,
            ordered=catch_up.pending_ordered,
        )
        upper = state.upper()
    return StepState(state, upper, hydrating=upper != lower, reads=reads)


def hydrate(
    description: DataflowDescription,
    inputs: dict[GlobalId, Shard],
    output: Shard,
    at: int,
    olds: Callable[[plan.Step], Callable[[], OldIterable]],
    reads: StepReads,
    chunk_rows: int | None = None,
) -> bool:
    """Build the view's arrangements at `at` (its inputs' contents before
    `at`) from each stateful operator's input's old rows as `olds` gives
    them (Spark computes them: dataflow.step), keyed by the in-process rules
    that step them (a render of the empty step [at, at)), replacing any
    state behind `at`. Nothing is held whole: old rows stream through the
    rules (`olds` and the inputs' snapshots are iterated, not kept), and the
    keyed updates are written to a staged state every `chunk_rows`; one
    fenced swap makes it the view's. False: another writer moved the state
    meanwhile (or it is already at or past `at`); its staged rows are gone.
    `chunk_rows`: HYDRATE_CHUNK_ROWS if None."""
    expr = description.expr
    state = dataflow_state(output, expr)
    expected = state.upper()
    if expected is not None and expected >= at:
        return False
    staging = state.staging()
    try:
        building = StepState(
            state,
            expected,
            hydrating=True,
            reads=reads,
            staging=staging,
            chunk_rows=HYDRATE_CHUNK_ROWS if chunk_rows is None else chunk_rows,
        )
        frames = {
            id: LocalRendered(_streamed_snapshot(shard, at - 1, reads), None)
            for id, shard in inputs.items()
        }
        render_local(expr, LocalContext(at, at, frames, state=building, olds=olds))
        building.flush()
    except BaseException:
        staging.discard()
        raise
    return staging.swap(expected, at)


def _streamed_snapshot(
    shard: Shard, as_of: int, reads: StepReads
) -> Callable[[], Iterable[tuple[Row, int]]]:
    """The input's old contents, read again at each use and converted to
    rows a batch at a time as they are iterated (and counted)."""

    def old() -> Iterable[tuple[Row, int]]:
        rows = shard.snapshot_rows(as_of)
        reads.snapshot += len(rows)
        return rows

    return old


def _readable_from(inputs: dict[GlobalId, Shard], time: int) -> bool:
    """Whether every input's updates from `time` on are exact (not compacted)."""
    for shard in inputs.values():
        since = shard.since().time
        if since is None or since > time - 1:
            return False
    return True


def land(state: StepState, upper: int) -> bool:
    """Move the state to `upper` after the step's output landed (False: it
    was fenced: another writer moved it, and a later step catches up)."""
    return state.state.apply(
        state.pending,
        state.expected_upper,
        upper,
        replace=state.hydrating,
        timed=state.pending_timed,
        ordered=state.pending_ordered,
    )


__all__ = [
    "StepReads",
    "StepState",
    "arranged_upper",
    "dataflow_state",
    "has_state",
    "hydrate",
    "is_stateful",
    "land",
    "prepare",
    "render_step",
    "state_sizes",
]
