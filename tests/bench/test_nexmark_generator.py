"""The Nexmark generator: deterministic by seed, the same events however a
range is split, the 1:3:46 proportions, and references only to people and
auctions that already exist."""

from __future__ import annotations

import pyarrow as pa
import pytest

from coordinator_lib.storage.nexmark import (
    CHUNK,
    FIRST_AUCTION_ID,
    FIRST_PERSON_ID,
    NexmarkBatch,
    NexmarkGenerator,
    NexmarkLoadGenerator,
)


def test_same_seed_same_events_other_seed_other_events() -> None:
    a = NexmarkGenerator(7).events(0, 5000)
    b = NexmarkGenerator(7).events(0, 5000)
    c = NexmarkGenerator(8).events(0, 5000)
    assert a.bid.equals(b.bid) and a.auction.equals(b.auction) and a.person.equals(b.person)
    assert not a.bid.equals(c.bid)


@pytest.mark.parametrize("cut", [1, 49, 50, 777, CHUNK - 1, CHUNK, CHUNK + 3])
def test_a_range_is_the_same_however_it_is_split(cut: int) -> None:
    gen = NexmarkGenerator(3)
    first, count = 123, CHUNK + 2000
    whole = gen.events(first, count)
    parts = NexmarkBatch.concat([gen.events(first, cut), gen.events(first + cut, count - cut)])
    for name, table in whole.tables().items():
        assert table.equals(parts.tables()[name]), name


def test_proportions_ids_and_references() -> None:
    batch = NexmarkGenerator(1).events(0, 50_000)
    assert (batch.person.num_rows, batch.auction.num_rows, batch.bid.num_rows) == (
        1000,
        3000,
        46_000,
    )
    persons = batch.person.column("id").to_pylist()
    auctions = batch.auction.column("id").to_pylist()
    assert persons == list(range(FIRST_PERSON_ID, FIRST_PERSON_ID + 1000))
    assert auctions == list(range(FIRST_AUCTION_ID, FIRST_AUCTION_ID + 3000))
    # Every seller and bidder is a person, every bid on an auction, opened before.
    person_time = dict(zip(persons, batch.person.column("date_time").to_pylist(), strict=True))
    auction_time = dict(zip(auctions, batch.auction.column("date_time").to_pylist(), strict=True))
    for seller, at in zip(
        *(batch.auction.column(c).to_pylist() for c in ("seller", "date_time")), strict=True
    ):
        assert person_time[seller] <= at
    for auction, bidder, at in zip(
        *(batch.bid.column(c).to_pylist() for c in ("auction", "bidder", "date_time")), strict=True
    ):
        assert auction_time[auction] <= at and bidder in person_time
    assert set(batch.auction.column("category").to_pylist()) == {10, 11, 12, 13, 14}
    expires = pa.compute.subtract(
        batch.auction.column("expires"), batch.auction.column("date_time")
    )
    assert pa.compute.min(expires).as_py() >= 1000 and pa.compute.max(expires).as_py() <= 20_000
    times = batch.bid.column("date_time").to_pylist()
    assert times == sorted(times)  # event time follows the event index


def test_load_generator_ticks_are_the_event_ranges() -> None:
    generator = NexmarkLoadGenerator(seed=5, events_per_tick=100)
    assert set(generator.outputs()) == {"person", "auction", "bid"}
    bids = generator.changes("bid", 2, 0)
    expected = NexmarkGenerator(5).events(200, 100).bid
    assert [row for row, _ in bids] == [tuple(r.values()) for r in expected.to_pylist()]
    assert {diff for _, diff in bids} == {1}


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="seed"):
        NexmarkGenerator(-1)
    with pytest.raises(ValueError, match="rate"):
        NexmarkGenerator(0, rate=0)
    with pytest.raises(ValueError, match="first"):
        NexmarkGenerator(0).events(-1, 10)
