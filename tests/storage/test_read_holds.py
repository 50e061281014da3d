"""Read holds: a collection's since is the least of the read policy's implied
capability and every live hold, in this process and in others. Holds are
leased, so a holder that dies stops binding once its lease runs out.
Compaction never passes a live hold (invariant 5) and never changes what a
read at or after the since returns."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.repr import (
    Frontier,
    GlobalId,
    LagWriteFrontier,
    NoPolicy,
    ReadPolicy,
    Update,
    ValidFrom,
)
from coordinator_lib.storage import (
    AppendCommand,
    ReadBeforeSince,
    ReadHold,
    StorageController,
    StorageParameters,
)
from tests.storage.support import (
    Env,
    canonical,
    create_table,
    model_snapshot,
    rows,
    start_holder,
    uid,
    wait_until,
)

T1 = uid(1)
LEASE_MS = 500


# ------------------------------------------------------------------- model


@dataclass
class Model:
    """What the since of one collection must be: it only advances, to the
    least of the implied capability and the live holds (capped at upper)."""

    policy: ReadPolicy = field(default_factory=lambda: LagWriteFrontier(1000))
    upper: int = 0
    implied: int = 0
    since: int = 0
    holds: list[int] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)

    def settle(self) -> None:
        target = self.policy.frontier(Frontier.at(self.upper))
        capability = self.upper if target.time is None else min(target.time, self.upper)
        self.implied = max(self.implied, capability)
        self.since = max(self.since, min([self.implied, *self.holds, self.upper]))


policies = st.one_of(
    st.integers(0, 3000).map(LagWriteFrontier),
    st.integers(0, 8000).map(lambda t: ValidFrom(Frontier.at(t))),
    st.integers(0, 8000).map(lambda t: NoPolicy(Frontier.at(t))),
)
updates_in_width = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", None]), st.sampled_from([1, 1, -1])),
    max_size=4,
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 2500), updates_in_width),
        st.tuples(st.just("policy"), policies),
        st.tuples(st.just("acquire"), st.none() | st.integers(-300, 3000)),
        st.tuples(st.just("downgrade"), st.integers(0, 9), st.integers(-500, 3000)),
        st.tuples(st.just("release"), st.integers(0, 9)),
        st.tuples(st.just("maintain")),
    ),
    min_size=4,
    max_size=14,
)

_ids = itertools.count(1000)


def check_against_model(controller: StorageController, id: GlobalId, model: Model) -> None:
    """Frontiers equal the model's; reads at the since and every held time
    return the model's contents."""
    assert controller.collection_frontiers(id) == (
        Frontier.at(model.since),
        Frontier.at(model.upper),
    )
    assert controller.collection(id).read_holds == {
        t: model.holds.count(t) for t in set(model.holds)
    }
    for t in {model.since, *model.holds}:
        if t < model.upper:
            assert canonical(controller.snapshot(id, t)) == model_snapshot(model.updates, t)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations)
def test_since_follows_the_model(controller: StorageController, ops: list[tuple[Any, ...]]) -> None:
    id = uid(next(_ids))
    create_table(controller, id)
    model = Model()
    holds: list[ReadHold] = []
    for op in ops:
        if op[0] == "append":
            _, width, new_rows = op
            start = model.upper
            batch = [
                Update((k, v), start + (i * 7) % width, diff)
                for i, (k, v, diff) in enumerate(new_rows)
            ]
            controller.append([AppendCommand(id, batch, start + width)])
            model.updates += batch
            model.upper = start + width
        elif op[0] == "policy":
            controller.set_read_policy([(id, op[1])])
            model.policy = op[1]
        elif op[0] == "acquire":
            at = None if op[1] is None else model.since + op[1]
            if at is not None and at < model.since:
                with pytest.raises(ReadBeforeSince, match=str(id)):
                    controller.acquire_read_hold(id, at)
            else:
                hold = controller.acquire_read_hold(id, at)
                assert hold.time == (model.since if at is None else at)
                holds.append(hold)
                model.holds.append(hold.time)
        elif op[0] == "downgrade" and holds:
            i = op[1] % len(holds)
            target = holds[i].time + op[2]  # type: ignore[operator]
            holds[i].downgrade(target)
            model.holds[i] = max(model.holds[i], target)
            assert holds[i].time == model.holds[i]
        elif op[0] == "release" and holds:
            i = op[1] % len(holds)
            holds.pop(i).release()
            model.holds.pop(i)
        elif op[0] == "maintain":
            controller.maintain()
        model.settle()
        check_against_model(controller, id, model)
    for hold in holds:
        hold.release()


