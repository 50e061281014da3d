"""The Agent, transition by transition (table-driven: what it asks of its
TableExecutor and what it answers, per executor state and request), its
fencing, and every ordering of incoming messages."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest

from coordinator_lib.scheduler.agent import Agent
from coordinator_lib.scheduler.memory_executor import InMemoryTableExecutor
from coordinator_lib.scheduler.messages import (
    AddTableRequest,
    AddTableResponse,
    Checkpoint,
    DispatchTableRequest,
    DispatchTableResponse,
    Heartbeat,
    HeartbeatResponse,
    Liveness,
    Message,
    RemoveTableRequest,
    RemoveTableResponse,
    TableState,
)

T = TableState
SPAN = "u1"
OWNER, REV, EPOCH = "serve", 3, 7


class Recorder:
    """A TaskWriter that only records what happened, in order."""

    def __init__(self, log: list[tuple[str, str]]) -> None:
        self.log = log

    def start(self, span: str, checkpoint: Checkpoint) -> object:
        self.log.append(("writer started", span))
        return span

    def write(self, session: object) -> Checkpoint | None:
        return None

    def stop(self, session: object) -> None:
        self.log.append(("writer stopped", str(session)))


class Harness:
    def __init__(self, **delays: int) -> None:
        self.log: list[tuple[str, str]] = []
        self.executor = InMemoryTableExecutor(writer=Recorder(self.log), **delays)
        self.agent = Agent("w1", EPOCH, self.executor)
        self.seq = 0
        self.accepted: list[int] = []
        accept = self.agent._accept

        def recording_accept(message: Message) -> bool:
            ok = accept(message)
            if ok:
                self.accepted.append(message.seq)
            return ok

        self.agent._accept = recording_accept  # type: ignore[method-assign]

    def msg(self, body: Message, **header) -> Message:
        self.seq += 1
        defaults = dict(
            sender=OWNER, to="w1", owner_revision=REV, capture_epoch=EPOCH, seq=self.seq
        )
        defaults.update(header)
        return type(body)(**defaults, **_body(body))

    def tick(self, *messages: Message) -> list[Message]:
        self.executor.advance()
        out = self.agent.tick(messages)
        for m in out:
            self.log.append(("sent", _describe(m)))
        return out

    def set_state(self, state: T) -> None:
        """Put SPAN into `state` on the executor and the agent, as if
        dispatched before."""
        if state == T.ABSENT:
            return
        self.agent.tables.clear()
        self.executor.tables.clear()
        if state in (T.PREPARED, T.REPLICATING, T.STOPPING, T.STOPPED):
            self.tick(self.msg(add(True)))
        if state in (T.REPLICATING, T.STOPPING, T.STOPPED):
            self.tick(self.msg(add(False)))
        if state == T.PREPARING:
            self.executor.prepare_ticks = 99
            self.tick(self.msg(add(True)))
            self.executor.prepare_ticks = 0
        if state in (T.STOPPING, T.STOPPED):
            self.executor.remove_table_span(SPAN)
            if state == T.STOPPING:
                table = self.executor.tables[SPAN]
                table.state, table.target, table.remaining = T.STOPPING, T.STOPPED, 99
        assert self.executor.state_of(SPAN) == state
        self.log.clear()
        self.executor.calls.clear()


def _body(message: Message) -> dict:
    header = {"sender", "to", "owner_revision", "capture_epoch", "seq"}
    return {
        name: getattr(message, name)
        for name in type(message).__dataclass_fields__
        if name not in header
    }


def add(is_secondary: bool, checkpoint_ts: int = 5) -> DispatchTableRequest:
    request = AddTableRequest(SPAN, is_secondary, Checkpoint(checkpoint_ts, checkpoint_ts))
    return DispatchTableRequest(request=request)


def remove() -> DispatchTableRequest:
    return DispatchTableRequest(request=RemoveTableRequest(SPAN))


def _describe(m: Message) -> str:
    if isinstance(m, DispatchTableResponse):
        kind = "add" if isinstance(m.response, AddTableResponse) else "remove"
        return f"{kind}:{m.response.status.state.name}"
    if isinstance(m, HeartbeatResponse):
        return "heartbeat:" + ",".join(f"{s.span}={s.state.name}" for s in m.tables)
    return type(m).__name__


# -- transitions ---------------------------------------------------------------


@dataclass
class Case:
    name: str
    state: T
    """SPAN's state on the executor before the request."""
    request: DispatchTableRequest
    calls: list[tuple[str, str]]
    """What the agent asked of the executor."""
    answers: list[str]
    """What it sent back, tick by tick (with `ticks` ticks in all)."""
    final: T
    delays: dict[str, int] = field(default_factory=dict)
    ticks: int = 1


