# SPDX-License-Identifier: Apache-2.0
"""Value types: events, status snapshots and their enums."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional, Tuple

from . import _core
from ._errors import Error, error_from_code

__all__ = ["EventType", "LostReason", "State", "Event", "Status"]


class _StrEnum(str, enum.Enum):
    def __str__(self) -> str:
        return str(self.value)


class EventType(_StrEnum):
    """What an :class:`Event` reports."""

    ACQUIRED = "acquired"
    """This node became leader (``term`` is the new fencing token)."""
    LOST = "lost"
    """This node stopped being leader (``term``, ``reason``)."""
    LEADER_CHANGED = "leader_changed"
    """The observed leader changed (``leader_id``, ``leader_addr``, ``term``)."""
    ERROR = "error"
    """A store or record problem (``code``, ``message``; see :attr:`Event.error`)."""
    CYCLE = "cycle"
    """One election cycle completed (``cycle``)."""
    TRANSFER = "transfer"
    """This leader is asked to hand the lock over and the target confirmed
    it is live (``leader_id`` names the target, ``term`` the leadership):
    stop the leader work, then call :meth:`Elector.transfer_commit`."""


class LostReason(_StrEnum):
    """Why this node stopped being leader. Compares equal to its string value.
    A reason added by a newer core than this binding knows arrives as
    :attr:`UNKNOWN`, never as an exception in the callback."""

    RELEASED = "released"
    """Released: an explicit release or an acquire-hook veto."""
    LEASE_EXPIRED = "lease_expired"
    """renew_deadline passed with no renewal even tried: the process was
    paused, suspended or starved."""
    LOST_RACE = "lost_race"
    """Another node wrote the record (a confirmed failed condition, or the
    record vanished)."""
    HOOK_FAILED = "hook_failed"
    """``on_acquire`` vetoed."""
    STOPPED = "stopped"
    """:meth:`Elector.stop`."""
    RENEW_TIMEOUT = "renew_timeout"
    """Renewals were sent but none succeeded before renew_deadline: the
    store was slow, failing or unreachable."""
    TRANSFERRED = "transferred"
    """Handed to another node (:meth:`Elector.transfer_commit`, after a
    :meth:`Elector.transfer`, ``s3lect transfer``, a follower of higher
    ``priority`` or ``max_hold``)."""
    UNKNOWN = "unknown"


class State(_StrEnum):
    """The elector's state as reported by :meth:`Elector.status`."""

    NEW = "new"
    FOLLOWER_TRANSITION = "follower_transition"
    FOLLOWER_STABLE = "follower_stable"
    LEADER = "leader"
    STOPPED = "stopped"
    BACKOFF = "backoff"
    UNKNOWN = "unknown"


_EVENT_TYPES = {
    _core.S3LECT_EVENT_ACQUIRED: EventType.ACQUIRED,
    _core.S3LECT_EVENT_LOST: EventType.LOST,
    _core.S3LECT_EVENT_LEADER_CHANGED: EventType.LEADER_CHANGED,
    _core.S3LECT_EVENT_ERROR: EventType.ERROR,
    _core.S3LECT_EVENT_CYCLE: EventType.CYCLE,
    _core.S3LECT_EVENT_TRANSFER: EventType.TRANSFER,
}
_REASONS = {
    _core.S3LECT_LOST_RELEASED: LostReason.RELEASED,
    _core.S3LECT_LOST_LEASE_EXPIRED: LostReason.LEASE_EXPIRED,
    _core.S3LECT_LOST_LOST_RACE: LostReason.LOST_RACE,
    _core.S3LECT_LOST_HOOK_FAILED: LostReason.HOOK_FAILED,
    _core.S3LECT_LOST_STOPPED: LostReason.STOPPED,
    _core.S3LECT_LOST_RENEW_TIMEOUT: LostReason.RENEW_TIMEOUT,
    _core.S3LECT_LOST_TRANSFERRED: LostReason.TRANSFERRED,
}
_STATES = {
    _core.S3LECT_STATE_NEW: State.NEW,
    _core.S3LECT_STATE_FOLLOWER_TRANSITION: State.FOLLOWER_TRANSITION,
    _core.S3LECT_STATE_FOLLOWER_STABLE: State.FOLLOWER_STABLE,
    _core.S3LECT_STATE_LEADER: State.LEADER,
    _core.S3LECT_STATE_STOPPED: State.STOPPED,
    _core.S3LECT_STATE_BACKOFF: State.BACKOFF,
}


