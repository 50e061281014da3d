"""Order bytes (compute/order_bytes.py) never put a greater value first:
TopK and MIN/MAX read a group's first rows by them and would miss the true
first ones if a value could sort below one ORDER BY puts before it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from coordinator_lib.compute.local_ordered import compare_values
from coordinator_lib.compute.order_bytes import ord_bytes, row_ord
from coordinator_lib.expr.relation import OrderKey

NUMBERS = st.one_of(
    st.none(),
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=False, allow_infinity=False, places=4),
    st.sampled_from([0, -0.0, 0.0, Decimal("0.00"), 2**53 + 1, float(2**53)]),
)
TEXTS = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["abcdefgh", "abcdefgh\x00"]))


def _monotone(a: Any, b: Any, desc: bool, nulls_last: bool) -> None:
    if compare_values(a, b, desc, nulls_last) < 0:
        assert ord_bytes(a, desc, nulls_last) <= ord_bytes(b, desc, nulls_last), (a, b)


@given(NUMBERS, NUMBERS, st.booleans(), st.booleans())
def test_numbers_keep_their_order(a: Any, b: Any, desc: bool, nulls_last: bool) -> None:
    _monotone(a, b, desc, nulls_last)


@given(TEXTS, TEXTS, st.booleans(), st.booleans())
def test_texts_keep_their_order(a: Any, b: Any, desc: bool, nulls_last: bool) -> None:
    _monotone(a, b, desc, nulls_last)


@given(st.one_of(st.none(), st.datetimes()), st.one_of(st.none(), st.datetimes()), st.booleans())
def test_timestamps_keep_their_order(a: Any, b: Any, desc: bool) -> None:
    _monotone(a, b, desc, True)


def test_equal_values_tie() -> None:
    """Equal values (1, 1.0, 1.00; -0.0 and 0.0) get equal bytes, so rows
    tied in ORDER BY are read together."""
    assert len({ord_bytes(v, False, True) for v in (1, 1.0, Decimal("1.00"))}) == 1
    assert ord_bytes(-0.0, True, True) == ord_bytes(0, True, True)
    assert ord_bytes(dt.date(2020, 1, 2), False, True) < ord_bytes(dt.date(2020, 1, 3), False, True)


ROW_VALUES = st.one_of(
    NUMBERS,
    TEXTS,
    st.sampled_from(["abcdefghA", "abcdefghM", "abcdefghZ", 2**60, 2**60 + 1]),  # inexact bytes
)


@given(
    st.tuples(ROW_VALUES, ROW_VALUES),
    st.tuples(ROW_VALUES, ROW_VALUES),
    st.booleans(),
    st.booleans(),
)
def test_rows_keep_their_order(a: Any, b: Any, desc: bool, nulls_last: bool) -> None:
    """A TopK ordered by two columns: a row that ORDER BY puts first never
    gets greater bytes, also when the first column's bytes are inexact (texts
    sharing 8 bytes, integers past a double's precision) and the second column
    would order them the other way."""
    for x, y in zip(a, b, strict=True):
        if None not in (x, y) and isinstance(x, str) != isinstance(y, str):
            return  # a column holds texts or numbers, not both
    keys = [OrderKey(0, desc, nulls_last), OrderKey(1, False, True)]
    first = compare_values(a[0], b[0], desc, nulls_last) or compare_values(a[1], b[1], False, True)
    if first < 0:
        assert row_ord(keys)(a) <= row_ord(keys)(b), (a, b)


def test_inexact_first_columns_do_not_let_the_second_decide() -> None:
    keys = [OrderKey(0, False, True), OrderKey(1, False, True)]
    assert row_ord(keys)(("abcdefghA", 2)) <= row_ord(keys)(("abcdefghZ", 1))
    assert row_ord(keys)((2**60, 9)) <= row_ord(keys)((2**60 + 1, 0))