CASES = [
    Case("prepare absent", T.ABSENT, add(True), [("prepare", SPAN)], ["add:PREPARED"],
         T.PREPARED),
    Case("prepare takes two ticks", T.ABSENT, add(True), [("prepare", SPAN)],
         ["", "", "add:PREPARED"], T.PREPARED, {"prepare_ticks": 2}, ticks=3),
    Case("prepare when prepared", T.PREPARED, add(True), [], ["add:PREPARED"], T.PREPARED),
    Case("prepare when replicating", T.REPLICATING, add(True), [], ["add:REPLICATING"],
         T.REPLICATING),
    Case("commit prepared", T.PREPARED, add(False), [("commit", SPAN)], ["add:REPLICATING"],
         T.REPLICATING),
    Case("commit takes two ticks", T.PREPARED, add(False), [("commit", SPAN)],
         ["add:PREPARED", "add:PREPARED", "add:REPLICATING"], T.REPLICATING,
         {"commit_ticks": 2}, ticks=3),
    Case("add absent as primary", T.ABSENT, add(False), [("add", SPAN)], ["add:REPLICATING"],
         T.REPLICATING),
    Case("commit when replicating", T.REPLICATING, add(False), [], ["add:REPLICATING"],
         T.REPLICATING),
    Case("add while preparing waits silently", T.PREPARING, add(True), [], [""], T.PREPARING),
    Case("add when stopping comes too late", T.STOPPING, add(False), [], ["add:STOPPING"],
         T.STOPPING),
    Case("remove replicating", T.REPLICATING, remove(), [("remove", SPAN), ("released", SPAN)],
         ["remove:STOPPED"], T.ABSENT),
    Case("remove prepared", T.PREPARED, remove(), [("remove", SPAN), ("released", SPAN)],
         ["remove:STOPPED"], T.ABSENT),
    Case("remove preparing", T.PREPARING, remove(), [("remove", SPAN), ("released", SPAN)],
         ["remove:STOPPED"], T.ABSENT),
    Case("stop takes two ticks", T.REPLICATING, remove(), [("remove", SPAN), ("released", SPAN)],
         ["remove:STOPPING", "remove:STOPPING", "remove:STOPPED"], T.ABSENT,
         {"stop_ticks": 2}, ticks=3),
    Case("remove stopping waits", T.STOPPING, remove(), [], ["remove:STOPPING"], T.STOPPING),
    Case("remove stopped releases", T.STOPPED, remove(), [("released", SPAN)],
         ["remove:STOPPED"], T.ABSENT),
    Case("remove unknown is ignored", T.ABSENT, remove(), [], [""], T.ABSENT),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_transition(case: Case) -> None:
    h = Harness()
    h.set_state(case.state)
    for name, ticks in case.delays.items():
        setattr(h.executor, name, ticks)
    answers = []
    for i in range(case.ticks):
        out = h.tick(h.msg(case.request)) if i == 0 else h.tick()
        answers.append(",".join(_describe(m) for m in out))
    assert answers == case.answers
    assert h.executor.calls == case.calls
    assert h.executor.state_of(SPAN) == case.final
    assert (SPAN in h.agent.tables) == (case.final != T.ABSENT)


def test_stopped_is_reported_only_after_the_writer_stopped() -> None:
    h = Harness(stop_ticks=3)
    h.set_state(T.REPLICATING)
    h.tick(h.msg(remove()))
    for _ in range(4):
        h.tick()
    events = [e for e in h.log if e[0] == "writer stopped" or e[1].startswith("remove:")]
    stopped_at = events.index(("writer stopped", SPAN))
    assert events[stopped_at + 1 :] == [("sent", "remove:STOPPED")]
    assert all(e == ("sent", "remove:STOPPING") for e in events[:stopped_at])


def test_refused_add_is_reported_absent_and_forgotten() -> None:
    h = Harness()
    h.executor.refuse = lambda span: True
    out = h.tick(h.msg(add(True)))
    assert [_describe(m) for m in out] == ["add:ABSENT"]
    assert SPAN not in h.agent.tables
    h.executor.refuse = None  # a late retry of the executor cannot resurrect it
    assert h.tick() == [] and h.executor.state_of(SPAN) == T.ABSENT


def test_heartbeat_reports_held_and_asked_tasks() -> None:
    h = Harness(stop_ticks=5)
    h.set_state(T.REPLICATING)
    h.tick(h.msg(remove()))  # pending remove: reported STOPPING
    out = h.tick(h.msg(Heartbeat(spans=(SPAN, "u2"), is_stopping=True)))
    assert [_describe(m) for m in out] == ["heartbeat:u1=STOPPING,u2=ABSENT", "remove:STOPPING"]
    assert isinstance(out[0], HeartbeatResponse) and out[0].liveness == Liveness.STOPPING
    assert h.agent.liveness == Liveness.STOPPING


def test_outbound_messages_carry_the_header() -> None:
    h = Harness()
    out = h.tick(h.msg(add(True)))
    assert [(m.sender, m.to, m.owner_revision, m.capture_epoch) for m in out] == [
        ("w1", OWNER, REV, EPOCH)
    ]
    later = h.tick(h.msg(Heartbeat()))
    assert later[0].seq > out[0].seq


# -- fencing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ({}, True),
        ({"owner_revision": REV - 1}, False),  # a deposed owner
        ({"owner_revision": REV, "sender": "impostor"}, False),  # same revision, other owner
        ({"capture_epoch": EPOCH - 1}, False),  # meant for an earlier incarnation
        ({"capture_epoch": EPOCH + 1}, False),
        ({"seq": 1}, False),  # not above the last accepted
        ({"owner_revision": REV + 1, "sender": "serve2", "seq": 1}, True),  # new owner
    ],
)
def test_fencing(header: dict, accepted: bool) -> None:
    h = Harness()
    h.tick(h.msg(Heartbeat(), seq=5))
    h.seq = 5
    out = h.tick(h.msg(add(True), **header))
    assert (h.executor.state_of(SPAN) == T.PREPARED) == accepted
    if accepted:
        assert out[0].to == header.get("sender", OWNER)
        assert out[0].owner_revision == header.get("owner_revision", REV)


