"""A `Transport` through consensus: one mailbox row per recipient, so the
owner (in `tidemark serve`) and the captures (`tidemark worker`) talk across
processes and hosts with no server of their own.

- `send` appends each recipient's messages to its mailbox (read, append,
  compare-and-set, retry on a lost race);
- `recv` takes everything in this end's mailbox (read, CaS to empty, retry).

Mailboxes: `scheduler/mail/owner/<cluster>` for the owner's Scheduler of a
cluster, `scheduler/mail/capture/<capture id>` for a capture. A mailbox
keeps at most `max_messages` (the oldest are dropped): a dead recipient
cannot make it grow forever, and the protocol tolerates lost messages
(see `messages`). Messages a recipient's earlier incarnation (or an earlier
owner) left behind are fenced by the receiver, not cleaned up here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from coordinator_lib.persist.consensus import Consensus, VersionedData
from coordinator_lib.scheduler.codec import decode, encode
from coordinator_lib.scheduler.consensus_lease import DEFAULT_PREFIX
from coordinator_lib.scheduler.messages import CaptureId, Message

MAX_MESSAGES = 2_000


def owner_mailbox(cluster: str, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}mail/owner/{cluster}"


def capture_mailbox(capture_id: CaptureId, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}mail/capture/{capture_id}"


class ConsensusTransport:
    """One end: reads `inbox`, sends each message to `route(message)`."""

    def __init__(
        self,
        consensus: Consensus,
        inbox: str,
        route: Callable[[Message], str],
        *,
        max_messages: int = MAX_MESSAGES,
    ) -> None:
        self.consensus = consensus
        self.inbox = inbox
        self.route = route
        self.max_messages = max_messages
        self.sent = 0
        self.received = 0

    @staticmethod
    def for_owner(
        consensus: Consensus, cluster: str, prefix: str = DEFAULT_PREFIX
    ) -> ConsensusTransport:
        """The owner's end for one cluster's Scheduler."""
        return ConsensusTransport(
            consensus, owner_mailbox(cluster, prefix), lambda m: capture_mailbox(m.to, prefix)
        )

    @staticmethod
    def for_capture(
        consensus: Consensus, capture_id: CaptureId, cluster: str, prefix: str = DEFAULT_PREFIX
    ) -> ConsensusTransport:
        """A capture's end: replies go to its cluster's owner mailbox."""
        owner = owner_mailbox(cluster, prefix)
        return ConsensusTransport(consensus, capture_mailbox(capture_id, prefix), lambda m: owner)

    def send(self, messages: Sequence[Message]) -> None:
        by_box: dict[str, list[dict]] = {}
        for message in messages:
            by_box.setdefault(self.route(message), []).append(encode(message))
        for box, encoded in by_box.items():
            self._append(box, encoded)
            self.sent += len(encoded)

    def _append(self, box: str, encoded: list[dict]) -> None:
        while True:
            head = self.consensus.head(box)
            current = [] if head is None else json.loads(head.data)
            current.extend(encoded)
            if len(current) > self.max_messages:
                current = current[-self.max_messages :]
            seqno = None if head is None else head.seqno
            data = json.dumps(current, separators=(",", ":")).encode()
            if self.consensus.compare_and_set(box, seqno, VersionedData((seqno or 0) + 1, data)):
                return

    def recv(self) -> list[Message]:
        while True:
            head = self.consensus.head(self.inbox)
            if head is None:
                return []
            raw = json.loads(head.data)
            if not raw:
                return []
            if self.consensus.compare_and_set(
                self.inbox, head.seqno, VersionedData(head.seqno + 1, b"[]")
            ):
                self.received += len(raw)
                return [decode(m) for m in raw]
