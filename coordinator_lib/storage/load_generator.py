"""Load generators: deterministic synthetic sources, like Materialize's
`CREATE SOURCE ... FROM LOAD GENERATOR COUNTER | AUCTION`, and NEXMARK (the
Nexmark benchmark's person, auction and bid streams; storage/nexmark.py).

A generator is a pure function of (seed, output, tick index, tick time): no
I/O, no clock, no hidden state. The ingestion maps tick `k` to a timestamp and
appends `changes(output, k, tick_time_ms)` at it; after a restart it resumes at
the tick after the shard's upper. Because tick `k` can be computed on its own
(random access) and always yields the same changes, a restart neither loses nor
duplicates anything.

Randomness for tick `k` of an output comes from `random.Random(f"{seed}:{output}:{k}")`.
Seeding `random.Random` with a `str` hashes it with SHA-512, so the stream is
the same in every process whatever `PYTHONHASHSEED` is (unlike `hash()`).
"""

from __future__ import annotations

import datetime as dt
import inspect
import random
from abc import ABC, abstractmethod
from typing import ClassVar

from coordinator_lib.repr import RelationDesc, Row

__all__ = [
    "AUCTION_ITEMS",
    "AuctionGenerator",
    "CounterGenerator",
    "LoadGenerator",
    "known_kinds",
    "make_generator",
    "ms_to_datetime",
]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def ms_to_datetime(ms: int) -> dt.datetime:
    """A tz-aware UTC datetime for a millisecond timestamp, exactly (no float
    rounding, which `fromtimestamp(ms / 1000)` could introduce)."""
    return _EPOCH + dt.timedelta(milliseconds=ms)


def _check_tick(tick: int) -> None:
    """Ticks index a sequence starting at 0; a bool or negative is a caller bug."""
    if not isinstance(tick, int) or isinstance(tick, bool) or tick < 0:
        raise ValueError(f"tick must be an int >= 0, got {tick!r}")


class LoadGenerator(ABC):
    """A deterministic source with one or more outputs (subsources)."""

    name: ClassVar[str]

    @abstractmethod
    def outputs(self) -> dict[str, RelationDesc]:
        """Output name -> schema. A fresh dict each call, so callers may mutate it."""

    @abstractmethod
    def _changes(self, output: str, tick: int, tick_time_ms: int) -> list[tuple[Row, int]]:
        """The changes of a known output at a valid tick."""

    def changes(self, output: str, tick: int, tick_time_ms: int) -> list[tuple[Row, int]]:
        """The `(row, diff)` changes of `output` at tick `tick`, whose timestamp is
        `tick_time_ms`. Same arguments, same answer; needs no earlier tick."""
        if output not in self.outputs():
            known = ", ".join(sorted(self.outputs()))
            raise KeyError(
                f"load generator {self.name!r} has no output {output!r} (known: {known})"
            )
        _check_tick(tick)
        return self._changes(output, tick, tick_time_ms)

    def _rng(self, seed: object, output: str, tick: int) -> random.Random:
        """A random stream private to (seed, output, tick): random access by tick."""
        return random.Random(f"{seed}:{output}:{tick}")


class CounterGenerator(LoadGenerator):
    """Materialize's COUNTER: tick k inserts k + 1. With `max_cardinality` m the
    value k + 1 - m is retracted in the same tick, so the collection always
    holds the latest min(k + 1, m) values."""

    name: ClassVar[str] = "counter"
    OUTPUT: ClassVar[str] = "counter"

    def __init__(self, max_cardinality: int | None = None) -> None:
        if max_cardinality is not None and (
            not isinstance(max_cardinality, int)
            or isinstance(max_cardinality, bool)
            or max_cardinality < 1
        ):
            raise ValueError(f"max_cardinality must be an int >= 1, got {max_cardinality!r}")
        self.max_cardinality = max_cardinality

    def outputs(self) -> dict[str, RelationDesc]:
        return {self.OUTPUT: RelationDesc.of(("counter", "bigint", False))}

    def _changes(self, output: str, tick: int, tick_time_ms: int) -> list[tuple[Row, int]]:
        out: list[tuple[Row, int]] = [((tick + 1,), 1)]
        m = self.max_cardinality
        if m is not None and tick >= m:
            out.append(((tick + 1 - m,), -1))
        return out