def test_no_reply_before_an_owner_is_known() -> None:
    agent = Agent("w1", EPOCH, InMemoryTableExecutor())
    assert agent.tick([]) == []


# -- every ordering --------------------------------------------------------------


def test_one_owner_any_order_applies_an_increasing_subsequence() -> None:
    """prepare(1), commit(2), remove(3) from one owner, delivered in any
    order and any grouping into ticks: only messages newer than every one
    applied before take effect, so the task never ends up replicating after
    the remove was applied, and nothing runs twice."""
    sequences = {1: add(True), 2: add(False), 3: remove()}
    for order in itertools.permutations(sequences):
        for cuts in itertools.product((False, True), repeat=len(order) - 1):
            h = Harness()
            batch: list[Message] = []
            for i, seq in enumerate(order):
                batch.append(h.msg(sequences[seq], seq=seq))
                if i == len(order) - 1 or cuts[i]:
                    h.tick(*batch)
                    batch = []
            for _ in range(3):
                h.tick()
            applied = h.accepted
            assert applied == sorted(applied), (order, cuts)
            final = h.executor.state_of(SPAN)
            if 3 in applied:
                assert final == T.ABSENT, (order, cuts)
            elif applied == [1, 2] or applied == [2]:
                assert final == T.REPLICATING, (order, cuts)
            elif applied == [1]:
                assert final == T.PREPARED, (order, cuts)
            assert len([c for c in h.executor.calls if c[0] == "released"]) <= 1


def test_two_owners_any_order_never_obey_the_deposed_one() -> None:
    """An old owner (revision 3) and a new one (revision 4) talk to the
    capture in any order: once the new owner was heard, nothing from the old
    one is applied."""
    old = [(REV, OWNER, 10, add(False)), (REV, OWNER, 11, remove())]
    new = [(REV + 1, "serve2", 1, Heartbeat()), (REV + 1, "serve2", 2, add(True, 9))]
    for order in itertools.permutations(old + new):
        h = Harness()
        heard_new = False
        for revision, sender, seq, body in order:
            out = h.tick(h.msg(body, owner_revision=revision, sender=sender, seq=seq))
            if revision == REV + 1 and h.agent.owner_revision == REV + 1:
                heard_new = True
            if heard_new:
                assert h.agent.owner_revision == REV + 1
                assert all(m.to == "serve2" and m.owner_revision == REV + 1 for m in out)
        assert h.agent.owner_id == "serve2"
        # Whatever the old owner managed before, the task's state is one the
        # new owner can read from the next heartbeat.
        reply = h.tick(h.msg(Heartbeat(spans=(SPAN,)), owner_revision=REV + 1, sender="serve2",
                             seq=99))  # fmt: skip
        assert isinstance(reply[0], HeartbeatResponse)
        reported = {s.span: s.state for s in reply[0].tables}
        assert reported[SPAN] == h.executor.state_of(SPAN)


def test_remove_response_types() -> None:
    h = Harness()
    h.set_state(T.REPLICATING)
    out = h.tick(h.msg(remove()))
    assert isinstance(out[0], DispatchTableResponse)
    assert isinstance(out[0].response, RemoveTableResponse)
    assert out[0].response.status.checkpoint == out[0].response.checkpoint
