"""Nexmark events: the Person, Auction and Bid streams of the Nexmark
benchmark (Tucker et al.; the Beam/Flink generator), deterministic by seed.

Why here: Nexmark is the benchmark users compare streaming/IVM engines with,
so Tidemark needs its data as a source like any other (`bench/nexmark.py`
loads it into tables and a Parquet lake; `NexmarkLoadGenerator` offers it as
the load generator `CREATE SOURCE ... FROM LOAD GENERATOR NEXMARK`).

The model follows the Java generator where it matters for the queries:

- event `i` (0-based, global) is a Person if `i % 50 == 0`, an Auction if
  `i % 50` is 1-3, else a Bid: the 1:3:46 proportions;
- ids are functions of the index (persons and auctions numbered from 1000 in
  order), so every event can name the people and auctions before it without
  state;
- sellers and bidders are "hot" (the latest ids rounded down to a multiple of
  4) 3/4 of the time, else one of the 1,000 most recent people; a bid is on
  the hot auction half of the time, else on one of the 100 most recent;
- categories 10-14, prices `100 * 10**(6u)` (u uniform), auctions expire
  1-20 s after they open;
- `date_time`/`expires` are milliseconds since the epoch (`bigint`, the Java
  model's `long`), `i * 1000 // rate` after a fixed base time: no clock.

Determinism: events come in chunks of `CHUNK` events; chunk `c` draws from
`numpy.random.default_rng([seed, c])`, so any range of events is the same
however it is split (random access by chunk, as load generators need).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa

from coordinator_lib.repr import RelationDesc, Row
from coordinator_lib.storage.load_generator import LoadGenerator

__all__ = [
    "AUCTION_DESC",
    "BID_DESC",
    "PERSON_DESC",
    "NexmarkBatch",
    "NexmarkGenerator",
    "NexmarkLoadGenerator",
    "event_kinds",
]

PERSON_DESC = RelationDesc.of(
    ("id", "bigint", False),
    ("name", "text", False),
    ("email_address", "text", False),
    ("credit_card", "text", False),
    ("city", "text", False),
    ("state", "text", False),
    ("date_time", "bigint", False),
    ("extra", "text", False),
)
AUCTION_DESC = RelationDesc.of(
    ("id", "bigint", False),
    ("item_name", "text", False),
    ("description", "text", False),
    ("initial_bid", "bigint", False),
    ("reserve", "bigint", False),
    ("date_time", "bigint", False),
    ("expires", "bigint", False),
    ("seller", "bigint", False),
    ("category", "bigint", False),
    ("extra", "text", False),
)
BID_DESC = RelationDesc.of(
    ("auction", "bigint", False),
    ("bidder", "bigint", False),
    ("price", "bigint", False),
    ("channel", "text", False),
    ("url", "text", False),
    ("date_time", "bigint", False),
    ("extra", "text", False),
)

PROPORTION_DENOMINATOR = 50  # 1 person, 3 auctions, 46 bids in every 50 events
PERSON_PROPORTION = 1
AUCTION_PROPORTION = 3
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
NUM_ACTIVE_PEOPLE = 1000
NUM_IN_FLIGHT_AUCTIONS = 100
HOT_SELLER_RATIO = 4
HOT_BIDDER_RATIO = 4
HOT_AUCTION_RATIO = 2
BASE_TIME_MS = 1_700_000_000_000  # fixed, so runs do not depend on the clock
CHUNK = 10_000  # a multiple of PROPORTION_DENOMINATOR

_FIRST_NAMES = np.array(
    ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter"]
)
_LAST_NAMES = np.array(
    ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"]
)
_CITIES = np.array(
    [
        "Phoenix",
        "Los Angeles",
        "San Francisco",
        "Boise",
        "Portland",
        "Bend",
        "Redmond",
        "Seattle",
        "Kent",
        "Cheyenne",
    ]
)
_STATES = np.array(["AZ", "CA", "ID", "OR", "WA", "WY"])
_CHANNELS = np.array(["Google", "Facebook", "Baidu", "Apple"])
_URLS = np.array([f"https://www.nexmark.com/{c.lower()}/item.htm?query=1" for c in _CHANNELS])


def event_kinds(first: int, count: int) -> np.ndarray:
    """0 (person), 1 (auction) or 2 (bid) for events first .. first + count - 1."""
    offset = np.arange(first, first + count, dtype=np.int64) % PROPORTION_DENOMINATOR
    return np.where(offset < PERSON_PROPORTION, 0, np.where(offset < 1 + AUCTION_PROPORTION, 1, 2))


@dataclass(frozen=True)
class NexmarkBatch:
    """The events of one range, split by kind (Arrow tables in the descs' schemas)."""

    person: pa.Table
    auction: pa.Table
    bid: pa.Table

    @property
    def events(self) -> int:
        return self.person.num_rows + self.auction.num_rows + self.bid.num_rows

    def tables(self) -> dict[str, pa.Table]:
        return {"person": self.person, "auction": self.auction, "bid": self.bid}

    @staticmethod
    def concat(batches: list[NexmarkBatch]) -> NexmarkBatch:
        return NexmarkBatch(
            pa.concat_tables([b.person for b in batches]),
            pa.concat_tables([b.auction for b in batches]),
            pa.concat_tables([b.bid for b in batches]),
        )


class NexmarkGenerator:
    """Events `[first, first + count)` of the stream for `seed` at `rate`
    events per second; a pure function of its arguments."""

    def __init__(self, seed: int = 0, rate: int = 10_000) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {seed!r}")
        if not isinstance(rate, int) or isinstance(rate, bool) or rate < 1:
            raise ValueError(f"rate must be an int >= 1 (events per second), got {rate!r}")
        self.seed = seed
        self.rate = rate

    def events(self, first: int, count: int) -> NexmarkBatch:
        if first < 0 or count < 0:
            raise ValueError(f"need first >= 0 and count >= 0, got {first}, {count}")
        if count == 0:
            return self._chunk(first // CHUNK).slice_events(0, 0).batch
        end = first + count
        parts = []
        for chunk in range(first // CHUNK, (end - 1) // CHUNK + 1):
            lo, hi = max(first, chunk * CHUNK), min(end, (chunk + 1) * CHUNK)
            parts.append(self._chunk(chunk).slice_events(lo - chunk * CHUNK, hi - chunk * CHUNK))
        return NexmarkBatch.concat([p.batch for p in parts])

    def _chunk(self, chunk: int) -> _Chunk:
        return _chunk(self.seed, self.rate, chunk)


@functools.lru_cache(maxsize=4)
def _chunk(seed: int, rate: int, chunk: int) -> _Chunk:
    """Chunk `chunk` of the stream (immutable, so shared): a load generator's
    ticks and its three outputs each read a slice of the same chunk, which is
    then drawn once rather than once per tick and output."""
    return _draw_chunk(seed, rate, chunk)


def _draw_chunk(seed: int, rate: int, chunk: int) -> _Chunk:
    rng = np.random.default_rng([seed, chunk])
    index = np.arange(chunk * CHUNK, (chunk + 1) * CHUNK, dtype=np.int64)
    offset = index % PROPORTION_DENOMINATOR
    epoch = index // PROPORTION_DENOMINATOR
    date_time = BASE_TIME_MS + index * 1000 // rate
    kinds = event_kinds(chunk * CHUNK, CHUNK)
    # Draw every column for every event (fixed stream per chunk), keep each kind's.
    last_person = FIRST_PERSON_ID + epoch  # the person event of this epoch came first
    last_auction = FIRST_AUCTION_ID + epoch * AUCTION_PROPORTION + np.minimum(offset - 1, 2)
    hot_seller = rng.integers(0, HOT_SELLER_RATIO, CHUNK) > 0
    any_person = last_person - rng.integers(0, NUM_ACTIVE_PEOPLE, CHUNK)
    seller = np.where(hot_seller, last_person // HOT_SELLER_RATIO * HOT_SELLER_RATIO, any_person)
    hot_bidder = rng.integers(0, HOT_BIDDER_RATIO, CHUNK) > 0
    any_bidder = last_person - rng.integers(0, NUM_ACTIVE_PEOPLE, CHUNK)
    bidder = np.where(hot_bidder, last_person // HOT_BIDDER_RATIO * HOT_BIDDER_RATIO, any_bidder)
    hot_auction = rng.integers(0, HOT_AUCTION_RATIO, CHUNK) > 0
    any_auction = last_auction - rng.integers(0, NUM_IN_FLIGHT_AUCTIONS, CHUNK)
    auction = np.where(
        hot_auction, last_auction // HOT_AUCTION_RATIO * HOT_AUCTION_RATIO, any_auction
    )
    # Ids before the first person/auction do not exist: clamp to the first.
    seller = np.maximum(seller, FIRST_PERSON_ID)
    bidder = np.maximum(bidder, FIRST_PERSON_ID)
    auction = np.maximum(auction, FIRST_AUCTION_ID)
    price = np.rint(100 * 10 ** (rng.random(CHUNK) * 6)).astype(np.int64)
    second_price = np.rint(100 * 10 ** (rng.random(CHUNK) * 6)).astype(np.int64)
    category = FIRST_CATEGORY_ID + rng.integers(0, NUM_CATEGORIES, CHUNK)
    expires = date_time + rng.integers(1_000, 20_001, CHUNK)
    first_name = _FIRST_NAMES[rng.integers(0, len(_FIRST_NAMES), CHUNK)]
    last_name = _LAST_NAMES[rng.integers(0, len(_LAST_NAMES), CHUNK)]
    city = _CITIES[rng.integers(0, len(_CITIES), CHUNK)]
    state = _STATES[rng.integers(0, len(_STATES), CHUNK)]
    card = rng.integers(0, 10_000, (CHUNK, 4))
    channel = rng.integers(0, len(_CHANNELS), CHUNK)
    item = rng.integers(0, 1_000_000, CHUNK)

    p = kinds == 0
    a = kinds == 1
    b = kinds == 2
    person_ids = last_person[p]
    names = [f"{f} {lst}" for f, lst in zip(first_name[p], last_name[p], strict=True)]
    person = pa.table(
        {
            "id": person_ids,
            "name": names,
            "email_address": [
                f"{n.replace(' ', '.').lower()}{i}@nexmark.com"
                for n, i in zip(names, person_ids.tolist(), strict=True)
            ],
            "credit_card": [" ".join(f"{d:04d}" for d in row) for row in card[p].tolist()],
            "city": city[p],
            "state": state[p],
            "date_time": date_time[p],
            "extra": pa.array([""] * int(p.sum()), pa.string()),
        },
        schema=PERSON_DESC.arrow_schema(),
    )
    auction_ids = FIRST_AUCTION_ID + epoch[a] * AUCTION_PROPORTION + offset[a] - 1
    auctions = pa.table(
        {
            "id": auction_ids,
            "item_name": [f"item-{i}" for i in item[a].tolist()],
            "description": [f"description of item-{i}" for i in item[a].tolist()],
            "initial_bid": price[a],
            "reserve": price[a] + second_price[a],
            "date_time": date_time[a],
            "expires": expires[a],
            "seller": seller[a],
            "category": category[a],
            "extra": pa.array([""] * int(a.sum()), pa.string()),
        },
        schema=AUCTION_DESC.arrow_schema(),
    )
    bids = pa.table(
        {
            "auction": auction[b],
            "bidder": bidder[b],
            "price": price[b],
            "channel": _CHANNELS[channel[b]],
            "url": _URLS[channel[b]],
            "date_time": date_time[b],
            "extra": pa.array([""] * int(b.sum()), pa.string()),
        },
        schema=BID_DESC.arrow_schema(),
    )
    kinds.setflags(write=False)  # chunks are cached and shared
    return _Chunk(kinds, NexmarkBatch(person, auctions, bids))


@dataclass(frozen=True)
class _Chunk:
    kinds: np.ndarray
    batch: NexmarkBatch

    def slice_events(self, lo: int, hi: int) -> _Chunk:
        """The events lo .. hi - 1 of this chunk (by position in the chunk)."""
        before = [int(np.count_nonzero(self.kinds[:lo] == k)) for k in range(3)]
        within = [int(np.count_nonzero(self.kinds[lo:hi] == k)) for k in range(3)]
        tables = [self.batch.person, self.batch.auction, self.batch.bid]
        sliced = [t.slice(s, n) for t, s, n in zip(tables, before, within, strict=True)]
        return _Chunk(self.kinds[lo:hi], NexmarkBatch(*sliced))


class NexmarkLoadGenerator(LoadGenerator):
    """The same events as a load generator, `CREATE SOURCE n FROM LOAD
    GENERATOR NEXMARK [(SEED s, EVENTS PER TICK e, RATE r)] FOR ALL TABLES`
    (subsources `person`, `auction`, `bid`): tick `k` emits events
    `[k * events_per_tick, (k + 1) * events_per_tick)`, inserts only. The
    events' own `date_time` is event time (`rate` events per second after a
    fixed base), independent of the tick's timestamp, so the data depends on
    the seed alone, never on when ticks ran."""

    name: ClassVar[str] = "nexmark"
    _DESCS: ClassVar[dict[str, RelationDesc]] = {
        "person": PERSON_DESC,
        "auction": AUCTION_DESC,
        "bid": BID_DESC,
    }

    def __init__(self, seed: int = 0, events_per_tick: int = 1000, rate: int = 10_000) -> None:
        if (
            not isinstance(events_per_tick, int)
            or isinstance(events_per_tick, bool)
            or events_per_tick < 1
        ):
            raise ValueError(f"events_per_tick must be an int >= 1, got {events_per_tick!r}")
        self.generator = NexmarkGenerator(seed, rate)
        self.events_per_tick = events_per_tick

    def outputs(self) -> dict[str, RelationDesc]:
        return dict(self._DESCS)

    def _changes(self, output: str, tick: int, tick_time_ms: int) -> list[tuple[Row, int]]:
        batch = self.generator.events(tick * self.events_per_tick, self.events_per_tick)
        table = batch.tables()[output]
        columns = [table.column(n).to_pylist() for n in table.column_names]
        return [(tuple(row), 1) for row in zip(*columns, strict=True)]