AUCTION_ITEMS: tuple[str, ...] = (
    "Signed Memorabilia",
    "City Bar Crawl",
    "Best Pizza in Town",
    "Gift Basket",
    "Custom Art",
)

# Pools the static outputs draw names from (per seed).
_ORG_NAMES: tuple[str, ...] = (
    "Acme Anvils",
    "Blue Harbor Logistics",
    "Cedar & Stone",
    "Driftwood Labs",
    "Ember Foods",
    "Fjord Analytics",
    "Granite Insurance",
    "Harvest Moon Farms",
    "Ironbridge Capital",
    "Juniper Health",
    "Kestrel Aerospace",
    "Lighthouse Media",
    "Marigold Textiles",
    "Northwind Freight",
    "Orchard Software",
    "Pinecrest Energy",
    "Quarry Robotics",
    "Riverbend Retail",
    "Saltmarsh Biotech",
    "Tidewater Shipping",
)
_FIRST_NAMES: tuple[str, ...] = (
    "Ada",
    "Ben",
    "Chloe",
    "Dmitri",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemi",
    "Luca",
    "Maya",
    "Nils",
    "Olga",
    "Priya",
    "Quinn",
    "Rosa",
    "Sami",
    "Tara",
)
_LAST_NAMES: tuple[str, ...] = (
    "Abbott",
    "Becker",
    "Castro",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ivanova",
    "Jensen",
    "Kowalski",
    "Larsen",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Patel",
    "Quiroga",
    "Rossi",
    "Silva",
    "Tanaka",
)


