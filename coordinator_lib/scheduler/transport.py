"""How the owner's Scheduler exchanges messages with captures: a `Transport`
(TiCDC's scheduler transport). The protocol tolerates a transport that
delays, drops, reorders or duplicates messages (see `messages`); between
processes it is `consensus_transport.ConsensusTransport` (mailboxes in
consensus).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from coordinator_lib.scheduler.messages import Message


class Transport(Protocol):
    def send(self, messages: Sequence[Message]) -> None:
        """Hand messages over for delivery to each one's `to` (best effort)."""
        ...

    def recv(self) -> list[Message]:
        """Every message delivered to this end since the last call."""
        ...


class QueueTransport:
    """A transport whose two ends are lists, for tests and the benchmark:
    whoever drives it calls `deliver` and `take_sent`."""

    def __init__(self) -> None:
        self.inbox: list[Message] = []
        self.outbox: list[Message] = []

    def send(self, messages: Sequence[Message]) -> None:
        self.outbox.extend(messages)

    def recv(self) -> list[Message]:
        inbox, self.inbox = self.inbox, []
        return inbox

    def deliver(self, messages: Sequence[Message]) -> None:
        self.inbox.extend(messages)

    def take_sent(self) -> list[Message]:
        outbox, self.outbox = self.outbox, []
        return outbox