# ------------------------------------------------------------ single process


def test_a_hold_defaults_to_the_current_since(controller: StorageController) -> None:
    create_table(controller, T1)
    controller.set_read_policy([(T1, NoPolicy(Frontier.at(0)))])
    controller.append([AppendCommand(T1, rows((1, "a"), time=0), 5000)])
    later = controller.acquire_read_hold(T1, 3000)
    hold = controller.acquire_read_hold(T1)
    assert hold.time == 0 == controller.collection_frontiers(T1)[0].time
    # It really holds 0: a policy that would compact up to the upper stops there.
    controller.set_read_policy([(T1, LagWriteFrontier(0))])
    assert controller.collection_frontiers(T1)[0] == Frontier.at(0)
    assert controller.snapshot(T1, 0) == [((1, "a"), 1)]
    hold.release()
    assert controller.collection_frontiers(T1)[0] == Frontier.at(3000)
    later.release()
    assert controller.collection_frontiers(T1)[0] == Frontier.at(5000)


def test_hold_before_the_since_is_refused(controller: StorageController) -> None:
    create_table(controller, T1)
    controller.append([AppendCommand(T1, [], 5000)])
    assert controller.collection_frontiers(T1)[0] == Frontier.at(4000)
    with pytest.raises(ReadBeforeSince, match="u1") as caught:
        controller.acquire_read_hold(T1, 3999)
    assert caught.value.since == Frontier.at(4000)
    assert not controller.collection(T1).read_holds
    hold = controller.acquire_read_hold(T1, 4000)
    assert controller.collection(T1).read_holds == {4000: 1}
    hold.release()


def test_hold_handle_semantics(controller: StorageController) -> None:
    create_table(controller, T1)
    controller.set_read_policy([(T1, LagWriteFrontier(0))])
    controller.append([AppendCommand(T1, [], 1000)])
    with controller.acquire_read_hold(T1, 1000) as hold:
        controller.append([AppendCommand(T1, [], 9000)])
        hold.downgrade(500)  # backwards: ignored
        assert hold.time == 1000
        assert controller.collection_frontiers(T1)[0] == Frontier.at(1000)
        hold.downgrade(4000)
        assert controller.collection_frontiers(T1)[0] == Frontier.at(4000)
    assert hold.released
    assert controller.collection_frontiers(T1)[0] == Frontier.at(9000)
    hold.release()  # releasing twice is harmless
    with pytest.raises(ValueError, match="u1"):
        hold.downgrade(9000)
    assert controller.collection_frontiers(T1)[0] == Frontier.at(9000)


def test_holds_of_another_controller_bind(env: Env) -> None:
    """Two controllers on one environment (as two processes would be): a
    hold in one keeps the other from advancing since; close releases it."""
    writer, reader = env.open(), env.open()
    create_table(writer, T1)
    writer.set_read_policy([(T1, LagWriteFrontier(0))])
    writer.append([AppendCommand(T1, rows((1, "a"), time=0), 1000)])
    create_table(reader, T1)
    reader.acquire_read_hold(T1, 1000)
    writer.append([AppendCommand(T1, rows((2, "b"), time=1500), 8000)])
    writer.maintain()
    assert writer.collection_frontiers(T1) == (Frontier.at(1000), Frontier.at(8000))
    assert writer.snapshot(T1, 1000) == [((1, "a"), 1)]
    reader.close()
    assert writer.collection_frontiers(T1)[0] == Frontier.at(8000)


