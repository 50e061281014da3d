"""Liveness leases and owner election on a fake clock, in memory and in
consensus (SQLite): both stores keep the same contract."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator_lib.persist.consensus import open_consensus
from coordinator_lib.scheduler import CaptureInfo, FakeClock, InMemoryLeaseStore, LeaseStore
from coordinator_lib.scheduler.consensus_lease import ConsensusLeaseStore


@pytest.fixture(params=["memory", "consensus"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LeaseStore]:
    if request.param == "memory":
        yield InMemoryLeaseStore(FakeClock(0))
        return
    consensus = open_consensus(str(tmp_path / "consensus.db"))
    yield ConsensusLeaseStore(consensus, clock=FakeClock(0))
    consensus.close()


def test_capture_lease_lives_while_renewed(store: LeaseStore) -> None:
    lease = store.acquire_capture_lease("w1", 100, "host:1")
    assert store.alive_captures() == {"w1": CaptureInfo("w1", lease.epoch, "host:1")}
    for _ in range(5):
        store.clock.advance(60)  # type: ignore[attr-defined]
        renewed = store.renew_capture_lease(lease, 100)
        assert renewed is not None and renewed.epoch == lease.epoch
        lease = renewed
    assert store.is_live("w1", lease.epoch)


def test_expired_lease_is_dead_for_good(store: LeaseStore) -> None:
    lease = store.acquire_capture_lease("w1", 100)
    store.clock.advance(100)  # type: ignore[attr-defined]
    assert store.alive_captures() == {}
    assert not store.is_live("w1", lease.epoch)
    assert store.renew_capture_lease(lease, 100) is None
    again = store.acquire_capture_lease("w1", 100)
    assert again.epoch > lease.epoch  # a new incarnation
    assert store.renew_capture_lease(lease, 100) is None


def test_restart_supersedes_the_old_incarnation(store: LeaseStore) -> None:
    old = store.acquire_capture_lease("w1", 1_000)
    new = store.acquire_capture_lease("w1", 1_000)
    assert new.epoch > old.epoch
    assert not store.is_live("w1", old.epoch) and store.is_live("w1", new.epoch)
    assert store.renew_capture_lease(old, 1_000) is None
    store.release_capture_lease(old)  # no effect: not current
    assert store.alive_captures()["w1"].epoch == new.epoch
    store.release_capture_lease(new)
    assert store.alive_captures() == {}


def test_alive_captures_sorted_by_id(store: LeaseStore) -> None:
    for capture in ("w3", "w1", "w2"):
        store.acquire_capture_lease(capture, 100)
    assert list(store.alive_captures()) == ["w1", "w2", "w3"]


def test_one_owner_at_a_time_and_revisions_grow(store: LeaseStore) -> None:
    first = store.campaign_owner("serve0", 100)
    assert first is not None and store.get_owner() == first
    assert store.campaign_owner("serve1", 100) is None
    store.clock.advance(50)  # type: ignore[attr-defined]
    first = store.renew_owner_lease(first, 100)
    assert first is not None
    store.clock.advance(100)  # type: ignore[attr-defined]
    assert store.get_owner() is None
    second = store.campaign_owner("serve1", 100)
    assert second is not None and second.revision > first.revision
    assert store.renew_owner_lease(first, 100) is None  # deposed
    store.resign_owner(first)  # no effect
    assert store.get_owner() == second
    store.resign_owner(second)
    third = store.campaign_owner("serve0", 100)
    assert third is not None and third.revision > second.revision


def test_fake_clock_never_goes_back() -> None:
    with pytest.raises(ValueError):
        FakeClock(5).advance(-1)


def test_consensus_leases_are_shared_and_filed_by_cluster(tmp_path: Path) -> None:
    """Two processes' stores over one consensus see each other's leases;
    a cluster's store lists only its captures; epochs grow across ids."""
    clock = FakeClock(0)
    consensus = open_consensus(str(tmp_path / "consensus.db"))
    other = open_consensus(str(tmp_path / "consensus.db"))
    a = ConsensusLeaseStore(consensus, cluster="a", clock=clock)
    b = ConsensusLeaseStore(other, cluster="b", clock=clock)
    everyone = ConsensusLeaseStore(other, clock=clock)
    la = a.acquire_capture_lease("a-0", 100, "pid:1")
    lb = b.acquire_capture_lease("b-0", 100)
    assert lb.epoch > la.epoch
    assert list(a.alive_captures()) == ["a-0"] and list(b.alive_captures()) == ["b-0"]
    assert list(everyone.alive_captures()) == ["a-0", "b-0"]
    assert everyone.is_live("a-0", la.epoch)
    owner = a.campaign_owner("serve0", 100)
    assert owner is not None and b.get_owner() == owner
    assert b.campaign_owner("serve1", 100) is None
    with pytest.raises(ValueError):
        a.acquire_capture_lease("bad/id", 100)
    consensus.close()
    other.close()
