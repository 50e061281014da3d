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
  without one never had an error. Its since stays at 0 (error collections
  are small; they are not compacted yet).
- A read of a collection at `t` whose errors at `t` are non-empty answers
  with the first error (`raise_errors`), with the original SQLSTATE; other
  views are unaffected.
"""

from __future__ import annotations

from collections.abc import Iterable

from coordinator_lib.compute.local_scalar import EvalError
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
        for code, message, _ in errors_at(output, timestamp):
            raise EvalError(message, code)


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