def _wall(ms: int) -> Optional[datetime]:
    return None if ms <= 0 else datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


@dataclass(frozen=True)
class Event:
    """One event of an elector, as passed to ``on_event`` and yielded by
    :meth:`Elector.events`. Fields that do not apply to the type are 0 / "" / None."""

    type: EventType
    term: int = 0
    reason: Optional[LostReason] = None
    leader_id: str = ""
    leader_addr: str = ""
    code: int = 0
    message: str = ""
    cycle: int = 0

    @property
    def error(self) -> Optional[Error]:
        """For ERROR events: the problem as a typed :class:`s3lect.Error` instance."""
        if self.type is not EventType.ERROR:
            return None
        exc = error_from_code(self.code, self.message)
        return exc if isinstance(exc, Error) else Error(self.message, self.code)

    @classmethod
    def _from_core(cls, t: Tuple[int, int, int, str, str, int, str, int]) -> Optional["Event"]:
        etype, term, reason, leader_id, leader_addr, code, message, cycle = t
        et = _EVENT_TYPES.get(etype)
        if et is None:  # appended by a newer core: not for this version
            return None
        return cls(
            type=et,
            term=term,
            reason=_REASONS.get(reason, LostReason.UNKNOWN) if et is EventType.LOST else None,
            leader_id=leader_id,
            leader_addr=leader_addr,
            code=code,
            message=message,
            cycle=cycle,
        )


@dataclass(frozen=True)
class Status:
    """A consistent snapshot of an elector, from :meth:`Elector.status`."""

    is_leader: bool
    """True if this node held a valid lease when the snapshot was taken."""
    state: State
    term: int
    """Highest term seen or written (the fencing token while leader)."""
    server_id: str
    leader_id: str
    """The current leader's id; "" when none is known or the lock is released."""
    leader_addr: str
    etag: str
    """Etag of the lock object as last read or written ("" if none)."""
    last_updated: Optional[datetime]
    """The record's ``lastUpdated`` (UTC), None when released or never read."""
    last_seen: Optional[datetime]
    """When this node last read or wrote the record (UTC), None if never."""
    lease_remaining: float
    """Seconds of lease left while leader, else 0.0."""
    record_corrupt: bool
    last_error_code: int
    """0 if the last store operation succeeded, else a negative ``S3LECT_E*`` code."""
    last_error: str
    """Message of the last error ("" if the last operation succeeded)."""
    cycle: int
    consecutive_failures: int

    @classmethod
    def _from_core(cls, st: object) -> "Status":
        c = _core
        return cls(
            is_leader=bool(c.s3lect_status_is_leader(st)),
            state=_STATES.get(c.s3lect_status_state(st), State.UNKNOWN),
            term=c.s3lect_status_term(st),
            server_id=c.s3lect_status_server_id(st) or "",
            leader_id=c.s3lect_status_leader_id(st) or "",
            leader_addr=c.s3lect_status_leader_addr(st) or "",
            etag=c.s3lect_status_etag(st) or "",
            last_updated=_wall(c.s3lect_status_last_updated_ms(st)),
            last_seen=_wall(c.s3lect_status_last_seen_ms(st)),
            lease_remaining=max(0, c.s3lect_status_lease_remaining_ms(st)) / 1000.0,
            record_corrupt=bool(c.s3lect_status_record_corrupt(st)),
            last_error_code=c.s3lect_status_last_error(st),
            last_error=c.s3lect_status_last_error_message(st) or "",
            cycle=c.s3lect_status_cycle(st),
            consecutive_failures=c.s3lect_status_consecutive_failures(st),
        )