def test_compaction_never_passes_a_hold_and_keeps_reads(
    controller: StorageController, env: Env
) -> None:
    create_table(controller, T1)
    controller.set_read_policy([(T1, NoPolicy(Frontier.at(0)))])
    written: list[Update] = []
    for i in range(12):
        batch = [*rows((i % 4, f"v{i}"), time=i * 100 + 10)]
        if i >= 2:
            batch.append(Update(((i - 2) % 4, f"v{i - 2}"), i * 100 + 50, -1))
        controller.append([AppendCommand(T1, batch, (i + 1) * 100)])
        written += batch
    hold = controller.acquire_read_hold(T1, 650)
    controller.set_read_policy([(T1, LagWriteFrontier(0))])
    assert controller.collection_frontiers(T1) == (Frontier.at(650), Frontier.at(1200))
    # Contents change only at the update times: read there and just before.
    update_times = {u.time for u in written}
    candidates = {650, 1199} | update_times | {t - 1 for t in update_times}
    times = sorted(t for t in candidates if t >= 650)
    before = {t: canonical(controller.snapshot(T1, t)) for t in times}
    assert before == {t: model_snapshot(written, t) for t in times}
    batches = controller.collection_statistics(T1).batches
    report = controller.maintain()
    assert report.compacted_batches > 0
    assert controller.collection_statistics(T1).batches < batches
    assert controller.collection_frontiers(T1)[0] == Frontier.at(650)
    assert {t: canonical(controller.snapshot(T1, t)) for t in times} == before
    with pytest.raises(ReadBeforeSince):
        controller.snapshot(T1, 649)
    hold.release()
    controller.maintain()
    assert controller.collection_frontiers(T1)[0] == Frontier.at(1200)


# ------------------------------------------------------------ other processes


@pytest.mark.slow
def test_a_hold_in_another_process_binds_until_released(env: Env) -> None:
    controller = env.open(StorageParameters(reader_lease_ms=LEASE_MS))
    create_table(controller, T1)
    controller.set_read_policy([(T1, LagWriteFrontier(0))])
    controller.append([AppendCommand(T1, rows((1, "a"), time=0), 1000)])
    holder = start_holder(env, T1, None, LEASE_MS)
    try:
        assert holder.time == 1000
        # Several leases long: the holder's heartbeats keep its hold alive.
        deadline = time.monotonic() + 4 * LEASE_MS / 1000
        upper = 1000
        while time.monotonic() < deadline:
            upper += 1000
            controller.append([AppendCommand(T1, rows((upper, "b"), time=upper - 1), upper)])
            controller.maintain()
            assert controller.collection_frontiers(T1)[0] == Frontier.at(1000)
            time.sleep(0.1)
        assert controller.snapshot(T1, 1000) == [((1, "a"), 1)]
    finally:
        holder.release()
    assert controller.collection_frontiers(T1)[0] == Frontier.at(upper)


@pytest.mark.slow
def test_a_killed_holder_stops_binding_after_its_lease(env: Env) -> None:
    controller = env.open(StorageParameters(reader_lease_ms=LEASE_MS))
    create_table(controller, T1)
    controller.set_read_policy([(T1, LagWriteFrontier(0))])
    controller.append([AppendCommand(T1, rows((1, "a"), time=0), 1000)])
    holder = start_holder(env, T1, 1000, LEASE_MS)
    controller.append([AppendCommand(T1, rows((2, "b"), time=1000), 6000)])
    assert controller.collection_frontiers(T1)[0] == Frontier.at(1000)
    holder.kill()
    killed = time.monotonic()
    # Without any further write, the periodic maintenance notices the lapsed
    # lease and lets the since catch up with the policy.
    assert wait_until(
        lambda: (
            (controller.maintain(), controller.collection_frontiers(T1)[0])[1] == Frontier.at(6000)
        ),
        timeout_s=10,
    )
    assert time.monotonic() - killed >= LEASE_MS / 1000 * 0.8
    controller.append([AppendCommand(T1, [], 7000)])
    assert controller.collection_frontiers(T1)[0] == Frontier.at(7000)
