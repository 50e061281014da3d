"""A dataflow's error collection: its evaluation errors as updates beside its data.

Materialize renders every collection as a pair (oks, errs): a row whose
scalar evaluation fails (division by zero, a subquery's second row) becomes
an update (error, time, diff) in errs instead of stopping the dataflow, and
the errs of an operator's inputs flow through it unchanged. Here the errs
are one consolidated list per step (`LocalContext.errors`,
`StepContext.errors`), and a materialized view keeps them in a second shard
beside its output, `<output shard>-errs`, with rows (code, message).

- An error update carries the failing row's time and diff, so retracting
  the row (DELETE) retracts the error.
- A step lands the errors before the output (dataflow.step): the error
  shard is never behind its view, so a view readable at `t` has its errors
  at `t` readable too. A step that finds the error shard ahead (a crash
  between the two writes) steps the view to that upper without rewriting it.
- The error shard is created by the first step that has an error; a view
  without one never had an error. Its since follows its view's since (a
  critical hold moved by each compaction pass, `compact_errors`), and it is
  compacted as data shards are: an error that came and went (the bad row
  deleted) leaves nothing stored once the since passes it. Reads of errors
  are at times the view is readable at, so never below that since.
- A read of a collection at `t` whose errors at `t` are non-empty answers
  with the first error (`raise_errors`), with the original SQLSTATE; other
  views are unaffected. A SUBSCRIBE is such a read at its as_of and then
  at every time it passes (`raise_errors_from`): it ends with the first
  error.
- A join key that can fail (`ON a.x / a.y = b.v`) is computed by a Map on
  its input before the join (`join_keys_mapped`, applied to every
  dataflow), so its errors are that Map's, on both engines: the join itself
  only compares columns. A key that can fail and reads several (not all)
  inputs (`ON a.x / b.y = c.v`) is computed by a Map over the join of just
  those inputs, which the rest then join (`_several_inputs_mapped`), so
  its errors are row errors too.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections import Counter
from collections.abc import Callable, Iterable

from coordinator_lib.compute.local_scalar import EvalError
from coordinator_lib.expr.relation import Join, Map, Project, RelationExpr
from coordinator_lib.expr.scalar import (
    COMPARISON_OPERATORS,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Column,
    If,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from coordinator_lib.persist.errors import UpperMismatch
from coordinator_lib.persist.machine import Machine
from coordinator_lib.persist.shard import Shard
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.relation import ColumnType, RelationDesc, ScalarType
from coordinator_lib.repr.update import Update, consolidate

ERRORS_DESC = RelationDesc(
    ("code", "message"),
    (ColumnType(ScalarType.TEXT, False), ColumnType(ScalarType.TEXT, False)),
)


def error_update(error: EvalError, time: int, diff: int) -> Update:
    """The error collection's update for a row (time, diff) that failed."""
    return Update((error.code, error.message), time, diff)


def error_shard(output: Shard, create: bool = False) -> Shard | None:
    """The error shard beside `output` (created if asked and missing)."""
    machine = Machine(output.machine.consensus, f"{output.shard_id}-errs")
    if not create and machine.fetch() is None:
        return None
    return Shard.open(machine, output.blob, ERRORS_DESC, initial_since=0)


def input_errors(inputs: Iterable[Shard], as_of: int, lower: int, upper: int) -> list[Update]:
    """The inputs' error updates a step over [lower, upper) takes in: errs
    flow through every operator unchanged. Hydrating (lower == as_of), an
    input's errors at as_of count as updates at as_of."""
    out: list[Update] = []
    for shard in inputs:
        errs = error_shard(shard)
        if errs is None:
            continue
        if lower == as_of:
            out += [Update(row, as_of, diff) for row, diff in errs.snapshot(as_of)]
            out += errs.updates_between(as_of + 1, Frontier.at(upper))
        else:
            out += errs.updates_between(lower, Frontier.at(upper))
    return out


def errors_at(output: Shard, timestamp: int) -> list[tuple[str, str, int]]:
    """(code, message, count) of the collection's errors at `timestamp`."""
    errs = error_shard(output)
    if errs is None or errs.upper().less_equal(timestamp):
        return []
    return sorted((code, message, n) for (code, message), n in errs.snapshot(timestamp) if n > 0)


def raise_errors(outputs: Iterable[Shard], timestamp: int) -> None:
    """A read at `timestamp` answers with the first error of any collection read."""
    for output in outputs:
        _raise_first(((code, message), n) for code, message, n in errors_at(output, timestamp))


def raise_errors_from(output: Shard, lower: int, upper: Frontier) -> None:
    """A SUBSCRIBE's read of every time in [lower, upper), none before
    `lower` having had an error (it stopped at the first): answered as a
    read at the first of those times with an error (`raise_errors`). Counted
    from the updates, not a snapshot per time: the listen lets the since
    pass `lower`, and an update compacted forward to the since still counts
    (those before `lower` add up to nothing)."""
    errs = error_shard(output)
    if errs is None:
        return
    counts: Counter[tuple[str, str]] = Counter()
    updates = sorted(errs.updates_between(lower, upper), key=lambda update: update.time)
    for _, at_time in itertools.groupby(updates, key=lambda update: update.time):
        for update in at_time:
            counts[update.row] += update.diff
        _raise_first(counts.items())