class AuctionGenerator(LoadGenerator):
    """Materialize's AUCTION: static organizations, users and accounts at tick 0;
    every tick one new auction (id k + 1, open for 10 s) and 0-10 bids on the
    auctions still open. Only inserts, never retractions (monotonic)."""

    name: ClassVar[str] = "auction"

    ORGANIZATIONS: ClassVar[int] = 10
    USERS: ClassVar[int] = 100
    ACCOUNTS: ClassVar[int] = 100
    # An auction ends 10 s after the tick that opens it; with Materialize's
    # default 1 s tick it is open for the 10 ticks k .. k + 9.
    AUCTION_DURATION_MS: ClassVar[int] = 10_000
    OPEN_TICKS: ClassVar[int] = 10
    MAX_BIDS_PER_TICK: ClassVar[int] = 10
    # Bid i of tick k has id (k + 1) * BID_ID_STRIDE + i: unique because
    # i < MAX_BIDS_PER_TICK < BID_ID_STRIDE, and never 0.
    BID_ID_STRIDE: ClassVar[int] = 100

    _DESCS: ClassVar[dict[str, RelationDesc]] = {
        "organizations": RelationDesc.of(
            ("id", "bigint", False), ("name", "text", False), keys=((0,),)
        ),
        "users": RelationDesc.of(
            ("id", "bigint", False),
            ("org_id", "bigint", False),
            ("name", "text", False),
            keys=((0,),),
        ),
        "accounts": RelationDesc.of(
            ("id", "bigint", False),
            ("org_id", "bigint", False),
            ("balance", "bigint", False),
            keys=((0,),),
        ),
        "auctions": RelationDesc.of(
            ("id", "bigint", False),
            ("seller", "bigint", False),
            ("item", "text", False),
            ("end_time", "timestamp with time zone", False),
            keys=((0,),),
        ),
        "bids": RelationDesc.of(
            ("id", "bigint", False),
            ("buyer", "bigint", False),
            ("auction_id", "bigint", False),
            ("amount", "integer", False),
            ("bid_time", "timestamp with time zone", False),
            keys=((0,),),
        ),
    }

    def __init__(self, seed: int = 0) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError(f"seed must be an int, got {seed!r}")
        self.seed = seed

    def outputs(self) -> dict[str, RelationDesc]:
        return dict(self._DESCS)

    def _changes(self, output: str, tick: int, tick_time_ms: int) -> list[tuple[Row, int]]:
        rng = self._rng(self.seed, output, tick)
        if output in ("organizations", "users", "accounts"):
            if tick != 0:
                return []
            rows = getattr(self, f"_{output}")(rng)
            return [(row, 1) for row in rows]
        if output == "auctions":
            return [(self._auction(rng, tick, tick_time_ms), 1)]
        return [(row, 1) for row in self._bids(rng, tick, tick_time_ms)]

    def _organizations(self, rng: random.Random) -> list[Row]:
        names = rng.sample(_ORG_NAMES, self.ORGANIZATIONS)
        return [(i + 1, name) for i, name in enumerate(names)]

    def _users(self, rng: random.Random) -> list[Row]:
        # Distinct names: sample from the first x last product by index.
        picks = rng.sample(range(len(_FIRST_NAMES) * len(_LAST_NAMES)), self.USERS)
        rows: list[Row] = []
        for i, pick in enumerate(picks):
            first, last = divmod(pick, len(_LAST_NAMES))
            org_id = rng.randint(1, self.ORGANIZATIONS)
            rows.append((i + 1, org_id, f"{_FIRST_NAMES[first]} {_LAST_NAMES[last]}"))
        return rows

    def _accounts(self, rng: random.Random) -> list[Row]:
        return [
            (i + 1, rng.randint(1, self.ORGANIZATIONS), rng.randint(1, 100) * 100)
            for i in range(self.ACCOUNTS)
        ]

    def _auction(self, rng: random.Random, tick: int, tick_time_ms: int) -> Row:
        seller = rng.randint(1, self.USERS)
        item = rng.choice(AUCTION_ITEMS)
        end_time = ms_to_datetime(tick_time_ms + self.AUCTION_DURATION_MS)
        return (tick + 1, seller, item, end_time)

    def _bids(self, rng: random.Random, tick: int, tick_time_ms: int) -> list[Row]:
        # Open auctions at tick k: ids k - OPEN_TICKS + 2 .. k + 1 (at least 1),
        # the auction opened this tick included (it is appended at the same time).
        newest = tick + 1
        oldest = max(1, newest - self.OPEN_TICKS + 1)
        bid_time = ms_to_datetime(tick_time_ms)
        rows: list[Row] = []
        for i in range(rng.randint(0, self.MAX_BIDS_PER_TICK)):
            buyer = rng.randint(1, self.USERS)
            auction_id = rng.randint(oldest, newest)
            amount = rng.randint(1, 100)
            rows.append(((tick + 1) * self.BID_ID_STRIDE + i, buyer, auction_id, amount, bid_time))
        return rows


_KINDS: dict[str, type[LoadGenerator]] = {
    CounterGenerator.name: CounterGenerator,
    AuctionGenerator.name: AuctionGenerator,
}


def _kinds() -> dict[str, type[LoadGenerator]]:
    """COUNTER, AUCTION and NEXMARK. nexmark.py builds on this module (and
    needs numpy), so it is imported on first use rather than at import time."""
    from coordinator_lib.storage.nexmark import NexmarkLoadGenerator

    return {**_KINDS, NexmarkLoadGenerator.name: NexmarkLoadGenerator}


def known_kinds() -> list[str]:
    """The generator kinds `make_generator` accepts (for error messages and docs)."""
    return sorted(_kinds())


def make_generator(kind: str, **options: object) -> LoadGenerator:
    """Build a generator from `CREATE SOURCE ... FROM LOAD GENERATOR <kind> (<options>)`.
    Errors name what was wrong and what is allowed, since they reach SQL users."""
    cls = _kinds().get(kind.strip().lower()) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(
            f"unknown load generator {kind!r}; known load generators: {', '.join(known_kinds())}"
        )
    allowed = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(
            f"load generator {cls.name!r} does not take option(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(allowed) or 'none'}"
        )
    return cls(**options)
