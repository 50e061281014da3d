"""Consolidation against a Counter model: `repr.update.consolidate`,
`consolidate_rows` and the Arrow path `persist.batch.consolidate_table`."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_lib.persist.batch import consolidate_table, table_to_updates, updates_to_table
from coordinator_lib.repr.relation import DIFF_COLUMN, RelationDesc
from coordinator_lib.repr.update import Row, Update, consolidate, consolidate_rows, row_sort_key

# Both columns nullable so NULL keys take part in grouping.
DESC = RelationDesc.of(("k", "bigint"), ("v", "text"))

rows = st.tuples(st.none() | st.integers(-2, 2), st.none() | st.sampled_from(["a", "b", ""]))
updates_st = st.lists(
    st.builds(Update, rows, st.integers(0, 6), st.integers(-3, 3)),
    max_size=40,
)


def counter_model(updates: list[Update]) -> dict[tuple[Row, int], int]:
    """Sum per (row, time) with a Counter, dropping zeros."""
    sums: Counter[tuple[Row, int]] = Counter()
    for row, time, diff in updates:
        sums[(row, time)] += diff
    return {key: total for key, total in sums.items() if total != 0}


def rows_model(pairs: list[tuple[Row, int]]) -> dict[Row, int]:
    sums: Counter[Row] = Counter()
    for row, diff in pairs:
        sums[row] += diff
    return {row: total for row, total in sums.items() if total != 0}


@settings(max_examples=200, deadline=None)
@given(updates_st)
def test_consolidate_matches_counter_model(updates: list[Update]) -> None:
    """Sums per (row, time), drops zeros, one entry per (row, time), sorted."""
    out = consolidate(updates)
    assert {(u.row, u.time): u.diff for u in out} == counter_model(updates)
    assert len({(u.row, u.time) for u in out}) == len(out)
    assert all(u.diff != 0 for u in out)
    keys = [(row_sort_key(u.row), u.time) for u in out]
    assert keys == sorted(keys)


@settings(max_examples=200, deadline=None)
@given(updates_st, st.randoms(use_true_random=False))
def test_consolidate_order_insensitive_and_idempotent(
    updates: list[Update], rnd: random.Random
) -> None:
    """Any order, any pre-consolidated split, and re-consolidating agree."""
    out = consolidate(updates)
    shuffled = list(updates)
    rnd.shuffle(shuffled)
    assert consolidate(shuffled) == out
    assert consolidate(out) == out
    # Splitting the log anywhere and consolidating the parts first changes nothing.
    cut = rnd.randint(0, len(updates))
    assert consolidate(consolidate(updates[:cut]) + consolidate(updates[cut:])) == out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(rows, st.integers(-3, 3)), max_size=40), st.randoms(use_true_random=False)
)
def test_consolidate_rows_matches_counter_model(
    pairs: list[tuple[Row, int]], rnd: random.Random
) -> None:
    """Sums per row, no zeros, sorted, order-insensitive, idempotent."""
    out = consolidate_rows(pairs)
    assert dict(out) == rows_model(pairs)
    assert len(out) == len(dict(out))
    assert all(diff != 0 for _, diff in out)
    assert [row_sort_key(r) for r, _ in out] == sorted(row_sort_key(r) for r, _ in out)
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    assert consolidate_rows(shuffled) == out
    assert consolidate_rows(out) == out


def table_rows(table: pa.Table, desc: RelationDesc) -> list[tuple[Row, int]]:
    columns = [table.column(name).to_pylist() for name in desc.names]
    data = list(zip(*columns, strict=True)) if columns else [() for _ in range(table.num_rows)]
    return list(zip(data, table.column(DIFF_COLUMN).to_pylist(), strict=True))


@settings(max_examples=150, deadline=None)
@given(updates_st)
def test_consolidate_table_agrees_at_every_as_of(updates: list[Update]) -> None:
    """The Arrow path equals consolidate_rows at every as_of (NULL keys
    included), and equals consolidate per (row, time) without one."""
    table = updates_to_table(updates, DESC)
    for as_of in range(-1, 8):
        got = table_rows(consolidate_table(table, DESC, as_of), DESC)
        want = consolidate_rows((u.row, u.diff) for u in updates if u.time <= as_of)
        assert consolidate_rows(got) == want  # same multiset
        assert len(got) == len(want)  # and already consolidated (no dups, no zeros)
    per_time = table_to_updates(consolidate_table(table, DESC, None), DESC)
    assert consolidate(per_time) == consolidate(updates)
    assert len(per_time) == len(consolidate(updates))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(-3, 3)), max_size=20))
def test_consolidate_table_zero_columns(pairs: list[tuple[int, int]]) -> None:
    """A relation with no columns consolidates to one row (its count) or none."""
    desc = RelationDesc.of()
    updates = [Update((), t, d) for t, d in pairs]
    table = updates_to_table(updates, desc)
    for as_of in range(0, 5):
        total = sum(d for t, d in pairs if t <= as_of)
        got = consolidate_table(table, desc, as_of).column(DIFF_COLUMN).to_pylist()
        assert got == ([total] if total else [])
