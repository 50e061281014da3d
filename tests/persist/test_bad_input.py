"""Bad input is refused with a typed error naming the problem, and leaves the
shard exactly as it was: same state (seqno included), same contents, same
blob files (invariants 2 and 4: nothing half written)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from coordinator_lib.persist import (
    ConsensusError,
    InvalidUpdates,
    LeaseExpired,
    PersistClient,
    ReadBeforeSince,
    ReadBeyondUpper,
    SchemaMismatch,
    Shard,
    UpperMismatch,
)
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.repr.update import Update
from tests.persist.support import blob_files, canonical, new_shard_id, open_client

DESC = RelationDesc.of(
    ("id", "bigint", False), ("name", "text"), ("qty", "integer"), ("flag", "boolean")
)
GOOD = [Update((1, "a", 10, True), 0, 1), Update((2, None, None, None), 1, 1)]
UPPER = 3  # the fixture shard's upper
SINCE = 2  # ... and since


@dataclass(frozen=True)
class Observed:
    """Everything a failed operation must leave untouched."""

    seqno: int
    since: Frontier
    upper: Frontier
    batches: tuple[str, ...]
    contents: tuple[Any, ...]
    files: tuple[tuple[str, int], ...]


def observe(shard: Shard) -> Observed:
    state = shard.state()
    contents = tuple(
        tuple(canonical(shard.snapshot(t)))
        for t in range(state.since or 0, state.upper or 0)
        if state.since is not None
    )
    return Observed(
        seqno=state.seqno,
        since=state.since_frontier,
        upper=state.upper_frontier,
        batches=tuple(b.key for b in state.batches),
        contents=contents,
        files=tuple(sorted(blob_files(shard.blob.root, shard.shard_id).items())),
    )


@pytest.fixture
def client(consensus_url: str, tmp_path: Path) -> Iterator[PersistClient]:
    client = open_client(consensus_url, tmp_path)
    yield client
    client.close()


@pytest.fixture
def shard(client: PersistClient) -> Shard:
    """A shard with data at times 0 and 1, upper 3 and since 1."""
    shard = client.open_shard(new_shard_id(), DESC)
    shard.compare_and_append(GOOD, Frontier(0), Frontier(2))
    shard.compare_and_append([Update((3, "c", -1, False), 2, 1)], Frontier(2), Frontier(UPPER))
    assert shard.downgrade_critical_since("holder", Frontier(SINCE)) == Frontier(SINCE)
    return shard


def row(values: tuple[Any, ...], t: int = UPPER) -> Update:
    return Update(values, t, 1)


BAD_UPDATES = [
    pytest.param([row((1, "a", 5))], "row 0: expected 4 columns, got 3", id="arity-short"),
    pytest.param([row((1, "a", 5, True, 0))], "expected 4 columns, got 5", id="arity-long"),
    pytest.param([row("abcd")], "expected a tuple of 4 values", id="not-a-tuple"),  # type: ignore[arg-type]
    pytest.param(
        [row((1, "a", "five", True))], "column 'qty': expected integer, got str", id="type"
    ),
    pytest.param(
        [row((1, "a", True, True))], "column 'qty': expected integer, got bool", id="bool"
    ),
    pytest.param([row((1, 7, 5, True))], "column 'name': expected text, got int", id="type-text"),
    pytest.param(
        [row((None, "a", 5, True))], "column 'id': NULL in a NOT NULL column", id="null-not-null"
    ),
    pytest.param(
        [row((1, "a", 2**31, True))],
        "column 'qty': 2147483648 is out of range for integer",
        id="int-range",
    ),
    pytest.param([row((2**63, "a", 1, True))], "out of range for bigint", id="bigint-range"),
    pytest.param(
        [row((1, "a", 1, True)), row((2, "b", 2, False)), row((3, "c", 3, "yes"))],
        "row 2, column 'flag': expected boolean, got str",
        id="bad-third-row",
    ),
    pytest.param(
        [row((1, "a", 1, True), UPPER - 1)], "update 0 has time 2, outside [3, 5)", id="time-below"
    ),
    pytest.param(
        [row((1, "a", 1, True)), row((1, "a", 1, True), UPPER + 2)],
        "update 1 has time 5, outside [3, 5)",
        id="time-at-new-upper",
    ),
    pytest.param(
        [Update((1, "a", 1, True), "3", 1)], "time and diff must be integers", id="time-not-int"
    ),
    pytest.param(
        [Update((1, "a", 1, True), UPPER, 1.5)], "time and diff must be integers", id="diff-not-int"
    ),
]


@pytest.mark.parametrize(("updates", "message"), BAD_UPDATES)
def test_bad_updates_refused_nothing_written(
    shard: Shard, updates: list[Update], message: str
) -> None:
    before = observe(shard)
    with pytest.raises(InvalidUpdates) as info:
        shard.compare_and_append(updates, Frontier(UPPER), Frontier(UPPER + 2))
    assert message in str(info.value)
    assert observe(shard) == before


@pytest.mark.parametrize("new_upper", [UPPER, UPPER - 1, 0])
def test_new_upper_not_after_expected_refused(shard: Shard, new_upper: int) -> None:
    before = observe(shard)
    with pytest.raises(InvalidUpdates, match=rf"new upper \[{new_upper}\] must be after"):
        shard.compare_and_append([], Frontier(UPPER), Frontier(new_upper))
    assert observe(shard) == before


@pytest.mark.parametrize("expected", [0, UPPER - 1, UPPER + 1])
def test_wrong_expected_upper_refused(shard: Shard, expected: int) -> None:
    before = observe(shard)
    updates = [row((9, "z", 9, True), expected)]
    with pytest.raises(
        UpperMismatch, match=rf"expected upper \[{expected}\] but the upper is \[3\]"
    ):
        shard.compare_and_append(updates, Frontier(expected), Frontier(expected + 1))
    assert observe(shard) == before


def test_closed_expected_upper_refused(shard: Shard) -> None:
    before = observe(shard)
    with pytest.raises(InvalidUpdates, match="the upper is closed"):
        shard.compare_and_append([], Frontier.empty(), Frontier.empty())
    assert observe(shard) == before


def batch_table(**overrides: pa.Array) -> pa.Table:
    columns: dict[str, pa.Array] = {
        "id": pa.array([1, 2], pa.int64()),
        "name": pa.array(["a", None]),
        "qty": pa.array([1, 2], pa.int64()),
        "flag": pa.array([True, None]),
        "__time": pa.array([UPPER, UPPER], pa.int64()),
        "__diff": pa.array([1, 1], pa.int64()),
    }
    columns.update(overrides)
    return pa.table({k: v for k, v in columns.items() if v is not None})


BAD_TABLES = [
    pytest.param(batch_table(qty=None), "does not fit", id="missing-column"),
    pytest.param(batch_table(qty=pa.array([1, 2**40], pa.int64())), "does not fit", id="int-range"),
    pytest.param(batch_table(flag=pa.array(["yes", "no"])), "does not fit", id="type"),
    pytest.param(
        batch_table(id=pa.array([1, None], pa.int64())), "'id' with null values", id="null"
    ),
    pytest.param(
        batch_table(__time=pa.array([UPPER, UPPER + 2], pa.int64())),
        "times [3, 5] lie outside [3, 5)",
        id="time-outside",
    ),
    pytest.param(
        batch_table(__time=pa.array([UPPER, None], pa.int64())),
        "'__time' with null values",
        id="null-time",
    ),
    pytest.param(
        batch_table(__diff=pa.array([None, 1], pa.int64())),
        "'__diff' with null values",
        id="null-diff",
    ),
]


@pytest.mark.parametrize(("table", "message"), BAD_TABLES)
def test_bad_tables_refused_nothing_written(shard: Shard, table: pa.Table, message: str) -> None:
    before = observe(shard)
    with pytest.raises(InvalidUpdates) as info:
        shard.compare_and_append_table(table, Frontier(UPPER), Frontier(UPPER + 2))
    assert message in str(info.value)
    assert observe(shard) == before


def test_good_table_lands(shard: Shard) -> None:
    """The control for the table cases: the unmodified table is accepted."""
    shard.compare_and_append_table(batch_table(), Frontier(UPPER), Frontier(UPPER + 2))
    assert shard.upper() == Frontier(UPPER + 2)
    assert ((1, "a", 1, True), 1) in shard.snapshot(UPPER)
    assert ((2, None, 2, None), 1) in shard.snapshot(UPPER)


@pytest.mark.parametrize("as_of", [0, SINCE - 1])
def test_read_before_since_refused(shard: Shard, as_of: int) -> None:
    before = observe(shard)
    with pytest.raises(ReadBeforeSince, match=rf"cannot read at {as_of}: it is before the since"):
        shard.snapshot(as_of)
    with pytest.raises(ReadBeforeSince):
        shard.snapshot_table(as_of)
    assert observe(shard) == before
    # A refused listen registers its hold and drops it again: no hold left,
    # nothing else changed.
    with pytest.raises(ReadBeforeSince):
        shard.listen(as_of)
    assert shard.state().leased_readers == {}
    after = observe(shard)
    assert (after.since, after.upper, after.contents, after.files) == (
        before.since,
        before.upper,
        before.contents,
        before.files,
    )


@pytest.mark.parametrize("as_of", [UPPER, UPPER + 1, 10**12])
def test_read_at_or_after_upper_refused(shard: Shard, as_of: int) -> None:
    before = observe(shard)
    with pytest.raises(
        ReadBeyondUpper, match=rf"cannot read at {as_of}: it is not before the upper \[3\]"
    ):
        shard.snapshot(as_of)
    assert observe(shard) == before


def test_readable_range_is_exact(shard: Shard) -> None:
    """The control for the read cases: since = upper - 1 is readable."""
    assert canonical(shard.snapshot(SINCE)) == canonical(
        [((1, "a", 10, True), 1), ((2, None, None, None), 1), ((3, "c", -1, False), 1)]
    )


@pytest.mark.parametrize(
    "other",
    [
        RelationDesc.of(("id", "bigint", False), ("name", "text"), ("qty", "integer")),
        RelationDesc.of(
            ("id", "bigint", False), ("name", "text"), ("qty", "bigint"), ("flag", "boolean")
        ),
        RelationDesc.of(
            ("id", "bigint"), ("name", "text"), ("qty", "integer"), ("flag", "boolean")
        ),
        RelationDesc.of(
            ("key", "bigint", False), ("name", "text"), ("qty", "integer"), ("flag", "boolean")
        ),
    ],
    ids=["fewer-columns", "other-type", "nullability", "other-name"],
)
def test_open_with_other_desc_refused(
    client: PersistClient, shard: Shard, other: RelationDesc
) -> None:
    before = observe(shard)
    with pytest.raises(SchemaMismatch) as info:
        client.open_shard(shard.shard_id, other)
    message = str(info.value)
    assert shard.shard_id in message
    assert "['id', 'name', 'qty', 'flag']" in message
    assert observe(shard) == before


def test_leased_reader_after_lease_expired(shard: Shard) -> None:
    reader = shard.open_leased_reader(lease_ms=1)
    time.sleep(0.01)
    before = observe(shard)
    with pytest.raises(LeaseExpired, match=f"reader {reader.reader_id} .*lease expired"):
        reader.downgrade_since(Frontier(UPPER))
    with pytest.raises(LeaseExpired, match="lease expired"):
        reader.heartbeat()
    assert observe(shard) == before
    # Its hold protects nothing any more: since moves past it.
    assert shard.downgrade_critical_since("holder", Frontier(UPPER)) == Frontier(UPPER)
    assert reader.reader_id not in shard.state().leased_readers


def test_lapsed_writer_lease_append_lands_once(client: PersistClient, shard: Shard) -> None:
    """A writer whose lease ran out re-registers; its append lands exactly
    once and leaves no orphan blob behind."""
    writer = client.open_shard(shard.shard_id, DESC)
    writer.writer_lease_ms = 400
    writer.compare_and_append([row((5, "e", 5, True))], Frontier(UPPER), Frontier(UPPER + 1))
    time.sleep(0.6)
    assert writer.writer_id not in {
        wid for wid, w in shard.state().writers.items() if not w.expired(int(time.time() * 1000))
    }
    writer.compare_and_append([row((6, "f", 6, True), 4)], Frontier(UPPER + 1), Frontier(UPPER + 2))
    assert canonical(shard.snapshot(UPPER + 1)).count(((6, "f", 6, True), 1)) == 1
    # Every named batch that is not carried in the state has its blob.
    named = {b.key for b in shard.state().batches if b.inline is None}
    assert set(shard.blob.list_batches(shard.shard_id)) == named


def test_append_with_unknown_outcome_keeps_its_blob(
    client: PersistClient, shard: Shard, consensus_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """The commit lands, another process changes the shard, then the reply
    is lost (ConsensusError): the writer cannot tell whether its batch is
    named, so it must not delete the blob (GC takes it if it is not)."""
    other = open_client(consensus_url, tmp_path)  # the same environment
    real = client.consensus.compare_and_set_all

    def landed_then_lost(changes: Any) -> bool:
        assert real(changes)
        other.open_shard(shard.shard_id, DESC).open_leased_reader()  # the head moves on
        raise ConsensusError("connection lost after the commit")

    monkeypatch.setattr(client.consensus, "compare_and_set_all", landed_then_lost)
    with pytest.raises(ConsensusError):
        shard.compare_and_append([row((7, "g", 7, True))], Frontier(UPPER), Frontier(UPPER + 1))
    monkeypatch.undo()
    assert shard.upper() == Frontier(UPPER + 1)  # it did land
    assert ((7, "g", 7, True), 1) in shard.snapshot(UPPER)
    # Every named batch that is not carried in the state has its blob.
    named = {b.key for b in shard.state().batches if b.inline is None}
    assert set(shard.blob.list_batches(shard.shard_id)) == named
    other.close()