def _raise_first(errors: Iterable[tuple[tuple[str, str], int]]) -> None:
    """The first (by code, then message) of the errors present at a time."""
    present = sorted(row for row, count in errors if count > 0)
    if present:
        code, message = present[0]
        raise EvalError(message, code)


def raise_first(errors: Iterable[Update]) -> None:
    """A one-off query answers with its first error (of its error updates,
    consolidated), as PostgreSQL answers with its first failing row's."""
    for update in consolidate(errors):
        if update.diff > 0:
            code, message = update.row
            raise EvalError(message, code)


# The critical hold by which an error shard's since follows its view's.
ERRORS_FOLLOW_VIEW = "errors-follow-view"


def compact_errors(output: Shard, target_rows: int, max_batches: int) -> int:
    """Move the error shard's since up to `output`'s and compact it (a
    compaction pass does this beside the data shard's); batches replaced."""
    errs = error_shard(output)
    if errs is None:
        return 0
    since = output.since()
    if since.is_empty:  # the view is closed: its errors stay readable at its last time
        return 0
    errs.downgrade_critical_since(ERRORS_FOLLOW_VIEW, since)
    replaced = errs.compact(target_rows=target_rows, max_batches=max_batches)
    errs.collect_garbage()
    return replaced


def landed_upper(output: Shard, lower: int) -> int | None:
    """The error shard's upper if a step already landed errors past `lower`
    (and crashed or lost before landing its output): the step must go there."""
    errs = error_shard(output)
    if errs is None:
        return None
    current = errs.upper().time
    return current if current is not None and current > lower else None


def land_errors(output: Shard, errors: list[Update], lower: int, upper: int) -> None:
    """Append a step's errors over [lower, upper) to the error shard, created
    on the first error. UpperMismatch: another replica landed past `lower`."""
    errors = consolidate(errors)
    errs = error_shard(output, create=bool(errors))
    if errs is None:
        return
    current = errs.upper()
    if not current.less_equal(lower):
        raise UpperMismatch(errs.shard_id, Frontier.at(lower), current)
    errs.compare_and_append(errors, current, Frontier.at(upper))


# ------------------------------------------------------------- failing scalars
_SAFE_UNARY = {
    UnaryFunc.NOT,
    UnaryFunc.IS_NULL,
    UnaryFunc.IS_NOT_NULL,
    UnaryFunc.IS_TRUE,
    UnaryFunc.IS_FALSE,
    UnaryFunc.LOWER,
    UnaryFunc.UPPER,
    UnaryFunc.LENGTH,
}
_SAFE_BINARY = {*COMPARISON_OPERATORS, BinaryFunc.LIKE, BinaryFunc.CONCAT}
_SAFE_VARIADIC = {VariadicFunc.AND, VariadicFunc.OR, VariadicFunc.COALESCE}


def never_fails(expr: ScalarExpr) -> bool:
    """Whether `expr` cannot raise an evaluation error on any row (columns,
    literals, comparisons, logic, CASE of those); anything else may."""
    if isinstance(expr, Column | Literal):
        return True
    safe = (
        (isinstance(expr, CallUnary) and expr.func in _SAFE_UNARY)
        or (isinstance(expr, CallBinary) and expr.func in _SAFE_BINARY)
        or (isinstance(expr, CallVariadic) and expr.func in _SAFE_VARIADIC)
        or isinstance(expr, If)
    )
    return safe and all(never_fails(child) for child in expr.children())


def _remapped(expr: ScalarExpr, column: Callable[[int], int]) -> ScalarExpr:
    """`expr` reading column `column(i)` wherever it read column `i`."""
    if isinstance(expr, Column):
        return Column(column(expr.index))
    changes: dict[str, object] = {}
    for f in dataclasses.fields(expr):  # type: ignore[arg-type]
        value = getattr(expr, f.name)
        if isinstance(value, ScalarExpr):
            changes[f.name] = _remapped(value, column)
        elif isinstance(value, tuple) and value and isinstance(value[0], ScalarExpr):
            changes[f.name] = tuple(_remapped(v, column) for v in value)
    return dataclasses.replace(expr, **changes) if changes else expr  # type: ignore[type-var]


def join_keys_mapped(expr: RelationExpr) -> RelationExpr:
    """`expr` with each join key that may fail and reads one input only
    computed by a Map on that input (the join compares the new column), and
    a Project restoring the join's columns above. Shared subplans stay
    shared."""
    memo: dict[int, RelationExpr] = {}

    def visit(node: RelationExpr) -> RelationExpr:
        found = memo.get(id(node))
        if found is None:
            found = memo[id(node)] = _rewrite(node)
        return found

    def _rewrite(node: RelationExpr) -> RelationExpr:
        changes: dict[str, object] = {}
        for f in dataclasses.fields(node):  # type: ignore[arg-type]
            value = getattr(node, f.name)
            if isinstance(value, RelationExpr):
                new = visit(value)
                if new is not value:
                    changes[f.name] = new
            elif isinstance(value, tuple) and value and isinstance(value[0], RelationExpr):
                items = tuple(visit(v) for v in value)
                if any(a is not b for a, b in zip(items, value, strict=True)):
                    changes[f.name] = items
        if changes:
            node = dataclasses.replace(node, **changes)  # type: ignore[type-var]
        if isinstance(node, Join):
            node = _keys_mapped(node)
        if isinstance(node, Join):
            node = _several_inputs_mapped(node)
        return node

    return visit(expr)


