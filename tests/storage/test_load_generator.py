"""Load generators are pure functions of (seed, output, tick, tick time): the
ingestion's exactly-once restarts rely on that, so these tests pin
determinism (also across processes), random access, the counter's
cardinality bound, referential integrity of AUCTION and row validity."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_lib.repr import consolidate_rows
from coordinator_lib.storage.load_generator import (
    AUCTION_ITEMS,
    AuctionGenerator,
    CounterGenerator,
    LoadGenerator,
    known_kinds,
    make_generator,
    ms_to_datetime,
)

START_MS = 1_700_000_000_000
TICK_MS = 1_000
REPO_ROOT = Path(__file__).resolve().parents[2]

ticks = st.integers(min_value=0, max_value=10_000)
seeds = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def tick_time(k: int) -> int:
    return START_MS + k * TICK_MS


def collect(gen: LoadGenerator, output: str, upto: int) -> list[tuple[tuple, int]]:
    """The consolidated contents of `output` after ticks 0 .. upto - 1."""
    changes = []
    for k in range(upto):
        changes.extend(gen.changes(output, k, tick_time(k)))
    return consolidate_rows(changes)


def all_generators() -> list[LoadGenerator]:
    return [
        CounterGenerator(),
        CounterGenerator(max_cardinality=3),
        AuctionGenerator(),
        AuctionGenerator(seed=42),
    ]


# ---------------------------------------------------------------- determinism


@settings(max_examples=50, deadline=None)
@given(seed=seeds, tick=ticks)
def test_auction_same_arguments_same_changes(seed: int, tick: int) -> None:
    a, b = AuctionGenerator(seed), AuctionGenerator(seed)
    for output in a.outputs():
        assert a.changes(output, tick, tick_time(tick)) == b.changes(output, tick, tick_time(tick))


@settings(max_examples=50, deadline=None)
@given(tick=ticks, others=st.lists(ticks, max_size=5), seed=seeds)
def test_random_access(tick: int, others: list[int], seed: int) -> None:
    """Tick k alone equals tick k after other ticks: no state carried between calls."""
    fresh = AuctionGenerator(seed)
    expected = {o: fresh.changes(o, tick, tick_time(tick)) for o in fresh.outputs()}
    used = AuctionGenerator(seed)
    for other in others:
        for output in used.outputs():
            used.changes(output, other, tick_time(other))
    assert {o: used.changes(o, tick, tick_time(tick)) for o in used.outputs()} == expected


def _dump_script() -> str:
    """A program printing a fingerprint of some auction ticks as JSON."""
    return (
        "import json\n"
        "from coordinator_lib.storage.load_generator import AuctionGenerator\n"
        "g = AuctionGenerator(seed=7)\n"
        f"out = {{o: [g.changes(o, k, {START_MS} + k * {TICK_MS}) for k in (0, 1, 5, 99)]"
        " for o in g.outputs()}\n"
        "print(json.dumps(out, default=str, sort_keys=True))\n"
    )


def _run_with_hashseed(hashseed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hashseed}
    result = subprocess.run(
        [sys.executable, "-c", _dump_script()],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout


def test_deterministic_across_processes_and_hash_seeds() -> None:
    """str seeding of random.Random does not depend on PYTHONHASHSEED, so a
    restarted process regenerates exactly the same changes."""
    first = _run_with_hashseed("1")
    second = _run_with_hashseed("12345")
    assert first == second
    local = AuctionGenerator(seed=7)
    here = {o: [local.changes(o, k, tick_time(k)) for k in (0, 1, 5, 99)] for o in local.outputs()}
    assert json.loads(first) == json.loads(json.dumps(here, default=str, sort_keys=True))


# -------------------------------------------------------------------- counter


def test_counter_schema_and_first_ticks() -> None:
    gen = CounterGenerator()
    desc = gen.outputs()["counter"]
    assert desc.names == ("counter",)
    assert desc.types[0].scalar_type.value == "bigint"
    assert not desc.types[0].nullable
    assert [gen.changes("counter", k, 0) for k in range(3)] == [
        [((1,), 1)],
        [((2,), 1)],
        [((3,), 1)],
    ]


def test_counter_ignores_tick_time() -> None:
    gen = CounterGenerator(max_cardinality=2)
    assert gen.changes("counter", 5, 0) == gen.changes("counter", 5, 10**12)


@settings(max_examples=100, deadline=None)
@given(k=st.integers(min_value=0, max_value=300), m=st.integers(min_value=1, max_value=50))
def test_counter_max_cardinality_keeps_latest_m(k: int, m: int) -> None:
    gen = CounterGenerator(max_cardinality=m)
    contents = collect(gen, "counter", k + 1)
    expected = [((v,), 1) for v in range(max(1, k + 2 - m), k + 2)]
    assert contents == expected
    assert len(contents) == min(k + 1, m)


@settings(max_examples=50, deadline=None)
@given(k=st.integers(min_value=0, max_value=300))
def test_counter_unbounded_is_append_only(k: int) -> None:
    contents = collect(CounterGenerator(), "counter", k + 1)
    assert contents == [((v,), 1) for v in range(1, k + 2)]


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "3"])
def test_counter_rejects_bad_max_cardinality(bad: object) -> None:
    with pytest.raises(ValueError, match="max_cardinality"):
        CounterGenerator(max_cardinality=bad)  # type: ignore[arg-type]


# -------------------------------------------------------------------- auction


def test_auction_schemas_match_materialize() -> None:
    expected = {
        "organizations": [("id", "bigint"), ("name", "text")],
        "users": [("id", "bigint"), ("org_id", "bigint"), ("name", "text")],
        "accounts": [("id", "bigint"), ("org_id", "bigint"), ("balance", "bigint")],
        "auctions": [
            ("id", "bigint"),
            ("seller", "bigint"),
            ("item", "text"),
            ("end_time", "timestamp with time zone"),
        ],
        "bids": [
            ("id", "bigint"),
            ("buyer", "bigint"),
            ("auction_id", "bigint"),
            ("amount", "integer"),
            ("bid_time", "timestamp with time zone"),
        ],
    }
    outputs = AuctionGenerator().outputs()
    assert list(outputs) == list(expected)
    for name, columns in expected.items():
        desc = outputs[name]
        got = [(n, t.scalar_type.value) for n, t in zip(desc.names, desc.types, strict=True)]
        assert got == columns, name
        assert all(not t.nullable for t in desc.types), name
        assert desc.keys == ((0,),), name


def test_outputs_returns_a_copy() -> None:
    gen = AuctionGenerator()
    gen.outputs().clear()
    assert len(gen.outputs()) == 5


def test_auction_static_outputs_only_at_tick_zero() -> None:
    gen = AuctionGenerator(seed=3)
    sizes = {"organizations": 10, "users": 100, "accounts": 100}
    for output, size in sizes.items():
        rows = gen.changes(output, 0, tick_time(0))
        assert len(rows) == size
        assert all(diff == 1 for _, diff in rows)
        assert sorted(row[0] for row, _ in rows) == list(range(1, size + 1))
        for k in (1, 2, 50):
            assert gen.changes(output, k, tick_time(k)) == []
    users = gen.changes("users", 0, 0)
    assert len({row[2] for row, _ in users}) == 100, "user names are distinct"


@settings(max_examples=20, deadline=None)
@given(seed=seeds, upto=st.integers(min_value=1, max_value=60))
def test_auction_referential_integrity(seed: int, upto: int) -> None:
    """Users and accounts reference organizations; auctions reference users;
    bids reference users and auctions that exist and are still open."""
    gen = AuctionGenerator(seed)
    orgs = {row[0] for row, _ in collect(gen, "organizations", upto)}
    users = {row[0] for row, _ in collect(gen, "users", upto)}
    assert {row[1] for row, _ in collect(gen, "users", upto)} <= orgs
    assert {row[1] for row, _ in collect(gen, "accounts", upto)} <= orgs

    auctions = {row[0]: row for row, _ in collect(gen, "auctions", upto)}
    assert sorted(auctions) == list(range(1, upto + 1))
    assert {row[1] for row in auctions.values()} <= users
    assert {row[2] for row in auctions.values()} <= set(AUCTION_ITEMS)

    bid_ids: set[int] = set()
    for k in range(upto):
        for (bid_id, buyer, auction_id, amount, bid_time), diff in gen.changes(
            "bids", k, tick_time(k)
        ):
            assert diff == 1
            assert bid_id not in bid_ids
            bid_ids.add(bid_id)
            assert buyer in users
            assert auction_id in auctions
            assert max(1, k - 8) <= auction_id <= k + 1
            assert 1 <= amount <= 100
            assert bid_time == ms_to_datetime(tick_time(k))
            assert bid_time < auctions[auction_id][3], "bids land before the auction ends"


@settings(max_examples=50, deadline=None)
@given(seed=seeds, tick=ticks)
def test_auction_tick_shape(seed: int, tick: int) -> None:
    gen = AuctionGenerator(seed)
    t = tick_time(tick)
    [(auction, diff)] = gen.changes("auctions", tick, t)
    assert diff == 1
    assert auction[0] == tick + 1
    assert auction[3] == ms_to_datetime(t + 10_000)
    bids = gen.changes("bids", tick, t)
    assert 0 <= len(bids) <= 10


@settings(max_examples=30, deadline=None)
@given(seed=seeds, tick=ticks)
def test_every_row_validates(seed: int, tick: int) -> None:
    for gen in [*all_generators(), AuctionGenerator(seed)]:
        for output, desc in gen.outputs().items():
            for k in {0, tick}:
                for position, (row, diff) in enumerate(gen.changes(output, k, tick_time(k))):
                    assert desc.validate_row(row, position) == row
                    assert diff in (1, -1)


def test_timestamps_are_utc_aware() -> None:
    [(auction, _)] = AuctionGenerator().changes("auctions", 0, START_MS)
    end_time = auction[3]
    assert end_time.tzinfo is not None
    assert end_time.utcoffset() == dt.timedelta(0)
    assert end_time == dt.datetime.fromtimestamp((START_MS + 10_000) / 1000, tz=dt.UTC)


def test_ms_to_datetime_is_exact() -> None:
    ms = 1_700_000_000_123
    value = ms_to_datetime(ms)
    assert value.microsecond == 123_000
    assert (value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1) == ms


def test_different_seeds_give_different_data() -> None:
    a, b = AuctionGenerator(seed=1), AuctionGenerator(seed=2)
    for output in ("organizations", "users", "accounts"):
        assert a.changes(output, 0, START_MS) != b.changes(output, 0, START_MS), output
    for output in ("auctions", "bids"):
        ticks_a = [a.changes(output, k, tick_time(k)) for k in range(20)]
        ticks_b = [b.changes(output, k, tick_time(k)) for k in range(20)]
        assert ticks_a != ticks_b, output


def test_outputs_are_independent_streams() -> None:
    """Each output's randomness is keyed by its name, so e.g. the seller of
    auction k is not correlated with the first buyer at tick k."""
    gen = AuctionGenerator(seed=5)
    sellers = [gen.changes("auctions", k, 0)[0][0][1] for k in range(50)]
    buyers = [bids[0][0][1] for k in range(50) if (bids := gen.changes("bids", k, 0))]
    assert sellers[: len(buyers)] != buyers


# --------------------------------------------------------------------- errors


def test_unknown_output_is_key_error() -> None:
    with pytest.raises(KeyError, match=r"no output 'nope'.*known: counter"):
        CounterGenerator().changes("nope", 0, 0)
    with pytest.raises(KeyError, match="bids"):
        AuctionGenerator().changes("counter", 0, 0)


@pytest.mark.parametrize("bad", [-1, True, 1.0, "1"])
def test_bad_tick_is_value_error(bad: object) -> None:
    with pytest.raises(ValueError, match="tick must be an int >= 0"):
        CounterGenerator().changes("counter", bad, 0)  # type: ignore[arg-type]


def test_make_generator_kinds_case_insensitive() -> None:
    assert known_kinds() == ["auction", "counter", "nexmark"]
    counter = make_generator("Counter", max_cardinality=5)
    assert isinstance(counter, CounterGenerator)
    assert counter.max_cardinality == 5
    auction = make_generator("AUCTION", seed=9)
    assert isinstance(auction, AuctionGenerator)
    assert auction.seed == 9
    assert isinstance(make_generator("counter"), CounterGenerator)
    nexmark = make_generator("Nexmark", seed=3, events_per_tick=50)
    assert set(nexmark.outputs()) == {"person", "auction", "bid"}
    assert len(nexmark.changes("bid", 0, 0)) == 46  # 1:3:46 in every 50 events


def test_make_generator_unknown_kind() -> None:
    with pytest.raises(ValueError, match=r"unknown load generator 'tpch'.*auction, counter"):
        make_generator("tpch")


def test_make_generator_unknown_option() -> None:
    with pytest.raises(ValueError, match=r"'counter' does not take option\(s\) seed.*max_card"):
        make_generator("counter", seed=1)
    with pytest.raises(ValueError, match=r"'auction' does not take option\(s\) max_cardinality"):
        make_generator("auction", max_cardinality=1)
