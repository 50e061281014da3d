"""The in-process backend of the delta rules (delta_rules.py): each
primitive on Python rows.

Spark's per-job overhead (about a second per step, several for a join and
aggregate) dwarfs the work of a small step, so a small step runs here
(engine.py chooses). Old contents are computed lazily (only if a rule asks
for them); a delta at once, so the errors of its rows (a scalar of a Linear
step or of a Reduce's key or arguments failing) are taken in whatever its
parents do with it (compute/error_collection.py). With a `StepState`
(compute/arranged.py), joins and keyed operators read the old rows at the
keys their delta touches from their inputs' arrangements.

A one-off query (`LocalContext.streaming`: hydrating a single time) computes
its deltas lazily instead, as generators pulled row by row from the client's
end: map-filter-project, table functions, unions and joins pass each row on
(a join keeps only one input's index: the smaller where both sizes are
known, as for inputs read from persist and filtered, else the right), and
keyed operators fold their input into their groups as it comes (a step of
one time has nothing to order), so a cross join into count(*) holds one
group, not its rows.
"""

from __future__ import annotations

import operator
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sized
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from coordinator_lib.compute import plan
from coordinator_lib.compute.budget import Tally, held
from coordinator_lib.compute.delta_rules import Keyed, Pair
from coordinator_lib.compute.error_collection import error_update
from coordinator_lib.compute.join_plan import JoinStep
from coordinator_lib.compute.local_groups import (
    Accumulators,
    GroupError,
    distinct_values,
    ordered,
)
from coordinator_lib.compute.local_ordered import evaluate
from coordinator_lib.compute.local_scalar import (
    Compiled,
    EvalError,
    aggregate_values,
    compile_scalar,
)
from coordinator_lib.compute.order_bytes import row_ord
from coordinator_lib.compute.temporal import row_window
from coordinator_lib.expr import relation as rel
from coordinator_lib.expr.scalar import Column, Literal, ScalarExpr
from coordinator_lib.expr.table_functions import expand, rows_from
from coordinator_lib.expr.temporal import TemporalFilter as TemporalFilterExpr
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.nan import one_nan
from coordinator_lib.repr.relation import ColumnType
from coordinator_lib.repr.update import Row, Update

if TYPE_CHECKING:
    from coordinator_lib.compute.arranged import StepState

OldRows = list[tuple[Row, int]]
# Old rows that may be computed afresh at each iteration (a Spark
# hydration's inputs: arranged.hydrate reads them as they stream).
OldIterable = Iterable[tuple[Row, int]]
DeltaRows = list[Update]

# Rows of its indexed input a streamed join holds at a time, when it can
# read its other input again, and at most how many times a keyed join reads
# it (LocalBackend._join_roles).
JOIN_CHUNK_ROWS = 4096
JOIN_MAX_PASSES = 8


@dataclass
class LocalRendered:
    """An operator's old contents (computed when first asked) and delta."""

    old: Callable[[], OldIterable] | None
    # A list, or (a one-off query's input) rows converted as they are iterated.
    delta: DeltaRows | Iterable[Update] | None


@dataclass(frozen=True, eq=False)
class Rows:
    """A collection in-process: `get()` gives old rows `(row, diff)` or, if
    `timed`, updates `(row, time, diff)`; keyed (`key_by`), each starts with
    its key. Old rows are computed on first use and kept, a delta at once
    (a list) or, streaming, afresh as each `get()` is consumed."""

    get: Callable[[], Iterable[Any]]
    timed: bool
    # Keyed items `(key, accumulators, 1)` (local_groups.py), not rows.
    accumulated: bool = False
    # At most this many items, where known (a one-off query's input read
    # from persist, and what filters and projections make of it): a
    # streamed join indexes its smaller input.
    size: int | None = None

    @staticmethod
    def old(compute: Callable[[], Iterable[Any]]) -> Rows:
        return Rows(cache(lambda: held(compute())), False)

    @staticmethod
    def delta(rows: Iterable[Any]) -> Rows:
        return Rows(lambda: rows, True, size=len(rows) if isinstance(rows, Sized) else None)


@dataclass
class LocalContext:
    lower: int
    upper: int
    inputs: dict[GlobalId, LocalRendered]
    hydrating: bool = False
    rules: list[tuple[str, str]] = field(default_factory=list)
    # The step's error updates, rows (code, message) (the errs collection).
    errors: list[Update] = field(default_factory=list)
    # The dataflow's arrangements (compute/arranged.py): a join, Reduce,
    # TopK or Window reads the keys its delta touches there, not its
    # input's old contents. None: read the old contents.
    state: StepState | None = None
    # A one-off query: deltas are generators, computed as they are read.
    streaming: bool = False
    # Hydrating `state` from old contents computed elsewhere (Spark,
    # arranged.hydrate): each stateful operator's input's old rows, by step.
    # Then old rows are not kept: each use computes them afresh as it
    # iterates (a hydration holds a chunk of its state, not its inputs).
    olds: Callable[[plan.Step], Callable[[], OldIterable]] | None = None