def _several_inputs_member(join: Join) -> tuple[ScalarExpr, list[int]] | None:
    """A join key that may fail and reads several (not all) of the join's
    inputs, with those inputs (ascending); None if there is none."""
    offsets = join.input_offsets()
    for cls in join.equivalences:
        for member in cls:
            owners = sorted(
                {max(i for i, start in enumerate(offsets) if start <= c) for c in member.columns()}
            )
            if len(owners) > 1 and not never_fails(member) and len(owners) < len(join.inputs_):
                return member, owners
    return None


def _several_inputs_mapped(join: Join) -> RelationExpr:
    """`join` with each join key that may fail and reads several inputs
    computed by a Map over a join of just those inputs (keyed by the classes
    among them), and the rest joined to that: its errors are that Map's, row
    errors, instead of failing the step. A key over all inputs is left as it
    is (nothing smaller to compute it on)."""
    found = _several_inputs_member(join)
    if found is None:
        return join
    member, owners = found
    offsets = join.input_offsets()
    arities = [child.desc.arity for child in join.inputs_]
    # The inner join's columns: the owners' columns in order; then the member.
    inner_start = {}
    total = 0
    for i in owners:
        inner_start[i] = total
        total += arities[i]
    inner_arity = total

    def owner_of(column: int) -> int:
        return max(i for i, start in enumerate(offsets) if start <= column)

    def in_inner(column: int) -> int:
        i = owner_of(column)
        return inner_start[i] + column - offsets[i]

    inner_only = [
        cls
        for cls in join.equivalences
        if all(owner_of(c) in inner_start for m in cls for c in m.columns())
    ]
    inner = _several_inputs_mapped(
        Join(
            tuple(join.inputs_[i] for i in owners),
            tuple(tuple(_remapped(m, in_inner) for m in cls) for cls in inner_only),
        )
    )
    mapped = Map(inner, (_remapped(member, in_inner),))
    # The outer join: the mapped inner join first, then the other inputs.
    others = [i for i in range(len(join.inputs_)) if i not in inner_start]
    outer_start = {}
    total = inner_arity + 1
    for i in others:
        outer_start[i] = total
        total += arities[i]

    def in_outer(column: int) -> int:
        i = owner_of(column)
        if i in inner_start:
            return in_inner(column)
        return outer_start[i] + column - offsets[i]

    computed = Column(inner_arity)
    classes = tuple(
        tuple(computed if m is member else _remapped(m, in_outer) for m in cls)
        for cls in join.equivalences
        if not any(cls is c for c in inner_only)
    )
    outer = Join((mapped, *(join.inputs_[i] for i in others)), classes)
    outputs = tuple(in_outer(c) for c in range(sum(arities)))
    return Project(_several_inputs_mapped(outer), outputs, join.desc.names)


def _minus(offset: int, column: int) -> int:
    return column - offset


def _keys_mapped(join: Join) -> RelationExpr:
    offsets = join.input_offsets()
    arities = [child.desc.arity for child in join.inputs_]

    def owner(column: int) -> int:
        return max(i for i, start in enumerate(offsets) if start <= column)

    extra: list[list[ScalarExpr]] = [[] for _ in join.inputs_]
    marked: list[list[ScalarExpr | tuple[int, int]]] = []
    for cls in join.equivalences:
        members: list[ScalarExpr | tuple[int, int]] = []
        for member in cls:
            owners = {owner(c) for c in member.columns()}
            if never_fails(member) or len(owners) != 1:
                members.append(member)
                continue
            (i,) = owners
            extra[i].append(_remapped(member, functools.partial(_minus, offsets[i])))
            members.append((i, len(extra[i]) - 1))
        marked.append(members)
    if not any(extra):
        return join
    starts, total = [], 0
    for arity, more in zip(arities, extra, strict=True):
        starts.append(total)
        total += arity + len(more)

    def moved(column: int) -> int:
        i = owner(column)
        return starts[i] + column - offsets[i]

    inputs = tuple(
        Map(child, tuple(more)) if more else child
        for child, more in zip(join.inputs_, extra, strict=True)
    )
    classes = tuple(
        tuple(
            Column(starts[m[0]] + arities[m[0]] + m[1])
            if isinstance(m, tuple)
            else _remapped(m, moved)
            for m in members
        )
        for members in marked
    )
    outputs = tuple(moved(c) for c in range(sum(arities)))
    return Project(Join(inputs, classes), outputs, join.desc.names)
