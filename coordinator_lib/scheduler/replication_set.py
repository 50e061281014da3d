"""The owner's record of one task across captures: TiCDC's `ReplicationSet`
(cdc/scheduler/internal/v3/replication/replication_set.go), transition by
transition.

```
 add_table                                  (capture shutdown may jump to
 ABSENT ---> PREPARE <----------.           ABSENT or REPLICATING at once)
               |                | move_table
               v                |
             COMMIT ---> REPLICATING ---> REMOVING
                                   remove_table
```

A move is two-phase: the destination is added as SECONDARY and prepares
(hydrates at the checkpoint, writes nothing); once it is prepared the set
enters COMMIT, asks the PRIMARY to stop, and only when the primary reports
STOPPED (its writer has really stopped) promotes the secondary and tells it
to start writing. A capture whose state is unknown (found STOPPING when the
set was rebuilt) is UNDETERMINED, and nothing is promoted while one exists.

Deviations from TiCDC:

- Promotion after the primary stops also waits for UNDETERMINED captures
  (TiCDC checks them only when the secondary reports PREPARED), so a second
  writer is never started while an old one may still be stopping.
- A primary reporting STOPPING during PREPARE becomes UNDETERMINED instead
  of being forgotten, for the same reason.
- An UNDETERMINED capture reporting REPLICATING is asked to stop (TiCDC
  raises "multiple primary"); one reporting STOPPED or ABSENT is cleared in
  every state. `handle_add_table` refuses a capture that already has a role.
- A SECONDARY reporting REPLICATING while there is no primary is recorded
  as the primary (a commit ordered by a previous owner finished after the
  set was rebuilt); TiCDC raises "multiple primary" in COMMIT and ignores
  it in PREPARE, leaving the task stuck.
- Only checkpoints are kept (no per-stage statistics); they never regress.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping

from coordinator_lib.scheduler.messages import (
    AddTableRequest,
    CaptureId,
    Checkpoint,
    DispatchTableRequest,
    RemoveTableRequest,
    Span,
    TableState,
    TableStatus,
)

log = logging.getLogger(__name__)


class ReplicationSetState(enum.IntEnum):
    UNKNOWN = 0
    ABSENT = 1
    """No capture replicates or prepares the task."""
    PREPARE = 2
    """One capture prepares it; another may still replicate it."""
    COMMIT = 3
    """A secondary is prepared; the primary is being stopped or the
    secondary promoted."""
    REPLICATING = 4
    """Exactly one capture replicates it."""
    REMOVING = 5
    """Every capture must stop it."""


class Role(enum.IntEnum):
    PRIMARY = 1
    SECONDARY = 2
    UNDETERMINED = 3
    """May be replicating, stopping or stopped: we do not know."""


class ReplicationSetError(RuntimeError):
    """The set's invariants broke (TiCDC's ErrReplicationSetInconsistent)."""


class MultiplePrimaryError(ReplicationSetError):
    """Two captures claim to replicate the task."""


def _add(to: CaptureId, span: Span, is_secondary: bool, checkpoint: Checkpoint):
    return DispatchTableRequest(
        to=to, request=AddTableRequest(span=span, is_secondary=is_secondary, checkpoint=checkpoint)
    )


def _remove(to: CaptureId, span: Span) -> DispatchTableRequest:
    return DispatchTableRequest(to=to, request=RemoveTableRequest(span=span))


class ReplicationSet:
    """State machine of one task; every handler returns the messages to send."""

    __slots__ = ("captures", "checkpoint", "primary", "span", "state")

    def __init__(
        self,
        span: Span,
        checkpoint_ts: int,
        table_status: Mapping[CaptureId, TableStatus] | None = None,
    ) -> None:
        """A new set at `checkpoint_ts`, rebuilt from what captures report
        (TiCDC's NewReplicationSet, used when an owner takes over)."""
        self.span = span
        self.state = ReplicationSetState.UNKNOWN
        self.primary: CaptureId = ""
        self.captures: dict[CaptureId, Role] = {}
        self.checkpoint = Checkpoint(checkpoint_ts, checkpoint_ts)
        stopping = 0
        committed = False
        for capture_id, status in (table_status or {}).items():
            if status.span != span:
                raise ReplicationSetError(f"{span}: status of {status.span} from {capture_id}")
            self.update_checkpoint(status.checkpoint)
            if status.state == TableState.REPLICATING:
                if self.primary:
                    raise MultiplePrimaryError(
                        f"{span}: {self.primary} and {capture_id} both replicate"
                    )
                self._set_capture(capture_id, Role.SECONDARY)
                self._promote_secondary(capture_id)
            elif status.state == TableState.PREPARING:
                self._set_capture(capture_id, Role.SECONDARY)
            elif status.state == TableState.PREPARED:
                committed = True
                self._set_capture(capture_id, Role.SECONDARY)
            elif status.state == TableState.STOPPING:
                # It may be a primary still writing: wait until it stops.
                log.info("%s: capture %s found stopping while rebuilding", span, capture_id)
                self._set_capture(capture_id, Role.UNDETERMINED)
                stopping += 1
            # ABSENT and STOPPED are ignored.
        if self.primary:
            self.state = ReplicationSetState.REPLICATING
        if self.has_role(Role.SECONDARY):
            self.state = ReplicationSetState.PREPARE
        if committed:
            self.state = ReplicationSetState.COMMIT
        if not self.captures:
            self.state = ReplicationSetState.ABSENT
        if self.state == ReplicationSetState.UNKNOWN and len(self.captures) == stopping:
            self.state = ReplicationSetState.REMOVING

    def __repr__(self) -> str:
        roles = ", ".join(f"{c}={r.name}" for c, r in self.captures.items())
        return (
            f"ReplicationSet({self.span}, {self.state.name}, primary={self.primary!r}, "
            f"[{roles}], {self.checkpoint})"
        )

    # -- roles ---------------------------------------------------------------

    def has_role(self, role: Role) -> bool:
        return role in self.captures.values()

    def is_in_role(self, capture_id: CaptureId, role: Role) -> bool:
        return self.captures.get(capture_id) == role

    def get_role(self, role: Role) -> CaptureId:
        """The first capture in `role`, or "" if none."""
        for capture_id, r in self.captures.items():
            if r == role:
                return capture_id
        return ""

    def _set_capture(self, capture_id: CaptureId, role: Role) -> None:
        current = self.captures.get(capture_id)
        if current is not None and current != role:
            raise ReplicationSetError(
                f"{self.span}: cannot set {capture_id} as {role.name}, it is {current.name}"
            )
        self.captures[capture_id] = role

    def _clear_capture(self, capture_id: CaptureId, role: Role) -> None:
        current = self.captures.get(capture_id)
        if current is not None and current != role:
            raise ReplicationSetError(
                f"{self.span}: cannot clear {capture_id} as {role.name}, it is {current.name}"
            )
        self.captures.pop(capture_id, None)

    def _promote_secondary(self, capture_id: CaptureId) -> None:
        if self.primary == capture_id:
            return
        role = self.captures.get(capture_id)
        if role is not None and role != Role.SECONDARY:
            raise ReplicationSetError(
                f"{self.span}: cannot promote {capture_id}, it is {role.name}"
            )
        if self.primary:
            del self.captures[self.primary]
        self.primary = capture_id
        self.captures[capture_id] = Role.PRIMARY

    def _clear_primary(self) -> None:
        self.captures.pop(self.primary, None)
        self.primary = ""

    def _demote_primary_to_undetermined(self) -> None:
        self.captures[self.primary] = Role.UNDETERMINED
        self.primary = ""

    def _check_invariant(self, capture_id: CaptureId) -> None:
        if not self.captures and self.state in (
            ReplicationSetState.PREPARE,
            ReplicationSetState.COMMIT,
            ReplicationSetState.REPLICATING,
        ):
            raise ReplicationSetError(
                f"{self.span}: no capture in state {self.state.name} (input from {capture_id})"
            )
        role = self.captures.get(self.primary)
        if (role is None and self.primary) or (role is not None and role != Role.PRIMARY):
            raise ReplicationSetError(f"{self.span}: primary {self.primary} inconsistent")
        for other, r in self.captures.items():
            if r == Role.PRIMARY and other != self.primary:
                raise MultiplePrimaryError(
                    f"{self.span}: {other} is primary besides {self.primary}"
                )

    # -- polling -------------------------------------------------------------

    def poll(self, status: TableStatus, capture_id: CaptureId) -> list[DispatchTableRequest]:
        """Advance on one status from one capture until the state settles."""
        role = self.captures.get(capture_id)
        if role is None:
            return []
        if role == Role.UNDETERMINED and status.state == TableState.REPLICATING:
            # It may write: ask it (again) to stop; it stays undetermined.
            return [_remove(capture_id, self.span)]
        out: list[DispatchTableRequest] = []
        changed = True
        while changed:
            self._check_invariant(capture_id)
            state = self.state
            if state == ReplicationSetState.ABSENT:
                msg, changed = None, self._poll_on_absent(status, capture_id)
            elif state == ReplicationSetState.PREPARE:
                msg, changed = self._poll_on_prepare(status, capture_id)
            elif state == ReplicationSetState.COMMIT:
                msg, changed = self._poll_on_commit(status, capture_id)
            elif state == ReplicationSetState.REPLICATING:
                msg, changed = self._poll_on_replicating(status, capture_id)
            elif state == ReplicationSetState.REMOVING:
                msg, changed = self._poll_on_removing(status, capture_id)
            else:
                raise ReplicationSetError(f"{self.span}: unknown state")
            if msg is not None:
                out.append(msg)
            if changed:
                log.debug("%s: %s -> %s on %s from %s", self.span, state.name,
                          self.state.name, status.state.name, capture_id)  # fmt: skip
        return out

    def _ignore(self, status: TableStatus, capture_id: CaptureId) -> None:
        log.debug("%s: ignore %s from %s in %r", self.span, status.state.name, capture_id, self)

    def _poll_on_absent(self, status: TableStatus, capture_id: CaptureId) -> bool:
        if self._clear_stopped_undetermined(status, capture_id):
            return False
        if status.state == TableState.ABSENT and not self.is_in_role(capture_id, Role.UNDETERMINED):
            self.state = ReplicationSetState.PREPARE
            self._set_capture(capture_id, Role.SECONDARY)
            return True
        # STOPPED is ignored: a capture may have shut down unexpectedly.
        self._ignore(status, capture_id)
        return False

    def _poll_on_prepare(self, status: TableStatus, capture_id: CaptureId):
        s = status.state
        if s == TableState.ABSENT:
            if self.is_in_role(capture_id, Role.SECONDARY):
                return _add(capture_id, self.span, True, self.checkpoint), False
        elif s == TableState.PREPARING:
            if self.is_in_role(capture_id, Role.SECONDARY):
                return None, False  # preparing may take a long time
        elif s == TableState.PREPARED:
            if self.is_in_role(capture_id, Role.SECONDARY):
                self.state = ReplicationSetState.COMMIT
                return None, True
        elif s == TableState.REPLICATING:
            if self.primary == capture_id:
                self.update_checkpoint(status.checkpoint)
                return None, False
            if self.is_in_role(capture_id, Role.SECONDARY):
                return None, self._secondary_replicates(status, capture_id)
        elif s in (TableState.STOPPING, TableState.STOPPED):
            if self.primary == capture_id:
                # Deviation: a stopping primary may still write.
                if s == TableState.STOPPING:
                    self._demote_primary_to_undetermined()
                else:
                    self.update_checkpoint(status.checkpoint)
                    self._clear_primary()
                return None, False
            if self.is_in_role(capture_id, Role.SECONDARY):
                self._clear_capture(capture_id, Role.SECONDARY)
                self.state = (
                    ReplicationSetState.REPLICATING if self.primary else ReplicationSetState.ABSENT
                )
                return None, True
        if self._clear_stopped_undetermined(status, capture_id):
            return None, False
        self._ignore(status, capture_id)
        return None, False

    def _poll_on_commit(self, status: TableStatus, capture_id: CaptureId):
        s = status.state
        if s == TableState.PREPARED:
            if self.is_in_role(capture_id, Role.SECONDARY):
                if self.primary:
                    # Prepared; ask the primary to stop first.
                    return _remove(self.primary, self.span), False
                if self.has_role(Role.UNDETERMINED):
                    # Another capture may still write: never promote now.
                    return None, False
                self._promote_secondary(capture_id)
                log.info("%s: promote %s, no primary", self.span, capture_id)
            if self.primary == capture_id and not self.has_role(Role.SECONDARY):
                # Promoted: (re)send the request to start writing.
                return _add(capture_id, self.span, False, self.checkpoint), False
        elif s in (TableState.STOPPED, TableState.ABSENT):
            if self.primary == capture_id:
                self.update_checkpoint(status.checkpoint)
                self._clear_primary()
                if not self.has_role(Role.SECONDARY):
                    self.state = ReplicationSetState.ABSENT
                    return None, True
                if self.has_role(Role.UNDETERMINED):
                    # Deviation: wait; the secondary is promoted when it
                    # reports PREPARED again and nothing is undetermined.
                    return None, False
                secondary = self.get_role(Role.SECONDARY)
                self._promote_secondary(secondary)
                log.info("%s: promote %s, %s stopped", self.span, secondary, capture_id)
                return _add(secondary, self.span, False, self.checkpoint), False
            if self.is_in_role(capture_id, Role.SECONDARY):
                # Wait for the primary: a remove request was sent to it.
                self._clear_capture(capture_id, Role.SECONDARY)
                if not self.primary:
                    self.state = ReplicationSetState.ABSENT
                return None, True
            if self.is_in_role(capture_id, Role.UNDETERMINED):
                self._clear_capture(capture_id, Role.UNDETERMINED)
                return None, False
        elif s == TableState.REPLICATING:
            if self.primary == capture_id:
                self.update_checkpoint(status.checkpoint)
                if self.has_role(Role.SECONDARY):
                    # The primary has not stopped yet: ask again.
                    return _remove(capture_id, self.span), False
                # The secondary was promoted and replicates, or it shut down
                # while the primary kept replicating.
                self.state = ReplicationSetState.REPLICATING
                return None, True
            if self.is_in_role(capture_id, Role.SECONDARY):
                return None, self._secondary_replicates(status, capture_id)
            raise MultiplePrimaryError(f"{self.span}: {capture_id} replicates besides {self!r}")
        elif s == TableState.STOPPING:
            if self.primary == capture_id and self.has_role(Role.SECONDARY):
                self.update_checkpoint(status.checkpoint)
                return None, False
            if self.is_in_role(capture_id, Role.UNDETERMINED):
                return None, False
        self._ignore(status, capture_id)
        return None, False

    def _poll_on_replicating(self, status: TableStatus, capture_id: CaptureId):
        s = status.state
        if s == TableState.REPLICATING:
            if self.primary == capture_id:
                self.update_checkpoint(status.checkpoint)
                return None, False
            raise MultiplePrimaryError(f"{self.span}: {capture_id} replicates besides {self!r}")
        if s == TableState.STOPPED and self.primary == capture_id:
            self.update_checkpoint(status.checkpoint)
            self._clear_primary()
            self.state = ReplicationSetState.ABSENT
            return None, True
        if self._clear_stopped_undetermined(status, capture_id):
            return None, False
        self._ignore(status, capture_id)
        return None, False

    def _poll_on_removing(self, status: TableStatus, capture_id: CaptureId):
        s = status.state
        if s in (TableState.PREPARING, TableState.PREPARED, TableState.REPLICATING):
            return _remove(capture_id, self.span), False
        if s in (TableState.ABSENT, TableState.STOPPED):
            if self.primary == capture_id:
                self._clear_primary()
            else:
                self.captures.pop(capture_id, None)
            return None, False
        return None, False  # STOPPING: wait

    def _secondary_replicates(self, status: TableStatus, capture_id: CaptureId) -> bool:
        """A secondary already replicates: a commit ordered by an earlier
        owner finished after this set was rebuilt from its PREPARING or
        PREPARED report. It is the writer; record it as the primary."""
        if self.primary:
            raise MultiplePrimaryError(f"{self.span}: {capture_id} replicates besides {self!r}")
        self._promote_secondary(capture_id)
        self.update_checkpoint(status.checkpoint)
        self.state = ReplicationSetState.REPLICATING
        log.info("%s: secondary %s found replicating, now primary", self.span, capture_id)
        return True

    def _clear_stopped_undetermined(self, status: TableStatus, capture_id: CaptureId) -> bool:
        if status.state in (TableState.STOPPED, TableState.ABSENT) and self.is_in_role(
            capture_id, Role.UNDETERMINED
        ):
            self._clear_capture(capture_id, Role.UNDETERMINED)
            return True
        return False

    # -- events --------------------------------------------------------------

    def handle_table_status(
        self, capture_id: CaptureId, status: TableStatus
    ) -> list[DispatchTableRequest]:
        # Fast path for the steady state: the primary reports progress.
        if (
            self.state == ReplicationSetState.REPLICATING
            and status.state == TableState.REPLICATING
            and capture_id == self.primary
        ):
            self.update_checkpoint(status.checkpoint)
            return []
        return self.poll(status, capture_id)

    def handle_add_table(self, capture_id: CaptureId) -> list[DispatchTableRequest]:
        if self.state != ReplicationSetState.ABSENT or capture_id in self.captures:
            # (A capture left UNDETERMINED is not reused until it reports.)
            log.warning("%s: add table to %s ignored in %r", self.span, capture_id, self)
            return []
        self._set_capture(capture_id, Role.SECONDARY)
        return self.poll(TableStatus(self.span, TableState.ABSENT), capture_id)

    def handle_move_table(self, dest: CaptureId) -> list[DispatchTableRequest]:
        if self.has_removed():
            return []
        if self.state != ReplicationSetState.REPLICATING or self.primary == dest:
            log.info("%s: move to %s ignored in %r", self.span, dest, self)
            return []
        self.state = ReplicationSetState.PREPARE
        self._set_capture(dest, Role.SECONDARY)
        return self.poll(TableStatus(self.span, TableState.ABSENT), dest)

    def handle_remove_table(self) -> list[DispatchTableRequest]:
        if self.has_removed():
            return []
        if self.state != ReplicationSetState.REPLICATING:
            log.info("%s: remove ignored in %r", self.span, self)
            return []
        self.state = ReplicationSetState.REMOVING
        status = TableStatus(self.span, TableState.REPLICATING, self.checkpoint)
        return self.poll(status, self.primary)

    def has_removed(self) -> bool:
        """Removed: REMOVING and no capture holds it any more."""
        return self.state == ReplicationSetState.REMOVING and not self.captures

    def handle_capture_shutdown(
        self, capture_id: CaptureId
    ) -> tuple[list[DispatchTableRequest], bool]:
        """The capture is gone (its lease expired): its copy has stopped.
        Returns the messages and whether this set was affected."""
        if capture_id not in self.captures:
            return [], False
        status = TableStatus(self.span, TableState.STOPPED)
        return self.poll(status, capture_id), True

    def update_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Take reported progress; never go back."""
        current = self.checkpoint
        checkpoint_ts, resolved_ts = current.checkpoint_ts, current.resolved_ts
        grew = False
        if checkpoint.checkpoint_ts > checkpoint_ts:
            checkpoint_ts, grew = checkpoint.checkpoint_ts, True
        if checkpoint.resolved_ts > resolved_ts:
            resolved_ts, grew = checkpoint.resolved_ts, True
        if grew:
            self.checkpoint = Checkpoint(checkpoint_ts, resolved_ts)
