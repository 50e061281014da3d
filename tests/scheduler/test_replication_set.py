"""ReplicationSet, transition by transition (table-driven, after TiCDC's
replication_set_test.go), then under every ordering of incoming statuses:
the move protocol never starts a second writer, whatever arrives when."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pytest

from coordinator_lib.scheduler.messages import (
    AddTableRequest,
    Checkpoint,
    DispatchTableRequest,
    RemoveTableRequest,
    TableState,
    TableStatus,
)
from coordinator_lib.scheduler.replication_set import (
    MultiplePrimaryError,
    ReplicationSet,
    ReplicationSetState,
    Role,
)

S = ReplicationSetState
T = TableState
P, SEC, U = Role.PRIMARY, Role.SECONDARY, Role.UNDETERMINED
SPAN = "u1"


def make(state: S, primary: str = "", **roles: Role) -> ReplicationSet:
    """A set in a given state (as it would be mid-protocol)."""
    rep = ReplicationSet(SPAN, 1)
    rep.state = state
    rep.primary = primary
    rep.captures = dict(roles)
    return rep


def status(state: T, checkpoint_ts: int = 0) -> TableStatus:
    return TableStatus(SPAN, state, Checkpoint(checkpoint_ts, checkpoint_ts))


def brief(messages: Iterable[DispatchTableRequest]) -> list[tuple]:
    """("add", to, is_secondary) or ("remove", to)."""
    out: list[tuple] = []
    for m in messages:
        if isinstance(m.request, AddTableRequest):
            out.append(("add", m.to, m.request.is_secondary))
        else:
            assert isinstance(m.request, RemoveTableRequest)
            out.append(("remove", m.to))
    return out


# -- rebuilding from captures' reports (NewReplicationSet) -------------------


@dataclass
class Rebuild:
    name: str
    reports: dict[str, T]
    state: S
    primary: str = ""
    roles: dict[str, Role] = field(default_factory=dict)


REBUILDS = [
    Rebuild("nothing", {}, S.ABSENT),
    Rebuild("absent and stopped ignored", {"a": T.ABSENT, "b": T.STOPPED}, S.ABSENT),
    Rebuild("replicating", {"a": T.REPLICATING}, S.REPLICATING, "a", {"a": P}),
    Rebuild("preparing", {"a": T.PREPARING}, S.PREPARE, "", {"a": SEC}),
    Rebuild("prepared", {"a": T.PREPARED}, S.COMMIT, "", {"a": SEC}),
    Rebuild(
        "move preparing",
        {"a": T.REPLICATING, "b": T.PREPARING},
        S.PREPARE,
        "a",
        {"a": P, "b": SEC},
    ),
    Rebuild(
        "move prepared",
        {"a": T.REPLICATING, "b": T.PREPARED},
        S.COMMIT,
        "a",
        {"a": P, "b": SEC},
    ),
    Rebuild("stopping only", {"a": T.STOPPING}, S.REMOVING, "", {"a": U}),
    Rebuild(
        "stopping and prepared",
        {"a": T.STOPPING, "b": T.PREPARED},
        S.COMMIT,
        "",
        {"a": U, "b": SEC},
    ),
    Rebuild(
        "replicating and stopping",
        {"a": T.REPLICATING, "b": T.STOPPING},
        S.REPLICATING,
        "a",
        {"a": P, "b": U},
    ),
]


@pytest.mark.parametrize("case", REBUILDS, ids=lambda c: c.name)
def test_rebuild_from_reports(case: Rebuild) -> None:
    rep = ReplicationSet(SPAN, 10, {c: status(s, 20) for c, s in case.reports.items()})
    assert (rep.state, rep.primary, rep.captures) == (case.state, case.primary, case.roles)
    expected_checkpoint = 20 if case.reports else 10
    assert rep.checkpoint == Checkpoint(expected_checkpoint, expected_checkpoint)


def test_rebuild_refuses_two_primaries() -> None:
    with pytest.raises(MultiplePrimaryError):
        ReplicationSet(SPAN, 1, {"a": status(T.REPLICATING), "b": status(T.REPLICATING)})


# -- transitions --------------------------------------------------------------


@dataclass
class Step:
    name: str
    start: ReplicationSet
    event: tuple
    """("status", capture, TableState) | ("add", capture) | ("move", dest)
    | ("remove",) | ("shutdown", capture)"""
    state: S
    primary: str
    roles: dict[str, Role]
    sent: list[tuple] = field(default_factory=list)


def apply(rep: ReplicationSet, event: tuple) -> list[DispatchTableRequest]:
    kind = event[0]
    if kind == "status":
        return rep.handle_table_status(
            event[1], status(event[2], event[3] if len(event) > 3 else 0)
        )
    if kind == "add":
        return rep.handle_add_table(event[1])
    if kind == "move":
        return rep.handle_move_table(event[1])
    if kind == "remove":
        return rep.handle_remove_table()
    if kind == "shutdown":
        return rep.handle_capture_shutdown(event[1])[0]
    raise AssertionError(kind)


STEPS = [
    # ABSENT
    Step("absent: add", make(S.ABSENT), ("add", "a"), S.PREPARE, "", {"a": SEC},
         [("add", "a", True)]),
    Step("absent: stray stopped", make(S.ABSENT), ("status", "a", T.STOPPED), S.ABSENT, "", {}),
    # PREPARE, adding
    Step("prepare: secondary absent, resend", make(S.PREPARE, a=SEC), ("status", "a", T.ABSENT),
         S.PREPARE, "", {"a": SEC}, [("add", "a", True)]),
    Step("prepare: secondary preparing", make(S.PREPARE, a=SEC), ("status", "a", T.PREPARING),
         S.PREPARE, "", {"a": SEC}),
    Step("prepare: secondary prepared, promote", make(S.PREPARE, a=SEC),
         ("status", "a", T.PREPARED), S.COMMIT, "a", {"a": P}, [("add", "a", False)]),
    Step("prepare: secondary stopped", make(S.PREPARE, a=SEC), ("status", "a", T.STOPPED),
         S.ABSENT, "", {}),
    Step("prepare: secondary already replicates", make(S.PREPARE, a=SEC),
         ("status", "a", T.REPLICATING, 9), S.REPLICATING, "a", {"a": P}),
    # PREPARE, moving a -> b
    Step("move prepare: primary progress", make(S.PREPARE, "a", a=P, b=SEC),
         ("status", "a", T.REPLICATING, 9), S.PREPARE, "a", {"a": P, "b": SEC}),
    Step("move prepare: secondary prepared", make(S.PREPARE, "a", a=P, b=SEC),
         ("status", "b", T.PREPARED), S.COMMIT, "a", {"a": P, "b": SEC}, [("remove", "a")]),
    Step("move prepare: primary stopping is undetermined", make(S.PREPARE, "a", a=P, b=SEC),
         ("status", "a", T.STOPPING), S.PREPARE, "", {"a": U, "b": SEC}),
    Step("move prepare: primary stopped", make(S.PREPARE, "a", a=P, b=SEC),
         ("status", "a", T.STOPPED), S.PREPARE, "", {"b": SEC}),
    Step("move prepare: secondary stopped", make(S.PREPARE, "a", a=P, b=SEC),
         ("status", "b", T.STOPPED), S.REPLICATING, "a", {"a": P}),
    Step("move prepare: undetermined stopped", make(S.PREPARE, "", a=U, b=SEC),
         ("status", "a", T.STOPPED), S.PREPARE, "", {"b": SEC}),
    # COMMIT, moving a -> b
    Step("commit: secondary prepared, stop primary", make(S.COMMIT, "a", a=P, b=SEC),
         ("status", "b", T.PREPARED), S.COMMIT, "a", {"a": P, "b": SEC}, [("remove", "a")]),
    Step("commit: primary still replicates, ask again", make(S.COMMIT, "a", a=P, b=SEC),
         ("status", "a", T.REPLICATING), S.COMMIT, "a", {"a": P, "b": SEC}, [("remove", "a")]),
    Step("commit: primary stopping, wait", make(S.COMMIT, "a", a=P, b=SEC),
         ("status", "a", T.STOPPING), S.COMMIT, "a", {"a": P, "b": SEC}),
    Step("commit: primary stopped, promote", make(S.COMMIT, "a", a=P, b=SEC),
         ("status", "a", T.STOPPED), S.COMMIT, "b", {"b": P}, [("add", "b", False)]),
    Step("commit: primary absent, promote", make(S.COMMIT, "a", a=P, b=SEC),
         ("status", "a", T.ABSENT), S.COMMIT, "b", {"b": P}, [("add", "b", False)]),
    Step("commit: secondary stopped, keep primary", make(S.COMMIT, "a", a=P, b=SEC),
         ("status", "b", T.STOPPED), S.COMMIT, "a", {"a": P}),
    Step("commit: primary back to replicating alone", make(S.COMMIT, "a", a=P),
         ("status", "a", T.REPLICATING), S.REPLICATING, "a", {"a": P}),
    Step("commit: promoted reports prepared, resend", make(S.COMMIT, "b", b=P),
         ("status", "b", T.PREPARED), S.COMMIT, "b", {"b": P}, [("add", "b", False)]),
    Step("commit: promoted replicates", make(S.COMMIT, "b", b=P),
         ("status", "b", T.REPLICATING, 9), S.REPLICATING, "b", {"b": P}),
    Step("commit: only secondary stopped", make(S.COMMIT, "", b=SEC),
         ("status", "b", T.STOPPED), S.ABSENT, "", {}),
    Step("commit: secondary already replicates", make(S.COMMIT, "", b=SEC),
         ("status", "b", T.REPLICATING), S.REPLICATING, "b", {"b": P}),
    # COMMIT with an undetermined capture: never promote while it exists
    Step("commit: undetermined blocks promotion", make(S.COMMIT, "", a=U, b=SEC),
         ("status", "b", T.PREPARED), S.COMMIT, "", {"a": U, "b": SEC}),
    Step("commit: undetermined still stopping", make(S.COMMIT, "", a=U, b=SEC),
         ("status", "a", T.STOPPING), S.COMMIT, "", {"a": U, "b": SEC}),
    Step("commit: undetermined stopped", make(S.COMMIT, "", a=U, b=SEC),
         ("status", "a", T.STOPPED), S.COMMIT, "", {"b": SEC}),
    Step("commit: undetermined replicates, ask it to stop", make(S.COMMIT, "", a=U, b=SEC),
         ("status", "a", T.REPLICATING), S.COMMIT, "", {"a": U, "b": SEC}, [("remove", "a")]),
    Step("commit: primary stopped but undetermined left", make(S.COMMIT, "a", a=P, b=SEC, c=U),
         ("status", "a", T.STOPPED), S.COMMIT, "", {"b": SEC, "c": U}),
    # REPLICATING
    Step("replicating: progress", make(S.REPLICATING, "a", a=P),
         ("status", "a", T.REPLICATING, 9), S.REPLICATING, "a", {"a": P}),
    Step("replicating: primary stopped", make(S.REPLICATING, "a", a=P),
         ("status", "a", T.STOPPED), S.ABSENT, "", {}),
    Step("replicating: stopping ignored", make(S.REPLICATING, "a", a=P),
         ("status", "a", T.STOPPING), S.REPLICATING, "a", {"a": P}),
    Step("replicating: stranger ignored", make(S.REPLICATING, "a", a=P),
         ("status", "b", T.REPLICATING), S.REPLICATING, "a", {"a": P}),
    Step("replicating: undetermined stopped", make(S.REPLICATING, "a", a=P, b=U),
         ("status", "b", T.STOPPED), S.REPLICATING, "a", {"a": P}),
    Step("replicating: move", make(S.REPLICATING, "a", a=P), ("move", "b"),
         S.PREPARE, "a", {"a": P, "b": SEC}, [("add", "b", True)]),
    Step("replicating: move to itself ignored", make(S.REPLICATING, "a", a=P), ("move", "a"),
         S.REPLICATING, "a", {"a": P}),
    Step("replicating: remove", make(S.REPLICATING, "a", a=P), ("remove",),
         S.REMOVING, "a", {"a": P}, [("remove", "a")]),
    Step("replicating: add ignored", make(S.REPLICATING, "a", a=P), ("add", "b"),
         S.REPLICATING, "a", {"a": P}),
    Step("prepare: move ignored", make(S.PREPARE, "a", a=P, b=SEC), ("move", "c"),
         S.PREPARE, "a", {"a": P, "b": SEC}),
    Step("prepare: remove ignored", make(S.PREPARE, "a", a=P, b=SEC), ("remove",),
         S.PREPARE, "a", {"a": P, "b": SEC}),
    # REMOVING
    Step("removing: still replicating, ask again", make(S.REMOVING, "a", a=P),
         ("status", "a", T.REPLICATING), S.REMOVING, "a", {"a": P}, [("remove", "a")]),
    Step("removing: prepared secondary, ask", make(S.REMOVING, "a", a=P, b=SEC),
         ("status", "b", T.PREPARED), S.REMOVING, "a", {"a": P, "b": SEC}, [("remove", "b")]),
    Step("removing: stopping, wait", make(S.REMOVING, "a", a=P),
         ("status", "a", T.STOPPING), S.REMOVING, "a", {"a": P}),
    Step("removing: stopped", make(S.REMOVING, "a", a=P),
         ("status", "a", T.STOPPED), S.REMOVING, "", {}),
    # capture shutdown
    Step("shutdown: replicating primary", make(S.REPLICATING, "a", a=P), ("shutdown", "a"),
         S.ABSENT, "", {}),
    Step("shutdown: uninvolved", make(S.REPLICATING, "a", a=P), ("shutdown", "b"),
         S.REPLICATING, "a", {"a": P}),
    Step("shutdown: primary mid-commit promotes", make(S.COMMIT, "a", a=P, b=SEC),
         ("shutdown", "a"), S.COMMIT, "b", {"b": P}, [("add", "b", False)]),
    Step("shutdown: secondary mid-commit", make(S.COMMIT, "a", a=P, b=SEC), ("shutdown", "b"),
         S.COMMIT, "a", {"a": P}),
    Step("shutdown: secondary mid-prepare", make(S.PREPARE, "a", a=P, b=SEC), ("shutdown", "b"),
         S.REPLICATING, "a", {"a": P}),
    Step("shutdown: lone secondary", make(S.PREPARE, "", a=SEC), ("shutdown", "a"),
         S.ABSENT, "", {}),
    Step("shutdown: undetermined mid-commit", make(S.COMMIT, "", a=U, b=SEC), ("shutdown", "a"),
         S.COMMIT, "", {"b": SEC}),
    Step("shutdown: removing", make(S.REMOVING, "a", a=P), ("shutdown", "a"),
         S.REMOVING, "", {}),
]  # fmt: skip


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.name)
def test_transition(step: Step) -> None:
    rep = step.start
    sent = brief(apply(rep, step.event))
    assert (rep.state, rep.primary, rep.captures) == (step.state, step.primary, step.roles)
    assert sent == step.sent


def test_checkpoint_never_regresses() -> None:
    rep = make(S.REPLICATING, "a", a=P)
    for ts in (5, 9, 7, 3, 12):
        rep.handle_table_status("a", status(T.REPLICATING, ts))
    assert rep.checkpoint == Checkpoint(12, 12)


def test_two_replicating_members_is_an_error() -> None:
    rep = make(S.PREPARE, "a", a=P, b=SEC)
    with pytest.raises(MultiplePrimaryError):
        rep.handle_table_status("b", status(T.REPLICATING))


def test_removed_once_no_capture_holds_it() -> None:
    rep = make(S.REPLICATING, "a", a=P)
    rep.handle_remove_table()
    assert not rep.has_removed()
    rep.handle_table_status("a", status(T.STOPPED))
    assert rep.has_removed()
    assert rep.handle_move_table("b") == [] and rep.handle_remove_table() == []


# -- every ordering ------------------------------------------------------------


Report = tuple[str, T, int]


def run_orderings(
    start: ReplicationSet, sequences: dict[str, Sequence[Report]], *, keep_sender_order: bool
) -> Iterable[tuple[tuple[Report, ...], ReplicationSet, list[tuple]]]:
    """Feed every ordering of the reports to a copy of `start`; yields the
    ordering, the resulting set and, per report, what was sent."""
    reports = [r for seq in sequences.values() for r in seq]
    seen: set[tuple[Report, ...]] = set()
    for order in itertools.permutations(reports):
        if order in seen:
            continue
        seen.add(order)
        if keep_sender_order and any(
            [r for r in order if r[0] == capture] != list(seq) for capture, seq in sequences.items()
        ):
            continue
        rep = ReplicationSet(start.span, start.checkpoint.checkpoint_ts)
        rep.state, rep.primary, rep.captures = start.state, start.primary, dict(start.captures)
        sent = [brief(rep.handle_table_status(c, status(s, ts))) for c, s, ts in order]
        yield order, rep, sent


def promoted_before_stopped(order, sent, old: str, new: str) -> bool:
    """Whether `new` was told to write before `old` reported it stopped."""
    stopped = False
    for (capture, state, _), out in zip(order, sent, strict=True):
        if capture == old and state in (T.STOPPED, T.ABSENT):
            stopped = True
        if ("add", new, False) in out and not stopped:
            return True
    return False


MOVE = {
    "a": [("a", T.REPLICATING, 5), ("a", T.STOPPING, 6), ("a", T.STOPPED, 7)],
    "b": [("b", T.PREPARING, 0), ("b", T.PREPARED, 0), ("b", T.PREPARED, 0)],
}


@pytest.mark.parametrize("keep_sender_order", [True, False], ids=["fifo", "any-order"])
def test_move_never_promotes_before_the_old_primary_stopped(keep_sender_order: bool) -> None:
    start = make(S.REPLICATING, "a", a=P)
    assert brief(start.handle_move_table("b")) == [("add", "b", True)]
    count = 0
    for order, rep, sent in run_orderings(start, MOVE, keep_sender_order=keep_sender_order):
        count += 1
        assert not promoted_before_stopped(order, sent, "a", "b"), order
        assert sum(1 for r in rep.captures.values() if r == P) <= 1
        # Whatever came when, the new primary's own reports finish the move.
        for report in (T.PREPARED, T.REPLICATING):
            rep.handle_table_status("b", status(report, 8))
        assert (rep.state, rep.primary, rep.captures) == (S.REPLICATING, "b", {"b": P}), order
        assert rep.checkpoint.checkpoint_ts == 8
    assert count == (20 if keep_sender_order else 360)


REBUILT = {
    "a": [("a", T.STOPPING, 5), ("a", T.STOPPED, 6)],
    "b": [("b", T.PREPARED, 0), ("b", T.PREPARED, 0), ("b", T.REPLICATING, 7)],
}


def test_rebuilt_mid_move_waits_for_the_undetermined_capture() -> None:
    """A new owner finds `a` stopping and `b` prepared: whatever the order of
    later reports, `b` is told to write only after `a` stopped."""
    start = ReplicationSet(SPAN, 1, {"a": status(T.STOPPING), "b": status(T.PREPARED)})
    assert (start.state, start.captures) == (S.COMMIT, {"a": U, "b": SEC})
    # b's REPLICATING only follows a promotion, so keep each sender's order.
    for order, _, sent in run_orderings(start, REBUILT, keep_sender_order=True):
        assert not promoted_before_stopped(order, sent, "a", "b"), order
    # Without REPLICATING, any order of the rest: still never early.
    rest = {"a": REBUILT["a"], "b": REBUILT["b"][:2]}
    for order, rep, sent in run_orderings(start, rest, keep_sender_order=False):
        assert not promoted_before_stopped(order, sent, "a", "b"), order
        rep.handle_table_status("b", status(T.PREPARED))
        rep.handle_table_status("b", status(T.REPLICATING, 9))
        assert (rep.state, rep.primary) == (S.REPLICATING, "b"), order


REMOVE = {"a": [("a", T.REPLICATING, 3), ("a", T.STOPPING, 4), ("a", T.STOPPED, 5)]}


def test_remove_finishes_under_any_order() -> None:
    start = make(S.REPLICATING, "a", a=P)
    assert brief(start.handle_remove_table()) == [("remove", "a")]
    for order, rep, _ in run_orderings(start, REMOVE, keep_sender_order=False):
        assert rep.has_removed(), order


def test_shutdown_interleaved_with_a_move() -> None:
    """The old primary dies at any point of a move: the secondary is
    promoted exactly once, never while the old primary still counts."""
    events: list[tuple] = [
        ("shutdown", "a"),
        ("status", "b", T.PREPARED),
        ("status", "b", T.PREPARED),
        ("status", "a", T.STOPPING),
    ]
    for order in set(itertools.permutations(events)):
        rep = make(S.REPLICATING, "a", a=P)
        rep.handle_move_table("b")
        dead = False
        for event in order:
            out = brief(apply(rep, event))
            dead = dead or event[0] == "shutdown"
            if ("add", "b", False) in out:
                assert dead, order  # `a` never reports STOPPED here
        rep.handle_table_status("b", status(T.PREPARED))
        rep.handle_table_status("b", status(T.REPLICATING))
        assert (rep.state, rep.primary, rep.captures) == (S.REPLICATING, "b", {"b": P}), order