class LocalBackend:
    """`delta_rules.Backend` over Python rows, for one step (`ctx`)."""

    def __init__(self, ctx: LocalContext) -> None:
        self.ctx = ctx
        self.lower, self.upper, self.hydrating = ctx.lower, ctx.upper, ctx.hydrating
        self.state = ctx.state
        self.errors = ctx.errors
        self.streaming = ctx.streaming
        self._old = _uncached_old if ctx.olds is not None else Rows.old

    def _timed(self, compute: Callable[[], Iterator[Any]], size: int | None = None) -> Rows:
        """A delta of `compute`'s updates (at most `size`, if known): lazy
        when streaming, else a list."""
        return Rows(compute, True, size=size) if self.streaming else Rows.delta(held(compute()))

    def _like(self, c: Rows, compute: Callable[[], Iterator[Any]], size: int | None = None) -> Rows:
        """`compute` over `c`: a delta if `c` is one, else old rows."""
        return self._timed(compute, size) if c.timed else self._old(compute)

    def record(self, operator: str, rule: str) -> None:
        self.ctx.rules.append((operator, rule))

    def get(self, id: GlobalId) -> Pair[Rows]:
        found = self.ctx.inputs[id]
        return Pair(
            None if found.old is None else self._old(found.old),
            None if found.delta is None else Rows.delta(found.delta),
        )

    def stateful_input(self, step: plan.Step, pair: Pair[Rows]) -> Pair[Rows]:
        olds = self.ctx.olds
        if olds is None or pair.old is None or isinstance(step, plan.Get | plan.Constant):
            return pair  # an input's old rows are its persist snapshot, read as they are
        return Pair(self._old(olds(step)), pair.delta)

    def constant(self, step: plan.Constant, time: int | None) -> Rows | None:
        # NaN as the one object math.nan (repr/nan.py): a plan's constants
        # (VALUES, folded casts) hold NaN objects of their own
        rows = [(tuple(one_nan(v) for v in r), d) for r, d in step.rows]
        if not rows:
            return None
        if time is None:
            return Rows.old(lambda: rows)
        return Rows.delta([Update(r, time, d) for r, d in rows])

    def _map_rows(self, c: Rows, op: Callable[[Row], Row | None], fallible: bool) -> Rows:
        """`op` on each row (None drops it). If `fallible`, a row `op` fails
        on leaves, and in a delta its failure is an error update."""

        errors, timed = self.errors, c.timed

        def mapped() -> Iterator[Any]:
            tally = Tally()
            for item in c.get():
                tally.add()
                try:
                    new = op(item[0])
                except EvalError as error:
                    if not fallible:
                        raise
                    if timed:
                        errors.append(error_update(error, item[1], item[2]))
                    continue
                if new is not None:
                    yield Update(new, *item[1:]) if timed else (new, *item[1:])

        return self._like(c, mapped, c.size)  # at most a row per row

    def map_filter_project(self, c: Rows, step: plan.Linear) -> Rows:
        return self._map_rows(c, _linear(list(step.applied())), True)

    def flat_map(self, c: Rows, step: plan.FlatMap) -> Rows:
        node = step.expr
        assert isinstance(node, rel.FlatMap)
        types = node.input.desc.types
        widths = [len(t) for t in node.call_types()]
        single = not node.zipped and widths[0] == 1  # else a tuple per value
        calls = [(call.func, [compile_scalar(e, types) for e in call.exprs]) for call in node.calls]

        def expanded() -> Iterator[Any]:
            tally = Tally()
            for row, *rest in c.get():
                args = [[e(row) for e in exprs] for _, exprs in calls]
                try:
                    given = [expand(func, a) for (func, _), a in zip(calls, args, strict=True)]
                except ValueError as error:
                    raise EvalError(str(error), getattr(error, "code", "22000")) from None
                values = given[0] if len(given) == 1 else rows_from(given, widths)
                for position, value in enumerate(values, 1):
                    new = (*row, *((value,) if single else value))
                    new = (*new, position) if node.ordinality else new
                    tally.add()
                    yield Update(new, *rest) if c.timed else (new, *rest)
                tally.add()

        return self._like(c, expanded)

    def negate(self, c: Rows) -> Rows:
        if c.timed:
            return self._timed(lambda: (Update(r, t, -d) for r, t, d in c.get()))
        return Rows.old(lambda: ((r, -d) for r, d in c.get()))

    def union(self, cs: list[Rows]) -> Rows:
        return self._like(cs[0], lambda: (item for c in cs for item in c.get()))

    def consolidate(self, c: Rows) -> Rows:
        if self.streaming or not c.timed:  # a streamed delta is read once, as computed
            return c
        sums: dict[tuple[Row, int], int] = defaultdict(int)
        try:
            for row, time, diff in c.get():
                sums[(row, time)] += diff
        except TypeError:  # a value Python cannot hash (a list, a dict): left as it is
            return c
        return Rows.delta([Update(r, t, d) for (r, t), d in sums.items() if d])

    def join_matches(
        self, left: Pair[Rows], right: Pair[Rows], join: plan.Join, step: JoinStep
    ) -> tuple[Rows | None, Rows | None]:
        before = self.lower - 1
        if self.state is not None:
            left_key, right_key = _join_keys(join, step)
            sides = self.state.arrange_join(_rendered(left), _rendered(right), left_key, right_key)
            if sides is not None:  # each side's rows at the other delta's keys
                left_at, right_at = sides

                def at(read: Any, delta: Rows | None, key: Any) -> Rows | None:
                    if delta is None:
                        return None
                    found = read([key(item[0]) for item in delta.get()])
                    return Rows.delta([(r, before, d) for rows in found.values() for r, d in rows])

                return at(left_at, right.delta, right_key), at(right_at, left.delta, left_key)

        def timed(old: Rows | None) -> Rows | None:
            if old is None:
                return None
            return Rows(cache(lambda: [(r, before, d) for r, d in old.get()]), True)

        return timed(left.old), timed(right.old)

    def join_filter(self, c: Rows, join: plan.Join) -> Rows:
        check = _join_check(join)
        return self._map_rows(c, lambda row: row if check(row, join.first) else None, False)

    def equi_join(self, left: Rows, right: Rows, join: plan.Join, step: JoinStep) -> Rows:
        left_key, right_key = _join_keys(join, step)
        check = _join_check(join)
        timed = left.timed and right.timed
        roles = self._join_roles(left, right, not step.keys) if self.streaming else (False, None)
        left_built, chunk = roles
        built, probed = (left, right) if left_built else (right, left)
        built_key, probed_key = (left_key, right_key) if left_built else (right_key, left_key)

        def joined() -> Iterator[Any]:
            tally = Tally()  # a cross join makes millions of rows a second
            filters = step.filters
            rows = iter(built.get())
            first, more = True, chunk is not None
            while True:
                # The index: all of `built`, or its next `chunk` rows, each
                # chunk joined with all of `probed`.
                index: dict[Hashable, list[Any]] = defaultdict(list)
                count = 0
                for b in rows:
                    key = built_key(b[0])
                    if key is None:
                        continue
                    index[key].append(b)
                    if first:
                        tally.hold(b)  # a later chunk takes the first's place
                    else:
                        tally.add()
                    count += 1
                    if more and count == chunk:
                        break
                else:
                    more = False  # `built` is read: this chunk is the last
                if index:
                    for p in probed.get():
                        key = probed_key(p[0])
                        if key is None:
                            continue
                        matches = index.get(key, ())
                        for m in matches:
                            a, b = (m, p) if left_built else (p, m)
                            row = a[0] + b[0]
                            if check(row, filters):
                                diff = a[-1] * b[-1]
                                yield Update(row, max(a[1], b[1]), diff) if timed else (row, diff)
                        tally.add(len(matches) + 1)
                if not more:
                    return
                first = False

        return self._timed(joined) if timed else Rows.old(joined)

    @staticmethod
    def _join_roles(left: Rows, right: Rows, cross: bool) -> tuple[bool, int | None]:
        """A streamed join's roles: whether the left input is the one
        indexed, and how many of its rows the index holds at a time (None:
        all), the other input read again for each such chunk (a block nested
        loop). Only an input whose size is known is read again (a snapshot,
        filtered or projected: converted again as it is read, no operator
        recomputed). An input known to fit `JOIN_CHUNK_ROWS` is indexed
        whole (the smaller of two). Else a cross join (no key: one index
        entry holds the input whole) indexes `JOIN_CHUNK_ROWS` at a time
        the smaller known input, or the input of unknown size: each row
        reread meets a chunk's rows, so the rereads are a small share of the
        join's work (issue 18's soak: a canceled cross join held a table).
        A keyed join chunks the smaller of two known inputs into at most
        `JOIN_MAX_PASSES` chunks (a reread is a pass that may match
        little), and otherwise indexes the right input whole."""
        ls, rs = left.size, right.size
        if ls is not None and ls <= JOIN_CHUNK_ROWS and (rs is None or ls < rs):
            return True, None
        if rs is not None and rs <= JOIN_CHUNK_ROWS:
            return False, None
        if ls is not None and rs is not None:
            smaller = min(ls, rs)
            chunk = (
                JOIN_CHUNK_ROWS if cross else max(JOIN_CHUNK_ROWS, -(-smaller // JOIN_MAX_PASSES))
            )
            return ls <= rs, chunk
        if cross and (ls is not None or rs is not None):
            return rs is not None, JOIN_CHUNK_ROWS
        return False, None

    def check_scalars(self, c: Rows, node: plan.Reduce) -> Rows:
        expr = node.expr
        assert isinstance(expr, rel.Reduce)
        exprs = [*expr.group_key, *(a.expr for a in expr.aggregates)]
        if all(isinstance(e, Column | Literal) for e in exprs):
            return c
        types = expr.input.desc.types
        compiled = [compile_scalar(e, types) for e in exprs]

        def check(row: Row) -> Row:
            for e in compiled:
                e(row)
            return row

        return self._map_rows(c, check, True)

    def key_by(self, c: Rows, node: Keyed) -> Rows:
        key_of = _key_function(node)
        if isinstance(node, plan.Reduce):  # a group is its values (plan.Reduce.value_columns)
            values = _values_of(node)
            return self._like(c, lambda: ((key_of(i[0]), values(i[0]), *i[1:]) for i in c.get()))
        return self._like(c, lambda: ((key_of(i[0]), *i) for i in c.get()))

    def group_outputs(self, keyed_old: Rows, node: Keyed) -> Rows:
        output = _group_output(node)

        def outputs() -> list[Any]:
            groups: dict[Hashable, Counter[Row]] = defaultdict(Counter)
            for key, row, diff in keyed_old.get():
                groups[key][row] += diff
            return [
                item
                for key, rows in groups.items()
                for item in output(key, rows).items()
                if not isinstance(item[0], GroupError)  # its error is in the errs already
            ]

        return Rows.old(outputs)

    def rows_at_touched_keys(
        self, keyed_old: Rows | None, keyed_delta: Rows | None, node: Keyed
    ) -> Rows | None:
        if self.state is not None and isinstance(node, plan.Reduce) and node.accumulators:
            return self._touched_accumulators(keyed_old, keyed_delta, node)
        if self.state is not None and isinstance(node, plan.TopK):
            return self._touched_first_rows(keyed_old, keyed_delta, node)
        arranged = None
        if self.state is not None:  # arranged by the key: the touched groups' rows are there
            delta = [] if keyed_delta is None else keyed_delta.get()
            arranged = self.state.arrange(
                [(k, r, d) for k, r, _, d in delta], None if keyed_old is None else keyed_old.get
            )
        if keyed_delta is None or (arranged is None and keyed_old is None):
            return None
        touched = {u[0] for u in keyed_delta.get()}
        if arranged is not None:
            found = arranged(list(touched))
            return Rows.old(lambda: [(k, r, d) for k, rows in found.items() for r, d in rows])
        assert keyed_old is not None
        return Rows.old(lambda: [item for item in keyed_old.get() if item[0] in touched])

    def _touched_accumulators(
        self, keyed_old: Rows | None, keyed_delta: Rows | None, node: plan.Reduce
    ) -> Rows | None:
        """The touched groups' accumulators at lower (one state row per
        group) and, per MIN/MAX, their first values in order (one more than
        the delta retracts from the group): items `(key, ("acc", values), 1)`
        and `(key, ("first", i, row), diff)`. The state takes each touched
        group's new accumulators and the delta's rows in each order."""
        assert self.state is not None
        expr = node.expr
        assert isinstance(expr, rel.Reduce)
        read, changes = self.state.arrange_accumulators()
        delta = [] if keyed_delta is None else as_list(keyed_delta.get())
        touched = {u[0] for u in delta}
        before: dict[Any, Accumulators] = {}
        # Hydrating: the touched groups' old rows, for their first values.
        touched_old: list[tuple[Any, Row, int]] = []
        if read is None:  # hydrating: every group and arrangement from one pass
            firsts: list[tuple[int, Any]] = [(i, None) for i in ordered(expr)]
            self._hydrate_groups(keyed_old, delta, expr, before, touched, touched_old)
        else:
            firsts = [
                (i, self.state.arrange_in_order([(k, r, d) for k, r, _, d in delta], place, None))
                for i, place in ordered(expr).items()
            ]
            read_seen = self._arrange_distinct(delta, expr)
            for key, rows in read(list(touched)).items():
                before[key] = Accumulators(expr, rows[0][0])
            for key, i, value, seen in read_seen():
                before.setdefault(key, Accumulators(expr)).seen[(i, value)] = seen
        after = {key: acc.copy() for key, acc in before.items()}
        retracted: Counter[Any] = Counter()
        for key, row, _, diff in delta:
            found = after.get(key)
            if found is None:
                found = after[key] = Accumulators(expr)
            found.add(row, diff)
            retracted[key] += max(-diff, 0)
        for key, acc in after.items():
            old = before.get(key)
            if read is not None and old is not None:
                if old.row() == acc.row():
                    continue
                changes.append((key, old.row(), -1))
            if not acc.is_empty():
                changes.append((key, acc.row(), 1))
        if keyed_delta is None:
            return None
        items: list[Any] = [
            (key, ("acc", before[key].row()), 1) for key in touched if key in before
        ]
        items += [
            (key, ("seen", *value), seen)
            for key in touched
            if key in before
            for value, seen in before[key].seen.items()
        ]
        for i, first in firsts:
            if first is not None:  # one value more than the delta may take away
                for key in touched:
                    items += [(key, ("first", i, r), d) for r, d in first(key, 1 + retracted[key])]
            else:
                items += [(k, ("first", i, r), d) for k, r, d in touched_old]
        return Rows(lambda: items, False, accumulated=True)

    def _hydrate_groups(
        self,
        keyed_old: Rows | None,
        delta: list[Any],
        expr: rel.Reduce,
        before: dict[Any, Accumulators],
        touched: set[Any],
        touched_old: list[tuple[Any, Row, int]],
    ) -> None:
        """Hydrating a Reduce's state in one pass over its old rows (which a
        Spark hydration computes again at each read): each group's
        accumulators into `before`, each MIN/MAX's values in order and each
        DISTINCT aggregate's values to the state, the touched groups' rows
        into `touched_old`."""
        assert self.state is not None
        in_order = [
            self.state.hydrate_in_order([(k, r, d) for k, r, _, d in delta], place)
            for place in ordered(expr).values()
        ]
        values_of = distinct_values(expr)
        distinct = None
        if any(a.distinct for a in expr.aggregates):
            distinct = self.state.hydrate_by_key(
                ((*k, i, v), (v,), d) for k, r, *_, d in delta for i, v in values_of(r)
            )
        if keyed_old is None:
            return
        for key, row, diff in keyed_old.get():
            found = before.get(key)
            if found is None:
                found = before[key] = Accumulators(expr)
            found.add(row, diff)
            for add in in_order:
                add(key, row, diff)
            if distinct is not None:
                for i, v in values_of(row):
                    distinct((*key, i, v), (v,), diff)
            if key in touched:
                touched_old.append((key, row, diff))

    def _arrange_distinct(
        self, delta: list[Any], expr: rel.Reduce
    ) -> Callable[[], list[tuple[Any, int, Any, int]]]:
        """A DISTINCT COUNT/SUM's values arranged by group key and value,
        with their multiplicities: a reader of those the delta touches at
        lower, `(group key, aggregate position, value, multiplicity)`
        (hydrating: `_hydrate_groups`)."""
        values_of = distinct_values(expr)
        if not any(a.distinct for a in expr.aggregates):
            return list
        assert self.state is not None

        def keyed(items: Iterable[Any]) -> Iterator[tuple[Any, Row, int]]:
            return (((*k, i, v), (v,), d) for k, r, *_, d in items for i, v in values_of(r))

        read = self.state.arrange(keyed(delta), None)
        assert read is not None
        width = len(expr.group_key)

        def seen() -> list[tuple[Any, int, Any, int]]:
            found = read({key for key, _, _ in keyed(delta)})
            return [
                (k[:width], k[width], k[width + 1], sum(d for _, d in rows))
                for k, rows in found.items()
            ]

        return seen

    def _touched_first_rows(
        self, keyed_old: Rows | None, keyed_delta: Rows | None, node: plan.TopK
    ) -> Rows | None:
        """A TopK's touched groups' first rows in its order: offset + limit
        plus as many as the delta retracts from the group (those hold the
        group's top at every time of the step), read from its input
        arranged in order; the state takes the delta's rows."""
        assert self.state is not None
        expr = node.expr
        assert isinstance(expr, rel.TopK)
        delta = [] if keyed_delta is None else as_list(keyed_delta.get())
        read = self.state.arrange_in_order(
            [(k, r, d) for k, r, _, d in delta],
            row_ord(expr.order_key),
            None if keyed_old is None else keyed_old.get,
        )
        if keyed_delta is None:
            return None
        retracted: Counter[Any] = Counter()
        for key, _, _, diff in delta:
            retracted[key] += max(-diff, 0)
        if read is None:  # hydrating: the old rows
            if keyed_old is None:
                return None
            return Rows.old(lambda: [item for item in keyed_old.get() if item[0] in retracted])
        need = None if expr.limit is None else expr.offset + expr.limit
        found = [
            (key, r, d)
            for key, retracts in retracted.items()
            for r, d in read(key, None if need is None else need + retracts)
        ]
        return Rows.old(lambda: found)

    def group_changes(self, touched_old: Rows | None, keyed_delta: Rows, node: Keyed) -> Rows:
        new_group = _group(node)
        before: dict[Hashable, _Group] = {}
        for key, row, diff in [] if touched_old is None else touched_old.get():
            group = before.get(key)
            if group is None:
                group = before[key] = new_group(key)
            if touched_old is not None and touched_old.accumulated:
                assert isinstance(group, _AccumulatedGroup)
                group.take(row, diff)
            else:
                group.add(row, diff)
        changes: list[Update] = []
        if self.upper == self.lower + 1:  # every update is at lower: fold them in as they come
            touched: dict[Hashable, tuple[_Group, Counter[Row]]] = {}
            tally = Tally()
            for key, row, _, diff in keyed_delta.get():
                found = touched.get(key)
                if found is None:
                    group = before.get(key) or new_group(key)
                    found = touched[key] = (group, group.output())
                    tally.hold((key, row, found[1], vars(group)))  # its objects' sizes
                found[0].add(row, diff)
                if found[0].keeps_rows:
                    tally.hold(row)
                else:
                    tally.add()
            for group, previous in touched.values():
                self._changed(previous, group.output(), self.lower, changes)
            return Rows.delta(changes)
        by_key: dict[Hashable, list[tuple[Row, int, int]]] = defaultdict(list)
        for key, row, time, diff in keyed_delta.get():
            by_key[key].append((row, time, diff))
        for key, updates in by_key.items():
            group = before.get(key) or new_group(key)
            previous = group.output()
            for t in sorted({time for _, time, _ in updates}):
                for row, time, diff in updates:
                    if time == t:
                        group.add(row, diff)
                current = group.output()
                self._changed(previous, current, t, changes)
                previous = current
        return Rows.delta(changes)

    def _changed(
        self, previous: Counter[Row], current: Counter[Row], time: int, changes: list[Update]
    ) -> None:
        """A group's output at `time` minus its output before, into
        `changes`; a failing group's error changes into the step's errors."""
        for row in previous.keys() | current.keys():
            change = current[row] - previous[row]
            if isinstance(row, GroupError):
                self.errors.append(Update((row.code, row.message), time, change))
            elif change:
                changes.append(Update(row, time, change))

    def temporal_present(self, old: Rows, node: plan.TemporalFilter, time: int) -> Rows:
        window = _row_window(node)

        def present() -> list[Any]:
            out = []
            for row, diff in old.get():
                ever, lo, hi = window(row)
                if ever and (lo is None or lo <= time) and (hi is None or time < hi):
                    out.append((row, diff))
            return out

        return Rows.old(present)

    def temporal_changes(self, c: Rows, node: plan.TemporalFilter) -> Rows:
        upper = self.upper
        return Rows.delta([u for u in _temporal_events(c, node, self.lower) if u.time < upper])

    def temporal_due(
        self, old: Rows | None, delta: Rows | None, node: plan.TemporalFilter
    ) -> Rows | None:
        if self.state is not None:  # the changes due from here on, arranged by time
            upper = self.upper
            later = [] if delta is None else _temporal_events(delta, node, self.lower)
            if self.state.hydrating and old is not None and not self.hydrating:
                later += _temporal_events(old, node, self.lower)
            read = self.state.arrange_by_time(u for u in later if u.time >= upper)
            if read is not None:
                due = read(self.lower, upper)
                return Rows.delta(due) if due else None
        if old is None or self.hydrating:
            return None
        return self.temporal_changes(old, node)


# ----------------------------------------------------------------- linear ops
def _linear(ops: list[plan.LinearOp]) -> Callable[[Row], Row | None]:
    """One row through a map-filter-project (None: filtered out), its
    scalars compiled once (local_scalar.compile_scalar)."""
    steps: list[Callable[[Row], Row | None]] = [_linear_op(op) for op in ops]

    def apply(row: Row) -> Row | None:
        for each in steps:
            found = each(row)
            if found is None:
                return None
            row = found
        return row

    return apply


def _linear_op(op: plan.LinearOp) -> Callable[[Row], Row | None]:
    if isinstance(op, rel.Filter):
        types = op.input.desc.types
        predicates = [compile_scalar(p, types) for p in op.predicates]
        return lambda row: row if all(p(row) is True for p in predicates) else None
    if isinstance(op, rel.Map):
        all_types, arity = op.desc.types, op.input.desc.arity
        # Each scalar sees the input's columns and the scalars before it.
        scalars = [
            compile_scalar(scalar, all_types[: arity + i]) for i, scalar in enumerate(op.scalars)
        ]

        def mapped(row: Row) -> Row:
            for scalar in scalars:
                row = (*row, scalar(row))
            return row

        return mapped
    outputs = op.outputs
    return lambda row: tuple(row[i] for i in outputs)


# ----------------------------------------------------------------------- join
Pairs = tuple[tuple[ScalarExpr, ScalarExpr], ...]


def _join_check(join: plan.Join) -> Callable[[Row, Pairs], bool]:
    """Whether a row (of the columns joined so far) has all `pairs` equal
    and not NULL."""
    types, width = join.types, len(join.types)

    # Compiled once per set of pairs (by identity: the plan's, alive all step).
    compiled: dict[int, tuple[Pairs, list[tuple[Compiled, Compiled]]]] = {}

    def check(row: Row, pairs: Pairs) -> bool:
        if not pairs:
            return True
        found = compiled.get(id(pairs))
        if found is None:
            found = compiled[id(pairs)] = (
                pairs,
                [(compile_scalar(a, types), compile_scalar(b, types)) for a, b in pairs],
            )
        padded = row + (None,) * (width - len(row))
        for a, b in found[1]:
            left, right = a(padded), b(padded)
            if left is None or right is None or left != right:
                return False
        return True

    return check


def _join_keys(
    join: plan.Join, step: JoinStep
) -> tuple[Callable[[Row], tuple[Any, ...] | None], Callable[[Row], tuple[Any, ...] | None]]:
    """The join key of a row of the left (columns so far) and of the right
    (the next input); None when a value is NULL (it matches nothing)."""
    types, width = join.types, len(join.types)

    def key_of(exprs: list[ScalarExpr], offset: int) -> Callable[[Row], tuple[Any, ...] | None]:
        plain_columns = [e for e in exprs if isinstance(e, Column) and e.index >= offset]
        if len(plain_columns) == len(exprs):
            # Columns of this side (an equi-join's usual key): read off the
            # row itself, not a copy padded to the join's width.
            side = types[offset:]
            columns = [compile_scalar(Column(c.index - offset), side) for c in plain_columns]
            if len(columns) == 1:
                (column,) = columns

                def one(row: Row) -> tuple[Any, ...] | None:
                    value = column(row)
                    return None if value is None else (value,)

                return one

            def plain(row: Row) -> tuple[Any, ...] | None:
                values = tuple(c(row) for c in columns)
                return None if any(v is None for v in values) else values

            return plain
        compiled = [compile_scalar(e, types) for e in exprs]

        def key(row: Row) -> tuple[Any, ...] | None:
            padded = (None,) * offset + row if offset else row
            padded = padded + (None,) * (width - len(padded))
            values = tuple(e(padded) for e in compiled)
            return None if any(v is None for v in values) else values

        return key

    return (
        key_of([k for k, _ in step.keys], 0),
        key_of([k for _, k in step.keys], step.left_width),
    )


def _rendered(pair: Pair[Rows]) -> LocalRendered:
    old = pair.old
    return LocalRendered(
        None if old is None else old.get,
        None if pair.delta is None else as_list(pair.delta.get()),
    )


def _uncached_old(compute: Callable[[], Iterable[Any]]) -> Rows:
    """Old rows computed afresh at each `get()`, as they are iterated."""
    return Rows(compute, False)


def as_list(rows: Iterable[Any]) -> list[Any]:
    """The rows of a collection that is not streaming (a list already)."""
    return rows if isinstance(rows, list) else list(rows)


# --------------------------------------------------------- keyed operators
def _key_function(node: Keyed) -> Callable[[Row], tuple[Any, ...]]:
    expr = node.expr
    if isinstance(expr, rel.Reduce):
        types = expr.input.desc.types
        group_key = [compile_scalar(k, types) for k in expr.group_key]
        return lambda row: tuple(k(row) for k in group_key)
    if isinstance(expr, rel.TopK | rel.Window):
        key = expr.group_key if isinstance(expr, rel.TopK) else expr.partition_key
        return lambda row: tuple(row[i] for i in key)
    return tuple  # Distinct, Threshold: the whole row


def _values_of(node: plan.Reduce) -> Callable[[Row], Row]:
    """A row of the Reduce's input as the values its aggregates read, the
    other columns NULL (same width, so the aggregates evaluate unchanged)."""
    keep = node.value_columns
    expr = node.expr
    assert isinstance(expr, rel.Reduce)
    arity = expr.input.desc.arity
    if all(i in keep for i in range(arity)):
        return lambda row: row
    if not keep:
        nulls = (None,) * arity
        return lambda row: nulls
    # One C call per row: a dropped column reads the NULL appended at `arity`.
    pick = operator.itemgetter(*(i if i in keep else arity for i in range(arity)))
    return lambda row: pick((*row, None))


def _group_output(node: Keyed) -> Callable[[Hashable, Counter[Row]], Counter[Row]]:
    """A group's output rows with their multiplicities, from its rows with
    theirs (those at or below 0 are absent)."""
    expr = node.expr
    if isinstance(expr, rel.TopK | rel.Window):
        ordered = expr

        def ordered_output(key: Hashable, rows: Counter[Row]) -> Counter[Row]:
            present = [(row, n) for row, n in rows.items() if n > 0]
            out: Counter[Row] = Counter()
            try:
                evaluated = evaluate(ordered, present) if present else []
            except EvalError as error:  # a window aggregate's own failure (a sum's overflow)
                return Counter({cast(Row, GroupError(error.code, error.message)): 1})
            for row, n in evaluated:
                out[row] += n
            return out

        return ordered_output
    threshold = isinstance(node, plan.Threshold)
    aggregates = expr.aggregates if isinstance(expr, rel.Reduce) else ()
    types: tuple[ColumnType, ...] = expr.inputs()[0].desc.types

    def output(key: Hashable, rows: Counter[Row]) -> Counter[Row]:
        total = sum(rows.values())
        if total <= 0:
            return Counter()
        assert isinstance(key, tuple)
        if threshold:
            return Counter({key: total})
        present = [(row, n) for row, n in rows.items() if n > 0]
        try:
            values = tuple(aggregate_values(a, present, types) for a in aggregates)
        except EvalError as error:  # the aggregate's own failure (a sum's overflow)
            return Counter({cast(Row, GroupError(error.code, error.message)): 1})
        return Counter({key + values: 1})

    return output


class _Group:
    """A touched group being stepped: its rows (output evaluated from them)."""

    keeps_rows = True  # each distinct row it is given is kept

    def __init__(
        self, key: Hashable, output: Callable[[Hashable, Counter[Row]], Counter[Row]]
    ) -> None:
        self.key, self.rows, self._output = key, Counter[Row](), output

    def add(self, row: Row, diff: int) -> None:
        self.rows[row] += diff

    def output(self) -> Counter[Row]:
        return self._output(self.key, self.rows)


class _AccumulatedGroup(_Group):
    """A COUNT/SUM/MIN/MAX group as its accumulators and, per MIN/MAX, the
    rows of its first values (local_groups.py)."""

    def __init__(self, key: Hashable, reduce: rel.Reduce) -> None:
        self.key, self.accumulators = key, Accumulators(reduce)
        self.firsts: dict[int, Counter[Row]] = {i: Counter() for i in ordered(reduce)}
        self.keeps_rows = bool(self.firsts)  # a MIN/MAX's values, in order

    def take(self, item: tuple[Any, ...], diff: int) -> None:
        """An item of the group's state (`_touched_accumulators`)."""
        if item[0] == "acc":
            seen = self.accumulators.seen
            self.accumulators = Accumulators(self.accumulators.reduce, item[1], seen)
        elif item[0] == "seen":
            self.accumulators.seen[(item[1], item[2])] = diff
        else:
            self.firsts[item[1]][item[2]] += diff

    def add(self, row: Row, diff: int) -> None:
        self.accumulators.add(row, diff)
        for rows in self.firsts.values():
            rows[row] += diff

    def output(self) -> Counter[Row]:
        assert isinstance(self.key, tuple)
        return self.accumulators.output(self.key, self.firsts)


def _group(node: Keyed) -> Callable[[Hashable], _Group]:
    """A new, empty group of `node` by its key."""
    expr = node.expr
    if isinstance(node, plan.Reduce) and node.accumulators:
        assert isinstance(expr, rel.Reduce)
        return lambda key: _AccumulatedGroup(key, expr)
    output = _group_output(node)
    return lambda key: _Group(key, output)


# ------------------------------------------------------------------ temporal
def _temporal_events(c: Rows, node: plan.TemporalFilter, lower: int) -> list[Update]:
    """Every insertion (at max(t, L)) and retraction (at U) of a delta's
    rows; of old rows (present or pending at lower - 1), those at or after
    `lower`."""
    window = _row_window(node)
    events: list[Update] = []
    if not c.timed:
        for row, diff in c.get():
            ever, lo, hi = window(row)
            if not ever:
                continue
            if lo is not None and lo >= lower:
                events.append(Update(row, lo, diff))
            if hi is not None and hi >= lower:
                events.append(Update(row, hi, -diff))
        return events
    for row, t, diff in c.get():
        ever, lo, hi = window(row)
        start = t if lo is None else max(t, lo)
        if not ever or (hi is not None and start >= hi):
            continue
        events.append(Update(row, start, diff))
        if hi is not None:
            events.append(Update(row, hi, -diff))
    return events


def _row_window(node: plan.TemporalFilter) -> Callable[[Row], tuple[bool, int | None, int | None]]:
    expr = node.expr
    assert isinstance(expr, TemporalFilterExpr)
    bounds, types = expr.bounds, expr.input.desc.types
    return lambda row: row_window(bounds, row, types)
